/*
 * test_table.c — the sparse table's open-addressing index (insert, find, a pull's batch
 * find, incremental grow, collisions, adversarial keys), its row initializers and its per-row overhead.
 * Drives ps_table.c directly (internals from ps_pvt.h); no EAL.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

static void lookup_keys(struct ps_table *t, const uint64_t *keys, uint32_t n, uint32_t *rows)
{
	struct ps_keys k = { .arr = keys };

	assert_int_equal(ps_table_reserve(t, n), 0);
	ps_table_lookup_batch(t, &k, n, rows, NULL);
}

/*
 * A pull's batch find (its prefetch pipeline) against one find per key: the last keys
 * looked up, each beside a key that is likely absent, so that found and missing keys mix.
 */
static void check_find_batch(const struct ps_table *t, const uint64_t *keys, uint32_t n)
{
	enum { Q = 600 };
	uint64_t q[Q];
	uint32_t rows[Q], m = 0, i;
	struct ps_keys k = { .arr = q };

	for (i = n > Q / 2 ? n - Q / 2 : 0; i < n; i++) {
		q[m++] = keys[i];
		q[m++] = keys[i] ^ 0x8000000000000001ull;
	}
	ps_table_find_batch(t, &k, m, rows);
	for (i = 0; i < m; i++)
		assert_int_equal(rows[i], ps_table_find(t, q[i]));
}

static void check_all(struct ps_table *t, const uint64_t *keys, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint32_t r = ps_table_find(t, keys[i]);
		assert_int_not_equal(r, UINT32_MAX);
		assert_true(ps_row_meta(t, r)->key == keys[i]);
	}
	check_find_batch(t, keys, n);
}

static void run_keys(const uint64_t *keys, uint32_t n, uint32_t batch)
{
	struct ps_table_config cfg = pt_table(1, 4, PS_OPT_SGD);
	struct ps_table t;
	uint32_t *rows = malloc(batch * sizeof(*rows)), i, j;
	bool saw_migration = false;

	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	for (i = 0; i < n; i += batch) {
		uint32_t m = n - i < batch ? n - i : batch;
		lookup_keys(&t, keys + i, m, rows);
		saw_migration |= t.old != NULL;
		/* Every key so far is findable, also while the old index is being moved. */
		if ((i / batch) % 16 == 0)
			check_all(&t, keys, i + m);
	}
	assert_int_equal(t.n_rows, n);
	check_all(&t, keys, n);
	/* A second lookup of every key returns the same row and creates none. */
	for (i = 0; i < n; i += batch) {
		uint32_t m = n - i < batch ? n - i : batch;
		lookup_keys(&t, keys + i, m, rows);
		for (j = 0; j < m; j++)
			assert_int_equal(rows[j], ps_table_find(&t, keys[i + j]));
	}
	assert_int_equal(t.n_rows, n);
	assert_true(n < 2000 || saw_migration);
	assert_true((uint64_t)t.n_rows * 4 <= ((uint64_t)t.mask + 1) * 3);
	ps_table_fini(&t);
	free(rows);
}

static void test_table_insert_find_grow(void **state)
{
	uint32_t n = 200000, i;
	uint64_t *keys = malloc(n * sizeof(*keys));

	(void)state;
	for (i = 0; i < n; i++)
		keys[i] = ps_mix64(i + 12345) | 1; /* random-looking, distinct */
	run_keys(keys, n, 1000);
	free(keys);
}

static void test_table_adversarial_keys(void **state)
{
	uint32_t n = 100000, i;
	uint64_t *keys = malloc(n * sizeof(*keys));

	(void)state;
	/* Same low 32 bits, then a stride of 2^20: both defeat an identity or low-bit hash. */
	for (i = 0; i < n; i++)
		keys[i] = (uint64_t)i << 32;
	run_keys(keys, n, 512);
	for (i = 0; i < n; i++)
		keys[i] = (uint64_t)i << 20;
	run_keys(keys, n, 7);
	free(keys);
}

static uint32_t h3(uint64_t k) { return ps_slot_hash(k); }

static int cmp_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void test_table_collisions_same_hash_tag(void **state)
{
	struct ps_table_config cfg = pt_table(1, 2, PS_OPT_SGD);
	struct ps_table t;
	uint32_t i, n = 0, r[64], m = 300000;
	uint64_t keys[64], k, *pairs = malloc(m * 2 * sizeof(uint64_t));

	(void)state;
	/* 64 keys on the same home slot of the initial 1024-slot index: one long chain. */
	for (k = 1; n < 48; k++)
		if ((h3(k) & 1023) == 5)
			keys[n++] = k;
	/* Plus pairs whose whole 32-bit slot hash is equal: only the key compare tells them apart. */
	for (i = 0; i < m; i++) {
		pairs[2 * i] = h3(i + 1000000000ull);
		pairs[2 * i + 1] = i + 1000000000ull;
	}
	qsort(pairs, m, 2 * sizeof(uint64_t), cmp_pair);
	for (i = 1; i < m && n < 64; i++)
		if (pairs[2 * i] == pairs[2 * i - 2]) {
			keys[n++] = pairs[2 * i - 1];
			keys[n++] = pairs[2 * i + 1];
		}
	assert_true(n >= 50);
	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	lookup_keys(&t, keys, n, r);
	assert_int_equal(t.n_rows, n);
	check_all(&t, keys, n);
	for (i = 0; i < n; i++)
		assert_int_equal(r[i], i);
	assert_int_equal(ps_table_find(&t, 77), UINT32_MAX);
	ps_table_fini(&t);
	free(pairs);
}

/*
 * Normal values come in pairs (Box-Muller's cosine and sine of one draw): over dim-3 rows,
 * each position, the last of which has no partner, has the configured mean and deviation,
 * and a pair's two values are uncorrelated.
 */
static void check_normal_odd_dim(void)
{
	struct ps_table_config cfg = pt_table(1, 3, PS_OPT_SGD);
	double sum[3] = { 0 }, sq[3] = { 0 }, cross = 0;
	uint32_t n = 4096, i, j, r;
	struct ps_table t;

	cfg.init = PS_INIT_NORMAL;
	cfg.init_a = -3.0f;
	cfg.init_b = 0.5f;
	cfg.seed = 7;
	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	for (i = 0; i < n; i++) {
		uint64_t key = 1000003ull * i + 11;
		lookup_keys(&t, &key, 1, &r);
		const float *v = ps_row_val(&t, r);
		for (j = 0; j < 3; j++) {
			assert_true(isfinite(v[j]));
			sum[j] += v[j];
			sq[j] += (double)v[j] * v[j];
		}
		cross += ((double)v[0] + 3.0) * ((double)v[1] + 3.0);
	}
	for (j = 0; j < 3; j++) {
		double m = sum[j] / n, sd = sqrt(sq[j] / n - m * m);
		assert_true(fabs(m + 3.0) < 0.05);
		assert_true(fabs(sd - 0.5) < 0.05);
	}
	assert_true(fabs(cross / n / 0.25) < 0.1); /* correlation of a pair's two values */
	ps_table_fini(&t);
}

static void test_table_initializers(void **state)
{
	struct ps_table_config cfg = pt_table(1, 64, PS_OPT_ADAGRAD);
	struct ps_table t, t2;
	uint64_t keys[256];
	uint32_t rows[256], i, j;
	double sum = 0, sq = 0;

	(void)state;
	for (i = 0; i < 256; i++)
		keys[i] = i * 7919;
	cfg.init = PS_INIT_UNIFORM;
	cfg.init_a = -0.5f;
	cfg.init_b = 0.5f;
	cfg.seed = 42;
	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	lookup_keys(&t, keys, 256, rows);
	for (i = 0; i < 256; i++)
		for (j = 0; j < 64; j++) {
			float v = ps_row_val(&t, rows[i])[j];
			assert_true(v >= -0.5f && v < 0.5f);
			/* Adagrad's accumulator starts at init_accum */
			assert_true(ps_row_val(&t, rows[i])[64 + j] == cfg.op.init_accum);
		}
	/* A row's initial value depends on (seed, key) only, not on touch order. */
	assert_int_equal(ps_table_init(&t2, &cfg, false, 0, 0, -1, 1), 0);
	lookup_keys(&t2, keys + 100, 1, rows);
	assert_memory_equal(ps_row_val(&t2, rows[0]), ps_row_val(&t, ps_table_find(&t, keys[100])),
			    64 * sizeof(float));
	ps_table_fini(&t2);
	ps_table_fini(&t);

	cfg.init = PS_INIT_NORMAL;
	cfg.init_a = 1.0f;
	cfg.init_b = 2.0f;
	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	lookup_keys(&t, keys, 256, rows);
	for (i = 0; i < 256; i++)
		for (j = 0; j < 64; j++) {
			double v = ps_row_val(&t, rows[i])[j];
			sum += v;
			sq += v * v;
		}
	sum /= 256 * 64;
	sq = sqrt(sq / (256 * 64) - sum * sum);
	assert_true(fabs(sum - 1.0) < 0.1);
	assert_true(fabs(sq - 2.0) < 0.1);
	ps_table_fini(&t);
	check_normal_odd_dim();
}

static void test_table_dense_rows_preallocated(void **state)
{
	struct ps_table_config cfg = pt_table(3, 8, PS_OPT_SGD);
	struct ps_table t;

	(void)state;
	cfg.kind = PS_TABLE_DENSE;
	cfg.dense_rows = 3000;
	assert_int_equal(ps_table_init(&t, &cfg, false, 1000, 1500, -1, 1), 0);
	assert_int_equal(t.n_rows, 1500);
	assert_int_equal(ps_table_find(&t, 1000), 0);
	assert_int_equal(ps_table_find(&t, 2499), 1499);
	assert_int_equal(ps_table_find(&t, 2500), UINT32_MAX);
	assert_int_equal(ps_table_find(&t, 999), UINT32_MAX);
	assert_true(ps_row_meta(&t, 7)->key == 1007);
	ps_table_fini(&t);
}

static void test_table_overhead_small(void **state)
{
	struct ps_table_config cfg = pt_table(1, 16, PS_OPT_SGD);
	struct ps_table t;
	uint32_t n = 100000, i, *rows = malloc(n * sizeof(*rows));
	uint64_t *keys = malloc(n * sizeof(*keys));
	double per_row;

	(void)state;
	for (i = 0; i < n; i++)
		keys[i] = ps_mix64(i);
	assert_int_equal(ps_table_init(&t, &cfg, false, 0, 0, -1, 1), 0);
	lookup_keys(&t, keys, n, rows);
	per_row = (double)ps_table_bytes(&t) / n;
	/* 64 bytes of values; meta 16; index <= 8 / (3/8) plus arena slack */
	assert_true(per_row < 64 + 16 + 24 + 8);
	ps_table_fini(&t);
	free(rows);
	free(keys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_insert_find_grow),
		cmocka_unit_test(test_table_adversarial_keys),
		cmocka_unit_test(test_table_collisions_same_hash_tag),
		cmocka_unit_test(test_table_initializers),
		cmocka_unit_test(test_table_dense_rows_preallocated),
		cmocka_unit_test(test_table_overhead_small),
	};
	return cmocka_run_group_tests_name("ps_table", tests, NULL, NULL);
}
