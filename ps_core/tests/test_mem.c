/*
 * test_mem.c — a sparse table's memory policies (ps_mem.c): pulls of unknown keys store
 * nothing, a row cap and a byte quota refuse new keys while existing rows keep being served,
 * admission by push count, eviction of rows not pushed for N steps (async pushes, sync steps,
 * GEO pulls), a checkpoint taken while rows are evicted and reused, and a crash replayed
 * from checkpoint + log to the same table as a server that never stopped. Through the real
 * ps_handle and ps_client (pt_util.h).
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

static struct ps_table_stats stats(struct pt_cluster *c, uint32_t id)
{
	struct ps_table_stats st;

	assert_int_equal(ps_server_table_stats(c->srv[0], id, &st), 0);
	return st;
}

/* A counter-like table: SGD lr 1, zeros, so a push of -g adds g. */
static struct ps_table_config counter_table(uint32_t id)
{
	struct ps_table_config t = pt_table(id, 1, PS_OPT_SGD);

	t.op.lr = 1.0f;
	return t;
}

static int push1(struct pt_cluster *c, uint32_t w, uint32_t id, uint64_t key, float add)
{
	float g = -add;

	return pt_push(c, w, id, 1, &key, 1, &g);
}

static float pull1(struct pt_cluster *c, uint32_t id, uint64_t key)
{
	float v = -99;

	assert_int_equal(pt_pull(c, 0, id, 1, &key, 1, &v), 0);
	return v;
}

/* ---- pulls */

static void test_mem_pull_of_unknown_keys_stores_nothing(void **state)
{
	struct ps_table_config t[2] = { pt_table(1, 4, PS_OPT_ADAGRAD), pt_table(2, 4, PS_OPT_SGD) };
	struct pt_cluster *c;
	uint64_t keys[100];
	float v[400], again[400], zero[400] = { 0 };
	uint32_t i;

	(void)state;
	t[0].init = PS_INIT_NORMAL;
	t[0].init_b = 0.5f;
	t[0].seed = 9;
	t[1].pull_inserts = true;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, t, 2, &c), 0);
	for (i = 0; i < 100; i++)
		keys[i] = i * 7919 + 3;
	assert_int_equal(pt_pull(c, 0, 1, 4, keys, 100, v), 0);
	assert_int_equal(stats(c, 1).rows, 0);
	assert_memory_not_equal(v, zero, sizeof(v));
	/* The values a pull gave are the ones the rows start from: a zero push keeps them. */
	assert_int_equal(pt_push(c, 0, 1, 4, keys, 100, zero), 0);
	assert_int_equal(stats(c, 1).rows, 100);
	assert_int_equal(pt_pull(c, 0, 1, 4, keys, 100, again), 0);
	assert_memory_equal(v, again, sizeof(v));
	/* pull_inserts: the old way, a pull makes the rows. */
	assert_int_equal(pt_pull(c, 0, 2, 4, keys, 100, v), 0);
	assert_int_equal(stats(c, 2).rows, 100);
	pt_cluster_destroy(c);
}

/* ---- caps */

static void test_mem_row_cap_refuses_new_keys_and_serves_the_rest(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;
	uint64_t keys[64];
	float g[64], v[64];
	uint32_t i, held = 0;
	const char *text;

	(void)state;
	t.max_rows = 16; /* 8 on each of the 2 shards */
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(stats(c, 1).rows_cap, 16);
	for (i = 0; i < 64; i++) {
		keys[i] = i + 1;
		g[i] = -1.0f;
	}
	assert_int_equal(pt_push(c, 0, 1, 1, keys, 64, g), -EDQUOT);
	assert_int_equal(tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 4), PS_ERR_TABLE_FULL);
	text = (const char *)c->rep_buf + TL_MSG_HDR_LEN + 8;
	assert_non_null(strstr(text, "table 1 is full on server 0"));
	assert_non_null(strstr(text, "48 of 64 keys new to it refused"));
	assert_int_equal(stats(c, 1).rows, 16);
	assert_int_equal(stats(c, 1).rows_refused_cap, 48);
	/* The refused keys read as new; the 16 rows took their push. */
	assert_int_equal(pt_pull(c, 0, 1, 1, keys, 64, v), 0);
	for (i = 0; i < 64; i++) {
		assert_true(v[i] == 0.0f || v[i] == 1.0f);
		held += v[i] == 1.0f;
	}
	assert_int_equal(held, 16);
	/* Existing rows keep being updated; a push of only those is not refused. */
	for (i = 0; i < 64; i++)
		if (v[i] == 1.0f)
			assert_int_equal(push1(c, 0, 1, keys[i], 2.0f), 0);
	assert_int_equal(pt_pull(c, 0, 1, 1, keys, 64, v), 0);
	for (i = 0, held = 0; i < 64; i++)
		held += v[i] == 3.0f;
	assert_int_equal(held, 16);
	assert_int_equal(stats(c, 1).rows, 16);
	pt_cluster_destroy(c);
}

static void test_mem_byte_quota_bounds_the_table(void **state)
{
	struct ps_table_config t = pt_table(1, 4, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 2, .n_lcores = 1, .n_workers = 1,
				       .tables = &t, .n_tables = 1 };
	struct ps_server *s;
	struct ps_table_stats st;
	struct pt_cluster *c;
	uint64_t keys[1000];
	float g[4000];
	uint32_t i, b;
	char err[256] = "";
	int rc;

	(void)state;
	/*
	 * 200,000 bytes a shard: 3072 rows of 32 bytes (3 chunks, 96 KiB) with their 4096-slot
	 * index (48 KiB, counted 1.5 times for a grow) fit; the next chunk does not.
	 */
	t.max_bytes = 400000;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(stats(c, 1).rows_cap, 2 * 3072);
	for (i = 0; i < 4000; i++)
		g[i] = 0.5f;
	for (b = 0; b < 20; b++) {
		for (i = 0; i < 1000; i++)
			keys[i] = ps_mix64(b * 1000 + i) | 1;
		rc = pt_push(c, 0, 1, 4, keys, 1000, g);
		assert_true(rc == 0 || rc == -EDQUOT);
		st = stats(c, 1);
		assert_true(st.bytes <= t.max_bytes);
	}
	assert_int_equal(st.rows, 2 * 3072);
	assert_int_equal(st.rows_refused_cap, 20000 - 2 * 3072);
	pt_cluster_destroy(c);
	/* A quota that does not hold one chunk per shard is refused, saying so. */
	t.max_bytes = 50000;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max_bytes 50000 leaves a shard (of 2) 25000 bytes"));
}

static void test_mem_bad_policies_refused(void **state)
{
	struct ps_table_config t = pt_table(1, 4, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 4, .n_lcores = 1, .n_workers = 1,
				       .tables = &t, .n_tables = 1 };
	struct ps_server *s;
	char err[256];

	(void)state;
	t.max_rows = 3;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max_rows 3 is below the server's 4 shards"));
	t.max_rows = 0;
	t.evict_after = 10;
	t.pull_inserts = true;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "pull_inserts"));
	t = pt_table(1, 4, PS_OPT_SGD);
	t.kind = PS_TABLE_DENSE;
	t.dense_rows = 10;
	t.admit_after = 2;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "for sparse tables"));
	t = pt_table(1, 4, PS_OPT_SGD);
	t.admit_after = PS_ADMIT_MAX + 1;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "out of range"));
}

/* ---- admission */

static void test_mem_admission_after_n_pushes(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;
	uint64_t twice[2] = { 42, 42 };
	float g[2] = { -1.0f, -1.0f };
	struct ps_table_stats st;

	(void)state;
	t.admit_after = 3;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(push1(c, 0, 1, 42, 1.0f), 0); /* dropping is no error */
	st = stats(c, 1);
	assert_int_equal(st.rows, 0);
	assert_int_equal(st.admission_pending, 1);
	assert_int_equal(st.admission_dropped, 1);
	assert_true(pull1(c, 1, 42) == 0.0f);
	/* A key twice in one push is one push of it. */
	assert_int_equal(pt_push(c, 0, 1, 1, twice, 2, g), 0);
	st = stats(c, 1);
	assert_int_equal(st.rows, 0);
	assert_int_equal(st.admission_dropped, 3);
	assert_true(pull1(c, 1, 42) == 0.0f);
	/* The third push makes the row, with that push's gradient only. */
	assert_int_equal(push1(c, 0, 1, 42, 1.0f), 0);
	st = stats(c, 1);
	assert_int_equal(st.rows, 1);
	assert_int_equal(st.admission_pending, 0);
	assert_int_equal(st.admission_admitted, 1);
	assert_true(pull1(c, 1, 42) == 1.0f);
	assert_int_equal(push1(c, 0, 1, 42, 1.0f), 0);
	assert_true(pull1(c, 1, 42) == 2.0f);
	pt_cluster_destroy(c);
}

/* An admitted key a full table refuses keeps its count: it becomes a row once there is room. */
static void test_mem_admitted_key_waits_for_room(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;

	(void)state;
	t.admit_after = 2;
	t.max_rows = 1;
	t.evict_after = 3;
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(push1(c, 0, 1, 1, 1.0f), 0);   /* step 1: key 1 counted */
	assert_int_equal(push1(c, 0, 1, 1, 1.0f), 0);   /* step 2: key 1 a row */
	assert_int_equal(push1(c, 0, 1, 2, 1.0f), 0);   /* step 3: key 2 counted */
	assert_int_equal(push1(c, 0, 1, 2, 1.0f), -EDQUOT); /* step 4: admitted, table full */
	assert_int_equal(stats(c, 1).admission_pending, 1);
	assert_true(pull1(c, 1, 2) == 0.0f);
	/* Steps 5 and 6 (keys counted once): step 6 evicts key 1, last pushed at step 2. */
	assert_int_equal(push1(c, 0, 1, 10, 1.0f), 0);
	assert_int_equal(stats(c, 1).evicted, 0);
	assert_int_equal(push1(c, 0, 1, 11, 1.0f), 0);
	assert_int_equal(stats(c, 1).evicted, 1);
	/* Step 7: key 2 becomes a row with this push. */
	assert_int_equal(push1(c, 0, 1, 2, 1.0f), 0);
	assert_true(pull1(c, 1, 2) == 1.0f);
	assert_true(pull1(c, 1, 1) == 0.0f);
	pt_cluster_destroy(c);
}

/* ---- eviction */

static void test_mem_eviction_after_n_pushes(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;
	struct ps_table_stats st;
	uint32_t s;

	(void)state;
	t.evict_after = 4; /* checked every step */
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(push1(c, 0, 1, 7, 1.0f), 0);      /* step 1 */
	for (s = 2; s <= 5; s++)
		assert_int_equal(push1(c, 0, 1, 8, 1.0f), 0); /* steps 2..5: key 7 is 4 steps old */
	assert_int_equal(stats(c, 1).rows, 2);
	assert_true(pull1(c, 1, 7) == 1.0f);
	assert_int_equal(push1(c, 0, 1, 8, 1.0f), 0);      /* step 6: 5 steps old, dropped */
	st = stats(c, 1);
	assert_int_equal(st.rows, 1);
	assert_int_equal(st.evicted, 1);
	assert_true(pull1(c, 1, 7) == 0.0f);
	assert_true(pull1(c, 1, 8) == 5.0f);
	/* Back again: a new row from its initializer (in the evicted row's place). */
	assert_int_equal(push1(c, 0, 1, 7, 1.0f), 0);
	assert_true(pull1(c, 1, 7) == 1.0f);
	assert_int_equal(stats(c, 1).rows, 2);
	assert_int_equal(c->srv[0]->shards[0].tables[0].n_rows, 2);
	pt_cluster_destroy(c);
}

static void test_mem_eviction_counts_sync_steps(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;
	uint64_t step;

	(void)state;
	t.evict_after = 2;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_SYNC, 2, &t, 1, &c), 0);
	for (step = 0; step < 6; step++) {
		/* Key 1 in step 0 only; key 2 every step, pushed by both workers. */
		if (step == 0)
			assert_int_equal(push1(c, 0, 1, 1, 1.0f), 0);
		assert_int_equal(push1(c, 0, 1, 2, 1.0f), 0);
		assert_int_equal(push1(c, 1, 1, 2, 1.0f), 0);
		assert_int_equal(pt_barrier_all(c, step), 0); /* both arrive, both see it done */
		/* After step s: key 1 is s + 1 steps old, dropped once that is more than 2. */
		assert_int_equal(stats(c, 1).rows, step < 2 ? 2 : 1);
	}
	assert_true(pull1(c, 1, 1) == 0.0f);
	assert_true(pull1(c, 1, 2) == 12.0f);
	pt_cluster_destroy(c);
}

struct geo_seen {
	uint64_t keys[16];
	uint32_t n;
};

static void geo_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct geo_seen *s = arg;

	(void)row;
	(void)dim;
	if (s->n < 16)
		s->keys[s->n++] = key;
}

static void test_mem_geo_pull_skips_evicted_rows(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *c;
	struct geo_seen seen = { { 0 }, 0 };
	bool more = false;
	int st = 1;

	(void)state;
	t.evict_after = 1;
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_GEO, 2, &t, 1, &c), 0);
	assert_int_equal(push1(c, 0, 1, 5, 1.0f), 0); /* step 1: logged as changed */
	assert_int_equal(push1(c, 0, 1, 6, 1.0f), 0); /* step 2 */
	assert_int_equal(push1(c, 0, 1, 6, 1.0f), 0); /* step 3: key 5 dropped */
	assert_int_equal(stats(c, 1).evicted, 1);
	assert_int_equal(ps_client_geo_pull(c->cl[1], 1, 1, geo_row, &seen, &more, pt_done, &st,
					    c->msgs), 0);
	pt_deliver(c, 1);
	assert_int_equal(st, 0);
	assert_int_equal(seen.n, 1);
	assert_true(seen.keys[0] == 6);
	pt_cluster_destroy(c);
}

/* ---- checkpoints and the log */

static char dir[128];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ps_mem_test_%d", (int)getpid());
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return mkdir(dir, 0755);
}

static int teardown_dir(void **state)
{
	(void)state;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* Every policy at once: a cap, admission at 2 pushes, eviction after 6 steps. */
static struct ps_table_config policed(void)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_ADAGRAD);

	t.init = PS_INIT_UNIFORM;
	t.init_a = -0.1f;
	t.init_b = 0.1f;
	t.max_rows = 16;
	t.admit_after = 2;
	t.evict_after = 6;
	return t;
}

/*
 * Step s of a long-tail stream: 6 head keys every step, 2 keys new at step s and pushed
 * again at s + 1 (admitted then), and 3 keys seen once (never admitted).
 */
#define STREAM_KEYS 13
#define SEEN_MAX 2000

static uint64_t seen_keys[SEEN_MAX];
static uint32_t n_seen;

static void stream_step(struct pt_cluster *c, uint32_t s, bool note, bool tail)
{
	uint64_t keys[STREAM_KEYS];
	float g[STREAM_KEYS * 2];
	uint32_t i, n = 0;
	int rc;

	for (i = 0; i < 6; i++)
		keys[n++] = 1000 + i;
	for (i = 0; tail && i < 2; i++) {
		keys[n++] = 5000 + 2 * s + i;
		keys[n++] = 5000 + 2 * (s - 1) + i;
	}
	for (i = 0; tail && i < 3; i++)
		keys[n++] = 900000 + s * 3 + i;
	for (i = 0; i < STREAM_KEYS * 2; i++)
		g[i] = (float)((i * 5 + s) % 7) * 0.1f - 0.3f;
	rc = pt_push(c, 0, 1, 2, keys, n, g);
	assert_true(rc == 0 || rc == -EDQUOT);
	for (i = 0; note && i < n && n_seen < SEEN_MAX; i++)
		seen_keys[n_seen++] = keys[i];
}

static void pull_seen(struct pt_cluster *c, float *out)
{
	for (uint32_t i = 0; i < n_seen; i += 500)
		assert_int_equal(pt_pull(c, 0, 1, 2, seen_keys + i, n_seen - i < 500 ? n_seen - i : 500,
					 out + 2 * i), 0);
}

static void test_mem_replay_rebuilds_the_same_table(void **state)
{
	struct ps_table_config t = policed();
	struct pt_cluster *a, *ref;
	struct ps_recover_stats rs;
	struct ps_table_stats sa, sr;
	char wal[PATH_MAX], ckpt[PATH_MAX], err[256] = "";
	static float va[2 * SEEN_MAX], vr[2 * SEEN_MAX];
	uint64_t rows;
	uint32_t s;
	int done = 1;

	(void)state;
	n_seen = 0;
	pt_wal_paths(dir, 0, wal, ckpt, sizeof(wal));
	assert_int_equal(pt_cluster_create_wal(1, 2, PS_MODE_ASYNC, 1, &t, 1, dir, 0, &a), 0);
	assert_int_equal(ps_recover(a->h[0], ckpt, &rs, err, sizeof(err)), 0);
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &ref), 0);
	for (s = 1; s <= 60; s++) {
		stream_step(a, s, true, true);
		stream_step(ref, s, false, true);
		if (s == 25)
			assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	}
	/* Crash: no save at the end. The replacement loads the checkpoint and replays the log. */
	pt_cluster_destroy(a);
	assert_int_equal(pt_cluster_create_wal(1, 2, PS_MODE_ASYNC, 1, &t, 1, dir, 0, &a), 0);
	assert_int_equal(ps_recover(a->h[0], ckpt, &rs, err, sizeof(err)), 0);
	assert_true(rs.ckpt_loaded);
	assert_int_equal(rs.records, 35);
	assert_int_equal(ps_client_hello(a->cl[0], pt_done, &done, a->msgs), 0);
	pt_deliver(a, 0);
	assert_int_equal(done, 0);
	/* Both go on alike: the same ages and counts, so the same evictions and admissions. */
	for (s = 61; s <= 80; s++) {
		stream_step(a, s, true, true);
		stream_step(ref, s, false, true);
	}
	sa = stats(a, 1);
	sr = stats(ref, 1);
	assert_true(sr.rows_refused_cap > 0 && sr.admission_admitted > 0 && sr.evicted > 0 &&
		    sr.admission_dropped > 0 && sr.admission_expired > 0);
	assert_int_equal(sa.rows, sr.rows);
	assert_int_equal(sa.admission_pending, sr.admission_pending);
	pull_seen(a, va);
	pull_seen(ref, vr);
	assert_memory_equal(va, vr, 2 * n_seen * sizeof(float));
	pt_cluster_destroy(a);
	pt_cluster_destroy(ref);
}

/*
 * A checkpoint begun before rows are evicted and their places reused holds the rows of its
 * cut: each row and counter is copied before it changes.
 */
static void test_mem_checkpoint_during_evictions_holds_the_cut(void **state)
{
	struct ps_table_config t = policed();
	struct pt_cluster *a, *b;
	struct ps_save_job *j;
	struct ps_table_stats cut;
	char path[PATH_MAX], err[256] = "";
	static float at_cut[2 * SEEN_MAX], loaded[2 * SEEN_MAX];
	uint64_t rows;
	uint32_t s;

	(void)state;
	n_seen = 0;
	snprintf(path, sizeof(path), "%s/cut.ckpt", dir);
	t.max_rows = 0;
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, &t, 1, &a), 0);
	for (s = 1; s <= 10; s++)
		stream_step(a, s, true, true);
	/* Head keys only: tail rows and counters age out, their places free at the cut. */
	for (s = 11; s <= 14; s++)
		stream_step(a, s, false, false);
	assert_true(a->srv[0]->shards[0].tables[0].n_free > 0);
	assert_true(a->srv[0]->shards[0].tables[0].pend->n_free > 0);
	cut = stats(a, 1);
	pull_seen(a, at_cut);
	assert_int_equal(ps_save_start(a->h[0], path, &j, err, sizeof(err)), 0);
	/* No copy made yet: these pushes evict rows of the cut and take their places. */
	for (s = 30; s <= 45; s++)
		stream_step(a, s, false, true);
	assert_true(stats(a, 1).evicted > 0);
	assert_true(a->srv[0]->shards[0].tables[0].n_free < stats(a, 1).evicted); /* reused */
	while (!ps_save_copied(j))
		ps_handler_poll(a->h[0]);
	assert_int_equal(ps_save_write(j, &rows, err, sizeof(err)), 0);
	ps_save_free(j);
	assert_int_equal(rows, cut.rows);
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, &t, 1, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	assert_int_equal(stats(b, 1).rows, cut.rows);
	assert_int_equal(stats(b, 1).admission_pending, cut.admission_pending);
	pull_seen(b, loaded);
	assert_memory_equal(at_cut, loaded, 2 * n_seen * sizeof(float));
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
}

/* Counts (and steps) of keys not admitted yet are in the checkpoint. */
static void test_mem_admission_counts_survive_a_checkpoint(void **state)
{
	struct ps_table_config t = counter_table(1);
	struct pt_cluster *a, *b;
	char path[PATH_MAX], err[256] = "";
	uint64_t rows;
	int done = 1;

	(void)state;
	snprintf(path, sizeof(path), "%s/adm.ckpt", dir);
	t.admit_after = 3;
	t.evict_after = 8;
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &a), 0);
	assert_int_equal(push1(a, 0, 1, 42, 1.0f), 0);
	assert_int_equal(push1(a, 0, 1, 42, 1.0f), 0);
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(rows, 0);
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	assert_int_equal(stats(b, 1).admission_pending, 1);
	assert_int_equal(ps_client_hello(b->cl[0], pt_done, &done, b->msgs), 0);
	pt_deliver(b, 0);
	assert_int_equal(push1(b, 0, 1, 42, 1.0f), 0); /* the third push: a row */
	assert_true(pull1(b, 1, 42) == 1.0f);
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mem_pull_of_unknown_keys_stores_nothing),
		cmocka_unit_test(test_mem_row_cap_refuses_new_keys_and_serves_the_rest),
		cmocka_unit_test(test_mem_byte_quota_bounds_the_table),
		cmocka_unit_test(test_mem_bad_policies_refused),
		cmocka_unit_test(test_mem_admission_after_n_pushes),
		cmocka_unit_test(test_mem_admitted_key_waits_for_room),
		cmocka_unit_test(test_mem_eviction_after_n_pushes),
		cmocka_unit_test(test_mem_eviction_counts_sync_steps),
		cmocka_unit_test(test_mem_geo_pull_skips_evicted_rows),
		cmocka_unit_test_setup_teardown(test_mem_replay_rebuilds_the_same_table, setup_dir,
						teardown_dir),
		cmocka_unit_test_setup_teardown(test_mem_checkpoint_during_evictions_holds_the_cut,
						setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_mem_admission_counts_survive_a_checkpoint,
						setup_dir, teardown_dir),
	};
	return cmocka_run_group_tests_name("ps_mem", tests, NULL, NULL);
}
