/*
 * wc_args.c — the command-line helpers of the standalone tools (wc_args.h): the refusal
 * line and the integer, seconds and --ip parsers that wharf-perf, wharf-xfer and
 * wharf-fuse-bench used to carry a copy each of.
 *
 * Call chain: a tool's option loop -> wc_parse_* -> wc_arg_* -> wc_arg_bad.
 * The wc_arg_* functions never exit, so a test (and a tool that prints its usage after a
 * refusal) can see the refusal; the wc_parse_* wrappers exit 2, as the tools did.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_args.h"
#include "apps/common/wc_pvt.h"
#include "dpdk_net/dn.h"

int wc_arg_bad(const char *tool, const char *flag, const char *what, const char *got)
{
	WC_LOG(ERR, "%s: %s: %s, got '%s'", tool, flag, what, got ? got : "");
	return -EINVAL;
}

_Noreturn void wc_bad_arg(const char *tool, const char *flag, const char *what, const char *got)
{
	wc_arg_bad(tool, flag, what, got);
	exit(2);
}

int wc_arg_u64(const char *tool, const char *flag, const char *s, int base, uint64_t lo,
	       uint64_t hi, uint64_t *out)
{
	unsigned long long v = 0;
	char *end = NULL, what[96];

	/* A leading digit rules out what strtoull would skip or negate: blanks and signs. */
	if (s[0] >= '0' && s[0] <= '9') {
		errno = 0;
		v = strtoull(s, &end, base);
		if (errno == 0 && end != s && *end == '\0' && v >= lo && v <= hi) {
			*out = v;
			return 0;
		}
	}
	snprintf(what, sizeof(what), "expected an integer %" PRIu64 "..%" PRIu64, lo, hi);
	return wc_arg_bad(tool, flag, what, s);
}

uint64_t wc_parse_u64(const char *tool, const char *flag, const char *s, int base, uint64_t lo,
		      uint64_t hi)
{
	uint64_t v = 0;

	if (wc_arg_u64(tool, flag, s, base, lo, hi, &v) != 0)
		exit(2);
	return v;
}

int wc_arg_seconds(const char *tool, const char *flag, const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	/* !(v > 0) also refuses NaN; "inf" fails the upper bound. */
	if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > WC_ARGS_MAX_SECONDS)
		return wc_arg_bad(tool, flag, "expected a number of seconds in (0, 86400]", s);
	*out = v;
	return 0;
}

double wc_parse_seconds(const char *tool, const char *flag, const char *s)
{
	double v = 0;

	if (wc_arg_seconds(tool, flag, s, &v) != 0)
		exit(2);
	return v;
}

int wc_arg_ip_prefix(const char *tool, const char *flag, const char *s, uint32_t *ip,
		     uint8_t *prefix)
{
	uint32_t a;
	uint8_t len;

	/* dn_parse_ipv4 also takes a bare address as /32; a tool's --ip must say its subnet. */
	if (strchr(s, '/') == NULL || dn_parse_ipv4(s, &a, &len) != 0 || len == 0)
		return wc_arg_bad(tool, flag,
				  "expected A.B.C.D/LEN with a dotted IPv4 address and LEN 1..32", s);
	*ip = a;
	*prefix = len;
	return 0;
}

void wc_parse_ip_prefix(const char *tool, const char *flag, const char *s, uint32_t *ip,
			uint8_t *prefix)
{
	if (wc_arg_ip_prefix(tool, flag, s, ip, prefix) != 0)
		exit(2);
}

bool wc_args_help_wanted(int argc, char **argv)
{
	int i = 1;

	while (i < argc && strcmp(argv[i], "--") != 0)
		i++;
	for (i++; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}
