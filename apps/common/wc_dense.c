/*
 * wc_dense.c — softmax regression and a one-hidden-layer ReLU MLP: forward, mean
 * cross-entropy, backward into a flat gradient array, and evaluation.
 *
 * Call chain: apps/train step -> (ps client dense pull) -> wc_dense_loss_grad -> (dense push).
 * Per step there is no allocation: activations live in a wc_dense_ws created once.
 *
 * Speed: weights are stored input-major, so both the forward pass (h += x[k] * W[k][:]) and
 * the weight gradient (dW[k][:] += x[k] * dh[:]) are axpy loops over contiguous outputs,
 * written with GCC vector types so they vectorise at -O2 without -ffast-math; zero pixels
 * (about half of Fashion-MNIST) are skipped. No BLAS.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_model.h"
#include "apps/common/wc_vec.h"

#define WC_DENSE_MAX_DIM (1u << 20)

struct wc_dense_ws {
	struct wc_dense_spec spec;
	uint32_t max_batch;
	float *h;  /* max_batch * hidden, post-ReLU (MLP) */
	float *p;  /* max_batch * classes, softmax output */
	float *dz; /* classes */
	float *dh; /* hidden */
};


int wc_dense_check(const struct wc_dense_spec *s)
{
	if (s->in_dim == 0 || s->in_dim > WC_DENSE_MAX_DIM || s->n_classes < 2 ||
	    s->n_classes > WC_DENSE_MAX_DIM)
		return -EINVAL;
	if (s->kind == WC_DENSE_SOFTMAX)
		return s->hidden == 0 ? 0 : -EINVAL;
	if (s->kind == WC_DENSE_MLP)
		return s->hidden > 0 && s->hidden <= WC_DENSE_MAX_DIM ? 0 : -EINVAL;
	return -EINVAL;
}

unsigned wc_dense_tensors(const struct wc_dense_spec *s, struct wc_tensor_desc out[4])
{
	size_t off = 0;

	if (s->kind == WC_DENSE_SOFTMAX) {
		out[0] = (struct wc_tensor_desc){ "W", 0, s->in_dim, s->n_classes };
		off = (size_t)s->in_dim * s->n_classes;
		out[1] = (struct wc_tensor_desc){ "b", off, 1, s->n_classes };
		return 2;
	}
	out[0] = (struct wc_tensor_desc){ "W1", 0, s->in_dim, s->hidden };
	off = (size_t)s->in_dim * s->hidden;
	out[1] = (struct wc_tensor_desc){ "b1", off, 1, s->hidden };
	off += s->hidden;
	out[2] = (struct wc_tensor_desc){ "W2", off, s->hidden, s->n_classes };
	off += (size_t)s->hidden * s->n_classes;
	out[3] = (struct wc_tensor_desc){ "b2", off, 1, s->n_classes };
	return 4;
}

size_t wc_dense_param_count(const struct wc_dense_spec *s)
{
	struct wc_tensor_desc t[4];
	unsigned n = wc_dense_tensors(s, t);

	return t[n - 1].offset + (size_t)t[n - 1].rows * t[n - 1].cols;
}

void wc_dense_init(const struct wc_dense_spec *s, float *params, uint64_t seed)
{
	struct wc_tensor_desc t[4];
	unsigned n = wc_dense_tensors(s, t), i;
	struct wc_rng r;
	size_t j, cnt;

	memset(params, 0, wc_dense_param_count(s) * sizeof(float));
	if (s->kind == WC_DENSE_SOFTMAX)
		return; /* convex: zeros are as good a start as any */
	wc_rng_seed(&r, seed);
	for (i = 0; i < n; i += 2) { /* weights only; biases stay zero */
		double lim = sqrt(6.0 / t[i].rows); /* He-uniform for ReLU, fan_in = rows */
		cnt = (size_t)t[i].rows * t[i].cols;
		for (j = 0; j < cnt; j++)
			params[t[i].offset + j] = (float)((2.0 * wc_rng_uniform(&r) - 1.0) * lim);
	}
}

int wc_dense_ws_create(const struct wc_dense_spec *s, uint32_t max_batch, struct wc_dense_ws **out)
{
	struct wc_dense_ws *ws;
	uint32_t hid = s->kind == WC_DENSE_MLP ? s->hidden : 1;

	if (wc_dense_check(s) != 0 || max_batch == 0 || max_batch > (1u << 20))
		return -EINVAL;
	ws = calloc(1, sizeof(*ws));
	if (ws == NULL)
		return -ENOMEM;
	ws->spec = *s;
	ws->max_batch = max_batch;
	ws->h = malloc((size_t)max_batch * hid * sizeof(float));
	ws->p = malloc((size_t)max_batch * s->n_classes * sizeof(float));
	ws->dz = malloc((size_t)s->n_classes * sizeof(float));
	ws->dh = malloc((size_t)hid * sizeof(float));
	if (ws->h == NULL || ws->p == NULL || ws->dz == NULL || ws->dh == NULL) {
		wc_dense_ws_destroy(ws);
		return -ENOMEM;
	}
	*out = ws;
	return 0;
}

void wc_dense_ws_destroy(struct wc_dense_ws *ws)
{
	if (ws == NULL)
		return;
	free(ws->h);
	free(ws->p);
	free(ws->dz);
	free(ws->dh);
	free(ws);
}

/* Forward for sample i into ws->h (MLP) and ws->p; returns its loss. */
static double forward_one(const struct wc_dense_spec *s, struct wc_dense_ws *ws,
			  const float *params, const float *x, uint8_t y, uint32_t i, int *hit)
{
	const uint32_t C = s->n_classes, H = s->hidden;
	float *p = ws->p + (size_t)i * C;
	float *h;
	uint32_t j;

	if (s->kind == WC_DENSE_SOFTMAX) {
		wc_affine(x, s->in_dim, params, params + (size_t)s->in_dim * C, C, p);
		return wc_softmax_xent(p, C, y, hit);
	}
	h = ws->h + (size_t)i * H;
	wc_affine(x, s->in_dim, params, params + (size_t)s->in_dim * H, H, h);
	for (j = 0; j < H; j++)
		h[j] = h[j] > 0.0f ? h[j] : 0.0f;
	params += (size_t)s->in_dim * H + H;
	wc_affine(h, H, params, params + (size_t)H * C, C, p);
	return wc_softmax_xent(p, C, y, hit);
}

/* Accumulate sample i's gradient (dz already scaled by 1/n) into grad. */
static void backward_one(const struct wc_dense_spec *s, struct wc_dense_ws *ws,
			 const float *params, const float *x, uint32_t i, float *grad)
{
	const uint32_t C = s->n_classes, H = s->hidden, D = s->in_dim;
	const float *dz = ws->dz, *h, *W2;
	float *dh = ws->dh;
	uint32_t k, j, c;

	if (s->kind == WC_DENSE_SOFTMAX) {
		for (k = 0; k < D; k++)
			if (x[k] != 0.0f)
				wc_axpy(grad + (size_t)k * C, dz, x[k], C);
		wc_axpy(grad + (size_t)D * C, dz, 1.0f, C);
		return;
	}
	h = ws->h + (size_t)i * H;
	W2 = params + (size_t)D * H + H;
	float *gW2 = grad + (size_t)D * H + H;
	for (j = 0; j < H; j++) {
		float acc = 0.0f;
		if (h[j] == 0.0f) { /* ReLU was off: no gradient through this unit */
			dh[j] = 0.0f;
			continue;
		}
		wc_axpy(gW2 + (size_t)j * C, dz, h[j], C);
		for (c = 0; c < C; c++)
			acc += W2[(size_t)j * C + c] * dz[c];
		dh[j] = acc;
	}
	wc_axpy(gW2 + (size_t)H * C, dz, 1.0f, C);
	for (k = 0; k < D; k++)
		if (x[k] != 0.0f)
			wc_axpy(grad + (size_t)k * H, dh, x[k], H);
	wc_axpy(grad + (size_t)D * H, dh, 1.0f, H);
}

int wc_dense_loss_grad(const struct wc_dense_spec *s, struct wc_dense_ws *ws, const float *params,
		       const float *x, const uint8_t *y, uint32_t n, float *grad, double *loss,
		       uint32_t *correct)
{
	const uint32_t C = s->n_classes;
	double total = 0;
	uint32_t i, c, hits = 0;
	int hit;

	if (n == 0 || n > ws->max_batch || memcmp(s, &ws->spec, sizeof(*s)) != 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (y[i] >= C)
			return -EINVAL;
	for (i = 0; i < n; i++) {
		total += forward_one(s, ws, params, x + (size_t)i * s->in_dim, y[i], i, &hit);
		hits += (uint32_t)hit;
	}
	if (grad != NULL) {
		memset(grad, 0, wc_dense_param_count(s) * sizeof(float));
		for (i = 0; i < n; i++) {
			const float *p = ws->p + (size_t)i * C;
			for (c = 0; c < C; c++)
				ws->dz[c] = (p[c] - (c == y[i] ? 1.0f : 0.0f)) / (float)n;
			backward_one(s, ws, params, x + (size_t)i * s->in_dim, i, grad);
		}
	}
	if (loss != NULL)
		*loss = total / n;
	if (correct != NULL)
		*correct = hits;
	return 0;
}

int wc_dense_evaluate(const struct wc_dense_spec *s, struct wc_dense_ws *ws, const float *params,
		      const float *x, const uint8_t *y, uint32_t n, double *accuracy, double *loss)
{
	double total = 0, l;
	uint32_t i, b, hits = 0, h;
	int rc;

	if (n == 0)
		return -EINVAL;
	for (i = 0; i < n; i += b) {
		b = n - i < ws->max_batch ? n - i : ws->max_batch;
		rc = wc_dense_loss_grad(s, ws, params, x + (size_t)i * s->in_dim, y + i, b, NULL, &l, &h);
		if (rc != 0)
			return rc;
		total += l * b;
		hits += h;
	}
	if (accuracy != NULL)
		*accuracy = (double)hits / n;
	if (loss != NULL)
		*loss = total / n;
	return 0;
}

void wc_sgd_step(float *params, const float *grad, size_t count, float lr)
{
	size_t i;

	for (i = 0; i < count; i++)
		params[i] -= lr * grad[i];
}
