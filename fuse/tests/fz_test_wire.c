/*
 * fz_test_wire.c — shared test helpers for fuse/tests (see fz_test_wire.h). Linked into
 * every fuse test binary; plays the transport's part below the packer and above the
 * unpacker, without a network.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fz_test_wire.h"

void fzt_wire_init(struct fzt_wire *w)
{
	memset(w, 0, sizeof(*w));
}

static int fzt_output(void *arg, const struct fz_out *out)
{
	struct fzt_wire *w = arg;
	struct fzt_rec *r;
	uint32_t i, off = 0;

	if (w->fail_next > 0) {
		w->fail_next--;
		return -ENOBUFS;
	}
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		w->recs = realloc(w->recs, w->cap * sizeof(*w->recs));
		assert_non_null(w->recs);
	}
	r = &w->recs[w->n++];
	memset(r, 0, sizeof(*r));
	r->hdr = out->hdr;
	r->body = malloc(out->hdr.body_len ? out->hdr.body_len : 1);
	assert_non_null(r->body);
	for (i = 0; i < out->iovcnt; i++) {
		memcpy(r->body + off, out->iov[i].base, out->iov[i].len);
		off += out->iov[i].len;
	}
	assert_int_equal(off, out->hdr.body_len);
	r->first_base = out->iovcnt ? out->iov[0].base : NULL;
	r->done = out->done;
	r->done_arg = out->done_arg;
	r->at = w->now;
	if (w->complete_now) {
		r->completed = true;
		if (r->done)
			r->done(r->done_arg, 0);
	}
	return 0;
}

static bool fzt_busy(void *arg)
{
	return ((struct fzt_wire *)arg)->busy;
}

void fzt_wire_ops(struct fzt_wire *w, struct fz_peer_ops *ops)
{
	memset(ops, 0, sizeof(*ops));   /* frame storage from the heap unless a test says */
	ops->output = fzt_output;
	ops->wire_busy = fzt_busy;
	ops->arg = w;
}

void fzt_wire_complete_all(struct fzt_wire *w)
{
	uint32_t i;

	for (i = 0; i < w->n; i++) {
		struct fzt_rec *r = &w->recs[i];
		if (r->completed)
			continue;
		r->completed = true;
		if (r->done)
			r->done(r->done_arg, 0);
	}
}

void fzt_wire_fini(struct fzt_wire *w)
{
	uint32_t i;

	fzt_wire_complete_all(w);
	for (i = 0; i < w->n; i++)
		free(w->recs[i].body);
	free(w->recs);
	memset(w, 0, sizeof(*w));
}

void fzt_sink_deliver(void *arg, const struct tl_msg_view *m,
		      const struct tl_msg_view *carrier)
{
	struct fzt_sink *s = arg;
	struct fzt_got *g;
	uint32_t i;

	/* Every view lies inside the carrier's pieces: a view, never a copy. */
	for (i = 0; i < m->iovcnt; i++) {
		uint32_t j;
		bool inside = false;
		for (j = 0; j < carrier->iovcnt && !inside; j++)
			inside = m->iov[i].base >= carrier->iov[j].base &&
				 m->iov[i].base + m->iov[i].len <=
					 carrier->iov[j].base + carrier->iov[j].len;
		assert_true(inside);
	}

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->got = realloc(s->got, s->cap * sizeof(*s->got));
		assert_non_null(s->got);
	}
	g = &s->got[s->n++];
	g->hdr = m->hdr;
	g->body = malloc(m->hdr.body_len ? m->hdr.body_len : 1);
	assert_non_null(g->body);
	assert_int_equal(tl_view_copy(m, 0, g->body, m->hdr.body_len), 0);
}

void fzt_sink_fini(struct fzt_sink *s)
{
	uint32_t i;

	for (i = 0; i < s->n; i++)
		free(s->got[i].body);
	free(s->got);
	memset(s, 0, sizeof(*s));
}

int fzt_unpack_rec(struct fz_rx *rx, const struct fzt_rec *rec, uint32_t piece,
		   struct fzt_sink *sink, struct fz_rx_error *err)
{
	uint32_t len = rec->hdr.body_len, n = 0, off = 0;
	struct tl_iov *iov;
	struct tl_msg_view v;
	int rc;

	if (piece == 0)
		piece = len ? len : 1;
	iov = calloc(len / piece + 1, sizeof(*iov));
	assert_non_null(iov);
	while (off < len) {
		uint32_t take = len - off < piece ? len - off : piece;
		iov[n].base = rec->body + off;
		iov[n].len = take;
		n++;
		off += take;
	}
	v.hdr = rec->hdr;
	v.iov = iov;
	v.iovcnt = n;
	rc = fz_unpack(rx, &v, fzt_sink_deliver, sink, err);
	free(iov);
	return rc;
}

void fzt_u8(struct fzt_buf *b, uint8_t v)
{
	assert_true(b->n < sizeof(b->b));
	b->b[b->n++] = v;
}

void fzt_varint(struct fzt_buf *b, uint64_t v)
{
	while (v >= 0x80) {
		fzt_u8(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	fzt_u8(b, (uint8_t)v);
}

void fzt_bytes(struct fzt_buf *b, const void *p, uint32_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

void fzt_frame_view(struct tl_msg_view *v, struct tl_iov *iov, const struct fzt_buf *b,
		    uint32_t count)
{
	memset(v, 0, sizeof(*v));
	v->hdr.magic = TL_MSG_MAGIC;
	v->hdr.version = TL_MSG_VERSION;
	v->hdr.type = FZ_TYPE_FRAME;
	v->hdr.body_len = b->n;
	v->hdr.key_count = count;
	iov->base = b->b;
	iov->len = b->n;
	v->iov = iov;
	v->iovcnt = 1;
}
