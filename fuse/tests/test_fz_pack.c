/*
 * test_fz_pack.c — cmocka group for the packer (fz_pack.c), checked end to end through
 * the real unpacker: random mixes round trip in order, flush policy (full, explicit,
 * timer on a fake clock, autocork on a fake wire), zero copy of large messages, frame
 * recycling, and failures that change nothing.
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

struct pk {
	struct fzt_wire w;
	struct fz_peer *peer;
	struct fz_config cfg;
	uint8_t data[1 << 16];  /* the bodies messages lend */
	uint32_t done[4096];    /* completions per message index */
	int status[4096];
};

static void pk_done(void *arg, int status)
{
	uint32_t *slot = arg;

	(*slot)++;
	(void)status;
}

static int pk_setup(void **state)
{
	struct pk *p = calloc(1, sizeof(*p));
	uint32_t i;

	if (!p)
		return -1;
	fzt_wire_init(&p->w);
	fz_config_defaults(&p->cfg);
	p->cfg.tensor_fuse = true;
	p->cfg.fuse_max_bytes = 1024;
	p->cfg.fuse_threshold_bytes = 200;
	p->cfg.fuse_max_delay_us = 50;
	p->cfg.fuse_frames = 4;
	for (i = 0; i < sizeof(p->data); i++)
		p->data[i] = (uint8_t)(i * 131u + 7u);
	*state = p;
	return 0;
}

/* Leak check: every frame came back, and every lent body was completed exactly once. */
static int pk_teardown(void **state)
{
	struct pk *p = *state;

	fzt_wire_complete_all(&p->w);
	if (p->peer)
		assert_int_equal(fz_peer_in_flight(p->peer), 0);
	fz_peer_destroy(p->peer);
	fzt_wire_fini(&p->w);
	free(p);
	return 0;
}

static void pk_create(struct pk *p)
{
	struct fz_peer_ops ops;

	fzt_wire_ops(&p->w, &ops);
	assert_int_equal(fz_peer_create(&p->cfg, &ops, &p->peer), 0);
}

/* A message of len bytes lent from p->data at off, whose completion lands in done[idx]. */
static struct fz_msg pk_msg(struct pk *p, uint32_t idx, uint32_t off, uint32_t len,
			    struct tl_iov *iov)
{
	struct fz_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = 40;
	m.hdr.body_len = len;
	m.hdr.table_id = 3;
	m.hdr.req_id = 1000 + idx;
	m.hdr.key_count = len / 8;
	m.hdr.dim = 2;
	iov->base = p->data + off;
	iov->len = len;
	m.iov = iov;
	m.iovcnt = 1;
	m.done = pk_done;
	m.done_arg = &p->done[idx];
	return m;
}

static int pk_send(struct pk *p, uint32_t idx, uint32_t len, uint64_t now)
{
	struct tl_iov iov;
	struct fz_msg m = pk_msg(p, idx, (idx * 64u) % 32768u, len, &iov);

	return fz_peer_send(p->peer, &m, now);
}

static void assert_hdr_equal(const struct tl_msg_hdr *a, const struct tl_msg_hdr *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->aux, b->aux);
	assert_int_equal(a->body_len, b->body_len);
	assert_int_equal(a->table_id, b->table_id);
	assert_int_equal(a->req_id, b->req_id);
	assert_int_equal(a->key_count, b->key_count);
	assert_int_equal(a->dim, b->dim);
}

/* The unpacker delivered exactly ms[0..n): every header as sent, every body its iov's. */
static void assert_sink_sent(const struct fzt_sink *sink, const struct fz_msg *ms,
			     const struct tl_iov *iov, uint32_t n)
{
	assert_int_equal(sink->n, n);
	for (uint32_t i = 0; i < n; i++) {
		assert_hdr_equal(&sink->got[i].hdr, &ms[i].hdr);
		assert_memory_equal(sink->got[i].body, iov[i].base, iov[i].len);
	}
}

static void test_fz_pack_passthrough_when_off(void **state)
{
	struct pk *p = *state;
	struct tl_iov iov[10];
	struct fz_msg m[10];
	uint32_t i;

	p->cfg.tensor_fuse = false;
	pk_create(p);
	p->w.busy = true;
	for (i = 0; i < 10; i++) {
		m[i] = pk_msg(p, i, i * 10, 10, &iov[i]);
		assert_int_equal(fz_peer_send(p->peer, &m[i], 0), 0);
	}
	assert_int_equal(p->w.n, 10);
	for (i = 0; i < 10; i++) {
		assert_hdr_equal(&p->w.recs[i].hdr, &m[i].hdr);
		assert_ptr_equal(p->w.recs[i].first_base, iov[i].base); /* zero copy */
		assert_int_equal(p->done[i], 0);  /* lent until the wire is done */
	}
	fzt_wire_complete_all(&p->w);
	for (i = 0; i < 10; i++)
		assert_int_equal(p->done[i], 1);
	assert_int_equal(fz_peer_stats(p->peer)->frames, 0);
	assert_int_equal(fz_peer_stats(p->peer)->msgs_alone, 10);
}

/* Random header fields, including zeros, maxima and jumps in req_id. */
static void rand_hdr(struct tl_msg_hdr *h, uint64_t *req)
{
	static const uint8_t types[] = { 1, 2, 15, 32, 33, 100, 255 };
	uint32_t r = (uint32_t)rand();

	memset(h, 0, sizeof(*h));
	h->type = types[r % sizeof(types)];
	h->flags = (r & 8) ? (uint16_t)rand() : 0;
	h->aux = (r & 16) ? ((r & 32) ? UINT16_MAX : (uint16_t)rand()) : 0;
	h->table_id = (r & 64) ? ((r & 128) ? UINT32_MAX : (uint32_t)rand()) : 0;
	h->key_count = (r & 256) ? (uint32_t)rand() : 0;
	h->dim = (r & 512) ? ((r & 1024) ? UINT32_MAX : (uint32_t)rand() % 512) : 0;
	switch ((r >> 11) % 5) {
	case 0: *req = (uint64_t)rand() << 33 ^ (uint64_t)rand(); break; /* jump */
	case 1: *req -= (uint64_t)(rand() % 1000); break;                  /* backwards */
	case 2: break;                                                       /* same */
	default: (*req)++; break;                                            /* next */
	}
	if ((r >> 14) % 50 == 0)
		*req = UINT64_MAX;
	h->req_id = *req;
}

static void roundtrip_one_seed(struct pk *p, unsigned seed, uint32_t n_msgs)
{
	struct tl_msg_hdr *sent = calloc(n_msgs, sizeof(*sent));
	uint32_t *offs = calloc(n_msgs, sizeof(*offs));
	struct fz_rx *rx;
	struct fzt_sink sink = { 0 };
	struct fz_rx_error err;
	uint64_t req = 1, now = 0;
	uint32_t i, large = 0, k;
	static const uint32_t pieces[] = { 0, 3, 7, 100, 333 };

	assert_non_null(sent);
	assert_non_null(offs);
	srand(seed);
	for (i = 0; i < n_msgs; i++) {
		struct tl_iov iov[3];
		struct fz_msg m;
		uint32_t len, split;

		memset(&m, 0, sizeof(m));
		rand_hdr(&m.hdr, &req);
		len = rand() % 6 == 0 ? p->cfg.fuse_threshold_bytes + 1 + (uint32_t)rand() % 3000
				      : 1 + (uint32_t)rand() % p->cfg.fuse_threshold_bytes;
		large += len > p->cfg.fuse_threshold_bytes;
		m.hdr.body_len = len;
		offs[i] = (uint32_t)rand() % (sizeof(p->data) - len);
		/* Bodies lent in up to three pieces. */
		split = len / 3;
		iov[0] = (struct tl_iov){ p->data + offs[i], split };
		iov[1] = (struct tl_iov){ p->data + offs[i] + split, 0 };
		iov[2] = (struct tl_iov){ p->data + offs[i] + split, len - split };
		m.iov = rand() % 2 ? iov : iov + 2;
		m.iovcnt = m.iov == iov ? 3 : 1;
		if (m.iovcnt == 1)
			iov[2] = (struct tl_iov){ p->data + offs[i], len };
		m.done = pk_done;
		m.done_arg = &p->done[i];
		sent[i] = m.hdr;
		p->w.busy = rand() % 8 != 0;
		now += (uint64_t)(rand() % 10);
		assert_int_equal(fz_peer_send(p->peer, &m, now), 0);
		if (rand() % 16 == 0)
			fzt_wire_complete_all(&p->w);      /* acks arrive now and then */
		if (rand() % 32 == 0)
			assert_int_equal(fz_peer_poll(p->peer, now), 0);
	}
	assert_int_equal(fz_peer_flush(p->peer, now), 0);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(fz_peer_in_flight(p->peer), 0);
	for (i = 0; i < n_msgs; i++)
		assert_int_equal(p->done[i], 1);

	assert_int_equal(fz_rx_create(&rx), 0);
	for (k = 0; k < p->w.n; k++) {
		const struct fzt_rec *r = &p->w.recs[k];
		if (r->hdr.type == FZ_TYPE_FRAME)
			assert_true(r->hdr.body_len <= p->cfg.fuse_max_bytes);
		assert_int_equal(fzt_unpack_rec(rx, r, pieces[k % 5], &sink, &err), 0);
	}
	assert_int_equal(sink.n, n_msgs);
	for (i = 0; i < n_msgs; i++) {
		assert_hdr_equal(&sink.got[i].hdr, &sent[i]);
		assert_memory_equal(sink.got[i].body, p->data + offs[i], sent[i].body_len);
	}
	assert_int_equal(fz_peer_stats(p->peer)->msgs, n_msgs);
	assert_true(fz_peer_stats(p->peer)->msgs_alone >= large);
	assert_true(fz_peer_stats(p->peer)->frames > 0);
	fz_rx_destroy(rx);
	fzt_sink_fini(&sink);
	free(sent);
	free(offs);
}

static void test_fz_pack_roundtrip_random_mix_in_order(void **state)
{
	struct pk *p = *state;
	unsigned seed;

	for (seed = 1; seed <= 6; seed++) {
		memset(p->done, 0, sizeof(p->done));
		pk_create(p);
		roundtrip_one_seed(p, seed, 2000);
		fz_peer_destroy(p->peer);
		p->peer = NULL;
		fzt_wire_fini(&p->w);
	}
}

static void test_fz_pack_roundtrip_sync_completion(void **state)
{
	struct pk *p = *state;

	/* An output side that finishes inside output (a copying kernel backend). */
	p->w.complete_now = true;
	p->cfg.fuse_frames = 2;
	pk_create(p);
	roundtrip_one_seed(p, 99, 1500);
	assert_int_equal(fz_peer_stats(p->peer)->alone_no_frame, 0);
}

/*
 * The promise to every message: fusion holds it at most fuse_max_delay_us, given a caller
 * that polls when fz_peer_deadline says. Random sends, sizes, busy/idle and acks on a
 * fake clock; each message's send time is compared with when its frame left.
 */
static void test_fz_pack_delay_bounded_random_fake_clock(void **state)
{
	struct pk *p = *state;
	uint64_t sent_at[3000], now = 1000;
	struct fzt_sink sink = { 0 };
	struct fz_rx *rx;
	uint32_t i, k, n = 3000;

	pk_create(p);
	srand(4242);
	for (i = 0; i < n; i++) {
		uint64_t next = now + (uint64_t)(rand() % 40);
		/* The caller's timer fires at the deadline, not after it. */
		while (fz_peer_deadline(p->peer) <= next) {
			now = fz_peer_deadline(p->peer);
			p->w.now = now;
			assert_int_equal(fz_peer_poll(p->peer, now), 0);
			assert_true(fz_peer_deadline(p->peer) > now);  /* it went */
		}
		now = next;
		p->w.now = now;
		p->w.busy = rand() % 10 != 0;
		if (rand() % 5 == 0)
			fzt_wire_complete_all(&p->w);
		sent_at[i] = now;
		assert_int_equal(pk_send(p, i, rand() % 4 == 0 ? 300 : 1 + rand() % 200, now), 0);
	}
	now = fz_peer_deadline(p->peer);
	p->w.now = now;
	assert_int_equal(fz_peer_poll(p->peer, now), 0);
	assert_int_equal(fz_peer_deadline(p->peer), UINT64_MAX);

	assert_int_equal(fz_rx_create(&rx), 0);
	for (k = 0, i = 0; k < p->w.n; k++) {
		assert_int_equal(fzt_unpack_rec(rx, &p->w.recs[k], 0, &sink, NULL), 0);
		for (; i < sink.n; i++) {
			assert_int_equal(sink.got[i].hdr.req_id, 1000 + i);  /* in order */
			assert_true(p->w.recs[k].at >= sent_at[i]);
			assert_true(p->w.recs[k].at - sent_at[i] <= p->cfg.fuse_max_delay_us);
		}
	}
	assert_int_equal(i, n);
	assert_true(fz_peer_stats(p->peer)->flush[FZ_FLUSH_TIMER] > 0);
	assert_true(fz_peer_stats(p->peer)->msgs_fused > n / 2);
	fz_rx_destroy(rx);
	fzt_sink_fini(&sink);
}

static void test_fz_pack_large_alone_zero_copy_in_order(void **state)
{
	struct pk *p = *state;
	struct tl_iov iov;
	struct fz_msg big;

	pk_create(p);
	p->w.busy = true;
	assert_int_equal(pk_send(p, 0, 10, 0), 0);
	assert_int_equal(pk_send(p, 1, 20, 0), 0);
	big = pk_msg(p, 2, 5000, 1000, &iov);
	assert_int_equal(fz_peer_send(p->peer, &big, 0), 0);
	assert_int_equal(p->w.n, 2);
	assert_int_equal(p->w.recs[0].hdr.type, FZ_TYPE_FRAME);
	assert_int_equal(p->w.recs[0].hdr.key_count, 2);
	assert_int_equal(p->w.recs[1].hdr.type, 40);
	assert_ptr_equal(p->w.recs[1].first_base, p->data + 5000);
	assert_int_equal(p->done[0], 1);  /* copied: the owner's memory is free at once */
	assert_int_equal(p->done[2], 0);  /* lent until acked */
	assert_int_equal(fz_peer_stats(p->peer)->flush[FZ_FLUSH_LARGE], 1);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(p->done[2], 1);
}

static void test_fz_pack_flush_when_full(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;
	uint32_t i, subs = 0;

	pk_create(p);
	p->w.busy = true;
	for (i = 0; i < 100; i++) {
		assert_int_equal(pk_send(p, i, 64, 0), 0);
		fzt_wire_complete_all(&p->w);  /* acks keep frame buffers free */
	}
	st = fz_peer_stats(p->peer);
	assert_true(p->w.n >= 6);
	for (i = 0; i < p->w.n; i++) {
		assert_int_equal(p->w.recs[i].hdr.type, FZ_TYPE_FRAME);
		assert_true(p->w.recs[i].hdr.body_len <= p->cfg.fuse_max_bytes);
		/* Full means the next 64 B message with its header would not fit. */
		assert_true(p->w.recs[i].hdr.body_len + 64 + 8 > p->cfg.fuse_max_bytes);
		subs += p->w.recs[i].hdr.key_count;
	}
	assert_int_equal(st->flush[FZ_FLUSH_FULL], p->w.n);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	subs += p->w.recs[p->w.n - 1].hdr.key_count;
	assert_int_equal(subs, 100);
	assert_int_equal(st->flush[FZ_FLUSH_EXPLICIT], 1);
}

/*
 * The ramp: while the wire stays busy, the first frame of a burst holds at most
 * FZ_RAMP_START bytes and each full one lets the next hold twice as much, up to
 * fuse_max_bytes; after an explicit flush the next burst starts small again.
 */
static void test_fz_pack_frames_ramp_up_then_restart(void **state)
{
	struct pk *p = *state;
	uint32_t i, cap = FZ_RAMP_START, sent = 0;

	p->cfg.fuse_max_bytes = 32768;
	p->cfg.fuse_max_msgs = 4096;
	pk_create(p);
	p->w.busy = true;
	while (p->w.n < 6) {
		assert_int_equal(pk_send(p, sent % 4096u, 64, 0), 0);
		sent++;
		fzt_wire_complete_all(&p->w);
	}
	for (i = 0; i < 6; i++) {
		uint32_t len = p->w.recs[i].hdr.body_len;
		assert_true(len <= cap);
		assert_true(len + 64 + 8 > cap);  /* full: the next message did not fit */
		cap = cap * 2 > p->cfg.fuse_max_bytes ? p->cfg.fuse_max_bytes : cap * 2;
	}
	assert_int_equal(p->w.recs[3].hdr.body_len > 16384, 1);  /* it reached the maximum */
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	fzt_wire_complete_all(&p->w);
	for (i = p->w.n; p->w.n == i;) {
		assert_int_equal(pk_send(p, sent % 4096u, 64, 0), 0);
		sent++;
		fzt_wire_complete_all(&p->w);
	}
	assert_true(p->w.recs[p->w.n - 1].hdr.body_len <= FZ_RAMP_START);
}

static void test_fz_pack_flush_at_max_msgs(void **state)
{
	struct pk *p = *state;
	uint32_t i;

	p->cfg.fuse_max_msgs = 5;
	pk_create(p);
	p->w.busy = true;
	for (i = 0; i < 12; i++)
		assert_int_equal(pk_send(p, i, 1, 0), 0);
	assert_int_equal(p->w.n, 2);
	assert_int_equal(p->w.recs[0].hdr.key_count, 5);
	assert_int_equal(p->w.recs[1].hdr.key_count, 5);
	assert_int_equal(fz_peer_stats(p->peer)->flush[FZ_FLUSH_FULL], 2);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	assert_int_equal(p->w.recs[2].hdr.key_count, 2);
}

static void test_fz_pack_flush_explicit(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;

	pk_create(p);
	p->w.busy = true;
	assert_int_equal(pk_send(p, 0, 1, 0), 0);
	assert_int_equal(pk_send(p, 1, 2, 0), 0);
	assert_int_equal(pk_send(p, 2, 3, 0), 0);
	assert_int_equal(p->w.n, 0);
	assert_int_equal(fz_peer_flush(p->peer, 1), 0);
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.key_count, 3);
	assert_int_equal(p->w.recs[0].hdr.req_id, 1000);
	assert_int_equal(fz_peer_flush(p->peer, 2), 0);  /* nothing open: no-op */
	assert_int_equal(p->w.n, 1);
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->frames, 1);
	assert_int_equal(st->flush[FZ_FLUSH_EXPLICIT], 1);
	assert_int_equal(st->subs_hist[1], 1);  /* 2-3 sub-messages */
}

static void test_fz_pack_timer_bounds_delay_fake_clock(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;

	pk_create(p);
	p->w.busy = true;
	assert_int_equal(fz_peer_deadline(p->peer), UINT64_MAX);
	assert_int_equal(pk_send(p, 0, 16, 1000), 0);
	assert_int_equal(fz_peer_deadline(p->peer), 1050);
	assert_int_equal(pk_send(p, 1, 16, 1030), 0);
	assert_int_equal(fz_peer_poll(p->peer, 1049), 0);
	assert_int_equal(p->w.n, 0);
	assert_int_equal(fz_peer_poll(p->peer, 1050), 0);
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.key_count, 2);
	assert_int_equal(fz_peer_deadline(p->peer), UINT64_MAX);

	/* A late send flushes by itself when the caller has not polled in time. */
	assert_int_equal(pk_send(p, 2, 16, 2000), 0);
	assert_int_equal(pk_send(p, 3, 16, 2060), 0);
	assert_int_equal(p->w.n, 2);
	assert_int_equal(p->w.recs[1].hdr.key_count, 2);
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->flush[FZ_FLUSH_TIMER], 2);
}

static void test_fz_pack_autocork_idle_wire_not_held(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;

	pk_create(p);
	/* A lone message on an idle wire goes at once, alone, by reference. */
	p->w.busy = false;
	assert_int_equal(pk_send(p, 0, 16, 0), 0);
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.type, 40);
	assert_ptr_equal(p->w.recs[0].first_base, p->data + 0);
	assert_int_equal(fz_peer_deadline(p->peer), UINT64_MAX);

	/* While the wire is busy, messages batch... */
	p->w.busy = true;
	assert_int_equal(pk_send(p, 1, 16, 1), 0);
	assert_int_equal(pk_send(p, 2, 16, 2), 0);
	assert_int_equal(p->w.n, 1);
	/* ...and go as soon as the wire is seen idle, before the timer. */
	p->w.busy = false;
	assert_int_equal(fz_peer_poll(p->peer, 3), 0);
	assert_int_equal(p->w.n, 2);
	assert_int_equal(p->w.recs[1].hdr.key_count, 2);

	/* A send that finds the wire idle with a frame open joins it and flushes. */
	p->w.busy = true;
	assert_int_equal(pk_send(p, 3, 16, 4), 0);
	p->w.busy = false;
	assert_int_equal(pk_send(p, 4, 16, 5), 0);
	assert_int_equal(p->w.n, 3);
	assert_int_equal(p->w.recs[2].hdr.key_count, 2);
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->flush[FZ_FLUSH_IDLE], 2);
	assert_int_equal(st->msgs_alone, 1);
	assert_int_equal(st->msgs_fused, 4);
}

static void test_fz_pack_frames_exhausted_go_alone(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;

	p->cfg.fuse_frames = 2;
	pk_create(p);
	p->w.busy = true;
	assert_int_equal(pk_send(p, 0, 16, 0), 0);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	assert_int_equal(pk_send(p, 1, 16, 0), 0);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	assert_int_equal(fz_peer_in_flight(p->peer), 2);
	/* No frame buffer free: the message goes alone instead of waiting or allocating. */
	assert_int_equal(pk_send(p, 2, 16, 0), 0);
	assert_int_equal(p->w.n, 3);
	assert_int_equal(p->w.recs[2].hdr.type, 40);
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->alone_no_frame, 1);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(fz_peer_in_flight(p->peer), 0);
	assert_int_equal(pk_send(p, 3, 16, 0), 0);
	assert_int_equal(pk_send(p, 4, 16, 0), 0);
	assert_int_equal(p->w.n, 3);  /* fused again, frame open */
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	assert_int_equal(p->w.recs[3].hdr.type, FZ_TYPE_FRAME);
}

/*
 * A frame that closes holding one message leaves as that message: its own header, its
 * body from the frame (not the caller's memory, already given back), no sub-header; the
 * frame buffer is in flight until the output side completes it.
 */
static void test_fz_pack_frame_of_one_leaves_as_its_message(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;
	struct tl_iov iov;
	struct fz_msg m;
	struct fz_rx *rx;
	struct fzt_sink sink = { 0 };
	struct fz_rx_error err;
	uint32_t len;

	pk_create(p);
	p->w.busy = true;
	for (len = 0; len <= 200; len += 100) {  /* empty, middling, at the threshold */
		uint32_t idx = len / 100, k = p->w.n;
		m = pk_msg(p, idx, 100 + len, len, &iov);
		m.hdr.flags = 5;
		m.hdr.aux = 300;
		assert_int_equal(fz_peer_send(p->peer, &m, 0), 0);
		assert_int_equal(p->done[idx], 1);   /* copied: the caller's memory is free */
		assert_int_equal(fz_peer_flush(p->peer, 0), 0);
		assert_int_equal(p->w.n, k + 1);
		assert_hdr_equal(&p->w.recs[k].hdr, &m.hdr);
		assert_true(len == 0 || p->w.recs[k].first_base != iov.base);
		if (len)
			assert_memory_equal(p->w.recs[k].body, iov.base, len);
		assert_int_equal(fz_peer_in_flight(p->peer), idx + 1);
	}
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->frames, 0);
	assert_int_equal(st->frames_single, 3);
	assert_int_equal(st->msgs_fused, 3);
	assert_int_equal(st->bytes_saved, 0);
	assert_int_equal(st->flush[FZ_FLUSH_EXPLICIT], 3);
	/* The peer sees plain messages. */
	assert_int_equal(fz_rx_create(&rx), 0);
	for (len = 0; len < 3; len++)
		assert_int_equal(fzt_unpack_rec(rx, &p->w.recs[len], 0, &sink, &err), 0);
	assert_int_equal(fz_rx_stats(rx)->msgs, 3);
	assert_int_equal(fz_rx_stats(rx)->frames, 0);
	assert_int_equal(sink.n, 3);
	fz_rx_destroy(rx);
	fzt_sink_fini(&sink);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(fz_peer_in_flight(p->peer), 0);
}

static void test_fz_pack_output_failure_changes_nothing(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;
	struct fz_tx_stats before;
	uint32_t i;

	pk_create(p);
	st = fz_peer_stats(p->peer);
	p->w.busy = true;
	assert_int_equal(pk_send(p, 0, 16, 0), 0);
	p->w.fail_next = 1;
	assert_int_equal(fz_peer_flush(p->peer, 0), -ENOBUFS);
	assert_int_equal(fz_peer_deadline(p->peer), 50);  /* still open */
	assert_int_equal(st->frames, 0);
	assert_int_equal(fz_peer_in_flight(p->peer), 0);

	/* Fill the frame (16 B + 9 x 100 B); the 10th 100 B message needs a FULL flush,
	 * and when that flush fails the message is refused whole. */
	for (i = 1; i < 10; i++)
		assert_int_equal(pk_send(p, i, 100, 0), 0);
	assert_int_equal(p->w.n, 0);
	before = *st;
	p->w.fail_next = 1;
	assert_int_equal(pk_send(p, 10, 100, 0), -ENOBUFS);
	assert_int_equal(p->done[10], 0);
	assert_memory_equal(&before, st, sizeof(before));
	assert_int_equal(p->w.n, 0);
	/* Retried, it goes: the full frame first, then the message in a new one. */
	assert_int_equal(pk_send(p, 10, 100, 0), 0);
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.key_count, 10);
	assert_int_equal(p->done[10], 1);

	/* A large message: the open frame's flush fails, nothing counted, owner not called. */
	before = *st;
	p->w.fail_next = 1;
	assert_int_equal(pk_send(p, 20, 1000, 0), -ENOBUFS);
	assert_memory_equal(&before, st, sizeof(before));
	/* The frame goes, then output refuses the large message itself. */
	p->w.fail_next = 0;
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	before = *st;
	p->w.fail_next = 1;
	assert_int_equal(pk_send(p, 20, 1000, 0), -ENOBUFS);
	assert_memory_equal(&before, st, sizeof(before));
	assert_int_equal(p->done[20], 0);
	assert_int_equal(pk_send(p, 20, 1000, 0), 0);
	assert_int_equal(p->w.n, 3);
	assert_int_equal(p->w.recs[2].hdr.type, 40);
}

static void test_fz_pack_bad_message_refused(void **state)
{
	struct pk *p = *state;
	struct tl_iov iov;
	struct fz_msg m;

	pk_create(p);
	p->w.busy = true;
	m = pk_msg(p, 0, 0, 16, &iov);
	m.hdr.type = FZ_TYPE_FRAME;
	assert_int_equal(fz_peer_send(p->peer, &m, 0), -EINVAL);
	m.hdr.type = 31;
	assert_int_equal(fz_peer_send(p->peer, &m, 0), -EINVAL);
	m.hdr.type = 0;
	assert_int_equal(fz_peer_send(p->peer, &m, 0), -EINVAL);
	m = pk_msg(p, 0, 0, 16, &iov);
	m.hdr.body_len = 17;
	assert_int_equal(fz_peer_send(p->peer, &m, 0), -EINVAL);
	m = pk_msg(p, 0, 0, 16, &iov);
	m.iov = NULL;
	assert_int_equal(fz_peer_send(p->peer, &m, 0), -EINVAL);
	assert_int_equal(fz_peer_send(p->peer, NULL, 0), -EINVAL);
	assert_int_equal(p->done[0], 0);
	assert_int_equal(fz_peer_stats(p->peer)->msgs, 0);
	assert_int_equal(fz_peer_deadline(p->peer), UINT64_MAX);
}

/*
 * fz_peer_send_many: a step's messages in one call pack as one at a time would (large ones
 * alone, in order), and a bad message stops the call there: the ones before it taken (and
 * completed), it and the rest not.
 */
static void test_fz_pack_send_many(void **state)
{
	struct pk *p = *state;
	struct fz_msg ms[120];
	struct tl_iov iov[120];
	struct fzt_sink sink;
	struct fz_rx_error err;
	struct fz_rx *rx;
	uint32_t i, k, taken = 99;

	memset(&sink, 0, sizeof(sink));
	p->cfg.fuse_frames = 16;             /* none goes alone for want of a frame */
	pk_create(p);
	p->w.busy = true;
	for (i = 0; i < 120; i++)
		ms[i] = pk_msg(p, i, i * 97u, i % 40 == 7 ? 900 : 1 + i % 150, &iov[i]);
	assert_int_equal(fz_peer_send_many(p->peer, ms, 60, 0, &taken), 0);
	assert_int_equal(taken, 60);
	ms[70].hdr.body_len++;               /* not its iov's length */
	assert_int_equal(fz_peer_send_many(p->peer, ms + 60, 60, 0, &taken), -EINVAL);
	assert_int_equal(taken, 10);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	fzt_wire_complete_all(&p->w);
	for (i = 0; i < 120; i++)
		assert_int_equal(p->done[i], i < 70 ? 1 : 0);
	assert_int_equal(fz_peer_stats(p->peer)->msgs, 70);
	assert_int_equal(fz_peer_stats(p->peer)->msgs_alone, 2);   /* #7 and #47 */
	assert_int_equal(fz_rx_create(&rx), 0);
	for (k = 0; k < p->w.n; k++)
		assert_int_equal(fzt_unpack_rec(rx, &p->w.recs[k], 0, &sink, &err), 0);
	assert_sink_sent(&sink, ms, iov, 70);
	/* Arguments. */
	assert_int_equal(fz_peer_send_many(p->peer, NULL, 1, 0, &taken), -EINVAL);
	assert_int_equal(fz_peer_send_many(p->peer, ms, 1, 0, NULL), -EINVAL);
	assert_int_equal(fz_peer_send_many(NULL, ms, 1, 0, &taken), -EINVAL);
	assert_int_equal(fz_peer_send_many(p->peer, ms, 0, 0, &taken), 0);
	assert_int_equal(taken, 0);
	fz_rx_destroy(rx);
	fzt_sink_fini(&sink);
}

static void test_fz_pack_stats_bytes_saved(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;
	uint32_t i, sub_hdr_bytes;

	pk_create(p);
	p->w.busy = true;
	for (i = 0; i < 10; i++)
		assert_int_equal(pk_send(p, i, 64, 0), 0);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	st = fz_peer_stats(p->peer);
	sub_hdr_bytes = p->w.recs[0].hdr.body_len - 10 * 64;
	/* type, present, len, table_id, req delta (except the first), key_count, dim */
	assert_int_equal(sub_hdr_bytes, 10 * 7 - 1);
	assert_int_equal(st->frames, 1);
	assert_int_equal(st->frames_saved, 9);
	assert_int_equal(st->bytes_saved, 32 * 9 - (int64_t)sub_hdr_bytes);
	assert_int_equal(st->subs_hist[3], 1);  /* 8-15 */
}

/*
 * The packer stores a sub-header that repeats the last one (same fields, same req_id
 * step) as the bytes it built at the first repeat, with no encoding. Runs of one shape (req_id stepping by 1, 2
 * or 3), each broken by a message that differs in one field only, each field in turn, by
 * the smallest change: every header and body comes out of the real unpacker as sent, and
 * the frames hold the sub-headers a fresh encoding would (their byte count matches).
 */
static void test_fz_pack_repeated_sub_headers(void **state)
{
	struct pk *p = *state;
	struct fz_msg ms[80];
	struct tl_iov iov[80];
	struct fzt_sink sink;
	struct fz_rx_error err;
	struct fz_rx *rx;
	uint8_t sh[FZ_SUB_HDR_MAX];
	uint64_t req = 1000, prev = 0;
	uint32_t i, k, n = 0, field, r, taken, hdr_bytes, frames = 0;

	memset(&sink, 0, sizeof(sink));
	p->cfg.fuse_frames = 16;
	p->cfg.fuse_max_bytes = 8192;
	pk_create(p);
	p->w.busy = true;
	for (field = 0; field <= 10; field++) {
		uint64_t step = 1 + field % 3;

		for (r = 0; r <= 5; r++, n++) {
			ms[n] = pk_msg(p, n, n * 7u, 64, &iov[n]);
			ms[n].hdr.table_id = 64;
			ms[n].hdr.key_count = 0;
			ms[n].hdr.dim = 16;
			ms[n].hdr.req_id = req += step;
			if (r < 5)
				continue;
			switch (field) {          /* the sixth differs in one field */
			case 0: ms[n].hdr.type = 41; break;
			case 1: ms[n].hdr.flags = 1; break;
			case 2: ms[n].hdr.aux = 1; break;
			case 3: ms[n].hdr.body_len = iov[n].len = 63; break;
			case 4: ms[n].hdr.table_id = 65; break;
			case 5: ms[n].hdr.req_id = ++req; break;
			case 6: ms[n].hdr.req_id = --req; break;
			case 7: ms[n].hdr.key_count = 1; break;
			case 8: ms[n].hdr.dim = 17; break;
			case 9: ms[n].hdr.dim = 128; break;
			default: ms[n].hdr.body_len = iov[n].len = 0; break;
			}
		}
	}
	assert_int_equal(fz_peer_send_many(p->peer, ms, n, 0, &taken), 0);
	assert_int_equal(taken, n);
	assert_int_equal(fz_peer_flush(p->peer, 0), 0);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(fz_peer_stats(p->peer)->msgs_fused, n);
	assert_int_equal(fz_rx_create(&rx), 0);
	for (k = 0, i = 0; k < p->w.n; k++) {
		const struct fzt_rec *rec = &p->w.recs[k];
		uint32_t count = rec->hdr.type == FZ_TYPE_FRAME ? rec->hdr.key_count : 1;

		assert_int_equal(fzt_unpack_rec(rx, rec, k % 2 ? 0 : 333, &sink, &err), 0);
		if (rec->hdr.type != FZ_TYPE_FRAME) {
			i++;
			continue;
		}
		/* A fresh encoding of the same sub-headers takes as many bytes. */
		for (hdr_bytes = 0, r = 0; r < count; r++, i++) {
			prev = r == 0 ? ms[i].hdr.req_id : ms[i - 1].hdr.req_id;
			hdr_bytes += fz_sub_hdr_put(sh, &ms[i].hdr, prev) + ms[i].hdr.body_len;
		}
		assert_int_equal(rec->hdr.body_len, hdr_bytes);
		frames++;
	}
	assert_int_equal(i, n);
	assert_true(frames >= 2);
	assert_sink_sent(&sink, ms, iov, n);
	fz_rx_destroy(rx);
	fzt_sink_fini(&sink);
}

/*
 * The packer builds sub-headers of up to 16 bytes in registers (fz_sub_hdr_word): for
 * random headers, fields of every width and req_id steps either way, it gives the bytes
 * fz_sub_hdr_put writes whenever they fit 16, and says 0 exactly when they do not.
 */
static void test_fz_pack_sub_hdr_word_matches_put(void **state)
{
	uint8_t put[FZ_SUB_HDR_MAX], word[16];
	uint64_t req = 1, prev;
	uint32_t i, n, k, fits = 0;
	struct fz_word w;

	(void)state;
	srand(11);
	for (i = 0; i < 200000; i++) {
		struct tl_msg_hdr h;

		prev = req;
		rand_hdr(&h, &req);
		h.body_len = (uint32_t)rand() >> (rand() % 32);
		if (h.type >= TL_TYPE_FUSE_MIN && h.type <= TL_TYPE_FUSE_MAX)
			h.type = 40;
		if (i % 3 == 0) {               /* mostly short fields, as small tensors have */
			h.flags &= 0x7f;
			h.aux &= 0x7f;
			h.table_id &= 0x7f;
			h.key_count &= 0xff;
			h.dim &= 0xff;
			h.body_len &= 0x3ff;
		}
		k = fz_sub_hdr_put(put, &h, prev);
		n = fz_sub_hdr_word(&h, prev, &w);
		if (k > 16) {
			assert_int_equal(n, 0);
			continue;
		}
		assert_int_equal(n, k);
		for (k = 0; k < 16; k++)
			word[k] = (uint8_t)((k < 8 ? w.lo : w.hi) >> (8 * (k % 8)));
		assert_memory_equal(word, put, n);
		fits++;
	}
	assert_true(fits > 20000 && fits < 180000);   /* both kinds were met */
}

/* Frame storage from the output side's allocator: asked for once, given back once. */
static struct pk_mem {
	void *arg;
	uint8_t *block;
	size_t size;
	size_t skew;        /* hand out block + skew (a block off its 64-byte line) */
	int allocs, frees;
} pk_mem;

static void *pk_mem_alloc(void *arg, size_t size)
{
	assert_ptr_equal(arg, pk_mem.arg);   /* the hooks get ops.arg, as output does */
	pk_mem.allocs++;
	pk_mem.size = size;
	pk_mem.block = aligned_alloc(64, (size + pk_mem.skew + 63) & ~(size_t)63);
	return pk_mem.block + pk_mem.skew;
}

static void pk_mem_free(void *arg, void *p)
{
	assert_ptr_equal(arg, pk_mem.arg);
	assert_ptr_equal(p, pk_mem.block + pk_mem.skew);
	pk_mem.frees++;
	free(pk_mem.block);
}

static void test_fz_pack_frame_memory_from_output_side(void **state)
{
	struct pk *p = *state;
	struct fz_peer_ops ops;
	struct fz_peer *peer;
	struct tl_iov iov;
	struct fz_msg m;
	uint32_t i;

	memset(&pk_mem, 0, sizeof(pk_mem));
	pk_mem.arg = &p->w;
	fzt_wire_ops(&p->w, &ops);
	/* One hook without the other is refused: the block must go back where it came from. */
	ops.mem_alloc = pk_mem_alloc;
	assert_int_equal(fz_peer_create(&p->cfg, &ops, &peer), -EINVAL);
	ops.mem_alloc = NULL;
	ops.mem_free = pk_mem_free;
	assert_int_equal(fz_peer_create(&p->cfg, &ops, &peer), -EINVAL);
	assert_int_equal(pk_mem.allocs, 0);
	/* A block off its cache line is refused (frames are written in whole, aligned lines),
	 * and given back. */
	ops.mem_alloc = pk_mem_alloc;
	pk_mem.skew = 16;
	assert_int_equal(fz_peer_create(&p->cfg, &ops, &peer), -EINVAL);
	assert_int_equal(pk_mem.allocs, 1);
	assert_int_equal(pk_mem.frees, 1);
	pk_mem.skew = 0;
	pk_mem.allocs = pk_mem.frees = 0;

	assert_int_equal(fz_peer_create(&p->cfg, &ops, &peer), 0);
	assert_int_equal(pk_mem.allocs, 1);
	assert_true(pk_mem.size >= (size_t)p->cfg.fuse_frames * p->cfg.fuse_max_bytes);
	p->w.busy = true;
	for (i = 0; i < 20; i++) {
		m = pk_msg(p, i, i * 64u, 40, &iov);
		assert_int_equal(fz_peer_send(peer, &m, 0), 0);
	}
	assert_int_equal(fz_peer_flush(peer, 0), 0);
	/* One fused frame, its body in the block the allocator gave. */
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.type, FZ_TYPE_FRAME);
	assert_int_equal(p->w.recs[0].hdr.key_count, 20);
	assert_true(p->w.recs[0].first_base >= pk_mem.block &&
		    p->w.recs[0].first_base + p->w.recs[0].hdr.body_len <= pk_mem.block + pk_mem.size);
	fzt_wire_complete_all(&p->w);
	assert_int_equal(fz_peer_in_flight(peer), 0);
	fz_peer_destroy(peer);
	assert_int_equal(pk_mem.frees, 1);
}

/* Corked, the first of a batch on an idle wire joins the rest; the flush ends the cork. */
static void test_fz_pack_cork_fuses_on_idle_wire(void **state)
{
	struct pk *p = *state;
	const struct fz_tx_stats *st;

	pk_create(p);
	p->w.busy = false;
	fz_peer_cork(p->peer);
	assert_int_equal(pk_send(p, 0, 16, 1000), 0);
	assert_int_equal(pk_send(p, 1, 16, 1001), 0);
	assert_int_equal(pk_send(p, 2, 16, 1002), 0);
	assert_int_equal(p->w.n, 0);
	assert_int_equal(fz_peer_poll(p->peer, 1003), 0);  /* idle, but corked: held */
	assert_int_equal(p->w.n, 0);
	assert_int_equal(fz_peer_flush(p->peer, 1004), 0);
	assert_int_equal(p->w.n, 1);
	assert_int_equal(p->w.recs[0].hdr.key_count, 3);

	/* Uncorked by the flush: a lone message on the idle wire goes at once, alone. */
	assert_int_equal(pk_send(p, 3, 16, 1005), 0);
	assert_int_equal(p->w.n, 2);
	assert_int_equal(p->w.recs[1].hdr.type, 40);

	/* The timer still bounds a corked frame. */
	fz_peer_cork(p->peer);
	assert_int_equal(pk_send(p, 4, 16, 2000), 0);
	assert_int_equal(pk_send(p, 5, 16, 2001), 0);
	assert_int_equal(fz_peer_poll(p->peer, 2050), 0);
	assert_int_equal(p->w.n, 3);
	assert_int_equal(p->w.recs[2].hdr.key_count, 2);
	st = fz_peer_stats(p->peer);
	assert_int_equal(st->flush[FZ_FLUSH_EXPLICIT], 1);
	assert_int_equal(st->flush[FZ_FLUSH_TIMER], 1);
	assert_int_equal(st->flush[FZ_FLUSH_IDLE], 0);
	assert_int_equal(st->msgs_alone, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, pk_setup, pk_teardown)
		T(test_fz_pack_passthrough_when_off),
		T(test_fz_pack_roundtrip_random_mix_in_order),
		T(test_fz_pack_roundtrip_sync_completion),
		T(test_fz_pack_delay_bounded_random_fake_clock),
		T(test_fz_pack_large_alone_zero_copy_in_order),
		T(test_fz_pack_flush_when_full),
		T(test_fz_pack_frames_ramp_up_then_restart),
		T(test_fz_pack_flush_at_max_msgs),
		T(test_fz_pack_flush_explicit),
		T(test_fz_pack_timer_bounds_delay_fake_clock),
		T(test_fz_pack_autocork_idle_wire_not_held),
		T(test_fz_pack_cork_fuses_on_idle_wire),
		T(test_fz_pack_frames_exhausted_go_alone),
		T(test_fz_pack_frame_of_one_leaves_as_its_message),
		T(test_fz_pack_output_failure_changes_nothing),
		T(test_fz_pack_bad_message_refused),
		T(test_fz_pack_stats_bytes_saved),
		T(test_fz_pack_send_many),
		T(test_fz_pack_repeated_sub_headers),
		T(test_fz_pack_sub_hdr_word_matches_put),
		T(test_fz_pack_frame_memory_from_output_side),
#undef T
	};
	return cmocka_run_group_tests_name("fz_pack", tests, NULL, NULL);
}
