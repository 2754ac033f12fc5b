/*
 * pw.h — wharf._wharf, the CPython extension over libwharf's public API (include/wharf/wharf.h):
 * the types, the error mapping and the buffer checks its files share.
 *
 * Call chain: python/wharf/__init__.py -> wharf._wharf (pw_module.c: module, errors, Config,
 *   run_server; pw_model.c: Model; pw_client.c: Client and its blocking calls; pw_req.c: the
 *   asynchronous calls and their Request handle; pw_buf.c: argument checks) -> libwharf.
 *
 * Threading: every call that can wait (a request, opening a client, serving) runs with the
 * GIL released; the buffers it reads or writes are held as Py_buffer exports for as long as
 * the library may touch them, so an array cannot be freed or resized under it.
 */
#ifndef WHARF_PW_H
#define WHARF_PW_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "wharf/wharf.h"

/* ---- errors (pw_module.c) */
extern PyObject *pw_Error;        /* wharf.Error(RuntimeError): .errno, .message */
extern PyObject *pw_TimeoutError; /* wharf.TimeoutError(wharf.Error): -ETIMEDOUT */
extern PyObject *pw_ConfigError;  /* wharf.ConfigError(wharf.Error): a refused config or model */

/*
 * Raises the exception for rc (a negative errno) with the calling thread's wharf_errmsg(),
 * or strerror when it is empty; what (may be NULL) prefixes the message. Returns NULL.
 */
PyObject *pw_raise(int rc, const char *what, PyObject *cls);
/* The same with a message of the caller's, read before the GIL was taken back. */
PyObject *pw_raise_msg(int rc, const char *msg, PyObject *cls);

/* ---- Model (pw_model.c) */
struct pw_model {
	PyObject_HEAD
	struct wharf_model *m;
	int users; /* clients and servers using it: tables can no longer be added */
};
extern PyTypeObject pw_ModelType;
int pw_model_types_ready(PyObject *mod);
/* An int argument in 0..max (no wrapping): 0, or -1 with TypeError/ValueError naming arg. */
int pw_get_u64(PyObject *obj, const char *arg, uint64_t max, uint64_t *out);

/* ---- Config (pw_module.c) */
struct pw_config {
	PyObject_HEAD
	struct wharf_config *c;
};
extern PyTypeObject pw_ConfigType;

/* ---- buffers (pw_buf.c) */
enum pw_elem { PW_U64, PW_F32 };

/*
 * The buffer of obj as one C-contiguous array of elem, named arg in every refusal: TypeError
 * for no buffer or another element type, ValueError for a strided, read-only (when
 * writable) or byte-swapped one. On success the caller releases view (PyBuffer_Release).
 */
int pw_buf_get(PyObject *obj, const char *arg, enum pw_elem elem, bool writable,
	       Py_buffer *view);
/* keys: a 1-D uint64 array; *n its length (at most UINT32_MAX). */
int pw_buf_keys(PyObject *obj, Py_buffer *view, uint32_t *n);
/*
 * Rows of a sparse table: shape (n, dim), or (n,) when dim is 1. arg names the argument.
 */
int pw_buf_rows(PyObject *obj, const char *arg, bool writable, uint32_t n, uint32_t dim,
		Py_buffer *view);
/*
 * ValueError unless out's memory is apart from in's (named arg), or is in's itself when
 * same_ok: the library writes out as replies come while it may still read in.
 */
int pw_buf_apart(const Py_buffer *out, const Py_buffer *in, const char *arg, bool same_ok);
/* A whole dense table: any shape holding rows * dim floats. */
int pw_buf_dense(PyObject *obj, const char *arg, bool writable, uint64_t rows, uint32_t dim,
		 Py_buffer *view);

/* ---- Client (pw_client.c) */
struct pw_table_info {
	enum wharf_table_kind kind;
	uint32_t dim;
	uint64_t rows;
	char name[WHARF_NAME_MAX];
};

struct pw_req;

struct pw_client {
	PyObject_HEAD
	struct wharf_client *cl;
	PyObject *config;           /* the struct pw_config it was opened with (the library
				     * reads it until the client is closed) */
	PyObject *model;            /* the struct pw_model it serves */
	struct pw_table_info *tables;
	uint32_t n_tables;
	int busy;                   /* calls in progress (GIL held to change it) */
	bool opening;               /* waiting for the servers in Client() */
	bool cancel;                /* closed meanwhile: the open gives up */
	bool closing;
	struct pw_req *reqs;        /* requests issued and not yet reaped */
	PyObject *orphans;          /* list: blocking calls a signal interrupted (req_finish) */
};
extern PyTypeObject pw_ClientType;

/* Enters a call on cl (refused when closed); every success is paired with pw_client_leave. */
int pw_client_enter(struct pw_client *c);
void pw_client_leave(struct pw_client *c);
/* The table's description, or NULL with ValueError/TypeError (a kind other than want). */
const struct pw_table_info *pw_client_table(struct pw_client *c, PyObject *table,
					    enum wharf_table_kind want, const char *op,
					    uint32_t *id);
/* Blocks every signal in the calling thread (threads the library starts inherit it). */
void pw_block_signals(sigset_t *old);

/* ---- asynchronous requests (pw_req.c) */
enum { PW_RUNNING = 0, PW_SLEEPING, PW_DONE };
struct pw_req {
	PyObject_HEAD
	struct pw_client *client;   /* a strong reference, but for an orphan's */
	Py_buffer views[3];
	int n_views;
	PyObject *result;           /* what wait() returns (out, or None) */
	_Atomic uint32_t state;     /* PW_RUNNING, PW_SLEEPING (a waiter's futex), PW_DONE */
	int status;
	bool issued;                /* the library holds it: the callback will run */
	bool reaped;                /* completed and the views released */
	bool orphan;                /* a blocking call's, left in flight by a signal */
	struct pw_geo_rows *geo;    /* a GEO pull's rows, gathered on the network thread */
	char msg[256];              /* wharf_errmsg() of a failed completion */
	struct pw_req *next, **pprev; /* in client->reqs while issued and not reaped */
};
extern PyTypeObject pw_ReqType;

PyObject *pw_req_new(struct pw_client *c);
/* The library took the request (rc == 0) or refused it: registers it or fails with rc. */
PyObject *pw_req_issued(struct pw_req *r, int rc, const char *msg);
wharf_done_fn pw_req_done_cb;
/* Waits for r's completion with the GIL released; releases its views. */
void pw_req_reap(struct pw_req *r);
/* Whether r completed (its callback ran). */
bool pw_req_done_now(struct pw_req *r);
/* Waits up to ms for r's completion; true once completed. Call without the GIL. */
bool pw_req_wait_slice(struct pw_req *r, long ms);

/* Client methods that live in pw_req.c. */
PyObject *pw_client_pull_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pw_client_push_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pw_client_push_pull_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pw_client_dense_pull_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pw_client_dense_push_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pw_client_barrier_async(PyObject *self, PyObject *args, PyObject *kw);
/* The blocking calls: each is its _async form waited for (req_finish, pw_req.c). */
PyObject *pw_client_pull(PyObject *self, PyObject *args);
PyObject *pw_client_push(PyObject *self, PyObject *args);
PyObject *pw_client_push_pull(PyObject *self, PyObject *args);
PyObject *pw_client_dense_pull(PyObject *self, PyObject *args);
PyObject *pw_client_dense_push(PyObject *self, PyObject *args);
PyObject *pw_client_barrier(PyObject *self, PyObject *args);
PyObject *pw_client_geo_pull(PyObject *self, PyObject *args);

#endif
