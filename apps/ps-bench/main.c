/*
 * wharf-ps-bench — PS pull and push throughput and latency over the network, one binary for
 * both roles through the fleet API (wc_fleet.h): its role comes from the environment
 * (TRAINING_ROLE=PSERVER|TRAINER and Paddle's other variables, TF_CONFIG, or flags).
 *
 *   wharf-ps-bench [EAL args] -- [cluster flags] --mode async [--keys N] [--dim D]
 *                  [--batch K] [--seconds S] [--start-at T] [--model-file F [--table NAME]]
 *
 * Server: one sparse table of dim D (SGD, rows zero at first touch), or the tables of model
 * file F, served until `wharf-ctl HOST:PORT shutdown` or SIGINT/SIGTERM.
 * Worker: requests of K keys drawn Zipf (s = 1.1) over N ids, one request in flight (closed
 * loop, so each request's latency is what a trainer waiting on it sees): S seconds of pulls,
 * then S seconds of pushes, on that table (with F: table NAME, or F's first sparse table). Prints one JSON line: keys/s and p50/p99 per request, each way.
 * --start-at (Unix time, seconds) lets several workers start their timed phases together.
 *
 * Call chain: main -> wc_fleet_init_app -> wc_fleet_init_server + wc_fleet_run_server |
 *   wc_fleet_init_worker -> bench_phase -> ps_client_pull_wait / ps_client_push_wait
 *   -> wc_fleet_recover on a lost server.
 * Exit status: 0 done, 1 run-time failure, 2 bad configuration.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/common/wc_fleet.h"
#include "apps/common/wc_model.h"

extern char **environ;

#define ZIPF_S 1.1
#define POOL_KEYS (1u << 18) /* pre-drawn keys; a request is a random window of them */
#define MAX_SAMPLES (1u << 20)
#define WARMUP_REQS 20u
#define BENCH_LR 0.01f

enum { O_KEYS = 1000, O_DIM, O_BATCH, O_SECONDS, O_START_AT, O_MODEL_FILE, O_TABLE };

struct pb_opts {
	unsigned long long keys;
	unsigned dim, batch, seconds;
	double start_at;
	const char *model_file, *table_name;
	bool dim_set;
	uint32_t table;      /* the table benched: 0, or the model file's */
};

static const struct option pb_longopts[] = {
	{ "keys", required_argument, NULL, O_KEYS },
	{ "dim", required_argument, NULL, O_DIM },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "seconds", required_argument, NULL, O_SECONDS },
	{ "start-at", required_argument, NULL, O_START_AT },
	{ "model-file", required_argument, NULL, O_MODEL_FILE },
	{ "table", required_argument, NULL, O_TABLE },
	{ NULL, 0, NULL, 0 },
};

static const char pb_usage[] =
	"ps-bench options (give both roles the same --dim and --batch):\n"
	"  --keys N        id space the keys are drawn from, Zipf s=1.1 (default 10000000)\n"
	"  --dim D         embedding dim of the sparse table (default 16)\n"
	"  --batch K       keys per request (default 1000, at most 65536)\n"
	"  --seconds S     length of each timed phase, pull then push (default 3)\n"
	"  --start-at T    worker: begin the timed phases at Unix time T (seconds)\n"
	"  --model-file F  the model of JSON model file F (docs/api.md) instead of one table;\n"
	"                  the dim is the benched table's (no --dim)\n"
	"  --table NAME    with --model-file: the sparse table benched (default: the first)\n"
	"  the cluster must be in --mode async (pushes applied on arrival)\n";

static int pb_on_opt(void *ctx, int val, const char *arg, char *err, size_t errlen)
{
	struct pb_opts *o = ctx;
	unsigned v;
	char *end;
	int rc;

	switch (val) {
	case O_KEYS:
		errno = 0;
		o->keys = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || o->keys < 1000 || o->keys > (1ull << 40)) {
			snprintf(err, errlen, "--keys: expected 1000..2^40, got '%s'", arg);
			return -EINVAL;
		}
		return 0;
	case O_DIM:
		o->dim_set = true;
		return wc_parse_uint(arg, 1, 1024, &o->dim, "--dim", err, errlen);
	case O_MODEL_FILE: o->model_file = arg; return 0;
	case O_TABLE: o->table_name = arg; return 0;
	case O_BATCH: return wc_parse_uint(arg, 1, 65536, &o->batch, "--batch", err, errlen);
	case O_SECONDS: return wc_parse_uint(arg, 1, 3600, &o->seconds, "--seconds", err, errlen);
	case O_START_AT:
		rc = wc_parse_uint(arg, 0, 0xffffffffu, &v, "--start-at", err, errlen);
		o->start_at = v;
		return rc;
	}
	snprintf(err, errlen, "unknown option %d", val);
	return -EINVAL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Model file F's tables; the benched one by name, or the first sparse one. */
static int pb_file_tables(struct pb_opts *o, struct wc_model_tables *mt, char *err, size_t errlen)
{
	int rc, id = -ENOENT;

	if (o->dim_set)
		return snprintf(err, errlen, "--dim: the benched table's dim is the model file's; "
				"drop --dim with --model-file") > 0 ? -EINVAL : -EINVAL;
	if ((rc = wc_model_file_load(o->model_file, mt, err, errlen)) != 0)
		return rc;
	if (o->table_name != NULL && (id = wc_model_tables_find(mt, o->table_name)) < 0)
		snprintf(err, errlen, "--table %s: %s has no such table", o->table_name, o->model_file);
	for (uint32_t i = 0; o->table_name == NULL && i < mt->n && id < 0; i++)
		if (mt->t[i].kind == PS_TABLE_SPARSE)
			id = (int)i;
	if (o->table_name == NULL && id < 0)
		snprintf(err, errlen, "%s: no sparse table to bench", o->model_file);
	if (id >= 0 && mt->t[id].kind != PS_TABLE_SPARSE) {
		snprintf(err, errlen, "--table %s: a dense table; ps-bench pulls and pushes keys of a "
			 "sparse one", mt->name[id]);
		id = -EINVAL;
	}
	if (id < 0) {
		wc_model_tables_free(mt);
		return -EINVAL;
	}
	o->table = (uint32_t)id;
	o->dim = mt->t[id].dim;
	return 0;
}

/*
 * The tables both roles agree on: one sparse table of dim D, SGD (or model file F's);
 * messages sized for K keys.
 */
static int pb_tables(struct pb_opts *o, struct wc_model_tables *mt, char *err, size_t errlen)
{
	struct ps_table_config t;
	int rc;

	if (o->table_name != NULL && o->model_file == NULL)
		return snprintf(err, errlen, "--table: only with --model-file") > 0 ? -EINVAL : -EINVAL;
	if (o->model_file != NULL) {
		if ((rc = pb_file_tables(o, mt, err, errlen)) != 0)
			return rc;
	} else {
		wc_model_tables_init(mt);
		wc_model_table_defaults(&t);
		t.dim = o->dim;
		t.op.lr = BENCH_LR;
		if ((rc = wc_model_tables_add(mt, &t, "bench", err, errlen)) != 0)
			goto out_free;
	}
	if ((rc = wc_model_tables_set_max_keys(mt, o->batch, err, errlen)) != 0)
		goto out_free;
	if (wc_model_req_rows(mt, o->table) < o->batch) {
		rc = -E2BIG;
		snprintf(err, errlen, "--batch %u --dim %u: a request would exceed %u MiB; at most "
			 "%u keys of dim %u", o->batch, o->dim, WC_MODEL_REQ_BYTES >> 20,
			 wc_model_req_rows(mt, o->table), o->dim);
		goto out_free;
	}
	return 0;
out_free:
	wc_model_tables_free(mt);
	return rc;
}

/*
 * Zipf ranks by inverting the continuous CDF of x^-s on [1, n+1): rank k gets the mass of
 * [k, k+1), which is k^-s up to a factor that tends to 1 — the heavy head and long tail a
 * CTR id stream has, without tables of n entries. Ranks are hashed so hot ids spread over
 * servers and shards as real ids do.
 */
static void draw_keys(uint64_t *pool, unsigned n, unsigned long long space, uint64_t seed)
{
	double a = 1.0 - ZIPF_S, hmax = (pow((double)space + 1.0, a) - 1.0) / a;
	struct wc_rng r;
	unsigned i;

	wc_rng_seed(&r, seed);
	for (i = 0; i < n; i++) {
		double x = pow(1.0 + wc_rng_uniform(&r) * hmax * a, 1.0 / a);
		uint64_t rank = (uint64_t)x;
		if (rank < 1)
			rank = 1;
		if (rank > space)
			rank = space;
		pool[i] = wc_mix64(rank);
	}
}

struct pb_phase {
	const char *name;
	bool push;
	uint64_t reqs, keys;
	double secs, p50_us, p99_us;
};

struct pb_run {
	struct wc_fleet *f;
	const struct pb_opts *o;
	uint64_t *pool;
	float *grads, *vals;
	double *lat;
	struct wc_rng r;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One request, retried across a server restart (a push is never applied twice). */
static int one_request(struct pb_run *b, bool push)
{
	const struct ps_client_io *io;
	struct ps_client *pc = wc_fleet_client(b->f, &io);
	const uint64_t *keys = b->pool + wc_rng_below(&b->r, POOL_KEYS - b->o->batch + 1);
	int rc;

	do {
		rc = push ? ps_client_push_wait(pc, io, b->o->table, b->o->dim, keys, b->o->batch,
						b->grads)
			  : ps_client_pull_wait(pc, io, b->o->table, b->o->dim, keys, b->o->batch,
						b->vals);
	} while (rc != 0 && (rc = wc_fleet_recover(b->f, rc)) == 0);
	return rc;
}

static int bench_phase(struct pb_run *b, struct pb_phase *ph)
{
	double t0, t1, end;
	uint64_t n = 0;
	unsigned i;
	int rc;

	for (i = 0; i < WARMUP_REQS; i++)
		if ((rc = one_request(b, ph->push)) != 0)
			return rc;
	t0 = now_s();
	end = t0 + b->o->seconds;
	for (t1 = t0; t1 < end;) {
		double s = t1;
		if ((rc = one_request(b, ph->push)) != 0)
			return rc;
		t1 = now_s();
		if (n < MAX_SAMPLES)
			b->lat[n] = (t1 - s) * 1e6;
		n++;
		if ((n & 63) == 0 && wc_fleet_signalled(b->f))
			return -ECANCELED;
	}
	ph->reqs = n;
	ph->keys = n * b->o->batch;
	ph->secs = t1 - t0;
	n = n < MAX_SAMPLES ? n : MAX_SAMPLES;
	qsort(b->lat, n, sizeof(double), cmp_double);
	ph->p50_us = n ? b->lat[(n - 1) / 2] : 0;
	ph->p99_us = n ? b->lat[(n - 1) * 99 / 100] : 0;
	return 0;
}

static void wait_start(double start_at)
{
	struct timespec ts;
	double now, d;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	if (start_at <= 0)
		return;
	d = start_at - now;
	if (d <= 0) {
		fprintf(stderr, "wharf-ps-bench: --start-at was %.1f s ago; starting now\n", -d);
		return;
	}
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static void print_json(struct wc_fleet *f, const struct pb_opts *o, const struct pb_phase *ph)
{
	const struct wc_cluster *cl = wc_fleet_cluster(f);
	unsigned i;

	printf("{\"bench\":\"ps\",\"worker\":%u,\"workers\":%u,\"servers\":%u,\"protocol\":\"%s\","
	       "\"tensor_fuse\":%s,\"mode\":\"%s\",\"table\":%u,\"dim\":%u,\"batch\":%u,"
	       "\"key_space\":%llu,\"zipf_s\":%.1f,\"seconds\":%u", wc_fleet_index(f),
	       cl->n_workers, cl->n_ps, wc_protocol_name(cl->protocol),
	       cl->tensor_fuse ? "true" : "false", wc_mode_name(cl->mode), o->table, o->dim,
	       o->batch, o->keys, ZIPF_S, o->seconds);
	for (i = 0; i < 2; i++)
		printf(",\"%s_requests\":%llu,\"%s_keys_per_s\":%.0f,\"%s_p50_us\":%.1f,"
		       "\"%s_p99_us\":%.1f", ph[i].name, (unsigned long long)ph[i].reqs, ph[i].name,
		       ph[i].secs > 0 ? (double)ph[i].keys / ph[i].secs : 0.0, ph[i].name,
		       ph[i].p50_us, ph[i].name, ph[i].p99_us);
	printf("}\n");
	fflush(stdout);
}

static int pb_worker(struct wc_fleet *f, const struct pb_opts *o, const struct wc_model_tables *mt)
{
	struct pb_phase ph[2] = { { "pull", false, 0, 0, 0, 0, 0 }, { "push", true, 0, 0, 0, 0, 0 } };
	struct pb_run b = { f, o, NULL, NULL, NULL, NULL, { { 0 } } };
	unsigned i;
	int rc = -ENOMEM;

	b.pool = malloc(POOL_KEYS * sizeof(uint64_t));
	b.grads = malloc((size_t)o->batch * o->dim * sizeof(float));
	b.vals = malloc((size_t)o->batch * o->dim * sizeof(float));
	b.lat = malloc(MAX_SAMPLES * sizeof(double));
	if (b.pool == NULL || b.grads == NULL || b.vals == NULL || b.lat == NULL) {
		fprintf(stderr, "wharf-ps-bench: out of memory\n");
		goto out;
	}
	wc_rng_seed(&b.r, 1000 + wc_fleet_index(f));
	draw_keys(b.pool, POOL_KEYS, o->keys, 7 + wc_fleet_index(f));
	for (i = 0; i < o->batch * o->dim; i++)
		b.grads[i] = (float)(wc_rng_uniform(&b.r) - 0.5);
	if ((rc = wc_fleet_init_worker(f, mt)) != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", wc_fleet_error(f));
		goto out;
	}
	wait_start(o->start_at);
	for (i = 0; i < 2 && rc == 0; i++)
		if ((rc = bench_phase(&b, &ph[i])) != 0)
			fprintf(stderr, "wharf-ps-bench: %s phase: %s (%s)\n", ph[i].name,
				strerror(-rc), wc_fleet_error(f));
	if (rc == 0)
		print_json(f, o, ph);
	wc_fleet_stop_worker(f);
out:
	free(b.pool);
	free(b.grads);
	free(b.vals);
	free(b.lat);
	return rc;
}

int main(int argc, char **argv)
{
	struct pb_opts o = { 10000000ull, 16, 1000, 3, 0, NULL, NULL, false, 0 };
	struct wc_app_opts app = { pb_longopts, pb_usage, pb_on_opt, &o };
	struct wc_model_tables mt;
	struct wc_fleet *f = NULL;
	char err[1024];
	bool help = false;
	int rc;

	rc = wc_fleet_init_app(argc, argv, environ, &app, "wharf-ps-bench", &help, &f, err,
			       sizeof(err));
	if (rc == 0 && help) {
		printf("usage: wharf-ps-bench [EAL args] -- [options]\n%s%s", wc_flags_usage(),
		       pb_usage);
		return 0;
	}
	if (rc == 0 && wc_fleet_cluster(f)->mode != WC_MODE_ASYNC) {
		rc = -EINVAL;
		snprintf(err, sizeof(err), "mode %s: ps-bench measures pushes applied on arrival; "
			 "expected --mode async (or WHARF_MODE=async)",
			 wc_mode_name(wc_fleet_cluster(f)->mode));
	}
	if (rc != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", err);
		wc_fleet_destroy(f);
		return 2;
	}
	if ((rc = pb_tables(&o, &mt, err, sizeof(err))) != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", err);
		wc_fleet_destroy(f);
		return 2;
	}
	if (wc_fleet_is_server(f)) {
		if ((rc = wc_fleet_init_server(f, &mt)) == 0)
			rc = wc_fleet_run_server(f);
		if (rc != 0)
			fprintf(stderr, "wharf-ps-bench: %s\n", wc_fleet_error(f));
	} else {
		rc = pb_worker(f, &o, &mt);
	}
	wc_model_tables_free(&mt);
	wc_fleet_destroy(f);
	return rc == 0 ? 0 : 1;
}
