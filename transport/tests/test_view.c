/*
 * test_view.c — cmocka tests of the body cursor in tl_wire.h (tl_cur_*), which reads a
 * received body lying in several pieces without rescanning them from the first.
 *
 * A body of known bytes is cut into pieces of random lengths (empty ones among them) and
 * every read through the cursor is compared with the same bytes read from the whole body:
 * forward, backward and at random offsets, across piece boundaries and past the end.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "transport/tl_wire.h"

#define BODY 4096u
#define MAX_PIECES 4097u

struct vx {
	uint8_t body[BODY];
	struct tl_iov iov[MAX_PIECES];
	struct tl_msg_view v;
};

static uint8_t pat(uint32_t i) { return (uint8_t)(i * 7u + (i >> 8) + 1u); }

/* Cuts the body into pieces of 0..maxlen bytes (seeded), each a view of its own. */
static void cut(struct vx *x, uint32_t maxlen, unsigned seed)
{
	uint32_t off = 0, n = 0;

	srand(seed);
	while (off < BODY) {
		uint32_t len = (uint32_t)rand() % (maxlen + 1);
		if (len > BODY - off)
			len = BODY - off;
		assert_true(n < MAX_PIECES);
		x->iov[n++] = (struct tl_iov){ x->body + off, len };
		off += len;
	}
	x->v.iov = x->iov;
	x->v.iovcnt = n;
	x->v.hdr.body_len = BODY;
}

static int setup(void **state)
{
	struct vx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	for (uint32_t i = 0; i < BODY; i++)
		x->body[i] = pat(i);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

/* The piece the cursor stands in holds off. */
static void assert_at(const struct tl_view_cur *c, uint32_t off)
{
	assert_true(c->i < c->v->iovcnt);
	assert_true(c->start <= off && off - c->start < c->v->iov[c->i].len);
	assert_ptr_equal(c->v->iov[c->i].base + (off - c->start), c->v->iov[0].base + off);
}

static void read_at(struct tl_view_cur *c, uint32_t off, uint32_t len)
{
	uint8_t scratch[64];
	const uint8_t *p = tl_cur_get(c, off, len, scratch);

	assert_non_null(p);
	assert_memory_equal(p, ((const uint8_t *)c->v->iov[0].base) + off, len);
	assert_at(c, off + len - 1);
}

static void test_view_cur_forward_across_pieces(void **state)
{
	struct vx *x = *state;
	struct tl_view_cur c;

	for (unsigned seed = 1; seed <= 20; seed++) {
		cut(x, 1 + seed * 5, seed);
		tl_cur_init(&c, &x->v);
		for (uint32_t off = 0; off + 8 <= BODY; off += 8)
			read_at(&c, off, 8);
		for (uint32_t off = 0; off + 20 <= BODY; off += 3)
			read_at(&c, off, 20);
	}
}

static void test_view_cur_backward_and_random(void **state)
{
	struct vx *x = *state;
	struct tl_view_cur c;

	cut(x, 40, 7);
	tl_cur_init(&c, &x->v);
	for (uint32_t off = BODY - 8;; off -= 8) {
		read_at(&c, off, 8);
		if (off == 0)
			break;
	}
	srand(99);
	for (int k = 0; k < 5000; k++) {
		uint32_t len = 1 + (uint32_t)rand() % 64, off = (uint32_t)rand() % (BODY - len + 1);
		read_at(&c, off, len);
	}
}

/* Bytes within one piece come back in place; only a straddling read is copied. */
static void test_view_cur_zero_copy_within_a_piece(void **state)
{
	struct vx *x = *state;
	struct tl_view_cur c;
	uint8_t scratch[16];

	x->iov[0] = (struct tl_iov){ x->body, 100 };
	x->iov[1] = (struct tl_iov){ x->body + 100, BODY - 100 };
	x->v = (struct tl_msg_view){ .iov = x->iov, .iovcnt = 2, .hdr.body_len = BODY };
	tl_cur_init(&c, &x->v);
	assert_ptr_equal(tl_cur_get(&c, 0, 16, scratch), x->body);
	assert_ptr_equal(tl_cur_get(&c, 100, 16, scratch), x->body + 100);
	assert_ptr_equal(tl_cur_get(&c, 96, 8, scratch), scratch);
	assert_memory_equal(scratch, x->body + 96, 8);
	assert_ptr_equal(tl_cur_get(&c, 40, 8, scratch), x->body + 40);
}

static void test_view_cur_past_end_refused(void **state)
{
	struct vx *x = *state;
	struct tl_view_cur c;
	uint8_t scratch[16];
	uint32_t avail = 1;

	cut(x, 30, 3);
	tl_cur_init(&c, &x->v);
	assert_null(tl_cur_get(&c, BODY - 4, 8, scratch));
	assert_null(tl_cur_get(&c, UINT32_MAX - 2, 8, scratch));
	assert_null(tl_cur_span(&c, BODY, &avail));
	assert_int_equal(avail, 0);
	read_at(&c, BODY - 8, 8);
	/* Pieces that add up to less than body_len: the missing bytes are never read. */
	x->v.hdr.body_len = BODY + 8;
	assert_null(tl_cur_get(&c, BODY - 4, 8, scratch));
	assert_null(tl_cur_span(&c, BODY + 2, &avail));
	x->v.hdr.body_len = BODY;
	read_at(&c, 0, 8);
}

/* A span ends with its piece: walking spans visits every byte once, in order. */
static void test_view_cur_spans_cover_the_body(void **state)
{
	struct vx *x = *state;
	struct tl_view_cur c;
	uint32_t off = 5, avail;
	const uint8_t *p;

	cut(x, 50, 11);
	tl_cur_init(&c, &x->v);
	while ((p = tl_cur_span(&c, off, &avail)) != NULL) {
		assert_true(avail > 0);
		assert_memory_equal(p, x->body + off, avail);
		off += avail;
	}
	assert_int_equal(off, BODY);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_view_cur_forward_across_pieces),
		T(test_view_cur_backward_and_random),
		T(test_view_cur_zero_copy_within_a_piece),
		T(test_view_cur_past_end_refused),
		T(test_view_cur_spans_cover_the_body),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
