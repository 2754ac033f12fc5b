/*
 * pw_req.c — the calls (Client.pull_async etc.) and their handle, Request: the library
 * reads or writes the caller's arrays until the call completes, so the Request holds their
 * buffer exports (and so the arrays) until then; wait() returns out (or None) or raises. A
 * blocking call (Client.pull etc.) is its _async form waited for (req_finish).
 *
 * Call chain: Client.pull_async(table, keys, out) -> pw_buf_* -> wharf_pull_async(...,
 *   pw_req_done_cb, req, NULL) -> (network thread) pw_req_done_cb: status, signal -> (any
 *   Python thread) Request.wait() -> pw_req_reap: buffers released.
 * The completion comes by callback, not by wharf_wait: a wait with a timeout stays the
 * handle's to repeat, and a Request dropped unwaited (or a client closed under it) is reaped
 * by waiting for its callback, never by freeing memory the network thread may still write.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"

PyObject *pw_req_new(struct pw_client *c)
{
	struct pw_req *r = (struct pw_req *)pw_ReqType.tp_alloc(&pw_ReqType, 0);

	if (r == NULL)
		return NULL;
	Py_INCREF(c);
	r->client = c;
	return (PyObject *)r;
}

void pw_req_done_cb(void *arg, int status)
{
	struct pw_req *r = arg;

	if (status != 0) /* the library's why, set on this (the network) thread */
		snprintf(r->msg, sizeof(r->msg), "%s", wharf_errmsg());
	r->status = status;
	/*
	 * release: status, msg (and a GEO pull's rows) before PW_DONE. The wake comes after the
	 * store, with no lock for the woken waiter to run into (on one core a lock held across
	 * the wake cost a context switch more each way). The waiter may free r as soon as it
	 * sees PW_DONE; a wake on a freed word reads nothing, as libwharf's own completions do.
	 */
	if (atomic_exchange_explicit(&r->state, PW_DONE, memory_order_acq_rel) == PW_SLEEPING)
		syscall(SYS_futex, (uint32_t *)&r->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void req_release_views(struct pw_req *r)
{
	for (int i = 0; i < r->n_views; i++)
		PyBuffer_Release(&r->views[i]);
	r->n_views = 0;
}

static void req_unlink(struct pw_req *r)
{
	if (r->pprev == NULL)
		return;
	*r->pprev = r->next;
	if (r->next != NULL)
		r->next->pprev = r->pprev;
	r->next = NULL;
	r->pprev = NULL;
}

void pw_req_reap(struct pw_req *r)
{
	if (r->reaped)
		return;
	if (r->issued) {
		Py_BEGIN_ALLOW_THREADS
		while (!pw_req_wait_slice(r, 100))
			;
		Py_END_ALLOW_THREADS
		if (r->reaped) /* another thread reaped it while this one waited */
			return;
	}
	req_release_views(r);
	req_unlink(r);
	r->reaped = true;
}

PyObject *pw_req_issued(struct pw_req *r, int rc, const char *what)
{
	struct pw_client *c = r->client;

	pw_client_leave(c);
	if (rc != 0) {
		req_release_views(r);
		r->reaped = true;
		pw_raise(rc, what, NULL);
		Py_DECREF(r);
		return NULL;
	}
	r->issued = true;
	r->next = c->reqs;
	if (c->reqs != NULL)
		c->reqs->pprev = &r->next;
	c->reqs = r;
	r->pprev = &c->reqs;
	return (PyObject *)r;
}

/* An empty call (no keys) completes at once, without the library. */
static PyObject *req_completed_now(struct pw_req *r)
{
	pw_client_leave(r->client);
	req_release_views(r);
	atomic_store_explicit(&r->state, PW_DONE, memory_order_relaxed); /* nobody waits yet */
	r->reaped = true;
	return (PyObject *)r;
}

/* Parses and checks a sparse call's arguments into r: keys, then grads and/or out. */
static int req_sparse_args(struct pw_req *r, PyObject *table, PyObject *keys, PyObject *grads,
			   PyObject *out, const char *op, uint32_t *id, uint32_t *n)
{
	const struct pw_table_info *t = pw_client_table(r->client, table, WHARF_TABLE_SPARSE, op, id);

	if (t == NULL || pw_buf_keys(keys, &r->views[r->n_views], n) != 0)
		return -1;
	r->n_views++;
	if (grads != NULL) {
		if (pw_buf_rows(grads, "grads", false, *n, t->dim, &r->views[r->n_views]) != 0)
			return -1;
		r->n_views++;
	}
	if (out != NULL) {
		if (pw_buf_rows(out, "out", true, *n, t->dim, &r->views[r->n_views]) != 0)
			return -1;
		r->n_views++;
		if (pw_buf_apart(&r->views[r->n_views - 1], &r->views[0], "keys", false) != 0 ||
		    (grads != NULL &&
		     pw_buf_apart(&r->views[r->n_views - 1], &r->views[1], "grads", true) != 0))
			return -1;
		Py_INCREF(out);
		r->result = out;
	}
	return pw_client_enter(r->client);
}

static PyObject *req_fail(struct pw_req *r)
{
	req_release_views(r);
	r->reaped = true;
	Py_DECREF(r);
	return NULL;
}

/*
 * The calls. Each operation has one issuing function, named op in its messages, for its
 * _async form (a Request) and its blocking form (the Request waited for: req_finish).
 */
static PyObject *pull_req(PyObject *self, PyObject *table, PyObject *keys, PyObject *out,
			  const char *op)
{
	struct pw_req *r;
	uint32_t id, n;
	int rc;

	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if (req_sparse_args(r, table, keys, NULL, out, op, &id, &n) != 0)
		return req_fail(r);
	if (n == 0)
		return req_completed_now(r);
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_pull_async(r->client->cl, id, r->views[0].buf, n, r->views[1].buf,
			      pw_req_done_cb, r, NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

static PyObject *push_req(PyObject *self, PyObject *table, PyObject *keys, PyObject *grads,
			  const char *op)
{
	struct pw_req *r;
	uint32_t id, n;
	int rc;

	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if (req_sparse_args(r, table, keys, grads, NULL, op, &id, &n) != 0)
		return req_fail(r);
	if (n == 0)
		return req_completed_now(r);
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_push_async(r->client->cl, id, r->views[0].buf, n, r->views[1].buf,
			      pw_req_done_cb, r, NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

static PyObject *push_pull_req(PyObject *self, PyObject *table, PyObject *keys,
			       PyObject *grads, PyObject *out, const char *op)
{
	struct pw_req *r;
	uint32_t id, n;
	int rc;

	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if (req_sparse_args(r, table, keys, grads, out, op, &id, &n) != 0)
		return req_fail(r);
	if (n == 0)
		return req_completed_now(r);
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_push_pull_async(r->client->cl, id, r->views[0].buf, n, r->views[1].buf,
				   r->views[2].buf, pw_req_done_cb, r, NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

/* A dense call's arguments: the whole table in obj (out when writable, else grads). */
static int req_dense_args(struct pw_req *r, PyObject *table, PyObject *obj, bool writable,
			  const char *op, uint32_t *id)
{
	const struct pw_table_info *t = pw_client_table(r->client, table, WHARF_TABLE_DENSE, op, id);

	if (t == NULL || pw_buf_dense(obj, writable ? "out" : "grads", writable, t->rows, t->dim,
				      &r->views[0]) != 0)
		return -1;
	r->n_views = 1;
	if (writable) {
		Py_INCREF(obj);
		r->result = obj;
	}
	return pw_client_enter(r->client);
}

static PyObject *dense_req(PyObject *self, PyObject *table, PyObject *obj, bool pull,
			   const char *op)
{
	struct pw_req *r;
	uint32_t id;
	int rc;

	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if (req_dense_args(r, table, obj, pull, op, &id) != 0)
		return req_fail(r);
	Py_BEGIN_ALLOW_THREADS
	if (pull)
		rc = wharf_dense_pull_async(r->client->cl, id, r->views[0].buf, pw_req_done_cb, r,
					    NULL);
	else
		rc = wharf_dense_push_async(r->client->cl, id, r->views[0].buf, pw_req_done_cb, r,
					    NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

static PyObject *barrier_req(PyObject *self, PyObject *step_obj, const char *op)
{
	struct pw_req *r;
	uint64_t step;
	int rc;

	/* Checked, not wrapped: step 2**64 + s would be taken as s. */
	if (pw_get_u64(step_obj, "step", UINT64_MAX, &step) != 0)
		return NULL;
	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if (pw_client_enter(r->client) != 0)
		return req_fail(r);
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_barrier_async(r->client->cl, step, pw_req_done_cb, r, NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

PyObject *pw_client_pull_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "table", "keys", "out", NULL };
	PyObject *table, *keys, *out;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:pull_async", kwlist, &table, &keys, &out))
		return NULL;
	return pull_req(self, table, keys, out, "pull_async");
}

PyObject *pw_client_push_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "table", "keys", "grads", NULL };
	PyObject *table, *keys, *grads;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:push_async", kwlist, &table, &keys, &grads))
		return NULL;
	return push_req(self, table, keys, grads, "push_async");
}

PyObject *pw_client_push_pull_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "table", "keys", "grads", "out", NULL };
	PyObject *table, *keys, *grads, *out;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO:push_pull_async", kwlist, &table, &keys,
					 &grads, &out))
		return NULL;
	return push_pull_req(self, table, keys, grads, out, "push_pull_async");
}

PyObject *pw_client_dense_pull_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "table", "out", NULL };
	PyObject *table, *out;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:dense_pull_async", kwlist, &table, &out))
		return NULL;
	return dense_req(self, table, out, true, "dense_pull_async");
}

PyObject *pw_client_dense_push_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "table", "grads", NULL };
	PyObject *table, *grads;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:dense_push_async", kwlist, &table, &grads))
		return NULL;
	return dense_req(self, table, grads, false, "dense_push_async");
}

PyObject *pw_client_barrier_async(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "step", NULL };
	PyObject *step;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:barrier_async", kwlist, &step))
		return NULL;
	return barrier_req(self, step, "barrier_async");
}

/* The rows a GEO pull hands over, gathered on the network thread (no Python there). */
struct pw_geo_rows {
	uint64_t *keys;
	float *rows;
	size_t n, cap;
	uint32_t dim;
	bool nomem;
};

static void geo_on_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct pw_geo_rows *g = arg;

	if (g->nomem || dim != g->dim)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		uint64_t *k = realloc(g->keys, cap * sizeof(*k));
		float *r = k ? realloc(g->rows, cap * dim * sizeof(*r)) : NULL;

		if (k)
			g->keys = k;
		if (r == NULL) {
			g->nomem = true;
			return;
		}
		g->rows = r;
		g->cap = cap;
	}
	g->keys[g->n] = key;
	memcpy(g->rows + g->n * dim, row, dim * sizeof(float));
	g->n++;
}

static void geo_free(struct pw_req *r)
{
	if (r->geo == NULL)
		return;
	free(r->geo->keys);
	free(r->geo->rows);
	free(r->geo);
	r->geo = NULL;
}

static PyObject *geo_req(PyObject *self, PyObject *table, const char *op)
{
	const struct pw_table_info *t;
	struct pw_req *r;
	uint32_t id;
	int rc;

	if ((r = (struct pw_req *)pw_req_new((struct pw_client *)self)) == NULL)
		return NULL;
	if ((t = pw_client_table(r->client, table, WHARF_TABLE_SPARSE, op, &id)) == NULL)
		return req_fail(r);
	if ((r->geo = calloc(1, sizeof(*r->geo))) == NULL) {
		PyErr_NoMemory();
		return req_fail(r);
	}
	r->geo->dim = t->dim;
	if (pw_client_enter(r->client) != 0)
		return req_fail(r);
	Py_BEGIN_ALLOW_THREADS
	rc = wharf_geo_pull_async(r->client->cl, id, geo_on_row, r->geo, pw_req_done_cb, r, NULL);
	Py_END_ALLOW_THREADS
	return pw_req_issued(r, rc, op);
}

/* A completed GEO pull's (keys, rows, n), bytearrays, as its result; its rows freed. */
static int geo_result(struct pw_req *r)
{
	struct pw_geo_rows *g = r->geo;

	if (g->nomem) {
		geo_free(r);
		PyErr_NoMemory();
		return -1;
	}
	r->result = Py_BuildValue("(NNn)",
		PyByteArray_FromStringAndSize((const char *)g->keys, (Py_ssize_t)(g->n * 8)),
		PyByteArray_FromStringAndSize((const char *)g->rows, (Py_ssize_t)(g->n * g->dim * 4)),
		(Py_ssize_t)g->n);
	geo_free(r);
	return r->result != NULL ? 0 : -1;
}

static PyObject *req_finish(PyObject *req);

/* pull(table, keys, out) -> out */
PyObject *pw_client_pull(PyObject *self, PyObject *args)
{
	PyObject *table, *keys, *out;

	if (!PyArg_ParseTuple(args, "OOO:pull", &table, &keys, &out))
		return NULL;
	return req_finish(pull_req(self, table, keys, out, "pull"));
}

/* push(table, keys, grads) */
PyObject *pw_client_push(PyObject *self, PyObject *args)
{
	PyObject *table, *keys, *grads;

	if (!PyArg_ParseTuple(args, "OOO:push", &table, &keys, &grads))
		return NULL;
	return req_finish(push_req(self, table, keys, grads, "push"));
}

/* push_pull(table, keys, grads, out) -> out */
PyObject *pw_client_push_pull(PyObject *self, PyObject *args)
{
	PyObject *table, *keys, *grads, *out;

	if (!PyArg_ParseTuple(args, "OOOO:push_pull", &table, &keys, &grads, &out))
		return NULL;
	return req_finish(push_pull_req(self, table, keys, grads, out, "push_pull"));
}

/* dense_pull(table, out) -> out */
PyObject *pw_client_dense_pull(PyObject *self, PyObject *args)
{
	PyObject *table, *out;

	if (!PyArg_ParseTuple(args, "OO:dense_pull", &table, &out))
		return NULL;
	return req_finish(dense_req(self, table, out, true, "dense_pull"));
}

/* dense_push(table, grads) */
PyObject *pw_client_dense_push(PyObject *self, PyObject *args)
{
	PyObject *table, *grads;

	if (!PyArg_ParseTuple(args, "OO:dense_push", &table, &grads))
		return NULL;
	return req_finish(dense_req(self, table, grads, false, "dense_push"));
}

/* geo_pull(table) -> (keys, rows, n), bytearrays: the rows others changed since the last. */
PyObject *pw_client_geo_pull(PyObject *self, PyObject *args)
{
	PyObject *table;

	if (!PyArg_ParseTuple(args, "O:geo_pull", &table))
		return NULL;
	return req_finish(geo_req(self, table, "geo_pull"));
}

/* barrier(step) */
PyObject *pw_client_barrier(PyObject *self, PyObject *args)
{
	PyObject *step;

	if (!PyArg_ParseTuple(args, "O:barrier", &step))
		return NULL;
	return req_finish(barrier_req(self, step, "barrier"));
}

/* ------------------------------------------------------------------ Request */

/* Waits up to ms for completion (a futex wait; it may end early); true once completed. */
bool pw_req_wait_slice(struct pw_req *r, long ms)
{
	struct timespec rel = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	uint32_t s = PW_RUNNING;

	/* The first waiter marks it sleeping; s is then what it was (several may wait). */
	atomic_compare_exchange_strong_explicit(&r->state, &s, PW_SLEEPING, memory_order_acq_rel,
						memory_order_acquire);
	if (s != PW_DONE) /* returns at once if the callback stored PW_DONE meanwhile */
		syscall(SYS_futex, (uint32_t *)&r->state, FUTEX_WAIT_PRIVATE, PW_SLEEPING, &rel,
			NULL, 0);
	return pw_req_done_now(r);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Waits for r up to limit seconds (< 0: no limit) with the GIL released, looking for signals
 * every 100 ms. 1: completed; 0: the limit passed; -1: a signal handler raised (Ctrl-C:
 * KeyboardInterrupt), r still in flight.
 */
static int wait_for(struct pw_req *r, double limit)
{
	double t0 = now_s(), left;
	bool done = r->reaped || pw_req_done_now(r); /* wait(timeout=0) polls a completed one */

	while (!done) {
		long ms = 100;
		if (limit >= 0) {
			left = limit - (now_s() - t0);
			if (left <= 0)
				return 0;
			if (left * 1000 < ms)
				ms = (long)(left * 1000) + 1;
		}
		Py_BEGIN_ALLOW_THREADS
		done = pw_req_wait_slice(r, ms);
		Py_END_ALLOW_THREADS
		if (!done && PyErr_CheckSignals() != 0)
			return -1;
	}
	return 1;
}

/* A completed r, reaped: out (or None), or its error (the library's message) raised. */
static PyObject *req_result(struct pw_req *r)
{
	pw_req_reap(r);
	if (r->status != 0)
		return pw_raise_msg(r->status, r->msg, NULL);
	if (r->geo != NULL && geo_result(r) != 0)
		return NULL;
	if (r->result == NULL)
		Py_RETURN_NONE;
	Py_INCREF(r->result);
	return r->result;
}

/*
 * A blocking call: its Request (a new reference, or NULL when refused) waited for. A signal
 * meanwhile raises at once, and the call stays in flight: the client keeps the Request, and
 * so the arrays, until it completes; its close then gives up waiting for servers that are
 * down (wharf_client_interrupt), as the interrupted call was the user's stop.
 */
static PyObject *req_finish(PyObject *req)
{
	struct pw_req *r = (struct pw_req *)req;
	struct pw_client *c;
	PyObject *res, *et, *ev, *tb;
	int kept;

	if (r == NULL)
		return NULL;
	if (wait_for(r, -1) > 0) {
		res = req_result(r);
		Py_DECREF(req);
		return res;
	}
	c = r->client;
	PyErr_Fetch(&et, &ev, &tb);
	if (c->orphans == NULL)
		c->orphans = PyList_New(0);
	kept = c->orphans != NULL && PyList_Append(c->orphans, req) == 0;
	if (kept) {
		/* The client's list holds r now, and r's hold on the client is given up, so that
		 * no cycle keeps a dropped client (and its network thread) alive: the client
		 * outlives r, which its close releases. */
		r->orphan = true;
		Py_DECREF(c);
	} else
		pw_req_reap(r); /* no memory to keep it: wait for it here after all */
	PyErr_Clear();
	PyErr_Restore(et, ev, tb);
	Py_DECREF(req);
	return NULL;
}

/* wait(timeout=None) -> out or None; raises the call's error, or TimeoutError. */
static PyObject *req_wait(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	struct pw_req *r = (struct pw_req *)self;
	PyObject *timeout = Py_None;
	double limit = -1;
	int w;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &timeout))
		return NULL;
	if (timeout != Py_None) {
		limit = PyFloat_AsDouble(timeout);
		if (limit == -1.0 && PyErr_Occurred())
			return NULL;
		if (!(limit >= 0)) {
			PyErr_Format(PyExc_ValueError, "timeout: expected seconds >= 0 or None, got %R",
				     timeout);
			return NULL;
		}
	}
	w = wait_for(r, limit);
	if (w < 0)
		return NULL; /* still pending: wait() may be called again */
	if (w == 0) {
		char m[96];
		snprintf(m, sizeof(m), "wait: the request did not complete within %g s", limit);
		return pw_raise_msg(-ETIMEDOUT, m, pw_TimeoutError);
	}
	return req_result(r);
}

bool pw_req_done_now(struct pw_req *r)
{
	/* acquire: what the callback wrote before PW_DONE */
	return atomic_load_explicit(&r->state, memory_order_acquire) == PW_DONE;
}

static PyObject *req_done(PyObject *self, PyObject *unused)
{
	(void)unused;
	return PyBool_FromLong(pw_req_done_now((struct pw_req *)self));
}

static void req_dealloc(PyObject *self)
{
	struct pw_req *r = (struct pw_req *)self;

	pw_req_reap(r); /* the library may still write the arrays: wait for it */
	geo_free(r);
	Py_CLEAR(r->result);
	if (r->orphan)
		r->client = NULL; /* not its reference: req_finish gave it up */
	Py_CLEAR(r->client);
	Py_TYPE(self)->tp_free(self);
}

static PyMethodDef req_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))req_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait(timeout=None) -> out or None: the call's result, its error raised, or "
	  "wharf.TimeoutError when it is still in flight after timeout seconds" },
	{ "done", req_done, METH_NOARGS, "done() -> True once the call completed" },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject pw_ReqType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "wharf._wharf.Request",
	.tp_basicsize = sizeof(struct pw_req),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An asynchronous call in flight: wait(timeout=None), done(). It holds the "
		  "arrays the call reads or writes until it completed.",
	.tp_dealloc = req_dealloc,
	.tp_methods = req_methods,
};
