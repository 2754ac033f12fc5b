/*
 * wharf-shard-bench — in-process benchmark of one PS shard on one lcore: sparse push+apply
 * and pull through the real request handler (ps_handle: validate, decode keys from the
 * message, route, apply from the message's bytes, reply), no network.
 *
 * Where it sits: apps/ -> ps_core only. Keys follow a Zipf law (s = 1.1) over 10^7
 * distinct keys (ranks scrambled by a 64-bit mix so hot keys do not sit together), 1000
 * keys per request, dim 8/16/64, SGD and Adagrad. A warm-up pass creates the rows the
 * measured passes then update (steady state, as in training). Reported: keys/s per lcore
 * (keys handled / this thread's CPU time inside ps_handle: on a shared machine that is
 * what a dedicated lcore would do; the wall-clock rate is reported beside it), p50/p99
 * wall time per request, bytes per row of the table (index + row arena / rows). --shards N
 * (default 16, as a PS runs them) splits the lcore's keys over N shards, all its own.
 *
 * Prints one JSON object on stdout; "headline" holds the dim-16 SGD push key-updates/s.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_core/ps.h"

#define KEYS_PER_REQ 1000u
#define KEY_SPACE    10000000ull
#define ZIPF_S       1.1

/* ---- Zipf sampling by rejection-inversion (Hoermann & Derflinger 1996), from the math. */
struct zipf {
	double s, n, h_x1, h_n, sq;
	uint64_t rng;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static double rng_u01(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static double zh(const struct zipf *z, double x) { return exp(-z->s * log(x)); }
/* H(x) = integral of x^-s, shifted so H is finite for s != 1. */
static double zH(const struct zipf *z, double x) { return (exp((1 - z->s) * log(x)) - 1) / (1 - z->s); }
static double zHinv(const struct zipf *z, double y) { return exp(log(1 + y * (1 - z->s)) / (1 - z->s)); }

static void zipf_init(struct zipf *z, double s, uint64_t n, uint64_t seed)
{
	z->s = s;
	z->n = (double)n;
	z->rng = seed;
	z->h_x1 = zH(z, 1.5) - 1.0;
	z->h_n = zH(z, z->n + 0.5);
	z->sq = 2.0 - zHinv(z, zH(z, 2.5) - zh(z, 2.0));
}

static uint64_t zipf_next(struct zipf *z)
{
	for (;;) {
		double u = z->h_n + rng_u01(&z->rng) * (z->h_x1 - z->h_n);
		double x = zHinv(z, u), k = floor(x + 0.5);
		if (k < 1)
			k = 1;
		if (k > z->n)
			k = z->n;
		if (k - x <= z->sq || u >= zH(z, k + 0.5) - zh(z, k))
			return (uint64_t)k;
	}
}

static uint64_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	return k ^ (k >> 33);
}

/* ---- one configuration */

struct result {
	uint32_t dim;
	const char *optim;
	double push_kps, pull_kps, push_cpu_kps, pull_cpu_kps;
	double push_p50, push_p99, pull_p50, pull_p99; /* microseconds */
	uint64_t rows;
	double bytes_per_row;
};

static double clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
/* CPU time of this thread: on a shared machine, what one dedicated lcore would need. */
static double cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Encodes request r of the key pool as a push (with seq) or a pull into m. */
static uint32_t encode(uint8_t *m, bool push, const uint64_t *keys, const float *grads,
		       uint32_t dim, uint64_t seq)
{
	uint32_t body = push ? PS_PUSH_HEAD + KEYS_PER_REQ * (8 + 4 * dim) : KEYS_PER_REQ * 8, i;
	struct tl_msg_hdr h = { .type = push ? PS_T_PUSH : PS_T_PULL, .aux = PS_ELEM_F32,
				.table_id = 1, .body_len = body, .key_count = KEYS_PER_REQ, .dim = dim,
				.req_id = seq };
	uint8_t *p = m + TL_MSG_HDR_LEN;

	tl_msg_hdr_encode(m, &h);
	if (push) {
		memset(p, 0, PS_PUSH_HEAD); /* worker 0, incarnation 0, step 0 (async) */
		tl_st64(p + 8, seq);
		p += PS_PUSH_HEAD;
	}
	for (i = 0; i < KEYS_PER_REQ; i++, p += 8)
		tl_st64(p, keys[i]);
	if (push)
		memcpy(p, grads, (size_t)KEYS_PER_REQ * dim * 4);
	return TL_MSG_HDR_LEN + body;
}

/*
 * Runs `passes` passes over the pool; fills lat[] (wall ns per request); returns keys per
 * wall second and, in *cpu_kps, keys per second of this thread's CPU time.
 */
static double run_pass(struct ps_handler *h, bool push, const uint64_t *pool, uint32_t n_req,
		       uint32_t passes, const float *grads, uint32_t dim, uint8_t *req,
		       uint8_t *rep, uint32_t rep_cap, uint64_t *seq, double *lat, int *err,
		       double *cpu_kps)
{
	double total = 0, cpu = 0;
	uint32_t p, r;

	for (p = 0; p < passes; p++)
		for (r = 0; r < n_req; r++) {
			uint32_t len = encode(req, push, pool + (size_t)r * KEYS_PER_REQ, grads, dim, ++*seq);
			struct tl_iov iov = { req + TL_MSG_HDR_LEN, len - TL_MSG_HDR_LEN };
			struct tl_msg_view v = { .iov = &iov, .iovcnt = 1 };
			struct ps_reply out = { .buf = rep, .cap = rep_cap };
			double t0, c0;
			tl_msg_hdr_decode(req, UINT32_MAX, &v.hdr);
			c0 = cpu_ns();
			t0 = now_ns();
			if (ps_handle(h, &v, &out) != 0)
				*err = 1;
			double dt = now_ns() - t0;
			cpu += cpu_ns() - c0;
			total += dt;
			if (lat)
				lat[(size_t)p * n_req + r] = dt;
		}
	if (cpu_kps)
		*cpu_kps = (double)passes * n_req * KEYS_PER_REQ / (cpu * 1e-9);
	return (double)passes * n_req * KEYS_PER_REQ / (total * 1e-9);
}

static void pcts(double *lat, size_t n, double *p50, double *p99)
{
	qsort(lat, n, sizeof(*lat), cmp_d);
	*p50 = lat[n / 2] / 1e3;
	*p99 = lat[(size_t)(n * 0.99)] / 1e3;
}

static int run_config(uint32_t dim, enum ps_optim_kind opt, const uint64_t *pool, uint32_t n_req,
		      uint32_t passes, uint32_t shards, struct result *res)
{
	struct ps_table_config t = { .id = 1, .kind = PS_TABLE_SPARSE, .dim = dim, .optim = opt,
				     .op = { .lr = 0.01f, .eps = 1e-8f, .init_accum = 0.1f },
				     .init = PS_INIT_UNIFORM, .init_a = -0.01f, .init_b = 0.01f, .seed = 1 };
	struct ps_server_config sc = { .n_servers = 1, .n_shards = shards, .n_lcores = 1, .n_workers = 1,
				       .mode = PS_MODE_ASYNC, .max_keys = KEYS_PER_REQ,
				       .tables = &t, .n_tables = 1 };
	uint32_t rep_cap = TL_MSG_HDR_LEN + KEYS_PER_REQ * dim * 4 + 1024, i;
	uint8_t *req = malloc(TL_MSG_HDR_LEN + PS_PUSH_HEAD + KEYS_PER_REQ * (8 + 4 * dim));
	uint8_t *rep = aligned_alloc(64, rep_cap + 64 - rep_cap % 64);
	float *grads = malloc((size_t)KEYS_PER_REQ * dim * sizeof(float));
	double *lat = malloc((size_t)passes * n_req * sizeof(double));
	struct ps_server *s = NULL;
	struct ps_handler *h = NULL;
	struct ps_table_stats st;
	uint64_t seq = 0;
	char msg[256];
	int err = 0, rc;

	if (!req || !rep || !grads || !lat) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < KEYS_PER_REQ * dim; i++)
		grads[i] = (float)((i % 17) - 8) * 1e-3f;
	rc = ps_server_create(&sc, &s, msg, sizeof(msg));
	if (rc == 0)
		rc = ps_handler_create(s, 0, &h);
	if (rc < 0) {
		fprintf(stderr, "shard-bench: %s\n", msg);
		goto out;
	}
	res->dim = dim;
	res->optim = opt == PS_OPT_SGD ? "sgd" : "adagrad";
	/* warm-up: creates every row the measured passes touch */
	run_pass(h, true, pool, n_req, 1, grads, dim, req, rep, rep_cap, &seq, NULL, &err, NULL);
	res->push_kps = run_pass(h, true, pool, n_req, passes, grads, dim, req, rep, rep_cap, &seq,
				 lat, &err, &res->push_cpu_kps);
	pcts(lat, (size_t)passes * n_req, &res->push_p50, &res->push_p99);
	res->pull_kps = run_pass(h, false, pool, n_req, passes, grads, dim, req, rep, rep_cap, &seq,
				 lat, &err, &res->pull_cpu_kps);
	pcts(lat, (size_t)passes * n_req, &res->pull_p50, &res->pull_p99);
	ps_server_table_stats(s, 1, &st);
	res->rows = st.rows;
	res->bytes_per_row = st.rows ? (double)st.bytes / st.rows : 0;
	if (err) {
		fprintf(stderr, "shard-bench: a request was refused\n");
		rc = -EIO;
	}
out:
	ps_handler_destroy(h);
	ps_server_destroy(s);
	free(req);
	free(rep);
	free(grads);
	free(lat);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-shard-bench [--quick] [--requests N] [--passes N] [--seed S]\n"
		   "                         [--shards N] [--dim 8|16|64] [--optim sgd|adagrad]\n"
		   "  sparse push+apply and pull through ps_handle on one lcore; prints JSON\n"
		   "  --shards N  shards the lcore's keys are split over, 1..64 (default 16, a PS's)\n"
		   "  --dim, --optim  run only those configurations (default: every dim and optimizer;\n"
		   "              the headline is 0 unless dim 16 SGD runs)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' }, { "requests", required_argument, NULL, 'r' },
		{ "passes", required_argument, NULL, 'p' }, { "seed", required_argument, NULL, 's' },
		{ "shards", required_argument, NULL, 'S' }, { "dim", required_argument, NULL, 'd' },
		{ "optim", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 } };
	uint32_t n_req = 2000, passes = 5, dims[3] = { 8, 16, 64 }, d, o, i, nres = 0, shards = 16;
	uint32_t only_dim = 0;
	int only_opt = -1;
	uint64_t seed = 1, distinct;
	struct result res[6];
	struct zipf z;
	uint64_t *pool;
	double headline = 0, headline_wall = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end = NULL;
		unsigned long v = 0;
		if (c == 'r' || c == 'p' || c == 's' || c == 'S' || c == 'd') {
			unsigned long max = c == 'S' ? 64 : c == 'd' ? 64 : 1000000;
			v = strtoul(optarg, &end, 10);
			if (*end || v == 0 || v > max) {
				fprintf(stderr, "wharf-shard-bench: --%s %s: want 1..%lu\n",
					c == 'r' ? "requests" : c == 'p' ? "passes" : c == 's' ? "seed" :
					c == 'S' ? "shards" : "dim", optarg, max);
				return 2;
			}
		}
		switch (c) {
		case 'q': n_req = 200; passes = 2; break;
		case 'r': n_req = (uint32_t)v; break;
		case 'p': passes = (uint32_t)v; break;
		case 's': seed = v; break;
		case 'S': shards = (uint32_t)v; break;
		case 'd':
			if (v != 8 && v != 16 && v != 64) {
				fprintf(stderr, "wharf-shard-bench: --dim %s: want 8, 16 or 64\n", optarg);
				return 2;
			}
			only_dim = (uint32_t)v;
			break;
		case 'o':
			if (strcmp(optarg, "sgd") != 0 && strcmp(optarg, "adagrad") != 0) {
				fprintf(stderr, "wharf-shard-bench: --optim %s: want sgd or adagrad\n", optarg);
				return 2;
			}
			only_opt = strcmp(optarg, "adagrad") == 0;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	pool = malloc((size_t)n_req * KEYS_PER_REQ * sizeof(*pool));
	if (!pool) {
		fprintf(stderr, "wharf-shard-bench: out of memory for %u requests\n", n_req);
		return 1;
	}
	zipf_init(&z, ZIPF_S, KEY_SPACE, seed);
	for (i = 0; i < n_req * KEYS_PER_REQ; i++)
		pool[i] = mix64(zipf_next(&z));
	for (d = 0; d < 3; d++)
		for (o = 0; o < 2; o++) {
			if ((only_dim && dims[d] != only_dim) || (only_opt >= 0 && (int)o != only_opt))
				continue;
			if (run_config(dims[d], o ? PS_OPT_ADAGRAD : PS_OPT_SGD, pool, n_req, passes,
				       shards, &res[nres]) < 0)
				return 1;
			if (dims[d] == 16 && o == 0) {
				headline = res[nres].push_cpu_kps;
				headline_wall = res[nres].push_kps;
			}
			nres++;
		}
	distinct = res[0].rows;
	printf("{\n  \"bench\": \"ps_shard_inprocess\", \"zipf_s\": %.1f, \"key_space\": %llu, "
	       "\"keys_per_request\": %u,\n  \"requests\": %u, \"passes\": %u, "
	       "\"distinct_keys_touched\": %llu, \"lcores\": 1, \"shards\": %u,\n  \"results\": [\n",
	       ZIPF_S, (unsigned long long)KEY_SPACE, KEYS_PER_REQ, n_req, passes,
	       (unsigned long long)distinct, shards);
	for (i = 0; i < nres; i++)
		printf("    {\"dim\": %u, \"optim\": \"%s\", \"push_keys_per_cpu_s\": %.0f, "
		       "\"push_keys_per_s\": %.0f, \"push_p50_us\": %.1f, \"push_p99_us\": %.1f, "
		       "\"pull_keys_per_cpu_s\": %.0f, \"pull_keys_per_s\": %.0f, "
		       "\"pull_p50_us\": %.1f, \"pull_p99_us\": %.1f, \"rows\": %llu, "
		       "\"bytes_per_row\": %.1f}%s\n", res[i].dim, res[i].optim, res[i].push_cpu_kps,
		       res[i].push_kps, res[i].push_p50, res[i].push_p99, res[i].pull_cpu_kps,
		       res[i].pull_kps, res[i].pull_p50, res[i].pull_p99,
		       (unsigned long long)res[i].rows, res[i].bytes_per_row,
		       i + 1 < nres ? "," : "");
	printf("  ],\n  \"headline\": {\"ps_dim16_sgd_push_key_updates_per_s_per_lcore\": %.0f, "
	       "\"ps_dim16_sgd_push_key_updates_per_wall_s\": %.0f, \"target\": 30000000}\n}\n",
	       headline, headline_wall);
	free(pool);
	return 0;
}
