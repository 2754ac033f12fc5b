/*
 * pw_buf.c — the checks on every array handed to wharf._wharf: through the buffer protocol,
 * C-contiguous, native byte order, uint64 keys or float32 rows of the table's shape; writable
 * for an out= array. Nothing is copied: the library reads and writes the array's own memory.
 *
 * Call chain: pw_client.c / pw_req.c argument parsing -> pw_buf_keys / pw_buf_rows /
 * pw_buf_dense -> pw_buf_get -> PyObject_GetBuffer.
 */
#include "pw.h"

static const char *elem_name(enum pw_elem e)
{
	return e == PW_U64 ? "uint64" : "float32";
}

/* The element of a struct-module format, or -1: "Q", "<L", "=f", ... of the right size. */
static int format_elem(const char *fmt, Py_ssize_t itemsize, bool *swapped)
{
	*swapped = false;
	if (fmt == NULL)
		fmt = "B";
	if (fmt[0] == '>' || fmt[0] == '!') {
		*swapped = true; /* this host is little-endian (wharf.h's wire and x86) */
		fmt++;
	} else if (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<') {
		fmt++;
	}
	if (fmt[0] == '\0' || fmt[1] != '\0')
		return -1;
	if ((fmt[0] == 'Q' || fmt[0] == 'L') && itemsize == 8)
		return PW_U64;
	if (fmt[0] == 'f' && itemsize == 4)
		return PW_F32;
	return -1;
}

/* The dtype's name as NumPy would say it, for a refusal. */
static const char *format_name(const char *fmt, Py_ssize_t itemsize)
{
	static const struct { char c; const char *name; } names[] = {
		{ 'b', "int8" }, { 'B', "uint8" }, { 'h', "int16" }, { 'H', "uint16" },
		{ 'i', "int32" }, { 'I', "uint32" }, { 'l', "int64" }, { 'q', "int64" },
		{ 'L', "uint64" }, { 'Q', "uint64" }, { 'e', "float16" }, { 'f', "float32" },
		{ 'd', "float64" }, { '?', "bool" },
	};
	const char *f = fmt ? fmt : "B";

	if (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!')
		f++;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f[0] == names[i].c && f[1] == '\0')
			return itemsize == 4 && (f[0] == 'l' || f[0] == 'L') ? "int32" : names[i].name;
	return fmt ? fmt : "bytes";
}

int pw_buf_get(PyObject *obj, const char *arg, enum pw_elem elem, bool writable,
	       Py_buffer *view)
{
	bool swapped;
	int got;

	if (!PyObject_CheckBuffer(obj)) {
		PyErr_Format(PyExc_TypeError, "%s: expected a NumPy %s array (the buffer protocol; "
			     "a torch tensor's .numpy()), got %s", arg, elem_name(elem),
			     Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) != 0) {
		PyErr_Clear();
		if (PyObject_GetBuffer(obj, view, PyBUF_FULL_RO) != 0)
			return -1;
	}
	got = format_elem(view->format, view->itemsize, &swapped);
	if (got != (int)elem) {
		PyErr_Format(PyExc_TypeError, "%s: expected dtype %s, got %s", arg, elem_name(elem),
			     format_name(view->format, view->itemsize));
		goto out_release;
	}
	if (swapped) {
		PyErr_Format(PyExc_ValueError, "%s: expected native byte order, got a byte-swapped "
			     "(big-endian) %s array", arg, elem_name(elem));
		goto out_release;
	}
	if (view->suboffsets != NULL || !PyBuffer_IsContiguous(view, 'C')) {
		PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous array (no copy is made: "
			     "pass numpy.ascontiguousarray(...))", arg);
		goto out_release;
	}
	if (writable && view->readonly) {
		PyErr_Format(PyExc_ValueError, "%s: the array is read-only", arg);
		goto out_release;
	}
	return 0;
out_release:
	PyBuffer_Release(view);
	return -1;
}

static void shape_str(const Py_buffer *v, char *s, size_t len)
{
	size_t o = 0;

	o += (size_t)snprintf(s, len, "(");
	for (int i = 0; i < v->ndim && o < len; i++)
		o += (size_t)snprintf(s + o, len - o, i ? ", %zd" : "%zd",
				      v->shape ? v->shape[i] : v->len / v->itemsize);
	if (o < len)
		snprintf(s + o, len - o, v->ndim == 1 ? ",)" : ")");
}

int pw_buf_keys(PyObject *obj, Py_buffer *view, uint32_t *n)
{
	char s[96];

	if (pw_buf_get(obj, "keys", PW_U64, false, view) != 0)
		return -1;
	if (view->ndim != 1) {
		shape_str(view, s, sizeof(s));
		PyErr_Format(PyExc_ValueError, "keys: expected a 1-D array, got shape %s", s);
		goto out_release;
	}
	if (view->shape[0] > (Py_ssize_t)UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "keys: at most %u keys per call, got %zd", UINT32_MAX,
			     view->shape[0]);
		goto out_release;
	}
	*n = (uint32_t)view->shape[0];
	return 0;
out_release:
	PyBuffer_Release(view);
	return -1;
}

int pw_buf_rows(PyObject *obj, const char *arg, bool writable, uint32_t n, uint32_t dim,
		Py_buffer *view)
{
	char s[96];

	if (pw_buf_get(obj, arg, PW_F32, writable, view) != 0)
		return -1;
	if (view->ndim == 2 && view->shape[0] == (Py_ssize_t)n && view->shape[1] == (Py_ssize_t)dim)
		return 0;
	if (view->ndim == 1 && dim == 1 && view->shape[0] == (Py_ssize_t)n)
		return 0;
	shape_str(view, s, sizeof(s));
	PyErr_Format(PyExc_ValueError, "%s: expected shape (%u, %u) (one row of the table's dim "
		     "per key), got %s", arg, n, dim, s);
	PyBuffer_Release(view);
	return -1;
}

int pw_buf_apart(const Py_buffer *out, const Py_buffer *in, const char *arg, bool same_ok)
{
	uintptr_t o = (uintptr_t)out->buf, i = (uintptr_t)in->buf;

	if (out->len == 0 || in->len == 0 || o >= i + (uintptr_t)in->len ||
	    i >= o + (uintptr_t)out->len || (same_ok && o == i && out->len == in->len))
		return 0;
	PyErr_Format(PyExc_ValueError, "out: overlaps %s%s", arg,
		     same_ok ? " (it may be that array itself, not a part of it)" : "");
	return -1;
}

int pw_buf_dense(PyObject *obj, const char *arg, bool writable, uint64_t rows, uint32_t dim,
		 Py_buffer *view)
{
	uint64_t want = rows * dim;
	char s[96];

	if (pw_buf_get(obj, arg, PW_F32, writable, view) != 0)
		return -1;
	if ((uint64_t)(view->len / view->itemsize) == want)
		return 0;
	shape_str(view, s, sizeof(s));
	PyErr_Format(PyExc_ValueError, "%s: expected %llu floats (the whole table, %llu rows x %u), "
		     "got shape %s", arg, (unsigned long long)want, (unsigned long long)rows, dim, s);
	PyBuffer_Release(view);
	return -1;
}
