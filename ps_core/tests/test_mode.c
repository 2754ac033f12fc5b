/*
 * test_mode.c — the three training modes and exactly-once: sync equals the single-process
 * sum of all workers' gradients, GEO answers only rows changed since the worker's last GEO
 * pull, async applies on arrival; injected duplicate pushes and resends after a "reconnect"
 * are applied exactly once.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

#define W 3
#define K 40
#define D 4

static void test_mode_sync_equals_single_process_sum(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_ADAGRAD);
	struct pt_cluster *c, *ref;
	uint64_t keys[K];
	float g[W][K * D], sum[K * D], before[K * D], out[K * D], want[K * D];
	uint32_t w, i, step;
	unsigned seed = 11;
	bool done;

	(void)state;
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_SYNC, W, &t, 1, &c), 0);
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, &t, 1, &ref), 0);
	for (i = 0; i < K; i++)
		keys[i] = i % 30 + 7; /* keys 7..36, ten of them twice per push */
	for (step = 0; step < 5; step++) {
		memset(sum, 0, sizeof(sum));
		assert_int_equal(pt_pull(c, 0, 1, D, keys, K, before), 0);
		for (w = 0; w < W; w++) {
			for (i = 0; i < K * D; i++) {
				g[w][i] = (float)rand_r(&seed) / RAND_MAX - 0.5f;
				sum[i] += g[w][i];
			}
			assert_int_equal(pt_push(c, w, 1, D, keys, K, g[w]), 0);
		}
		/* Nothing applied before the barrier completes. */
		assert_int_equal(pt_pull(c, 1, 1, D, keys, K, out), 0);
		assert_memory_equal(out, before, sizeof(out));
		/* done only for the last to come; asking again: done */
		assert_int_equal(pt_barrier_all(c, step), 0);
		/* The reference: one process applies the summed gradient once per step. */
		assert_int_equal(pt_push(ref, 0, 1, D, keys, K, sum), 0);
	}
	assert_int_equal(pt_pull(c, 2, 1, D, keys, K, out), 0);
	assert_int_equal(pt_pull(ref, 0, 1, D, keys, K, want), 0);
	for (i = 0; i < K * D; i++)
		assert_true(fabsf(out[i] - want[i]) < 1e-5f);
	/* a barrier for another step than the worker's is refused, by the client and the server */
	assert_int_equal(pt_barrier(c, 0, 9, &done), -EINVAL);
	assert_int_equal(pt_barrier(c, 0, 4, &done), -EINVAL);
	assert_non_null(strstr(ps_client_error(c->cl[0]), "count steps from ps_client_step"));
	assert_int_equal(c->errors, 0);
	int st = 1;
	assert_int_equal(ps_client_barrier(c->cl[0], 5, &done, pt_done, &st, c->msgs), 0);
	tl_st64(c->msgs[0].buf + TL_MSG_HDR_LEN + 8, 9);
	tl_st64(c->msgs[1].buf + TL_MSG_HDR_LEN + 8, 9);
	pt_deliver(c, 0);
	assert_int_equal(st, -EINVAL);
	assert_int_equal(c->errors, 2);
	assert_non_null(strstr(ps_client_error(c->cl[0]), "barrier for step 9 while the server is at "
			       "step 5"));
	pt_cluster_destroy(c);
	pt_cluster_destroy(ref);
}

struct geo_seen {
	bool more;
	uint32_t n;
	uint64_t keys[256];
	float rows[256][D];
};

static void geo_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct geo_seen *s = arg;

	assert_int_equal(dim, D);
	assert_true(s->n < 256);
	s->keys[s->n] = key;
	memcpy(s->rows[s->n++], row, sizeof(s->rows[0]));
}

static int geo_pull(struct pt_cluster *c, uint32_t w, struct geo_seen *s)
{
	int st = 1, rc;

	memset(s, 0, sizeof(*s));
	rc = ps_client_geo_pull(c->cl[w], 1, D, geo_row, s, &s->more, pt_done, &st, c->msgs);
	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}

static bool has_key(const struct geo_seen *s, uint64_t k)
{
	uint32_t i;

	for (i = 0; i < s->n; i++)
		if (s->keys[i] == k)
			return true;
	return false;
}

static void test_mode_geo_returns_only_changed_rows(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t a[3] = { 1, 2, 3 }, b[2] = { 3, 50 }, pulled[2] = { 900, 901 };
	float da[3 * D], db[2 * D], out[2 * D];
	struct geo_seen s;
	uint32_t i;

	(void)state;
	for (i = 0; i < 3 * D; i++)
		da[i] = 1.0f;
	for (i = 0; i < 2 * D; i++)
		db[i] = 0.5f;
	assert_int_equal(pt_cluster_create(2, 2, PS_MODE_GEO, 2, &t, 1, &c), 0);
	assert_int_equal(pt_pull(c, 0, 1, D, pulled, 2, out), 0); /* touched, not changed */
	assert_int_equal(pt_push(c, 0, 1, D, a, 3, da), 0);       /* deltas are added */
	assert_int_equal(geo_pull(c, 1, &s), 0);
	assert_int_equal(s.n, 3);
	for (i = 0; i < 3; i++) {
		assert_true(has_key(&s, a[i]));
		assert_true(s.rows[i][0] == 1.0f);
	}
	assert_int_equal(geo_pull(c, 1, &s), 0);
	assert_int_equal(s.n, 0); /* nothing changed since */
	assert_int_equal(pt_push(c, 1, 1, D, b, 2, db), 0);
	assert_int_equal(geo_pull(c, 1, &s), 0);
	assert_int_equal(s.n, 2);
	assert_true(has_key(&s, 3) && has_key(&s, 50));
	/* worker 0 never GEO-pulled: it sees every changed row, with both deltas on key 3 */
	assert_int_equal(geo_pull(c, 0, &s), 0);
	assert_int_equal(s.n, 4);
	for (i = 0; i < s.n; i++)
		if (s.keys[i] == 3)
			assert_true(s.rows[i][0] == 1.5f);
	assert_false(has_key(&s, 900));
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
}

/* Random pushes and GEO pulls of 3 workers against a plain model of "changed since". */
static void test_mode_geo_random_ops_match_model(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	enum { NK = 200, NW = 3 };
	static bool changed[NW][NK];
	static float val[NK];
	static struct geo_seen s;
	uint64_t keys[20];
	float d[20 * D];
	unsigned seed = 5;
	uint32_t op, i, j, pulls = 0;

	(void)state;
	memset(changed, 0, sizeof(changed));
	memset(val, 0, sizeof(val));
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_GEO, NW, &t, 1, &c), 0);
	for (op = 0; op < 3000; op++) {
		uint32_t w = (uint32_t)rand_r(&seed) % NW;
		if (rand_r(&seed) % 4) {
			uint32_t n = 1 + (uint32_t)rand_r(&seed) % 20;
			for (i = 0; i < n; i++) {
				keys[i] = (uint64_t)(rand_r(&seed) % NK);
				for (j = 0; j < D; j++)
					d[i * D + j] = 1.0f;
				val[keys[i]] += 1.0f;
				for (j = 0; j < NW; j++)
					changed[j][keys[i]] = true;
			}
			assert_int_equal(pt_push(c, w, 1, D, keys, n, d), 0);
			continue;
		}
		uint32_t want = 0;
		for (i = 0; i < NK; i++)
			want += changed[w][i];
		assert_int_equal(geo_pull(c, w, &s), 0);
		assert_int_equal(s.n, want);
		for (i = 0; i < s.n; i++) {
			assert_true(changed[w][s.keys[i]]);
			assert_true(s.rows[i][0] == val[s.keys[i]]);
		}
		memset(changed[w], 0, sizeof(changed[w]));
		pulls++;
	}
	assert_true(pulls > 500);
	/* the log dropped what every worker had pulled past (compaction ran) */
	for (i = 0, j = 0; i < 3; i++)
		j += c->srv[0]->shards[i].glog[0].base > 0;
	assert_true(j > 0);
	pt_cluster_destroy(c);
}

/* Sends a GEO pull of worker 0 with a reply of `cap` bytes; adds the keys to seen[]. */
static int geo_raw(struct pt_cluster *c, uint32_t cap, bool *seen, uint32_t *n, bool *more)
{
	struct geo_seen s;
	struct tl_iov iov[1];
	struct tl_msg_view v;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = cap };
	bool m;
	int st, rc;
	uint32_t i, rec = 8 + 4 * D;

	assert_int_equal(ps_client_geo_pull(c->cl[0], 1, D, geo_row, &s, &m, pt_done, &st, c->msgs), 0);
	pt_view(c->msgs[0].buf, 0, iov, 1, &v);
	c->msgs[0].len = 0;
	rc = ps_handle(c->h[0], &v, &rep);
	if (rc < 0)
		return rc;
	{
		/* the client takes the reply, so its next pull acknowledges it */
		struct tl_iov riov[1];
		struct tl_msg_view rv;
		memset(&s, 0, sizeof(s));
		pt_view(rep.buf, 0, riov, 1, &rv);
		assert_int_equal(ps_client_on_reply(c->cl[0], 0, &rv), 0);
		assert_int_equal(st, 0);
	}
	*n = tl_ld32(rep.buf + 24);
	*more = tl_ld16(rep.buf + 4) & PS_F_MORE;
	for (i = 0; i < *n; i++) {
		uint64_t k = tl_ld64(rep.buf + TL_MSG_HDR_LEN + 8 + i * rec);
		assert_false(seen[k]); /* never twice */
		seen[k] = true;
	}
	return 0;
}

static void test_mode_geo_pull_pages_when_reply_full(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t keys[20];
	float d[20 * D] = { 0 };
	bool seen[20] = { false }, more;
	uint32_t i, n, total = 0, rounds = 0;

	(void)state;
	for (i = 0; i < 20; i++)
		keys[i] = i;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_GEO, 1, &t, 1, &c), 0);
	assert_int_equal(pt_push(c, 0, 1, D, keys, 20, d), 0);
	/* a reply of 2 rows, then one of 7: pages until every row came exactly once */
	assert_int_equal(geo_raw(c, TL_MSG_HDR_LEN + 64, seen, &n, &more), 0);
	assert_int_equal(n, 2);
	assert_true(more);
	total = n;
	/* replies of 7 rows: pages until every row came exactly once */
	do {
		assert_int_equal(geo_raw(c, TL_MSG_HDR_LEN + 7 * (8 + 4 * D), seen, &n, &more), 0);
		assert_true(n <= 7);
		total += n;
		rounds++;
	} while (more && rounds < 20);
	assert_int_equal(total, 20);
	assert_true(rounds >= 3);
	{
		/* a row that cannot fit even alone: refused, not an endless "more" */
		struct ps_table_config t2 = pt_table(1, 32, PS_OPT_SGD);
		struct pt_cluster *c2;
		float d2[32] = { 0 };
		struct tl_msg_hdr hd = { .type = PS_T_GEO_PULL, .aux = PS_ELEM_F32, .table_id = 1,
					 .body_len = PS_GEO_PULL_BODY, .dim = 32 };
		uint8_t m[TL_MSG_HDR_LEN + PS_GEO_PULL_BODY] = { 0 };
		struct tl_iov iov[1];
		struct tl_msg_view v;
		struct ps_reply rep;

		assert_int_equal(pt_cluster_create(1, 1, PS_MODE_GEO, 1, &t2, 1, &c2), 0);
		assert_int_equal(pt_push(c2, 0, 1, 32, keys, 1, d2), 0);
		tl_msg_hdr_encode(m, &hd);
		pt_view(m, 0, iov, 1, &v);
		rep = (struct ps_reply){ .buf = c2->rep_buf, .cap = TL_MSG_HDR_LEN + 100 };
		assert_int_equal(ps_handle(c2->h[0], &v, &rep), -ENOBUFS);
		rep.cap = PT_BUF;
		assert_int_equal(ps_handle(c2->h[0], &v, &rep), 0);
		assert_int_equal(tl_ld32(rep.buf + 24), 1); /* still there: nothing was committed */
		pt_cluster_destroy(c2);
	}
	for (i = 0; i < 20; i++)
		assert_true(seen[i]);
	assert_int_equal(geo_raw(c, PT_BUF, seen, &n, &more), 0);
	assert_int_equal(n, 0);
	assert_false(more);
	/* the client reports "more" to its caller */
	assert_int_equal(pt_push(c, 0, 1, D, keys, 20, d), 0);
	{
		struct geo_seen gs;
		int st = 1;
		memset(&gs, 0, sizeof(gs));
		assert_int_equal(ps_client_geo_pull(c->cl[0], 1, D, geo_row, &gs, &gs.more, pt_done,
						    &st, c->msgs), 0);
		pt_deliver(c, 0);
		assert_int_equal(st, 0);
		assert_int_equal(gs.n, 20);
		assert_false(gs.more);
	}
	pt_cluster_destroy(c);
}

static void test_mode_async_applies_on_arrival(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t k = 5;
	float g[D] = { 1, 1, 1, 1 }, out[D];

	(void)state;
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 2, &t, 1, &c), 0);
	assert_int_equal(pt_push(c, 0, 1, D, &k, 1, g), 0);
	assert_int_equal(pt_pull(c, 1, 1, D, &k, 1, out), 0);
	assert_true(fabsf(out[0] + 0.1f) < 1e-6f);
	pt_cluster_destroy(c);
}

/* ---- exactly once */

struct capture {
	uint32_t n;
	uint8_t *msg[8];
	uint32_t len[8];
};

static void cap_fn(void *arg, const uint8_t *m, uint32_t len)
{
	struct capture *c = arg;

	c->msg[c->n] = malloc(len);
	memcpy(c->msg[c->n], m, len);
	c->len[c->n++] = len;
}

static void send_raw(struct pt_cluster *c, const uint8_t *m, uint32_t len, bool reply_back)
{
	struct tl_iov iov[64];
	struct tl_msg_view v, rv;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };

	(void)len;
	pt_view(m, 5, iov, 64, &v);
	assert_int_equal(ps_handle(c->h[0], &v, &rep), 0);
	if (reply_back) {
		pt_view(rep.buf, 0, iov, 64, &rv);
		ps_client_on_reply(c->cl[0], 0, &rv);
	}
}

static void test_mode_exactly_once_duplicates_and_resends(void **state)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t k = 77;
	float g[2] = { 10, 10 }, out[2];
	int st1 = 1, st2 = 1, st3 = 1;
	struct capture cap = { 0 };
	uint8_t copy[256];
	uint32_t len, i;

	(void)state;
	t.op.lr = 1.0f;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	/* 1: the network duplicates a push: applied once, the second is acknowledged only */
	assert_int_equal(ps_client_push(c->cl[0], 1, 2, &k, 1, g, pt_done, &st1, c->msgs), 0);
	len = c->msgs[0].len;
	memcpy(copy, c->msgs[0].buf, len);
	send_raw(c, copy, len, false);
	send_raw(c, copy, len, true);
	assert_int_equal(st1, 0);
	assert_int_equal(tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 8), 0); /* "duplicate" */
	/* 2: push lost before the server; 3: push applied but its ack lost. Then reconnect. */
	assert_int_equal(ps_client_push(c->cl[0], 1, 2, &k, 1, g, pt_done, &st2, c->msgs), 0);
	c->msgs[0].len = 0;
	assert_int_equal(ps_client_push(c->cl[0], 1, 2, &k, 1, g, pt_done, &st3, c->msgs), 0);
	/* keep #3's bytes: in-order streams mean #3 cannot arrive before #2 was resent,
	 * so its ack is lost after #2 was applied: simulate by resending both */
	c->msgs[0].len = 0;
	assert_int_equal(ps_client_inflight(c->cl[0]), 2);
	assert_int_equal(ps_client_resend(c->cl[0], 0, cap_fn, &cap), 2);
	send_raw(c, cap.msg[0], cap.len[0], false);   /* #2 applied, ack lost */
	send_raw(c, cap.msg[1], cap.len[1], false);   /* #3 applied, ack lost */
	for (i = 0; i < cap.n; i++)
		free(cap.msg[i]);
	cap.n = 0;
	/* second reconnect: both resent, both duplicates, both acknowledged now */
	assert_int_equal(ps_client_resend(c->cl[0], 0, cap_fn, &cap), 2);
	assert_true(tl_ld64(cap.msg[0] + TL_MSG_HDR_LEN + 8) < tl_ld64(cap.msg[1] + TL_MSG_HDR_LEN + 8));
	send_raw(c, cap.msg[0], cap.len[0], true);
	send_raw(c, cap.msg[1], cap.len[1], true);
	assert_int_equal(st2, 0);
	assert_int_equal(st3, 0);
	assert_int_equal(ps_client_inflight(c->cl[0]), 0);
	assert_int_equal(ps_client_resend(c->cl[0], 0, cap_fn, &cap), 0);
	/* a late reply of an answered request matches nothing */
	{
		struct tl_iov iov[1];
		struct tl_msg_view rv;
		pt_view(c->rep_buf, 0, iov, 1, &rv);
		assert_int_equal(ps_client_on_reply(c->cl[0], 0, &rv), -ENOENT);
	}
	for (i = 0; i < cap.n; i++)
		free(cap.msg[i]);
	/* the shard counted the duplicates it acknowledged without applying */
	{
		struct ps_shard_stats st;
		uint64_t dups = 0;
		for (i = 0; i < 2; i++) {
			assert_int_equal(ps_server_shard_stats(c->srv[0], i, &st), 0);
			dups += st.dup_pushes;
		}
		assert_int_equal(dups, 3);
		assert_int_equal(ps_server_shard_stats(c->srv[0], 2, &st), -EINVAL);
	}
	/* three accepted pushes of 10 at lr 1: exactly -30 */
	assert_int_equal(pt_pull(c, 0, 1, 2, &k, 1, out), 0);
	assert_true(out[0] == -30.0f && out[1] == -30.0f);
	pt_cluster_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mode_sync_equals_single_process_sum),
		cmocka_unit_test(test_mode_geo_returns_only_changed_rows),
		cmocka_unit_test(test_mode_geo_random_ops_match_model),
		cmocka_unit_test(test_mode_geo_pull_pages_when_reply_full),
		cmocka_unit_test(test_mode_async_applies_on_arrival),
		cmocka_unit_test(test_mode_exactly_once_duplicates_and_resends),
	};
	return cmocka_run_group_tests_name("ps_mode", tests, NULL, NULL);
}
