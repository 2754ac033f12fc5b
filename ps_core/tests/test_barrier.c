/*
 * test_barrier.c — ps_barrier.c: the sync step across worker restarts (a restarted worker
 * resumes at the servers' step, its pushes carry the step, a push of a closed step is
 * refused), the barrier timeout (the missing workers named; policy fail answers the waiting
 * workers, policy continue closes the step without them and takes them back when they
 * return), incarnation fencing (an older process of a worker id is refused) and the state
 * epoch a hello reports (a server that came back without its state is noticed).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

#define SHARED 7u   /* every worker pushes to it each step */
#define OWN 100u    /* worker w's own key is OWN + w */

/* A counter table: SGD, lr 1, zeros: a pushed -1 adds exactly 1. */
static struct ps_table_config counter(void)
{
	struct ps_table_config t = pt_table(1, 1, PS_OPT_SGD);

	t.op.lr = 1.0f;
	return t;
}

/* Worker w's push of one step: -1 to the shared key and to its own. */
static int step_push(struct pt_cluster *c, uint32_t w)
{
	uint64_t keys[2] = { SHARED, OWN + w };
	float g[2] = { -1.0f, -1.0f };

	return pt_push(c, w, 1, 1, keys, 2, g);
}

static float value(struct pt_cluster *c, uint64_t key)
{
	float v = -1.0f;

	assert_int_equal(pt_pull(c, 0, 1, 1, &key, 1, &v), 0);
	return v;
}

/* The error reply pt_deliver handed back last: its kind. */
static uint32_t last_err_kind(const struct pt_cluster *c)
{
	assert_int_equal(c->rep_buf[3], PS_T_ERROR);
	return tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 4);
}

static void test_barrier_restarted_worker_resumes_at_server_step(void **state)
{
	struct ps_table_config t = counter();
	struct pt_cluster *c;
	uint32_t s, w;
	bool done;
	int st;

	(void)state;
	assert_int_equal(pt_cluster_create(2, 2, PS_MODE_SYNC, 2, &t, 1, &c), 0);
	for (s = 0; s < 3; s++) {
		for (w = 0; w < 2; w++)
			assert_int_equal(step_push(c, w), 0);
		assert_int_equal(pt_barrier_all(c, s), 0);
	}
	assert_int_equal(ps_client_step(c->cl[0]), 3);
	/* Worker 1 restarts under its id: a new process counts from step 0 until its hello. */
	pt_client_restart(c, 1, 1);
	assert_int_equal(ps_client_step(c->cl[1]), 0);
	assert_int_equal(pt_hello(c, 1), 0);
	assert_int_equal(ps_client_step(c->cl[1]), 3);
	/* Its old step 0's barrier is not "done at once" (which fed steps 0..2 into step 3). */
	assert_int_equal(pt_barrier(c, 1, 0, &done), -EINVAL);
	assert_non_null(strstr(ps_client_error(c->cl[1]), "count steps from ps_client_step"));
	for (w = 0; w < 2; w++)
		assert_int_equal(step_push(c, w), 0);
	assert_int_equal(pt_barrier_all(c, 3), 0);
	/* The single-process sum, step by step: every step took one push of each worker. */
	assert_true(value(c, SHARED) == 8.0f);
	assert_true(value(c, OWN + 0) == 4.0f && value(c, OWN + 1) == 4.0f);
	/* A push tagged with a step that closed is refused on every server, nothing applied;
	 * one tagged with a step not begun as well. */
	for (uint64_t bad = 2; bad < 20; bad += 7) {
		uint64_t keys[2] = { SHARED, OWN + 1 };
		float g[2] = { -1.0f, -1.0f };
		st = 1;
		assert_int_equal(ps_client_push(c->cl[1], 1, 1, keys, 2, g, pt_done, &st, c->msgs), 0);
		for (s = 0; s < c->n_servers; s++)
			if (c->msgs[s].len)
				tl_st64(c->msgs[s].buf + TL_MSG_HDR_LEN + 24, bad);
		pt_deliver(c, 1);
		assert_int_equal(st, bad == 2 ? -ESTALE : -EINVAL);
		assert_int_equal(last_err_kind(c), PS_ERR_WRONG_STEP);
		assert_non_null(strstr(ps_client_error(c->cl[1]), bad == 2 ? "closed without it" :
				       "has not begun"));
	}
	assert_true(value(c, SHARED) == 8.0f && value(c, OWN + 1) == 4.0f);
	pt_cluster_destroy(c);
}

/*
 * A worker killed after its push of a step and before its barrier: the restarted process
 * pushes that step again, numbered from where its predecessor's pushes of the step began,
 * so the server takes it for the push it already has: the step holds one push of it.
 */
static void test_barrier_restart_mid_step_repeats_push_once(void **state)
{
	struct ps_table_config t = counter();
	struct pt_cluster *c;
	uint32_t w;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_SYNC, 2, &t, 1, &c), 0);
	for (w = 0; w < 2; w++)
		assert_int_equal(step_push(c, w), 0);
	assert_int_equal(pt_barrier_all(c, 0), 0);
	for (w = 0; w < 2; w++)
		assert_int_equal(step_push(c, w), 0); /* step 1: sequence 2 of each */
	pt_client_restart(c, 1, 1);               /* worker 1 dies before its barrier */
	assert_int_equal(pt_hello(c, 1), 0);
	assert_int_equal(ps_client_step(c->cl[1]), 1);
	assert_int_equal(ps_client_next_seq(c->cl[1]), 2);
	assert_int_equal(step_push(c, 1), 0);
	assert_int_equal(tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 8), 0); /* "duplicate" */
	assert_int_equal(pt_barrier_all(c, 1), 0);
	assert_true(value(c, SHARED) == 4.0f);
	assert_true(value(c, OWN + 1) == 2.0f);
	/* A process whose predecessor had not pushed in the step goes on after its last. */
	pt_client_restart(c, 0, 1);
	assert_int_equal(pt_hello(c, 0), 0);
	assert_int_equal(ps_client_step(c->cl[0]), 2);
	assert_int_equal(ps_client_next_seq(c->cl[0]), 3);
	pt_cluster_destroy(c);
}

static void test_barrier_timeout_fail_names_missing(void **state)
{
	struct ps_table_config t = counter();
	struct ps_barrier_stats bs;
	struct pt_cluster *c;
	uint32_t ids[8], w;
	bool done;

	(void)state;
	pt_barrier_timeout_ms = 40;
	pt_barrier_policy = PS_BARRIER_FAIL;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_SYNC, 3, &t, 1, &c), 0);
	pt_barrier_timeout_ms = 0;
	for (w = 0; w < 3; w++)
		assert_int_equal(step_push(c, w), 0);
	for (w = 0; w < 2; w++) {
		assert_int_equal(pt_barrier(c, w, 0, &done), 0);
		assert_false(done);
	}
	usleep(60 * 1000);
	for (w = 0; w < 2; w++) {
		assert_int_equal(pt_barrier(c, w, 0, &done), -ETIME);
		assert_int_equal(last_err_kind(c), PS_ERR_BARRIER_TIMEOUT);
		assert_non_null(strstr(ps_client_error(c->cl[w]), "for worker 2 (1 of 3 missing)"));
	}
	assert_int_equal(ps_server_barrier_stats(c->srv[0], &bs, ids, 8), 1);
	assert_int_equal(ids[0], 2);
	assert_int_equal(bs.timeouts, 1); /* once per step */
	assert_int_equal(bs.late_step, 0);
	assert_int_equal(bs.late_n, 1);
	assert_int_equal(bs.arrived, 2);
	assert_true(bs.waited_ms >= 40);
	/* The missing worker comes after all: the step completes with everyone's push. */
	assert_int_equal(pt_barrier(c, 2, 0, &done), 0);
	assert_true(done);
	for (w = 0; w < 2; w++) {
		assert_int_equal(pt_barrier(c, w, 0, &done), 0);
		assert_true(done);
	}
	assert_true(value(c, SHARED) == 3.0f);
	pt_cluster_destroy(c);
}

static void test_barrier_timeout_continue_leaves_out_and_readmits(void **state)
{
	struct ps_table_config t = counter();
	struct ps_barrier_stats bs;
	struct pt_cluster *c;
	uint32_t ids[8], w;
	bool done;

	(void)state;
	pt_barrier_timeout_ms = 40;
	pt_barrier_policy = PS_BARRIER_CONTINUE;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_SYNC, 3, &t, 1, &c), 0);
	pt_barrier_timeout_ms = 0;
	pt_barrier_policy = PS_BARRIER_FAIL;
	for (w = 0; w < 2; w++) {
		assert_int_equal(step_push(c, w), 0);
		assert_int_equal(pt_barrier(c, w, 0, &done), 0);
		assert_false(done);
	}
	usleep(60 * 1000);
	for (w = 0; w < 2; w++) { /* the first to ask closes the step without worker 2 */
		assert_int_equal(pt_barrier(c, w, 0, &done), 0);
		assert_true(done);
	}
	assert_true(value(c, SHARED) == 2.0f);
	assert_int_equal(ps_server_barrier_stats(c->srv[0], &bs, ids, 8), 1);
	assert_int_equal(ids[0], 2);
	assert_int_equal(bs.dropped, 1);
	assert_int_equal(bs.gone, 1);
	assert_int_equal(bs.step, 1);
	/* Later steps do not wait for it. */
	for (w = 0; w < 2; w++)
		assert_int_equal(step_push(c, w), 0);
	assert_int_equal(pt_barrier(c, 0, 1, &done), 0);
	assert_false(done);
	assert_int_equal(pt_barrier(c, 1, 1, &done), 0);
	assert_true(done);
	assert_int_equal(pt_barrier(c, 0, 1, &done), 0);
	assert_true(value(c, SHARED) == 4.0f);
	/* Its push of the step that closed without it is refused, not mixed into step 2. */
	assert_int_equal(step_push(c, 2), -ESTALE);
	assert_int_equal(last_err_kind(c), PS_ERR_WRONG_STEP);
	/* It says hello again: back at the servers' step, and the barrier waits for it. */
	assert_int_equal(pt_hello(c, 2), 0);
	assert_int_equal(ps_client_step(c->cl[2]), 2);
	assert_int_equal(ps_server_barrier_stats(c->srv[0], &bs, ids, 8), 1);
	assert_int_equal(bs.gone, 0);
	for (w = 0; w < 3; w++)
		assert_int_equal(step_push(c, w), 0);
	assert_int_equal(pt_barrier_all(c, 2), 0);
	assert_true(value(c, SHARED) == 7.0f);
	assert_true(value(c, OWN + 2) == 1.0f);
	pt_cluster_destroy(c);
}

/* Worker 0's process is client p: pt's helpers act on c->cl[0]. */
static struct ps_client *as_worker0(struct pt_cluster *c, struct ps_client *p)
{
	struct ps_client *was = c->cl[0];

	c->cl[0] = p;
	return was;
}

static int count_push(struct pt_cluster *c, uint32_t n)
{
	uint64_t key = OWN;
	float g = -1.0f;
	int rc = 0;

	while (n-- && rc == 0)
		rc = pt_push(c, 0, 1, 1, &key, 1, &g);
	return rc;
}

/*
 * Two processes claim worker id 0: the one that said hello last (the larger incarnation)
 * is served; the older one's pushes and hellos are refused as fenced, one of an
 * incarnation that never said hello as well. Lost 0, doubled 0: the key holds what each
 * process had acknowledged.
 */
static void test_barrier_fence_older_incarnation_refused(void **state)
{
	struct ps_client_config cc = { .worker_id = 0, .n_servers = 1, .max_keys = 8192 };
	struct ps_table_config t = counter();
	struct ps_shard_stats ss;
	struct ps_client *a, *b, *x;
	struct pt_cluster *c;
	uint64_t fenced = 0;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	pt_client_restart(c, 0, 10);
	a = c->cl[0];
	assert_int_equal(pt_hello(c, 0), 0);
	assert_int_equal(count_push(c, 3), 0);
	cc.incarnation = 20;
	assert_int_equal(ps_client_create(&cc, &b), 0);
	as_worker0(c, b);
	assert_int_equal(pt_hello(c, 0), 0);
	assert_int_equal(ps_client_next_seq(b), 4);
	assert_int_equal(count_push(c, 2), 0);
	/* The older process: refused, told why; nothing of it applied. */
	as_worker0(c, a);
	assert_int_equal(count_push(c, 1), -ESTALE);
	assert_int_equal(last_err_kind(c), PS_ERR_FENCED);
	assert_non_null(strstr(ps_client_error(a), "a newer process took over this worker id"));
	assert_int_equal(pt_hello(c, 0), -ESTALE);
	assert_int_equal(last_err_kind(c), PS_ERR_FENCED);
	/* An incarnation that did not say hello. */
	cc.incarnation = 30;
	assert_int_equal(ps_client_create(&cc, &x), 0);
	as_worker0(c, x);
	assert_int_equal(count_push(c, 1), -EPROTO);
	assert_non_null(strstr(ps_client_error(x), "has not said hello"));
	ps_client_destroy(x);
	as_worker0(c, b);
	assert_int_equal(count_push(c, 1), 0);
	assert_true(value(c, OWN) == 6.0f); /* 3 of the first process, 3 of the second */
	for (uint32_t s = 0; s < 2; s++) {
		assert_int_equal(ps_server_shard_stats(c->srv[0], s, &ss), 0);
		fenced += ss.fenced;
	}
	assert_int_equal(fenced, 2);
	ps_client_destroy(a);
	pt_cluster_destroy(c);
}

static uint64_t epoch_of(struct ps_server *s)
{
	struct ps_barrier_stats bs;

	ps_server_barrier_stats(s, &bs, NULL, 0);
	return bs.epoch;
}

/*
 * The epoch a hello reports is the server state's: a server restored from a checkpoint
 * keeps it, one started empty has a new one, which the client notices.
 */
static void test_barrier_hello_epoch_shows_lost_state(void **state)
{
	struct ps_table_config t = counter();
	struct pt_cluster *a, *r, *f;
	struct ps_client *p;
	uint64_t was, now, rows;
	char path[PATH_MAX], err[256];

	(void)state;
	snprintf(path, sizeof(path), "/tmp/ps_barrier_test_%d.ckpt", (int)getpid());
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &a), 0);
	assert_int_equal(pt_hello(a, 0), 0);
	assert_int_equal(count_push(a, 2), 0);
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_false(ps_client_epoch_changed(a->cl[0], 0, &was, &now));
	p = as_worker0(a, NULL);
	/* Back from its checkpoint: the same state. */
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &r), 0);
	assert_int_equal(ps_load(r->h[0], path, err, sizeof(err)), 0);
	assert_int_equal(epoch_of(r->srv[0]), epoch_of(a->srv[0]));
	ps_client_destroy(as_worker0(r, p));
	assert_int_equal(pt_hello(r, 0), 0);
	assert_false(ps_client_epoch_changed(p, 0, &was, &now));
	/* Back empty: another state. */
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &f), 0);
	assert_true(epoch_of(f->srv[0]) != epoch_of(a->srv[0]));
	as_worker0(r, NULL);
	ps_client_destroy(as_worker0(f, p));
	assert_int_equal(pt_hello(f, 0), 0);
	assert_true(ps_client_epoch_changed(p, 0, &was, &now));
	assert_int_equal(was, epoch_of(a->srv[0]));
	assert_int_equal(now, epoch_of(f->srv[0]));
	ps_client_epoch_accept(p, 0);
	assert_false(ps_client_epoch_changed(p, 0, &was, &now));
	unlink(path);
	pt_cluster_destroy(a);
	pt_cluster_destroy(r);
	pt_cluster_destroy(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_barrier_restarted_worker_resumes_at_server_step),
		cmocka_unit_test(test_barrier_restart_mid_step_repeats_push_once),
		cmocka_unit_test(test_barrier_timeout_fail_names_missing),
		cmocka_unit_test(test_barrier_timeout_continue_leaves_out_and_readmits),
		cmocka_unit_test(test_barrier_fence_older_incarnation_refused),
		cmocka_unit_test(test_barrier_hello_epoch_shows_lost_state),
	};
	return cmocka_run_group_tests_name("ps_barrier", tests, NULL, NULL);
}
