/*
 * test_frame.c — cmocka tests of tl_frame.c, the message reassembler.
 *
 * The stream is cut into chunks that each live in their own malloc'd copy with a
 * refcount, the way receive buffers or mbufs do; the test drops its own reference
 * right after each push and poisons a chunk when its count reaches zero, so a view the
 * framer failed to hold reads poison and fails the byte check. Every test ends with
 * all chunk references and all message records returned (leak check in teardown).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "transport/tl_pvt.h"

#define MAX_CHUNKS 4096

struct fx;

struct chunk {
	struct fx *fx;
	int refcnt;
	uint32_t len;
	uint8_t *data;
};

struct got {
	struct tl_msg_hdr hdr;
	uint32_t iovcnt;
	int body_ok;
};

struct fx {
	long refs;                 /* framer-held chunk references outstanding */
	struct tl_fr_pool *pool;
	struct tl_framer fr;
	struct chunk *chunks[MAX_CHUNKS];
	uint32_t nchunks;
	struct got *got;
	uint32_t ngot, capgot;
	int rejects, last_reject;
	uint64_t last_reject_req;
	int hold;                  /* hold every delivered message */
	struct tl_msg *held[256];
	uint32_t nheld;
	int stop_after;            /* sink returns -ECONNABORTED after this many (0: never) */
	const struct tl_iov *first_iov;
};

static void ck_hold(void *ref)
{
	struct chunk *c = ref;

	c->refcnt++;
	c->fx->refs++;
}

static void ck_put(struct chunk *c)
{
	assert_true(c->refcnt > 0);
	if (--c->refcnt == 0)
		memset(c->data, 0xA5, c->len); /* a dangling view now reads poison */
}

static void ck_release(void *ref)
{
	struct chunk *c = ref;

	c->fx->refs--;
	ck_put(c);
}

static const struct tl_chunk_ops ck_ops = { ck_hold, ck_release };

static uint8_t pat(uint64_t req, uint32_t i) { return (uint8_t)(req * 31u + i * 7u + (i >> 8)); }

static int body_matches(const struct tl_msg_view *v)
{
	uint32_t off = 0, i, j;

	for (i = 0; i < v->iovcnt; i++)
		for (j = 0; j < v->iov[i].len; j++, off++)
			if (v->iov[i].base[j] != pat(v->hdr.req_id, off))
				return 0;
	return off == v->hdr.body_len;
}

static int sink_msg(void *arg, const struct tl_msg_view *v)
{
	struct fx *fx = arg;

	if (fx->ngot == fx->capgot) {
		fx->capgot = fx->capgot ? fx->capgot * 2 : 64;
		fx->got = realloc(fx->got, fx->capgot * sizeof(*fx->got));
		assert_non_null(fx->got);
	}
	fx->got[fx->ngot].hdr = v->hdr;
	fx->got[fx->ngot].iovcnt = v->iovcnt;
	fx->got[fx->ngot].body_ok = body_matches(v);
	if (fx->ngot == 0)
		fx->first_iov = v->iov;
	fx->ngot++;
	if (fx->hold) {
		assert_true(fx->nheld < 256);
		fx->held[fx->nheld++] = tl_msg_hold(v);
	}
	return fx->stop_after && (int)fx->ngot >= fx->stop_after ? -ECONNABORTED : 0;
}

static int sink_reject(void *arg, const struct tl_msg_hdr *h, int err)
{
	struct fx *fx = arg;

	fx->rejects++;
	fx->last_reject = err;
	fx->last_reject_req = h->req_id;
	return 0;
}

static const struct tl_fr_sink sink = { sink_msg, sink_reject };

static int fx_setup_max(void **state, uint32_t max_body, uint32_t max_msgs, uint32_t max_segs)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	assert_int_equal(tl_fr_pool_create(&ck_ops, max_msgs, &fx->pool), 0);
	tl_fr_init(&fx->fr, fx->pool, max_body, max_segs);
	*state = fx;
	return 0;
}

static int setup(void **state) { return fx_setup_max(state, 1u << 24, 1024, 1u << 20); }

static int teardown(void **state)
{
	struct fx *fx = *state;
	uint32_t i;

	for (i = 0; i < fx->nheld; i++)
		tl_msg_release(fx->held[i]);
	tl_fr_fini(&fx->fr);
	/* The leak check: every hold undone, every record back in the pool. */
	assert_int_equal(fx->refs, 0);
	assert_int_equal(fx->pool->in_use, 0);
	tl_fr_pool_destroy(fx->pool);
	for (i = 0; i < fx->nchunks; i++) {
		assert_int_equal(fx->chunks[i]->refcnt, 0);
		free(fx->chunks[i]->data);
		free(fx->chunks[i]);
	}
	free(fx->got);
	free(fx);
	return 0;
}

/* Appends one message with version/magic as given to a growing stream buffer. */
static uint32_t put_msg(uint8_t **buf, uint32_t *len, uint8_t type, uint64_t req, uint32_t body)
{
	struct tl_msg_hdr h = { .type = type, .req_id = req, .body_len = body, .flags = 3 };
	uint32_t at = *len, i;

	*buf = realloc(*buf, *len + TL_MSG_HDR_LEN + body);
	assert_non_null(*buf);
	tl_msg_hdr_encode(*buf + at, &h);
	for (i = 0; i < body; i++)
		(*buf)[at + TL_MSG_HDR_LEN + i] = pat(req, i);
	*len += TL_MSG_HDR_LEN + body;
	return at;
}

/* Pushes [p, p+n) as one chunk the test owns, then drops the test's reference. */
static int push_chunk(struct fx *fx, const uint8_t *p, uint32_t n)
{
	struct chunk *c = calloc(1, sizeof(*c));
	int rc;

	assert_non_null(c);
	assert_true(fx->nchunks < MAX_CHUNKS);
	c->fx = fx;
	c->refcnt = 1;
	c->len = n;
	c->data = malloc(n);
	assert_non_null(c->data);
	memcpy(c->data, p, n);
	fx->chunks[fx->nchunks++] = c;
	rc = tl_fr_push(&fx->fr, c->data, n, c, &sink, fx);
	ck_put(c);
	return rc;
}

/* Frees the chunks no one refers to any more, so long runs stay under MAX_CHUNKS. */
static void gc_chunks(struct fx *fx)
{
	uint32_t i, k = 0;

	for (i = 0; i < fx->nchunks; i++) {
		if (fx->chunks[i]->refcnt == 0) {
			free(fx->chunks[i]->data);
			free(fx->chunks[i]);
		} else {
			fx->chunks[k++] = fx->chunks[i];
		}
	}
	fx->nchunks = k;
}

/* Feeds buf in chunks of 1..maxchunk bytes (seeded). */
static int push_random(struct fx *fx, const uint8_t *buf, uint32_t len, uint32_t maxchunk,
		       unsigned *seed)
{
	uint32_t off = 0;
	int rc;

	while (off < len) {
		uint32_t n = 1 + (uint32_t)rand_r(seed) % maxchunk;
		if (n > len - off)
			n = len - off;
		rc = push_chunk(fx, buf + off, n);
		if (rc != 0)
			return rc;
		off += n;
		if (fx->nchunks > MAX_CHUNKS - 8)
			gc_chunks(fx);
	}
	return 0;
}

static void test_frame_one_chunk_one_view(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;
	struct tl_msg *m;

	put_msg(&buf, &len, 40, 7, 1000);
	fx->hold = 1;
	assert_int_equal(push_chunk(fx, buf, len), 0);
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->got[0].iovcnt, 1);
	assert_true(fx->got[0].body_ok);
	assert_int_equal(fx->got[0].hdr.type, 40);
	assert_int_equal(fx->got[0].hdr.flags, 3);
	/* Zero copy: the view points into the chunk, right after the header. */
	m = fx->held[0];
	assert_ptr_equal(tl_msg_view_of(m)->iov[0].base, fx->chunks[0]->data + TL_MSG_HDR_LEN);
	free(buf);
}

static void test_frame_spanning_chunks_several_views(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;

	put_msg(&buf, &len, 33, 9, 300);
	assert_int_equal(push_chunk(fx, buf, 20), 0);       /* header split */
	assert_int_equal(push_chunk(fx, buf + 20, 100), 0);
	assert_int_equal(push_chunk(fx, buf + 120, 100), 0);
	assert_int_equal(fx->ngot, 0);
	assert_true(fx->refs > 0); /* partial message holds its chunks */
	assert_int_equal(push_chunk(fx, buf + 220, len - 220), 0);
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->got[0].iovcnt, 3);
	assert_true(fx->got[0].body_ok);
	assert_int_equal(fx->refs, 0);
	free(buf);
}

static void test_frame_one_byte_chunks(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, i;

	put_msg(&buf, &len, 32, 1, 0);
	put_msg(&buf, &len, 32, 2, 1);
	put_msg(&buf, &len, 200, 3, 700);
	for (i = 0; i < len; i++) {
		assert_int_equal(push_chunk(fx, buf + i, 1), 0);
		if (fx->nchunks > MAX_CHUNKS - 8)
			gc_chunks(fx);
	}
	assert_int_equal(fx->ngot, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(fx->got[i].hdr.req_id, i + 1);
		assert_true(fx->got[i].body_ok);
	}
	assert_int_equal(fx->got[2].iovcnt, 700);
	assert_true(tl_fr_at_boundary(&fx->fr));
	free(buf);
}

static void test_frame_random_chunkings(void **state)
{
	struct fx *fx = *state;
	unsigned seed;

	for (seed = 1; seed <= 24; seed++) {
		uint8_t *buf = NULL;
		uint32_t len = 0, i, n = 150, base = fx->ngot;
		unsigned s = seed;

		for (i = 0; i < n; i++) {
			uint32_t body = (uint32_t)rand_r(&s) % (i % 10 == 0 ? 40000 : 3000);
			put_msg(&buf, &len, (uint8_t)(TL_TYPE_FUSE_MIN + rand_r(&s) % 200), i, body);
		}
		fx->hold = seed % 3 == 0; /* hold some runs' messages past their callback */
		assert_int_equal(push_random(fx, buf, len, 1 + seed * 400, &s), 0);
		assert_int_equal(fx->ngot - base, n);
		for (i = 0; i < n; i++) {
			assert_int_equal(fx->got[base + i].hdr.req_id, i);
			assert_true(fx->got[base + i].body_ok);
		}
		while (fx->nheld > 0)
			tl_msg_release(fx->held[--fx->nheld]);
		if (fx->nheld == 0 && fx->hold)
			fx->hold = 0;
		assert_int_equal(fx->refs, 0);
		gc_chunks(fx);
		free(buf);
		assert_true(tl_fr_at_boundary(&fx->fr));
	}
}

static void test_frame_huge_message(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;
	unsigned seed = 77;

	put_msg(&buf, &len, 100, 5, 8u << 20);
	put_msg(&buf, &len, 100, 6, 10);
	assert_int_equal(push_random(fx, buf, len, 64u << 10, &seed), 0);
	assert_int_equal(fx->ngot, 2);
	assert_true(fx->got[0].body_ok);
	assert_true(fx->got[0].iovcnt > 100);
	assert_true(fx->got[1].body_ok);
	free(buf);
}

static void test_frame_held_views_survive_chunk_release(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;
	unsigned seed = 3;

	put_msg(&buf, &len, 50, 11, 5000);
	fx->hold = 1;
	assert_int_equal(push_random(fx, buf, len, 700, &seed), 0);
	assert_int_equal(fx->nheld, 1);
	/* The test dropped its own references long ago; only the hold keeps bytes alive. */
	assert_true(body_matches(tl_msg_view_of(fx->held[0])));
	assert_true(fx->refs > 0);
	tl_msg_release(fx->held[0]);
	fx->nheld = 0;
	assert_int_equal(fx->refs, 0);
	free(buf);
}

static void test_frame_limit_refused(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;

	tl_fr_init(&fx->fr, fx->pool, 1000, 1024);
	put_msg(&buf, &len, 40, 1, 1000); /* exactly the limit: fine */
	put_msg(&buf, &len, 40, 2, 1001);
	put_msg(&buf, &len, 40, 3, 10);
	assert_int_equal(push_chunk(fx, buf, len), -EMSGSIZE);
	assert_int_equal(fx->ngot, 1);
	assert_true(fx->got[0].body_ok);
	assert_int_equal(fx->fr.dead, -EMSGSIZE);
	assert_non_null(fx->fr.why);
	/* Refused for good: later bytes are not looked at. */
	assert_int_equal(push_chunk(fx, buf, len), -EMSGSIZE);
	assert_int_equal(fx->ngot, 1);
	free(buf);
}

static void test_frame_bad_magic_refused(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, at;

	put_msg(&buf, &len, 40, 1, 100);
	at = put_msg(&buf, &len, 40, 2, 100);
	buf[at] ^= 0xff;
	assert_int_equal(push_chunk(fx, buf, 150), 0);
	assert_int_equal(push_chunk(fx, buf + 150, len - 150), -EBADMSG);
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->refs, 0);
	free(buf);
}

static void test_frame_type_zero_refused_mid_body(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, at;
	unsigned seed = 5;

	put_msg(&buf, &len, 40, 1, 3000);
	at = put_msg(&buf, &len, 40, 2, 100);
	buf[at + 3] = 0; /* type 0 is never valid */
	put_msg(&buf, &len, 40, 3, 100);
	assert_int_equal(push_random(fx, buf, len, 9, &seed), -EBADMSG);
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->refs, 0);
	free(buf);
}

static void test_frame_unknown_version_skipped(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, at;
	unsigned seed = 11;

	put_msg(&buf, &len, 40, 1, 100);
	at = put_msg(&buf, &len, 40, 2, 2000);
	buf[at + 2] = TL_MSG_VERSION + 1;
	at = put_msg(&buf, &len, 5, 3, 64); /* transport range, not a known type */
	put_msg(&buf, &len, TL_TYPE_ERROR, 4, 20);
	put_msg(&buf, &len, 40, 5, 100);
	assert_int_equal(push_random(fx, buf, len, 300, &seed), 0);
	assert_int_equal(fx->rejects, 2);
	assert_int_equal(fx->last_reject, -EOPNOTSUPP);
	assert_int_equal(fx->last_reject_req, 3);
	assert_int_equal(fx->ngot, 3);
	assert_int_equal(fx->got[0].hdr.req_id, 1);
	assert_int_equal(fx->got[1].hdr.req_id, 4);
	assert_int_equal(fx->got[1].hdr.type, TL_TYPE_ERROR);
	assert_int_equal(fx->got[2].hdr.req_id, 5);
	assert_true(fx->got[2].body_ok);
	free(buf);
}

static void test_frame_unknown_version_reports_version(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, at;

	at = put_msg(&buf, &len, 40, 8, 10);
	buf[at + 2] = 9;
	assert_int_equal(push_chunk(fx, buf, len), 0);
	assert_int_equal(fx->rejects, 1);
	assert_int_equal(fx->last_reject, -EPROTONOSUPPORT);
	assert_int_equal(fx->last_reject_req, 8);
	assert_true(tl_fr_at_boundary(&fx->fr));
	free(buf);
}

static void test_frame_held_limit_refused(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;

	tl_fr_pool_destroy(fx->pool);
	assert_int_equal(tl_fr_pool_create(&ck_ops, 2, &fx->pool), 0);
	tl_fr_init(&fx->fr, fx->pool, 1u << 20, 1024);
	fx->hold = 1;
	put_msg(&buf, &len, 40, 1, 10);
	put_msg(&buf, &len, 40, 2, 10);
	put_msg(&buf, &len, 40, 3, 10);
	assert_int_equal(push_chunk(fx, buf, len), -ENOBUFS);
	assert_int_equal(fx->ngot, 2);
	free(buf);
}

static void test_frame_max_segs_refused(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, i;
	int rc = 0;

	tl_fr_init(&fx->fr, fx->pool, 1u << 20, 4);
	put_msg(&buf, &len, 40, 1, 40);
	assert_int_equal(push_chunk(fx, buf, TL_MSG_HDR_LEN), 0);
	for (i = 0; i < 5 && rc == 0; i++)
		rc = push_chunk(fx, buf + TL_MSG_HDR_LEN + i * 8, 8);
	assert_int_equal(rc, -E2BIG);
	assert_int_equal(i, 5);
	assert_int_equal(fx->ngot, 0);
	free(buf);
}

static void test_frame_contiguous_same_chunk_merges(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;
	struct chunk c = { fx, 1, 0, NULL };

	/* The kernel backend appends reads into one buffer: one chunk, pushed in pieces. */
	put_msg(&buf, &len, 40, 1, 500);
	c.len = len;
	c.data = buf;
	assert_int_equal(tl_fr_push(&fx->fr, buf, 100, &c, &sink, fx), 0);
	assert_int_equal(tl_fr_push(&fx->fr, buf + 100, 200, &c, &sink, fx), 0);
	assert_int_equal(tl_fr_push(&fx->fr, buf + 300, len - 300, &c, &sink, fx), 0);
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->got[0].iovcnt, 1);
	assert_true(fx->got[0].body_ok);
	assert_int_equal(c.refcnt, 1);
	free(buf);
}

/*
 * Pushes stream bytes [0, len) as pieces of piece bytes lying in one chunk with a gap
 * between them (the buffers of an LRO chain under one reference), then drops the test's
 * reference, as the DPDK backend does after the frame.
 */
static struct chunk *push_chain(struct fx *fx, const uint8_t *p, uint32_t len, uint32_t piece)
{
	uint32_t gap = 64, npieces = (len + piece - 1) / piece, i;
	struct chunk *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->fx = fx;
	c->refcnt = 1;
	c->len = npieces * (piece + gap);
	c->data = malloc(c->len);
	assert_non_null(c->data);
	fx->chunks[fx->nchunks++] = c;
	for (i = 0; i < npieces; i++) {
		uint32_t n = len - i * piece < piece ? len - i * piece : piece;
		uint8_t *at = c->data + (size_t)i * (piece + gap);
		memcpy(at, p + (size_t)i * piece, n);
		assert_int_equal(tl_fr_push(&fx->fr, at, n, c, &sink, fx), 0);
	}
	ck_put(c);
	return c;
}

/* A message over a chain's pieces, held: one reference on the chain, not one per piece. */
static void test_frame_chain_held_once_per_chunk(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;
	struct chunk *a, *b;

	fx->hold = 1;
	put_msg(&buf, &len, 40, 1, 3000);
	put_msg(&buf, &len, 40, 2, 5000);
	a = push_chain(fx, buf, 6000, 1000);
	/* Message 1 done and held over 4 pieces of a; message 2 waits, over 3 more of them. */
	assert_int_equal(fx->ngot, 1);
	assert_int_equal(fx->got[0].iovcnt, 4);
	assert_int_equal(a->refcnt, 2);
	b = push_chain(fx, buf + 6000, len - 6000, 1000);
	assert_int_equal(fx->ngot, 2);
	assert_int_equal(fx->got[1].iovcnt, 6);
	assert_true(fx->got[0].body_ok && fx->got[1].body_ok);
	assert_int_equal(a->refcnt, 2);
	assert_int_equal(b->refcnt, 1);
	assert_int_equal(fx->refs, 3);
	tl_msg_release(fx->held[0]);
	assert_int_equal(a->refcnt, 1);
	tl_msg_release(fx->held[1]);
	assert_int_equal(a->refcnt, 0);
	assert_int_equal(b->refcnt, 0);
	fx->nheld = 0;
	free(buf);
}

static void test_frame_sink_stop_halts_push(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;

	put_msg(&buf, &len, 40, 1, 10);
	put_msg(&buf, &len, 40, 2, 10);
	put_msg(&buf, &len, 40, 3, 10);
	fx->stop_after = 1;
	assert_int_equal(push_chunk(fx, buf, len), -ECONNABORTED);
	assert_int_equal(fx->ngot, 1);
	free(buf);
}

static void test_frame_records_recycled(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0, i;
	unsigned seed = 19;

	for (i = 0; i < 2000; i++)
		put_msg(&buf, &len, 40, i, i % 97);
	assert_int_equal(push_random(fx, buf, len, 5000, &seed), 0);
	assert_int_equal(fx->ngot, 2000);
	/* Steady state: one record, reused for every message (no malloc per message). */
	assert_int_equal(fx->pool->total, 1);
	free(buf);
}

static void test_frame_fini_releases_partial(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = NULL;
	uint32_t len = 0;

	put_msg(&buf, &len, 40, 1, 1000);
	assert_int_equal(push_chunk(fx, buf, 600), 0);
	assert_true(fx->refs > 0);
	assert_false(tl_fr_at_boundary(&fx->fr));
	tl_fr_fini(&fx->fr);
	assert_int_equal(fx->refs, 0);
	free(buf);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_frame_one_chunk_one_view),
		T(test_frame_spanning_chunks_several_views),
		T(test_frame_one_byte_chunks),
		T(test_frame_random_chunkings),
		T(test_frame_huge_message),
		T(test_frame_held_views_survive_chunk_release),
		T(test_frame_limit_refused),
		T(test_frame_bad_magic_refused),
		T(test_frame_type_zero_refused_mid_body),
		T(test_frame_unknown_version_skipped),
		T(test_frame_unknown_version_reports_version),
		T(test_frame_held_limit_refused),
		T(test_frame_max_segs_refused),
		T(test_frame_contiguous_same_chunk_merges),
		T(test_frame_chain_held_once_per_chunk),
		T(test_frame_sink_stop_halts_push),
		T(test_frame_records_recycled),
		T(test_frame_fini_releases_partial),
	};

	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
