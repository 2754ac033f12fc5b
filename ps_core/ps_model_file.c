/*
 * ps_model_file.c — a model file: the tables of a job in JSON (docs/api.md, "Model files").
 *
 *   {"tables": [{"name": "emb", "kind": "sparse", "dim": 16, "optimizer": "adagrad",
 *                "lr": 0.05, "eps": 1e-8, "init": "normal", "init_a": 0, "init_b": 0.01,
 *                "max_bytes": 1073741824, "admit_after": 2, "evict_after": 100000},
 *               {"name": "fc", "kind": "dense", "rows": 16, "dim": 1}]}
 *
 * Call chain: wharf-psd --model-file / wharf_model_load -> ps_model_file_load ->
 * json_load_file (duplicate keys refused) -> one_table per entry -> ps_model_tables_add.
 * Syntax errors and duplicate keys carry FILE:LINE:COLUMN from jansson (which keeps no
 * position for values), a refused value "FILE: table I 'NAME': FIELD: why". Unknown keys,
 * and keys that mean nothing for the table's kind, optimizer or initializer, are refused so
 * a typo never falls back to a default.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "ps_core/ps_net.h"
#include "ps_core/ps_config_pvt.h"

static const char *const table_keys[] = {
	"name", "kind", "dim", "rows", "optimizer", "lr", "eps", "beta1", "beta2", "l1", "l2",
	"init_accum", "init", "init_a", "init_b", "seed", "max_rows", "max_bytes", "admit_after",
	"evict_after", "pull_inserts", NULL,
};

/* The keys each optimizer reads beyond lr. */
static const char *const optim_names[] = { "sgd", "adagrad", "adam", "ftrl" };
static const char *const optim_keys[][4] = {
	{ NULL }, { "eps", "init_accum", NULL }, { "eps", "beta1", "beta2", NULL },
	{ "beta1", "l1", "l2", NULL },
};
static const char *const init_names[] = { "zeros", "uniform", "normal" };

struct tctx {
	const char *src;
	size_t idx;
	const char *name; /* "" until read */
	char *err;
	size_t errlen;
};

static int terr(const struct tctx *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int terr(const struct tctx *c, int rc, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return ps_errf_rc(c->err, c->errlen, rc, "%s: table %zu%s%s%s: %s", c->src, c->idx,
		       c->name[0] ? " '" : "", c->name, c->name[0] ? "'" : "", why);
}

static int get_enum(const struct tctx *c, json_t *o, const char *key, const char *const *names,
		    unsigned n, unsigned *out)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (json_is_string(v))
		for (unsigned i = 0; i < n; i++)
			if (strcmp(json_string_value(v), names[i]) == 0) {
				*out = i;
				return 0;
			}
	if (n == 2)
		return terr(c, -EINVAL, "%s: expected \"%s\" or \"%s\"", key, names[0], names[1]);
	if (n == 3)
		return terr(c, -EINVAL, "%s: expected \"%s\", \"%s\" or \"%s\"", key, names[0],
			    names[1], names[2]);
	return terr(c, -EINVAL, "%s: expected \"%s\", \"%s\", \"%s\" or \"%s\"", key, names[0],
		    names[1], names[2], names[3]);
}

static int get_uint(const struct tctx *c, json_t *o, const char *key, uint64_t max,
		    uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return terr(c, -EINVAL, "%s: expected an integer in 0..%llu", key,
			    (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_float(const struct tctx *c, json_t *o, const char *key, float *out)
{
	json_t *v = json_object_get(o, key);
	double d;

	if (v == NULL)
		return 0;
	d = json_number_value(v);
	if (!json_is_number(v) || !isfinite(d) || fabs(d) > 3.0e38)
		return terr(c, -EINVAL, "%s: expected a number", key);
	*out = (float)d;
	return 0;
}

static int get_bool(const struct tctx *c, json_t *o, const char *key, bool *out)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_boolean(v))
		return terr(c, -EINVAL, "%s: expected true or false", key);
	*out = json_is_true(v);
	return 0;
}

static bool listed(const char *const *list, const char *key)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* A key the table's kind, optimizer or initializer does not read is a mistake: refuse it. */
static int check_relevant(const struct tctx *c, json_t *o, const struct ps_table_config *t)
{
	static const char *const opt_all[] = { "eps", "beta1", "beta2", "l1", "l2", "init_accum",
					       NULL };
	static const char *const init_ab[] = { "init_a", "init_b", NULL };
	static const char *const memory[] = { "max_rows", "max_bytes", "admit_after",
					      "evict_after", "pull_inserts", NULL };
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		if (strcmp(key, "rows") == 0 && t->kind != PS_TABLE_DENSE)
			return terr(c, -EINVAL, "rows: only a dense table has rows");
		if (listed(memory, key) && t->kind == PS_TABLE_DENSE)
			return terr(c, -EINVAL, "%s: only a sparse table has memory policies (a "
				    "dense one holds all its rows)", key);
		if (listed(opt_all, key) && !listed(optim_keys[t->optim], key))
			return terr(c, -EINVAL, "%s: not a parameter of %s", key,
				    optim_names[t->optim]);
		if (listed(init_ab, key) && t->init == PS_INIT_ZEROS)
			return terr(c, -EINVAL, "%s: not a parameter of init \"zeros\"", key);
	}
	return 0;
}

static int one_table(json_t *o, struct tctx *c, struct ps_model_tables *out)
{
	struct ps_table_config t;
	unsigned kind = PS_TABLE_SPARSE, optim = PS_OPT_SGD, init = PS_INIT_ZEROS;
	uint64_t dim = 1, rows = 0, seed, admit = 0;
	json_t *name;
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(o))
		return terr(c, -EINVAL, "expected an object {\"name\": ..., \"dim\": ...}");
	name = json_object_get(o, "name");
	if (name == NULL)
		return terr(c, -EINVAL, "name: missing (every table has one)");
	if (!json_is_string(name))
		return terr(c, -EINVAL, "name: expected a string");
	c->name = json_string_value(name);
	json_object_foreach(o, key, v)
		if (!listed(table_keys, key))
			return terr(c, -EINVAL, "unknown key '%s'", key);
	ps_model_table_defaults(&t);
	seed = t.seed;
	if ((rc = get_enum(c, o, "kind", (const char *const[]){ "sparse", "dense" }, 2, &kind)) ||
	    (rc = get_uint(c, o, "dim", UINT32_MAX, &dim)) ||
	    (rc = get_uint(c, o, "rows", UINT64_MAX >> 1, &rows)) ||
	    (rc = get_enum(c, o, "optimizer", optim_names, 4, &optim)) ||
	    (rc = get_float(c, o, "lr", &t.op.lr)) || (rc = get_float(c, o, "eps", &t.op.eps)) ||
	    (rc = get_float(c, o, "beta1", &t.op.beta1)) ||
	    (rc = get_float(c, o, "beta2", &t.op.beta2)) ||
	    (rc = get_float(c, o, "l1", &t.op.l1)) || (rc = get_float(c, o, "l2", &t.op.l2)) ||
	    (rc = get_float(c, o, "init_accum", &t.op.init_accum)) ||
	    (rc = get_enum(c, o, "init", init_names, 3, &init)) ||
	    (rc = get_float(c, o, "init_a", &t.init_a)) ||
	    (rc = get_float(c, o, "init_b", &t.init_b)) ||
	    (rc = get_uint(c, o, "seed", UINT64_MAX >> 1, &seed)) ||
	    (rc = get_uint(c, o, "max_rows", PS_MODEL_MAX_CAP_ROWS, &t.max_rows)) ||
	    (rc = get_uint(c, o, "max_bytes", PS_MODEL_MAX_CAP_BYTES, &t.max_bytes)) ||
	    (rc = get_uint(c, o, "admit_after", PS_ADMIT_MAX, &admit)) ||
	    (rc = get_uint(c, o, "evict_after", PS_EVICT_MAX, &t.evict_after)) ||
	    (rc = get_bool(c, o, "pull_inserts", &t.pull_inserts)))
		return rc;
	t.admit_after = (uint32_t)admit;
	t.kind = (enum ps_table_kind)kind;
	t.dim = (uint32_t)dim;
	t.dense_rows = rows;
	t.optim = (enum ps_optim_kind)optim;
	t.init = (enum ps_init_kind)init;
	t.seed = seed;
	if (t.kind == PS_TABLE_DENSE && json_object_get(o, "rows") == NULL)
		return terr(c, -EINVAL, "rows: missing (a dense table needs its rows)");
	if ((rc = check_relevant(c, o, &t)) != 0)
		return rc;
	if (dim > PS_MODEL_MAX_DIM) /* before the cast: 2^32 + 1 must not pass as 1 */
		return terr(c, -EINVAL, "dim: %llu outside 1..%u", (unsigned long long)dim,
			    PS_MODEL_MAX_DIM);
	/* The checks themselves (and their messages) are ps_model_tables_add's. */
	rc = ps_model_tables_add(out, &t, c->name, c->err, c->errlen);
	if (rc != 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", c->err != NULL ? c->err : "");
		return ps_errf_rc(c->err, c->errlen, rc, "%s: %s", c->src, why);
	}
	return 0;
}

static int model_root(json_t *root, const char *src, struct ps_model_tables *out, char *err,
		      size_t errlen)
{
	struct tctx c = { src, 0, "", err, errlen };
	json_t *tables, *o;
	const char *key;
	size_t i;
	int rc;

	if (!json_is_object(root))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: expected an object {\"tables\": [...]}", src);
	json_object_foreach(root, key, o)
		if (strcmp(key, "tables") != 0)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: unknown key '%s' (a model file "
				       "holds \"tables\" only)", src, key);
	tables = json_object_get(root, "tables");
	if (!json_is_array(tables) || json_array_size(tables) == 0)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: tables: expected an array of 1..%u table "
			       "objects", src, PS_MODEL_MAX_TABLES);
	if (json_array_size(tables) > PS_MODEL_MAX_TABLES)
		return ps_errf_rc(err, errlen, -E2BIG, "%s: tables: %zu tables; a model has at most %u",
			       src, json_array_size(tables), PS_MODEL_MAX_TABLES);
	json_array_foreach(tables, i, o) {
		c.idx = i;
		c.name = "";
		if ((rc = one_table(o, &c, out)) != 0)
			return rc;
	}
	return 0;
}

/* open_errno: errno of a file that could not be opened. */
static int from_json(json_t *root, const json_error_t *je, int open_errno, const char *src,
		     struct ps_model_tables *out, char *err, size_t errlen)
{
	int rc;

	ps_model_tables_init(out);
	if (root == NULL) {
		if (json_error_code(je) == json_error_cannot_open_file)
			return ps_errf_rc(err, errlen, open_errno ? -open_errno : -EIO, "%s: %s", src,
				       je->text);
		return ps_errf_rc(err, errlen, -EINVAL, "%s:%d:%d: %s", src, je->line, je->column,
			       je->text);
	}
	rc = model_root(root, src, out, err, errlen);
	json_decref(root);
	if (rc != 0)
		ps_model_tables_free(out);
	return rc;
}

int ps_model_file_load(const char *path, struct ps_model_tables *out, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	errno = 0;
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	return from_json(root, &je, errno, path, out, err, errlen);
}

int ps_model_file_parse(const char *text, const char *name, struct ps_model_tables *out,
			char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);

	return from_json(root, &je, 0, name, out, err, errlen);
}
