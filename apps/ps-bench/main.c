/*
 * wharf-ps-bench — PS pull, push and push-pull throughput, goodput and latency over the
 * network, one binary for both roles through the fleet API (ps_fleet.h): its role comes from
 * the environment (TRAINING_ROLE=PSERVER|TRAINER and Paddle's other variables, TF_CONFIG, or
 * flags).
 *
 *   wharf-ps-bench [EAL args] -- [cluster flags] --mode async [--keys N] [--dim D]
 *                  [--batch K[,K..]] [--inflight N[,N..]] [--ops OP[,OP..]]
 *                  [--kind sparse|dense[,..]] [--dense-rows R] [--seconds S] [--start-at T]
 *                  [--model-file F [--table NAME]]
 *
 * Server: one sparse table of dim D (SGD, rows zero at first touch), with --kind dense also a
 * dense table of R rows of dim D, or the tables of model file F; served until
 * `wharf-ctl HOST:PORT shutdown` or SIGINT/SIGTERM.
 * Worker: one timed phase of S seconds for every point of the sweep kind x batch x inflight x
 * op (pb_run.c): requests of K keys drawn Zipf (s = 1.1) over N ids (dense: K rows at a
 * random offset), N of them in flight. Prints one JSON line: every phase's requests, keys/s,
 * goodput and p50/p99 per request, and, when the sweep has one kind, batch and inflight,
 * each op's figures at the top level as before ("pull_keys_per_s", ...).
 * --start-at (Unix time, seconds) lets several workers start their timed phases together.
 *
 * Call chain: main -> ps_fleet_init_app -> ps_fleet_init_server + ps_fleet_run_server |
 *   pb_worker_run (pb_run.c) -> print_json.
 * A worker stopped by SIGINT or SIGTERM prints the phases it finished ("stopped": true) and
 * exits with status 3.
 * Exit status: 0 done, 1 run-time failure, 2 bad configuration, 3 a worker stopped by a signal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/ps-bench/pb.h"

extern char **environ;

#define ZIPF_S 1.1
#define BENCH_LR 0.01f
#define DENSE_ROWS_DEF 4096u

const char *const pb_kind_name[PB_KINDS] = { "sparse", "dense" };
const char *const pb_op_name[PB_OPS] = { "pull", "push", "push-pull" };
const char *const pb_op_field[PB_OPS] = { "pull", "push", "push_pull" };

enum { O_KEYS = 1000, O_DIM, O_BATCH, O_SECONDS, O_START_AT, O_MODEL_FILE, O_TABLE, O_INFLIGHT,
       O_OPS, O_KIND, O_DENSE_ROWS };

static const struct option pb_longopts[] = {
	{ "keys", required_argument, NULL, O_KEYS },
	{ "dim", required_argument, NULL, O_DIM },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "seconds", required_argument, NULL, O_SECONDS },
	{ "start-at", required_argument, NULL, O_START_AT },
	{ "model-file", required_argument, NULL, O_MODEL_FILE },
	{ "table", required_argument, NULL, O_TABLE },
	{ "inflight", required_argument, NULL, O_INFLIGHT },
	{ "ops", required_argument, NULL, O_OPS },
	{ "kind", required_argument, NULL, O_KIND },
	{ "dense-rows", required_argument, NULL, O_DENSE_ROWS },
	{ NULL, 0, NULL, 0 },
};

static const char pb_usage[] =
	"ps-bench options (give both roles the same --dim, --batch, --kind and --dense-rows);\n"
	"a LIST is comma-separated, at most 8 values, and every combination is one timed phase:\n"
	"  --keys N        id space the keys are drawn from, Zipf s=1.1 (default 10000000)\n"
	"  --dim D         embedding dim of the tables (default 16)\n"
	"  --batch LIST    keys (dense: rows) per request (default 1000, each at most 65536)\n"
	"  --inflight LIST requests in flight at once (default 1, each at most 64)\n"
	"  --ops LIST      pull, push, push-pull (default pull,push; a dense push-pull is a\n"
	"                  dense push and a dense pull of the same rows, sent back to back)\n"
	"  --kind LIST     sparse, dense: the table benched (default sparse)\n"
	"  --dense-rows R  rows of the dense table (default 4096, at least the largest batch)\n"
	"  --seconds S     length of each timed phase (default 3)\n"
	"  --start-at T    worker: begin the timed phases at Unix time T (seconds)\n"
	"  --model-file F  the model of JSON model file F (docs/api.md) instead of one table;\n"
	"                  the dim is the benched table's (no --dim; sparse only)\n"
	"  --table NAME    with --model-file: the sparse table benched (default: the first)\n"
	"  the cluster must be in --mode async (pushes applied on arrival)\n";

/* One comma-separated list item: its index among names, else -EINVAL naming the option. */
static int pick(const char *item, const char *const *names, unsigned n, const char *what,
		char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (strcmp(item, names[i]) == 0)
			return (int)i;
	snprintf(err, errlen, "%s: '%.32s' is not one of", what, item);
	for (i = 0; i < n; i++)
		snprintf(err + strlen(err), errlen - strlen(err), "%s %s", i ? "," : "", names[i]);
	return -EINVAL;
}

/*
 * A comma-separated LIST into out[0..*n): numbers in lo..hi (names == NULL) or indexes of
 * names; a value given twice or more than max values are refused. *n untouched on failure.
 */
static int parse_list(const char *arg, const char *const *names, unsigned lo, unsigned hi,
		      unsigned *out, unsigned *n, unsigned max, const char *what, char *err,
		      size_t errlen)
{
	unsigned v[PB_MAX_LIST], cnt = 0, i;
	char buf[256], *save = NULL, *tok;
	int rc;

	if (strlen(arg) >= sizeof(buf) || arg[0] == '\0' || arg[strlen(arg) - 1] == ',' ||
	    strstr(arg, ",,") != NULL || arg[0] == ',')
		return snprintf(err, errlen, "%s: '%.64s' expected a comma-separated list", what,
				arg) > 0 ? -EINVAL : -EINVAL;
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (cnt == max)
			return snprintf(err, errlen, "%s: at most %u values", what, max) > 0 ?
				-EINVAL : -EINVAL;
		if (names != NULL) {
			if ((rc = pick(tok, names, hi, what, err, errlen)) < 0)
				return rc;
			v[cnt] = (unsigned)rc;
		} else if ((rc = ps_parse_uint(tok, lo, hi, &v[cnt], what, err, errlen)) != 0) {
			return rc;
		}
		for (i = 0; i < cnt; i++)
			if (v[i] == v[cnt])
				return snprintf(err, errlen, "%s: '%s' given twice", what, tok) > 0 ?
					-EINVAL : -EINVAL;
		cnt++;
	}
	memcpy(out, v, cnt * sizeof(*v));
	*n = cnt;
	return 0;
}

static int pb_on_opt(void *ctx, int val, const char *arg, char *err, size_t errlen)
{
	struct pb_opts *o = ctx;
	unsigned v[PB_MAX_LIST], n, i;
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
		return ps_parse_uint(arg, 1, 1024, &o->dim, "--dim", err, errlen);
	case O_MODEL_FILE: o->model_file = arg; return 0;
	case O_TABLE: o->table_name = arg; return 0;
	case O_BATCH:
		return parse_list(arg, NULL, 1, 65536, o->batch, &o->n_batch, PB_MAX_LIST, "--batch",
				  err, errlen);
	case O_INFLIGHT:
		return parse_list(arg, NULL, 1, PB_MAX_INFLIGHT, o->inflight, &o->n_inflight,
				  PB_MAX_LIST, "--inflight", err, errlen);
	case O_OPS:
		if ((rc = parse_list(arg, pb_op_name, 0, PB_OPS, v, &n, PB_OPS, "--ops", err,
				     errlen)) != 0)
			return rc;
		for (i = 0, o->n_op = n; i < n; i++)
			o->op[i] = (enum pb_op)v[i];
		return 0;
	case O_KIND:
		if ((rc = parse_list(arg, pb_kind_name, 0, PB_KINDS, v, &n, PB_KINDS, "--kind", err,
				     errlen)) != 0)
			return rc;
		for (i = 0, o->n_kind = n; i < n; i++)
			o->kind[i] = (enum pb_kind)v[i];
		return 0;
	case O_DENSE_ROWS:
		return ps_parse_uint(arg, 1, 1u << 24, &o->dense_rows, "--dense-rows", err, errlen);
	case O_SECONDS: return ps_parse_uint(arg, 1, 3600, &o->seconds, "--seconds", err, errlen);
	case O_START_AT:
		rc = ps_parse_uint(arg, 0, 0xffffffffu, &v[0], "--start-at", err, errlen);
		o->start_at = v[0];
		return rc;
	}
	snprintf(err, errlen, "unknown option %d", val);
	return -EINVAL;
}

static bool has_kind(const struct pb_opts *o, enum pb_kind k)
{
	unsigned i;

	for (i = 0; i < o->n_kind; i++)
		if (o->kind[i] == k)
			return true;
	return false;
}

static unsigned max_batch(const struct pb_opts *o)
{
	unsigned i, m = 0;

	for (i = 0; i < o->n_batch; i++)
		m = o->batch[i] > m ? o->batch[i] : m;
	return m;
}

/* Model file F's tables; the benched one by name, or the first sparse one. */
static int pb_file_tables(struct pb_opts *o, struct ps_model_tables *mt, char *err, size_t errlen)
{
	int rc, id = -ENOENT;

	if (o->dim_set)
		return snprintf(err, errlen, "--dim: the benched table's dim is the model file's; "
				"drop --dim with --model-file") > 0 ? -EINVAL : -EINVAL;
	if (has_kind(o, PB_DENSE))
		return snprintf(err, errlen, "--kind dense: with --model-file only the file's "
				"sparse table is benched") > 0 ? -EINVAL : -EINVAL;
	if ((rc = ps_model_file_load(o->model_file, mt, err, errlen)) != 0)
		return rc;
	if (o->table_name != NULL && (id = ps_model_tables_find(mt, o->table_name)) < 0)
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
		ps_model_tables_free(mt);
		return -EINVAL;
	}
	o->table[PB_SPARSE] = (uint32_t)id;
	o->dim = mt->t[id].dim;
	return 0;
}

/* The built-in tables: sparse "bench" (id 0), and with --kind dense a dense "dense" (id 1). */
static int pb_own_tables(struct pb_opts *o, struct ps_model_tables *mt, char *err, size_t errlen)
{
	struct ps_table_config t;
	int rc;

	ps_model_tables_init(mt);
	ps_model_table_defaults(&t);
	t.dim = o->dim;
	t.op.lr = BENCH_LR;
	if ((rc = ps_model_tables_add(mt, &t, "bench", err, errlen)) != 0)
		return rc;
	o->table[PB_SPARSE] = 0;
	if (!has_kind(o, PB_DENSE))
		return 0;
	if (o->dense_rows < max_batch(o))
		return snprintf(err, errlen, "--dense-rows %u: fewer rows than --batch %u",
				o->dense_rows, max_batch(o)) > 0 ? -EINVAL : -EINVAL;
	t.kind = PS_TABLE_DENSE;
	t.dense_rows = o->dense_rows;
	o->table[PB_DENSE] = 1;
	return ps_model_tables_add(mt, &t, "dense", err, errlen);
}

/*
 * The tables both roles agree on: one sparse table of dim D, SGD, and a dense one with
 * --kind dense (or model file F's); messages sized for the largest batch.
 */
static int pb_tables(struct pb_opts *o, struct ps_model_tables *mt, char *err, size_t errlen)
{
	unsigned k, mb = max_batch(o);
	int rc;

	if (o->table_name != NULL && o->model_file == NULL)
		return snprintf(err, errlen, "--table: only with --model-file") > 0 ? -EINVAL : -EINVAL;
	if (o->model_file != NULL) {
		if ((rc = pb_file_tables(o, mt, err, errlen)) != 0)
			return rc;
	} else if ((rc = pb_own_tables(o, mt, err, errlen)) != 0) {
		goto out_free;
	}
	if ((rc = ps_model_tables_set_max_keys(mt, mb, err, errlen)) != 0)
		goto out_free;
	for (k = 0; k < o->n_kind; k++) {
		uint32_t id = o->table[o->kind[k]];
		if (ps_model_req_rows(mt, id) >= mb)
			continue;
		rc = -E2BIG;
		snprintf(err, errlen, "--batch %u --dim %u: a request would exceed %u MiB; at most "
			 "%u %s of dim %u", mb, o->dim, PS_MODEL_REQ_BYTES >> 20,
			 ps_model_req_rows(mt, id), o->kind[k] == PB_DENSE ? "rows" : "keys", o->dim);
		goto out_free;
	}
	return 0;
out_free:
	ps_model_tables_free(mt);
	return rc;
}

static void print_list(const char *name, const unsigned *v, unsigned n)
{
	unsigned i;

	printf(",\"%s\":[", name);
	for (i = 0; i < n; i++)
		printf("%s%u", i ? "," : "", v[i]);
	printf("]");
}

static double keys_per_s(const struct pb_phase *p)
{
	return p->secs > 0 ? (double)p->reqs * p->batch / p->secs : 0.0;
}

/* Goodput: the values one request carries each way (push-pull: up, and as much back). */
static double gbit_per_s(const struct pb_opts *o, const struct pb_phase *p)
{
	return keys_per_s(p) * o->dim * sizeof(float) * 8 / 1e9;
}

static void print_phase(const struct pb_opts *o, const struct pb_phase *p, bool first)
{
	printf("%s{\"kind\":\"%s\",\"table\":%u,\"op\":\"%s\",\"batch\":%u,\"inflight\":%u,"
	       "\"value_bytes\":%llu,\"requests\":%llu,\"seconds\":%.3f,\"keys_per_s\":%.0f,"
	       "\"gbit_per_s\":%.4f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_inflight\":%.2f}",
	       first ? "" : ",", pb_kind_name[p->kind], o->table[p->kind], pb_op_name[p->op],
	       p->batch, p->inflight, (unsigned long long)p->batch * o->dim * sizeof(float),
	       (unsigned long long)p->reqs, p->secs, keys_per_s(p), gbit_per_s(o, p), p->p50_us,
	       p->p99_us, p->secs > 0 ? p->lat_sum_us / (p->secs * 1e6) : 0.0);
}

/* count: the phases finished; fewer than the sweep's (stopped by a signal): "stopped". */
static void print_json(struct ps_fleet *f, const struct pb_opts *o, const struct pb_phase *ph,
		       unsigned count)
{
	const struct ps_cluster *cl = ps_fleet_cluster(f);
	bool one_point = count == o->n_op && pb_sweep_size(o) == o->n_op;
	unsigned i;

	printf("{\"bench\":\"ps\",\"worker\":%u,\"workers\":%u,\"servers\":%u,\"protocol\":\"%s\","
	       "\"tensor_fuse\":%s,\"mode\":\"%s\",\"table\":%u,\"dim\":%u", ps_fleet_index(f),
	       cl->n_workers, cl->n_ps, ps_protocol_name(cl->protocol),
	       cl->tensor_fuse ? "true" : "false", ps_job_mode_name(cl->mode), o->table[o->kind[0]],
	       o->dim);
	if (one_point)
		printf(",\"batch\":%u,\"inflight\":%u,\"kind\":\"%s\"", o->batch[0], o->inflight[0],
		       pb_kind_name[o->kind[0]]);
	printf(",\"key_space\":%llu,\"zipf_s\":%.1f,\"seconds\":%u", o->keys, ZIPF_S, o->seconds);
	if (has_kind(o, PB_DENSE))
		printf(",\"dense_rows\":%u", o->dense_rows);
	printf(",\"sweep\":{\"kinds\":[");
	for (i = 0; i < o->n_kind; i++)
		printf("%s\"%s\"", i ? "," : "", pb_kind_name[o->kind[i]]);
	printf("]");
	print_list("batches", o->batch, o->n_batch);
	print_list("inflights", o->inflight, o->n_inflight);
	printf(",\"ops\":[");
	for (i = 0; i < o->n_op; i++)
		printf("%s\"%s\"", i ? "," : "", pb_op_name[o->op[i]]);
	printf("]}");
	for (i = 0; one_point && i < count; i++) {
		const char *n = pb_op_field[ph[i].op];
		printf(",\"%s_requests\":%llu,\"%s_keys_per_s\":%.0f,\"%s_gbit_per_s\":%.4f,"
		       "\"%s_p50_us\":%.1f,\"%s_p99_us\":%.1f", n, (unsigned long long)ph[i].reqs,
		       n, keys_per_s(&ph[i]), n, gbit_per_s(o, &ph[i]), n, ph[i].p50_us, n,
		       ph[i].p99_us);
	}
	if (count < pb_sweep_size(o))
		printf(",\"stopped\":true");
	printf(",\"phases\":[");
	for (i = 0; i < count; i++)
		print_phase(o, &ph[i], i == 0);
	printf("]}\n");
	fflush(stdout);
}

static int pb_worker(struct ps_fleet *f, const struct pb_opts *o, const struct ps_model_tables *mt)
{
	unsigned count = pb_sweep_size(o);
	struct pb_phase *ph = calloc(count, sizeof(*ph));
	int rc;

	if (ph == NULL) {
		fprintf(stderr, "wharf-ps-bench: out of memory\n");
		return -ENOMEM;
	}
	unsigned done;

	rc = pb_worker_run(f, o, mt, ph, count, &done);
	/* Stopped by a signal: what it measured before is still worth printing. */
	if (rc == 0 || (rc == -ECANCELED && done > 0))
		print_json(f, o, ph, done);
	free(ph);
	return rc;
}

/* The list options' defaults, where not given. */
static void pb_defaults(struct pb_opts *o)
{
	if (o->n_batch == 0)
		o->batch[o->n_batch++] = 1000;
	if (o->n_inflight == 0)
		o->inflight[o->n_inflight++] = 1;
	if (o->n_op == 0) {
		o->op[o->n_op++] = PB_PULL;
		o->op[o->n_op++] = PB_PUSH;
	}
	if (o->n_kind == 0)
		o->kind[o->n_kind++] = PB_SPARSE;
}

int main(int argc, char **argv)
{
	struct pb_opts o = { .keys = 10000000ull, .dim = 16, .seconds = 3,
			     .dense_rows = DENSE_ROWS_DEF };
	struct ps_app_opts app = { pb_longopts, pb_usage, pb_on_opt, &o };
	struct ps_model_tables mt;
	struct ps_fleet *f = NULL;
	char err[1024];
	bool help = false;
	int rc;

	rc = ps_fleet_init_app(argc, argv, environ, &app, "wharf-ps-bench", &help, &f, err,
			       sizeof(err));
	if (rc == 0 && help) {
		printf("usage: wharf-ps-bench [EAL args] -- [options]\n%s%s", ps_flags_usage(),
		       pb_usage);
		return 0;
	}
	if (rc == 0 && ps_fleet_cluster(f)->mode != PS_JOB_ASYNC) {
		rc = -EINVAL;
		snprintf(err, sizeof(err), "mode %s: ps-bench measures pushes applied on arrival; "
			 "expected --mode async (or WHARF_MODE=async)",
			 ps_job_mode_name(ps_fleet_cluster(f)->mode));
	}
	if (rc != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", err);
		ps_fleet_destroy(f);
		return 2;
	}
	pb_defaults(&o);
	if ((rc = pb_tables(&o, &mt, err, sizeof(err))) != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", err);
		ps_fleet_destroy(f);
		return 2;
	}
	bool server = ps_fleet_is_server(f);

	if (server) {
		if ((rc = ps_fleet_init_server(f, &mt)) == 0)
			rc = ps_fleet_run_server(f);
		if (rc != 0)
			fprintf(stderr, "wharf-ps-bench: %s\n", ps_fleet_error(f));
	} else {
		rc = pb_worker(f, &o, &mt);
	}
	ps_model_tables_free(&mt);
	ps_fleet_destroy(f);
	return rc == 0 ? 0 : rc == -ECANCELED && !server ? 3 : 1;
}
