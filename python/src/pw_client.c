/*
 * pw_client.c — wharf._wharf.Client: a worker's connection to every server (wharf_client_open)
 * and its calls (pw_req.c), each waiting with the GIL released so other Python threads run
 * (and call the same client: libwharf's client takes calls from any thread).
 *
 * Call chain: python/wharf/__init__.py Table.pull / push / ... -> Client.pull(table, keys, out)
 *   -> pw_req.c: pw_buf_* (the checks) -> wharf_pull_async etc. on the caller's own memory
 *   -> waited for, Ctrl-C looked for every 100 ms -> out returned.
 * Closing waits for the calls in progress and the requests in flight first; Ctrl-C then, or a
 * call Ctrl-C left in flight, makes it give up waiting for servers (wharf_client_interrupt).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"

int pw_client_enter(struct pw_client *c)
{
	if (c->cl == NULL || c->closing) {
		pw_raise_msg(-EBADF, "the worker's client is closed", NULL);
		return -1;
	}
	c->busy++;
	return 0;
}

void pw_client_leave(struct pw_client *c)
{
	c->busy--;
}

const struct pw_table_info *pw_client_table(struct pw_client *c, PyObject *table,
					    enum wharf_table_kind want, const char *op,
					    uint32_t *id)
{
	const struct pw_table_info *t;
	unsigned long v;

	if (!PyLong_Check(table)) {
		PyErr_Format(PyExc_TypeError, "table: expected a table id (int), got %s",
			     Py_TYPE(table)->tp_name);
		return NULL;
	}
	v = PyLong_AsUnsignedLong(table);
	if ((v == (unsigned long)-1 && PyErr_Occurred()) || v >= c->n_tables) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "table: no table %R in the model (%u tables)", table,
			     c->n_tables);
		return NULL;
	}
	t = &c->tables[v];
	if (t->kind != want) {
		PyErr_Format(PyExc_TypeError, "%s: table '%s' is %s, the call is for %s tables", op,
			     t->name, t->kind == WHARF_TABLE_DENSE ? "dense" : "sparse",
			     want == WHARF_TABLE_DENSE ? "dense" : "sparse");
		return NULL;
	}
	*id = (uint32_t)v;
	return t;
}

static int client_tables(struct pw_client *c, const struct wharf_model *m)
{
	struct wharf_table t;
	uint32_t i, n = wharf_model_count(m);

	c->tables = PyMem_Calloc(n ? n : 1, sizeof(*c->tables));
	if (c->tables == NULL) {
		PyErr_NoMemory();
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (wharf_model_table(m, i, &t) != 0) {
			pw_raise(-EINVAL, "model", NULL);
			return -1;
		}
		c->tables[i].kind = t.kind;
		c->tables[i].dim = t.dim;
		c->tables[i].rows = t.rows;
		memcpy(c->tables[i].name, t.name, sizeof(t.name));
	}
	c->n_tables = n;
	return 0;
}

/*
 * wharf_client_open_interruptible's question, from the opening thread while it waits for the
 * servers: a signal's Python handler raised (Ctrl-C: KeyboardInterrupt; the exception stays
 * set for client_init to return), or the client was closed meanwhile (wharf.stop() from a
 * handler or another thread)?
 */
static int open_interrupted(void *arg)
{
	struct pw_client *c = arg;
	PyGILState_STATE g = PyGILState_Ensure();
	int r = PyErr_CheckSignals() != 0 || c->cancel;

	PyGILState_Release(g);
	return r;
}

/* The open that close() ended: its client (when it opened after all) closed, and raised. */
static int open_cancelled(struct pw_client *c)
{
	struct wharf_client *cl = c->cl;

	c->cl = NULL;
	if (cl != NULL) {
		Py_BEGIN_ALLOW_THREADS
		wharf_client_close(cl);
		Py_END_ALLOW_THREADS
	}
	pw_raise_msg(-ECANCELED, "Client: closed while it waited for the servers", NULL);
	return -1;
}

/* Client(config, model, spin_wait=False, queue_depth=0): waits for the servers. */
static int client_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "config", "model", "spin_wait", "queue_depth", NULL };
	struct pw_client *c = (struct pw_client *)self;
	struct wharf_client_opts opts = { false, 0 };
	struct wharf_config *cfg;
	struct pw_model *pm;
	PyObject *cfg_obj, *model_obj, *depth_obj = NULL;
	int spin = 0, rc;
	uint64_t depth = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|pO:Client", kwlist, &pw_ConfigType,
					 &cfg_obj, &pw_ModelType, &model_obj, &spin, &depth_obj))
		return -1;
	if (depth_obj != NULL && pw_get_u64(depth_obj, "queue_depth", UINT32_MAX, &depth) != 0)
		return -1;
	if (c->cl != NULL || c->closing) {
		PyErr_SetString(PyExc_RuntimeError, "Client: already opened");
		return -1;
	}
	cfg = ((struct pw_config *)cfg_obj)->c;
	pm = (struct pw_model *)model_obj;
	if (cfg == NULL || pm->m == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "Client: config or model not loaded");
		return -1;
	}
	PyMem_Free(c->tables); /* of an earlier __init__ that failed */
	c->tables = NULL;
	c->n_tables = 0;
	if (client_tables(c, pm->m) != 0)
		return -1;
	opts.spin_wait = spin != 0;
	opts.queue_depth = (uint32_t)depth;
	pm->users++; /* no table added while the servers may be checking the digest */
	c->opening = true;
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_client_open_interruptible(cfg, pm->m, &opts, open_interrupted, c, &c->cl);
	Py_END_ALLOW_THREADS
	c->opening = false;
	if (rc != 0 || c->cancel) {
		pm->users--;
		if (rc != 0)
			c->cl = NULL;
		/* Interrupted: the signal's own exception (KeyboardInterrupt) is already set. */
		if (rc == -ECANCELED && PyErr_Occurred())
			return -1;
		if (c->cancel)
			return open_cancelled(c);
		pw_raise(rc, NULL, NULL);
		return -1;
	}
	Py_INCREF(model_obj);
	c->model = model_obj;
	Py_INCREF(cfg_obj); /* the library reads the config until the close (recovery, lanes) */
	c->config = cfg_obj;
	return 0;
}

/*
 * Whether a signal handler raised while close waits (a slice of 100 ms at a time): the first
 * time, the client stops waiting for servers (wharf_client_interrupt), so that what is left
 * fails at once where a server is down, and the exception is kept in *exc for the end.
 */
static void close_signals(struct pw_client *c, PyObject **exc)
{
	if (exc[0] != NULL || exc[1] != NULL || PyErr_CheckSignals() == 0)
		return;
	PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
	wharf_client_interrupt(c->cl);
}

/*
 * Completes every request, waits out the calls in progress, closes. Idempotent. A blocking
 * call that a signal interrupted and that is still in flight, or a signal during the close,
 * makes it give up waiting for servers (wharf_client_interrupt). 0, or -1 with the signal's
 * exception raised once closed.
 */
static int client_close_now(struct pw_client *c)
{
	struct wharf_client *cl = c->cl;
	PyObject *exc[3] = { NULL, NULL, NULL };
	Py_ssize_t i;

	if (cl == NULL && c->opening) /* ends the wait for the servers (open_interrupted) */
		c->cancel = c->closing = true;
	if (cl == NULL || c->closing)
		return 0;
	c->closing = true;
	while (c->busy > 0) { /* calls of other threads, and submissions that register a req */
		Py_BEGIN_ALLOW_THREADS
		usleep(1000);
		Py_END_ALLOW_THREADS
		close_signals(c, exc);
	}
	for (i = 0; c->orphans != NULL && i < PyList_GET_SIZE(c->orphans); i++) {
		struct pw_req *r = (struct pw_req *)PyList_GET_ITEM(c->orphans, i);
		if (!r->reaped && !pw_req_done_now(r)) {
			wharf_client_interrupt(cl);
			break;
		}
	}
	while (c->reqs != NULL) {
		struct pw_req *r = c->reqs;
		bool done;

		/* Held across the wait: the thread whose request it is may reap and drop it
		 * meanwhile (a blocking call's, or a Request deleted). */
		Py_INCREF(r);
		Py_BEGIN_ALLOW_THREADS
		done = pw_req_wait_slice(r, 100);
		Py_END_ALLOW_THREADS
		if (done)
			pw_req_reap(r);
		else
			close_signals(c, exc);
		Py_DECREF(r);
	}
	Py_CLEAR(c->orphans);
	Py_BEGIN_ALLOW_THREADS
	wharf_client_close(cl);
	Py_END_ALLOW_THREADS
	c->cl = NULL;
	if (c->model != NULL)
		((struct pw_model *)c->model)->users--;
	if (exc[0] == NULL)
		return 0;
	PyErr_Restore(exc[0], exc[1], exc[2]);
	return -1;
}

static PyObject *client_close(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (client_close_now((struct pw_client *)self) != 0)
		return NULL;
	Py_RETURN_NONE;
}

static void client_dealloc(PyObject *self)
{
	struct pw_client *c = (struct pw_client *)self;
	PyObject *et, *ev, *tb;

	/* The caller's exception stays; a Ctrl-C during this close is raised again after it. */
	PyErr_Fetch(&et, &ev, &tb);
	if (client_close_now(c) != 0) {
		if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
			PyErr_Clear();
			PyErr_SetInterrupt();
		} else {
			PyErr_WriteUnraisable(self);
		}
	}
	PyErr_Restore(et, ev, tb);
	Py_CLEAR(c->model);
	Py_CLEAR(c->config);
	PyMem_Free(c->tables);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *client_stats(PyObject *self, PyObject *unused)
{
	struct pw_client *c = (struct pw_client *)self;
	struct wharf_client_stats s;

	(void)unused;
	if (pw_client_enter(c) != 0)
		return NULL;
	wharf_client_stats(c->cl, &s);
	pw_client_leave(c);
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "calls", s.calls, "requests",
			     s.requests, "replies", s.replies, "bytes_out", s.bytes_out, "bytes_in",
			     s.bytes_in, "reconnects", s.reconnects, "resent", s.resent);
}

static PyObject *client_step(PyObject *self, PyObject *unused)
{
	struct pw_client *c = (struct pw_client *)self;
	uint64_t step;

	(void)unused;
	if (pw_client_enter(c) != 0)
		return NULL;
	step = wharf_step(c->cl);
	pw_client_leave(c);
	return PyLong_FromUnsignedLongLong(step);
}

static PyObject *client_closed(PyObject *self, void *unused)
{
	struct pw_client *c = (struct pw_client *)self;

	(void)unused;
	return PyBool_FromLong(c->cl == NULL || c->closing);
}

static PyMethodDef client_methods[] = {
	{ "pull", pw_client_pull, METH_VARARGS, "pull(table, keys, out) -> out" },
	{ "push", pw_client_push, METH_VARARGS, "push(table, keys, grads)" },
	{ "push_pull", pw_client_push_pull, METH_VARARGS, "push_pull(table, keys, grads, out) -> out" },
	{ "dense_pull", pw_client_dense_pull, METH_VARARGS, "dense_pull(table, out) -> out" },
	{ "dense_push", pw_client_dense_push, METH_VARARGS, "dense_push(table, grads)" },
	{ "barrier", pw_client_barrier, METH_VARARGS, "barrier(step)" },
	{ "step", client_step, METH_NOARGS,
	  "step() -> the sync step this worker is in (where a restarted worker resumes)" },
	{ "pull_async", (PyCFunction)(void (*)(void))pw_client_pull_async,
	  METH_VARARGS | METH_KEYWORDS, "pull_async(table, keys, out) -> Request" },
	{ "push_async", (PyCFunction)(void (*)(void))pw_client_push_async,
	  METH_VARARGS | METH_KEYWORDS, "push_async(table, keys, grads) -> Request" },
	{ "push_pull_async", (PyCFunction)(void (*)(void))pw_client_push_pull_async,
	  METH_VARARGS | METH_KEYWORDS, "push_pull_async(table, keys, grads, out) -> Request" },
	{ "dense_pull_async", (PyCFunction)(void (*)(void))pw_client_dense_pull_async,
	  METH_VARARGS | METH_KEYWORDS, "dense_pull_async(table, out) -> Request" },
	{ "dense_push_async", (PyCFunction)(void (*)(void))pw_client_dense_push_async,
	  METH_VARARGS | METH_KEYWORDS, "dense_push_async(table, grads) -> Request" },
	{ "barrier_async", (PyCFunction)(void (*)(void))pw_client_barrier_async,
	  METH_VARARGS | METH_KEYWORDS, "barrier_async(step) -> Request" },
	{ "geo_pull", pw_client_geo_pull, METH_VARARGS,
	  "geo_pull(table) -> (keys, rows, n) as bytearrays: the rows changed since this worker's "
	  "last geo_pull" },
	{ "stats", client_stats, METH_NOARGS, "stats() -> dict of the client's counters" },
	{ "close", client_close, METH_NOARGS,
	  "close(): completes what is in flight (requests included) and disconnects" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef client_getset[] = {
	{ "closed", client_closed, NULL, "True once close() began", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject pw_ClientType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "wharf._wharf.Client",
	.tp_basicsize = sizeof(struct pw_client),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Client(config, model, spin_wait=False, queue_depth=0): a worker's connection",
	.tp_new = PyType_GenericNew,
	.tp_init = client_init,
	.tp_dealloc = client_dealloc,
	.tp_methods = client_methods,
	.tp_getset = client_getset,
};
