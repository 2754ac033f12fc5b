/*
 * two_tables.c — a training program outside the wharf tree: it includes <wharf/wharf.h>,
 * builds with `pkg-config --cflags --libs wharf`, and is what the install test compiles.
 * Not built by wharf's Makefile.
 *
 * The model is its own: logistic regression over sparse features, the weights in a sparse
 * table "w" (dim 1, Adagrad) and the bias in a dense table "b" (1 x 1, SGD). The data is a
 * fixed synthetic set: each sample has 8 of 2000 features, the label is the sign of a hidden
 * weight vector's sum over them. One binary, either role:
 *
 *   two_tables [cluster flags]            role from the flags or environment, as wharf's
 *                                         executables take it (--role ps|worker, --ps, ...)
 *   WHARF_EAL_ARGS="..."                  EAL arguments when the protocol is dpdk
 *
 * As ps it serves until SIGINT/SIGTERM. As worker it trains from four threads at once
 * sharing one client, prints the held-out accuracy and exits 0 when it is at least 0.9.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_sigmask under -std=c11 */

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wharf/wharf.h>

#define FEATURES 2000u
#define PER 8u
#define SAMPLES 40000u
#define TEST 4000u
#define THREADS 4u
#define BATCH 64u
#define EPOCHS 3u

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Sample i: its features and label, the same in every process. */
static float sample(uint32_t i, uint64_t f[PER])
{
	uint64_t s = 1000003ull * i + 17;
	double sum = 0;
	unsigned j;

	for (j = 0; j < PER; j++) {
		f[j] = rng_next(&s) % FEATURES;
		uint64_t h = f[j] * 0x9e3779b97f4a7c15ull;
		sum += (double)((h >> 40) % 2001) / 1000.0 - 1.0; /* hidden weight in [-1, 1] */
	}
	return sum > 0 ? 1.0f : 0.0f;
}

struct job {
	struct wharf_client *cl;
	uint32_t w, b;
	unsigned id;
	int rc;
};

static float predict(const float *wv, float bias)
{
	float z = bias;

	for (unsigned j = 0; j < PER; j++)
		z += wv[j];
	return 1.0f / (1.0f + expf(-z));
}

static void *train(void *arg)
{
	struct job *jb = arg;
	uint64_t keys[BATCH * PER];
	float wv[BATCH * PER], gw[BATCH * PER], bias, gb;
	uint32_t e, i, k;

	for (e = 0; e < EPOCHS && jb->rc == 0; e++)
		for (i = jb->id * BATCH; i + BATCH <= SAMPLES && jb->rc == 0; i += THREADS * BATCH) {
			float y[BATCH];
			for (k = 0; k < BATCH; k++)
				y[k] = sample(i + k, &keys[k * PER]);
			if ((jb->rc = wharf_pull(jb->cl, jb->w, keys, BATCH * PER, wv)) != 0 ||
			    (jb->rc = wharf_dense_pull(jb->cl, jb->b, &bias)) != 0)
				break;
			gb = 0;
			for (k = 0; k < BATCH; k++) {
				float d = predict(&wv[k * PER], bias) - y[k];
				for (unsigned j = 0; j < PER; j++)
					gw[k * PER + j] = d;
				gb += d / BATCH;
			}
			if ((jb->rc = wharf_push(jb->cl, jb->w, keys, BATCH * PER, gw)) == 0)
				jb->rc = wharf_dense_push(jb->cl, jb->b, &gb);
		}
	return NULL;
}

static double accuracy(struct wharf_client *cl, uint32_t w, uint32_t b)
{
	uint64_t keys[PER];
	float wv[PER], bias;
	unsigned right = 0, i;

	if (wharf_dense_pull(cl, b, &bias) != 0)
		return -1;
	for (i = SAMPLES; i < SAMPLES + TEST; i++) {
		float y = sample(i, keys);
		if (wharf_pull(cl, w, keys, PER, wv) != 0)
			return -1;
		right += (predict(wv, bias) > 0.5f) == (y > 0.5f);
	}
	return (double)right / TEST;
}

static int fail(const char *what)
{
	fprintf(stderr, "two_tables: %s: %s\n", what, wharf_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	struct wharf_config *c;
	struct wharf_model *m;
	struct wharf_table t;
	struct wharf_client *cl;
	struct job jb[THREADS];
	pthread_t th[THREADS];
	uint32_t w, b;
	unsigned i;
	double acc, t0, secs;
	struct timespec ts;
	struct wharf_client_stats st;

	if (wharf_config_load(argc - 1, (const char *const *)argv + 1, NULL, &c) != 0)
		return fail("cluster");
	if (wharf_model_new(&m) != 0)
		return fail("model");
	wharf_table_defaults(&t, "w");
	t.optimizer = WHARF_OPT_ADAGRAD;
	t.lr = 0.5f;
	if (wharf_model_add(m, &t, &w) != 0)
		return fail("table w");
	wharf_table_defaults(&t, "b");
	t.kind = WHARF_TABLE_DENSE;
	t.rows = 1;
	t.lr = 0.5f;
	if (wharf_model_add(m, &t, &b) != 0)
		return fail("table b");

	if (wharf_config_role(c) == WHARF_ROLE_SERVER) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGINT);
		sigaddset(&s, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &s, NULL);
		if (wharf_server_run(c, m, NULL, NULL) != 0)
			return fail("server");
		printf("two_tables: server %u stopped\n", wharf_config_index(c));
		return 0;
	}
	if (wharf_client_open(c, m, NULL, &cl) != 0)
		return fail("client");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	for (i = 0; i < THREADS; i++) {
		jb[i] = (struct job){ cl, w, b, i, 0 };
		pthread_create(&th[i], NULL, train, &jb[i]);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		if (jb[i].rc != 0)
			fprintf(stderr, "two_tables: thread %u: %s\n", i, strerror(-jb[i].rc));
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	secs = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - t0;
	wharf_client_stats(cl, &st);
	acc = accuracy(cl, w, b);
	printf("two_tables: worker %u (%s, wharf %s): %u threads, %u epochs in %.2f s (%.0f calls/s), "
	       "held-out accuracy %.4f\n", wharf_config_index(c), wharf_config_protocol(c),
	       wharf_version(), THREADS, EPOCHS, secs, (double)st.calls / secs, acc);
	wharf_client_close(cl);
	wharf_model_free(m);
	wharf_config_free(c);
	for (i = 0; i < THREADS; i++)
		if (jb[i].rc != 0)
			return 1;
	return acc >= 0.9 ? 0 : 1;
}
