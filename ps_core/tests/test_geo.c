/*
 * test_geo.c — GEO under faults: a GEO-pull reply lost on its way is served again (the
 * worker's position moves only when its next pull acknowledges the reply), the change log
 * and the positions survive a checkpoint and a log replay, positions past 2^32 changes, and
 * a worker that never pulls (dead) neither grows the log past its bound nor stops its
 * trimming: it gets a full resync of the rows instead; a row evicted by the memory policies
 * leaves a hole in a restored log; an older process of a worker id is fenced from GEO pulls.
 */
#include <errno.h>
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

#define D 2
#define MAXR 20000

struct seen {
	bool more;
	uint32_t n;
	uint64_t *keys;
	float *rows;
};

static void on_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct seen *s = arg;

	assert_int_equal(dim, D);
	assert_true(s->n < MAXR);
	s->keys[s->n] = key;
	memcpy(s->rows + (size_t)s->n * D, row, D * sizeof(float));
	s->n++;
}

static struct seen *seen_new(void)
{
	struct seen *s = calloc(1, sizeof(*s));

	s->keys = malloc(MAXR * sizeof(*s->keys));
	s->rows = malloc(MAXR * D * sizeof(float));
	return s;
}

static void seen_free(struct seen *s)
{
	free(s->keys);
	free(s->rows);
	free(s);
}

/* One GEO pull of worker w delivered whole; rows appended to s. Returns the status. */
static int geo_pull(struct pt_cluster *c, uint32_t w, struct seen *s)
{
	int st = 1, rc = ps_client_geo_pull(c->cl[w], 1, D, on_row, s, &s->more, pt_done, &st,
					    c->msgs);

	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}

/* GEO pulls of worker w until no server says "more"; s cleared first. */
static void geo_pull_all(struct pt_cluster *c, uint32_t w, struct seen *s)
{
	uint32_t rounds = 0;

	s->n = 0;
	do
		assert_int_equal(geo_pull(c, w, s), 0);
	while (s->more && ++rounds < 1000);
}

/* A GEO pull of worker w that reaches every server, whose replies are lost with the
 * connection: the glue then forgets the request (ps_client_forget_dest). */
static void geo_pull_lost(struct pt_cluster *c, uint32_t w)
{
	struct tl_iov iov[1];
	struct tl_msg_view v;
	struct seen s = { 0 };
	int st = 1;
	uint32_t i;

	assert_int_equal(ps_client_geo_pull(c->cl[w], 1, D, on_row, &s, &s.more, pt_done, &st,
					    c->msgs), 0);
	for (i = 0; i < c->n_servers; i++) {
		struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };
		pt_view(c->msgs[i].buf, 0, iov, 1, &v);
		c->msgs[i].len = 0;
		assert_int_equal(ps_handle(c->h[i], &v, &rep), 0);
		assert_int_equal(rep.buf[3], PS_T_GEO_PULL_R);
		assert_int_equal(ps_client_forget_dest(c->cl[w], i, -ECONNRESET), 1);
	}
	assert_int_equal(st, -ECONNRESET);
}

static bool has(const struct seen *s, uint64_t key, float v)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->keys[i] == key)
			return s->rows[(size_t)i * D] == v;
	return false;
}

static void push_keys(struct pt_cluster *c, uint32_t w, uint64_t first, uint32_t n, float v)
{
	uint64_t *k = malloc(n * sizeof(*k));
	float *d = malloc((size_t)n * D * sizeof(float));

	for (uint32_t i = 0; i < n; i++) {
		k[i] = first + i;
		d[i * D] = d[i * D + 1] = v;
	}
	assert_int_equal(pt_push(c, w, 1, D, k, n, d), 0);
	free(k);
	free(d);
}

static void test_geo_lost_reply_served_again(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	uint32_t i;

	(void)state;
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_GEO, 2, &t, 1, &c), 0);
	push_keys(c, 0, 10, 5, 1.0f);
	/* worker 1's reply is lost: its next pull gets the same rows */
	geo_pull_lost(c, 1);
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 5);
	for (i = 0; i < 5; i++)
		assert_true(has(s, 10 + i, 1.0f));
	/* taken and acknowledged: nothing again */
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 0);
	/* a change after a lost reply comes with the rows of the lost one, at its new value */
	push_keys(c, 0, 12, 4, 0.5f);                  /* keys 12..15: 12..14 again, 15 new */
	geo_pull_lost(c, 1);
	push_keys(c, 0, 14, 1, 0.25f);                 /* changed after the lost reply */
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 4);
	assert_true(has(s, 12, 1.5f) && has(s, 13, 1.5f) && has(s, 14, 1.75f) && has(s, 15, 0.5f));
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 0);
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
	seen_free(s);
}

/*
 * A worker restarted under its id: its old process, still running, is refused GEO pulls
 * (-ESTALE), so it cannot acknowledge rows and move the position its successor reads from.
 */
static void test_geo_pull_fenced_by_incarnation(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct ps_client_config cc = { .worker_id = 1, .n_servers = 2, .max_keys = 8192,
				       .incarnation = 7 };
	struct pt_cluster *c;
	struct ps_client *old, *young;
	struct seen *s = seen_new();
	uint32_t i;

	(void)state;
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_GEO, 2, &t, 1, &c), 0);
	pt_client_restart(c, 1, 5);
	assert_int_equal(pt_hello(c, 1), 0);
	push_keys(c, 0, 10, 5, 1.0f);
	old = c->cl[1];
	assert_int_equal(ps_client_create(&cc, &young), 0);
	c->cl[1] = young;
	assert_int_equal(pt_hello(c, 1), 0); /* the successor says hello: the id is its now */
	c->cl[1] = old;
	for (i = 0; i < 2; i++) { /* the second would acknowledge the first's rows */
		s->n = 0;
		assert_int_equal(geo_pull(c, 1, s), -ESTALE);
		assert_int_equal(s->n, 0);
	}
	c->cl[1] = young;
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 5);
	for (i = 0; i < 5; i++)
		assert_true(has(s, 10 + i, 1.0f));
	ps_client_destroy(old);
	pt_cluster_destroy(c);
	seen_free(s);
}

/* A reply that filled up (more to come) and was lost: the page is served again. */
static void test_geo_lost_page_served_again(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	bool got[40] = { false };
	uint32_t i, rounds = 0, lost = 0;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_GEO, 1, &t, 1, &c), 0);
	push_keys(c, 0, 0, 40, 1.0f);
	/* replies of at most 6 records (16 bytes each): every other one is lost */
	do {
		struct ps_reply rep = { .buf = c->rep_buf, .cap = TL_MSG_HDR_LEN + 8 + 6 * 16 };
		struct tl_iov iov[1];
		struct tl_msg_view v, rv;
		int st = 1;
		s->n = 0;
		s->more = false;
		assert_int_equal(ps_client_geo_pull(c->cl[0], 1, D, on_row, s, &s->more, pt_done,
						    &st, c->msgs), 0);
		pt_view(c->msgs[0].buf, 0, iov, 1, &v);
		c->msgs[0].len = 0;
		assert_int_equal(ps_handle(c->h[0], &v, &rep), 0);
		if (rounds++ % 2 == 0) {
			ps_client_forget_dest(c->cl[0], 0, -ECONNRESET);
			lost++;
			s->more = true;
			continue;
		}
		pt_view(rep.buf, 0, iov, 1, &rv);
		assert_int_equal(ps_client_on_reply(c->cl[0], 0, &rv), 0);
		assert_int_equal(st, 0);
		for (i = 0; i < s->n; i++) {
			assert_false(got[s->keys[i]]); /* each row once, across lost pages */
			got[s->keys[i]] = true;
		}
	} while (s->more && rounds < 100);
	for (i = 0; i < 40; i++)
		assert_true(got[i]);
	assert_true(lost >= 7);
	pt_cluster_destroy(c);
	seen_free(s);
}

static char *tmpdir(void)
{
	char *d = strdup("/tmp/wharf-test-geo-XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rmdir_all(const char *d)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

/* A server stopped and started from its checkpoint: the log and the positions come back. */
static void test_geo_state_survives_checkpoint(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	char *dir = tmpdir(), path[300];
	uint64_t rows;
	char err[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/geo.ckpt", dir);
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_GEO, 3, &t, 1, &c), 0);
	push_keys(c, 0, 100, 3, 1.0f);                 /* A: 100..102 */
	geo_pull_all(c, 1, s);                          /* worker 1 takes A ... */
	assert_int_equal(s->n, 3);
	push_keys(c, 0, 200, 2, 2.0f);                 /* B: 200, 201 */
	geo_pull_lost(c, 1);                            /* ... acknowledges it, B's reply lost */
	assert_int_equal(ps_save(c->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_server_restart(c, 0, 0, path), 0);
	/* worker 1: B, and not A again; worker 2 (never pulled): A and B */
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 2);
	assert_true(has(s, 200, 2.0f) && has(s, 201, 2.0f));
	geo_pull_all(c, 2, s);
	assert_int_equal(s->n, 5);
	assert_true(has(s, 100, 1.0f) && has(s, 201, 2.0f));
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 0);
	/* saved again and loaded into 3 shards (another layout): everyone gets every row once */
	assert_int_equal(ps_save(c->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_server_restart(c, 0, 3, path), 0);
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 5);
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 0);
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
	rmdir_all(dir);
	free(dir);
	seen_free(s);
}

/* Killed after a checkpoint: the log replayed after it comes back in the change log. */
static void test_geo_log_replay_after_checkpoint(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	char *dir = tmpdir(), wal[300], ckpt[300];
	uint64_t rows;
	char err[256];

	(void)state;
	assert_int_equal(pt_cluster_create_wal(1, 2, PS_MODE_GEO, 3, &t, 1, dir, 0, &c), 0);
	pt_wal_paths(dir, 0, wal, ckpt, sizeof(wal));
	assert_int_equal(pt_server_restart(c, 0, 0, NULL), 0); /* a log: recover first */
	push_keys(c, 0, 1, 4, 1.0f);                    /* A: 1..4 */
	geo_pull_all(c, 1, s);
	geo_pull_all(c, 1, s);                           /* worker 1 acknowledged A */
	assert_int_equal(s->n, 0);
	assert_int_equal(ps_save(c->h[0], ckpt, &rows, err, sizeof(err)), 0);
	push_keys(c, 0, 3, 4, 1.0f);                    /* after the cut, logged: 3..6 */
	assert_int_equal(pt_server_restart(c, 0, 0, ckpt), 0);  /* killed: no save */
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 4);
	assert_true(has(s, 3, 2.0f) && has(s, 4, 2.0f) && has(s, 5, 1.0f) && has(s, 6, 1.0f));
	geo_pull_all(c, 2, s);
	assert_int_equal(s->n, 6);
	assert_true(has(s, 1, 1.0f) && has(s, 2, 1.0f) && has(s, 4, 2.0f) && has(s, 6, 1.0f));
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
	rmdir_all(dir);
	free(dir);
	seen_free(s);
}

/*
 * A row evicted (memory policies) while the log still names it: the checkpoint's log entry
 * finds no row on load and stays a hole, never served; the rest of the log comes back.
 */
static void test_geo_checkpoint_with_evicted_row(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	char *dir = tmpdir(), path[300], err[256];
	uint64_t rows;

	(void)state;
	t.evict_after = 1;
	snprintf(path, sizeof(path), "%s/geo.ckpt", dir);
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_GEO, 2, &t, 1, &c), 0);
	push_keys(c, 0, 5, 1, 1.0f);                    /* step 1: key 5 logged */
	push_keys(c, 0, 6, 1, 1.0f);                    /* step 2: key 6 logged */
	push_keys(c, 0, 6, 1, 1.0f);                    /* step 3: key 5 evicted */
	assert_int_equal(ps_save(c->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_server_restart(c, 0, 0, path), 0);
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 1);
	assert_true(has(s, 6, 2.0f));
	push_keys(c, 0, 5, 1, 0.5f);                    /* back as a new row */
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 1);
	assert_true(has(s, 5, 0.5f));
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
	rmdir_all(dir);
	free(dir);
	seen_free(s);
}

/* Positions near 2^32: random pushes and pulls cross it, checked against a plain model. */
static void test_geo_positions_past_2_32(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	enum { NK = 64, NW = 2 };
	bool changed[NW][NK];
	float val[NK];
	uint64_t start = (1ull << 32) - 40, keys[8];
	float d[8 * D];
	unsigned seed = 9;
	uint32_t op, i, j, sh, w;

	(void)state;
	memset(changed, 0, sizeof(changed));
	memset(val, 0, sizeof(val));
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_GEO, NW, &t, 1, &c), 0);
	for (sh = 0; sh < 2; sh++) {
		struct ps_shard *x = &c->srv[0]->shards[sh];
		x->glog[0].base = x->glog[0].max_pos = start;
		for (w = 0; w < NW; w++)
			x->geo[w].seen.pos = x->geo[w].pend.pos = start;
	}
	for (op = 0; op < 2000; op++) {
		w = (uint32_t)rand_r(&seed) % NW;
		if (rand_r(&seed) % 3) {
			uint32_t n = 1 + (uint32_t)rand_r(&seed) % 8;
			for (i = 0; i < n; i++) {
				keys[i] = (uint64_t)(rand_r(&seed) % NK);
				d[i * D] = d[i * D + 1] = 1.0f;
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
		geo_pull_all(c, w, s);
		assert_int_equal(s->n, want);
		for (i = 0; i < s->n; i++) {
			assert_true(changed[w][s->keys[i]]);
			assert_true(s->rows[(size_t)i * D] == val[s->keys[i]]);
		}
		memset(changed[w], 0, sizeof(changed[w]));
	}
	/* the logs went past 2^32 */
	for (sh = 0; sh < 2; sh++)
		assert_true(c->srv[0]->shards[sh].glog[0].base + c->srv[0]->shards[sh].glog[0].n >
			    (1ull << 32) + 100);
	pt_cluster_destroy(c);
	seen_free(s);
}

static uint64_t geo_log_entries(struct ps_server *srv, uint32_t shards, uint64_t *resyncs)
{
	struct ps_shard_stats st;
	uint64_t n = 0;

	*resyncs = 0;
	for (uint32_t i = 0; i < shards; i++) {
		assert_int_equal(ps_server_shard_stats(srv, i, &st), 0);
		n += st.geo_log;
		*resyncs += st.geo_resyncs;
	}
	return n;
}

/*
 * Worker 1 never pulls (dead) while worker 0 keeps changing and pulling the same rows: the
 * log stays within its bound and is trimmed to worker 0; worker 1, back, gets a full resync:
 * every row once, at its current value; then only changes.
 */
static void test_geo_dead_worker_bounded_then_resync(void **state)
{
	struct ps_table_config t = pt_table(1, D, PS_OPT_SGD);
	struct pt_cluster *c;
	struct seen *s = seen_new();
	uint64_t resyncs, most = 0, n;
	bool got[3000];
	uint32_t round, i;

	(void)state;
	pt_geo_log_max = 8192; /* the pt servers' max_keys: the smallest bound allowed */
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_GEO, 2, &t, 1, &c), 0);
	pt_geo_log_max = 0;
	for (round = 0; round < 30; round++) {
		push_keys(c, 0, 0, 3000, 1.0f);         /* every row of the table changes */
		geo_pull_all(c, 0, s);
		assert_int_equal(s->n, 3000);
		n = geo_log_entries(c->srv[0], 2, &resyncs);
		if (n > most)
			most = n;
	}
	/* 30 x 3000 changes, never more than the bound per shard, never a resync for worker 0 */
	assert_true(most <= 2 * 8192);
	assert_int_equal(resyncs, 0);
	/* trimmed to worker 0 (acknowledged: one more pull) */
	geo_pull_all(c, 0, s);
	assert_int_equal(s->n, 0);
	assert_true(geo_log_entries(c->srv[0], 2, &resyncs) < 3000 + 2 * 1024);
	/* worker 1 comes back: every row, once, at its value */
	memset(got, 0, sizeof(got));
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 3000);
	for (i = 0; i < s->n; i++) {
		assert_true(s->keys[i] < 3000 && !got[s->keys[i]]);
		got[s->keys[i]] = true;
		assert_true(s->rows[(size_t)i * D] == 30.0f);
	}
	geo_log_entries(c->srv[0], 2, &resyncs);
	assert_int_equal(resyncs, 2); /* one per shard */
	/* then only what changed */
	push_keys(c, 0, 5, 3, 1.0f);
	geo_pull_all(c, 1, s);
	assert_int_equal(s->n, 3);
	assert_true(has(s, 5, 31.0f) && has(s, 7, 31.0f));
	/* a bound below one request's keys is refused */
	{
		struct ps_server_config sc = { .n_servers = 1, .n_shards = 1, .n_lcores = 1,
			.n_workers = 1, .mode = PS_MODE_GEO, .max_keys = 8192, .tables = &t,
			.n_tables = 1, .geo_log_max = 4096 };
		struct ps_server *bad = NULL;
		char err[256] = "";
		assert_int_equal(ps_server_create(&sc, &bad, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "GEO log of 4096 entries"));
	}
	pt_cluster_destroy(c);
	seen_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geo_lost_reply_served_again),
		cmocka_unit_test(test_geo_pull_fenced_by_incarnation),
		cmocka_unit_test(test_geo_lost_page_served_again),
		cmocka_unit_test(test_geo_state_survives_checkpoint),
		cmocka_unit_test(test_geo_log_replay_after_checkpoint),
		cmocka_unit_test(test_geo_checkpoint_with_evicted_row),
		cmocka_unit_test(test_geo_positions_past_2_32),
		cmocka_unit_test(test_geo_dead_worker_bounded_then_resync),
	};
	return cmocka_run_group_tests_name("ps_geo", tests, NULL, NULL);
}
