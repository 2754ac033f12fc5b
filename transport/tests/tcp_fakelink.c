/*
 * tcp_fakelink.c — the fake wire, fake clock and test application behind the TCP-lite
 * unit tests (see tcp_fakelink.h). Plays the backend's part: ops.emit copies the
 * header and the zero-copy payload slices into a frame (as a NIC would DMA them),
 * ops.pkt_hold/pkt_release count references so every test can check for leaks. A frame
 * may stand for a chain of buffers (fl_inject_chain): then, as rte_pktmbuf_free and the
 * DPDK backend's hold do, a reference taken or dropped on it updates every buffer's count.
 *
 * Call chain: test -> fl_run -> tl_tcp_input / tl_tcp_timers -> fl emit -> queue.
 * Test-only code: malloc per frame is fine here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_fakelink.h"

struct fl_frame {
	struct fl_frame *next;
	struct fl_link *link;
	uint32_t refs;
	int to;
	uint64_t at;
	uint32_t saddr, daddr, len;
	uint8_t ecn;
	struct tl_tcp_sbuf *sb[TL_TCP_TX_SLICES];
	uint32_t nsb;
	uint32_t nbufs;               /* buffers of the chain it stands for (0: one frame) */
	uint32_t buf_refs[FL_CHAIN_MAX];
	uint8_t bytes[];
};

/* The ops ctx of each node is its fl_app. */
static struct fl_link *frame_link(void *ctx) { return ((struct fl_app *)ctx)->link; }

uint64_t fl_rand(struct fl_link *l)
{
	uint64_t x = l->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	l->rng = x;
	return x;
}

static bool chance(struct fl_link *l, uint32_t ppm)
{
	return ppm && (fl_rand(l) % 1000000u) < ppm;
}

void fl_fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1u;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)(x >> 32);
	}
}

static void frame_free(struct fl_frame *f)
{
	for (uint32_t i = 0; i < f->nsb; i++)
		tl_tcp_sbuf_put(f->sb[i]);
	f->link->frames_live--;
	free(f);
}

static void pkt_hold(void *ctx, void *pkt)
{
	struct fl_frame *f = pkt;

	frame_link(ctx)->holds++;
	f->refs++;
	for (uint32_t i = 0; i < f->nbufs; i++) {
		f->buf_refs[i]++;
		f->link->buf_ref_updates++;
	}
}

static void frame_unref(struct fl_frame *f)
{
	for (uint32_t i = 0; i < f->nbufs; i++) {
		f->link->buf_ref_updates++;
		if (f->buf_refs[i] == 0) {
			f->link->buf_underflows++;
			continue;
		}
		if (--f->buf_refs[i] == 0)
			f->link->bufs_freed++;
	}
	if (--f->refs == 0)
		frame_free(f);
}

static void pkt_release(void *ctx, void *pkt)
{
	frame_link(ctx)->releases++;
	frame_unref(pkt);
}

static void enqueue(struct fl_link *l, struct fl_frame *f)
{
	struct fl_frame **p = &l->q;

	/* Most frames leave in time order: append without walking the queue. */
	if (l->q_tail && l->q_tail->at <= f->at) {
		f->next = NULL;
		l->q_tail->next = f;
		l->q_tail = f;
		return;
	}
	while (*p && (*p)->at <= f->at)
		p = &(*p)->next;
	f->next = *p;
	*p = f;
	if (!f->next)
		l->q_tail = f;
}

static struct fl_frame *dequeue(struct fl_link *l)
{
	struct fl_frame *f = l->q;

	l->q = f->next;
	if (!l->q)
		l->q_tail = NULL;
	return f;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void log_seg(struct fl_link *l, int from, const struct fl_frame *f, uint32_t hdr_len,
		    struct fl_seg *out)
{
	struct fl_seg *g = &l->log[l->nlog % FL_LOG_MAX];

	memset(g, 0, sizeof(*g));
	g->from = from;
	g->flags = f->bytes[13];
	g->ecn = f->ecn;
	g->hdr_len = (uint8_t)hdr_len;
	g->seq = be32(f->bytes + 4);
	g->ack = be32(f->bytes + 8);
	g->wnd = (uint16_t)(f->bytes[14] << 8 | f->bytes[15]);
	g->len = f->len - hdr_len;
	memcpy(g->hdr, f->bytes, hdr_len);
	g->at = l->now;
	l->nlog++;
	*out = *g;
}

static struct fl_frame *frame_copy(struct fl_link *l, const struct fl_frame *f)
{
	struct fl_frame *d = malloc(sizeof(*d) + f->len);

	if (!d)
		return NULL;
	memcpy(d, f, sizeof(*d) + f->len);
	d->nsb = 0;
	d->refs = 1;
	l->frames_live++;
	return d;
}

/* Departure time after serialization; CE marks when the queue runs deep. */
static uint64_t depart(struct fl_link *l, int from, struct fl_frame *f)
{
	uint64_t start = l->busy_until[from] > l->now ? l->busy_until[from] : l->now;
	uint64_t queued_ns = start - l->now;

	if (l->ns_per_kb) {
		if (l->ce_queue_bytes && f->ecn != TL_ECN_NOT_ECT &&
		    queued_ns * 1000u / l->ns_per_kb > l->ce_queue_bytes)
			f->ecn = TL_ECN_CE;
		l->busy_until[from] = start + (uint64_t)f->len * l->ns_per_kb / 1000u;
		return l->busy_until[from];
	}
	return l->now;
}

static int emit(void *ctx, const struct tl_tcp_tx *tx)
{
	struct fl_app *a = ctx;
	struct fl_link *l = a->link;
	uint32_t len = tx->hdr_len + tx->payload_len, off = tx->hdr_len;
	struct fl_frame *f = malloc(sizeof(*f) + len);
	struct tl_tcp_slice whole;
	struct fl_seg seg;

	if (!f)
		return -ENOMEM;
	memset(f, 0, sizeof(*f));
	f->link = l;
	f->refs = 1;
	f->to = !a->node;
	f->saddr = tx->saddr;
	f->daddr = tx->daddr;
	f->len = len;
	f->ecn = tx->ecn;
	memcpy(f->bytes, tx->hdr, tx->hdr_len);
	for (uint32_t i = 0; i < tx->nslices; i++) {
		memcpy(f->bytes + off, tx->slice[i].base, tx->slice[i].len);
		off += tx->slice[i].len;
		if (l->hold_sbufs) {
			tl_tcp_sbuf_get(tx->slice[i].sb);
			f->sb[f->nsb++] = tx->slice[i].sb;
		}
	}
	whole = (struct tl_tcp_slice){ .base = f->bytes, .len = len, .sb = NULL };
	f->bytes[16] = f->bytes[17] = 0;
	{
		uint16_t ck = tl_tcp_cksum(f->saddr, f->daddr, len, &whole, 1);
		f->bytes[16] = (uint8_t)(ck >> 8);
		f->bytes[17] = (uint8_t)ck;
	}
	l->frames_live++;
	l->frames_emitted++;
	log_seg(l, a->node, f, tx->hdr_len, &seg);
	seg.tso_segsz = tx->tso_segsz;
	l->log[(l->nlog - 1) % FL_LOG_MAX].tso_segsz = tx->tso_segsz;
	if ((l->filter && l->filter(l->filter_arg, &seg)) || chance(l, l->loss_ppm)) {
		l->log[(l->nlog - 1) % FL_LOG_MAX].dropped = true;
		l->frames_dropped++;
		frame_free(f);
		return 0;
	}
	f->at = depart(l, a->node, f) + l->delay_ns;
	if (chance(l, l->reorder_ppm))
		f->at += l->delay_ns * 3u + fl_rand(l) % (l->delay_ns * 4u + 1u);
	if (chance(l, l->corrupt_ppm))
		f->bytes[fl_rand(l) % len] ^= (uint8_t)(1u << (fl_rand(l) % 8u));
	if (chance(l, l->dup_ppm)) {
		struct fl_frame *d = frame_copy(l, f);
		if (d) {
			d->at += fl_rand(l) % (l->delay_ns + 1u);
			enqueue(l, d);
		}
	}
	enqueue(l, f);
	return 0;
}

static uint32_t iss(void *ctx, const struct tl_tcp_tuple *t)
{
	struct fl_app *a = ctx;
	struct fl_link *l = a->link;

	if (l->iss_set[a->node])
		return l->iss[a->node];
	return (t->lport * 2654435761u) ^ (t->rport * 40503u) ^ (uint32_t)(l->now / 4000u);
}

void fl_cfg(struct tl_tcp_cfg *cfg)
{
	tl_tcp_cfg_default(cfg);
	cfg->rcv_buf = 64u * 1024u;
	cfg->snd_buf = 256u * 1024u;
	cfg->max_conns = 64;
	cfg->max_sbufs = 1024;
	cfg->ooo_max = 64; /* covers a full 64 KiB window of MSS segments */
	cfg->rto_init_ns = 10ull * 1000000u;
	cfg->time_wait_ns = 5ull * 1000000u;
	cfg->iss_secret = 12345;
}

int fl_init(struct fl_link *l, const struct tl_tcp_cfg *cfg_a, const struct tl_tcp_cfg *cfg_b,
	    uint64_t seed)
{
	static const struct tl_tcp_ops ops = { .emit = emit, .pkt_hold = pkt_hold,
					       .pkt_release = pkt_release, .iss = iss };
	int rc;

	memset(l, 0, sizeof(*l));
	l->now = 1000000000ull;
	l->delay_ns = 10000;
	l->rng = seed * 0x9e3779b97f4a7c15ull + 1u;
	l->addr[0] = 0x0a000001u;
	l->addr[1] = 0x0a000002u;
	for (int i = 0; i < 2; i++) {
		l->app[i].link = l;
		l->app[i].node = i;
		l->app[i].auto_recved = true;
		rc = tl_tcp_stack_create(i == 0 || !cfg_b ? cfg_a : cfg_b, &ops, &l->app[i], l->now,
					 &l->stack[i]);
		if (rc) {
			tl_tcp_stack_destroy(l->stack[0]);
			l->stack[0] = NULL;
			return rc;
		}
	}
	return 0;
}

uint64_t fl_fini(struct fl_link *l)
{
	uint64_t leaks = 0;

	/* Frames first: they may hold send-buffer references into the stacks. */
	while (l->q)
		frame_unref(dequeue(l));
	for (int i = 0; i < 2; i++) {
		fl_app_release_held(&l->app[i]);
		tl_tcp_stack_destroy(l->stack[i]);
		l->stack[i] = NULL;
	}
	leaks += l->frames_live;
	leaks += l->holds - l->releases;
	for (int i = 0; i < 2; i++) {
		leaks += l->app[i].sends - l->app[i].sends_done;
		free(l->app[i].rx);
		l->app[i].rx = NULL;
	}
	return leaks;
}

static void deliver(struct fl_link *l, struct fl_frame *f)
{
	struct tl_tcp_rx rx = { .saddr = f->saddr, .daddr = f->daddr, .tcp = f->bytes,
				.tcp_len = f->len, .ecn = f->ecn, .pkt = f };

	/* A damaged frame never reaches TCP: the backend (or the NIC) drops it. */
	if (!tl_tcp_rx_cksum_ok(&rx))
		l->frames_corrupt++;
	else
		tl_tcp_input(l->stack[f->to], &rx, l->now);
	frame_unref(f); /* the link's own reference */
}

void fl_deliver_due(struct fl_link *l)
{
	while (l->q && l->q->at <= l->now)
		deliver(l, dequeue(l));
}

uint32_t fl_in_flight(const struct fl_link *l)
{
	uint32_t n = 0;

	for (const struct fl_frame *f = l->q; f; f = f->next)
		n++;
	return n;
}

static uint64_t next_event(const struct fl_link *l, uint64_t limit)
{
	uint64_t t = limit;

	if (l->q && l->q->at < t)
		t = l->q->at;
	for (int i = 0; i < 2; i++) {
		uint64_t n = tl_tcp_next_timer(l->stack[i]);
		if (n < t)
			t = n;
	}
	return t;
}

static bool never(void *arg)
{
	(void)arg;
	return false;
}

bool fl_run_until(struct fl_link *l, uint64_t max_ns, bool (*cond)(void *arg), void *arg)
{
	uint64_t end = l->now + max_ns;

	for (;;) {
		fl_deliver_due(l);
		for (int i = 0; i < 2; i++)
			tl_tcp_timers(l->stack[i], l->now);
		if (cond(arg))
			return true;
		if (l->now >= end)
			return false;
		{
			uint64_t t = next_event(l, end);
			l->now = t > l->now ? t : l->now + 1u;
		}
	}
}

void fl_run(struct fl_link *l, uint64_t dur_ns)
{
	fl_run_until(l, dur_ns, never, NULL);
}

/* ---- test application --------------------------------------------------------- */

static void app_done(void *arg, int status)
{
	struct fl_app *a = arg;

	a->sends_done++;
	if (status)
		a->sends_failed++;
}

void fl_app_pump(struct fl_app *a)
{
	while (a->conn && a->src && a->src_off < a->src_len) {
		uint32_t space = tl_tcp_send_space(a->conn);
		size_t left = a->src_len - a->src_off;
		uint32_t n = a->chunk ? a->chunk : space;

		if (a->chunk == FL_CHUNK_RANDOM) /* mostly small, now and then large */
			n = 1u + (uint32_t)(fl_rand(a->link) % ((fl_rand(a->link) & 3u) ? 300u : 65536u));
		if (n > left)
			n = (uint32_t)left;
		if (n == 0 || n > space)
			return;
		if (tl_tcp_send(a->conn, a->src + a->src_off, n, app_done, a, a->link->now) != 0)
			return;
		a->sends++;
		a->src_off += n;
	}
	if (a->conn && a->close_after_src && a->src && a->src_off == a->src_len) {
		a->close_after_src = false;
		tl_tcp_close(a->conn, a->link->now);
	}
}

void fl_app_release_held(struct fl_app *a)
{
	for (uint32_t i = 0; i < a->nheld; i++)
		tl_tcp_pkt_release(a->link->stack[a->node], a->held[i]);
	a->nheld = 0;
}

static int app_accept(void *arg, struct tl_tcp_conn *c)
{
	struct fl_app *a = arg;

	if (a->refuse_accept)
		return -ECONNREFUSED;
	a->accepted++;
	a->conn = c;
	fl_app_pump(a);
	return 0;
}

static void app_connected(void *arg, struct tl_tcp_conn *c)
{
	struct fl_app *a = arg;

	a->connected++;
	a->conn = c;
	fl_app_pump(a);
}

static void app_recv(void *arg, struct tl_tcp_conn *c, const uint8_t *data, uint32_t len, void *pkt)
{
	struct fl_app *a = arg;

	if (!data) {
		a->eof++;
		return;
	}
	if (a->rx_len + len > a->rx_cap) {
		size_t cap = a->rx_cap ? a->rx_cap * 2 : 65536;
		while (cap < a->rx_len + len)
			cap *= 2;
		a->rx = realloc(a->rx, cap);
		a->rx_cap = cap;
	}
	memcpy(a->rx + a->rx_len, data, len);
	a->rx_len += len;
	if (a->hold_pkts && a->nheld < 256) {
		tl_tcp_pkt_hold(a->link->stack[a->node], pkt);
		a->held[a->nheld++] = pkt;
	}
	if (a->auto_recved)
		tl_tcp_recved(c, len, a->link->now);
}

static void app_sent(void *arg, struct tl_tcp_conn *c, uint32_t acked)
{
	struct fl_app *a = arg;

	(void)c;
	(void)acked;
	a->sent_cbs++;
	fl_app_pump(a);
}

static void app_closed(void *arg, struct tl_tcp_conn *c, int reason)
{
	struct fl_app *a = arg;

	a->closed++;
	a->closed_reason = reason;
	if (a->conn == c)
		a->conn = NULL;
}

const struct tl_tcp_cbs fl_app_cbs = {
	.accept = app_accept, .connected = app_connected, .recv = app_recv,
	.sent = app_sent, .closed = app_closed,
};

int fl_listen(struct fl_link *l, int node, uint16_t port)
{
	struct tl_tcp_listener *lis;

	return tl_tcp_listen(l->stack[node], 0, port, 0, &fl_app_cbs, &l->app[node], &lis);
}

int fl_connect(struct fl_link *l, int node, uint16_t lport, uint16_t rport)
{
	struct tl_tcp_tuple t = { .laddr = l->addr[node], .raddr = l->addr[!node],
				  .lport = lport, .rport = rport };
	struct tl_tcp_conn *c;
	int rc = tl_tcp_connect(l->stack[node], &t, &fl_app_cbs, &l->app[node], l->now, &c);

	if (rc == 0)
		l->app[node].conn = c;
	return rc;
}

static bool both_up(void *arg)
{
	struct fl_link *l = arg;

	return l->app[0].accepted > 0 && l->app[1].connected > 0;
}

int fl_open_pair(struct fl_link *l)
{
	int rc = fl_listen(l, 0, 80);

	if (rc)
		return rc;
	rc = fl_connect(l, 1, 0, 80);
	if (rc)
		return rc;
	return fl_run_until(l, 1000000000ull, both_up, l) ? 0 : -ETIMEDOUT;
}

/* ---- hand-made segments -------------------------------------------------------- */

uint32_t fl_build(uint8_t *buf, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
		  uint8_t flags, uint16_t wnd, const uint8_t *opts, uint32_t optlen,
		  const uint8_t *payload, uint32_t plen)
{
	uint32_t hl = 20u + ((optlen + 3u) & ~3u);

	memset(buf, 0, hl);
	buf[0] = (uint8_t)(sport >> 8); buf[1] = (uint8_t)sport;
	buf[2] = (uint8_t)(dport >> 8); buf[3] = (uint8_t)dport;
	for (int i = 0; i < 4; i++) {
		buf[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
		buf[8 + i] = (uint8_t)(ack >> (24 - 8 * i));
	}
	buf[12] = (uint8_t)((hl / 4u) << 4);
	buf[13] = flags;
	buf[14] = (uint8_t)(wnd >> 8); buf[15] = (uint8_t)wnd;
	if (optlen)
		memcpy(buf + 20, opts, optlen);
	if (plen)
		memcpy(buf + hl, payload, plen);
	return hl + plen;
}

/* A frame holding a copy of seg, as if it came off the link (one reference, counted live). */
static struct fl_frame *frame_of(struct fl_link *l, const uint8_t *seg, uint32_t len)
{
	struct fl_frame *f = malloc(sizeof(*f) + len);

	if (!f)
		return NULL;
	memset(f, 0, sizeof(*f));
	f->link = l;
	f->refs = 1;
	f->len = len;
	memcpy(f->bytes, seg, len);
	l->frames_live++;
	return f;
}

int fl_inject(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint8_t ecn)
{
	struct fl_frame *f = frame_of(l, seg, len);
	struct tl_tcp_rx rx;
	int rc;

	if (!f)
		return -ENOMEM;
	rx = (struct tl_tcp_rx){ .saddr = l->addr[!to], .daddr = l->addr[to], .tcp = f->bytes,
				 .tcp_len = len, .ecn = ecn, .pkt = f };
	rc = tl_tcp_input(l->stack[to], &rx, l->now);
	frame_unref(f);
	return rc;
}

/* Hands seg over in `pieces` equal parts (the last takes the rest) under one frame, which
 * stands for a chain of that many buffers when chain is set. */
static int inject_pieces(struct fl_link *l, int to, const uint8_t *seg, uint32_t len,
			 uint32_t pieces, bool chain)
{
	uint32_t doff = (uint32_t)(seg[12] >> 4) * 4u, off = 0;
	struct tl_tcp_piece p[FL_CHAIN_MAX];
	struct fl_frame *f;
	struct tl_tcp_rx rx;
	int rc;

	if (doff > len || pieces == 0 || pieces > FL_CHAIN_MAX)
		return -EINVAL;
	f = frame_of(l, seg, len);
	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < pieces; i++) {
		uint32_t n = i + 1 == pieces ? len - doff - off : (len - doff) / pieces;
		p[i] = (struct tl_tcp_piece){ f->bytes + doff + off, n };
		off += n;
		if (chain)
			f->buf_refs[f->nbufs++] = 1; /* the link's own reference, as allocated */
	}
	rx = (struct tl_tcp_rx){ .saddr = l->addr[!to], .daddr = l->addr[to], .tcp = f->bytes,
				 .tcp_len = doff, .pkt = f };
	rc = tl_tcp_input_pieces(l->stack[to], &rx, p, pieces, l->now);
	frame_unref(f);
	return rc;
}

int fl_inject_pieces(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint32_t pieces)
{
	return inject_pieces(l, to, seg, len, pieces, false);
}

int fl_inject_chain(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint32_t pieces)
{
	return inject_pieces(l, to, seg, len, pieces, true);
}

uint32_t fl_count(const struct fl_link *l, uint32_t since, int from, uint8_t flags_all,
		  uint8_t flags_none, struct fl_seg *out)
{
	uint32_t n = 0;

	if (l->nlog > FL_LOG_MAX && since < l->nlog - FL_LOG_MAX)
		since = l->nlog - FL_LOG_MAX;
	for (uint32_t i = since; i < l->nlog; i++) {
		const struct fl_seg *g = &l->log[i % FL_LOG_MAX];
		if ((from >= 0 && g->from != from) || (g->flags & flags_all) != flags_all ||
		    (g->flags & flags_none))
			continue;
		n++;
		if (out)
			*out = *g;
	}
	return n;
}

const uint8_t *fl_seg_opt(const struct fl_seg *g, uint8_t kind)
{
	for (uint32_t i = 20; i + 1 < g->hdr_len;) {
		if (g->hdr[i] == 1) {
			i++;
			continue;
		}
		if (g->hdr[i] == 0 || g->hdr[i + 1] < 2 || i + g->hdr[i + 1] > g->hdr_len)
			return NULL;
		if (g->hdr[i] == kind)
			return g->hdr + i;
		i += g->hdr[i + 1];
	}
	return NULL;
}

bool fl_seg_ts(const struct fl_seg *g, uint32_t *tsval, uint32_t *tsecr)
{
	const uint8_t *o = fl_seg_opt(g, 8);

	if (o == NULL || o[1] != 10)
		return false;
	*tsval = be32(o + 2);
	*tsecr = be32(o + 6);
	return true;
}

uint32_t fl_seg_sack(const struct fl_seg *g, uint32_t blocks[4][2])
{
	const uint8_t *o = fl_seg_opt(g, 5);
	uint32_t n;

	if (o == NULL)
		return 0;
	n = (o[1] - 2u) / 8u;
	for (uint32_t b = 0; b < n && b < 4; b++) {
		blocks[b][0] = be32(o + 2 + 8 * b);
		blocks[b][1] = be32(o + 6 + 8 * b);
	}
	return n < 4 ? n : 4;
}

bool fl_drop_nth_filter(void *arg, const struct fl_seg *g)
{
	struct fl_drop_nth *d = arg;

	if (g->from != 1 || g->len == 0)
		return false;
	d->seen++;
	for (int i = 0; i < 4; i++)
		if (d->which[i] == d->seen)
			return true;
	return false;
}

int fl_test_setup(void **state, uint64_t seed)
{
	struct fl_link *l = calloc(1, sizeof(*l));
	struct tl_tcp_cfg cfg;

	if (!l)
		return -1;
	fl_cfg(&cfg);
	if (fl_init(l, &cfg, NULL, seed) != 0) {
		free(l);
		return -1;
	}
	*state = l;
	return 0;
}

int fl_test_teardown(void **state)
{
	struct fl_link *l = *state;
	uint64_t leaks = fl_fini(l);

	free(l);
	return leaks == 0 ? 0 : -1;
}
