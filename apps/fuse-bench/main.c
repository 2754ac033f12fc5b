/*
 * wharf-fuse-bench — in-process benchmark of the fuse codec: a sender's packer feeding a
 * receiver's unpacker directly (no transport, no network), fusion on vs. off.
 *
 * Where it sits: apps/ -> fuse (fz_peer_* and fz_unpack) only. It measures what fusion
 * costs and saves in CPU and in messages/bytes handed to the transport; the over-the-wire
 * numbers (DPDK and kernel backends, steps/s, packets, lone-message latency) need the
 * transport and belong to the full `make bench`.
 *
 * Workloads, one "step" each:
 *   64B  1000 tensors of 64 B (biases, small layers)
 *   mix  1000 tensors of 16 B..4 KiB, log-uniform (a realistic small-tensor mix)
 * The fake wire counts a connection as busy while any message it was handed is not yet
 * completed; completions arrive at the end of each step (the step's acks), so the first
 * message of a step finds an idle wire and goes alone, as autocorking intends.
 *
 * Prints one JSON object on one line of stdout (make bench takes the last such line).
 *
 * With EAL arguments ("--") or --server/--peer it runs the network mode instead (net.c):
 * the same workloads over a real connection, fusion on vs. off, on either transport.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/fuse-bench/fb.h"
#include "fuse/fz.h"

#define BENCH_TENSORS 1000u
#define BENCH_MSS     1448u   /* TCP payload per 1500 B frame with timestamps */
#define BENCH_MAX_OUT 4096u
#define BENCH_WINDOW  4u     /* messages acked together, as a cumulative ACK would */

struct bench_pending {
	fz_done_fn done;
	void *arg;
};

/* The transport's stand-in: forwards each message to the receiver, counts the wire. */
struct bench_wire {
	struct fz_rx *rx;
	struct bench_pending pend[BENCH_MAX_OUT];
	uint32_t n_pend;
	uint64_t msgs, bytes, packets, sink;
};

struct bench_result {
	double steps_per_s;
	double msgs_per_step, bytes_per_step, packets_per_step;
	double lone_ns;
};

static void bench_deliver(void *arg, const struct tl_msg_view *m,
			  const struct tl_msg_view *carrier)
{
	struct bench_wire *w = arg;
	uint32_t i;

	(void)carrier;
	/* Touch the body the way a handler would read it, so views are not free. */
	for (i = 0; i < m->iovcnt; i++)
		if (m->iov[i].len)
			w->sink += m->iov[i].base[0] + m->iov[i].base[m->iov[i].len - 1];
	w->sink += m->hdr.req_id;
}

static void bench_ack_all(struct bench_wire *w)
{
	uint32_t i, n = w->n_pend;

	w->n_pend = 0;
	for (i = 0; i < n; i++)
		if (w->pend[i].done)
			w->pend[i].done(w->pend[i].arg, 0);
}

static int bench_output(void *arg, const struct fz_out *out)
{
	struct bench_wire *w = arg;
	struct tl_msg_view v = { out->hdr, out->iov, out->iovcnt };
	struct fz_rx_error err;
	uint64_t len = TL_MSG_HDR_LEN + (uint64_t)out->hdr.body_len;
	int rc;

	if (w->n_pend == BENCH_MAX_OUT)
		return -ENOBUFS;
	rc = fz_unpack(w->rx, &v, bench_deliver, w, &err);
	if (rc != 0) {
		fprintf(stderr, "fuse-bench: receiver refused a frame: %s\n", err.reason);
		return rc;
	}
	w->msgs++;
	w->bytes += len;
	/* Each message written alone leaves in its own segments (no Nagle). */
	w->packets += (len + BENCH_MSS - 1) / BENCH_MSS;
	w->pend[w->n_pend++] = (struct bench_pending){ out->done, out->done_arg };
	/* Acks for a window's worth arrive while the step is still sending. */
	if (w->n_pend >= BENCH_WINDOW)
		bench_ack_all(w);
	return 0;
}

static bool bench_busy(void *arg)
{
	return ((struct bench_wire *)arg)->n_pend > 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One step: every tensor sent, then the end-of-step flush, then the acks. */
static int bench_step(struct fz_peer *peer, struct bench_wire *w, const uint32_t *sizes,
		      const uint8_t *data, uint64_t *req)
{
	/* One clock read per step, as an lcore loop reads the TSC once per burst. */
	uint64_t now_us = now_ns() / 1000;
	uint32_t i;
	int rc;

	for (i = 0; i < BENCH_TENSORS; i++) {
		struct tl_iov iov = { data, sizes[i] };
		struct fz_msg m = { .iov = &iov, .iovcnt = 1 };

		m.hdr.type = 40;
		m.hdr.body_len = sizes[i];
		m.hdr.table_id = i % 7;
		m.hdr.req_id = (*req)++;
		m.hdr.key_count = 1;
		m.hdr.dim = sizes[i] / 4;
		rc = fz_peer_send(peer, &m, now_us);
		if (rc)
			return rc;
	}
	rc = fz_peer_flush(peer, now_us);
	bench_ack_all(w);
	return rc;
}

static int bench_run(const struct fz_config *cfg, const uint32_t *sizes, const uint8_t *data,
		     uint32_t steps, struct bench_result *res)
{
	struct bench_wire *w = calloc(1, sizeof(*w));
	struct fz_peer_ops ops = { .output = bench_output, .wire_busy = bench_busy, .arg = w };
	struct fz_peer *peer = NULL;
	uint64_t req = 1, t0, t1;
	uint32_t s, i;
	int rc = -ENOMEM;

	if (!w || fz_rx_create(&w->rx) != 0)
		goto out;
	rc = fz_peer_create(cfg, &ops, &peer);
	if (rc)
		goto out;
	rc = bench_step(peer, w, sizes, data, &req);   /* warm up */
	w->msgs = w->bytes = w->packets = 0;
	t0 = now_ns();
	for (s = 0; s < steps && rc == 0; s++)
		rc = bench_step(peer, w, sizes, data, &req);
	t1 = now_ns();
	if (rc)
		goto out;
	res->steps_per_s = steps / ((double)(t1 - t0) / 1e9);
	res->msgs_per_step = (double)w->msgs / steps;
	res->bytes_per_step = (double)w->bytes / steps;
	res->packets_per_step = (double)w->packets / steps;

	/* A lone 64 B message on an idle wire: send through receive, per message. */
	t0 = now_ns();
	for (i = 0; i < 100000 && rc == 0; i++) {
		struct tl_iov iov = { data, 64 };
		struct fz_msg m = { .iov = &iov, .iovcnt = 1 };
		m.hdr.type = 40;
		m.hdr.body_len = 64;
		m.hdr.req_id = req++;
		rc = fz_peer_send(peer, &m, t0 / 1000);
		bench_ack_all(w);
	}
	res->lone_ns = (double)(now_ns() - t0) / 100000;
out:
	fz_peer_destroy(peer);
	if (w)
		fz_rx_destroy(w->rx);
	free(w);
	return rc;
}

/* Best of three: the machine is shared, and the best run is the least disturbed. */
static int bench_best(const struct fz_config *cfg, const uint32_t *sizes, const uint8_t *data,
		      uint32_t steps, struct bench_result *best)
{
	struct bench_result r;
	int i, rc;

	for (i = 0; i < 3; i++) {
		rc = bench_run(cfg, sizes, data, steps, &r);
		if (rc)
			return rc;
		if (i == 0 || r.steps_per_s > best->steps_per_s)
			*best = r;
	}
	return 0;
}

static void print_pair(const char *name, const struct bench_result *off,
		       const struct bench_result *on, bool last)
{
	printf("\"%s\": {", name);
	printf("\"off\": {\"steps_per_s\": %.1f, \"msgs_per_step\": %.1f, "
	       "\"bytes_per_step\": %.0f, \"est_packets_per_step\": %.1f, \"lone_msg_ns\": %.1f}, ",
	       off->steps_per_s, off->msgs_per_step, off->bytes_per_step, off->packets_per_step,
	       off->lone_ns);
	printf("\"on\":  {\"steps_per_s\": %.1f, \"msgs_per_step\": %.1f, "
	       "\"bytes_per_step\": %.0f, \"est_packets_per_step\": %.1f, \"lone_msg_ns\": %.1f}, ",
	       on->steps_per_s, on->msgs_per_step, on->bytes_per_step, on->packets_per_step,
	       on->lone_ns);
	printf("\"msgs_ratio_off_on\": %.2f, \"packets_ratio_off_on\": %.2f",
	       off->msgs_per_step / on->msgs_per_step,
	       off->packets_per_step / on->packets_per_step);
	printf("}%s", last ? "" : ", ");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-fuse-bench [--steps N] [--seed S]\n"
		   "  in-process fuse codec benchmark (pack + unpack), JSON on stdout\n"
		   "       wharf-fuse-bench [EAL args] -- (--server | --peer B) ...\n"
		   "  network mode over the transport (--help after -- for its options)\n");
}

static int parse_args(int argc, char **argv, uint32_t *steps, uint32_t *seed)
{
	static const struct option opts[] = {
		{ "steps", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	unsigned long v;
	int c;

	while ((c = getopt_long(argc, argv, "s:r:h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c != 's' && c != 'r')
			return -EINVAL;
		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (errno || *end || end == optarg || v == 0 || v > 1000000) {
			fprintf(stderr, "wharf-fuse-bench: --%s %s: want 1..1000000\n",
				c == 's' ? "steps" : "seed", optarg);
			return -EINVAL;
		}
		*(c == 's' ? steps : seed) = (uint32_t)v;
	}
	return optind == argc ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	static uint8_t data[4096];
	uint32_t small[BENCH_TENSORS], mix[BENCH_TENSORS], steps = 2000, seed = 1, i;
	struct bench_result r[4];
	struct fz_config off, on;

	if (fb_net_wanted(argc, argv))
		return fb_net_main(argc, argv);
	if (parse_args(argc, argv, &steps, &seed) != 0) {
		usage(stderr);
		return 2;
	}
	srand(seed);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)rand();
	for (i = 0; i < BENCH_TENSORS; i++) {
		small[i] = 64;
		mix[i] = (uint32_t)(16.0 * pow(256.0, rand() / (double)RAND_MAX));
	}
	fz_config_defaults(&off);
	on = off;
	on.tensor_fuse = true;
	if (bench_best(&off, small, data, steps, &r[0]) || bench_best(&on, small, data, steps, &r[1]) ||
	    bench_best(&off, mix, data, steps, &r[2]) || bench_best(&on, mix, data, steps, &r[3])) {
		fprintf(stderr, "wharf-fuse-bench: a run failed\n");
		return 1;
	}
	printf("{\"bench\": \"fuse_codec_inprocess\", \"tensors_per_step\": %u, "
	       "\"steps\": %u, \"fuse_max_bytes\": %u, \"fuse_threshold_bytes\": %u, ",
	       BENCH_TENSORS, steps, on.fuse_max_bytes, on.fuse_threshold_bytes);
	print_pair("step_1000x64B", &r[0], &r[1], false);
	print_pair("step_mix_16B_4KiB", &r[2], &r[3], true);
	printf("}\n");
	return 0;
}
