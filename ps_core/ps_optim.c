/*
 * ps_optim.c — the server-side optimizers, run by a shard's owner where the parameters
 * live: SGD, Adagrad, Adam, FTRL-Proximal. Called from ps_shard.c once per (row, merged
 * gradient). The gradient is read straight from the received message's bytes (which may
 * be unaligned), one float at a time; no copy.
 *
 * Row layout (floats after struct ps_row_meta): w[dim], then the state:
 *   Adagrad: acc[dim]                  (starts at init_accum)
 *   Adam:    m[dim], v[dim], b1^t, b2^t (powers start at 1)
 *   FTRL:    z[dim], n[dim]             (w is derived from z and n after each step)
 * Single-precision on purpose: the tests check them against double-precision reference
 * code within a float tolerance.
 */
#include <math.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

static inline float ldf(const uint8_t *g, uint32_t j)
{
	float f;

	memcpy(&f, g + 4 * (size_t)j, sizeof(f));
	return f;
}

static void sgd(const struct ps_table *t, float *w, const uint8_t *g)
{
	const float lr = t->cfg.op.lr;
	uint32_t j, d = t->cfg.dim;

	for (j = 0; j < d; j++)
		w[j] -= lr * ldf(g, j);
}

static void adagrad(const struct ps_table *t, float *w, const uint8_t *g)
{
	const float lr = t->cfg.op.lr, eps = t->cfg.op.eps;
	uint32_t j, d = t->cfg.dim;
	float *acc = w + d;

	for (j = 0; j < d; j++) {
		float gj = ldf(g, j);
		acc[j] += gj * gj;
		w[j] -= lr * gj / (sqrtf(acc[j]) + eps);
	}
}

static void adam(const struct ps_table *t, float *w, const uint8_t *g)
{
	const float lr = t->cfg.op.lr, eps = t->cfg.op.eps;
	const float b1 = t->cfg.op.beta1, b2 = t->cfg.op.beta2;
	uint32_t j, d = t->cfg.dim;
	float *m = w + d, *v = w + 2 * d, *pw = w + 3 * d;
	float lr_t;

	pw[0] *= b1;
	pw[1] *= b2;
	lr_t = lr * sqrtf(1.0f - pw[1]) / (1.0f - pw[0]);
	for (j = 0; j < d; j++) {
		float gj = ldf(g, j);
		m[j] = b1 * m[j] + (1.0f - b1) * gj;
		v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
		w[j] -= lr_t * m[j] / (sqrtf(v[j]) + eps);
	}
}

/* McMahan et al., "Ad Click Prediction", per-coordinate FTRL-Proximal. */
static void ftrl(const struct ps_table *t, float *w, const uint8_t *g)
{
	const float alpha = t->cfg.op.lr, beta = t->cfg.op.beta1;
	const float l1 = t->cfg.op.l1, l2 = t->cfg.op.l2;
	uint32_t j, d = t->cfg.dim;
	float *z = w + d, *n = w + 2 * d;

	for (j = 0; j < d; j++) {
		float gj = ldf(g, j);
		float nn = n[j] + gj * gj;
		float sigma = (sqrtf(nn) - sqrtf(n[j])) / alpha;
		z[j] += gj - sigma * w[j];
		n[j] = nn;
		if (fabsf(z[j]) <= l1)
			w[j] = 0.0f;
		else
			w[j] = -(z[j] - copysignf(l1, z[j])) / ((beta + sqrtf(nn)) / alpha + l2);
	}
}

void ps_optim_apply(const struct ps_table *t, float *row, const uint8_t *g)
{
	switch (t->cfg.optim) {
	case PS_OPT_SGD: sgd(t, row, g); break;
	case PS_OPT_ADAGRAD: adagrad(t, row, g); break;
	case PS_OPT_ADAM: adam(t, row, g); break;
	case PS_OPT_FTRL: ftrl(t, row, g); break;
	}
}

void ps_optim_apply_f(const struct ps_table *t, float *row, const float *g)
{
	ps_optim_apply(t, row, (const uint8_t *)g);
}
