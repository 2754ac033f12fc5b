/*
 * wh_model.c — wharf_model: the tables of a job, declared table by table (wharf_model_add)
 * or from a JSON model file (wharf_model_load/parse), as a struct ps_model_tables the
 * server and client code take (wh_model_tables).
 *
 * Call chain: application -> wharf_model_* -> ps_model_tables_add / ps_model_file_load
 * (ps_core: the checks, the file format and the digest live there, shared with
 * wharf-psd and wharf-train). Start-up only; a model is read by any thread once built.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/wh_pvt.h"

struct wharf_model {
	struct ps_model_tables mt;
};

/* The public enums and limits are ps_core's under other names. */
_Static_assert(WHARF_TABLE_SPARSE == (int)PS_TABLE_SPARSE && WHARF_TABLE_DENSE == (int)PS_TABLE_DENSE,
	       "table kinds");
_Static_assert(WHARF_OPT_SGD == (int)PS_OPT_SGD && WHARF_OPT_ADAGRAD == (int)PS_OPT_ADAGRAD &&
	       WHARF_OPT_ADAM == (int)PS_OPT_ADAM && WHARF_OPT_FTRL == (int)PS_OPT_FTRL,
	       "optimizers");
_Static_assert(WHARF_INIT_ZEROS == (int)PS_INIT_ZEROS &&
	       WHARF_INIT_UNIFORM == (int)PS_INIT_UNIFORM && WHARF_INIT_NORMAL == (int)PS_INIT_NORMAL,
	       "initializers");
_Static_assert(WHARF_NAME_MAX == PS_MODEL_NAME_MAX && WHARF_MAX_TABLES == PS_MODEL_MAX_TABLES &&
	       WHARF_MAX_DIM == PS_MODEL_MAX_DIM, "limits");

static void to_ps(const struct wharf_table *w, struct ps_table_config *t)
{
	memset(t, 0, sizeof(*t));
	t->kind = (enum ps_table_kind)w->kind;
	t->dim = w->dim;
	t->dense_rows = w->rows;
	t->optim = (enum ps_optim_kind)w->optimizer;
	t->op.lr = w->lr;
	t->op.eps = w->eps;
	t->op.beta1 = w->beta1;
	t->op.beta2 = w->beta2;
	t->op.l1 = w->l1;
	t->op.l2 = w->l2;
	t->op.init_accum = w->init_accum;
	t->init = (enum ps_init_kind)w->init;
	t->init_a = w->init_a;
	t->init_b = w->init_b;
	t->seed = w->seed;
}

static void from_ps(const struct ps_table_config *t, const char *name, struct wharf_table *w)
{
	memset(w, 0, sizeof(*w));
	memcpy(w->name, name, strnlen(name, WHARF_NAME_MAX - 1));
	w->kind = (enum wharf_table_kind)t->kind;
	w->dim = t->dim;
	w->rows = t->kind == PS_TABLE_DENSE ? t->dense_rows : 0;
	w->optimizer = (enum wharf_optimizer)t->optim;
	w->lr = t->op.lr;
	w->eps = t->op.eps;
	w->beta1 = t->op.beta1;
	w->beta2 = t->op.beta2;
	w->l1 = t->op.l1;
	w->l2 = t->op.l2;
	w->init_accum = t->op.init_accum;
	w->init = (enum wharf_init)t->init;
	w->init_a = t->init_a;
	w->init_b = t->init_b;
	w->seed = t->seed;
}

void wharf_table_defaults(struct wharf_table *t, const char *name)
{
	struct ps_table_config d;

	if (t == NULL)
		return;
	ps_model_table_defaults(&d);
	/* A name that does not fit stays empty, so wharf_model_add refuses it. */
	from_ps(&d, name != NULL && strlen(name) < WHARF_NAME_MAX ? name : "", t);
}

int wharf_model_new(struct wharf_model **out)
{
	struct wharf_model *m;

	if (out == NULL)
		return wh_errf(-EINVAL, "wharf_model_new: out is NULL");
	m = malloc(sizeof(*m));
	if (m == NULL)
		return wh_errf(-ENOMEM, "wharf_model_new: out of memory");
	ps_model_tables_init(&m->mt);
	*out = m;
	return 0;
}

int wharf_model_add(struct wharf_model *m, const struct wharf_table *t, uint32_t *id_out)
{
	struct ps_table_config c;
	char err[512];
	int rc;

	if (m == NULL || t == NULL)
		return wh_errf(-EINVAL, "wharf_model_add: model or table is NULL");
	if (memchr(t->name, '\0', sizeof(t->name)) == NULL)
		return wh_errf(-EINVAL, "wharf_model_add: table %u: name: no NUL within %u bytes",
			       m->mt.n, WHARF_NAME_MAX);
	to_ps(t, &c);
	rc = ps_model_tables_add(&m->mt, &c, t->name, err, sizeof(err));
	if (rc != 0)
		return wh_errf(rc, "wharf_model_add: %s", err);
	if (id_out != NULL)
		*id_out = m->mt.n - 1;
	return 0;
}

static int adopt(int rc, struct ps_model_tables *mt, const char *err, struct wharf_model **out)
{
	struct wharf_model *m;

	if (rc != 0)
		return wh_errf(rc, "%s", err);
	m = malloc(sizeof(*m));
	if (m == NULL) {
		ps_model_tables_free(mt);
		return wh_errf(-ENOMEM, "out of memory");
	}
	m->mt = *mt;
	*out = m;
	return 0;
}

int wharf_model_load(const char *path, struct wharf_model **out)
{
	struct ps_model_tables mt;
	char err[512];

	if (path == NULL || out == NULL)
		return wh_errf(-EINVAL, "wharf_model_load: path or out is NULL");
	return adopt(ps_model_file_load(path, &mt, err, sizeof(err)), &mt, err, out);
}

int wharf_model_parse(const char *text, const char *name, struct wharf_model **out)
{
	struct ps_model_tables mt;
	char err[512];

	if (text == NULL || out == NULL)
		return wh_errf(-EINVAL, "wharf_model_parse: text or out is NULL");
	return adopt(ps_model_file_parse(text, name != NULL ? name : "<model text>", &mt, err,
					 sizeof(err)), &mt, err, out);
}

uint32_t wharf_model_count(const struct wharf_model *m)
{
	return m != NULL ? m->mt.n : 0;
}

int wharf_model_table(const struct wharf_model *m, uint32_t id, struct wharf_table *out)
{
	if (m == NULL || out == NULL)
		return wh_errf(-EINVAL, "wharf_model_table: model or out is NULL");
	if (id >= m->mt.n)
		return wh_errf(-ENOENT, "wharf_model_table: no table %u (the model has %u)", id,
			       m->mt.n);
	from_ps(&m->mt.t[id], m->mt.name[id], out);
	return 0;
}

int wharf_model_find(const struct wharf_model *m, const char *name, uint32_t *id_out)
{
	int id;

	if (m == NULL || name == NULL)
		return wh_errf(-EINVAL, "wharf_model_find: model or name is NULL");
	id = ps_model_tables_find(&m->mt, name);
	if (id < 0)
		return wh_errf(-ENOENT, "wharf_model_find: no table called '%.64s'", name);
	if (id_out != NULL)
		*id_out = (uint32_t)id;
	return 0;
}

int wharf_model_set_memory(struct wharf_model *m, uint32_t id, const struct wharf_table_memory *mem)
{
	struct ps_table_config t;
	char err[256];
	int rc;

	if (m == NULL || mem == NULL)
		return wh_errf(-EINVAL, "wharf_model_set_memory: model or policies are NULL");
	if (id >= m->mt.n)
		return wh_errf(-ENOENT, "wharf_model_set_memory: no table %u (the model has %u)",
			       id, m->mt.n);
	t = m->mt.t[id];
	t.max_rows = mem->max_rows;
	t.max_bytes = mem->max_bytes;
	t.admit_after = mem->admit_after;
	t.evict_after = mem->evict_after;
	t.pull_inserts = mem->pull_inserts;
	if ((rc = ps_model_table_check(&t, m->mt.name[id], err, sizeof(err))) != 0)
		return wh_errf(rc, "wharf_model_set_memory: table %u '%s': %s", id, m->mt.name[id],
			       err);
	m->mt.t[id] = t;
	return 0;
}

int wharf_model_memory(const struct wharf_model *m, uint32_t id, struct wharf_table_memory *out)
{
	const struct ps_table_config *t;

	if (m == NULL || out == NULL)
		return wh_errf(-EINVAL, "wharf_model_memory: model or out is NULL");
	if (id >= m->mt.n)
		return wh_errf(-ENOENT, "wharf_model_memory: no table %u (the model has %u)", id,
			       m->mt.n);
	t = &m->mt.t[id];
	memset(out, 0, sizeof(*out));
	out->max_rows = t->max_rows;
	out->max_bytes = t->max_bytes;
	out->admit_after = t->admit_after;
	out->evict_after = t->evict_after;
	out->pull_inserts = t->pull_inserts;
	return 0;
}

uint64_t wharf_model_digest(const struct wharf_model *m)
{
	return m != NULL ? ps_model_digest(&m->mt) : 0;
}

void wharf_model_free(struct wharf_model *m)
{
	if (m == NULL)
		return;
	ps_model_tables_free(&m->mt);
	free(m);
}

const struct ps_model_tables *wh_model_tables(const struct wharf_model *m)
{
	return &m->mt;
}
