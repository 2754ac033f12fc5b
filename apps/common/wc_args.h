/*
 * wc_args.h — the command-line helpers of the standalone tools (wharf-perf, wharf-xfer,
 * wharf-fuse-bench): one message format for a refused flag and the parsers behind it.
 *
 * Call chain: a tool's main -> its getopt_long loop -> wc_parse_* (exit 2 on bad input) or
 * wc_arg_* (return -EINVAL, for tools that unwind to print their usage first).
 * The cluster executables (psd, train, ctl) take their flags through ps_config.h instead;
 * these helpers are for the tools whose flags are not cluster configuration.
 *
 * Every refusal is one ERROR line of the log type wharf.wc (stderr), whose message scripts
 * and tests grep:
 *   <time> ERROR wharf.wc: <tool>: <flag>: <what>, got '<s>'
 * Nothing here runs on a hot path; it runs once at start-up.
 */
#ifndef WHARF_WC_ARGS_H
#define WHARF_WC_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#define WC_ARGS_MAX_SECONDS 86400.0 /* a day: the longest --seconds any tool takes */

/* Logs "<tool>: <flag>: <what>, got '<got>'" (got NULL prints as '') and returns -EINVAL. */
int wc_arg_bad(const char *tool, const char *flag, const char *what, const char *got);

/*
 * wc_arg_bad, then exit(2): the tools' status for bad arguments. _Noreturn spelled out:
 * <stdnoreturn.h>'s noreturn macro breaks DPDK's __attribute__((noreturn)).
 */
_Noreturn void wc_bad_arg(const char *tool, const char *flag, const char *what, const char *got);

/*
 * The whole of s as an unsigned integer in [lo, hi]. base as strtoull's: 10 takes decimal
 * only, 0 also 0x hex and 0-led octal. s must start with a digit: a sign or a blank is
 * refused (strtoull would quietly wrap "-1"). On success *out is set and 0 returned; on
 * failure the refusal is printed ("expected an integer lo..hi"), -EINVAL returned and
 * *out left as it was.
 */
int wc_arg_u64(const char *tool, const char *flag, const char *s, int base, uint64_t lo,
	       uint64_t hi, uint64_t *out);
/* wc_arg_u64 returning the value; exits 2 on a refusal. */
uint64_t wc_parse_u64(const char *tool, const char *flag, const char *s, int base, uint64_t lo,
		      uint64_t hi);

/* A number of seconds in (0, WC_ARGS_MAX_SECONDS], fractions allowed; as wc_arg_u64. */
int wc_arg_seconds(const char *tool, const char *flag, const char *s, double *out);
double wc_parse_seconds(const char *tool, const char *flag, const char *s);

/*
 * "A.B.C.D/LEN" with LEN 1..32 (dpdk_net's parser, so every tool reads --ip alike) into a
 * host-order address and prefix length; as wc_arg_u64, both outputs untouched on failure.
 */
int wc_arg_ip_prefix(const char *tool, const char *flag, const char *s, uint32_t *ip,
		     uint8_t *prefix);
void wc_parse_ip_prefix(const char *tool, const char *flag, const char *s, uint32_t *ip,
			uint8_t *prefix);

/*
 * True when "-h" or "--help" comes after the first "--" of argv: a tool that hands its
 * arguments to EAL first asks this before, so `wharf-X -- --help` prints the tool's usage
 * without bringing EAL up (no hugepages, no devices). Before "--", --help is EAL's.
 */
bool wc_args_help_wanted(int argc, char **argv);

#endif /* WHARF_WC_ARGS_H */
