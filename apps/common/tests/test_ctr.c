/*
 * test_ctr.c — the sparse side: RNG, key map, exact AUC, the planted-model CTR generator,
 * LR/FM gradients against finite differences, and local plain-SGD training over a key->row
 * store (as a PS would hold it) that must get within 0.01 of the generator's Bayes AUC.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apps/common/wc_model.h"

static void test_ctr_rng_deterministic_and_in_range(void **state)
{
	struct wc_rng a, b;
	double sum = 0, sq = 0;
	uint32_t hist[7] = { 0 }, i, idx[50];

	(void)state;
	wc_rng_seed(&a, 99);
	wc_rng_seed(&b, 99);
	for (i = 0; i < 1000; i++)
		assert_true(wc_rng_u64(&a) == wc_rng_u64(&b));
	for (i = 0; i < 70000; i++) {
		double u = wc_rng_uniform(&a), z = wc_rng_normal(&a);
		assert_true(u >= 0.0 && u < 1.0);
		sum += z;
		sq += z * z;
		hist[wc_rng_below(&a, 7)]++;
	}
	assert_true(fabs(sum / 70000) < 0.02);
	assert_true(fabs(sq / 70000 - 1.0) < 0.03);
	for (i = 0; i < 7; i++)
		assert_true(hist[i] > 9500 && hist[i] < 10500);
	for (i = 0; i < 50; i++)
		idx[i] = i;
	wc_shuffle_u32(&a, idx, 50);
	for (i = 0, sum = 0; i < 50; i++)
		sum += idx[i];
	assert_true(sum == 49 * 50 / 2); /* a permutation */
}

static void test_ctr_keymap_dedups_and_clears(void **state)
{
	struct wc_keymap *m = NULL;
	uint32_t idx, i;

	(void)state;
	assert_int_equal(wc_keymap_create(0, &m), -EINVAL);
	assert_int_equal(wc_keymap_create(100, &m), 0);
	for (i = 0; i < 100; i++) {
		assert_int_equal(wc_keymap_get_or_add(m, (uint64_t)i * 0x10000, &idx), 0);
		assert_int_equal(idx, i);
	}
	assert_int_equal(wc_keymap_get_or_add(m, 12345, &idx), -ENOSPC);
	assert_int_equal(wc_keymap_get_or_add(m, 7 * 0x10000, &idx), 0);
	assert_int_equal(idx, 7);
	assert_int_equal(wc_keymap_count(m), 100);
	assert_true(wc_keymap_keys(m)[3] == 3 * 0x10000);
	wc_keymap_clear(m);
	assert_int_equal(wc_keymap_count(m), 0);
	assert_int_equal(wc_keymap_find(m, 7 * 0x10000, &idx), -ENOENT);
	assert_int_equal(wc_keymap_get_or_add(m, 5, &idx), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(wc_keymap_find(m, 5, &idx), 0);
	wc_keymap_destroy(m);
	wc_keymap_destroy(NULL);
}

static void test_ctr_auc_exact_with_ties(void **state)
{
	const float s1[4] = { 0.1f, 0.4f, 0.35f, 0.8f }, y1[4] = { 0, 0, 1, 1 };
	const float s2[4] = { 0.5f, 0.5f, 0.5f, 0.5f };
	const float s3[3] = { 0.2f, 0.2f, 0.9f }, y3[3] = { 1, 0, 0 };
	const float y0[3] = { 1, 1, 1 };
	double a;

	(void)state;
	assert_int_equal(wc_auc(s1, y1, 4, &a), 0);
	assert_float_equal(a, 0.75, 1e-12); /* 3 of 4 pos/neg pairs ordered */
	assert_int_equal(wc_auc(s2, y1, 4, &a), 0);
	assert_float_equal(a, 0.5, 1e-12);
	assert_int_equal(wc_auc(s3, y3, 3, &a), 0);
	assert_float_equal(a, 0.25, 1e-12); /* one tie (1/2), one loss */
	assert_int_equal(wc_auc(s3, y0, 3, &a), -EDOM);
	assert_int_equal(wc_auc(s3, y0, 0, &a), -EINVAL);
}

static void test_ctr_generator_deterministic_and_calibrated(void **state)
{
	struct wc_ctr_spec s;
	struct wc_ctr_gen *g = NULL;
	struct wc_rng r1, r2;
	const uint32_t n = 20000, F = WC_CTR_FIELDS;
	uint64_t *k1 = malloc((size_t)n * F * 8), *k2 = malloc((size_t)n * F * 8);
	float *l1 = malloc(n * 4), *l2 = malloc(n * 4), *p = malloc(n * 4);
	double clicks = 0, mass = 0, bayes;
	uint32_t i, same = 0;

	(void)state;
	wc_ctr_spec_default(&s);
	s.vocab = 1;
	assert_int_equal(wc_ctr_gen_create(&s, &g), -EINVAL);
	wc_ctr_spec_default(&s);
	assert_int_equal(wc_ctr_gen_create(&s, &g), 0);
	wc_rng_seed(&r1, 5);
	wc_rng_seed(&r2, 5);
	wc_ctr_gen_sample(g, &r1, n, k1, l1, p);
	wc_ctr_gen_sample(g, &r2, n, k2, l2, NULL);
	assert_memory_equal(k1, k2, (size_t)n * F * 8);
	assert_memory_equal(l1, l2, n * 4);
	for (i = 0; i < n; i++) {
		clicks += l1[i];
		mass += p[i];
		same += k1[(size_t)i * F] == k1[(size_t)i * F + 1];
	}
	assert_int_equal(same, 0); /* fields hash to distinct keys */
	/* labels follow the planted probabilities: counts agree within ~4 standard deviations */
	assert_true(fabs(clicks - mass) < 4 * sqrt(mass));
	/* Zipf: rank 0 of field 0 is the most frequent key by far */
	for (i = 0, same = 0; i < n; i++)
		same += k1[(size_t)i * F] == k1[0];
	assert_true(same > n / 20);
	assert_int_equal(wc_auc(p, l1, n, &bayes), 0);
	assert_true(bayes > 0.7 && bayes < 0.95);
	wc_ctr_gen_destroy(g);
	wc_ctr_gen_destroy(NULL);
	free(k1);
	free(k2);
	free(l1);
	free(l2);
	free(p);
}

/* Finite differences of LR (k == 0) or FM (k > 0) over rows and bias. */
static void check_sparse_grad(uint32_t k)
{
	enum { N = 5, F = 4, U = 6 };
	const uint32_t slot[N * F] = { 0, 1, 2, 3, 0, 4, 2, 5, 1, 1, 3, 4, 5, 4, 3, 2, 0, 0, 0, 1 };
	const float label[N] = { 1, 0, 0, 1, 1 };
	const struct wc_sparse_batch b = { N, F, slot, label, U };
	const uint32_t rd = 1 + k;
	float rows[U * 9], g[U * 9], gb, bias = 0.1f;
	struct wc_rng r;
	double lp, lm, l, worst = 0, num;
	uint32_t i;

	wc_rng_seed(&r, 21 + k);
	for (i = 0; i < U * rd; i++)
		rows[i] = (float)(0.5 * wc_rng_normal(&r));
#define LOSS(out) (k ? wc_fm_loss_grad(&b, k, rows, bias, NULL, out, NULL, NULL) \
		     : wc_lr_loss_grad(&b, rows, bias, NULL, out, NULL, NULL))
	assert_int_equal(k ? wc_fm_loss_grad(&b, k, rows, bias, NULL, &l, g, &gb)
			   : wc_lr_loss_grad(&b, rows, bias, NULL, &l, g, &gb), 0);
	for (i = 0; i <= U * rd; i++) {
		float *v = i < U * rd ? &rows[i] : &bias, keep = *v;
		float ana = i < U * rd ? g[i] : gb;
		*v = keep + 1e-3f;
		assert_int_equal(LOSS(&lp), 0);
		*v = keep - 1e-3f;
		assert_int_equal(LOSS(&lm), 0);
		*v = keep;
		num = (lp - lm) / 2e-3;
		if (fabs(num - ana) / (fabs(num) + fabs(ana) + 1e-3) > worst)
			worst = fabs(num - ana) / (fabs(num) + fabs(ana) + 1e-3);
	}
#undef LOSS
	print_message("k=%u worst relative gradient error %g\n", k, worst);
	assert_true(worst < 1e-2);
}

static void test_ctr_lr_grad_matches_finite_differences(void **state)
{
	(void)state;
	check_sparse_grad(0);
}

static void test_ctr_fm_grad_matches_finite_differences(void **state)
{
	(void)state;
	check_sparse_grad(8);
}

static void test_ctr_models_refuse_bad_slots(void **state)
{
	const uint32_t slot[2] = { 0, 3 };
	const float label[1] = { 1 };
	const struct wc_sparse_batch b = { 1, 2, slot, label, 3 };
	float rows[12] = { 0 }, g[12];
	double l;

	(void)state;
	assert_int_equal(wc_lr_loss_grad(&b, rows, 0, NULL, &l, g, NULL), -EINVAL);
	assert_int_equal(wc_fm_loss_grad(&b, 2, rows, 0, NULL, &l, g, NULL), -EINVAL);
	assert_int_equal(wc_fm_loss_grad(&b, 0, rows, 0, NULL, &l, g, NULL), -EINVAL);
}

/* A PS stand-in: key -> row, rows created as zeros (LR) or small random factors (FM). */
struct store {
	struct wc_keymap *map;
	float *rows;
	uint32_t rd;
	struct wc_rng init;
};

struct run {
	uint32_t k;   /* 0 = LR */
	float lr;
	unsigned epochs;
	uint32_t n_train;
};

/* Dedup a batch's keys, pull rows (creating on first touch when create != 0). */
static void pull(struct store *s, struct wc_keymap *bm, const uint64_t *keys, uint32_t cnt,
		 uint32_t *slot, uint32_t *sidx, float *br, int create)
{
	uint32_t j, u, si, d;

	wc_keymap_clear(bm);
	for (j = 0; j < cnt; j++)
		assert_int_equal(wc_keymap_get_or_add(bm, keys[j], &slot[j]), 0);
	for (u = 0; u < wc_keymap_count(bm); u++) {
		uint64_t key = wc_keymap_keys(bm)[u];
		if (wc_keymap_find(s->map, key, &si) != 0) {
			if (!create) { /* unseen at test time: a zero row */
				memset(br + (size_t)u * s->rd, 0, s->rd * sizeof(float));
				sidx[u] = UINT32_MAX;
				continue;
			}
			assert_int_equal(wc_keymap_get_or_add(s->map, key, &si), 0);
			s->rows[(size_t)si * s->rd] = 0.0f;
			for (d = 1; d < s->rd; d++)
				s->rows[(size_t)si * s->rd + d] = (float)(0.01 * wc_rng_normal(&s->init));
		}
		sidx[u] = si;
		memcpy(br + (size_t)u * s->rd, s->rows + (size_t)si * s->rd, s->rd * sizeof(float));
	}
}

static double train_and_auc(const struct run *run, double *bayes)
{
	const uint32_t F = WC_CTR_FIELDS, B = 256, T = 40000;
	struct wc_ctr_spec sp;
	struct wc_ctr_gen *g = NULL;
	struct wc_keymap *bm = NULL;
	struct store st = { NULL, NULL, 1 + run->k, { { 0 } } };
	struct wc_rng r;
	uint64_t *keys = malloc((size_t)run->n_train * F * 8), *tk = malloc((size_t)T * F * 8);
	float *lab = malloc(run->n_train * 4), *tl = malloc(T * 4), *tp = malloc(T * 4);
	float *ps = malloc(T * 4), *br = malloc((size_t)B * F * st.rd * 4);
	float *bg = malloc((size_t)B * F * st.rd * 4), bias = 0, gb;
	uint32_t *slot = malloc(B * F * 4), *sidx = malloc(B * F * 4), i, u, d, n;
	double auc, l;
	unsigned e;

	wc_ctr_spec_default(&sp);
	assert_int_equal(wc_ctr_gen_create(&sp, &g), 0);
	assert_int_equal(wc_keymap_create(B * F, &bm), 0);
	assert_int_equal(wc_keymap_create(F * sp.vocab, &st.map), 0);
	st.rows = calloc((size_t)F * sp.vocab * st.rd, sizeof(float));
	assert_non_null(st.rows);
	wc_rng_seed(&st.init, 9);
	wc_rng_seed(&r, 3);
	wc_ctr_gen_sample(g, &r, run->n_train, keys, lab, NULL);
	wc_ctr_gen_sample(g, &r, T, tk, tl, tp);
	assert_int_equal(wc_auc(tp, tl, T, bayes), 0);
	for (e = 0; e < run->epochs; e++) {
		float lr = run->lr / (1.0f + (float)e); /* plain SGD, step decayed per epoch */
		for (i = 0; i + B <= run->n_train; i += B) {
			pull(&st, bm, keys + (size_t)i * F, B * F, slot, sidx, br, 1);
			struct wc_sparse_batch b = { B, F, slot, lab + i, wc_keymap_count(bm) };
			assert_int_equal(run->k ? wc_fm_loss_grad(&b, run->k, br, bias, NULL, &l, bg, &gb)
					 : wc_lr_loss_grad(&b, br, bias, NULL, &l, bg, &gb), 0);
			for (u = 0; u < b.n_unique; u++) /* the push: the server applies SGD */
				for (d = 0; d < st.rd; d++)
					st.rows[(size_t)sidx[u] * st.rd + d] -= lr * bg[(size_t)u * st.rd + d];
			bias -= lr * gb;
		}
	}
	for (i = 0; i < T; i += n) {
		n = T - i < B ? T - i : B;
		pull(&st, bm, tk + (size_t)i * F, n * F, slot, sidx, br, 0);
		struct wc_sparse_batch b = { n, F, slot, tl + i, wc_keymap_count(bm) };
		assert_int_equal(run->k ? wc_fm_loss_grad(&b, run->k, br, bias, ps + i, &l, NULL, NULL)
				 : wc_lr_loss_grad(&b, br, bias, ps + i, &l, NULL, NULL), 0);
	}
	assert_int_equal(wc_auc(ps, tl, T, &auc), 0);
	wc_ctr_gen_destroy(g);
	wc_keymap_destroy(bm);
	wc_keymap_destroy(st.map);
	free(st.rows);
	free(keys); free(tk); free(lab); free(tl); free(tp); free(ps); free(br); free(bg);
	free(slot); free(sidx);
	return auc;
}

static void test_ctr_lr_sgd_reaches_bayes_auc(void **state)
{
	const struct run run = { 0, 2.0f, 3, 300000 };
	double bayes, auc;

	(void)state;
	auc = train_and_auc(&run, &bayes);
	print_message("LR: test AUC %.4f, Bayes %.4f, gap %.4f\n", auc, bayes, bayes - auc);
	assert_true(auc <= bayes + 0.005); /* Bayes is an upper bound up to sampling noise */
	assert_true(bayes - auc < 0.01);
}

static void test_ctr_fm_sgd_reaches_bayes_auc(void **state)
{
	const struct run run = { 4, 1.0f, 3, 300000 };
	double bayes, auc;

	(void)state;
	auc = train_and_auc(&run, &bayes);
	print_message("FM k=4: test AUC %.4f, Bayes %.4f, gap %.4f\n", auc, bayes, bayes - auc);
	assert_true(auc <= bayes + 0.005);
	assert_true(bayes - auc < 0.01);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctr_rng_deterministic_and_in_range),
		cmocka_unit_test(test_ctr_keymap_dedups_and_clears),
		cmocka_unit_test(test_ctr_auc_exact_with_ties),
		cmocka_unit_test(test_ctr_generator_deterministic_and_calibrated),
		cmocka_unit_test(test_ctr_lr_grad_matches_finite_differences),
		cmocka_unit_test(test_ctr_fm_grad_matches_finite_differences),
		cmocka_unit_test(test_ctr_models_refuse_bad_slots),
		cmocka_unit_test(test_ctr_lr_sgd_reaches_bayes_auc),
		cmocka_unit_test(test_ctr_fm_sgd_reaches_bayes_auc),
	};

	return cmocka_run_group_tests_name("ctr", tests, NULL, NULL);
}
