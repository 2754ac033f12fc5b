/*
 * test_geo_sgd.c — GEO-SGD's worker rules (wc_geo.c) against a plain server array that adds
 * what it is pushed: workers moving a row at once move it by one step at that sync, not by
 * one per worker; every local change is handed in exactly once over the syncs (nothing
 * doubled when a GEO-pull reply is lost, nothing dropped); a row from the server is taken
 * idempotently and keeps local steps not pushed yet.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "apps/common/wc_model.h"

/* W workers each move a parameter by 1 from the same start and sync once. */
static void test_geo_sgd_workers_moving_a_row_share_one_step(void **state)
{
	enum { W = 4 };
	float server = 0, latest[W], base[W], d;
	uint32_t w, round;

	(void)state;
	for (w = 0; w < W; w++) {
		latest[w] = base[w] = server;
		latest[w] += 1.0f;
	}
	for (w = 0; w < W; w++) {
		wc_geo_dense_send(&latest[w], &base[w], &d, 1, W);
		assert_true(d == 0.25f);
		server += d;
	}
	assert_true(server == 1.0f); /* one step, not W */
	for (w = 0; w < W; w++) {
		wc_geo_dense_recv(&latest[w], &base[w], &server, 1);
		assert_true(latest[w] == 1.75f); /* the server's, plus the 3/4 still its own */
	}
	/* the rest goes out over the next syncs: in the end each worker's step counts once */
	for (round = 0; round < 200; round++) {
		for (w = 0; w < W; w++) {
			wc_geo_dense_send(&latest[w], &base[w], &d, 1, W);
			server += d;
		}
		for (w = 0; w < W; w++)
			wc_geo_dense_recv(&latest[w], &base[w], &server, 1);
	}
	assert_true(fabsf(server - (float)W) < 1e-5f);
	for (w = 0; w < W; w++)
		assert_true(fabsf(latest[w] - server) < 1e-5f);
	/* one worker: the whole change at once, base equal to latest */
	latest[0] = 3.0f;
	base[0] = 1.0f;
	wc_geo_dense_send(&latest[0], &base[0], &d, 1, 1);
	assert_true(d == 2.0f && base[0] == 3.0f);
}

/*
 * One worker, its pushes applied by the server, some GEO-pull replies lost: what it pushed
 * plus what it still holds is exactly what it changed (nothing doubled, nothing dropped),
 * and after a reply that arrives its copy is the server's plus its own pending part.
 */
static void test_geo_sgd_lost_reply_hands_in_each_change_once(void **state)
{
	struct wc_geo *g;
	uint64_t k = 42, keys[4];
	float zero[2] = { 0, 0 }, deltas[8], server[2] = { 0, 0 }, changed = 0, pushed = 0;
	uint32_t idx, round, n;

	(void)state;
	assert_int_equal(wc_geo_create(16, 2, 2, &g), 0);
	assert_int_equal(wc_geo_recv(g, k, zero, &idx), 0);
	for (round = 0; round < 12; round++) {
		float *l = wc_geo_latest(g, idx);
		l[0] += 1.0f; /* a local step */
		l[1] -= 0.5f;
		changed += 1.0f;
		wc_geo_touch(g, idx);
		n = wc_geo_send(g, keys, deltas);
		assert_int_equal(n, 1);
		assert_true(keys[0] == k);
		server[0] += deltas[0];
		server[1] += deltas[1];
		pushed += deltas[0];
		if (round % 3 != 0) /* the GEO-pull reply: two in three arrive */
			assert_int_equal(wc_geo_recv(g, k, server, NULL), 0);
		l = wc_geo_latest(g, idx);
		assert_true(fabsf(pushed + (l[0] - server[0]) - changed) < 1e-6f);
	}
	/* nothing touched since: nothing to send */
	assert_int_equal(wc_geo_send(g, keys, deltas), 0);
	wc_geo_destroy(g);
}

static void test_geo_sgd_recv_idempotent_keeps_local_steps(void **state)
{
	struct wc_geo *g;
	float a[3] = { 1, 2, 3 }, b[3] = { 1.5f, 2, 3 }, *l;
	uint64_t keys[2];
	float deltas[6];
	uint32_t i, j;

	(void)state;
	assert_int_equal(wc_geo_create(2, 3, 2, &g), 0);
	assert_int_equal(wc_geo_recv(g, 7, a, &i), 0);
	l = wc_geo_latest(g, i);
	assert_memory_equal(l, a, sizeof(a));
	l[2] += 1.0f;                                   /* a local step, not pushed */
	wc_geo_touch(g, i);
	assert_int_equal(wc_geo_recv(g, 7, b, &j), 0);  /* someone else moved it */
	assert_int_equal(i, j);
	assert_true(l[0] == 1.5f && l[1] == 2.0f && l[2] == 4.0f);
	assert_int_equal(wc_geo_recv(g, 7, b, NULL), 0); /* the same row again: no change */
	assert_true(l[0] == 1.5f && l[1] == 2.0f && l[2] == 4.0f);
	assert_int_equal(wc_geo_send(g, keys, deltas), 1);
	assert_true(deltas[0] == 0 && deltas[1] == 0 && deltas[2] == 0.5f);
	/* full: a third key is refused, the others stay */
	assert_int_equal(wc_geo_recv(g, 8, a, NULL), 0);
	assert_int_equal(wc_geo_recv(g, 9, a, NULL), -ENOSPC);
	assert_int_equal(wc_geo_count(g), 2);
	assert_int_equal(wc_geo_find(g, 9, &i), -ENOENT);
	assert_int_equal(wc_geo_find(g, 8, &i), 0);
	wc_geo_destroy(g);
	assert_int_equal(wc_geo_create(0, 3, 2, &g), -EINVAL);
	wc_geo_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geo_sgd_workers_moving_a_row_share_one_step),
		cmocka_unit_test(test_geo_sgd_lost_reply_hands_in_each_change_once),
		cmocka_unit_test(test_geo_sgd_recv_idempotent_keeps_local_steps),
	};
	return cmocka_run_group_tests_name("common_geo_sgd", tests, NULL, NULL);
}
