/*
 * pw_model.c — wharf._wharf.Model: a job's tables, from a JSON model file (wharf_model_load),
 * from text (wharf_model_parse) or declared one by one (wharf_model_add), with the table
 * fields of struct wharf_table and struct wharf_table_memory (wharf_model_set_memory) as
 * keyword arguments and their names as strings.
 *
 * Call chain: python/wharf/__init__.py init(model=...), add_table() -> Model.load / parse /
 *   add -> libwharf; Client and run_server read the model (pw_model.users: no table can be
 *   added once one uses it, since servers and workers compare the model's digest).
 */
#include <errno.h>
#include <string.h>

#include "pw.h"

static const char *const kind_names[] = { [WHARF_TABLE_SPARSE] = "sparse",
					  [WHARF_TABLE_DENSE] = "dense" };
static const char *const opt_names[] = { [WHARF_OPT_SGD] = "sgd", [WHARF_OPT_ADAGRAD] = "adagrad",
					 [WHARF_OPT_ADAM] = "adam", [WHARF_OPT_FTRL] = "ftrl" };
static const char *const init_names[] = { [WHARF_INIT_ZEROS] = "zeros",
					  [WHARF_INIT_UNIFORM] = "uniform",
					  [WHARF_INIT_NORMAL] = "normal" };

/* The index of s among names[0..n), or -1 with ValueError naming arg and the choices. */
static int name_index(PyObject *obj, const char *arg, const char *const *names, int n)
{
	const char *s;
	int i;

	if (!PyUnicode_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: expected a string, got %s", arg,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	if ((s = PyUnicode_AsUTF8(obj)) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	PyErr_Format(PyExc_ValueError, "%s: expected one of %s%s%s%s%s%s%s, got '%s'", arg,
		     names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
		     n > 2 ? names[2] : "", n > 3 ? ", " : "", n > 3 ? names[3] : "", s);
	return -1;
}

int pw_get_u64(PyObject *obj, const char *arg, uint64_t max, uint64_t *out)
{
	unsigned long long v;

	if (!PyLong_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %s", arg,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	v = PyLong_AsUnsignedLongLong(obj);
	if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v > max) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "%s: expected an integer 0..%llu, got %R", arg,
			     (unsigned long long)max, obj);
		return -1;
	}
	*out = v;
	return 0;
}

static int get_float(PyObject *obj, const char *arg, float *out)
{
	double v;

	if (!PyFloat_Check(obj) && !PyLong_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: expected a number, got %s", arg,
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	v = PyFloat_AsDouble(obj);
	if (v == -1.0 && PyErr_Occurred())
		return -1;
	*out = (float)v;
	return 0;
}

static struct wharf_model *model_get(PyObject *self)
{
	struct wharf_model *m = ((struct pw_model *)self)->m;

	if (m == NULL)
		PyErr_SetString(PyExc_RuntimeError, "Model: not created");
	return m;
}

static int model_init(PyObject *self, PyObject *args, PyObject *kw)
{
	struct pw_model *pm = (struct pw_model *)self;
	int rc;

	if (!PyArg_ParseTuple(args, ":Model") || (kw != NULL && PyDict_Size(kw) > 0)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "Model() takes no arguments");
		return -1;
	}
	if (pm->m != NULL)
		return 0;
	if ((rc = wharf_model_new(&pm->m)) != 0) {
		pw_raise(rc, "Model", NULL);
		return -1;
	}
	return 0;
}

static void model_dealloc(PyObject *self)
{
	wharf_model_free(((struct pw_model *)self)->m);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *model_wrap(PyTypeObject *type, struct wharf_model *m)
{
	struct pw_model *pm = (struct pw_model *)type->tp_alloc(type, 0);

	if (pm == NULL) {
		wharf_model_free(m);
		return NULL;
	}
	pm->m = m;
	return (PyObject *)pm;
}

static PyObject *model_load(PyObject *type, PyObject *args)
{
	struct wharf_model *m;
	PyObject *path;
	int rc;

	if (!PyArg_ParseTuple(args, "O&:load", PyUnicode_FSConverter, &path))
		return NULL;
	rc = wharf_model_load(PyBytes_AS_STRING(path), &m);
	Py_DECREF(path);
	if (rc != 0)
		return pw_raise(rc, NULL, pw_ConfigError);
	return model_wrap((PyTypeObject *)type, m);
}

static PyObject *model_parse(PyObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "text", "name", NULL };
	const char *text, *name = "<string>";
	struct wharf_model *m;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|s:parse", kwlist, &text, &name))
		return NULL;
	if ((rc = wharf_model_parse(text, name, &m)) != 0)
		return pw_raise(rc, NULL, pw_ConfigError);
	return model_wrap((PyTypeObject *)type, m);
}

/* A memory policy keyword of add() (struct wharf_table_memory): 1 when k is one, -1 refused. */
static int mem_field(struct wharf_table_memory *m, const char *k, PyObject *v)
{
	uint64_t u;

	if (strcmp(k, "max_rows") == 0)
		return pw_get_u64(v, k, UINT64_MAX, &m->max_rows) == 0 ? 1 : -1;
	if (strcmp(k, "max_bytes") == 0)
		return pw_get_u64(v, k, UINT64_MAX, &m->max_bytes) == 0 ? 1 : -1;
	if (strcmp(k, "evict_after") == 0)
		return pw_get_u64(v, k, UINT64_MAX, &m->evict_after) == 0 ? 1 : -1;
	if (strcmp(k, "admit_after") == 0) {
		if (pw_get_u64(v, k, UINT32_MAX, &u) != 0)
			return -1;
		m->admit_after = (uint32_t)u;
		return 1;
	}
	if (strcmp(k, "pull_inserts") == 0) {
		if (!PyBool_Check(v)) {
			PyErr_Format(PyExc_TypeError, "pull_inserts: expected True or False, got %s",
				     Py_TYPE(v)->tp_name);
			return -1;
		}
		m->pull_inserts = v == Py_True;
		return 1;
	}
	return 0;
}

/* One keyword of add(): the field it sets in t (or in mem, *has_mem set). */
static int add_field(struct wharf_table *t, struct wharf_table_memory *mem, bool *has_mem,
		     const char *k, PyObject *v)
{
	uint64_t u;
	int i;

	if ((i = mem_field(mem, k, v)) != 0) {
		*has_mem = true;
		return i < 0 ? -1 : 0;
	}
	if (strcmp(k, "kind") == 0) {
		if ((i = name_index(v, k, kind_names, 2)) < 0)
			return -1;
		t->kind = (enum wharf_table_kind)i;
	} else if (strcmp(k, "optimizer") == 0) {
		if ((i = name_index(v, k, opt_names, 4)) < 0)
			return -1;
		t->optimizer = (enum wharf_optimizer)i;
	} else if (strcmp(k, "init") == 0) {
		if ((i = name_index(v, k, init_names, 3)) < 0)
			return -1;
		t->init = (enum wharf_init)i;
	} else if (strcmp(k, "dim") == 0) {
		if (pw_get_u64(v, k, UINT32_MAX, &u) != 0)
			return -1;
		t->dim = (uint32_t)u;
	} else if (strcmp(k, "rows") == 0) {
		return pw_get_u64(v, k, UINT64_MAX, &t->rows);
	} else if (strcmp(k, "seed") == 0) {
		return pw_get_u64(v, k, UINT64_MAX, &t->seed);
	} else if (strcmp(k, "lr") == 0) {
		return get_float(v, k, &t->lr);
	} else if (strcmp(k, "eps") == 0) {
		return get_float(v, k, &t->eps);
	} else if (strcmp(k, "beta1") == 0) {
		return get_float(v, k, &t->beta1);
	} else if (strcmp(k, "beta2") == 0) {
		return get_float(v, k, &t->beta2);
	} else if (strcmp(k, "l1") == 0) {
		return get_float(v, k, &t->l1);
	} else if (strcmp(k, "l2") == 0) {
		return get_float(v, k, &t->l2);
	} else if (strcmp(k, "init_accum") == 0) {
		return get_float(v, k, &t->init_accum);
	} else if (strcmp(k, "init_a") == 0) {
		return get_float(v, k, &t->init_a);
	} else if (strcmp(k, "init_b") == 0) {
		return get_float(v, k, &t->init_b);
	} else {
		PyErr_Format(PyExc_TypeError, "add: unknown table field '%s'", k);
		return -1;
	}
	return 0;
}

/* The table t with policies mem, checked alone in a model of its own: 0 or raised. */
static int check_with_memory(const struct wharf_table *t, const struct wharf_table_memory *mem)
{
	struct wharf_model *tmp;
	int rc;

	if ((rc = wharf_model_new(&tmp)) == 0 && (rc = wharf_model_add(tmp, t, NULL)) == 0)
		rc = wharf_model_set_memory(tmp, 0, mem);
	wharf_model_free(tmp);
	if (rc != 0)
		pw_raise(rc, t->name, pw_ConfigError);
	return rc;
}

/*
 * add(name, **fields) -> id: wharf_table_defaults, the fields given, wharf_model_add, and the
 * memory policies among them with wharf_model_set_memory (checked first: all or nothing).
 */
static PyObject *model_add(PyObject *self, PyObject *args, PyObject *kw)
{
	struct pw_model *pm = (struct pw_model *)self;
	struct wharf_table_memory mem;
	struct wharf_table t;
	const char *name;
	Py_ssize_t len, pos = 0;
	PyObject *k, *v;
	bool has_mem = false;
	uint32_t id;
	int rc;

	if (model_get(self) == NULL || !PyArg_ParseTuple(args, "s#:add", &name, &len))
		return NULL;
	if (pm->users > 0)
		return pw_raise_msg(-EBUSY, "add: the model is in use by a client or a server: "
				    "declare every table before", NULL);
	if (len < 1 || len >= (Py_ssize_t)WHARF_NAME_MAX) {
		PyErr_Format(PyExc_ValueError, "name: expected 1..%u bytes, got %zd",
			     WHARF_NAME_MAX - 1, len);
		return NULL;
	}
	wharf_table_defaults(&t, name);
	memset(&mem, 0, sizeof(mem));
	while (kw != NULL && PyDict_Next(kw, &pos, &k, &v))
		if (v != Py_None && add_field(&t, &mem, &has_mem, PyUnicode_AsUTF8(k), v) != 0)
			return NULL;
	if (has_mem && check_with_memory(&t, &mem) != 0)
		return NULL;
	if ((rc = wharf_model_add(pm->m, &t, &id)) != 0)
		return pw_raise(rc, name, pw_ConfigError);
	if (has_mem && (rc = wharf_model_set_memory(pm->m, id, &mem)) != 0)
		return pw_raise(rc, name, pw_ConfigError);
	return PyLong_FromUnsignedLong(id);
}

static PyObject *table_dict(const struct wharf_table *t)
{
	return Py_BuildValue("{s:s,s:s,s:I,s:K,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:f,s:f,s:K}",
		"name", t->name, "kind", t->kind <= WHARF_TABLE_DENSE ? kind_names[t->kind] : "?",
		"dim", t->dim, "rows", (unsigned long long)t->rows,
		"optimizer", t->optimizer <= WHARF_OPT_FTRL ? opt_names[t->optimizer] : "?",
		"lr", (double)t->lr, "eps", (double)t->eps, "beta1", (double)t->beta1,
		"beta2", (double)t->beta2, "l1", (double)t->l1, "l2", (double)t->l2,
		"init_accum", (double)t->init_accum,
		"init", t->init <= WHARF_INIT_NORMAL ? init_names[t->init] : "?",
		"init_a", (double)t->init_a, "init_b", (double)t->init_b,
		"seed", (unsigned long long)t->seed);
}

/* The memory policies into the table's dict d (a new reference, released on failure). */
static PyObject *add_memory(PyObject *d, const struct wharf_table_memory *mem)
{
	PyObject *mm;

	if (d == NULL)
		return NULL;
	mm = Py_BuildValue("{s:K,s:K,s:I,s:K,s:O}", "max_rows", (unsigned long long)mem->max_rows,
			   "max_bytes", (unsigned long long)mem->max_bytes, "admit_after",
			   mem->admit_after, "evict_after", (unsigned long long)mem->evict_after,
			   "pull_inserts", mem->pull_inserts ? Py_True : Py_False);
	if (mm == NULL || PyDict_Update(d, mm) != 0) {
		Py_XDECREF(mm);
		Py_DECREF(d);
		return NULL;
	}
	Py_DECREF(mm);
	return d;
}

static PyObject *model_table(PyObject *self, PyObject *arg)
{
	struct wharf_model *m = model_get(self);
	struct wharf_table_memory mem;
	struct wharf_table t;
	uint64_t id;
	int rc;

	if (m == NULL || pw_get_u64(arg, "id", UINT32_MAX, &id) != 0)
		return NULL;
	if ((rc = wharf_model_table(m, (uint32_t)id, &t)) != 0) {
		if (rc == -ENOENT) {
			PyErr_Format(PyExc_IndexError, "id: no table %llu (the model has %u)",
				     (unsigned long long)id, wharf_model_count(m));
			return NULL;
		}
		return pw_raise(rc, "table", NULL);
	}
	if ((rc = wharf_model_memory(m, (uint32_t)id, &mem)) != 0)
		return pw_raise(rc, "table", NULL);
	return add_memory(table_dict(&t), &mem);
}

static PyObject *model_find(PyObject *self, PyObject *arg)
{
	struct wharf_model *m = model_get(self);
	const char *name;
	uint32_t id;
	int rc;

	if (m == NULL)
		return NULL;
	if (!PyUnicode_Check(arg)) {
		PyErr_Format(PyExc_TypeError, "name: expected a string, got %s", Py_TYPE(arg)->tp_name);
		return NULL;
	}
	if ((name = PyUnicode_AsUTF8(arg)) == NULL)
		return NULL;
	if ((rc = wharf_model_find(m, name, &id)) != 0) {
		if (rc == -ENOENT) {
			PyErr_Format(PyExc_KeyError, "no table '%s' in the model", name);
			return NULL;
		}
		return pw_raise(rc, name, NULL);
	}
	return PyLong_FromUnsignedLong(id);
}

static PyObject *model_digest(PyObject *self, PyObject *unused)
{
	struct wharf_model *m = model_get(self);

	(void)unused;
	return m == NULL ? NULL : PyLong_FromUnsignedLongLong(wharf_model_digest(m));
}

static Py_ssize_t model_len(PyObject *self)
{
	struct wharf_model *m = model_get(self);

	return m == NULL ? -1 : (Py_ssize_t)wharf_model_count(m);
}

static PyMethodDef model_methods[] = {
	{ "load", model_load, METH_VARARGS | METH_CLASS, "load(path) -> Model: a JSON model file" },
	{ "parse", (PyCFunction)(void (*)(void))model_parse, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "parse(text, name='<string>') -> Model: JSON model text" },
	{ "add", (PyCFunction)(void (*)(void))model_add, METH_VARARGS | METH_KEYWORDS,
	  "add(name, kind='sparse', dim=1, rows=0, optimizer='sgd', lr=0.01, ..., seed=42, "
	  "max_rows=0, max_bytes=0, admit_after=0, evict_after=0, pull_inserts=False) -> id" },
	{ "table", model_table, METH_O, "table(id) -> dict of the table's fields" },
	{ "find", model_find, METH_O, "find(name) -> id (KeyError when absent)" },
	{ "digest", model_digest, METH_NOARGS, 
	  "digest() -> the 64-bit digest servers and workers compare" },
	{ NULL, NULL, 0, NULL },
};

static PySequenceMethods model_seq = { .sq_length = model_len };

PyTypeObject pw_ModelType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "wharf._wharf.Model",
	.tp_basicsize = sizeof(struct pw_model),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Model(): a job's tables (Model.load(path), Model.parse(text), add(name, ...))",
	.tp_new = PyType_GenericNew,
	.tp_init = model_init,
	.tp_dealloc = model_dealloc,
	.tp_methods = model_methods,
	.tp_as_sequence = &model_seq,
};

int pw_model_types_ready(PyObject *mod)
{
	if (PyType_Ready(&pw_ModelType) != 0)
		return -1;
	Py_INCREF(&pw_ModelType);
	if (PyModule_AddObject(mod, "Model", (PyObject *)&pw_ModelType) != 0) {
		Py_DECREF(&pw_ModelType);
		return -1;
	}
	return 0;
}
