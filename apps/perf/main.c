/*
 * wharf-perf — message latency and throughput over transport's API (tl.h).
 *
 *   wharf-perf [EAL args] -- --ip A/len (--server | --peer B) --port P [--echo]
 *              [--protocol dpdk|kernel] [--size BYTES] [--mode pingpong|stream]
 *              [--seconds S] [--connections C] [--lcores N] [--count N] [--verify]
 *
 * Server: listens on P and, with --echo, sends every message back: up to TL_SEND_COPY_MAX
 * bytes copied (tl_send_copy), larger ones from the bytes they arrived in (held, zero
 * copy). Client: opens C connections to B:P and for S seconds runs ping-pong (one message
 * in flight per connection) or stream (a window of messages in flight per connection;
 * without --echo, messages up to TL_SEND_COPY_MAX are copied as sent and counted then,
 * larger ones counted as their sends complete), then prints one JSON line last:
 *   {"role":"client",...,"rtt_p50_us":x,"rtt_p99_us":y,"msgs_per_s":m,"gbit_per_s":g}
 * Everything goes through tl.h only, so the same code runs on either protocol; the
 * protocol-specific inputs (EAL args, --ip) are handed over in struct tl_config.
 *
 * With --lcores N (protocol dpdk) there is one transport instance per EAL lcore, the
 * connections spread over them, and the JSON line adds per-lcore counts (perf_lcores.c).
 *
 * Call chain: main -> perf_parse -> perf_server_run | perf_client_run -> tl_poll loop ->
 *   callbacks (perf_on_msg / srv_on_msg) -> tl_send; or perf_run_lcores -> the same per lcore.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_cycles.h>

#include "apps/common/wc_args.h"
#include "ps_core/ps_config.h"
#include "apps/perf/perf.h"

/* How long tl_poll may sleep: not at all when busy-polling (--poll). */
static int64_t perf_wait(const struct perf *p, int64_t us)
{
	return p->o->poll ? 0 : us;
}

/*
 * The clock of the measurement: the TSC (rte_rdtsc needs no EAL), calibrated once against
 * CLOCK_MONOTONIC. It is read per message (the RTT stamp) and per poll, where a vDSO
 * clock_gettime cost 6-10% of a 64 B stream's CPU.
 */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void perf_clock_init(struct perf_opts *o)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	uint64_t n0 = mono_ns(), t0 = rte_rdtsc(), n1, t1;

	nanosleep(&nap, NULL);
	n1 = mono_ns();
	t1 = rte_rdtsc();
	o->tsc0 = t0;
	o->ns_per_tick = t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 1.0;
}

uint64_t perf_now_ns(const struct perf_opts *o)
{
	return (uint64_t)((double)(rte_rdtsc() - o->tsc0) * o->ns_per_tick);
}

double perf_now_s(const struct perf_opts *o)
{
	return (double)perf_now_ns(o) * 1e-9;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: wharf-perf [EAL args] -- --ip A.B.C.D/LEN (--server | --peer A.B.C.D) --port P\n"
		"                  [--echo] [--protocol dpdk|kernel] [--size BYTES]\n"
		"                  [--mode pingpong|stream] [--seconds S] [--connections C]\n"
		"  --server       listen on P; with --echo send every message back\n"
		"  --peer B       run the client against B:P, print one JSON line last\n"
		"  --echo         server: echo; client in stream mode: count echoes (with RTT)\n"
		"                 instead of completed sends\n"
		"  --protocol     dpdk (TCP-lite on the DPDK port, default) or kernel (sockets)\n"
		"  --size         message body bytes, 0..67108864 (default 64)\n"
		"  --mode         pingpong (default: one message in flight per connection) or\n"
		"                 stream (a window of messages in flight)\n"
		"  --seconds      client: measuring time (default 5); server: stop after S\n"
		"                 (default: until SIGINT/SIGTERM)\n"
		"  --connections  client connections, 1..%d (default 1)\n"
		"  --poll         busy-poll (never sleep waiting for packets or events)\n"
		"  --mtu M        dpdk: port MTU 576..9000 (default 1500; both ends must agree)\n"
		"  --max-conns N  connections this instance accepts; more are refused (default 1024)\n"
		"  --nb-mbufs N   dpdk: the port's mempool size (default: sized by dpdk_net)\n"
		"  --hist FILE    client: write every RTT sample (microseconds) to FILE\n"
		"  --lcores N     dpdk: one transport instance per lcore on N EAL lcores (-l 0-1:\n"
		"                 2); connections spread over them (software steering on a\n"
		"                 one-queue port); the JSON line adds per-lcore counts\n"
		"  --count N      client: stop once every connection got N echoes (pingpong)\n"
		"  --verify       client: check every echo carries the bytes and id that were sent\n"
		"With --protocol kernel the EAL args and --ip are accepted and ignored: the server\n"
		"listens on 127.0.0.1 and the client connects to --peer (use 127.0.0.1).\n"
		"Exit status: 0 done, 1 run-time failure, 2 bad arguments.\n",
		PERF_MAX_CONNS);
}

/* The refusal line and exit status every wharf tool shares (apps/common/wc_args.h). */
static _Noreturn void bad_arg(const char *flag, const char *what, const char *got)
{
	wc_bad_arg("wharf-perf", flag, what, got);
}

static uint32_t parse_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi)
{
	return (uint32_t)wc_parse_u64("wharf-perf", flag, s, 10, lo, hi);
}

static void parse_opt(struct perf_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'i':
		wc_parse_ip_prefix("wharf-perf", "--ip", arg, &o->ip, &o->prefix);
		o->have_ip = true;
		break;
	case 's': o->server = true; break;
	case 'P':
		if (tl_ip_parse(arg, &o->peer) != 0)
			bad_arg("--peer", "expected a dotted IPv4 address", arg);
		o->have_peer = true;
		break;
	case 'p': o->port = (uint16_t)parse_u32("--port", arg, 1, 65535); break;
	case 'e': o->echo = true; break;
	case 'r':
		if (tl_protocol_parse(arg, &o->proto) != 0)
			bad_arg("--protocol", "expected dpdk or kernel", arg);
		break;
	case 'z': o->size = parse_u32("--size", arg, 0, TL_MSG_MAX_BODY_DEFAULT); break;
	case 'm':
		if (strcmp(arg, "pingpong") == 0)
			o->mode = PERF_PINGPONG;
		else if (strcmp(arg, "stream") == 0)
			o->mode = PERF_STREAM;
		else
			bad_arg("--mode", "expected pingpong or stream", arg);
		break;
	case 't': o->seconds = wc_parse_seconds("wharf-perf", "--seconds", arg); break;
	case 'c': o->conns = parse_u32("--connections", arg, 1, PERF_MAX_CONNS); break;
	case 'B': o->poll = true; break;
	case 'M': o->mtu = parse_u32("--mtu", arg, 576, 9000); break;
	case 'X': o->max_conns = parse_u32("--max-conns", arg, 1, 1u << 20); break;
	case 'N': o->nb_mbufs = parse_u32("--nb-mbufs", arg, 1024, 1u << 24); break;
	case 'H': o->hist = arg; break;
	case 'L': o->lcores = parse_u32("--lcores", arg, 1, PERF_MAX_LCORES); break;
	case 'n': o->count = parse_u32("--count", arg, 1, 1000000000); break;
	case 'V': o->verify = true; break;
	default:
		usage(stderr);
		exit(2);
	}
}

/* Splits "[EAL args] -- [app args]" and parses the app args; exits 2 on any error. */
static void perf_parse(int argc, char **argv, struct perf_opts *o)
{
	static const struct option lo[] = {
		{ "ip", required_argument, NULL, 'i' },     { "server", no_argument, NULL, 's' },
		{ "peer", required_argument, NULL, 'P' },   { "port", required_argument, NULL, 'p' },
		{ "echo", no_argument, NULL, 'e' },         { "protocol", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'z' },   { "mode", required_argument, NULL, 'm' },
		{ "seconds", required_argument, NULL, 't' }, { "connections", required_argument, NULL, 'c' },
		{ "poll", no_argument, NULL, 'B' },         { "hist", required_argument, NULL, 'H' },
		{ "mtu", required_argument, NULL, 'M' },    { "lcores", required_argument, NULL, 'L' },
		{ "count", required_argument, NULL, 'n' },  { "verify", no_argument, NULL, 'V' },
		{ "max-conns", required_argument, NULL, 'X' }, { "nb-mbufs", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	int c;
	bool have_seconds = false;

	memset(o, 0, sizeof(*o));
	o->proto = TL_PROTO_DPDK;
	o->size = 64;
	o->conns = 1;
	o->lcores = 1;
	o->seconds = 5;
	o->eal_argv = argv;
	ps_split_eal(&argc, &argv, &o->eal_argc);
	opterr = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		have_seconds |= c == 't';
		parse_opt(o, c, optarg);
	}
	if (optind < argc)
		bad_arg("arguments", "unexpected positional argument", argv[optind]);
	if (o->server == o->have_peer)
		bad_arg("--server/--peer", "give exactly one of them", o->server ? "both" : "neither");
	if (o->port == 0)
		bad_arg("--port", "required", "");
	if (o->proto == TL_PROTO_DPDK && !o->have_ip)
		bad_arg("--ip", "required with --protocol dpdk", "");
	if (o->server && !have_seconds)
		o->seconds = 0; /* until signalled */
	if (o->lcores > 1 && o->proto != TL_PROTO_DPDK)
		bad_arg("--lcores", "more than one lcore needs --protocol dpdk", "");
	if ((o->count > 0 || o->verify) && !o->server && o->mode == PERF_STREAM && !o->echo)
		bad_arg("--count/--verify", "need echoes: pingpong, or stream with --echo", "");
}

/* ---- shared -------------------------------------------------------------------------- */

/* backend_arg: the dpdk_net lcore of this instance, or NULL for a standalone one. */
int perf_tl_create(const struct perf_opts *o, void *backend_arg, struct tl **tl)
{
	struct tl_config cfg;
	const char *why = NULL;
	int rc;

	tl_config_default(&cfg);
	cfg.protocol = o->proto;
	cfg.max_conns = 2 * PERF_MAX_CONNS + 16;
	/*
	 * An echoing server holds each message until its echo is sent, so records must
	 * outnumber what the send queues may hold: a full queue then drops an echo
	 * (counted) instead of the receive side refusing the stream.
	 */
	cfg.tx_max_msgs = 4096;
	cfg.tx_max_bytes = 1ull << 30;
	cfg.max_held_msgs = 1u << 20;
	cfg.rx_max_bufs = 1u << 15;
	cfg.backend_arg = backend_arg;
	cfg.eal_argc = backend_arg != NULL ? 0 : o->eal_argc;
	cfg.eal_argv = o->eal_argv;
	cfg.local_ip = o->ip;
	cfg.local_prefix = o->prefix;
	cfg.mtu = (uint16_t)o->mtu;
	cfg.nb_mbufs = o->nb_mbufs;
	if (o->max_conns != 0)
		cfg.max_conns = o->max_conns;
	rc = tl_create(&cfg, tl);
	if (rc == -EINVAL && tl_config_check(&cfg, &why) != 0)
		fprintf(stderr, "wharf-perf: transport config: %s\n", why);
	else if (rc == -EPROTONOSUPPORT)
		fprintf(stderr, "wharf-perf: --protocol %s: this build has no %s transport backend "
				"yet; use --protocol kernel\n", tl_protocol_name(o->proto),
			tl_protocol_name(o->proto));
	else if (rc != 0)
		fprintf(stderr, "wharf-perf: cannot create the %s transport: %s\n",
			tl_protocol_name(o->proto), strerror(-rc));
	return rc;
}

/*
 * SIGINT/SIGTERM are blocked and polled, so no handler state lives in a static. Only the
 * instance holding sigs polls them (or --seconds, past t0); it publishes the stop.
 */
static bool perf_stopping(struct perf *p, double t0, double seconds)
{
	struct timespec zero = { 0, 0 };

	if (p->sigs != NULL && (sigtimedwait(p->sigs, NULL, &zero) > 0 ||
				(seconds > 0 && perf_now_s(p->o) - t0 >= seconds)))
		atomic_store_explicit(p->stop, 1, memory_order_relaxed); /* a flag, orders nothing */
	return atomic_load_explicit(p->stop, memory_order_relaxed) != 0;
}

/* ---- server -------------------------------------------------------------------------- */

static void srv_echo_done(void *arg, int status)
{
	(void)status;
	tl_msg_release(arg);
}

static void srv_on_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct perf *p = tl_conn_ctx(c);
	struct tl_msg *held;

	p->msgs++;
	p->bytes += m->hdr.body_len + TL_MSG_HDR_LEN;
	if (!p->o->echo)
		return;
	/* A small message is copied out at once; a larger one is echoed from the bytes as
	 * they arrived, held until the send completes. */
	if (m->hdr.body_len <= TL_SEND_COPY_MAX) {
		if (tl_send_copy(c, &m->hdr, m->iov, m->iovcnt) != 0)
			p->dropped++;
		return;
	}
	held = tl_msg_hold(m);
	if (tl_send(c, &m->hdr, m->iov, m->iovcnt, srv_echo_done, held) != 0) {
		tl_msg_release(held);
		p->dropped++;
	}
}

static void srv_on_closed(struct tl_conn *c, int reason)
{
	struct perf *p = tl_conn_ctx(c);

	/* A client that exits with echoes still in flight resets: routine, not an error. */
	if (reason == -ECONNRESET)
		p->resets++;
	else if (reason != 0 && reason != -ECONNABORTED) {
		p->errors++;
		fprintf(stderr, "wharf-perf: server connection closed: %s (%s)\n", strerror(-reason),
			tl_conn_why(c));
	}
}

static const struct tl_conn_ops srv_ops = { NULL, srv_on_msg, srv_on_closed };

static void srv_accepted(struct tl_listener *l, struct tl_conn *c)
{
	struct perf *p = tl_listener_ctx(l);

	(void)c;
	p->accepted++;
}

int perf_server_run(struct perf *p)
{
	const struct perf_opts *o = p->o;
	uint32_t ip = o->proto == TL_PROTO_KERNEL ? 0x7f000001u : o->ip;
	struct tl_listener *l;
	double t0 = perf_now_s(p->o), next_check = t0;
	int rc;

	rc = tl_listen(p->tl, ip, o->port, &srv_ops, srv_accepted, p, &l);
	if (rc != 0) {
		fprintf(stderr, "wharf-perf: --port %u: cannot listen: %s\n", o->port, strerror(-rc));
		return 1;
	}
	fprintf(stderr, "wharf-perf: %s server on port %u%s\n", tl_protocol_name(o->proto),
		tl_listener_port(l), o->echo ? ", echoing" : "");
	for (;;) {
		rc = tl_poll(p->tl, perf_wait(p, 100000));
		if (rc < 0) {
			fprintf(stderr, "wharf-perf: poll: %s\n", strerror(-rc));
			return 1;
		}
		if (perf_now_s(p->o) >= next_check) {
			next_check = perf_now_s(p->o) + 0.1;
			if (perf_stopping(p, t0, o->seconds))
				break;
		}
	}
	return 0;
}

void perf_server_report(const struct perf *p, const char *extra)
{
	printf("{\"role\":\"server\",\"protocol\":\"%s\",\"msgs\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"echo_dropped\":%" PRIu64 ",\"resets\":%" PRIu64 ",\"errors\":%" PRIu64 "%s}\n",
	       tl_protocol_name(p->o->proto), p->msgs, p->bytes, p->dropped, p->resets, p->errors,
	       extra);
}

/* ---- client -------------------------------------------------------------------------- */

static void perf_fill(struct perf_conn *pc);

static void rtt_add(struct perf *p, uint32_t ns)
{
	uint64_t j;

	if (p->nrtt < p->rtt_cap) {
		p->rtt_ns[p->nrtt++] = ns;
		return;
	}
	/* Reservoir sampling keeps the percentiles fair over long runs. */
	p->rng = p->rng * 6364136223846793005ull + 1442695040888963407ull;
	j = (p->rng >> 11) % ++p->nrtt;
	if (j < p->rtt_cap)
		p->rtt_ns[j] = ns;
}

static void cli_count(struct perf *p, uint64_t sent_ns)
{
	if (!p->counting)
		return;
	p->msgs++;
	p->bytes += p->o->size + TL_MSG_HDR_LEN;
	if (sent_ns != 0)
		rtt_add(p, (uint32_t)(perf_now_ns(p->o) - sent_ns));
}

static void cli_done(void *arg, int status)
{
	struct perf_conn *pc = arg;
	struct perf *p = pc->p;

	if (status != 0) {
		p->errors++;
		return;
	}
	/* Stream without echo: a completed send frees its slot in the window. */
	if (p->o->mode == PERF_STREAM && !p->o->echo) {
		pc->inflight--;
		cli_count(p, 0);
		perf_fill(pc);
	}
}

static void perf_fill(struct perf_conn *pc)
{
	struct perf *p = pc->p;
	struct tl_iov v = { p->payload, p->o->size };
	struct tl_msg_hdr h = { .type = PERF_TYPE };
	uint32_t n;

	/*
	 * A stream of small messages nobody echoes is written as a socket is: each copied as
	 * it is sent, with nothing to complete, and counted then; the transport's send limits
	 * (-ENOBUFS) pace it, and every poll round tops it up (at most a window per round).
	 */
	if (p->copy) {
		for (n = 0; n < p->window && p->running && pc->up == 1; n++) {
			if (tl_send_copy(pc->c, &h, &v, p->o->size > 0) != 0)
				break;
			cli_count(p, 0);
		}
		return;
	}

	/* The echo brings the send time back: RTT without a lookup. A stream without echoes
	 * measures no RTT, and skips the clock read per message. */
	bool stamp = p->o->mode == PERF_PINGPONG || p->o->echo;

	while (p->running && pc->up == 1 && pc->inflight < p->window &&
	       (p->o->count == 0 || pc->echoed + pc->inflight < p->o->count)) {
		h.req_id = stamp ? perf_now_ns(p->o) : 0;
		if (tl_send(pc->c, &h, &v, p->o->size > 0, cli_done, pc) != 0)
			break;
		pc->last_id = h.req_id;
		pc->inflight++;
	}
}

/* --verify: the echo carries the body sent (the shared payload) and, in ping-pong, the id
 * of the one message in flight. */
static bool cli_intact(const struct perf_conn *pc, const struct tl_msg_view *m)
{
	const struct perf *p = pc->p;
	uint32_t off = 0;

	if (m->hdr.body_len != p->o->size || (p->o->mode == PERF_PINGPONG && m->hdr.req_id != pc->last_id))
		return false;
	for (uint32_t i = 0; i < m->iovcnt; i++) {
		if (off + m->iov[i].len > p->o->size ||
		    memcmp(m->iov[i].base, p->payload + off, m->iov[i].len) != 0)
			return false;
		off += m->iov[i].len;
	}
	return off == p->o->size;
}

static void cli_on_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct perf_conn *pc = tl_conn_ctx(c);

	if (m->hdr.type != PERF_TYPE) {
		pc->p->errors++;
		return;
	}
	if (pc->p->o->mode == PERF_STREAM && !pc->p->o->echo)
		return;
	if (pc->p->o->verify && !cli_intact(pc, m))
		pc->p->corrupt++;
	pc->inflight--;
	pc->echoed++;
	pc->p->finished += pc->echoed == pc->p->o->count;
	cli_count(pc->p, m->hdr.req_id);
	perf_fill(pc);
}

static void cli_on_connected(struct tl_conn *c, int status)
{
	struct perf_conn *pc = tl_conn_ctx(c);

	pc->up = status == 0 ? 1 : -1;
	pc->status = status;
	if (status != 0)
		pc->c = NULL;
}

static void cli_on_closed(struct tl_conn *c, int reason)
{
	struct perf_conn *pc = tl_conn_ctx(c);

	pc->up = -1;
	pc->c = NULL;
	if (pc->p->running) {
		pc->p->errors++;
		fprintf(stderr, "wharf-perf: connection closed during the run: %s (%s)\n",
			strerror(reason < 0 ? -reason : ECONNRESET), tl_conn_why(c));
	}
}

static const struct tl_conn_ops cli_ops = { cli_on_connected, cli_on_msg, cli_on_closed };

/* Opens every connection, retrying refused ones for a few seconds (server starting). */
static int perf_connect_all(struct perf *p)
{
	const struct perf_opts *o = p->o;
	double deadline = perf_now_s(p->o) + 5.0;
	uint32_t i, up;
	int rc;

	for (;;) {
		for (i = 0, up = 0; i < p->nconns; i++) {
			struct perf_conn *pc = &p->pc[i];
			if (pc->up == 1) {
				up++;
			} else if (pc->c == NULL) {
				pc->up = 0;
				rc = tl_connect(p->tl, o->peer, o->port, &cli_ops, pc, &pc->c);
				if (rc != 0)
					pc->status = rc;
			}
		}
		if (up == p->nconns)
			return 0;
		if (perf_now_s(p->o) > deadline)
			break;
		tl_poll(p->tl, perf_wait(p, 50000));
	}
	for (i = 0; i + 1 < p->nconns && p->pc[i].up == 1; i++)
		;
	rc = p->pc[i].status;
	fprintf(stderr, "wharf-perf: --peer: cannot connect to port %u: %s\n", o->port,
		strerror(rc < 0 ? -rc : ETIMEDOUT));
	return -1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void perf_report(struct perf *p, double secs, const char *extra)
{
	const struct perf_opts *o = p->o;
	uint64_t n = p->nrtt < p->rtt_cap ? p->nrtt : p->rtt_cap;
	char p50[32] = "null", p99[32] = "null";

	if (n > 0) {
		qsort(p->rtt_ns, n, sizeof(*p->rtt_ns), cmp_u32);
		snprintf(p50, sizeof(p50), "%.2f", p->rtt_ns[(n - 1) / 2] / 1e3);
		snprintf(p99, sizeof(p99), "%.2f", p->rtt_ns[(n - 1) * 99 / 100] / 1e3);
	}
	if (o->hist != NULL) {
		FILE *f = fopen(o->hist, "w");
		if (f == NULL) {
			fprintf(stderr, "wharf-perf: --hist %s: %s\n", o->hist, strerror(errno));
		} else {
			for (uint64_t i = 0; i < n; i++)
				fprintf(f, "%.2f\n", p->rtt_ns[i] / 1e3);
			fclose(f);
		}
	}
	printf("{\"role\":\"client\",\"protocol\":\"%s\",\"mode\":\"%s\",\"size\":%u,"
	       "\"connections\":%u,\"seconds\":%.3f,\"msgs\":%" PRIu64 ",\"errors\":%" PRIu64
	       ",\"rtt_p50_us\":%s,\"rtt_p99_us\":%s,\"msgs_per_s\":%.1f,\"gbit_per_s\":%.4f%s}\n",
	       tl_protocol_name(o->proto), o->mode == PERF_PINGPONG ? "pingpong" : "stream", o->size,
	       o->conns, secs, p->msgs, p->errors, p50, p99, p->msgs / secs,
	       (double)p->bytes * 8 / secs / 1e9, extra);
}

/* Waits (bounded) for replies still in flight so the close is orderly, not a reset. */
void perf_drain(struct perf *p)
{
	double deadline = perf_now_s(p->o) + 2.0;
	uint32_t i, busy = 1;

	while (busy > 0 && perf_now_s(p->o) < deadline) {
		for (i = 0, busy = 0; i < p->nconns; i++)
			busy += p->pc[i].up == 1 && p->pc[i].inflight > 0;
		if (busy > 0 && tl_poll(p->tl, perf_wait(p, 10000)) < 0)
			return;
	}
}

/* Allocates the client's state: this instance's connections, payload, RTT samples. */
static int perf_client_alloc(struct perf *p)
{
	const struct perf_opts *o = p->o;

	p->pc = calloc(p->nconns ? p->nconns : 1, sizeof(*p->pc));
	/* Memory the backend can send from without copying (DPDK memory on protocol=dpdk). */
	p->payload = tl_buf_alloc(p->tl, o->size ? o->size : 1);
	if (p->rtt_cap == 0)
		p->rtt_cap = PERF_RTT_CAP;
	p->rtt_ns = malloc(p->rtt_cap * sizeof(*p->rtt_ns));
	if (p->pc == NULL || p->payload == NULL || p->rtt_ns == NULL) {
		fprintf(stderr, "wharf-perf: out of memory\n");
		return -ENOMEM;
	}
	/* A pattern that differs byte to byte, so --verify sees shifted or mixed-up bytes. */
	for (uint32_t i = 0; i < o->size; i++)
		p->payload[i] = o->verify ? (uint8_t)(i * 131u + (i >> 8) + 7u) : 0x5a;
	for (uint32_t i = 0; i < p->nconns; i++)
		p->pc[i].p = p;
	p->window = 1;
	if (o->mode == PERF_STREAM)
		p->window = (uint32_t)(PERF_STREAM_BYTES / ((uint64_t)o->size + TL_MSG_HDR_LEN)) + 1;
	if (p->window > 1024)
		p->window = 1024;
	p->copy = o->mode == PERF_STREAM && !o->echo && o->size <= TL_SEND_COPY_MAX;
	return 0;
}

/* True once every connection has its --count echoes. */
static bool perf_counted(const struct perf *p)
{
	return p->o->count > 0 && p->finished == p->nconns;
}

int perf_client_run(struct perf *p)
{
	const struct perf_opts *o = p->o;
	double t0, t1, next_check;
	uint32_t i;
	int rc;

	if (perf_client_alloc(p) != 0 || perf_connect_all(p) != 0)
		return 1;
	p->running = p->counting = true;
	t0 = next_check = t1 = perf_now_s(p->o);
	for (i = 0; i < p->nconns; i++)
		perf_fill(&p->pc[i]);
	for (;;) {
		rc = tl_poll(p->tl, perf_wait(p, 100000));
		if (rc < 0) {
			fprintf(stderr, "wharf-perf: poll: %s\n", strerror(-rc));
			return 1;
		}
		t1 = perf_now_s(p->o);
		if (t1 - t0 >= o->seconds || perf_counted(p))
			break;
		for (i = 0; p->copy && i < p->nconns; i++)
			perf_fill(&p->pc[i]);
		if (t1 >= next_check) {
			next_check = t1 + 0.1;
			if (perf_stopping(p, t0, 0))
				break;
		}
	}
	p->running = p->counting = false;
	p->secs = t1 - t0;
	if (o->count > 0 && !perf_counted(p)) {
		p->errors++;
		fprintf(stderr, "wharf-perf: --count %u: not every connection got its echoes in %.1f s\n",
			o->count, p->secs);
	}
	return 0;
}

void perf_free(struct perf *p, bool keep_rtt)
{
	/* The order of the original teardown: closed callbacks in tl_destroy still use pc. */
	if (p->tl != NULL)
		tl_buf_free(p->tl, p->payload);
	p->payload = NULL;
	tl_destroy(p->tl);
	p->tl = NULL;
	free(p->pc);
	p->pc = NULL;
	if (!keep_rtt) {
		free(p->rtt_ns);
		p->rtt_ns = NULL;
	}
}

/* With --verify, corrupt echoes count as errors and the JSON line says how many. */
void perf_client_report(struct perf *p)
{
	char extra[64];

	p->errors += p->corrupt;
	snprintf(extra, sizeof(extra), ",\"corrupt\":%" PRIu64, p->corrupt);
	perf_report(p, p->secs, p->o->verify ? extra : "");
}

int main(int argc, char **argv)
{
	struct perf_opts o;
	struct perf p;
	sigset_t sigs;
	_Atomic int stop = 0;
	int rc;

	perf_parse(argc, argv, &o);
	perf_clock_init(&o);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (o.lcores > 1)
		return perf_run_lcores(&o, &sigs);
	memset(&p, 0, sizeof(p));
	p.o = &o;
	p.rng = 0x9e3779b97f4a7c15ull;
	p.sigs = &sigs;
	p.stop = &stop;
	p.nconns = o.server ? 0 : o.conns;
	if (perf_tl_create(&o, NULL, &p.tl) != 0)
		return 1;
	if (o.server) {
		rc = perf_server_run(&p);
		if (rc == 0)
			perf_server_report(&p, "");
	} else {
		rc = perf_client_run(&p);
		if (rc == 0) {
			perf_client_report(&p);
			perf_drain(&p);
			rc = p.errors > 0 ? 1 : 0;
		}
	}
	perf_free(&p, false);
	return rc;
}
