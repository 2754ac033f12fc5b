/*
 * net.c — wharf-fuse-bench's network mode: Send/Recv fusion measured and checked over a
 * real connection, through fuse's transport glue (fz_net/fz_conn) on either protocol.
 *
 *   wharf-fuse-bench [EAL args] -- (--server | --peer B) [--ip A/LEN] [--port P]
 *       [--protocol dpdk|kernel] [--mode bench|verify] [--steps N] [--rounds R]
 *       [--echoes K] [--seed S] [--seconds S] [--poll]
 *
 * Server: listens on P with fusion off and on P+1 with fusion on. It checks every
 * tensor it receives (request ids consecutive per connection, body bytes and length as
 * the client made them), answers each end-of-step marker with one acknowledgement that
 * carries its counts, and echoes echo requests.
 * Client, --mode bench (default): one connection to each port. For a step of 1000
 * tensors of 64 B and a step of 1000 tensors of 16 B..4 KiB (log-uniform), in R rounds
 * alternating off/on: N steps each (a step = every tensor sent, a marker, a flush, then
 * wait for the server's acknowledgement). Then K single-message round trips (64 B, wire
 * idle, alternating off/on). Prints one JSON object on one line (keys in fb_report).
 * Client, --mode verify: fusion on; N steps of a random mix of 1 B..4 KiB tensors with
 * large ones (up to 60 KiB, sent alone) interleaved; every step acknowledged, counts
 * compared; prints one JSON line; exit status 0 only if all arrived intact and in order.
 *
 * Call chain: fb_net_main -> fb_server | fb_client -> fz_net_poll loop -> callbacks
 *   (fb_srv_msg / fb_cli_msg) -> fz_conn_send / fz_conn_flush.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_ethdev.h>

#include "apps/fuse-bench/fb.h"
#include "fuse/fz.h"
#include "apps/common/wc_args.h"
#include "ps_core/ps_config.h"
#include "transport/tl.h"

#define FB_T_TENSOR 210u  /* ps_core-range types nobody else interprets */
#define FB_T_STEP   211u  /* end of step: key_count = tensors sent so far (low 32 bits) */
#define FB_T_ACK    212u  /* reply: req_id = step, key_count = tensors seen, dim = bad */
#define FB_T_ECHO   213u
#define FB_TENSORS  1000u
#define FB_PAT      (64u << 10)
#define FB_LARGE    60000u
#define FB_WAIT_S   10.0  /* longest wait for any one reply */

struct fb_opts {
	bool server, have_peer, have_ip, poll, verify;
	uint32_t ip, peer, steps, rounds, echoes, seed;
	uint8_t prefix;
	uint16_t port;
	enum tl_protocol proto;
	double seconds;
	int eal_argc;
	char **eal_argv;
};

struct fb;

/* One client connection (fusion off or on). */
struct fb_link {
	struct fb *b;
	struct fz_conn *fc;
	const char *name;
	int up;                     /* 1 connected, -1 failed or closed */
	uint64_t next_req;          /* tensors' request ids, consecutive */
	uint64_t acked, ack_seen, ack_bad;
	uint64_t echoed;
};

struct fb {
	const struct fb_opts *o;
	struct tl *tl;
	struct fz_net *net;
	struct fb_link link[2];     /* [0] off, [1] on */
	uint8_t *pat;
	struct fz_msg step_msgs[FB_TENSORS]; /* a step's sends, built before the call */
	struct tl_iov step_iov[FB_TENSORS];
	uint64_t done_ok, errors;
	bool running;               /* a close now is a failure, not our teardown */
};

/* Server state per accepted connection. */
struct fb_srv_conn {
	struct fb *b;
	uint64_t next_req, got, bad;
};

struct fb_case {
	double steps_per_s;         /* best round */
	double frames, packets, bytes; /* per step, all rounds */
	uint64_t steps;
	bool have_packets;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The body of tensor req: a window of the pattern both sides compute the same way. */
static const uint8_t *fb_body(const struct fb *b, uint64_t req)
{
	return b->pat + (req * 37u) % 251u;
}

static int fb_pat_create(struct fb *b)
{
	uint32_t i;

	b->pat = malloc(FB_PAT + 256);
	if (!b->pat)
		return -ENOMEM;
	for (i = 0; i < FB_PAT + 256; i++)
		b->pat[i] = (uint8_t)(i * 131u + (i >> 8) * 7u + 3u);
	return 0;
}

static int64_t fb_wait(const struct fb *b, int64_t us)
{
	return b->o->poll ? 0 : us;
}

/* ---- options ------------------------------------------------------------------------- */

static void fb_usage(FILE *f)
{
	fprintf(f,
		"usage: wharf-fuse-bench [EAL args] -- (--server | --peer B) [--ip A.B.C.D/LEN]\n"
		"         [--port P] [--protocol dpdk|kernel] [--mode bench|verify] [--steps N]\n"
		"         [--rounds R] [--echoes K] [--seed S] [--seconds S] [--poll]\n"
		"  --server     listen on P (fusion off) and P+1 (fusion on); check and acknowledge\n"
		"  --peer B     client against B; bench: JSON object, verify: JSON line + status\n"
		"  --ip         this node's address (required with --protocol dpdk)\n"
		"  --port       default 7300; --protocol default dpdk\n"
		"  --steps      steps per case and round (bench, default 100) or in all (verify,\n"
		"               default 300); --rounds default 3; --echoes default 2000\n"
		"  --seconds    server: stop after S (default: at SIGINT/SIGTERM)\n"
		"  --poll       busy-poll instead of sleeping while idle\n"
		"With --protocol kernel, EAL args and --ip are ignored; use 127.0.0.1.\n");
}

/* The refusal line every wharf tool shares (apps/common/wc_args.h); fb_net_main exits 2. */
static int fb_bad(const char *flag, const char *what, const char *got)
{
	return wc_arg_bad("wharf-fuse-bench", flag, what, got);
}

static int fb_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	int rc = wc_arg_u64("wharf-fuse-bench", flag, s, 10, lo, hi, &v);

	if (rc == 0)
		*out = (uint32_t)v;
	return rc;
}

static int fb_ip_prefix(struct fb_opts *o, const char *s)
{
	char buf[32], *slash;
	uint32_t len;

	if (strlen(s) >= sizeof(buf))
		return fb_bad("--ip", "expected A.B.C.D/LEN", s);
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (!slash)
		return fb_bad("--ip", "expected A.B.C.D/LEN", s);
	*slash = '\0';
	if (tl_ip_parse(buf, &o->ip) != 0 || fb_u32("--ip", slash + 1, 1, 32, &len) != 0)
		return fb_bad("--ip", "expected A.B.C.D/LEN", s);
	o->prefix = (uint8_t)len;
	o->have_ip = true;
	return 0;
}

static int fb_opt(struct fb_opts *o, int c, const char *arg)
{
	uint32_t v;

	switch (c) {
	case 's': o->server = true; return 0;
	case 'P':
		o->have_peer = true;
		return tl_ip_parse(arg, &o->peer) ? fb_bad("--peer", "expected A.B.C.D", arg) : 0;
	case 'i': return fb_ip_prefix(o, arg);
	case 'p':
		if (fb_u32("--port", arg, 1, 65534, &v))
			return -EINVAL;
		o->port = (uint16_t)v;
		return 0;
	case 'r':
		return tl_protocol_parse(arg, &o->proto) ? fb_bad("--protocol", "dpdk or kernel", arg)
							  : 0;
	case 'm':
		if (strcmp(arg, "bench") && strcmp(arg, "verify"))
			return fb_bad("--mode", "bench or verify", arg);
		o->verify = arg[0] == 'v';
		return 0;
	case 'n': return fb_u32("--steps", arg, 1, 10000000, &o->steps);
	case 'R': return fb_u32("--rounds", arg, 1, 1000, &o->rounds);
	case 'e': return fb_u32("--echoes", arg, 1, 10000000, &o->echoes);
	case 'S': return fb_u32("--seed", arg, 0, UINT32_MAX, &o->seed);
	case 't': return fb_u32("--seconds", arg, 1, 86400, &v) ? -EINVAL : (o->seconds = v, 0);
	case 'B': o->poll = true; return 0;
	default: return -EINVAL;
	}
}

bool fb_net_wanted(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--") || !strcmp(argv[i], "--server") ||
		    !strcmp(argv[i], "--peer"))
			return true;
	return false;
}

/* Splits "[EAL args] -- [app args]" as every DPDK program does, then parses. */
static int fb_parse(int argc, char **argv, struct fb_opts *o)
{
	static const struct option lo[] = {
		{ "server", no_argument, NULL, 's' },     { "peer", required_argument, NULL, 'P' },
		{ "ip", required_argument, NULL, 'i' },   { "port", required_argument, NULL, 'p' },
		{ "protocol", required_argument, NULL, 'r' }, { "mode", required_argument, NULL, 'm' },
		{ "steps", required_argument, NULL, 'n' }, { "rounds", required_argument, NULL, 'R' },
		{ "echoes", required_argument, NULL, 'e' }, { "seed", required_argument, NULL, 'S' },
		{ "seconds", required_argument, NULL, 't' }, { "poll", no_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },       { NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->proto = TL_PROTO_DPDK;
	o->port = 7300;
	o->rounds = 3;
	o->echoes = 2000;
	o->seed = 1;
	o->eal_argv = argv;
	ps_split_eal(&argc, &argv, &o->eal_argc);
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'h') {
			fb_usage(stdout);
			exit(0);
		}
		if (fb_opt(o, c, optarg) != 0)
			return -EINVAL;
	}
	if (optind < argc)
		return fb_bad("arguments", "unexpected positional argument", argv[optind]);
	if (o->server == o->have_peer)
		return fb_bad("--server/--peer", "give exactly one", o->server ? "both" : "neither");
	if (o->proto == TL_PROTO_DPDK && !o->have_ip)
		return fb_bad("--ip", "required with --protocol dpdk", "");
	if (o->steps == 0)
		o->steps = o->verify ? 300 : 100;
	return 0;
}

static int fb_tl_create(struct fb *b)
{
	const struct fb_opts *o = b->o;
	struct tl_config cfg;
	const char *why = NULL;
	int rc;

	tl_config_default(&cfg);
	cfg.protocol = o->proto;
	cfg.max_msg_segs = FZ_RX_MAX_IOV;  /* fused frames must fit the unpacker's view */
	cfg.tx_max_msgs = 8192;            /* a step of 1000 unfused tensors, and echoes */
	cfg.eal_argc = o->eal_argc;
	cfg.eal_argv = o->eal_argv;
	cfg.local_ip = o->ip;
	cfg.local_prefix = o->prefix;
	rc = tl_create(&cfg, &b->tl);
	if (rc == -EINVAL && tl_config_check(&cfg, &why) != 0)
		fprintf(stderr, "wharf-fuse-bench: transport config: %s\n", why);
	else if (rc)
		fprintf(stderr, "wharf-fuse-bench: cannot create the %s transport: %s\n",
			tl_protocol_name(o->proto), strerror(-rc));
	if (rc == 0 && (rc = fz_net_create(b->tl, &b->net)) != 0)
		fprintf(stderr, "wharf-fuse-bench: fuse: %s\n", strerror(-rc));
	return rc;
}

static void fb_fuse_cfg(struct fz_config *cfg, bool on)
{
	fz_config_defaults(cfg);
	cfg->tensor_fuse = on;
	/* A step of the mix is ~0.75 MB: enough frames that none goes alone for lack of one. */
	cfg->fuse_frames = 32;
}

static bool fb_stop_requested(const sigset_t *set)
{
	struct timespec zero = { 0, 0 };

	return sigtimedwait(set, NULL, &zero) > 0;
}

/* ---- server -------------------------------------------------------------------------- */

static void fb_release(void *arg, int status)
{
	(void)status;
	tl_msg_release(arg);
}

static bool fb_tensor_ok(const struct fb *b, const struct tl_msg_view *m)
{
	const uint8_t *want = fb_body(b, m->hdr.req_id);
	uint32_t i, off = 0;

	if (m->hdr.table_id != m->hdr.body_len || m->hdr.body_len > FB_PAT)
		return false;
	for (i = 0; i < m->iovcnt; i++) {
		if (memcmp(m->iov[i].base, want + off, m->iov[i].len) != 0)
			return false;
		off += m->iov[i].len;
	}
	return off == m->hdr.body_len;
}

static void fb_srv_reply(struct fz_conn *fc, const struct tl_msg_view *m,
			 const struct tl_msg_view *carrier, struct fb_srv_conn *sc)
{
	struct fz_msg r;
	struct tl_msg *held = NULL;

	memset(&r, 0, sizeof(r));
	r.hdr.req_id = m->hdr.req_id;
	if (m->hdr.type == FB_T_STEP) {
		if (m->hdr.key_count != (uint32_t)sc->got)
			sc->bad++;
		r.hdr.type = FB_T_ACK;
		r.hdr.key_count = (uint32_t)sc->got;
		r.hdr.dim = (uint32_t)(sc->bad < UINT32_MAX ? sc->bad : UINT32_MAX);
	} else {
		/* Echo from the bytes as they arrived: hold the carrier until sent. */
		held = tl_msg_hold(carrier);
		r.hdr.type = FB_T_ECHO;
		r.hdr.body_len = m->hdr.body_len;
		r.iov = m->iov;
		r.iovcnt = m->iovcnt;
		r.done = fb_release;
		r.done_arg = held;
	}
	if (fz_conn_send(fc, &r) != 0) {
		sc->b->errors++;
		if (held)
			tl_msg_release(held);
		return;
	}
	(void)fz_conn_flush(fc);
}

static void fb_srv_msg(struct fz_conn *fc, const struct tl_msg_view *m,
		       const struct tl_msg_view *carrier)
{
	struct fb_srv_conn *sc = fz_conn_ctx(fc);

	if (m->hdr.type == FB_T_TENSOR) {
		if (m->hdr.req_id != sc->next_req || !fb_tensor_ok(sc->b, m))
			sc->bad++;
		sc->next_req = m->hdr.req_id + 1;
		sc->got++;
	} else if (m->hdr.type == FB_T_STEP || m->hdr.type == FB_T_ECHO) {
		fb_srv_reply(fc, m, carrier, sc);
	} else {
		sc->bad++;
	}
}

static void fb_srv_closed(struct fz_conn *fc, int reason)
{
	struct fb_srv_conn *sc = fz_conn_ctx(fc);
	struct fz_conn_stats st;

	fz_conn_stats_get(fc, &st);
	fprintf(stderr, "wharf-fuse-bench: server connection closed (%s): %" PRIu64
		" tensors, %" PRIu64 " bad, %" PRIu64 " frames in, %" PRIu64 " refused\n",
		reason == 0 ? "by peer" : strerror(-reason), sc->got, sc->bad, st.rx.frames,
		st.rx.refused);
	sc->b->errors += sc->bad + st.rx.refused;
	free(sc);
}

static const struct fz_conn_ops fb_srv_ops = { NULL, fb_srv_msg, fb_srv_closed };

static void fb_srv_accepted(struct fz_conn *fc, void *ctx)
{
	struct fb_srv_conn *sc = calloc(1, sizeof(*sc));

	if (!sc) {
		fz_conn_close(fc);
		fz_conn_set_ctx(fc, NULL);
		return;
	}
	sc->b = ctx;
	sc->next_req = 1;
	fz_conn_set_ctx(fc, sc);
}

static int fb_server(struct fb *b, const sigset_t *sigs)
{
	const struct fb_opts *o = b->o;
	uint32_t ip = o->proto == TL_PROTO_KERNEL ? 0x7f000001u : o->ip;
	struct fz_listener *l[2];
	struct fz_config cfg;
	double t0 = now_s(), next = t0;
	int i, rc;

	for (i = 0; i < 2; i++) {
		fb_fuse_cfg(&cfg, i == 1);
		rc = fz_net_listen(b->net, ip, (uint16_t)(o->port + i), &cfg, &fb_srv_ops,
				   fb_srv_accepted, b, &l[i]);
		if (rc) {
			fprintf(stderr, "wharf-fuse-bench: --port %u: cannot listen: %s\n",
				o->port + i, strerror(-rc));
			return 1;
		}
	}
	fprintf(stderr, "wharf-fuse-bench: %s server on ports %u (fusion off), %u (on)\n",
		tl_protocol_name(o->proto), o->port, o->port + 1);
	for (;;) {
		rc = fz_net_poll(b->net, fb_wait(b, 100000));
		if (rc < 0) {
			fprintf(stderr, "wharf-fuse-bench: poll: %s\n", strerror(-rc));
			return 1;
		}
		if (now_s() >= next) {
			next = now_s() + 0.1;
			if (fb_stop_requested(sigs) || (o->seconds > 0 && now_s() - t0 >= o->seconds))
				break;
		}
	}
	printf("{\"role\":\"server\",\"protocol\":\"%s\",\"errors\":%" PRIu64 "}\n",
	       tl_protocol_name(o->proto), b->errors);
	return 0;
}

/* ---- client: connections and messages ------------------------------------------------ */

static void fb_cli_connected(struct fz_conn *fc, int status)
{
	struct fb_link *k = fz_conn_ctx(fc);

	k->up = status == 0 ? 1 : -1;
	if (status)
		k->fc = NULL;
}

static void fb_cli_msg(struct fz_conn *fc, const struct tl_msg_view *m,
		       const struct tl_msg_view *carrier)
{
	struct fb_link *k = fz_conn_ctx(fc);

	(void)carrier;
	if (m->hdr.type == FB_T_ACK) {
		k->acked = m->hdr.req_id;
		k->ack_seen = m->hdr.key_count;
		k->ack_bad = m->hdr.dim;
	} else if (m->hdr.type == FB_T_ECHO) {
		k->echoed = m->hdr.req_id;
	} else {
		/* An error reply (a refused frame) or anything unexpected. */
		k->b->errors++;
		fprintf(stderr, "wharf-fuse-bench: %s: unexpected message type %u\n", k->name,
			m->hdr.type);
	}
}

static void fb_cli_closed(struct fz_conn *fc, int reason)
{
	struct fb_link *k = fz_conn_ctx(fc);

	k->up = -1;
	k->fc = NULL;
	if (!k->b->running)
		return;
	k->b->errors++;
	fprintf(stderr, "wharf-fuse-bench: %s: connection closed: %s (%s)\n", k->name,
		strerror(reason < 0 ? -reason : ECONNRESET), tl_conn_why(fz_conn_tl(fc)));
}

static const struct fz_conn_ops fb_cli_ops = { fb_cli_connected, fb_cli_msg, fb_cli_closed };

/* Opens links [first, last], retrying refused ones while the server starts. */
static int fb_connect(struct fb *b, int first, int last)
{
	double deadline = now_s() + 15.0;
	struct fz_config cfg;
	int i, up;

	for (;;) {
		for (i = first, up = 0; i <= last; i++) {
			struct fb_link *k = &b->link[i];
			if (k->up == 1) {
				up++;
			} else if (!k->fc) {
				k->up = 0;
				fb_fuse_cfg(&cfg, i == 1);
				(void)fz_net_connect(b->net, b->o->peer, (uint16_t)(b->o->port + i),
						     &cfg, &fb_cli_ops, k, &k->fc);
			}
		}
		if (up == last - first + 1)
			return 0;
		if (now_s() > deadline)
			break;
		fz_net_poll(b->net, 50000);
	}
	fprintf(stderr, "wharf-fuse-bench: --peer: cannot connect to ports %u..%u\n",
		b->o->port + first, b->o->port + last);
	return -ETIMEDOUT;
}

/* Polls until *v reaches want, the link drops, or FB_WAIT_S passes. */
static int fb_poll_until(struct fb *b, struct fb_link *k, const uint64_t *v, uint64_t want)
{
	double deadline = now_s() + FB_WAIT_S;

	while (*v < want) {
		if (k->up != 1)
			return -ECONNRESET;
		if (now_s() > deadline) {
			fprintf(stderr, "wharf-fuse-bench: %s: no reply within %.0f s\n", k->name,
				FB_WAIT_S);
			return -ETIMEDOUT;
		}
		if (fz_net_poll(b->net, fb_wait(b, 1000)) < 0)
			return -EIO;
	}
	return 0;
}

static void fb_count_done(void *arg, int status)
{
	struct fb *b = arg;

	if (status == 0)
		b->done_ok++;
	else
		b->errors++;
}

/* Sends n messages in order (one call), polling while the send queue is full. */
static int fb_send(struct fb *b, struct fb_link *k, const struct fz_msg *m, uint32_t n)
{
	uint32_t taken;
	int rc;

	while ((rc = fz_conn_send_many(k->fc, m, n, &taken)) == -ENOBUFS) {
		m += taken;
		n -= taken;
		if (fz_net_poll(b->net, 0) < 0 || k->up != 1)
			return -ECONNRESET;
	}
	return rc;
}

/*
 * One step: every tensor (handed down in one call, as a training step's sends are), the
 * marker, a flush, then the server's acknowledgement.
 */
static int fb_step(struct fb *b, struct fb_link *k, const uint32_t *sizes, uint32_t n,
		   uint64_t step)
{
	struct fz_msg *ms = b->step_msgs, m;
	struct tl_iov *iov = b->step_iov;
	uint32_t i;
	int rc;

	/* The fields a step changes (the rest were set once, in fb_net_main). */
	for (i = 0; i < n; i++) {
		ms[i].hdr.req_id = k->next_req + i;
		ms[i].hdr.body_len = ms[i].hdr.table_id = iov[i].len = sizes[i];
		ms[i].hdr.dim = sizes[i] / 4;
		iov[i].base = fb_body(b, k->next_req + i);
	}
	rc = fb_send(b, k, ms, n);
	if (rc)
		return rc;
	k->next_req += n;
	memset(&m, 0, sizeof(m));
	m.hdr.type = FB_T_STEP;
	m.hdr.req_id = step;
	m.hdr.key_count = (uint32_t)(k->next_req - 1);
	rc = fb_send(b, k, &m, 1);
	if (rc)
		return rc;
	rc = fz_conn_flush(k->fc);
	if (rc && rc != -ENOBUFS)   /* a full queue: fz_net_poll retries the flush */
		return rc;
	rc = fb_poll_until(b, k, &k->acked, step);
	if (rc == 0 && (k->ack_seen != (uint32_t)(k->next_req - 1) || k->ack_bad != 0)) {
		fprintf(stderr, "wharf-fuse-bench: %s: step %" PRIu64 ": server saw %" PRIu64
			" tensors of %" PRIu64 ", %" PRIu64 " bad\n", k->name, step, k->ack_seen,
			k->next_req - 1, k->ack_bad);
		b->errors++;
		return -EBADMSG;
	}
	return rc;
}

/* ---- client: measurements ------------------------------------------------------------ */

static bool fb_tx_packets(const struct fb *b, uint64_t *out)
{
	struct rte_eth_stats st;
	uint16_t port;

	*out = 0;
	if (b->o->proto != TL_PROTO_DPDK)
		return false;
	RTE_ETH_FOREACH_DEV(port) {
		if (rte_eth_stats_get(port, &st) == 0)
			*out += st.opackets;
	}
	return true;
}

/* Wire messages and bytes the link handed to the transport so far. */
static void fb_wire(const struct fb_link *k, uint64_t *frames, uint64_t *bytes)
{
	struct fz_conn_stats st;
	struct tl_stats ts;

	fz_conn_stats_get(k->fc, &st);
	*frames = st.tx.msgs_alone + st.tx.frames + st.tx.frames_single;
	tl_stats_get(tl_conn_tl(fz_conn_tl(k->fc)), &ts);
	*bytes = ts.bytes_out;
}

/* One round of one case: steps on one link; best steps/s kept, the rest summed. */
static int fb_round(struct fb *b, struct fb_link *k, const uint32_t *sizes, uint64_t *step,
		    struct fb_case *c)
{
	uint64_t f0, f1, y0, y1, p0, p1;
	double t0, t1, rate;
	uint32_t s;
	int rc = 0;

	fb_wire(k, &f0, &y0);
	c->have_packets = fb_tx_packets(b, &p0);
	t0 = now_s();
	for (s = 0; s < b->o->steps && rc == 0; s++)
		rc = fb_step(b, k, sizes, FB_TENSORS, ++*step);
	t1 = now_s();
	if (rc)
		return rc;
	fb_wire(k, &f1, &y1);
	fb_tx_packets(b, &p1);
	rate = b->o->steps / (t1 - t0);
	c->steps_per_s = rate > c->steps_per_s ? rate : c->steps_per_s;
	c->frames += (double)(f1 - f0);
	c->bytes += (double)(y1 - y0);
	c->packets += (double)(p1 - p0);
	c->steps += b->o->steps;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One 64 B message on an idle wire, timed to its echo. */
static int fb_echo_once(struct fb *b, struct fb_link *k, uint64_t seq, double *rtt_us)
{
	struct tl_iov iov = { b->pat, 64 };
	struct fz_msg m;
	double t0, dl = now_s() + FB_WAIT_S;
	int rc;

	/* Idle wire: nothing of ours still queued or unacknowledged. */
	while (tl_conn_tx_pending(fz_conn_tl(k->fc)) > 0 && now_s() < dl)
		if (fz_net_poll(b->net, fb_wait(b, 100)) < 0)
			return -EIO;
	memset(&m, 0, sizeof(m));
	m.hdr.type = FB_T_ECHO;
	m.hdr.req_id = seq;
	m.hdr.body_len = 64;
	m.iov = &iov;
	m.iovcnt = 1;
	t0 = now_s();
	rc = fb_send(b, k, &m, 1);
	if (rc == 0)
		rc = fb_poll_until(b, k, &k->echoed, seq);
	*rtt_us = (now_s() - t0) * 1e6;
	return rc;
}

/* Alternates off/on per sample so both see the same machine; p50 and p99 out. */
static int fb_latency(struct fb *b, double p50[2], double p99[2])
{
	uint32_t n = b->o->echoes, i;
	double *rtt[2];
	int j, rc = 0;

	rtt[0] = malloc(n * sizeof(double));
	rtt[1] = malloc(n * sizeof(double));
	if (!rtt[0] || !rtt[1])
		rc = -ENOMEM;
	for (i = 0; i < n && rc == 0; i++)
		for (j = 0; j < 2 && rc == 0; j++) {
			int w = (int)(i & 1) ^ j;
			rc = fb_echo_once(b, &b->link[w], i + 1, &rtt[w][i]);
		}
	for (j = 0; j < 2 && rc == 0; j++) {
		qsort(rtt[j], n, sizeof(double), cmp_double);
		p50[j] = rtt[j][(n - 1) / 2];
		p99[j] = rtt[j][(uint64_t)(n - 1) * 99 / 100];
	}
	free(rtt[0]);
	free(rtt[1]);
	return rc;
}

static void fb_case_json(const char *name, const struct fb_case c[2], bool last)
{
	int j;

	printf("\"%s\": {", name);
	for (j = 0; j < 2; j++) {
		double steps = c[j].steps ? (double)c[j].steps : 1;
		char pk[32] = "null";
		if (c[j].have_packets)
			snprintf(pk, sizeof(pk), "%.1f", c[j].packets / steps);
		printf("\"%s\": {\"steps_per_s\": %.1f, \"frames_per_step\": %.1f, "
		       "\"tx_packets_per_step\": %s, \"tx_bytes_per_step\": %.0f}, ",
		       j ? "on" : "off", c[j].steps_per_s, c[j].frames / steps, pk,
		       c[j].bytes / steps);
	}
	printf("\"steps_ratio_on_over_off\": %.3f}%s",
	       c[1].steps_per_s / c[0].steps_per_s, last ? "" : ", ");
}

static void fb_report(const struct fb *b, const struct fb_case small[2],
		      const struct fb_case mix[2], const double p50[2], const double p99[2])
{
	printf("{\"bench\": \"fuse_net\", \"protocol\": \"%s\", \"tensors_per_step\": %u, "
	       "\"steps\": %u, \"rounds\": %u, \"echoes\": %u, ",
	       tl_protocol_name(b->o->proto), FB_TENSORS, b->o->steps, b->o->rounds,
	       b->o->echoes);
	fb_case_json("step_1000x64B", small, false);
	fb_case_json("step_mix_16B_4KiB", mix, false);
	printf("\"lone_64B\": {\"off\": {\"rtt_p50_us\": %.2f, \"rtt_p99_us\": %.2f}, "
	       "\"on\": {\"rtt_p50_us\": %.2f, \"rtt_p99_us\": %.2f}}, ",
	       p50[0], p99[0], p50[1], p99[1]);
	printf("\"fuse_steps_ratio_on_over_off\": %.3f, ",
	       small[1].steps_per_s / small[0].steps_per_s);
	printf("\"fuse_steps_ratio_mix_on_over_off\": %.3f, ",
	       mix[1].steps_per_s / mix[0].steps_per_s);
	printf("\"fuse_lone_latency_ratio_on_over_off\": %.3f, ", p50[1] / p50[0]);
	printf("\"errors\": %" PRIu64 "}\n", b->errors);
}

static int fb_bench(struct fb *b)
{
	uint32_t small[FB_TENSORS], mix[FB_TENSORS], r, i;
	struct fb_case cs[2], cm[2];
	double p50[2] = { 0, 0 }, p99[2] = { 0, 0 };
	uint64_t step[2] = { 0, 0 };
	unsigned seed = b->o->seed;
	int j, rc = 0;

	memset(cs, 0, sizeof(cs));
	memset(cm, 0, sizeof(cm));
	for (i = 0; i < FB_TENSORS; i++) {
		small[i] = 64;
		mix[i] = (uint32_t)(16.0 * pow(256.0, rand_r(&seed) / (double)RAND_MAX));
	}
	if (fb_connect(b, 0, 1) != 0)
		return 1;
	/* Warm-up step on each link (ARP, windows, frame buffers), not counted. */
	for (j = 0; j < 2 && rc == 0; j++)
		rc = fb_step(b, &b->link[j], small, FB_TENSORS, ++step[j]);
	/* Rounds alternate off/on (and which goes first) so drift hits both alike. */
	for (r = 0; r < b->o->rounds && rc == 0; r++)
		for (j = 0; j < 2 && rc == 0; j++) {
			int w = (int)(r & 1) ^ j;
			rc = fb_round(b, &b->link[w], small, &step[w], &cs[w]);
			if (rc == 0)
				rc = fb_round(b, &b->link[w], mix, &step[w], &cm[w]);
		}
	if (rc == 0)
		rc = fb_latency(b, p50, p99);
	if (rc) {
		fprintf(stderr, "wharf-fuse-bench: run failed: %s\n", strerror(-rc));
		return 1;
	}
	fb_report(b, cs, cm, p50, p99);
	return b->errors ? 1 : 0;
}

/* A random mixed step: 1 B..4 KiB, with 1 in 25 large (sent alone) interleaved. */
static uint32_t fb_mixed_step(unsigned *seed, uint32_t *sizes, uint32_t cap)
{
	uint32_t n = 1 + (uint32_t)rand_r(seed) % cap, i;

	for (i = 0; i < n; i++) {
		uint32_t r = (uint32_t)rand_r(seed);
		sizes[i] = r % 25 == 0 ? FZ_DEFAULT_THRESHOLD_BYTES + 1 + (r >> 5) % (FB_LARGE - 4096)
				       : 1 + (r >> 5) % FZ_DEFAULT_THRESHOLD_BYTES;
	}
	return n;
}

static int fb_verify(struct fb *b)
{
	struct fb_link *k = &b->link[1];
	uint32_t sizes[400], n, s;
	struct fz_conn_stats st;
	unsigned seed = b->o->seed;
	uint64_t sent = 0;
	double t0;
	int rc = 0;

	if (fb_connect(b, 1, 1) != 0)
		return 1;
	t0 = now_s();
	for (s = 1; s <= b->o->steps && rc == 0; s++) {
		n = fb_mixed_step(&seed, sizes, 400);
		rc = fb_step(b, k, sizes, n, s);
		sent += n;
	}
	if (k->fc) {
		fz_conn_stats_get(k->fc, &st);
	} else {
		memset(&st, 0, sizeof(st));
	}
	printf("{\"role\":\"client\",\"mode\":\"verify\",\"protocol\":\"%s\",\"steps\":%u,"
	       "\"tensors\":%" PRIu64 ",\"server_tensors\":%" PRIu64 ",\"server_bad\":%" PRIu64
	       ",\"fused\":%" PRIu64 ",\"alone\":%" PRIu64 ",\"frames\":%" PRIu64
	       ",\"seconds\":%.3f,\"errors\":%" PRIu64 ",\"ok\":%s}\n",
	       tl_protocol_name(b->o->proto), b->o->steps, sent, k->ack_seen, k->ack_bad,
	       st.tx.msgs_fused, st.tx.msgs_alone, st.tx.frames, now_s() - t0, b->errors,
	       rc == 0 && b->errors == 0 && k->ack_seen == sent ? "true" : "false");
	if (rc)
		fprintf(stderr, "wharf-fuse-bench: verify failed: %s\n", strerror(-rc));
	return rc == 0 && b->errors == 0 && k->ack_seen == sent ? 0 : 1;
}

/* Waits (bounded) for outstanding completions so the close is orderly. */
static void fb_drain(struct fb *b)
{
	double deadline = now_s() + 1.0;
	int j;

	for (j = 0; j < 2; j++) {
		struct fb_link *k = &b->link[j];
		while (k->fc && tl_conn_tx_pending(fz_conn_tl(k->fc)) > 0 && now_s() < deadline)
			if (fz_net_poll(b->net, 1000) < 0)
				return;
	}
}

int fb_net_main(int argc, char **argv)
{
	struct fb_opts o;
	struct fb b;
	sigset_t sigs;
	int rc;

	if (fb_parse(argc, argv, &o) != 0) {
		fb_usage(stderr);
		return 2;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	memset(&b, 0, sizeof(b));
	b.o = &o;
	b.link[0] = (struct fb_link){ .b = &b, .name = "fusion off", .next_req = 1 };
	b.link[1] = (struct fb_link){ .b = &b, .name = "fusion on", .next_req = 1 };
	for (uint32_t i = 0; i < FB_TENSORS; i++)
		b.step_msgs[i] = (struct fz_msg){ .hdr = { .type = FB_T_TENSOR, .key_count = 1 },
						  .iov = &b.step_iov[i], .iovcnt = 1,
						  .done = fb_count_done, .done_arg = &b };
	if (fb_pat_create(&b) != 0 || fb_tl_create(&b) != 0) {
		free(b.pat);
		tl_destroy(b.tl);
		return 1;
	}
	b.running = true;
	if (o.server)
		rc = fb_server(&b, &sigs);
	else
		rc = o.verify ? fb_verify(&b) : fb_bench(&b);
	if (!o.server) {
		fb_drain(&b);
		b.running = false;   /* the closes below are ours */
	}
	fz_net_destroy(b.net);
	tl_destroy(b.tl);
	free(b.pat);
	return rc;
}
