/*
 * ps_model_tables.c — a model as the PS and its workers see it: any number of named tables
 * (struct ps_model_tables), each checked before it is taken, the message size the model
 * needs, and the digest both sides compare so a worker never trains against another model.
 *
 * Call chain: wc_model_tables_make (built-in models) | ps_model_file_parse (JSON) | the
 * library's wharf_model_add -> ps_model_tables_add -> ps_model_table_check; then
 * ps_net_run_server / a worker's ps_net_create take ps_model_max_msg and
 * ps_model_digest. Start-up only.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_net.h"
#include "ps_core/ps_config_pvt.h"

void ps_model_tables_init(struct ps_model_tables *mt)
{
	memset(mt, 0, sizeof(*mt));
	mt->max_keys = PS_MODEL_DEF_MAX_KEYS;
}

void ps_model_tables_free(struct ps_model_tables *mt)
{
	if (mt == NULL)
		return;
	free(mt->t);
	free(mt->name);
	ps_model_tables_init(mt);
}

static int grow(struct ps_model_tables *mt, uint32_t want)
{
	struct ps_table_config *t;
	char (*name)[PS_MODEL_NAME_MAX];
	uint32_t cap = mt->cap ? mt->cap : 8;

	if (want <= mt->cap)
		return 0;
	while (cap < want)
		cap *= 2;
	t = realloc(mt->t, (size_t)cap * sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	mt->t = t;
	name = realloc(mt->name, (size_t)cap * sizeof(*name));
	if (name == NULL)
		return -ENOMEM;
	mt->name = name;
	mt->cap = cap;
	return 0;
}

int ps_model_tables_copy(struct ps_model_tables *dst, const struct ps_model_tables *src)
{
	ps_model_tables_init(dst);
	if (grow(dst, src->n) != 0) {
		ps_model_tables_free(dst);
		return -ENOMEM;
	}
	if (src->n > 0) {
		memcpy(dst->t, src->t, (size_t)src->n * sizeof(*dst->t));
		memcpy(dst->name, src->name, (size_t)src->n * sizeof(*dst->name));
	}
	dst->n = src->n;
	dst->max_keys = src->max_keys;
	return 0;
}

void ps_model_table_defaults(struct ps_table_config *t)
{
	memset(t, 0, sizeof(*t));
	t->kind = PS_TABLE_SPARSE;
	t->dim = 1;
	t->optim = PS_OPT_SGD;
	t->op.lr = 0.01f;
	t->op.eps = 1e-8f;
	t->op.beta1 = 0.9f;
	t->op.beta2 = 0.999f;
	t->init = PS_INIT_ZEROS;
	t->seed = 42;
}

static const char *const optim_names[] = { "sgd", "adagrad", "adam", "ftrl" };

/* v in [lo, hi] (lo_open: v > lo; hi_open: v < hi), else the field's line in err. */
static int in_range(float v, const char *field, double lo, bool lo_open, double hi,
		    bool hi_open, char *err, size_t errlen)
{
	if (isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi))
		return 0;
	return ps_errf_rc(err, errlen, -EINVAL, "%s: %g outside %c%g, %g%c", field, (double)v,
		       lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
}

static int check_name(const char *name, char *err, size_t errlen)
{
	size_t len = name != NULL ? strnlen(name, PS_MODEL_NAME_MAX) : 0;

	if (len == 0 || len >= PS_MODEL_NAME_MAX)
		return ps_errf_rc(err, errlen, -EINVAL, "name: expected 1..%u bytes",
			       PS_MODEL_NAME_MAX - 1);
	if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != len)
		return ps_errf_rc(err, errlen, -EINVAL, "name: '%s' has a character outside "
			       "[A-Za-z0-9_.-]", name);
	return 0;
}

/* The optimizer's own parameters (the others only need to be finite: the digest has them). */
static int check_optim(const struct ps_table_config *t, char *err, size_t errlen)
{
	const struct ps_optim_params *o = &t->op;
	const char *opt = optim_names[t->optim];
	char f[32];
	int rc = 0;

	snprintf(f, sizeof(f), "lr (%s)", opt);
	rc = in_range(o->lr, f, 0, true, 100, false, err, errlen);
	switch (t->optim) {
	case PS_OPT_SGD:
		break;
	case PS_OPT_ADAGRAD:
		if (rc == 0)
			rc = in_range(o->eps, "eps (adagrad)", 0, true, 1, false, err, errlen);
		if (rc == 0)
			rc = in_range(o->init_accum, "init_accum (adagrad)", 0, false, 1e6, false,
				      err, errlen);
		break;
	case PS_OPT_ADAM:
		if (rc == 0)
			rc = in_range(o->eps, "eps (adam)", 0, true, 1, false, err, errlen);
		if (rc == 0)
			rc = in_range(o->beta1, "beta1 (adam)", 0, false, 1, true, err, errlen);
		if (rc == 0)
			rc = in_range(o->beta2, "beta2 (adam)", 0, false, 1, true, err, errlen);
		break;
	case PS_OPT_FTRL:
		if (rc == 0)
			rc = in_range(o->beta1, "beta1 (ftrl's beta)", 0, false, 100, false, err,
				      errlen);
		if (rc == 0)
			rc = in_range(o->l1, "l1 (ftrl)", 0, false, 100, false, err, errlen);
		if (rc == 0)
			rc = in_range(o->l2, "l2 (ftrl)", 0, false, 100, false, err, errlen);
		break;
	}
	if (rc != 0)
		return rc;
	if (!isfinite(o->eps) || !isfinite(o->beta1) || !isfinite(o->beta2) ||
	    !isfinite(o->l1) || !isfinite(o->l2) || !isfinite(o->init_accum))
		return ps_errf_rc(err, errlen, -EINVAL, "optimizer parameters must be finite");
	return 0;
}

static int check_init(const struct ps_table_config *t, char *err, size_t errlen)
{
	int rc;

	if ((rc = in_range(t->init_a, "init_a", -1e6, false, 1e6, false, err, errlen)) != 0 ||
	    (rc = in_range(t->init_b, "init_b", -1e6, false, 1e6, false, err, errlen)) != 0)
		return rc;
	if (t->init == PS_INIT_UNIFORM && !(t->init_a < t->init_b))
		return ps_errf_rc(err, errlen, -EINVAL, "init uniform: init_a %g must be below "
			       "init_b %g", (double)t->init_a, (double)t->init_b);
	if (t->init == PS_INIT_NORMAL && t->init_b < 0)
		return ps_errf_rc(err, errlen, -EINVAL, "init normal: init_b (stddev) %g is negative",
			       (double)t->init_b);
	return 0;
}

/* The memory policies (ps.h): sparse only, in range, pull_inserts alone. */
static int check_memory(const struct ps_table_config *t, char *err, size_t errlen)
{
	bool any = t->max_rows || t->max_bytes || t->admit_after || t->evict_after;

	if (t->kind == PS_TABLE_DENSE && (any || t->pull_inserts))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: only a sparse table has memory policies "
			       "(a dense one holds all its rows)", t->max_rows ? "max_rows" :
			       t->max_bytes ? "max_bytes" : t->admit_after ? "admit_after" :
			       t->evict_after ? "evict_after" : "pull_inserts");
	if (t->max_rows > PS_MODEL_MAX_CAP_ROWS)
		return ps_errf_rc(err, errlen, -EINVAL, "max_rows: %llu outside 0..%llu",
			       (unsigned long long)t->max_rows, PS_MODEL_MAX_CAP_ROWS);
	if (t->max_bytes > PS_MODEL_MAX_CAP_BYTES)
		return ps_errf_rc(err, errlen, -EINVAL, "max_bytes: %llu outside 0..%llu",
			       (unsigned long long)t->max_bytes, PS_MODEL_MAX_CAP_BYTES);
	if (t->admit_after > PS_ADMIT_MAX)
		return ps_errf_rc(err, errlen, -EINVAL, "admit_after: %u outside 0..%u",
			       t->admit_after, PS_ADMIT_MAX);
	if (t->evict_after > PS_EVICT_MAX)
		return ps_errf_rc(err, errlen, -EINVAL, "evict_after: %llu outside 0..%llu",
			       (unsigned long long)t->evict_after, (unsigned long long)PS_EVICT_MAX);
	if (t->pull_inserts && (t->max_rows || t->max_bytes || t->admit_after > 1 || t->evict_after))
		return ps_errf_rc(err, errlen, -EINVAL, "pull_inserts: not with max_rows, max_bytes, "
			       "admit_after or evict_after (rows made by pulls are not in the "
			       "write-ahead log, so the table would not replay)");
	return 0;
}

int ps_model_table_check(const struct ps_table_config *t, const char *name, char *err,
			 size_t errlen)
{
	int rc;

	if ((rc = check_name(name, err, errlen)) != 0)
		return rc;
	if ((unsigned)t->kind > PS_TABLE_DENSE)
		return ps_errf_rc(err, errlen, -EINVAL, "kind: %u is neither sparse nor dense",
			       (unsigned)t->kind);
	if (t->dim == 0 || t->dim > PS_MODEL_MAX_DIM)
		return ps_errf_rc(err, errlen, -EINVAL, "dim: %u outside 1..%u", t->dim,
			       PS_MODEL_MAX_DIM);
	if (t->kind == PS_TABLE_DENSE && (t->dense_rows == 0 || t->dense_rows > PS_MODEL_MAX_ROWS))
		return ps_errf_rc(err, errlen, -EINVAL, "rows: %llu outside 1..%u (a dense table "
			       "needs its rows)", (unsigned long long)t->dense_rows,
			       PS_MODEL_MAX_ROWS);
	if (t->kind == PS_TABLE_SPARSE && t->dense_rows != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "rows: a sparse table has no fixed rows "
			       "(got %llu)", (unsigned long long)t->dense_rows);
	if ((unsigned)t->optim > PS_OPT_FTRL)
		return ps_errf_rc(err, errlen, -EINVAL, "optimizer: %u is not sgd, adagrad, adam or "
			       "ftrl", (unsigned)t->optim);
	if ((unsigned)t->init > PS_INIT_NORMAL)
		return ps_errf_rc(err, errlen, -EINVAL, "init: %u is not zeros, uniform or normal",
			       (unsigned)t->init);
	if ((rc = check_optim(t, err, errlen)) != 0 || (rc = check_init(t, err, errlen)) != 0)
		return rc;
	return check_memory(t, err, errlen);
}

int ps_model_tables_find(const struct ps_model_tables *mt, const char *name)
{
	for (uint32_t i = 0; i < mt->n; i++)
		if (strncmp(mt->name[i], name, PS_MODEL_NAME_MAX) == 0)
			return (int)i;
	return -ENOENT;
}

int ps_model_tables_add(struct ps_model_tables *mt, const struct ps_table_config *t,
			const char *name, char *err, size_t errlen)
{
	char why[256];
	int rc;

	if (mt->n >= PS_MODEL_MAX_TABLES)
		return ps_errf_rc(err, errlen, -E2BIG, "table %u: a model has at most %u tables",
			       mt->n, PS_MODEL_MAX_TABLES);
	if ((rc = ps_model_table_check(t, name, why, sizeof(why))) != 0)
		return ps_errf_rc(err, errlen, rc, "table %u '%.*s': %s", mt->n,
			       (int)PS_MODEL_NAME_MAX - 1, name != NULL ? name : "", why);
	if ((rc = ps_model_tables_find(mt, name)) >= 0)
		return ps_errf_rc(err, errlen, -EINVAL, "table %u '%s': name: table %d has it already",
			       mt->n, name, rc);
	if (grow(mt, mt->n + 1) != 0)
		return ps_errf_rc(err, errlen, -ENOMEM, "table %u '%s': out of memory", mt->n, name);
	mt->t[mt->n] = *t;
	mt->t[mt->n].id = mt->n;
	snprintf(mt->name[mt->n], PS_MODEL_NAME_MAX, "%s", name);
	mt->n++;
	return 0;
}

int ps_model_tables_set_max_keys(struct ps_model_tables *mt, uint32_t max_keys, char *err,
				 size_t errlen)
{
	if (max_keys == 0 || max_keys > PS_MODEL_MAX_KEYS)
		return ps_errf_rc(err, errlen, -EINVAL, "max keys per request: %u outside 1..%u",
			       max_keys, PS_MODEL_MAX_KEYS);
	mt->max_keys = max_keys;
	return 0;
}

/* Request heads: a sparse push's worker, zero, seq; a dense push's, plus its first row. */
#define SPARSE_HEAD 16u
#define DENSE_HEAD 24u

uint32_t ps_model_req_rows(const struct ps_model_tables *mt, uint32_t id)
{
	const struct ps_table_config *t;
	uint64_t fit, want;

	if (id >= mt->n)
		return 0;
	t = &mt->t[id];
	if (t->kind == PS_TABLE_SPARSE) {
		fit = (PS_MODEL_REQ_BYTES - SPARSE_HEAD) / (8 + (uint64_t)t->dim * 4);
		want = mt->max_keys;
	} else {
		fit = (PS_MODEL_REQ_BYTES - DENSE_HEAD) / ((uint64_t)t->dim * 4);
		want = t->dense_rows;
	}
	return (uint32_t)(want < fit ? want : fit);
}

uint32_t ps_model_max_msg(const struct ps_model_tables *mt)
{
	uint64_t body, max = 64; /* room for the small replies (barrier, hello, errors) */

	for (uint32_t i = 0; i < mt->n; i++) {
		const struct ps_table_config *t = &mt->t[i];
		uint64_t rows = ps_model_req_rows(mt, i);
		if (t->kind == PS_TABLE_SPARSE)
			body = SPARSE_HEAD + rows * (8 + (uint64_t)t->dim * 4);
		else
			body = DENSE_HEAD + rows * t->dim * 4;
		if (body > max)
			max = body;
	}
	return (uint32_t)max;
}

/* ---- digest ---------------------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* v as 8 little-endian bytes, whatever the host's order. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return fnv_bytes(h, b, sizeof(b));
}

/* A float by its IEEE-754 bits; -0 as +0 (the checks take them as equal). */
static uint64_t fnv_f32(uint64_t h, float f)
{
	uint32_t bits;

	f += 0.0f;
	memcpy(&bits, &f, sizeof(bits));
	return fnv_u64(h, bits);
}

/* The memory policies are the servers' own: a worker never sees them, so they are left out. */
uint64_t ps_model_digest(const struct ps_model_tables *mt)
{
	static const char tag[] = "wharf model 1";
	uint64_t h = fnv_bytes(FNV_OFFSET, tag, sizeof(tag) - 1);

	h = fnv_u64(h, mt->n);
	for (uint32_t i = 0; i < mt->n; i++) {
		const struct ps_table_config *t = &mt->t[i];
		size_t len = strnlen(mt->name[i], PS_MODEL_NAME_MAX);
		h = fnv_u64(h, len);
		h = fnv_bytes(h, mt->name[i], len);
		h = fnv_u64(h, t->kind);
		h = fnv_u64(h, t->dim);
		h = fnv_u64(h, t->kind == PS_TABLE_DENSE ? t->dense_rows : 0);
		h = fnv_u64(h, t->optim);
		h = fnv_f32(h, t->op.lr);
		h = fnv_f32(h, t->op.eps);
		h = fnv_f32(h, t->op.beta1);
		h = fnv_f32(h, t->op.beta2);
		h = fnv_f32(h, t->op.l1);
		h = fnv_f32(h, t->op.l2);
		h = fnv_f32(h, t->op.init_accum);
		h = fnv_u64(h, t->init);
		h = fnv_f32(h, t->init_a);
		h = fnv_f32(h, t->init_b);
		h = fnv_u64(h, t->seed);
	}
	return h;
}
