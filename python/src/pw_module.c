/*
 * pw_module.c — the module wharf._wharf: its exceptions, the Config type (wharf_config_load
 * over the executables' flags and the process environment), run_server / server_stop.
 *
 * Call chain: python/wharf/__init__.py init() -> Config(argv, eal) -> wharf_config_load;
 *   run_server() -> a thread of its own in wharf_server_run while the caller waits, the GIL
 *   released, and looks at Python's signals every 100 ms (a signal handler, KeyboardInterrupt
 *   included, that raises stops the server: wharf_server_stop, then the thread is joined).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "pw.h"

PyObject *pw_Error, *pw_TimeoutError, *pw_ConfigError;

PyObject *pw_raise_msg(int rc, const char *msg, PyObject *cls)
{
	PyObject *exc, *v;
	int e = rc < 0 ? -rc : rc;

	if (cls == NULL)
		cls = e == ETIMEDOUT ? pw_TimeoutError : pw_Error;
	if (msg == NULL || msg[0] == '\0')
		msg = strerror(e);
	exc = PyObject_CallFunction(cls, "s", msg);
	if (exc == NULL)
		return NULL;
	v = PyLong_FromLong(e);
	if (v == NULL || PyObject_SetAttrString(exc, "errno", v) != 0) {
		Py_XDECREF(v);
		Py_DECREF(exc);
		return NULL;
	}
	Py_DECREF(v);
	v = PyUnicode_FromString(msg);
	if (v == NULL || PyObject_SetAttrString(exc, "message", v) != 0) {
		Py_XDECREF(v);
		Py_DECREF(exc);
		return NULL;
	}
	Py_DECREF(v);
	PyErr_SetObject(cls, exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *pw_raise(int rc, const char *what, PyObject *cls)
{
	char buf[1024];
	const char *m = wharf_errmsg();

	if (m == NULL || m[0] == '\0')
		m = strerror(rc < 0 ? -rc : rc);
	if (what != NULL) {
		snprintf(buf, sizeof(buf), "%s: %s", what, m);
		m = buf;
	}
	return pw_raise_msg(rc, m, cls);
}

void pw_block_signals(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

/* ------------------------------------------------------------------ Config */

static const char *const role_names[] = { [WHARF_ROLE_SERVER] = "server",
					  [WHARF_ROLE_WORKER] = "worker" };
static const char *const mode_names[] = { [WHARF_MODE_SYNC] = "sync", [WHARF_MODE_ASYNC] = "async",
					  [WHARF_MODE_GEO] = "geo" };

/* argv: the flags as a wharf executable takes them after "--"; eal: EAL arguments or None. */
static int config_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "argv", "eal", NULL };
	struct pw_config *c = (struct pw_config *)self;
	PyObject *argv_obj, *seq = NULL;
	const char *eal = NULL;
	const char **argv = NULL;
	Py_ssize_t n, i;
	int rc, ret = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|z:Config", kwlist, &argv_obj, &eal))
		return -1;
	if (c->c != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "Config: already loaded");
		return -1;
	}
	seq = PySequence_Fast(argv_obj, "argv: expected a list of strings");
	if (seq == NULL)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	argv = PyMem_Calloc((size_t)n + 1, sizeof(*argv));
	if (argv == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++) {
		PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
		if (!PyUnicode_Check(s)) {
			PyErr_Format(PyExc_TypeError, "argv[%zd]: expected a string, got %s", i,
				     Py_TYPE(s)->tp_name);
			goto out;
		}
		if ((argv[i] = PyUnicode_AsUTF8(s)) == NULL)
			goto out;
	}
	/* Reads files and the environment only: the GIL stays (the loader uses getopt). */
	rc = wharf_config_load((int)n, argv, NULL, &c->c);
	if (rc != 0) {
		pw_raise(rc, NULL, rc == -ETIMEDOUT ? pw_TimeoutError : pw_ConfigError);
		goto out;
	}
	if (eal != NULL && (rc = wharf_config_set_eal(c->c, eal)) != 0) {
		pw_raise(rc, "eal", pw_ConfigError);
		goto out;
	}
	ret = 0;
out:
	PyMem_Free(argv);
	Py_DECREF(seq);
	return ret;
}

static void config_dealloc(PyObject *self)
{
	wharf_config_free(((struct pw_config *)self)->c);
	Py_TYPE(self)->tp_free(self);
}

static struct wharf_config *config_get(PyObject *self)
{
	struct wharf_config *c = ((struct pw_config *)self)->c;

	if (c == NULL)
		PyErr_SetString(PyExc_RuntimeError, "Config: not loaded");
	return c;
}

static PyObject *config_role(PyObject *self, void *unused)
{
	struct wharf_config *c = config_get(self);
	enum wharf_role r;

	(void)unused;
	if (c == NULL)
		return NULL;
	r = wharf_config_role(c);
	return PyUnicode_FromString(r == WHARF_ROLE_SERVER || r == WHARF_ROLE_WORKER ?
				    role_names[r] : "unknown");
}

static PyObject *config_mode(PyObject *self, void *unused)
{
	struct wharf_config *c = config_get(self);
	enum wharf_mode m;

	(void)unused;
	if (c == NULL)
		return NULL;
	m = wharf_config_mode(c);
	return PyUnicode_FromString(m <= WHARF_MODE_GEO ? mode_names[m] : "unknown");
}

static PyObject *config_protocol(PyObject *self, void *unused)
{
	struct wharf_config *c = config_get(self);

	(void)unused;
	return c == NULL ? NULL : PyUnicode_FromString(wharf_config_protocol(c));
}

#define CONFIG_U32(name, fn)                                                    \
	static PyObject *config_##name(PyObject *self, void *unused)            \
	{                                                                       \
		struct wharf_config *c = config_get(self);                      \
		(void)unused;                                                   \
		return c == NULL ? NULL : PyLong_FromUnsignedLong(fn(c));       \
	}
CONFIG_U32(index, wharf_config_index)
CONFIG_U32(servers, wharf_config_servers)
CONFIG_U32(workers, wharf_config_workers)
CONFIG_U32(geo_k, wharf_config_geo_k)

static PyGetSetDef config_getset[] = {
	{ "role", config_role, NULL, "'server' or 'worker'", NULL },
	{ "index", config_index, NULL, "this node's index among its role's nodes", NULL },
	{ "servers", config_servers, NULL, "number of servers", NULL },
	{ "workers", config_workers, NULL, "number of workers", NULL },
	{ "mode", config_mode, NULL, "'sync', 'async' or 'geo'", NULL },
	{ "geo_k", config_geo_k, NULL, "GEO: local steps between pushes", NULL },
	{ "protocol", config_protocol, NULL, "'dpdk' or 'kernel'", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject pw_ConfigType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "wharf._wharf.Config",
	.tp_basicsize = sizeof(struct pw_config),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Config(argv, eal=None): a cluster as the wharf executables read it",
	.tp_new = PyType_GenericNew,
	.tp_init = config_init,
	.tp_dealloc = config_dealloc,
	.tp_getset = config_getset,
};

/* ------------------------------------------------------------------ the server */

struct serve {
	const struct wharf_config *c;
	const struct wharf_model *m;
	const char *ckpt, *restore;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool finished;
	int rc;
	char err[1024];
};

static void *serve_main(void *arg)
{
	struct serve *s = arg;
	int rc = wharf_server_run(s->c, s->m, s->ckpt, s->restore);

	pthread_mutex_lock(&s->mu);
	s->rc = rc;
	if (rc != 0)
		snprintf(s->err, sizeof(s->err), "%s", wharf_errmsg());
	s->finished = true;
	pthread_cond_broadcast(&s->cv); /* to the waiter in run_server */
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Waits up to 100 ms for the server thread; true once it finished. GIL released. */
static bool serve_wait_slice(struct serve *s)
{
	struct timespec ts;
	bool fin;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->mu);
	while (!s->finished && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
		;
	fin = s->finished;
	pthread_mutex_unlock(&s->mu);
	return fin;
}

static PyObject *run_server(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "config", "model", "ckpt", "restore", NULL };
	PyObject *cfg, *model;
	struct serve s;
	pthread_t th;
	sigset_t old;
	bool fin = false;
	int rc, interrupted = 0;

	(void)mod;
	memset(&s, 0, sizeof(s));
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|zz:run_server", kwlist, &pw_ConfigType,
					 &cfg, &pw_ModelType, &model, &s.ckpt, &s.restore))
		return NULL;
	if ((s.c = config_get(cfg)) == NULL)
		return NULL;
	s.m = ((struct pw_model *)model)->m;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	/* The server's threads take no signal: Python's main thread handles them. */
	pw_block_signals(&old);
	rc = pthread_create(&th, NULL, serve_main, &s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return pw_raise_msg(-rc, "run_server: cannot start the server thread", NULL);
	((struct pw_model *)model)->users++;
	while (!fin) {
		Py_BEGIN_ALLOW_THREADS
		fin = serve_wait_slice(&s);
		Py_END_ALLOW_THREADS
		if (!fin && !interrupted && PyErr_CheckSignals() != 0) {
			/* A handler raised: stop the server, then hand the exception on. */
			interrupted = 1;
			wharf_server_stop();
		}
	}
	Py_BEGIN_ALLOW_THREADS
	pthread_join(th, NULL);
	Py_END_ALLOW_THREADS
	((struct pw_model *)model)->users--;
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
	if (interrupted)
		return NULL;
	if (s.rc != 0)
		return pw_raise_msg(s.rc, s.err, NULL);
	Py_RETURN_NONE;
}

static PyObject *server_stop(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	wharf_server_stop();
	Py_RETURN_NONE;
}

static PyObject *version(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	return PyUnicode_FromString(wharf_version());
}

static PyMethodDef pw_methods[] = {
	{ "run_server", (PyCFunction)(void (*)(void))run_server, METH_VARARGS | METH_KEYWORDS,
	  "run_server(config, model, ckpt=None, restore=None): serve until server_stop() or a "
	  "signal handler raises" },
	{ "server_stop", server_stop, METH_NOARGS,
	  "server_stop(): every run_server of this process drains and returns (any thread)" },
	{ "version", version, METH_NOARGS, "version(): the loaded libwharf's version" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef pw_moddef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "wharf._wharf",
	.m_doc = "libwharf's public API (include/wharf/wharf.h) for Python; see the wharf package",
	.m_size = -1,
	.m_methods = pw_methods,
};

static int add_type(PyObject *mod, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) != 0)
		return -1;
	Py_INCREF(t);
	if (PyModule_AddObject(mod, name, (PyObject *)t) != 0) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

static int add_errors(PyObject *mod)
{
	pw_Error = PyErr_NewExceptionWithDoc("wharf.Error",
		"A call refused or failed by libwharf: .errno (positive) and .message "
		"(wharf_errmsg(): the cause in one line).", PyExc_RuntimeError, NULL);
	if (pw_Error == NULL)
		return -1;
	pw_TimeoutError = PyErr_NewExceptionWithDoc("wharf.TimeoutError",
		"Something did not happen in time: a server that did not come up within the "
		"wait timeout, a request wait(timeout) gave up on.", pw_Error, NULL);
	pw_ConfigError = PyErr_NewExceptionWithDoc("wharf.ConfigError",
		"A refused configuration or model: a bad flag, variable, file line or table.",
		pw_Error, NULL);
	if (pw_TimeoutError == NULL || pw_ConfigError == NULL)
		return -1;
	Py_INCREF(pw_Error);
	Py_INCREF(pw_TimeoutError);
	Py_INCREF(pw_ConfigError);
	if (PyModule_AddObject(mod, "Error", pw_Error) != 0 ||
	    PyModule_AddObject(mod, "TimeoutError", pw_TimeoutError) != 0 ||
	    PyModule_AddObject(mod, "ConfigError", pw_ConfigError) != 0)
		return -1;
	return 0;
}

PyMODINIT_FUNC PyInit__wharf(void)
{
	PyObject *mod = PyModule_Create(&pw_moddef);

	if (mod == NULL)
		return NULL;
	if (add_errors(mod) != 0 || add_type(mod, &pw_ConfigType, "Config") != 0 ||
	    pw_model_types_ready(mod) != 0 || add_type(mod, &pw_ClientType, "Client") != 0 ||
	    add_type(mod, &pw_ReqType, "Request") != 0 ||
	    PyModule_AddIntConstant(mod, "MAX_DIM", WHARF_MAX_DIM) != 0 ||
	    PyModule_AddIntConstant(mod, "NAME_MAX", WHARF_NAME_MAX - 1) != 0 ||
	    PyModule_AddIntConstant(mod, "MAX_TABLES", WHARF_MAX_TABLES) != 0) {
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}
