/*
 * wc_ctr.c — a CTR data generator with a planted logistic model: 26 categorical fields, ids
 * drawn Zipfian over ranks, each (field, id) hashed to a u64 key, the click drawn from
 * sigmoid(bias + sum of the planted per-id weights). Because it knows every sample's true click
 * probability, the AUC of those probabilities on a test set is the Bayes-optimal AUC a model can
 * approach.
 *
 * Call chain: apps/train (sparse model) and tests -> wc_ctr_gen_sample -> wc_rng. The id draw is
 * a binary search in a per-generator CDF table built once at create.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "apps/common/wc_model.h"

struct wc_ctr_gen {
	struct wc_ctr_spec spec;
	double *cdf;   /* vocab, cumulative Zipf mass over ranks, cdf[vocab-1] == 1 */
	float *weight; /* n_fields * vocab planted weights */
};

void wc_ctr_spec_default(struct wc_ctr_spec *s)
{
	*s = (struct wc_ctr_spec){ .n_fields = WC_CTR_FIELDS, .vocab = 100, .zipf_s = 1.1,
				   .weight_sigma = 0.3, .bias = -1.5, .seed = 7 };
}

int wc_ctr_gen_create(const struct wc_ctr_spec *s, struct wc_ctr_gen **out)
{
	struct wc_ctr_gen *g;
	struct wc_rng r;
	double sum = 0;
	uint32_t i;
	size_t j, nw;

	if (s->n_fields == 0 || s->n_fields > 1024 || s->vocab < 2 || s->vocab > (1u << 20) ||
	    !(s->zipf_s > 0) || !(s->weight_sigma >= 0) || !isfinite(s->bias))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->spec = *s;
	nw = (size_t)s->n_fields * s->vocab;
	g->cdf = malloc((size_t)s->vocab * sizeof(double));
	g->weight = malloc(nw * sizeof(float));
	if (g->cdf == NULL || g->weight == NULL) {
		wc_ctr_gen_destroy(g);
		return -ENOMEM;
	}
	for (i = 0; i < s->vocab; i++) {
		sum += pow((double)i + 1.0, -s->zipf_s);
		g->cdf[i] = sum;
	}
	for (i = 0; i < s->vocab; i++)
		g->cdf[i] /= sum;
	g->cdf[s->vocab - 1] = 1.0;
	wc_rng_seed(&r, s->seed);
	for (j = 0; j < nw; j++)
		g->weight[j] = (float)(wc_rng_normal(&r) * s->weight_sigma);
	*out = g;
	return 0;
}

void wc_ctr_gen_destroy(struct wc_ctr_gen *g)
{
	if (g == NULL)
		return;
	free(g->cdf);
	free(g->weight);
	free(g);
}

static uint32_t draw_rank(const struct wc_ctr_gen *g, double u)
{
	uint32_t lo = 0, hi = g->spec.vocab - 1;

	while (lo < hi) { /* first rank whose cdf exceeds u */
		uint32_t mid = lo + (hi - lo) / 2;
		if (g->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static uint64_t key_of(const struct wc_ctr_gen *g, uint32_t field, uint32_t rank)
{
	return wc_mix64(g->spec.seed ^ ((uint64_t)(field + 1) << 40 | rank));
}

void wc_ctr_gen_sample(const struct wc_ctr_gen *g, struct wc_rng *r, uint32_t n, uint64_t *keys,
		       float *labels, float *p_true)
{
	const uint32_t F = g->spec.n_fields, V = g->spec.vocab;
	uint32_t i, f, rank;
	double z, p;

	for (i = 0; i < n; i++) {
		z = g->spec.bias;
		for (f = 0; f < F; f++) {
			rank = draw_rank(g, wc_rng_uniform(r));
			keys[(size_t)i * F + f] = key_of(g, f, rank);
			z += g->weight[(size_t)f * V + rank];
		}
		p = 1.0 / (1.0 + exp(-z));
		labels[i] = wc_rng_uniform(r) < p ? 1.0f : 0.0f;
		if (p_true != NULL)
			p_true[i] = (float)p;
	}
}
