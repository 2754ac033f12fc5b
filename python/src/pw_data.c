/*
 * pw_data.c — wharf._data: the datasets of the C trainer (apps/train) for the Python
 * examples, from the same code, so a PyTorch run and a wharf-train run see the same samples
 * and are judged alike: Fashion-MNIST from Debian's IDX files (wc_fmnist_load, every check
 * included), the CTR generator with its planted model (wc_ctr_gen_*) and exact AUC (wc_auc).
 *
 * Call chain: python/wharf/data.py -> fashion_mnist / ctr_sample / auc -> apps/common
 *   (its objects, linked in). Results are bytearrays, which numpy.frombuffer views writable.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>

#include "apps/common/wc_data.h"
#include "apps/common/wc_model.h"

/* fashion_mnist(dir, train, limit) -> (x: n*dim float32, y: n uint8, n, dim), bytearrays */
static PyObject *fashion_mnist(PyObject *mod, PyObject *args)
{
	const char *dir = NULL;
	int train;
	unsigned int limit = 0;
	struct wc_dataset *d = NULL;
	char err[512];
	PyObject *res;
	int rc;

	(void)mod;
	if (!PyArg_ParseTuple(args, "zpI:fashion_mnist", &dir, &train, &limit))
		return NULL;
	err[0] = '\0';
	Py_BEGIN_ALLOW_THREADS
	rc = wc_fmnist_load(dir, train, limit, &d, err, sizeof(err));
	Py_END_ALLOW_THREADS
	if (rc != 0) {
		errno = -rc;
		return PyErr_Format(rc == -ENOENT ? PyExc_FileNotFoundError : PyExc_OSError, "%s",
				    err[0] ? err : strerror(-rc));
	}
	res = Py_BuildValue("(NNII)",
			    PyByteArray_FromStringAndSize((const char *)d->x, (Py_ssize_t)d->n * d->dim * 4),
			    PyByteArray_FromStringAndSize((const char *)d->y, (Py_ssize_t)d->n), d->n,
			    d->dim);
	wc_dataset_destroy(d);
	return res;
}

/*
 * ctr_sample(n, rng_seed, spec_seed=7) -> (keys n*fields u64, labels n f32, p_true n f32,
 * fields), each a bytearray: n samples of the default spec (wc_ctr_spec_default) whose
 * planted model comes from spec_seed, drawn from a stream seeded with rng_seed.
 */
static PyObject *ctr_sample(PyObject *mod, PyObject *args)
{
	unsigned int n;
	unsigned long long rng_seed, spec_seed = 7;
	struct wc_ctr_spec spec;
	struct wc_ctr_gen *g;
	struct wc_rng r;
	PyObject *keys, *labels, *p;
	int rc;

	(void)mod;
	if (!PyArg_ParseTuple(args, "IK|K:ctr_sample", &n, &rng_seed, &spec_seed))
		return NULL;
	if (n == 0 || n > 10000000u) {
		PyErr_Format(PyExc_ValueError, "n: expected 1..10000000 samples, got %u", n);
		return NULL;
	}
	wc_ctr_spec_default(&spec);
	spec.seed = spec_seed;
	if ((rc = wc_ctr_gen_create(&spec, &g)) != 0) {
		errno = -rc;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	keys = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * spec.n_fields * 8);
	labels = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * 4);
	p = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * 4);
	if (keys == NULL || labels == NULL || p == NULL) {
		wc_ctr_gen_destroy(g);
		Py_XDECREF(keys);
		Py_XDECREF(labels);
		Py_XDECREF(p);
		return NULL;
	}
	wc_rng_seed(&r, rng_seed);
	Py_BEGIN_ALLOW_THREADS
	wc_ctr_gen_sample(g, &r, n, (uint64_t *)PyByteArray_AS_STRING(keys),
			  (float *)PyByteArray_AS_STRING(labels), (float *)PyByteArray_AS_STRING(p));
	Py_END_ALLOW_THREADS
	wc_ctr_gen_destroy(g);
	return Py_BuildValue("(NNNI)", keys, labels, p, spec.n_fields);
}

/* A C-contiguous float32 buffer of obj, named arg when refused. */
static int f32_buffer(PyObject *obj, const char *arg, Py_buffer *v)
{
	if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
		return -1;
	if (v->itemsize != 4 || v->format == NULL || strchr("f=<@", v->format[0]) == NULL ||
	    v->format[strlen(v->format) - 1] != 'f') {
		PyErr_Format(PyExc_TypeError, "%s: expected a float32 array", arg);
		PyBuffer_Release(v);
		return -1;
	}
	return 0;
}

/* auc(scores, labels) -> the exact ROC AUC (ties count one half), as wharf-train computes it. */
static PyObject *auc(PyObject *mod, PyObject *args)
{
	PyObject *s_obj, *l_obj;
	Py_buffer s, l;
	Py_ssize_t n;
	double v = 0;
	int rc;

	(void)mod;
	if (!PyArg_ParseTuple(args, "OO:auc", &s_obj, &l_obj) || f32_buffer(s_obj, "scores", &s) != 0)
		return NULL;
	if (f32_buffer(l_obj, "labels", &l) != 0) {
		PyBuffer_Release(&s);
		return NULL;
	}
	n = s.len / 4;
	if (l.len / 4 != n || n == 0 || n > (Py_ssize_t)UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "labels: expected %zd labels (one per score), got %zd",
			     n, l.len / 4);
		rc = -1;
	} else if ((rc = wc_auc(s.buf, l.buf, (uint32_t)n, &v)) != 0) {
		PyErr_Format(PyExc_ValueError, "auc: %s", rc == -EDOM ? "the labels hold one class only" :
			     rc == -EINVAL ? "a score is NaN" : strerror(-rc));
	}
	PyBuffer_Release(&s);
	PyBuffer_Release(&l);
	return rc == 0 ? PyFloat_FromDouble(v) : NULL;
}

static PyMethodDef data_methods[] = {
	{ "fashion_mnist", fashion_mnist, METH_VARARGS,
	  "fashion_mnist(dir, train, limit) -> (x bytes, y bytes, n, dim)" },
	{ "ctr_sample", ctr_sample, METH_VARARGS,
	  "ctr_sample(n, rng_seed, spec_seed=7) -> (keys bytes, labels bytes, p_true bytes, fields)" },
	{ "auc", auc, METH_VARARGS, "auc(scores, labels) -> exact ROC AUC" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef data_moddef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "wharf._data",
	.m_doc = "the C trainer's datasets (Fashion-MNIST, the CTR generator) and AUC",
	.m_size = -1,
	.m_methods = data_methods,
};

PyMODINIT_FUNC PyInit__data(void)
{
	PyObject *mod = PyModule_Create(&data_moddef);

	if (mod != NULL && (PyModule_AddIntConstant(mod, "CTR_FIELDS", WC_CTR_FIELDS) != 0 ||
			    PyModule_AddStringConstant(mod, "FMNIST_DIR", WC_FMNIST_DIR) != 0)) {
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}
