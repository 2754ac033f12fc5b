/*
 * test_fz_unpack.c — cmocka group for the unpacker (fz_unpack.c): views into the frame
 * (no copy) in order, pass-through of other messages, and every malformed shape refused
 * whole before anything is delivered. Frames are made by hand with the byte builder.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fuse/fz.h"
#include "fuse/fz_pvt.h"
#include "fz_test_wire.h"

struct up {
	struct fz_rx *rx;
	struct fzt_sink sink;
	struct fzt_buf b;
	struct tl_msg_view v;
	struct tl_iov iov;
	struct fz_rx_error err;
	/* Where the delivered views pointed, to prove there was no copy. */
	const uint8_t *seen_base[8];
	uint32_t seen;
};

static int up_setup(void **state)
{
	struct up *u = calloc(1, sizeof(*u));

	if (!u || fz_rx_create(&u->rx) != 0)
		return -1;
	*state = u;
	return 0;
}

static int up_teardown(void **state)
{
	struct up *u = *state;

	fz_rx_destroy(u->rx);
	fzt_sink_fini(&u->sink);
	free(u);
	return 0;
}

/* Appends a minimal sub-message: type 40, nothing but a body of n bytes of value c. */
static void sub_plain(struct fzt_buf *b, uint32_t n, uint8_t c)
{
	uint32_t i;

	fzt_u8(b, 40);
	fzt_u8(b, 0);
	fzt_varint(b, n);
	for (i = 0; i < n; i++)
		fzt_u8(b, c);
}

static void record_base(void *arg, const struct tl_msg_view *m,
			const struct tl_msg_view *carrier)
{
	struct up *u = arg;

	if (u->seen < 8)
		u->seen_base[u->seen++] = m->iovcnt ? m->iov[0].base : NULL;
	fzt_sink_deliver(&u->sink, m, carrier);
}

static int up_run(struct up *u, uint32_t count)
{
	fzt_frame_view(&u->v, &u->iov, &u->b, count);
	memset(&u->err, 0, sizeof(u->err));
	return fz_unpack(u->rx, &u->v, record_base, u, &u->err);
}

/* The frame is refused with -EBADMSG and a reason, and nothing was delivered. */
static void assert_refused(struct up *u, uint32_t count, const char *reason_part)
{
	uint64_t refused = fz_rx_stats(u->rx)->refused;

	assert_int_equal(up_run(u, count), -EBADMSG);
	assert_int_equal(u->sink.n, 0);
	assert_non_null(u->err.reason);
	assert_non_null(strstr(u->err.reason, reason_part));
	assert_int_equal(fz_rx_stats(u->rx)->refused, refused + 1);
	assert_int_equal(fz_rx_stats(u->rx)->subs, 0);
}

static void test_fz_unpack_views_in_order_no_copy(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 3, 0xaa);
	/* type 33 with every optional field, req_id base + 5 */
	fzt_u8(&u->b, 33);
	fzt_u8(&u->b, 0x3f);
	fzt_varint(&u->b, 2);
	fzt_varint(&u->b, 0x1234);        /* flags */
	fzt_varint(&u->b, UINT16_MAX);    /* aux */
	fzt_varint(&u->b, UINT32_MAX);    /* table_id */
	fzt_varint(&u->b, 10);            /* zigzag(+5) */
	fzt_varint(&u->b, 7);             /* key_count */
	fzt_varint(&u->b, 16);            /* dim */
	fzt_u8(&u->b, 0x11);
	fzt_u8(&u->b, 0x22);
	sub_plain(&u->b, 0, 0);           /* an empty body is a message too */
	fzt_frame_view(&u->v, &u->iov, &u->b, 3);
	u->v.hdr.req_id = 100;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), 0);
	assert_int_equal(u->sink.n, 3);
	assert_int_equal(u->sink.got[0].hdr.type, 40);
	assert_int_equal(u->sink.got[0].hdr.body_len, 3);
	assert_int_equal(u->sink.got[0].hdr.req_id, 100);
	assert_int_equal(u->sink.got[0].hdr.magic, TL_MSG_MAGIC);
	assert_int_equal(u->sink.got[0].body[2], 0xaa);
	assert_ptr_equal(u->seen_base[0], u->b.b + 3);  /* a view into the frame */
	assert_int_equal(u->sink.got[1].hdr.type, 33);
	assert_int_equal(u->sink.got[1].hdr.flags, 0x1234);
	assert_int_equal(u->sink.got[1].hdr.aux, UINT16_MAX);
	assert_int_equal(u->sink.got[1].hdr.table_id, UINT32_MAX);
	assert_int_equal(u->sink.got[1].hdr.req_id, 105);
	assert_int_equal(u->sink.got[1].hdr.key_count, 7);
	assert_int_equal(u->sink.got[1].hdr.dim, 16);
	assert_int_equal(u->sink.got[1].body[1], 0x22);
	assert_int_equal(u->sink.got[2].hdr.body_len, 0);
	assert_int_equal(u->sink.got[2].hdr.req_id, 105);
	assert_int_equal(fz_rx_stats(u->rx)->frames, 1);
	assert_int_equal(fz_rx_stats(u->rx)->subs, 3);
}

static void test_fz_unpack_passthrough_non_fused(void **state)
{
	struct up *u = *state;
	uint8_t body[5] = { 1, 2, 3, 4, 5 };
	struct tl_iov iov = { body, 5 };
	struct tl_msg_view v = { .iov = &iov, .iovcnt = 1 };

	v.hdr.type = 40;
	v.hdr.body_len = 5;
	v.hdr.req_id = 9;
	assert_int_equal(fz_unpack(u->rx, &v, record_base, u, &u->err), 0);
	assert_int_equal(u->sink.n, 1);
	assert_ptr_equal(u->seen_base[0], body);
	assert_int_equal(u->sink.got[0].hdr.req_id, 9);
	assert_int_equal(fz_rx_stats(u->rx)->msgs, 1);
}

static void test_fz_unpack_sub_spanning_pieces(void **state)
{
	struct up *u = *state;
	struct tl_iov pieces[4];
	struct tl_msg_view v;
	uint32_t cut[5] = { 0, 1, 4, 9, 0 }, i;

	sub_plain(&u->b, 6, 0x5a);
	sub_plain(&u->b, 4, 0xa5);
	cut[4] = u->b.n;
	fzt_frame_view(&v, &u->iov, &u->b, 2);
	/* Pieces cut through the headers and the bodies. */
	for (i = 0; i < 4; i++)
		pieces[i] = (struct tl_iov){ u->b.b + cut[i], cut[i + 1] - cut[i] };
	v.iov = pieces;
	v.iovcnt = 4;
	assert_int_equal(fz_unpack(u->rx, &v, record_base, u, &u->err), 0);
	assert_int_equal(u->sink.n, 2);
	assert_memory_equal(u->sink.got[0].body, "\x5a\x5a\x5a\x5a\x5a\x5a", 6);
	assert_memory_equal(u->sink.got[1].body, "\xa5\xa5\xa5\xa5", 4);
}

static void test_fz_unpack_rejects_zero_length_frame(void **state)
{
	assert_refused(*state, 1, "zero-length");
}

static void test_fz_unpack_rejects_count_zero(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 1, 1);
	assert_refused(u, 0, "count of zero");
}

static void test_fz_unpack_rejects_count_overflow(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 1, 1);
	sub_plain(&u->b, 1, 1);
	assert_refused(u, UINT32_MAX, "count larger than the frame");
	assert_refused(u, u->b.n / FZ_SUB_HDR_MIN + 1, "count larger than the frame");
	/* Plausible by size, but the frame holds only two. */
	u->b.n = 0;
	sub_plain(&u->b, 10, 1);
	sub_plain(&u->b, 10, 1);
	assert_refused(u, 3, "count larger than the sub-messages");
}

static void test_fz_unpack_rejects_sub_length_past_end(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 4, 1);
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0);
	fzt_varint(&u->b, 5);   /* says 5, carries 4 */
	fzt_bytes(&u->b, "abcd", 4);
	assert_refused(u, 2, "past the end");
	assert_int_equal(u->err.sub_index, 1);
	/* A length that wraps 32-bit arithmetic is past the end too. */
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0);
	fzt_varint(&u->b, UINT32_MAX);
	fzt_bytes(&u->b, "abcd", 4);
	assert_refused(u, 1, "past the end");
}

static void test_fz_unpack_rejects_truncated_header(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 2, 1);
	fzt_u8(&u->b, 40);                 /* type, then the frame ends */
	assert_refused(u, 2, "truncated");
	u->b.n = 0;
	sub_plain(&u->b, 2, 1);
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0);
	fzt_u8(&u->b, 0x80);               /* a length cut mid-varint */
	assert_refused(u, 2, "truncated");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x20);               /* dim present, missing */
	fzt_varint(&u->b, 0);
	assert_refused(u, 1, "truncated");
}

static void test_fz_unpack_rejects_nested_frame(void **state)
{
	struct up *u = *state;
	struct fzt_buf inner = { .n = 0 };

	sub_plain(&inner, 2, 7);
	sub_plain(&u->b, 1, 1);
	fzt_u8(&u->b, FZ_TYPE_FRAME);
	fzt_u8(&u->b, FZ_P_KEY_COUNT);
	fzt_varint(&u->b, inner.n);
	fzt_varint(&u->b, 1);
	fzt_bytes(&u->b, inner.b, inner.n);
	assert_refused(u, 2, "nested");
	assert_int_equal(u->err.sub_index, 1);
	/* Any type of fuse's range is refused inside a frame, as is type 0. */
	u->b.n = 0;
	sub_plain(&u->b, 1, 1);
	u->b.b[0] = TL_TYPE_FUSE_MAX;
	assert_refused(u, 1, "nested");
	u->b.b[0] = 0;
	assert_refused(u, 1, "type 0");
}

static void test_fz_unpack_rejects_bad_varints_and_reserved(void **state)
{
	struct up *u = *state;

	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0);
	fzt_bytes(&u->b, "\x81\x00", 2);    /* non-minimal length 1 */
	fzt_u8(&u->b, 9);
	assert_refused(u, 1, "malformed");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0);
	fzt_bytes(&u->b, "\xff\xff\xff\xff\x7f", 5); /* 2^35 - 1: wider than u32 */
	assert_refused(u, 1, "malformed");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x01);
	fzt_varint(&u->b, 0);
	fzt_varint(&u->b, 0x10000);         /* flags wider than u16 */
	assert_refused(u, 1, "malformed");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x01);
	fzt_varint(&u->b, 0);
	fzt_varint(&u->b, 0);               /* present but zero: not canonical */
	assert_refused(u, 1, "present but zero");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x40);                /* a reserved bit */
	fzt_varint(&u->b, 0);
	assert_refused(u, 1, "reserved bits");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x08);                /* req delta of 11 bytes */
	fzt_varint(&u->b, 0);
	fzt_bytes(&u->b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
	assert_refused(u, 1, "malformed");
	u->b.n = 0;
	fzt_u8(&u->b, 40);
	fzt_u8(&u->b, 0x08);                /* 10 bytes, but bits past 64 */
	fzt_varint(&u->b, 0);
	fzt_bytes(&u->b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10);
	assert_refused(u, 1, "malformed");
}

static void test_fz_unpack_rejects_trailing_bytes(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 2, 1);
	sub_plain(&u->b, 2, 1);
	assert_refused(u, 1, "trailing");
}

static void test_fz_unpack_rejects_bad_frame_header(void **state)
{
	struct up *u = *state;

	sub_plain(&u->b, 2, 1);
	fzt_frame_view(&u->v, &u->iov, &u->b, 1);
	u->v.hdr.table_id = 1;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), -EBADMSG);
	assert_non_null(strstr(u->err.reason, "reserved field"));
	fzt_frame_view(&u->v, &u->iov, &u->b, 1);
	u->v.hdr.type = FZ_TYPE_FRAME + 1;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), -EBADMSG);
	assert_non_null(strstr(u->err.reason, "unknown fuse"));
	/* The header promises more body than the pieces hold. */
	fzt_frame_view(&u->v, &u->iov, &u->b, 1);
	u->iov.len--;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), -EBADMSG);
	assert_non_null(strstr(u->err.reason, "shorter"));
	assert_int_equal(u->sink.n, 0);
}

static void test_fz_unpack_rejects_too_many_pieces(void **state)
{
	struct up *u = *state;
	struct tl_iov *pieces = calloc(FZ_RX_MAX_IOV + 1, sizeof(*pieces));
	uint32_t i;

	assert_non_null(pieces);
	sub_plain(&u->b, FZ_RX_MAX_IOV, 1);
	fzt_frame_view(&u->v, &u->iov, &u->b, 1);
	for (i = 0; i <= FZ_RX_MAX_IOV; i++)
		pieces[i] = (struct tl_iov){ u->b.b + i, 1 };
	pieces[FZ_RX_MAX_IOV].len = u->b.n - FZ_RX_MAX_IOV;
	u->v.iov = pieces;
	u->v.iovcnt = FZ_RX_MAX_IOV + 1;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), -E2BIG);
	assert_int_equal(u->sink.n, 0);
	/* At the limit it is delivered, in FZ_RX_MAX_IOV views. */
	pieces[FZ_RX_MAX_IOV - 1].len = u->b.n - (FZ_RX_MAX_IOV - 1);
	u->v.iovcnt = FZ_RX_MAX_IOV;
	assert_int_equal(fz_unpack(u->rx, &u->v, record_base, u, &u->err), 0);
	assert_int_equal(u->sink.n, 1);
	free(pieces);
}

/* Random corruption never crashes; a frame is either refused whole or fully consistent. */
static void test_fz_unpack_corrupted_frames_all_or_nothing(void **state)
{
	struct up *u = *state;
	struct fzt_buf good = { .n = 0 };
	uint32_t round, j, count = 0;

	srand(7);
	while (good.n < 600) {
		fzt_u8(&good, 32 + (uint8_t)(rand() % 200));
		fzt_u8(&good, FZ_P_KEY_COUNT);
		uint32_t len = (uint32_t)rand() % 40;
		fzt_varint(&good, len);
		fzt_varint(&good, 1 + (uint32_t)rand() % 300);
		for (j = 0; j < len; j++)
			fzt_u8(&good, (uint8_t)rand());
		count++;
	}
	for (round = 0; round < 20000; round++) {
		uint32_t flips = 1 + (uint32_t)rand() % 3, c = count, sum = 0;
		u->b = good;
		for (j = 0; j < flips; j++)
			u->b.b[(uint32_t)rand() % u->b.n] ^= (uint8_t)(1u << (rand() % 8));
		if (rand() % 4 == 0)
			u->b.n -= (uint32_t)rand() % 8;
		if (rand() % 8 == 0)
			c += (uint32_t)rand() % 3 - 1;
		u->seen = 0;
		fzt_sink_fini(&u->sink);
		int rc = up_run(u, c);
		if (rc != 0) {
			assert_int_equal(rc, -EBADMSG);
			assert_int_equal(u->sink.n, 0);
			continue;
		}
		assert_int_equal(u->sink.n, c);
		for (j = 0; j < u->sink.n; j++) {
			assert_false(u->sink.got[j].hdr.type >= TL_TYPE_FUSE_MIN &&
				     u->sink.got[j].hdr.type <= TL_TYPE_FUSE_MAX);
			sum += u->sink.got[j].hdr.body_len + FZ_SUB_HDR_MIN;
		}
		assert_true(sum <= u->b.n);
	}
}

#define TL_ERR_TEXT_MAX_FZ 96u /* transport's error text limit (tl.h TL_ERR_TEXT_MAX) */

static void test_fz_unpack_error_body_for_sender(void **state)
{
	struct up *u = *state;
	uint8_t body[128];
	int n;

	sub_plain(&u->b, 2, 1);
	assert_refused(u, 2, "count larger");
	n = fz_rx_error_body(&u->err, -EBADMSG, body, sizeof(body));
	assert_true(n > 4);
	assert_int_equal(tl_ld32(body), EBADMSG);
	assert_non_null(strstr((char *)body + 4, "fuse: count larger"));
	assert_int_equal(fz_rx_error_body(&u->err, -EBADMSG, body, 10), -ENOSPC);
	n = fz_rx_error_text(&u->err, (char *)body, TL_ERR_TEXT_MAX_FZ);
	assert_true(n > 0 && n < (int)TL_ERR_TEXT_MAX_FZ);
	assert_string_equal((char *)body,
			    "fuse: count larger than the frame can hold (sub-message 0, offset 0)");
}

/*
 * A frame of more sub-messages than the first pass keeps for the second (1024): every
 * one arrives in order with its own header, also past that point and with headers
 * straddling pieces; one bad sub-message before or past that point refuses the whole.
 */
#define MANY_SUBS 1500u

static void many_subs(struct fzt_buf *b, uint32_t bad_at)
{
	uint32_t i;

	b->n = 0;
	for (i = 0; i < MANY_SUBS; i++) {
		fzt_u8(b, 40);
		fzt_u8(b, i == bad_at ? 0x80 : FZ_P_KEY_COUNT);  /* 0x80: a reserved bit */
		fzt_varint(b, 1);
		fzt_varint(b, i + 1);
		fzt_u8(b, (uint8_t)(i * 7u));
	}
}

static int many_run(struct up *u, struct tl_iov *iov)
{
	uint32_t off = 0, n = 0;

	/* Pieces of 61 bytes: sub-headers and bodies fall across piece boundaries. */
	for (off = 0; off < u->b.n; off += 61, n++) {
		iov[n].base = u->b.b + off;
		iov[n].len = u->b.n - off < 61 ? u->b.n - off : 61;
	}
	memset(&u->v, 0, sizeof(u->v));
	u->v.hdr.magic = TL_MSG_MAGIC;
	u->v.hdr.version = TL_MSG_VERSION;
	u->v.hdr.type = FZ_TYPE_FRAME;
	u->v.hdr.body_len = u->b.n;
	u->v.hdr.key_count = MANY_SUBS;
	u->v.hdr.req_id = 9;
	u->v.iov = iov;
	u->v.iovcnt = n;
	return fz_unpack(u->rx, &u->v, fzt_sink_deliver, &u->sink, &u->err);
}

static void test_fz_unpack_more_subs_than_the_views(void **state)
{
	struct up *u = *state;
	struct tl_iov iov[FZ_RX_MAX_IOV];
	uint32_t i;

	many_subs(&u->b, UINT32_MAX);
	assert_true(u->b.n / 61 + 1 <= FZ_RX_MAX_IOV);
	assert_int_equal(many_run(u, iov), 0);
	assert_int_equal(u->sink.n, MANY_SUBS);
	for (i = 0; i < MANY_SUBS; i++) {
		assert_int_equal(u->sink.got[i].hdr.type, 40);
		assert_int_equal(u->sink.got[i].hdr.key_count, i + 1);
		assert_int_equal(u->sink.got[i].hdr.req_id, 9);
		assert_int_equal(u->sink.got[i].hdr.body_len, 1);
		assert_int_equal(u->sink.got[i].body[0], (uint8_t)(i * 7u));
	}
	fzt_sink_fini(&u->sink);
	memset(&u->sink, 0, sizeof(u->sink));
	/* A bad sub-message among the views, then past them: refused whole, nothing delivered. */
	many_subs(&u->b, 10);
	assert_int_equal(many_run(u, iov), -EBADMSG);
	assert_int_equal(u->err.sub_index, 10);
	many_subs(&u->b, 1300);
	assert_int_equal(many_run(u, iov), -EBADMSG);
	assert_int_equal(u->err.sub_index, 1300);
	assert_int_equal(u->sink.n, 0);
	assert_int_equal(fz_rx_stats(u->rx)->subs, MANY_SUBS);
}

/* A field value of every encoded width: absent (0), one byte, two bytes, its widest. */
static uint64_t field_of_width(unsigned *seed, uint64_t max)
{
	uint32_t r = (uint32_t)rand_r(seed);

	switch (r % 4) {
	case 0: return 0;
	case 1: return 1 + (r >> 2) % 127;
	case 2: return 128 + (r >> 2) % 16256;
	default: return max - (r >> 2) % 3;
	}
}

/*
 * Builds a frame of n sub-messages into u->b with random headers (want gets them): each
 * field absent, one byte, two bytes or its widest; with mostly_short, three in four
 * sub-messages have only one-byte fields, as small tensors do. Body byte k of
 * sub-message i is i + k. The last sub-message is 4 bytes in all, at the frame's end.
 */
static void mixed_frame(struct up *u, struct tl_msg_hdr *want, uint32_t n, unsigned *seed,
			bool mostly_short)
{
	uint8_t sh[FZ_SUB_HDR_MAX];
	uint64_t prev = 1000;
	uint32_t i, k;

	u->b.n = 0;
	for (i = 0; i < n; i++) {
		struct tl_msg_hdr *h = &want[i];
		uint32_t r = (uint32_t)rand_r(seed);
		bool one_byte = mostly_short && r % 4 != 0;

		memset(h, 0, sizeof(*h));
		h->magic = TL_MSG_MAGIC;
		h->version = TL_MSG_VERSION;
		h->type = (uint8_t)(1 + r % 150);
		if (h->type >= TL_TYPE_FUSE_MIN && h->type <= TL_TYPE_FUSE_MAX)
			h->type = 40;
		h->flags = (uint16_t)field_of_width(seed, one_byte ? 127 : UINT16_MAX);
		h->aux = (uint16_t)field_of_width(seed, one_byte ? 127 : UINT16_MAX);
		h->table_id = (uint32_t)field_of_width(seed, one_byte ? 127 : UINT32_MAX);
		h->key_count = (uint32_t)field_of_width(seed, one_byte ? 127 : UINT32_MAX);
		h->dim = (uint32_t)field_of_width(seed, one_byte ? 127 : UINT32_MAX);
		if (one_byte) {
			h->flags &= 127;
			h->aux &= 127;
			h->table_id &= 127;
			h->key_count &= 127;
			h->dim &= 127;
		}
		/* req_id: the same, a step of +-1..63, or a long jump */
		h->req_id = r % 3 == 0 ? prev : r % 3 == 1 ? prev + 1 + (r >> 8) % 63 - 32
							   : prev + ((uint64_t)r << 20);
		h->body_len = (r >> 4) % 2 ? (r >> 5) % 20 : one_byte ? 20 + (r >> 5) % 100
								      : 130 + (r >> 5) % 8;
		if (i == n - 1) {
			h->flags = h->aux = 0;
			h->table_id = h->key_count = h->dim = h->body_len = 0;
			h->req_id = prev + 1;
		}
		k = fz_sub_hdr_put(sh, h, prev);
		fzt_bytes(&u->b, sh, k);
		for (k = 0; k < h->body_len; k++)
			fzt_u8(&u->b, (uint8_t)(i + k));
		prev = h->req_id;
	}
}

/* Unpacks u->b (n sub-messages) as the pieces given and checks it against want. */
static void unpack_matches(struct up *u, const struct tl_msg_hdr *want, uint32_t n,
			   const struct tl_iov *pieces, uint32_t np)
{
	uint32_t i, k;

	fzt_sink_fini(&u->sink);
	memset(&u->sink, 0, sizeof(u->sink));
	fzt_frame_view(&u->v, &u->iov, &u->b, n);
	u->v.hdr.req_id = 1000;
	if (pieces) {
		u->v.iov = pieces;
		u->v.iovcnt = np;
	}
	/* fzt_sink_deliver checks that every view lies inside the pieces. */
	assert_int_equal(fz_unpack(u->rx, &u->v, fzt_sink_deliver, &u->sink, &u->err), 0);
	assert_int_equal(u->sink.n, n);
	for (i = 0; i < n; i++) {
		assert_memory_equal(&u->sink.got[i].hdr, &want[i], sizeof(want[i]));
		for (k = 0; k < want[i].body_len; k++)
			assert_int_equal(u->sink.got[i].body[k], (uint8_t)(i + k));
	}
}

/*
 * Sub-headers whose fields are one byte each, inside one piece, take a shorter path
 * through the parser than the rest: frames mixing both (body lengths of one and two
 * bytes, a last sub-message too short for the short path's 8-byte read) deliver every
 * header and byte exactly as packed, in one piece and cut into pieces of 1 to 79 bytes
 * (so sub-messages lie inside a piece, straddle two, or start one).
 */
static void test_fz_unpack_short_and_long_headers_agree(void **state)
{
	struct up *u = *state;
	struct tl_msg_hdr want[120];
	struct tl_iov pieces[FZ_RX_MAX_IOV];
	unsigned seed = 7, round;
	uint32_t n = 120;

	mixed_frame(u, want, n, &seed, false);
	unpack_matches(u, want, n, NULL, 0);
	for (round = 0; round < 16; round++) {
		uint32_t off = 0, np = 0;

		mixed_frame(u, want, n, &seed, round % 4 != 0);
		if (round % 2)
			unpack_matches(u, want, n, NULL, 0);
		while (off < u->b.n) {
			uint32_t r = (uint32_t)rand_r(&seed);
			uint32_t len = r % 3 == 0 ? 1 + (r >> 2) % 12 : 20 + (r >> 2) % 60;
			pieces[np].base = u->b.b + off;
			pieces[np].len = u->b.n - off < len ? u->b.n - off : len;
			off += pieces[np++].len;
			assert_true(np <= FZ_RX_MAX_IOV);
		}
		unpack_matches(u, want, n, pieces, np);
	}
}

/*
 * Appends sub-message i with header h (its req_id from prev) and body bytes i + k; the
 * header is recorded in want[i].
 */
static void rep_sub(struct up *u, struct tl_msg_hdr *want, uint32_t i, const struct tl_msg_hdr *h,
		    uint64_t *prev)
{
	uint8_t sh[FZ_SUB_HDR_MAX];
	uint32_t k = fz_sub_hdr_put(sh, h, *prev);

	fzt_bytes(&u->b, sh, k);
	for (k = 0; k < h->body_len; k++)
		fzt_u8(&u->b, (uint8_t)(i + k));
	want[i] = *h;
	*prev = h->req_id;
}

/*
 * A new frame of n sub-messages with req_ids stepping by one from 1001: the second has
 * header second, the others base.
 */
static void rep_frame(struct up *u, struct tl_msg_hdr *want, const struct tl_msg_hdr *base,
		      const struct tl_msg_hdr *second, uint32_t n)
{
	struct tl_msg_hdr h;
	uint64_t prev = 1000;

	fzt_sink_fini(&u->sink);
	memset(&u->sink, 0, sizeof(u->sink));
	u->b.n = 0;
	for (uint32_t r = 0; r < n; r++) {
		h = r == 1 ? *second : *base;
		h.req_id = prev + 1;
		rep_sub(u, want, r, &h, &prev);
	}
}

/*
 * A step's tensors of one shape repeat their sub-header byte for byte, and the unpacker
 * takes a repeat without parsing it. Runs of one header (req_id stepping by 1, 2 or 3)
 * broken by a header that differs from it in one field only, each field in turn, by the
 * smallest change (one more or less, or one byte longer): every header is delivered as
 * packed, in one piece and in pieces. A repeat after a header the short path does not take
 * is the first one's. A repeat whose body runs past the frame's end is still refused as a
 * whole.
 */
static void test_fz_unpack_repeated_sub_headers(void **state)
{
	struct up *u = *state;
	struct tl_msg_hdr want[200], base, h;
	struct tl_iov pieces[FZ_RX_MAX_IOV];
	uint64_t prev = 1000;
	uint32_t n = 0, field, r, off, np;

	memset(&base, 0, sizeof(base));
	base.magic = TL_MSG_MAGIC;
	base.version = TL_MSG_VERSION;
	base.type = 40;
	base.body_len = 64;
	base.table_id = 64;
	base.dim = 16;
	u->b.n = 0;
	for (field = 0; field <= 10; field++) {
		uint64_t step = 1 + field % 3;     /* runs of req_id steps of 1, 2 and 3 */

		for (r = 0; r < 5; r++) {
			h = base;
			h.req_id = prev + step;
			rep_sub(u, want, n++, &h, &prev);
		}
		h = base;
		h.req_id = prev + step;
		switch (field) {
		case 0: h.type = 41; break;
		case 1: h.flags = 1; break;
		case 2: h.aux = 1; break;
		case 3: h.body_len = 63; break;
		case 4: h.table_id = 65; break;
		case 5: h.req_id = prev + step + 1; break;
		case 6: h.req_id = prev + step - 1; break;
		case 7: h.key_count = 1; break;
		case 8: h.dim = 17; break;
		case 9: h.dim = 128; break;         /* one byte longer */
		default: h.body_len = 0; break;
		}
		rep_sub(u, want, n++, &h, &prev);
	}
	unpack_matches(u, want, n, NULL, 0);
	for (np = 0, off = 0; off < u->b.n; np++) {
		uint32_t len = np % 3 == 0 ? 9 : 70 + np % 13;
		pieces[np].base = u->b.b + off;
		pieces[np].len = u->b.n - off < len ? u->b.n - off : len;
		off += pieces[np].len;
		assert_true(np < FZ_RX_MAX_IOV);
	}
	unpack_matches(u, want, n, pieces, np);

	/* A short header seen once, a long one (parsed the general way), then the short one
	 * repeated: the repeats take the first one's fields, not the long one's. */
	h = base;
	h.type = 42;
	h.table_id = 70000;   /* three bytes: the general parser */
	h.dim = 0;
	rep_frame(u, want, &base, &h, 4);
	unpack_matches(u, want, 4, NULL, 0);

	/* Three repeats, the last one's body cut short by the frame's end. */
	rep_frame(u, want, &base, &base, 3);
	u->b.n -= 1;
	assert_int_equal(up_run(u, 3), -EBADMSG);
	assert_int_equal(u->sink.n, 0);
	assert_non_null(strstr(u->err.reason, "past the end"));
	assert_int_equal(u->err.sub_index, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, up_setup, up_teardown)
		T(test_fz_unpack_views_in_order_no_copy),
		T(test_fz_unpack_passthrough_non_fused),
		T(test_fz_unpack_sub_spanning_pieces),
		T(test_fz_unpack_rejects_zero_length_frame),
		T(test_fz_unpack_rejects_count_zero),
		T(test_fz_unpack_rejects_count_overflow),
		T(test_fz_unpack_rejects_sub_length_past_end),
		T(test_fz_unpack_rejects_truncated_header),
		T(test_fz_unpack_rejects_nested_frame),
		T(test_fz_unpack_rejects_bad_varints_and_reserved),
		T(test_fz_unpack_rejects_trailing_bytes),
		T(test_fz_unpack_rejects_bad_frame_header),
		T(test_fz_unpack_rejects_too_many_pieces),
		T(test_fz_unpack_corrupted_frames_all_or_nothing),
		T(test_fz_unpack_error_body_for_sender),
		T(test_fz_unpack_more_subs_than_the_views),
		T(test_fz_unpack_short_and_long_headers_agree),
		T(test_fz_unpack_repeated_sub_headers),
#undef T
	};
	return cmocka_run_group_tests_name("fz_unpack", tests, NULL, NULL);
}
