/*
 * wharf-xfer — pushes real volume through transport's API (tl.h) and checks that every
 * message arrives exactly once, in order, intact. The integrity tool of the testbed:
 * Linux interop over TAP and impaired switches (testbed/tests/t_tcp_*.sh).
 *
 *   wharf-xfer [EAL] -- --ip A/len --port P (--server [--echo] [--verify SEED] | --peer B)
 *              [--protocol dpdk|kernel] [--count N] [--min-size B] [--max-size B]
 *              [--seed S] [--send-file F] [--recv-file G] [--connections C]
 *              [--seconds LIMIT] [--abort-after-ms MS]
 *
 * Client: sends --count generated messages (xf_gen.c) or the bytes of --send-file in
 * messages of seeded random sizes, a window in flight per connection; with an echoing
 * peer (--echo, implied by --recv-file) it checks every echo and writes echoed bodies
 * to --recv-file at their offsets; with --abort-after-ms it resets every connection
 * (tl_abort) MS ms after they are up instead of closing them gracefully. Server: --echo
 * sends every message back from the bytes it arrived in; --verify SEED checks arrivals
 * against the generator. Both print one JSON line last: sent, received, bad, missing,
 * duplicated, bytes, seconds, gbit_per_s, aborted, ok. Exit status: 0 everything checked
 * out, 1 not, 2 bad arguments.
 *
 * Call chain: main -> xf_parse (here) -> xf_tl_create -> xf_client (xf_cli.c) |
 *   xf_server (xf_srv.c) -> tl_poll loops.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/common/wc_args.h"
#include "ps_core/ps_config.h"
#include "apps/xfer/xf.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: wharf-xfer [EAL args] -- --ip A.B.C.D/LEN --port P\n"
		"                  (--server [--echo] [--verify SEED] | --peer A.B.C.D)\n"
		"                  [--protocol dpdk|kernel] [--count N] [--min-size B] [--max-size B]\n"
		"                  [--seed S] [--send-file F] [--recv-file G] [--connections C]\n"
		"                  [--seconds LIMIT] [--abort-after-ms MS]\n"
		"  --server        listen on P\n"
		"  --echo          server: send every message back; client: the peer echoes, check\n"
		"                  every echo (implied by --recv-file)\n"
		"  --verify SEED   server: check arrivals against the generator seeded SEED (give\n"
		"                  the client's --min-size/--max-size too)\n"
		"  --peer B        client: connect to B:P\n"
		"  --count N       client: messages to send (generated); server: stop after N\n"
		"  --min-size, --max-size  body sizes, log-uniform (default 1 .. 1048576)\n"
		"  --seed S        client: generator seed (default 1)\n"
		"  --send-file F   client: send F's bytes instead, in messages of seeded sizes\n"
		"  --recv-file G   client: write echoed bodies to G at their offsets\n"
		"  --connections C client: spread the messages over C connections (default 1)\n"
		"  --seconds LIMIT give up after LIMIT seconds (default: client 600, server until\n"
		"                  SIGINT/SIGTERM or --count)\n"
		"  --abort-after-ms MS  client: MS ms after the connections are up, reset each one\n"
		"                  (tl_abort: the peer gets a RST) instead of closing it gracefully,\n"
		"                  whether or not its messages completed; the run then passes when\n"
		"                  every connection was still open to be reset and no check failed\n"
		"With --protocol kernel the EAL args are ignored; the server listens on --ip's\n"
		"address (127.0.0.1 without --ip).\n"
		"Exit status: 0 everything checked out, 1 run-time failure or a check failed,\n"
		"2 bad arguments.\n");
}

/* The refusal line and exit status every wharf tool shares (apps/common/wc_args.h). */
static _Noreturn void bad_arg(const char *flag, const char *what, const char *got)
{
	wc_bad_arg("wharf-xfer", flag, what, got);
}

/* Base 0: seeds are often written in hex (0x...). */
static uint64_t parse_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi)
{
	return wc_parse_u64("wharf-xfer", flag, s, 0, lo, hi);
}

static void parse_opt(struct xf_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'i':
		wc_parse_ip_prefix("wharf-xfer", "--ip", arg, &o->ip, &o->prefix);
		o->have_ip = true;
		break;
	case 's': o->server = true; break;
	case 'e': o->echo = true; break;
	case 'v':
		o->verify = true;
		o->verify_seed = parse_u64("--verify", arg, 0, UINT64_MAX);
		break;
	case 'P':
		if (tl_ip_parse(arg, &o->peer) != 0)
			bad_arg("--peer", "expected a dotted IPv4 address", arg);
		o->have_peer = true;
		break;
	case 'p': o->port = (uint16_t)parse_u64("--port", arg, 1, 65535); break;
	case 'r':
		if (tl_protocol_parse(arg, &o->proto) != 0)
			bad_arg("--protocol", "expected dpdk or kernel", arg);
		break;
	case 'n':
		o->count = parse_u64("--count", arg, 1, 1ull << 40);
		o->have_count = true;
		break;
	case 'm': o->min_size = (uint32_t)parse_u64("--min-size", arg, 0, TL_MSG_MAX_BODY_DEFAULT); break;
	case 'M': o->max_size = (uint32_t)parse_u64("--max-size", arg, 1, TL_MSG_MAX_BODY_DEFAULT); break;
	case 'S':
		o->seed = parse_u64("--seed", arg, 0, UINT64_MAX);
		o->have_seed = true;
		break;
	case 'f': o->send_file = arg; break;
	case 'g': o->recv_file = arg; break;
	case 'c': o->conns = (uint32_t)parse_u64("--connections", arg, 1, XF_MAX_CONNS); break;
	case 't': o->seconds = wc_parse_seconds("wharf-xfer", "--seconds", arg); break;
	case 'A': o->abort_after_ms = parse_u64("--abort-after-ms", arg, 1, 86400000); break;
	default:
		usage(stderr);
		exit(2);
	}
}

/* Flags that make sense for one role only are refused for the other, by name. */
static void check_roles(struct xf_opts *o, bool have_conns, bool have_seconds)
{
	if (o->server == o->have_peer)
		bad_arg("--server/--peer", "give exactly one of them", o->server ? "both" : "neither");
	if (o->port == 0)
		bad_arg("--port", "required", "");
	if (o->proto == TL_PROTO_DPDK && !o->have_ip)
		bad_arg("--ip", "required with --protocol dpdk", "");
	if (o->min_size > o->max_size)
		bad_arg("--min-size", "must not exceed --max-size", "");
	if (o->server) {
		if (o->send_file != NULL)
			bad_arg("--send-file", "client only", o->send_file);
		if (o->recv_file != NULL)
			bad_arg("--recv-file", "client only", o->recv_file);
		if (o->have_seed)
			bad_arg("--seed", "client only (a server takes its seed from --verify)", "");
		if (have_conns)
			bad_arg("--connections", "client only", "");
		if (o->abort_after_ms != 0)
			bad_arg("--abort-after-ms", "client only", "");
		if (!have_seconds)
			o->seconds = 0; /* until signalled or --count */
		return;
	}
	if (o->verify)
		bad_arg("--verify", "server only", "");
	if (o->send_file != NULL && o->have_count)
		bad_arg("--count", "not with --send-file (the file decides)", "");
	if (o->send_file == NULL && !o->have_count)
		bad_arg("--count/--send-file", "a client needs one of them", "neither");
	if (o->recv_file != NULL)
		o->echo = true;
	if (o->recv_file != NULL && o->send_file == NULL)
		bad_arg("--recv-file", "needs --send-file (it holds the echoed file)", o->recv_file);
}

void xf_parse(int argc, char **argv, struct xf_opts *o)
{
	static const struct option lo[] = {
		{ "ip", required_argument, NULL, 'i' },        { "server", no_argument, NULL, 's' },
		{ "echo", no_argument, NULL, 'e' },            { "verify", required_argument, NULL, 'v' },
		{ "peer", required_argument, NULL, 'P' },      { "port", required_argument, NULL, 'p' },
		{ "protocol", required_argument, NULL, 'r' },  { "count", required_argument, NULL, 'n' },
		{ "min-size", required_argument, NULL, 'm' },  { "max-size", required_argument, NULL, 'M' },
		{ "seed", required_argument, NULL, 'S' },      { "send-file", required_argument, NULL, 'f' },
		{ "recv-file", required_argument, NULL, 'g' }, { "connections", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 't' },   { "help", no_argument, NULL, 'h' },
		{ "abort-after-ms", required_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	bool have_conns = false, have_seconds = false;

	memset(o, 0, sizeof(*o));
	o->proto = TL_PROTO_DPDK;
	o->conns = 1;
	o->seed = 1;
	o->min_size = 1;
	o->max_size = 1u << 20;
	o->seconds = 600;
	o->eal_argv = argv;
	ps_split_eal(&argc, &argv, &o->eal_argc);
	opterr = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		have_conns |= c == 'c';
		have_seconds |= c == 't';
		parse_opt(o, c, optarg);
	}
	if (optind < argc)
		bad_arg("arguments", "unexpected positional argument", argv[optind]);
	check_roles(o, have_conns, have_seconds);
}

/* ---- shared by both roles ------------------------------------------------------------ */

double xf_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SIGINT/SIGTERM are blocked in main and polled here, so no handler state is static. */
bool xf_stop_requested(void)
{
	struct timespec zero = { 0, 0 };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return sigtimedwait(&set, NULL, &zero) > 0;
}

int xf_tl_create(const struct xf_opts *o, struct tl **out)
{
	struct tl_config cfg;
	const char *why = NULL;
	int rc;

	tl_config_default(&cfg);
	cfg.protocol = o->proto;
	cfg.max_conns = 2 * XF_MAX_CONNS + 16;
	/*
	 * An echoing server holds each message until its echo completes; records and send
	 * queues must outnumber what one window of a peer can put in flight, or the
	 * receive side would refuse the stream (-ENOBUFS) instead of the echo waiting.
	 */
	cfg.tx_max_msgs = 2 * XF_WINDOW_MSGS;
	cfg.tx_max_bytes = 1ull << 30;
	cfg.max_held_msgs = 1u << 18;
	cfg.rx_max_bufs = 1u << 15;
	cfg.eal_argc = o->eal_argc;
	cfg.eal_argv = o->eal_argv;
	cfg.local_ip = o->ip;
	cfg.local_prefix = o->prefix;
	rc = tl_create(&cfg, out);
	if (rc == -EINVAL && tl_config_check(&cfg, &why) != 0)
		fprintf(stderr, "wharf-xfer: transport config: %s\n", why);
	else if (rc != 0)
		fprintf(stderr, "wharf-xfer: --protocol %s: cannot create the transport: %s\n",
			tl_protocol_name(o->proto), strerror(-rc));
	return rc;
}

void xf_tally_add(struct xf_tally *sum, const struct xf_tally *t)
{
	sum->received += t->received;
	sum->ok += t->ok;
	sum->bad += t->bad;
	sum->missing += t->missing;
	sum->duplicated += t->duplicated;
	sum->bytes += t->bytes;
}

void xf_print_json(FILE *f, const char *role, const struct xf_opts *o, uint32_t conns,
		   uint64_t sent, const struct xf_tally *t, double secs, uint32_t aborted, bool ok)
{
	double s = secs > 0 ? secs : 1e-9;

	fprintf(f,
		"{\"role\":\"%s\",\"protocol\":\"%s\",\"connections\":%u,\"sent\":%" PRIu64
		",\"received\":%" PRIu64 ",\"ok_msgs\":%" PRIu64 ",\"bad\":%" PRIu64
		",\"missing\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"bytes\":%" PRIu64
		",\"seconds\":%.3f,\"gbit_per_s\":%.4f,\"aborted\":%u,\"ok\":%s}\n",
		role, tl_protocol_name(o->proto), conns, sent, t->received, t->ok, t->bad,
		t->missing, t->duplicated, t->bytes, secs, (double)t->bytes * 8 / s / 1e9, aborted,
		ok ? "true" : "false");
	fflush(f);
}

int main(int argc, char **argv)
{
	struct xf_opts o;
	struct tl *tl;
	sigset_t sigs;
	int rc;

	xf_parse(argc, argv, &o);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (xf_tl_create(&o, &tl) != 0)
		return 1;
	/* The role destroys tl itself: callbacks run inside tl_destroy need its state. */
	rc = o.server ? xf_server(&o, tl) : xf_client(&o, tl);
	return rc;
}
