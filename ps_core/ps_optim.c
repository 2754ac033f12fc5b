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
 * Each optimizer writes the row's new value and state into the shard's scratch row; only
 * when every float of it is finite is it copied over the row (SGD, whose state is the value
 * alone, checks its new values first and then writes them in place), so an update that
 * would leave a NaN or an infinity (a huge gradient, a sum of them that overflows) changes
 * nothing and is reported (ps_optim_apply returns false). The parameters that make the
 * arithmetic itself undefined (eps 0, beta 1, ...) are refused at ps_server_create.
 * Single-precision on purpose: the tests check them against double-precision reference
 * code within a float tolerance.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

/* in: the row (value, state); out: its new value and state, every float written. */
static void adagrad(const struct ps_table *t, const float *restrict in, float *restrict out,
		 const uint8_t *restrict g)
{
	const float lr = t->cfg.op.lr, eps = t->cfg.op.eps;
	uint32_t j, d = t->cfg.dim;

	for (j = 0; j < d; j++) {
		float gj = ps_ldf(g, j), acc = in[d + j] + gj * gj;
		out[d + j] = acc;
		out[j] = in[j] - lr * gj / (sqrtf(acc) + eps);
	}
}

static void adam(const struct ps_table *t, const float *restrict in, float *restrict out,
		 const uint8_t *restrict g)
{
	const float lr = t->cfg.op.lr, eps = t->cfg.op.eps;
	const float b1 = t->cfg.op.beta1, b2 = t->cfg.op.beta2;
	uint32_t j, d = t->cfg.dim;
	const float *m = in + d, *v = in + 2 * d;
	float *m2 = out + d, *v2 = out + 2 * d, *pw = out + 3 * d, lr_t;

	pw[0] = in[3 * d] * b1;
	pw[1] = in[3 * d + 1] * b2;
	lr_t = lr * sqrtf(1.0f - pw[1]) / (1.0f - pw[0]);
	for (j = 0; j < d; j++) {
		float gj = ps_ldf(g, j);
		m2[j] = b1 * m[j] + (1.0f - b1) * gj;
		v2[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
		out[j] = in[j] - lr_t * m2[j] / (sqrtf(v2[j]) + eps);
	}
}

/* McMahan et al., "Ad Click Prediction", per-coordinate FTRL-Proximal. */
static void ftrl(const struct ps_table *t, const float *restrict in, float *restrict out,
		 const uint8_t *restrict g)
{
	const float alpha = t->cfg.op.lr, beta = t->cfg.op.beta1;
	const float l1 = t->cfg.op.l1, l2 = t->cfg.op.l2;
	uint32_t j, d = t->cfg.dim;
	const float *z = in + d, *n = in + 2 * d;

	for (j = 0; j < d; j++) {
		float gj = ps_ldf(g, j);
		float nn = n[j] + gj * gj;
		float sigma = (sqrtf(nn) - sqrtf(n[j])) / alpha;
		float zz = z[j] + gj - sigma * in[j];
		out[d + j] = zz;
		out[2 * d + j] = nn;
		if (fabsf(zz) <= l1)
			out[j] = 0.0f;
		else
			out[j] = -(zz - copysignf(l1, zz)) / ((beta + sqrtf(nn)) / alpha + l2);
	}
}

bool ps_all_finite_bytes(const uint8_t *p, uint32_t n)
{
	ps_v4u bad = { 0, 0, 0, 0 }, bad2 = { 0, 0, 0, 0 }, w, w2;
	uint32_t i = 0, x;

	/* Two accumulators: two independent loads and compares per iteration. */
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + 4 * (size_t)i, sizeof(w));
		memcpy(&w2, p + 4 * (size_t)i + 16, sizeof(w2));
		bad |= ps_nonfinite4(w);
		bad2 |= ps_nonfinite4(w2);
	}
	for (; i + 4 <= n; i += 4) {
		memcpy(&w, p + 4 * (size_t)i, sizeof(w));
		bad |= ps_nonfinite4(w);
	}
	for (; i < n; i++) {
		memcpy(&x, p + 4 * (size_t)i, sizeof(x));
		bad[0] |= (x & PS_EXP_BITS) == PS_EXP_BITS;
	}
	return !ps_any4(bad | bad2);
}

bool ps_all_finite(const float *v, uint32_t n)
{
	return ps_all_finite_bytes((const uint8_t *)v, n);
}

bool ps_optim_apply(const struct ps_table *t, float *row, const uint8_t *g, float *scratch)
{
	uint32_t n = t->cfg.dim + t->sfl;

	switch (t->cfg.optim) {
	case PS_OPT_SGD: return ps_sgd_inplace(t, row, g);
	case PS_OPT_ADAGRAD: adagrad(t, row, scratch, g); break;
	case PS_OPT_ADAM: adam(t, row, scratch, g); break;
	case PS_OPT_FTRL: ftrl(t, row, scratch, g); break;
	}
	if (PS_UNLIKELY(!ps_all_finite(scratch, n)))
		return false;
	memcpy(row, scratch, n * sizeof(float));
	return true;
}
