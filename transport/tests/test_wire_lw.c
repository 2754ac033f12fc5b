/*
 * test_wire_lw.c — cmocka tests of the line writer in tl_wire.h (tl_lw_*), which fills
 * fused frames with non-temporal stores of whole lines.
 *
 * The destination is poisoned first and every test compares it, after tl_lw_finish,
 * with the same bytes appended by memcpy: every byte where it belongs, and nothing
 * written past the end (the poison after it intact).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "transport/tl_wire.h"

#define LW_DST  (256u * 1024)
#define POISON  0xa5

struct lwx {
	uint8_t *dst, *ref, *src;
	uint32_t ref_len;
	struct tl_lw w;
};

static int setup(void **state)
{
	struct lwx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->dst = aligned_alloc(64, LW_DST + 64);
	x->ref = malloc(LW_DST + 64);
	x->src = malloc(LW_DST);
	assert_non_null(x->dst);
	assert_non_null(x->ref);
	assert_non_null(x->src);
	memset(x->dst, POISON, LW_DST + 64);
	memset(x->ref, POISON, LW_DST + 64);
	for (uint32_t i = 0; i < LW_DST; i++)
		x->src[i] = (uint8_t)(i * 2654435761u >> 24);
	tl_lw_open(&x->w, x->dst);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct lwx *x = *state;

	free(x->dst);
	free(x->ref);
	free(x->src);
	free(x);
	return 0;
}

/* Appends n bytes from src offset off through tl_lw_put, and to the reference. */
static void lw_put(struct lwx *x, uint32_t off, uint32_t n)
{
	tl_lw_put(&x->w, x->src + off, n);
	memcpy(x->ref + x->ref_len, x->src + off, n);
	x->ref_len += n;
}

/* The same through the cursor: written in place, then committed. */
static void lw_put_at_cursor(struct lwx *x, uint32_t off, uint32_t n)
{
	assert_true(n <= TL_LW_ROOM);
	memcpy(tl_lw_cursor(&x->w), x->src + off, n);
	tl_lw_commit(&x->w, n);
	memcpy(x->ref + x->ref_len, x->src + off, n);
	x->ref_len += n;
}

static void lw_check(struct lwx *x)
{
	tl_lw_finish(&x->w);
	assert_int_equal(x->w.len, x->ref_len);
	assert_memory_equal(x->dst, x->ref, x->ref_len + 64);
}

static void test_lw_small_pieces_across_the_ring(void **state)
{
	struct lwx *x = *state;
	uint32_t off = 0;

	/* 1..71 B pieces, like sub-headers and small tensors: many laps of the ring, and
	 * pieces that run into its overflow. */
	for (uint32_t i = 0; i < 3000; i++) {
		uint32_t n = 1 + i % 71;
		if (i % 2)
			lw_put_at_cursor(x, off % (LW_DST / 2), n);
		else
			lw_put(x, off % (LW_DST / 2), n);
		off += n;
	}
	lw_check(x);
}

static void test_lw_large_pieces_stream_from_the_source(void **state)
{
	struct lwx *x = *state;

	/* Larger than the cursor's room: the writer reaches a line boundary and streams
	 * from the source. Odd offsets so source and destination disagree on alignment. */
	lw_put(x, 3, 5);
	lw_put(x, 11, TL_LW_ROOM + 1);
	lw_put(x, 1000, 4096);
	lw_put(x, 7, 64);                 /* exactly a line, after an aligned large put */
	lw_put(x, 9000, 60000 + 13);
	lw_put(x, 1, 1);
	lw_check(x);
}

static void test_lw_random_mix(void **state)
{
	struct lwx *x = *state;
	unsigned seed = 42;

	while (x->ref_len < LW_DST - 8192) {
		uint32_t r = (uint32_t)rand_r(&seed);
		uint32_t n = r % 8 == 0 ? 1 + (r >> 3) % 4096 : (r >> 3) % 80;
		uint32_t off = (r >> 12) % (LW_DST - 4096);

		if (r % 3 == 0 && n <= TL_LW_ROOM)
			lw_put_at_cursor(x, off, n);
		else
			lw_put(x, off, n);
	}
	lw_check(x);
}

/* A frame whose output failed stays open: more is appended after tl_lw_finish and the
 * second finish has every byte, the first partial line included. */
static void test_lw_put_after_finish(void **state)
{
	struct lwx *x = *state;

	lw_put(x, 0, 100);
	tl_lw_finish(&x->w);
	assert_memory_equal(x->dst, x->ref, 100);
	lw_put(x, 500, 30);
	lw_put(x, 700, 2000);
	tl_lw_finish(&x->w);
	lw_put(x, 5, 1);
	lw_check(x);
}

static void test_lw_empty_and_exact_lines(void **state)
{
	struct lwx *x = *state;

	lw_check(x);                      /* nothing written: nothing touched */
	tl_lw_open(&x->w, x->dst);
	for (uint32_t i = 0; i < 40; i++)
		lw_put(x, i * 64, 64);
	lw_check(x);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lw_small_pieces_across_the_ring),
		T(test_lw_large_pieces_stream_from_the_source),
		T(test_lw_random_mix),
		T(test_lw_put_after_finish),
		T(test_lw_empty_and_exact_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
