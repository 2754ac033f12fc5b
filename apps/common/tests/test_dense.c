/*
 * test_dense.c — softmax regression and the MLP: gradients against central finite
 * differences, parameter layout, refusal of bad input, and short local SGD runs on a real
 * Fashion-MNIST subset that must reach a sensible accuracy.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "apps/common/wc_data.h"
#include "wc_testlib.h"
#include "apps/common/wc_model.h"

/*
 * ReLU has a kink at 0 where finite differences disagree with any derivative; move each hidden
 * unit's bias until no sample's pre-activation lies within 0.02 of it (documented layout:
 * W1[in][hidden], then b1).
 */
static void dodge_kinks(const struct wc_dense_spec *s, float *p, const float *x, uint32_t n)
{
	float *b1 = p + (size_t)s->in_dim * s->hidden;
	uint32_t j, i, k, tries;

	if (s->kind != WC_DENSE_MLP)
		return;
	for (j = 0; j < s->hidden; j++)
		for (tries = 0; tries < 100; tries++) {
			int near = 0;
			for (i = 0; i < n; i++) {
				double z = b1[j];
				for (k = 0; k < s->in_dim; k++)
					z += (double)x[(size_t)i * s->in_dim + k] * p[(size_t)k * s->hidden + j];
				near |= fabs(z) < 0.02;
			}
			if (!near)
				break;
			b1[j] += 0.013f;
		}
}

/* Compare every analytic gradient entry with (L(p+e) - L(p-e)) / 2e in double precision. */
static void check_grad(const struct wc_dense_spec *s, uint32_t n, uint64_t seed)
{
	size_t P = wc_dense_param_count(s), i;
	float *p = malloc(P * sizeof(float)), *g = malloc(P * sizeof(float));
	float *x = malloc((size_t)n * s->in_dim * sizeof(float));
	uint8_t *y = malloc(n);
	struct wc_dense_ws *ws = NULL;
	struct wc_rng r;
	double lp, lm, worst = 0;

	assert_non_null(p);
	assert_non_null(g);
	assert_non_null(x);
	assert_non_null(y);
	wc_rng_seed(&r, seed);
	wc_dense_init(s, p, seed);
	for (i = 0; i < P; i++) /* move off zero so softmax's gradient is not symmetric */
		p[i] += (float)(0.1 * wc_rng_normal(&r));
	for (i = 0; i < (size_t)n * s->in_dim; i++) /* a third zeros, like dark pixels */
		x[i] = wc_rng_uniform(&r) < 0.33 ? 0.0f : (float)wc_rng_uniform(&r);
	for (i = 0; i < n; i++)
		y[i] = (uint8_t)wc_rng_below(&r, s->n_classes);
	dodge_kinks(s, p, x, n);
	assert_int_equal(wc_dense_ws_create(s, n, &ws), 0);
	assert_int_equal(wc_dense_loss_grad(s, ws, p, x, y, n, g, &lp, NULL), 0);
	for (i = 0; i < P; i++) {
		const float e = 2e-3f, keep = p[i];
		double num, diff;

		p[i] = keep + e;
		assert_int_equal(wc_dense_loss_grad(s, ws, p, x, y, n, NULL, &lp, NULL), 0);
		p[i] = keep - e;
		assert_int_equal(wc_dense_loss_grad(s, ws, p, x, y, n, NULL, &lm, NULL), 0);
		p[i] = keep;
		num = (lp - lm) / (2.0 * e);
		diff = fabs(num - g[i]) / (fabs(num) + fabs(g[i]) + 1e-3);
		if (diff > worst)
			worst = diff;
	}
	print_message("worst relative gradient error %g\n", worst);
	if (worst > 2e-2)
		fail_msg("worst relative gradient error %g", worst);
	wc_dense_ws_destroy(ws);
	free(p);
	free(g);
	free(x);
	free(y);
}

static void test_dense_softmax_grad_matches_finite_differences(void **state)
{
	const struct wc_dense_spec s = { WC_DENSE_SOFTMAX, 13, 0, 4 };

	(void)state;
	check_grad(&s, 6, 11);
}

static void test_dense_mlp_grad_matches_finite_differences(void **state)
{
	/* hidden 11 exercises both the 8-wide vector body and the scalar tail of axpy */
	const struct wc_dense_spec s = { WC_DENSE_MLP, 17, 11, 5 };

	(void)state;
	check_grad(&s, 7, 12);
}

static void test_dense_layout_and_init(void **state)
{
	const struct wc_dense_spec m = { WC_DENSE_MLP, 784, 128, 10 };
	const struct wc_dense_spec sm = { WC_DENSE_SOFTMAX, 784, 0, 10 };
	const struct wc_dense_spec bad = { WC_DENSE_SOFTMAX, 784, 5, 10 };
	struct wc_tensor_desc t[4];
	float *a, *b;
	size_t P = wc_dense_param_count(&m);

	(void)state;
	assert_int_equal(P, 784 * 128 + 128 + 128 * 10 + 10);
	assert_int_equal(wc_dense_param_count(&sm), 7850);
	assert_int_equal(wc_dense_tensors(&m, t), 4);
	assert_string_equal(t[2].name, "W2");
	assert_int_equal(t[2].offset, 784 * 128 + 128);
	assert_int_equal(wc_dense_check(&bad), -EINVAL);
	a = malloc(P * sizeof(float));
	b = malloc(P * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	wc_dense_init(&m, a, 5);
	wc_dense_init(&m, b, 5);
	assert_memory_equal(a, b, P * sizeof(float)); /* deterministic per seed */
	assert_true(a[t[1].offset] == 0.0f);          /* biases start at zero */
	wc_dense_init(&m, b, 6);
	assert_memory_not_equal(a, b, P * sizeof(float));
	free(a);
	free(b);
}

static void test_dense_refuses_bad_batch(void **state)
{
	const struct wc_dense_spec s = { WC_DENSE_SOFTMAX, 4, 0, 3 };
	const struct wc_dense_spec other = { WC_DENSE_SOFTMAX, 4, 0, 2 };
	float p[15] = { 0 }, g[15], x[8] = { 0 };
	uint8_t y[2] = { 0, 3 };
	struct wc_dense_ws *ws = NULL;
	double l;

	(void)state;
	assert_int_equal(wc_dense_ws_create(&s, 2, &ws), 0);
	g[0] = 42.0f;
	assert_int_equal(wc_dense_loss_grad(&s, ws, p, x, y, 2, g, &l, NULL), -EINVAL);
	assert_true(g[0] == 42.0f); /* nothing written for a refused batch */
	y[1] = 2;
	assert_int_equal(wc_dense_loss_grad(&s, ws, p, x, y, 3, g, &l, NULL), -EINVAL);
	assert_int_equal(wc_dense_loss_grad(&other, ws, p, x, y, 2, g, &l, NULL), -EINVAL);
	assert_int_equal(wc_dense_loss_grad(&s, ws, p, x, y, 2, g, &l, NULL), 0);
	assert_float_equal(l, log(3.0), 1e-6); /* zero weights: uniform prediction */
	wc_dense_ws_destroy(ws);
	wc_dense_ws_destroy(NULL);
}

/* Plain minibatch SGD on the first n_train training images, accuracy on 2000 test images. */
static double train_subset(const struct wc_dense_spec *s, uint32_t n_train, unsigned epochs,
			   float lr)
{
	const uint32_t B = 32;
	struct wc_dataset *tr = NULL, *te = NULL;
	struct wc_dense_ws *ws = NULL;
	size_t P = wc_dense_param_count(s);
	float *p = malloc(P * sizeof(float)), *g = malloc(P * sizeof(float));
	char err[256];
	double acc = 0, l0, l1;
	unsigned e;
	uint32_t i;

	assert_int_equal(wc_fmnist_load(NULL, 1, n_train, &tr, err, sizeof(err)), 0);
	assert_int_equal(wc_fmnist_load(NULL, 0, 2000, &te, err, sizeof(err)), 0);
	assert_int_equal(wc_dense_ws_create(s, B, &ws), 0);
	wc_dense_init(s, p, 1);
	assert_int_equal(wc_dense_evaluate(s, ws, p, te->x, te->y, te->n, NULL, &l0), 0);
	for (e = 0; e < epochs; e++)
		for (i = 0; i + B <= tr->n; i += B) {
			assert_int_equal(wc_dense_loss_grad(s, ws, p, tr->x + (size_t)i * 784, tr->y + i, B,
							    g, NULL, NULL), 0);
			wc_sgd_step(p, g, P, lr);
		}
	assert_int_equal(wc_dense_evaluate(s, ws, p, te->x, te->y, te->n, &acc, &l1), 0);
	assert_true(l1 < l0);
	wc_dense_ws_destroy(ws);
	wc_dataset_destroy(tr);
	wc_dataset_destroy(te);
	free(p);
	free(g);
	return acc;
}

static void test_dense_softmax_learns_fashion_mnist_subset(void **state)
{
	const struct wc_dense_spec s = { WC_DENSE_SOFTMAX, 784, 0, 10 };
	double acc;

	(void)state;
	wc_test_need_file(WC_FMNIST_DIR "/train-images-idx3-ubyte.gz", "dataset-fashion-mnist");
	acc = train_subset(&s, 10000, 3, 0.1f);
	print_message("softmax, 10000 train images x 3 epochs: test accuracy %.4f\n", acc);
	assert_true(acc > 0.78); /* chance is 0.10; the full run reaches ~0.83 */
}

static void test_dense_mlp_learns_fashion_mnist_subset(void **state)
{
	const struct wc_dense_spec s = { WC_DENSE_MLP, 784, 64, 10 };
	double acc;

	(void)state;
	wc_test_need_file(WC_FMNIST_DIR "/train-images-idx3-ubyte.gz", "dataset-fashion-mnist");
	acc = train_subset(&s, 10000, 3, 0.1f);
	print_message("mlp 784-64-10, 10000 train images x 3 epochs: test accuracy %.4f\n", acc);
	assert_true(acc > 0.79);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dense_softmax_grad_matches_finite_differences),
		cmocka_unit_test(test_dense_mlp_grad_matches_finite_differences),
		cmocka_unit_test(test_dense_layout_and_init),
		cmocka_unit_test(test_dense_refuses_bad_batch),
		cmocka_unit_test(test_dense_softmax_learns_fashion_mnist_subset),
		cmocka_unit_test(test_dense_mlp_learns_fashion_mnist_subset),
	};

	return cmocka_run_group_tests_name("dense", tests, NULL, NULL);
}
