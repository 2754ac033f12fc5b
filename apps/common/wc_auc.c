/*
 * wc_auc.c — exact ROC AUC by the rank-sum (Mann-Whitney U) identity, ties averaged, so a
 * generator's Bayes-optimal AUC and a model's AUC are computed the same way.
 *
 * Call chain: apps/train evaluation, tests -> wc_auc. Evaluation-time only (allocates).
 */
#include <errno.h>
#include <stdlib.h>

#include "apps/common/wc_model.h"

struct scored {
	float s;
	float y;
};

static int by_score(const void *a, const void *b)
{
	float x = ((const struct scored *)a)->s, y = ((const struct scored *)b)->s;

	return (x > y) - (x < y);
}

int wc_auc(const float *score, const float *label, uint32_t n, double *out)
{
	struct scored *v;
	double pos = 0, rank_sum = 0;
	uint32_t i, j;

	if (n == 0)
		return -EINVAL;
	v = malloc((size_t)n * sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (score[i] != score[i]) { /* NaN has no place in an order */
			free(v);
			return -EINVAL;
		}
		v[i].s = score[i];
		v[i].y = label[i] > 0.5f ? 1.0f : 0.0f;
		pos += v[i].y;
	}
	qsort(v, n, sizeof(*v), by_score);
	for (i = 0; i < n; i = j) {
		double p_in = 0, avg;

		for (j = i; j < n && v[j].s == v[i].s; j++)
			p_in += v[j].y;
		avg = 0.5 * ((double)i + 1 + (double)j); /* mean of ranks i+1..j */
		rank_sum += p_in * avg;
	}
	free(v);
	if (pos == 0 || pos == n)
		return -EDOM;
	*out = (rank_sum - pos * (pos + 1) / 2) / (pos * ((double)n - pos));
	return 0;
}
