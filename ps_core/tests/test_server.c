/*
 * test_server.c — the request handler end to end with the client: routing to servers and
 * shards, pull/push/push-pull, merge of duplicate keys, dense tables, and every kind of
 * bad request refused with an error reply that names it, with nothing applied.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/tests/pt_util.h"

static struct ps_table_config tabs[3];

static struct pt_cluster *mk(uint32_t servers, uint32_t shards)
{
	struct pt_cluster *c;

	tabs[0] = pt_table(1, 4, PS_OPT_SGD);
	tabs[1] = pt_table(2, 4, PS_OPT_ADAGRAD);
	tabs[2] = pt_table(3, 2, PS_OPT_SGD);
	tabs[2].kind = PS_TABLE_DENSE;
	tabs[2].dense_rows = 101;
	assert_int_equal(pt_cluster_create(servers, shards, PS_MODE_ASYNC, 2, tabs, 3, &c), 0);
	return c;
}

static void test_server_push_pull_routes_across_servers_and_shards(void **state)
{
	struct pt_cluster *c = mk(3, 4);
	uint64_t keys[500];
	float g[500 * 4], out[500 * 4];
	uint32_t i, s;
	uint64_t rows = 0;
	struct ps_table_stats st;

	(void)state;
	c->split = 7;
	for (i = 0; i < 500; i++)
		keys[i] = i * 2654435761u;
	for (i = 0; i < 500 * 4; i++)
		g[i] = (float)i;
	assert_int_equal(pt_push(c, 0, 1, 4, keys, 500, g), 0);
	/* Replies in 7-byte pieces (every row across pieces), 100-byte ones (most rows whole in
	 * a piece, some across two), and whole. */
	for (uint32_t sp = 0; sp < 3; sp++) {
		c->split = (uint32_t[]){ 7, 100, 0 }[sp];
		memset(out, 0, sizeof(out));
		assert_int_equal(pt_pull(c, 1, 1, 4, keys, 500, out), 0);
		for (i = 0; i < 500 * 4; i++)
			assert_true(fabsf(out[i] + 0.1f * (float)i) < 1e-3f * (1 + (float)i));
	}
	for (s = 0; s < 3; s++) {
		assert_int_equal(ps_server_table_stats(c->srv[s], 1, &st), 0);
		assert_true(st.rows > 100); /* every server got a share */
		rows += st.rows;
	}
	assert_int_equal(rows, 500);
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
}

static void test_server_push_pull_one_round_trip(void **state)
{
	struct pt_cluster *c = mk(2, 2);
	uint64_t keys[3] = { 5, 6, 7 };
	float g[12], out[12];
	int st = 1, i;

	(void)state;
	for (i = 0; i < 12; i++)
		g[i] = 1.0f;
	assert_int_equal(ps_client_push_pull(c->cl[0], 1, 4, keys, 3, g, out, pt_done, &st, c->msgs), 0);
	pt_deliver(c, 0);
	assert_int_equal(st, 0);
	for (i = 0; i < 12; i++)
		assert_true(fabsf(out[i] + 0.1f) < 1e-6f);
	pt_cluster_destroy(c);
}

/*
 * A key three times in a push is applied once, with the sum of its gradients; the request
 * whole and received in pieces (whole floats; floats split between pieces): the repeats'
 * gradients are added from the pieces they lie in.
 */
static void test_server_duplicate_keys_merged_before_apply(void **state)
{
	static const uint32_t splits[4] = { 0, 12, 6, 5 };
	uint64_t dup[4] = { 42, 43, 42, 42 }, one[2] = { 42, 43 };
	float g[16] = { 1, 2, 3, 4, 5, 5, 5, 5, 3, 2, 1, 0, 0.5f, 0.25f, 1, 2 };
	float gm[8] = { 4.5f, 4.25f, 5, 6, 5, 5, 5, 5 }, a[8], b[8];
	struct pt_cluster *c;

	(void)state;
	c = mk(1, 2);
	/* Adagrad is not additive: applies of g1, g2, g3 differ from one apply of their sum. */
	assert_int_equal(pt_push(c, 0, 2, 4, one, 2, gm), 0);
	assert_int_equal(pt_pull(c, 0, 2, 4, one, 2, b), 0);
	pt_cluster_destroy(c);
	for (uint32_t i = 0; i < 4; i++) {
		c = mk(1, 2);
		c->split = splits[i];
		assert_int_equal(pt_push(c, 0, 2, 4, dup, 4, g), 0);
		assert_int_equal(pt_pull(c, 0, 2, 4, one, 2, a), 0);
		assert_memory_equal(a, b, sizeof(a));
		pt_cluster_destroy(c);
	}
}

static void test_server_dense_push_pull_split_by_range(void **state)
{
	struct pt_cluster *c = mk(3, 2);
	float g[101 * 2], out[101 * 2];
	int st = 1, i;

	(void)state;
	for (i = 0; i < 202; i++)
		g[i] = (float)i;
	assert_int_equal(ps_client_dense_push(c->cl[0], 3, 2, 101, 0, 101, g, pt_done, &st, c->msgs), 0);
	pt_deliver(c, 0);
	assert_int_equal(st, 0);
	st = 1;
	assert_int_equal(ps_client_dense_pull(c->cl[1], 3, 2, 101, 10, 80, out, pt_done, &st, c->msgs), 0);
	pt_deliver(c, 1);
	assert_int_equal(st, 0);
	for (i = 0; i < 160; i++)
		assert_true(fabsf(out[i] + 0.1f * (float)(i + 20)) < 1e-3f);
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
}

/* ---- bad input: build a valid push, break one thing, expect the named error */

static uint32_t sent_len;

static void build_push(struct pt_cluster *c, uint64_t *keys, float *g)
{
	int st;
	uint32_t i;

	for (i = 0; i < 8; i++)
		keys[i] = 1000 + i;
	for (i = 0; i < 32; i++)
		g[i] = 1.0f;
	assert_int_equal(ps_client_push(c->cl[0], 1, 4, keys, 8, g, pt_done, &st, c->msgs), 0);
	sent_len = c->msgs[0].len;
}

static void expect_refused(struct pt_cluster *c, uint32_t kind, int rc)
{
	struct tl_iov iov[1];
	struct tl_msg_view v;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };
	struct ps_table_stats st;
	uint8_t *b;

	pt_view(c->msgs[0].buf, 0, iov, 1, &v);
	assert_int_equal(ps_handle(c->h[0], &v, &rep), rc);
	b = rep.buf + TL_MSG_HDR_LEN;
	assert_int_equal(rep.buf[3], PS_T_ERROR);
	assert_int_equal((int32_t)tl_ld32(b), rc);
	assert_int_equal(tl_ld32(b + 4), kind);
	assert_true(tl_ld32(rep.buf + 8) > 8); /* a text names the problem */
	assert_int_equal(ps_server_table_stats(c->srv[0], 1, &st), 0);
	assert_int_equal(st.rows, 0); /* nothing of the request applied, no row created */
}

static void test_server_refuses_bad_requests_applies_nothing(void **state)
{
	struct pt_cluster *c = mk(1, 3);
	uint64_t keys[8];
	float g[32];
	uint8_t *m;
	float nan = NAN;

	(void)state;
	m = c->msgs[0].buf;
	build_push(c, keys, g);
	tl_st32(m + 12, 77);                       /* unknown table */
	expect_refused(c, PS_ERR_UNKNOWN_TABLE, -ENOENT);
	build_push(c, keys, g);
	tl_st32(m + 12, 3);                        /* a dense table used as sparse */
	expect_refused(c, PS_ERR_UNKNOWN_TABLE, -ENOENT);
	build_push(c, keys, g);
	tl_st32(m + 28, 5);                        /* wrong dim */
	expect_refused(c, PS_ERR_WRONG_DIM, -EINVAL);
	build_push(c, keys, g);
	tl_st32(m + 24, 9);                        /* key count does not match the body */
	expect_refused(c, PS_ERR_BAD_LENGTH, -EBADMSG);
	build_push(c, keys, g);
	tl_st32(m + 8, tl_ld32(m + 8) - 4);        /* body one float short */
	expect_refused(c, PS_ERR_BAD_LENGTH, -EBADMSG);
	build_push(c, keys, g);
	tl_st32(m + 24, 100000);                   /* more keys than allowed */
	expect_refused(c, PS_ERR_BAD_LENGTH, -E2BIG);
	build_push(c, keys, g);
	memcpy(m + sent_len - 4, &nan, 4);         /* last gradient is NaN */
	expect_refused(c, PS_ERR_NOT_FINITE, -EDOM);
	build_push(c, keys, g);
	tl_st32(m + TL_MSG_HDR_LEN, 9);            /* worker id out of range */
	expect_refused(c, PS_ERR_BAD_WORKER, -EINVAL);
	build_push(c, keys, g);
	tl_st16(m + 6, 7);                         /* element type */
	expect_refused(c, PS_ERR_BAD_TYPE, -EPROTONOSUPPORT);
	build_push(c, keys, g);
	m[3] = 200;                                /* unknown type */
	expect_refused(c, PS_ERR_BAD_TYPE, -EPROTO);
	pt_cluster_destroy(c);
}

static void test_server_refuses_key_of_other_server(void **state)
{
	struct pt_cluster *c = mk(2, 1);
	uint64_t keys[4] = { 1, 2, 3, 4 };
	float g[16] = { 0 }, inf = INFINITY;
	int st = 1;
	struct tl_iov iov[1];
	struct tl_msg_view v;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };
	struct ps_table_stats ts;

	(void)state;
	assert_int_equal(ps_client_push(c->cl[0], 1, 4, keys, 4, g, pt_done, &st, c->msgs), 0);
	/* send server 1's message to server 0 */
	assert_true(c->msgs[1].len > 0);
	pt_view(c->msgs[1].buf, 0, iov, 1, &v);
	assert_int_equal(ps_handle(c->h[0], &v, &rep), -EXDEV);
	assert_int_equal(tl_ld32(rep.buf + TL_MSG_HDR_LEN + 4), PS_ERR_WRONG_SERVER);
	assert_int_equal(ps_server_table_stats(c->srv[0], 1, &ts), 0);
	assert_int_equal(ts.rows, 0);
	/* the client sees an error reply as the request's status */
	memcpy(c->msgs[0].buf + c->msgs[0].len - 4, &inf, 4);
	pt_deliver(c, 0);
	assert_int_equal(st, -EDOM);
	pt_cluster_destroy(c);
}

/*
 * Handles c->msgs[0] as a view of two pieces cut at body offset cut; the status, with the
 * reply's text checked to name value bad (when bad >= 0).
 */
static int push_in_two(struct pt_cluster *c, uint32_t cut, int bad)
{
	const uint8_t *m = c->msgs[0].buf;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };
	struct tl_iov iov[2];
	struct tl_msg_view v;
	char want[64];
	int rc;

	tl_msg_hdr_decode(m, UINT32_MAX, &v.hdr);
	iov[0] = (struct tl_iov){ m + TL_MSG_HDR_LEN, cut };
	iov[1] = (struct tl_iov){ m + TL_MSG_HDR_LEN + cut, v.hdr.body_len - cut };
	v.iov = iov;
	v.iovcnt = 2;
	rc = ps_handle(c->h[0], &v, &rep);
	if (bad >= 0) {
		snprintf(want, sizeof(want), "value %d (row %d) is not finite", bad, bad / 4);
		assert_int_equal(tl_ld32(rep.buf + TL_MSG_HDR_LEN + 4), PS_ERR_NOT_FINITE);
		assert_non_null(strstr((const char *)rep.buf + TL_MSG_HDR_LEN + 8, want));
	}
	return rc;
}

/*
 * A gradient row split between two received buffers is checked in place, piece by piece: a
 * NaN or an infinity in its second half (or in a float whose bytes are split) refuses the
 * push, naming the value, and nothing is applied.
 */
static void test_server_nonfinite_across_views_refused(void **state)
{
	struct pt_cluster *c = mk(1, 4);
	uint64_t keys[8];
	float g[8 * 4], nan = NAN, inf = -INFINITY;
	uint32_t g0 = PS_PUSH_HEAD + 8 * 8, i, cut;
	struct ps_table_stats ts;
	int st;
	uint8_t *m;

	(void)state;
	for (i = 0; i < 8; i++)
		keys[i] = 100 + i;
	for (i = 0; i < 8 * 4; i++)
		g[i] = 0.5f;
	/* Row 3 is values 12..15: the cut after value 13, the NaN at value 14. */
	assert_int_equal(ps_client_push(c->cl[0], 1, 4, keys, 8, g, pt_done, &st, c->msgs), 0);
	m = c->msgs[0].buf + TL_MSG_HDR_LEN;
	memcpy(m + g0 + 14 * 4, &nan, 4);
	assert_int_equal(push_in_two(c, g0 + 14 * 4 - 4, 14), -EDOM);
	/* The NaN's own bytes split between the two, at each place they can be. */
	for (cut = 1; cut < 4; cut++)
		assert_int_equal(push_in_two(c, g0 + 14 * 4 + cut, 14), -EDOM);
	/* The last value, an infinity, in a second piece of three bytes. */
	memcpy(m + g0 + 14 * 4, &g[14], 4);
	memcpy(m + g0 + 31 * 4, &inf, 4);
	assert_int_equal(push_in_two(c, g0 + 31 * 4 + 1, 31), -EDOM);
	assert_int_equal(push_in_two(c, g0 + 30 * 4 + 2, 31), -EDOM);
	assert_int_equal(ps_server_table_stats(c->srv[0], 1, &ts), 0);
	assert_int_equal(ts.rows, 0);
	/* All finite, cut the same ways: applied. */
	memcpy(m + g0 + 31 * 4, &g[31], 4);
	assert_int_equal(push_in_two(c, g0 + 14 * 4 + 2, -1), 0);
	assert_int_equal(ps_server_table_stats(c->srv[0], 1, &ts), 0);
	assert_int_equal(ts.rows, 8);
	pt_cluster_destroy(c);
}

static void test_server_reply_too_small_refused(void **state)
{
	struct pt_cluster *c = mk(1, 1);
	uint64_t keys[64];
	float out[64 * 4];
	int st, i;
	struct tl_iov iov[1];
	struct tl_msg_view v;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = 200 };

	(void)state;
	for (i = 0; i < 64; i++)
		keys[i] = (uint64_t)i;
	assert_int_equal(ps_client_pull(c->cl[0], 1, 4, keys, 64, out, pt_done, &st, c->msgs), 0);
	pt_view(c->msgs[0].buf, 0, iov, 1, &v);
	assert_int_equal(ps_handle(c->h[0], &v, &rep), -ENOBUFS);
	assert_int_equal(tl_ld32(rep.buf + TL_MSG_HDR_LEN + 4), PS_ERR_NO_SPACE);
	rep.cap = 16;
	assert_int_equal(ps_handle(c->h[0], &v, &rep), -ENOBUFS);
	pt_cluster_destroy(c);
}

static void test_server_config_refused_with_message(void **state)
{
	struct ps_table_config t[2] = { pt_table(1, 4, PS_OPT_SGD), pt_table(1, 8, PS_OPT_SGD) };
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 1, .n_lcores = 1, .n_workers = 1,
				       .tables = t, .n_tables = 2 };
	struct ps_server *s = NULL;
	char err[128] = "";

	(void)state;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "twice"));
	sc.n_tables = 1;
	t[0].dim = 0;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "dim"));
	t[0].dim = 4;
	t[0].op.lr = NAN;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	t[0].op.lr = 0.1f;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), 0);
	ps_server_destroy(s);
	ps_server_destroy(NULL);
	ps_handler_destroy(NULL);
	ps_client_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_push_pull_routes_across_servers_and_shards),
		cmocka_unit_test(test_server_push_pull_one_round_trip),
		cmocka_unit_test(test_server_duplicate_keys_merged_before_apply),
		cmocka_unit_test(test_server_dense_push_pull_split_by_range),
		cmocka_unit_test(test_server_refuses_bad_requests_applies_nothing),
		cmocka_unit_test(test_server_refuses_key_of_other_server),
		cmocka_unit_test(test_server_nonfinite_across_views_refused),
		cmocka_unit_test(test_server_reply_too_small_refused),
		cmocka_unit_test(test_server_config_refused_with_message),
	};
	return cmocka_run_group_tests_name("ps_server", tests, NULL, NULL);
}
