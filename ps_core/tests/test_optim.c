/*
 * test_optim.c — each server-side optimizer (SGD, Adagrad, Adam, FTRL-Proximal) against
 * straightforward double-precision reference code, over many steps of random gradients,
 * through the whole path (client encode -> ps_handle -> shard apply -> pull -> decode).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/tests/pt_util.h"

#define DIM 8
#define KEYS 16
#define STEPS 200

struct ref_row {
	double w[DIM], a[DIM], b[DIM];
	double p1, p2;
};

static void ref_step(const struct ps_table_config *t, struct ref_row *r, const float *gf)
{
	const struct ps_optim_params *o = &t->op;
	int j;

	if (t->optim == PS_OPT_ADAM) {
		r->p1 *= (double)o->beta1;
		r->p2 *= (double)o->beta2;
	}
	for (j = 0; j < DIM; j++) {
		double g = gf[j], lr = o->lr;
		switch (t->optim) {
		case PS_OPT_SGD:
			r->w[j] -= lr * g;
			break;
		case PS_OPT_ADAGRAD:
			r->a[j] += g * g;
			r->w[j] -= lr * g / (sqrt(r->a[j]) + o->eps);
			break;
		case PS_OPT_ADAM: {
			double b1 = o->beta1, b2 = o->beta2;
			r->a[j] = b1 * r->a[j] + (1 - b1) * g;
			r->b[j] = b2 * r->b[j] + (1 - b2) * g * g;
			double mhat = r->a[j] / (1 - r->p1), vhat = r->b[j] / (1 - r->p2);
			/* eps scaled as in the bias-corrected-lr form: eps' = eps * sqrt(1 - b2^t) */
			r->w[j] -= lr * mhat / (sqrt(vhat) + o->eps / sqrt(1 - r->p2));
			break;
		}
		case PS_OPT_FTRL: {
			double n2 = r->b[j] + g * g;
			double sigma = (sqrt(n2) - sqrt(r->b[j])) / lr;
			r->a[j] += g - sigma * r->w[j];
			r->b[j] = n2;
			if (fabs(r->a[j]) <= o->l1)
				r->w[j] = 0;
			else
				r->w[j] = -(r->a[j] - (r->a[j] > 0 ? o->l1 : -o->l1)) /
					  ((o->beta1 + sqrt(n2)) / lr + o->l2);
			break;
		}
		}
	}
}

static void run_optim(enum ps_optim_kind k)
{
	struct ps_table_config t = pt_table(9, DIM, k);
	struct pt_cluster *c;
	struct ref_row ref[KEYS];
	uint64_t keys[KEYS];
	float g[KEYS * DIM], out[KEYS * DIM];
	uint32_t i, j, s;
	unsigned seed = 7;

	t.init = PS_INIT_UNIFORM;
	t.init_a = -0.1f;
	t.init_b = 0.1f;
	t.seed = 3;
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	c->split = 13; /* odd views: gradients straddle pieces */
	for (i = 0; i < KEYS; i++)
		keys[i] = 100 + i * 1001;
	assert_int_equal(pt_pull(c, 0, 9, DIM, keys, KEYS, out), 0);
	memset(ref, 0, sizeof(ref));
	for (i = 0; i < KEYS; i++) {
		ref[i].p1 = ref[i].p2 = 1;
		for (j = 0; j < DIM; j++) {
			ref[i].w[j] = out[i * DIM + j];
			if (k == PS_OPT_ADAGRAD)
				ref[i].a[j] = t.op.init_accum;
		}
	}
	for (s = 0; s < STEPS; s++) {
		for (i = 0; i < KEYS * DIM; i++)
			g[i] = (float)((double)rand_r(&seed) / RAND_MAX - 0.5);
		assert_int_equal(pt_push(c, 0, 9, DIM, keys, KEYS, g), 0);
		for (i = 0; i < KEYS; i++)
			ref_step(&t, &ref[i], g + i * DIM);
	}
	assert_int_equal(pt_pull(c, 0, 9, DIM, keys, KEYS, out), 0);
	for (i = 0; i < KEYS; i++)
		for (j = 0; j < DIM; j++) {
			double want = ref[i].w[j], got = out[i * DIM + j];
			if (fabs(want - got) > 1e-3 * (1 + fabs(want)))
				fail_msg("optim %d key %u dim %u: float %.7g, reference %.7g", k, i, j, got, want);
		}
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
}

static void test_optim_sgd_matches_reference(void **s) { (void)s; run_optim(PS_OPT_SGD); }
static void test_optim_adagrad_matches_reference(void **s) { (void)s; run_optim(PS_OPT_ADAGRAD); }
static void test_optim_adam_matches_reference(void **s) { (void)s; run_optim(PS_OPT_ADAM); }
static void test_optim_ftrl_matches_reference(void **s) { (void)s; run_optim(PS_OPT_FTRL); }

/* A reference that differs must make the comparison fail: the check has teeth. */
static void test_optim_reference_detects_wrong_lr(void **state)
{
	struct ps_table_config t = pt_table(9, DIM, PS_OPT_SGD);
	struct ref_row r;
	float g[DIM];
	int j;

	(void)state;
	memset(&r, 0, sizeof(r));
	for (j = 0; j < DIM; j++)
		g[j] = 1.0f;
	ref_step(&t, &r, g);
	assert_true(fabs(r.w[0] + 0.1) < 1e-7);
	t.op.lr = 0.2f;
	ref_step(&t, &r, g);
	assert_true(fabs(r.w[0] + 0.3) < 1e-7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_optim_sgd_matches_reference),
		cmocka_unit_test(test_optim_adagrad_matches_reference),
		cmocka_unit_test(test_optim_adam_matches_reference),
		cmocka_unit_test(test_optim_ftrl_matches_reference),
		cmocka_unit_test(test_optim_reference_detects_wrong_lr),
	};
	return cmocka_run_group_tests_name("ps_optim", tests, NULL, NULL);
}
