/*
 * wc_sparse.c — sparse CTR models over pulled embedding rows: logistic regression and a
 * second-order factorization machine (Rendle's O(k * fields) form), forward, mean log loss and
 * the gradient per pulled row, ready to push back.
 *
 * Call chain: apps/train step -> wc_keymap (dedup) -> ps pull rows -> wc_{lr,fm}_loss_grad ->
 * ps push row_grad. No allocation; the FM's per-sample sums live on the stack (k is bounded).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "apps/common/wc_model.h"

#define WC_FM_MAX_K 256u

/* Mean log loss term for logit z and label y, without overflow for large |z|. */
static inline double logloss(double z, float y)
{
	return (z > 0 ? z : 0) - y * z + log1p(exp(-fabs(z)));
}

static inline double sigmoid(double z)
{
	return z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
}

static int check_batch(const struct wc_sparse_batch *b)
{
	size_t i, cnt;

	if (b->n == 0 || b->fields == 0 || b->n_unique == 0)
		return -EINVAL;
	cnt = (size_t)b->n * b->fields;
	for (i = 0; i < cnt; i++)
		if (b->slot[i] >= b->n_unique)
			return -EINVAL;
	return 0;
}

int wc_lr_loss_grad(const struct wc_sparse_batch *b, const float *rows, float bias, float *p_out,
		    double *loss, float *row_grad, float *bias_grad)
{
	const uint32_t F = b->fields;
	double total = 0, gb = 0, z, p, g;
	uint32_t i, f;
	int rc = check_batch(b);

	if (rc != 0)
		return rc;
	if (row_grad != NULL)
		memset(row_grad, 0, (size_t)b->n_unique * sizeof(float));
	for (i = 0; i < b->n; i++) {
		const uint32_t *sl = b->slot + (size_t)i * F;
		z = bias;
		for (f = 0; f < F; f++)
			z += rows[sl[f]];
		p = sigmoid(z);
		total += logloss(z, b->label[i]);
		if (p_out != NULL)
			p_out[i] = (float)p;
		if (row_grad == NULL)
			continue;
		g = (p - b->label[i]) / b->n;
		for (f = 0; f < F; f++)
			row_grad[sl[f]] += (float)g;
		gb += g;
	}
	if (loss != NULL)
		*loss = total / b->n;
	if (bias_grad != NULL)
		*bias_grad = (float)gb;
	return 0;
}

/* logit of one sample; S[k] receives sum_f v_f (needed by the gradient). */
static double fm_logit(const uint32_t *sl, uint32_t F, uint32_t k, const float *rows, float bias,
		       float *S)
{
	const uint32_t rd = 1 + k;
	double z = bias, sq = 0, ss = 0;
	uint32_t f, d;

	memset(S, 0, k * sizeof(float));
	for (f = 0; f < F; f++) {
		const float *row = rows + (size_t)sl[f] * rd;
		z += row[0];
		for (d = 0; d < k; d++) {
			S[d] += row[1 + d];
			sq += (double)row[1 + d] * row[1 + d];
		}
	}
	for (d = 0; d < k; d++)
		ss += (double)S[d] * S[d];
	return z + 0.5 * (ss - sq);
}

int wc_fm_loss_grad(const struct wc_sparse_batch *b, uint32_t k, const float *rows, float bias,
		    float *p_out, double *loss, float *row_grad, float *bias_grad)
{
	const uint32_t F = b->fields, rd = 1 + k;
	float S[WC_FM_MAX_K];
	double total = 0, gb = 0, z, p;
	uint32_t i, f, d;
	int rc;

	if (k == 0 || k > WC_FM_MAX_K)
		return -EINVAL;
	rc = check_batch(b);
	if (rc != 0)
		return rc;
	if (row_grad != NULL)
		memset(row_grad, 0, (size_t)b->n_unique * rd * sizeof(float));
	for (i = 0; i < b->n; i++) {
		const uint32_t *sl = b->slot + (size_t)i * F;
		z = fm_logit(sl, F, k, rows, bias, S);
		p = sigmoid(z);
		total += logloss(z, b->label[i]);
		if (p_out != NULL)
			p_out[i] = (float)p;
		if (row_grad == NULL)
			continue;
		float g = (float)((p - b->label[i]) / b->n);
		for (f = 0; f < F; f++) {
			const float *row = rows + (size_t)sl[f] * rd;
			float *gr = row_grad + (size_t)sl[f] * rd;
			gr[0] += g;
			/* d z / d v_f = S - v_f */
			for (d = 0; d < k; d++)
				gr[1 + d] += g * (S[d] - row[1 + d]);
		}
		gb += g;
	}
	if (loss != NULL)
		*loss = total / b->n;
	if (bias_grad != NULL)
		*bias_grad = (float)gb;
	return 0;
}
