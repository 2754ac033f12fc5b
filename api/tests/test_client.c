/*
 * test_client.c — the public client against a real PS in this process, over kernel TCP on
 * loopback: wharf_server_run on a thread, wharf_client_open, and calls from several threads
 * at once. Exact results: SGD tables with lr 1 and zero initial rows, so a pushed gradient
 * of -1 adds exactly 1 (the exactly-once ledger).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/wh_config.h"
#include "wharf/wharf.h"

#define DIM 4u
#define DROWS 10u
#define DDIM 3u
#define THREADS 4u
#define ROUNDS 50u
#define BIG 150000u   /* keys in one call: more than one message carries */

static char ps_ep[32], mode_arg[16], nw_arg[8] = "1", idx_arg[8] = "0", bufs_arg[8] = "512";
static const char *const no_env[] = { NULL };

static struct wharf_model *model(void)
{
	struct wharf_model *m;
	struct wharf_table t;

	assert_int_equal(wharf_model_new(&m), 0);
	wharf_table_defaults(&t, "emb");
	t.dim = DIM;
	t.lr = 1.0f;
	assert_int_equal(wharf_model_add(m, &t, NULL), 0);
	wharf_table_defaults(&t, "w");
	t.kind = WHARF_TABLE_DENSE;
	t.rows = DROWS;
	t.dim = DDIM;
	t.lr = 1.0f;
	assert_int_equal(wharf_model_add(m, &t, NULL), 0);
	return m;
}

static struct wharf_config *config(const char *role)
{
	const char *argv[] = { "--role", role, "--ps", ps_ep, "--num-workers", nw_arg, "--protocol",
			       "kernel", "--mode", mode_arg, "--wait-timeout", "20", "--retry-interval", "1",
			       "--task-index", strcmp(role, "ps") == 0 ? "0" : idx_arg,
			       "--reply-buffers", bufs_arg };
	struct wharf_config *c = NULL;
	int rc = wharf_config_load(18, argv, no_env, &c);

	if (rc != 0)
		fprintf(stderr, "config: %s\n", wharf_errmsg());
	assert_int_equal(rc, 0);
	return c;
}

struct server {
	pthread_t th;
	struct wharf_config *c;
	struct wharf_model *m;
	int rc;
};

static void *serve(void *arg)
{
	struct server *s = arg;

	s->rc = wharf_server_run(s->c, s->m, NULL, NULL);
	return NULL;
}

static void server_start(struct server *s, const char *mode)
{
	snprintf(ps_ep, sizeof(ps_ep), "127.0.0.1:%u", 48500u + (unsigned)getpid() % 400u);
	snprintf(mode_arg, sizeof(mode_arg), "%s", mode);
	s->c = config("ps");
	s->m = model();
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	wharf_server_stop();
	pthread_join(s->th, NULL);
	assert_int_equal(s->rc, 0);
	wharf_config_free(s->c);
	wharf_model_free(s->m);
}

/* A server of mode and one client of it, the fixture of most tests below. */
struct env {
	struct server s;
	struct wharf_config *c;
	struct wharf_model *m;
	struct wharf_client *cl;
};

static void env_up(struct env *e, const char *mode)
{
	server_start(&e->s, mode);
	e->c = config("worker");
	e->m = model();
	if (wharf_client_open(e->c, e->m, NULL, &e->cl) != 0)
		fail_msg("open: %s", wharf_errmsg());
}

static void env_down(struct env *e)
{
	wharf_client_close(e->cl);
	wharf_model_free(e->m);
	wharf_config_free(e->c);
	server_stop(&e->s);
}

struct worker {
	struct wharf_client *cl;
	unsigned id;
	int rc;
};

/* Each thread: ROUNDS pushes of -1 to keys 0..99 (shared) and 1000*id.. (its own), and
 * dense pushes of -1, some blocking and some asynchronous. */
static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t keys[100 + 10];
	float g[(100 + 10) * DIM], dg[DROWS * DDIM];
	unsigned i, r;

	for (i = 0; i < 100; i++)
		keys[i] = i;
	for (i = 0; i < 10; i++)
		keys[100 + i] = 1000u * (w->id + 1) + i;
	for (i = 0; i < (100 + 10) * DIM; i++)
		g[i] = -1.0f;
	for (i = 0; i < DROWS * DDIM; i++)
		dg[i] = -1.0f;
	for (r = 0; r < ROUNDS && w->rc == 0; r++) {
		struct wharf_req *q = NULL;
		if (r % 2 == 0) {
			w->rc = wharf_push(w->cl, 0, keys, 110, g);
		} else if ((w->rc = wharf_push_async(w->cl, 0, keys, 110, g, NULL, NULL, &q)) == 0) {
			w->rc = wharf_wait(q);
		}
		if (w->rc == 0)
			w->rc = wharf_dense_push(w->cl, 1, dg);
	}
	return NULL;
}

static void count_done(void *arg, int status)
{
	int *n = arg;

	if (status == 0)
		__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
}

static void test_client_threads_exactly_once(void **state)
{
	struct env e;
	struct wharf_client *cl;
	struct worker w[THREADS];
	pthread_t th[THREADS];
	float out[110 * DIM], dout[DROWS * DDIM];
	uint64_t keys[110];
	unsigned i;
	int ncb = 0;

	(void)state;
	env_up(&e, "async");
	cl = e.cl;
	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ cl, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(w[i].rc, 0);
	for (i = 0; i < 100; i++)
		keys[i] = i;
	for (i = 0; i < 10; i++)
		keys[100 + i] = 1000u * (2 + 1) + i;
	assert_int_equal(wharf_pull(cl, 0, keys, 110, out), 0);
	for (i = 0; i < 100 * DIM; i++)
		assert_float_equal(out[i], (float)(THREADS * ROUNDS), 0);
	for (i = 100 * DIM; i < 110 * DIM; i++)
		assert_float_equal(out[i], (float)ROUNDS, 0);
	assert_int_equal(wharf_dense_pull(cl, 1, dout), 0);
	for (i = 0; i < DROWS * DDIM; i++)
		assert_float_equal(dout[i], (float)(THREADS * ROUNDS), 0);

	/* push_pull returns the values after the push; a completion callback runs. */
	{
		float g[DIM] = { -1, -2, -3, -4 }, o[DIM];
		uint64_t k = 777777;
		struct wharf_req *q;
		assert_int_equal(wharf_push_pull(cl, 0, &k, 1, g, o), 0);
		assert_float_equal(o[0], 1, 0);
		assert_float_equal(o[3], 4, 0);
		assert_int_equal(wharf_pull_async(cl, 0, &k, 1, o, count_done, &ncb, &q), 0);
		assert_int_equal(wharf_wait(q), 0);
		assert_int_equal(ncb, 1);
		assert_float_equal(o[1], 2, 0);
	}
	env_down(&e);
}

#define PIPE 8u   /* pushes each thread keeps in flight */

/* Each thread: ROUNDS rounds of PIPE asynchronous pushes of -1 at once, then waits for them. */
static void *pipelined(void *arg)
{
	struct worker *w = arg;
	uint64_t keys[100 + 10];
	float g[(100 + 10) * DIM];
	struct wharf_req *q[PIPE];
	unsigned i, r;

	for (i = 0; i < 100; i++)
		keys[i] = i;
	for (i = 0; i < 10; i++)
		keys[100 + i] = 1000u * (w->id + 1) + i;
	for (i = 0; i < (100 + 10) * DIM; i++)
		g[i] = -1.0f;
	for (r = 0; r < ROUNDS && w->rc == 0; r++) {
		for (i = 0; i < PIPE && w->rc == 0; i++)
			w->rc = wharf_push_async(w->cl, 0, keys, 110, g, NULL, NULL, &q[i]);
		for (unsigned j = 0; j < i; j++) {
			int rc = wharf_wait(q[j]);
			if (rc != 0 && w->rc == 0) {
				w->rc = rc;
				fprintf(stderr, "pipelined push: %s\n", wharf_errmsg());
			}
		}
	}
	return NULL;
}

/*
 * A server of 2 reply buffers under 4 threads x 8 pipelined pushes: it runs out of buffers
 * all the time and stops reading until its replies are sent (back-pressure). No push is
 * refused, none lost, none doubled.
 */
static void test_client_overloaded_server_exactly_once(void **state)
{
	struct env e;
	struct worker w[THREADS];
	pthread_t th[THREADS];
	float out[110 * DIM];
	uint64_t keys[110];
	unsigned i;

	(void)state;
	snprintf(bufs_arg, sizeof(bufs_arg), "2");
	env_up(&e, "async");
	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ e.cl, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, pipelined, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(w[i].rc, 0);
	for (i = 0; i < 110; i++)
		keys[i] = i < 100 ? i : 1000u * (1 + 1) + (i - 100);
	assert_int_equal(wharf_pull(e.cl, 0, keys, 110, out), 0);
	for (i = 0; i < 100 * DIM; i++)
		assert_float_equal(out[i], (float)(THREADS * ROUNDS * PIPE), 0);
	for (i = 100 * DIM; i < 110 * DIM; i++)
		assert_float_equal(out[i], (float)(ROUNDS * PIPE), 0);
	env_down(&e);
	snprintf(bufs_arg, sizeof(bufs_arg), "512");
}

/* A call of more keys than one message carries is split, and answered in key order. */
static void test_client_big_call_is_split(void **state)
{
	struct env e;
	struct wharf_client *cl;
	struct wharf_client_stats st;
	uint64_t *keys = malloc(BIG * sizeof(*keys));
	float *g = malloc((size_t)BIG * DIM * sizeof(*g)), *out = malloc((size_t)BIG * DIM * 4);
	unsigned i;

	(void)state;
	assert_non_null(keys);
	assert_non_null(g);
	assert_non_null(out);
	env_up(&e, "async");
	cl = e.cl;
	for (i = 0; i < BIG; i++) {
		keys[i] = (uint64_t)i * 7919u + 5;
		for (unsigned d = 0; d < DIM; d++)
			g[(size_t)i * DIM + d] = -(float)(i % 1000) - (float)d;
	}
	assert_int_equal(wharf_push(cl, 0, keys, BIG, g), 0);
	memset(out, 0, (size_t)BIG * DIM * 4);
	assert_int_equal(wharf_pull(cl, 0, keys, BIG, out), 0);
	for (i = 0; i < BIG; i++)
		for (unsigned d = 0; d < DIM; d++)
			if (out[(size_t)i * DIM + d] != (float)(i % 1000) + (float)d)
				fail_msg("key %u dim %u: %f", i, d, out[(size_t)i * DIM + d]);
	wharf_client_stats(cl, &st);
	assert_true(st.requests >= 4); /* at least two messages each way */
	env_down(&e);
	free(keys);
	free(g);
	free(out);
}

/* Bad calls are refused with a message, and the client keeps working. */
static void test_client_refuses_bad_calls(void **state)
{
	struct env e;
	struct wharf_client *cl;
	uint64_t k = 1;
	float o[DROWS * DDIM];
	struct wharf_req *q;

	(void)state;
	env_up(&e, "async");
	cl = e.cl;
	assert_int_equal(wharf_pull(cl, 9, &k, 1, o), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "table 9 does not exist"));
	assert_int_equal(wharf_pull(cl, 1, &k, 1, o), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "dense"));
	assert_int_equal(wharf_dense_pull(cl, 0, o), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "sparse"));
	assert_int_equal(wharf_pull(cl, 0, NULL, 1, o), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "keys is NULL"));
	assert_int_equal(wharf_pull_async(cl, 0, &k, 1, o, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(wharf_barrier(cl, 0), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "async"));
	/* A server's refusal is final and says why, in the server's words. */
	o[0] = o[1] = o[2] = 0;
	o[3] = NAN;
	assert_int_equal(wharf_push(cl, 0, &k, 1, o), -EDOM);
	if (strstr(wharf_errmsg(), "server 0: value 3 (row 0) is not finite") == NULL)
		fail_msg("the server's reason is lost: '%s'", wharf_errmsg());
	assert_int_equal(wharf_pull(cl, 0, &k, 0, o), 0); /* nothing asked: done at once */
	assert_int_equal(wharf_pull_async(cl, 0, &k, 1, o, NULL, NULL, &q), 0);
	assert_int_equal(wharf_wait_timeout(q, 10000), 0);
	q = (void *)1;
	assert_int_equal(wharf_pull_async(cl, 0, NULL, 1, o, NULL, NULL, &q), -EINVAL);
	assert_null(q); /* refused: nothing queued */
	env_down(&e);
}

/*
 * out must not overlap what later chunks and re-asked pulls read (keys, or a part of
 * grads); push_pull's out may be grads itself, and then holds the rows after the push.
 */
static void test_client_refuses_out_overlapping_its_inputs(void **state)
{
	struct env e;
	struct wharf_client *cl;
	union { uint64_t k[2 * DIM]; float f[4 * DIM]; } u;
	uint64_t keys[2] = { 11, 12 };
	float g[3 * DIM], o[2 * DIM];
	struct wharf_req *q = (void *)1;
	unsigned i;

	(void)state;
	env_up(&e, "async");
	cl = e.cl;
	u.k[0] = 11;
	u.k[1] = 12;
	assert_int_equal(wharf_pull(cl, 0, u.k, 2, u.f), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "pull: out overlaps keys"));
	assert_int_equal(wharf_pull(cl, 0, u.k + 1, 1, u.f), -EINVAL); /* out's tail on keys */
	assert_int_equal(wharf_pull_async(cl, 0, u.k, 2, u.f + 2, NULL, NULL, &q), -EINVAL);
	assert_null(q);
	assert_int_equal(wharf_pull(cl, 0, u.k, 2, u.f + 3), -EINVAL); /* out's head on keys */
	assert_int_equal(wharf_pull(cl, 0, u.k, 2, u.f + 4), 0); /* just past keys: fine */
	assert_int_equal(wharf_pull(cl, 0, u.k + 2, 1, u.f), 0); /* just before them: fine */
	for (i = 0; i < 3 * DIM; i++)
		g[i] = -1;
	assert_int_equal(wharf_push_pull(cl, 0, keys, 2, g, g + 1), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "push_pull: out overlaps grads"));
	assert_int_equal(wharf_push_pull(cl, 0, keys, 2, g + DIM, g), -EINVAL);
	assert_int_equal(wharf_push_pull(cl, 0, keys, 2, g, (float *)keys), -EINVAL);
	assert_int_equal(wharf_push_pull(cl, 0, keys, 2, g, o), 0); /* not refused before */
	assert_int_equal(wharf_push_pull(cl, 0, keys, 2, g, g), 0); /* out is grads: allowed */
	for (i = 0; i < 2 * DIM; i++)
		assert_float_equal(g[i], 2, 0); /* two pushes of -1 applied, SGD with lr 1 */
	assert_int_equal(wharf_push(cl, 0, keys, 1, (float *)keys), 0); /* nothing written */
	env_down(&e);
}

/* Sync mode: pushes of a step are applied when every worker reached its barrier. */
static void test_client_sync_barrier(void **state)
{
	struct env e;
	struct wharf_client *cl;
	uint64_t k = 42;
	float g[DIM] = { -1, -1, -1, -1 }, o[DIM];
	uint64_t step;

	(void)state;
	env_up(&e, "sync");
	cl = e.cl;
	for (step = 0; step < 5; step++) {
		assert_int_equal(wharf_push(cl, 0, &k, 1, g), 0);
		assert_int_equal(wharf_barrier(cl, step), 0);
		assert_int_equal(wharf_pull(cl, 0, &k, 1, o), 0);
		assert_float_equal(o[0], (float)(step + 1), 0);
	}
	env_down(&e);
}

struct sync_worker {
	struct wharf_config *c;
	int rc;
	float seen[10];
};

static void *sync_steps(void *arg)
{
	struct sync_worker *w = arg;
	struct wharf_model *m = model();
	struct wharf_client *cl;
	uint64_t k = 42;
	float g[DIM] = { -1, -1, -1, -1 }, o[DIM];
	uint64_t step;

	if ((w->rc = wharf_client_open(w->c, m, NULL, &cl)) != 0) {
		wharf_model_free(m);
		return NULL;
	}
	for (step = 0; step < 10 && w->rc == 0; step++) {
		if ((w->rc = wharf_push(cl, 0, &k, 1, g)) == 0 &&
		    (w->rc = wharf_barrier(cl, step)) == 0 &&
		    (w->rc = wharf_pull(cl, 0, &k, 1, o)) == 0)
			w->seen[step] = o[0];
	}
	wharf_client_close(cl);
	wharf_model_free(m);
	return NULL;
}

/* Two workers in sync mode: a barrier asked again until the other worker arrives completes,
 * and every step holds both workers' pushes. */
static void test_client_sync_two_workers(void **state)
{
	struct server s;
	struct sync_worker w[2];
	pthread_t th[2];
	unsigned i, step;

	(void)state;
	snprintf(nw_arg, sizeof(nw_arg), "2");
	server_start(&s, "sync");
	for (i = 0; i < 2; i++) {
		snprintf(idx_arg, sizeof(idx_arg), "%u", i);
		memset(&w[i], 0, sizeof(w[i]));
		w[i].c = config("worker");
		assert_int_equal(pthread_create(&th[i], NULL, sync_steps, &w[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].rc, 0);
		for (step = 0; step < 10; step++)
			assert_float_equal(w[i].seen[step], 2.0f * (float)(step + 1), 0);
		wharf_config_free(w[i].c);
	}
	server_stop(&s);
	snprintf(nw_arg, sizeof(nw_arg), "1");
	snprintf(idx_arg, sizeof(idx_arg), "0");
}

/* A worker's config naming a server that is not there (127.0.0.1:9), waiting for it. */
static struct wharf_config *absent_server(const char *wait_timeout)
{
	const char *argv[] = { "--role", "worker", "--ps", "127.0.0.1:9", "--num-workers", "1",
			       "--protocol", "kernel", "--wait-timeout", wait_timeout,
			       "--retry-interval", "1" };
	struct wharf_config *c;

	assert_int_equal(wharf_config_load(12, argv, no_env, &c), 0);
	return c;
}

static double secs_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* A server that is not there: the open gives up after the wait timeout, naming it. */
static void test_client_open_times_out(void **state)
{
	struct wharf_config *c = absent_server("1");
	struct wharf_model *m = model();
	struct wharf_client *cl = NULL;
	int rc;

	(void)state;
	rc = wharf_client_open(c, m, NULL, &cl);
	assert_int_equal(rc, -ETIMEDOUT);
	assert_null(cl);
	assert_non_null(strstr(wharf_errmsg(), "127.0.0.1:9"));
	wharf_config_free(c);
	wharf_model_free(m);
}

static int interrupt_at_3(void *arg)
{
	int *calls = arg;

	return ++*calls >= 3;
}

/*
 * wharf_client_open_interruptible: the callback is asked while the open waits, and its
 * nonzero answer ends the wait at once with -ECANCELED ("interrupted"), long before the
 * 60-second wait timeout.
 */
static void test_client_open_interrupted(void **state)
{
	struct wharf_config *c = absent_server("60");
	struct wharf_model *m = model();
	struct wharf_client *cl = NULL;
	struct timespec t0;
	int rc, calls = 0;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = wharf_client_open_interruptible(c, m, NULL, interrupt_at_3, &calls, &cl);
	assert_int_equal(rc, -ECANCELED);
	assert_null(cl);
	assert_int_equal(calls, 3);
	assert_true(secs_since(&t0) < 10);
	assert_non_null(strstr(wharf_errmsg(), "interrupted"));
	wharf_config_free(c);
	wharf_model_free(m);
}

struct said {
	int status;
	char msg[256];
};

/* A completion function that keeps the status and, on failure, wharf_errmsg(). */
static void keep_why(void *arg, int status)
{
	struct said *d = arg;

	d->status = status;
	snprintf(d->msg, sizeof(d->msg), "%s", status != 0 ? wharf_errmsg() : "");
}

/*
 * wharf_client_interrupt: a push to a server that went away waits for it to come back (the
 * 20-second wait timeout here). Interrupted, it fails at once with -ECANCELED, and its
 * completion function reads why in wharf_errmsg(); later calls fail the same way, and the
 * close returns at once.
 */
static void test_client_interrupt_ends_the_wait_for_a_server(void **state)
{
	uint64_t keys[4] = { 1, 2, 3, 4 };
	float g[4 * DIM] = { 0 };
	struct said d = { 0 };
	struct wharf_req *req;
	struct timespec t0;
	struct env e;

	(void)state;
	env_up(&e, "async");
	assert_int_equal(wharf_push(e.cl, 0, keys, 4, g), 0);
	server_stop(&e.s);
	assert_int_equal(wharf_push_async(e.cl, 0, keys, 4, g, keep_why, &d, &req), 0);
	assert_int_equal(wharf_wait_timeout(req, 1500), -EAGAIN); /* waiting for the server */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wharf_client_interrupt(e.cl);
	assert_int_equal(wharf_wait(req), -ECANCELED);
	assert_true(secs_since(&t0) < 5);
	assert_int_equal(d.status, -ECANCELED);
	assert_non_null(strstr(d.msg, "push of table 0"));
	assert_non_null(strstr(d.msg, "interrupted"));
	assert_int_equal(wharf_push(e.cl, 0, keys, 4, g), -ECANCELED);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wharf_client_close(e.cl);
	assert_true(secs_since(&t0) < 5);
	wharf_model_free(e.m);
	wharf_config_free(e.c);
}

static void test_config_refuses_bad_flags(void **state)
{
	const char *bad[] = { "--role", "worker", "--ps", "127.0.0.1:6000", "--no-such-flag" };
	const char *mode[] = { "--role", "worker", "--ps", "127.0.0.1:6000", "--mode", "fast" };
	struct wharf_config *c = (void *)1;

	(void)state;
	assert_int_equal(wharf_config_load(5, bad, no_env, &c), -EINVAL);
	assert_null(c);
	assert_non_null(strstr(wharf_errmsg(), "--no-such-flag"));
	assert_int_equal(wharf_config_load(6, mode, no_env, &c), -EINVAL);
	assert_non_null(strstr(wharf_errmsg(), "fast"));
	assert_int_equal(wharf_config_load(4, mode, no_env, &c), -EINVAL); /* workers unknown */
	assert_int_equal(wharf_config_load(-1, mode, no_env, &c), -EINVAL);
}

/* The library's EAL arguments: WHARF_EAL_ARGS, else the cluster file's eal_args, else set. */
static void test_config_eal_args_env_over_file(void **state)
{
	char path[64] = "/tmp/wh_eal_XXXXXX", arg[80];
	const char *argv[] = { "--role", "worker", "--ps", "127.0.0.1:6000", "--num-workers", "1",
			       "--protocol", "kernel", arg };
	const char *const env[] = { "WHARF_EAL_ARGS=-l 1 --no-pci", NULL };
	struct wharf_config *c;
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("{\"eal_args\": [\"-l\", \"0\", \"--no-huge\"]}\n", f);
	fclose(f);
	snprintf(arg, sizeof(arg), "--config=%s", path);
	assert_int_equal(wharf_config_load(9, argv, no_env, &c), 0);
	assert_int_equal(c->eal_argc, 4);
	assert_string_equal(c->eal_argv[2], "0");
	assert_string_equal(c->eal_argv[3], "--no-huge");
	wharf_config_free(c);
	assert_int_equal(wharf_config_load(9, argv, env, &c), 0);
	assert_int_equal(c->eal_argc, 4);
	assert_string_equal(c->eal_argv[2], "1");
	assert_string_equal(c->eal_argv[3], "--no-pci");
	assert_int_equal(wharf_config_set_eal(c, "-l 0-1"), 0);
	assert_int_equal(c->eal_argc, 3);
	wharf_config_free(c);
	assert_int_equal(wharf_config_load(8, argv, no_env, &c), 0); /* neither: none */
	assert_int_equal(c->eal_argc, 1);
	wharf_config_free(c);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_refuses_bad_flags),
		cmocka_unit_test(test_config_eal_args_env_over_file),
		cmocka_unit_test(test_client_open_times_out),
		cmocka_unit_test(test_client_open_interrupted),
		cmocka_unit_test(test_client_interrupt_ends_the_wait_for_a_server),
		cmocka_unit_test(test_client_threads_exactly_once),
		cmocka_unit_test(test_client_overloaded_server_exactly_once),
		cmocka_unit_test(test_client_big_call_is_split),
		cmocka_unit_test(test_client_refuses_bad_calls),
		cmocka_unit_test(test_client_refuses_out_overlapping_its_inputs),
		cmocka_unit_test(test_client_sync_barrier),
		cmocka_unit_test(test_client_sync_two_workers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
