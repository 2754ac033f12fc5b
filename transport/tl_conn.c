/*
 * tl_conn.c — TCP-lite stack and connection objects: creation, the per-stack connection
 * table, listeners, the application API (connect, send, recved, close, abort) and the
 * zero-copy send buffer descriptors.
 *
 * Call chain: backend/tl_api -> tl_tcp_* here -> tl_out.c (segments) and tl_timer.c
 * (deadlines); tl_in.c looks connections up here and ends them with tl_conn_drop.
 *
 * The connection table is a small chained hash over a preallocated array, linked by
 * index. rte_hash would need EAL memory (the unit tests run without EAL) and its own
 * allocation per stack anyway; one lcore's table is small, never shared, and this keeps
 * lookup to one multiply-shift hash and a short chain walk with no locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tl_tcp_pvt.h"

#define TL_EPHEMERAL_LO 49152u
#define TL_EPHEMERAL_HI 65535u

void tl_tcp_cfg_default(struct tl_tcp_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mss = 1460;
	cfg->rcv_buf = 4u << 20;
	cfg->snd_buf = 4u << 20;
	cfg->max_conns = 1024;
	cfg->max_listeners = 16;
	cfg->max_sbufs = 16384;
	cfg->ooo_max = 64;
	cfg->ooo_mem = 4u << 20;
	cfg->rto_init_ns = 200ull * 1000000u;  /* before any sample; RFC 6298 says 1 s, a DC less */
	cfg->rto_min_ns = 1ull * 1000000u;
	cfg->rto_max_ns = 2ull * 1000000000u;
	cfg->delack_ns = 200ull * 1000u;
	cfg->time_wait_ns = 100ull * 1000000u;
	cfg->tick_ns = 100ull * 1000u;
	cfg->max_retrans = 12;
	cfg->keepalive_intvl_ns = 1000000000ull;
	cfg->keepalive_probes = 5;
	cfg->syn_backlog = 128;
	cfg->syncookies = true;
	cfg->iss_secret = 0x9e3779b97f4a7c15ull;
	cfg->ecn = true;
	cfg->timestamps = true;
	cfg->ts_tick_ns = 1000;
	cfg->wscale = true;
	cfg->sack = true;
}

static int cfg_check(const struct tl_tcp_cfg *c)
{
	if (c->mss < 64 || c->mss > 65495 || c->rcv_buf < c->mss || c->rcv_buf > (1u << 30) ||
	    c->snd_buf == 0 || c->snd_buf > (1u << 30) || c->max_conns == 0 ||
	    c->max_conns > (1u << 24) || c->max_sbufs == 0 || c->ooo_max == 0 || c->ooo_mem == 0 ||
	    c->rto_min_ns == 0 || c->rto_max_ns < c->rto_min_ns || c->rto_init_ns == 0 ||
	    c->tick_ns == 0 || c->delack_ns == 0 || c->max_retrans == 0 || c->syn_backlog == 0 ||
	    c->ts_tick_ns < 1000u || c->ts_tick_ns > 1000000000u ||
	    (c->keepalive_ns && (c->keepalive_intvl_ns == 0 || c->keepalive_probes == 0)))
		return -EINVAL;
	return 0;
}

static uint32_t tuple_hash(uint32_t laddr, uint16_t lport, uint32_t raddr, uint16_t rport)
{
	uint64_t h = ((uint64_t)laddr << 32 | raddr) * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)lport << 16 | rport) * 0xc2b2ae3d27d4eb4full;
	return (uint32_t)(h ^ (h >> 29) ^ (h >> 47));
}

static uint32_t *bucket_of(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t)
{
	return &s->buckets[tuple_hash(t->laddr, t->lport, t->raddr, t->rport) & (s->nbuckets - 1)];
}

void tl_tcp_stack_set_tso_max(struct tl_tcp_stack *s, uint32_t tso_max)
{
	s->cfg.tso_max = tso_max;
}

int tl_tcp_stack_create(const struct tl_tcp_cfg *cfg, const struct tl_tcp_ops *ops, void *ops_ctx,
			uint64_t now, struct tl_tcp_stack **out)
{
	struct tl_tcp_stack *s;
	uint32_t i;
	int rc;

	if (!cfg || !ops || !ops->emit || !ops->pkt_hold || !ops->pkt_release || !out)
		return -EINVAL;
	rc = cfg_check(cfg);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->ops = *ops;
	s->ops_ctx = ops_ctx;
	s->now = now;
	s->ts_base = now;
	s->rng = (cfg->iss_secret ^ now) * 0x9e3779b97f4a7c15ull | 1u;
	/* Smallest shift that lets a 16-bit field express the whole receive buffer. */
	while (s->rcv_wscale < TL_MAX_WSCALE && (cfg->rcv_buf >> s->rcv_wscale) > 0xffff)
		s->rcv_wscale++;
	for (s->nbuckets = 1; s->nbuckets < 2 * cfg->max_conns; s->nbuckets <<= 1)
		;
	s->conns = calloc(cfg->max_conns, sizeof(*s->conns));
	s->ooo_pool = calloc((size_t)cfg->max_conns * cfg->ooo_max, sizeof(*s->ooo_pool));
	s->buckets = malloc(s->nbuckets * sizeof(*s->buckets));
	s->listeners = calloc(cfg->max_listeners ? cfg->max_listeners : 1, sizeof(*s->listeners));
	s->sbufs = calloc(cfg->max_sbufs, sizeof(*s->sbufs));
	if (!s->conns || !s->ooo_pool || !s->buckets || !s->listeners || !s->sbufs)
		goto out_free;
	rc = tl_tw_init(&s->tw, cfg->tick_ns, 1024, now);
	if (rc)
		goto out_free;
	for (i = 0; i < s->nbuckets; i++)
		s->buckets[i] = TL_NO_IDX;
	for (i = 0; i < cfg->max_conns; i++) {
		s->conns[i].idx = i;
		s->conns[i].stack = s;
		s->conns[i].hnext = i + 1 < cfg->max_conns ? i + 1 : TL_NO_IDX;
		tl_ooo_reset(&s->conns[i]);
	}
	s->conn_free = 0;
	for (i = 0; i < cfg->max_sbufs; i++) {
		s->sbufs[i].stack = s;
		s->sbufs[i].next = i + 1 < cfg->max_sbufs ? &s->sbufs[i + 1] : NULL;
	}
	s->sbuf_free = &s->sbufs[0];
	s->next_ephemeral = TL_EPHEMERAL_LO;
	*out = s;
	return 0;
out_free:
	free(s->conns);
	free(s->ooo_pool);
	free(s->buckets);
	free(s->listeners);
	free(s->sbufs);
	free(s);
	return -ENOMEM;
}

void tl_tcp_stack_destroy(struct tl_tcp_stack *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->cfg.max_conns; i++)
		if (s->conns[i].state != TL_TCP_CLOSED)
			tl_conn_drop(&s->conns[i], -ECONNABORTED);
	tl_tw_fini(&s->tw);
	free(s->conns);
	free(s->ooo_pool);
	free(s->buckets);
	free(s->listeners);
	free(s->sbufs);
	free(s);
}

struct tl_tcp_conn *tl_conn_lookup(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport,
				   uint32_t raddr, uint16_t rport)
{
	uint32_t i = s->buckets[tuple_hash(laddr, lport, raddr, rport) & (s->nbuckets - 1)];

	while (i != TL_NO_IDX) {
		struct tl_tcp_conn *c = &s->conns[i];
		if (c->t.lport == lport && c->t.rport == rport && c->t.laddr == laddr &&
		    c->t.raddr == raddr)
			return c;
		i = c->hnext;
	}
	return NULL;
}

struct tl_tcp_listener *tl_listener_lookup(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport)
{
	struct tl_tcp_listener *any = NULL;

	for (uint32_t i = 0; i < s->cfg.max_listeners; i++) {
		struct tl_tcp_listener *l = &s->listeners[i];
		if (!l->used || l->lport != lport)
			continue;
		if (l->laddr == laddr)
			return l;
		if (l->laddr == 0)
			any = l;
	}
	return any;
}

/* Table full: give up a TIME_WAIT slot, soonest to expire first (as Linux does past
 * tcp_max_tw_buckets). A scan, but only on this rare path. */
static bool recycle_time_wait(struct tl_tcp_stack *s)
{
	struct tl_tcp_conn *victim = NULL;

	for (uint32_t i = 0; i < s->cfg.max_conns; i++) {
		struct tl_tcp_conn *c = &s->conns[i];
		if (c->state == TL_TCP_TIME_WAIT && !c->dead && !c->busy &&
		    (!victim || c->close_at < victim->close_at))
			victim = c;
	}
	if (!victim)
		return false;
	tl_conn_drop(victim, 0);
	return s->conn_free != TL_NO_IDX;
}

struct tl_tcp_conn *tl_conn_alloc(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t)
{
	struct tl_tcp_conn *c;
	uint32_t *b;

	if (s->conn_free == TL_NO_IDX && !recycle_time_wait(s))
		return NULL;
	c = &s->conns[s->conn_free];
	s->conn_free = c->hnext;
	{
		uint32_t idx = c->idx;
		memset(c, 0, sizeof(*c));
		c->idx = idx;
		c->stack = s;
		tl_ooo_reset(c);
	}
	c->t = *t;
	b = bucket_of(s, t);
	c->hnext = *b;
	*b = c->idx;
	s->nconns++;
	s->st.conns_opened++;
	return c;
}

static void conn_unhash(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t *p = bucket_of(s, &c->t);

	while (*p != TL_NO_IDX) {
		if (*p == c->idx) {
			*p = c->hnext;
			return;
		}
		p = &s->conns[*p].hnext;
	}
}

static void sbuf_release(struct tl_tcp_sbuf *sb)
{
	struct tl_tcp_stack *s = sb->stack;

	if (sb->done)
		sb->done(sb->done_arg, sb->status);
	sb->done = NULL;
	sb->next = s->sbuf_free;
	s->sbuf_free = sb;
	s->sbufs_used--;
}

void tl_tcp_sbuf_get(struct tl_tcp_sbuf *sb)
{
	sb->refs++;
}

void tl_tcp_sbuf_put(struct tl_tcp_sbuf *sb)
{
	if (--sb->refs == 0)
		sbuf_release(sb);
}

void tl_conn_free_acked(struct tl_tcp_conn *c, uint32_t acked)
{
	c->sq_bytes -= acked;
	/* A done callback may abort c, which empties the queue under us. */
	while (acked && c->sq_head) {
		struct tl_tcp_sbuf *sb = c->sq_head;
		uint32_t left = sb->len - c->sq_head_off;
		if (acked < left) {
			c->sq_head_off += acked;
			return;
		}
		acked -= left;
		c->sq_head = sb->next;
		if (!c->sq_head)
			c->sq_tail = NULL;
		c->sq_head_off = 0;
		if (c->sq_cur == sb)
			c->sq_cur = NULL;
		sb->status = 0;
		tl_tcp_sbuf_put(sb);
	}
}

void tl_conn_app_closed(struct tl_tcp_conn *c, int reason)
{
	if (!c->app_attached)
		return;
	c->app_attached = false;
	if (c->cbs && c->cbs->closed)
		c->cbs->closed(c->arg, c, reason);
}

static void conn_free(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;

	c->state = TL_TCP_CLOSED;
	c->hnext = s->conn_free;
	s->conn_free = c->idx;
	s->nconns--;
}

void tl_conn_drop(struct tl_tcp_conn *c, int reason)
{
	struct tl_tcp_stack *s = c->stack;

	if (c->dead)
		return;
	c->dead = true;
	tl_tw_cancel(&s->tw, &c->tw);
	c->rto_at = c->delack_at = c->persist_at = c->close_at = c->ka_at = 0;
	tl_ooo_clear(c);
	while (c->sq_head) {
		struct tl_tcp_sbuf *sb = c->sq_head;
		c->sq_head = sb->next;
		sb->status = reason ? reason : -ECONNABORTED;
		tl_tcp_sbuf_put(sb);
	}
	c->sq_tail = NULL;
	c->sq_cur = NULL;
	c->sq_bytes = 0;
	if (c->listener) {
		c->listener->embryonic--;
		c->listener = NULL;
	}
	conn_unhash(c);
	tl_conn_app_closed(c, reason);
	if (c->busy == 0)
		conn_free(c);
}

void tl_conn_put(struct tl_tcp_conn *c)
{
	if (--c->busy == 0 && c->dead && c->state != TL_TCP_CLOSED)
		conn_free(c);
}

uint32_t tl_conn_rcv_space(const struct tl_tcp_conn *c)
{
	uint32_t buf = c->stack->cfg.rcv_buf;

	return c->rcv_unread < buf ? buf - c->rcv_unread : 0;
}

/* xorshift64*: limits an attacker should not be able to predict, not cryptography. */
uint32_t tl_rand(struct tl_tcp_stack *s)
{
	uint64_t x = s->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

void tl_conn_init_seq(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t iss;

	if (s->ops.iss) {
		iss = s->ops.iss(s->ops_ctx, &c->t);
	} else {
		/* RFC 6528: a keyed hash of the tuple plus a 4 us clock. */
		uint64_t h = tl_mix64(s->cfg.iss_secret ^ ((uint64_t)c->t.laddr << 32 | c->t.raddr));
		h = tl_mix64(h ^ ((uint64_t)c->t.lport << 16 | c->t.rport));
		iss = (uint32_t)h + (uint32_t)(s->now / 4000u);
	}
	c->iss = iss;
	c->snd_una = c->snd_nxt = c->snd_max = iss;
	c->recover = iss;
	c->mss = s->cfg.mss;
}

/* ---- API -------------------------------------------------------------------- */

int tl_tcp_listen(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport, uint32_t backlog,
		  const struct tl_tcp_cbs *cbs, void *arg, struct tl_tcp_listener **out)
{
	struct tl_tcp_listener *free_l = NULL;

	if (!s || lport == 0 || !cbs || !out)
		return -EINVAL;
	for (uint32_t i = 0; i < s->cfg.max_listeners; i++) {
		struct tl_tcp_listener *l = &s->listeners[i];
		if (l->used && l->lport == lport && l->laddr == laddr)
			return -EADDRINUSE;
		if (!l->used && !free_l)
			free_l = l;
	}
	if (!free_l)
		return -ENOSPC;
	memset(free_l, 0, sizeof(*free_l));
	free_l->stack = s;
	free_l->used = true;
	free_l->laddr = laddr;
	free_l->lport = lport;
	free_l->backlog = backlog ? backlog : s->cfg.syn_backlog;
	free_l->cbs = cbs;
	free_l->arg = arg;
	*out = free_l;
	return 0;
}

void tl_tcp_unlisten(struct tl_tcp_listener *l)
{
	struct tl_tcp_stack *s;

	if (!l)
		return;
	s = l->stack;
	for (uint32_t i = 0; i < s->cfg.max_conns; i++) {
		struct tl_tcp_conn *c = &s->conns[i];
		if (c->state != TL_TCP_CLOSED && !c->dead && c->listener == l) {
			tl_out_rst(c);
			tl_conn_drop(c, -ECONNABORTED);
		}
	}
	l->used = false;
}

static int pick_ephemeral(struct tl_tcp_stack *s, struct tl_tcp_tuple *t)
{
	for (uint32_t n = 0; n <= TL_EPHEMERAL_HI - TL_EPHEMERAL_LO; n++) {
		uint16_t p = s->next_ephemeral;
		s->next_ephemeral = p == TL_EPHEMERAL_HI ? TL_EPHEMERAL_LO : (uint16_t)(p + 1u);
		if (!tl_conn_lookup(s, t->laddr, p, t->raddr, t->rport) &&
		    !tl_listener_lookup(s, t->laddr, p)) {
			t->lport = p;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

int tl_tcp_connect(struct tl_tcp_stack *s, const struct tl_tcp_tuple *tp, const struct tl_tcp_cbs *cbs,
		   void *arg, uint64_t now, struct tl_tcp_conn **out)
{
	struct tl_tcp_tuple t;
	struct tl_tcp_conn *c;
	int rc;

	if (!s || !tp || !cbs || !out || tp->rport == 0 || tp->raddr == 0 || tp->laddr == 0)
		return -EINVAL;
	if (now > s->now)
		s->now = now;
	t = *tp;
	if (t.lport == 0) {
		rc = pick_ephemeral(s, &t);
		if (rc)
			return rc;
	}
	c = tl_conn_lookup(s, t.laddr, t.lport, t.raddr, t.rport);
	if (c) {
		/* Our own TIME_WAIT may be recycled: the new ISS comes from a later clock. */
		if (c->state != TL_TCP_TIME_WAIT)
			return -EADDRINUSE;
		tl_conn_drop(c, 0);
	}
	c = tl_conn_alloc(s, &t);
	if (!c)
		return -ENOMEM;
	c->cbs = cbs;
	c->arg = arg;
	c->app_attached = true;
	c->state = TL_TCP_SYN_SENT;
	c->rcv_wscale = s->cfg.wscale ? s->rcv_wscale : 0;
	tl_conn_init_seq(c);
	tl_cc_init(c);
	tl_out_syn(c, false);
	*out = c;
	return 0;
}

uint32_t tl_tcp_send_space(const struct tl_tcp_conn *c)
{
	uint32_t cap = c->stack->cfg.snd_buf;

	if (!c->stack->sbuf_free)
		return 0;
	return c->sq_bytes < cap ? cap - c->sq_bytes : 0;
}

int tl_tcp_send(struct tl_tcp_conn *c, const void *buf, uint32_t len,
		void (*done)(void *done_arg, int status), void *done_arg, uint64_t now)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_tcp_sbuf *sb;

	if (!buf || len == 0)
		return -EINVAL;
	if (c->dead || c->fin_queued ||
	    (c->state != TL_TCP_ESTABLISHED && c->state != TL_TCP_CLOSE_WAIT &&
	     c->state != TL_TCP_SYN_SENT && c->state != TL_TCP_SYN_RCVD))
		return -ENOTCONN;
	if (len > tl_tcp_send_space(c))
		return len > s->cfg.snd_buf ? -EINVAL : -ENOBUFS;
	if (now > s->now)
		s->now = now;
	sb = s->sbuf_free;
	s->sbuf_free = sb->next;
	s->sbufs_used++;
	sb->next = NULL;
	sb->base = buf;
	sb->len = len;
	sb->refs = 1;
	sb->status = 0;
	sb->done = done;
	sb->done_arg = done_arg;
	if (c->sq_tail)
		c->sq_tail->next = sb;
	else
		c->sq_head = sb;
	c->sq_tail = sb;
	c->sq_bytes += len;
	if (!c->corked)
		tl_out_push(c);
	return 0;
}

void tl_tcp_cork(struct tl_tcp_conn *c, bool on, uint64_t now)
{
	if (now > c->stack->now)
		c->stack->now = now;
	c->corked = on;
	if (!on && !c->dead)
		tl_out_push(c);
}

void tl_tcp_recved(struct tl_tcp_conn *c, uint32_t len, uint64_t now)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t cur, space;

	if (now > s->now)
		s->now = now;
	c->rcv_unread -= len < c->rcv_unread ? len : c->rcv_unread;
	if (c->dead || (c->state != TL_TCP_ESTABLISHED && c->state != TL_TCP_FIN_WAIT_1 &&
			c->state != TL_TCP_FIN_WAIT_2))
		return;
	/* Inside input the ACK decision is made after delivery anyway. */
	if (c->busy)
		return;
	/* Tell the peer when the window grew enough to matter (or reopened from ~0),
	 * so it does not sit waiting for its probe timer. */
	cur = c->rcv_adv - c->rcv_nxt;
	space = tl_conn_rcv_space(c);
	if (space >= cur + 2u * s->cfg.mss || (cur < s->cfg.mss && space >= cur + s->cfg.mss) ||
	    (cur == 0 && space >= s->cfg.rcv_buf / 2u))
		tl_out_ack(c);
}

/* A copy made by tl_tcp_conn_own_payload: freed when the core lets go of it. */
static void owned_done(void *arg, int status)
{
	(void)status;
	free(arg);
}

int tl_tcp_conn_own_payload(struct tl_tcp_conn *c)
{
	struct tl_tcp_sbuf *sb;
	uint32_t n = 0, i = 0;
	uint8_t **copies;

	for (sb = c->sq_head; sb; sb = sb->next)
		n++;
	if (n == 0)
		return 0;
	copies = calloc(n, sizeof(*copies));
	if (!copies)
		return -ENOMEM;
	/* All or nothing: every copy is made before any buffer changes hands. */
	for (sb = c->sq_head; sb; sb = sb->next, i++) {
		copies[i] = malloc(sb->len);
		if (!copies[i]) {
			while (i > 0)
				free(copies[--i]);
			free(copies);
			return -ENOMEM;
		}
		memcpy(copies[i], sb->base, sb->len);
	}
	for (sb = c->sq_head, i = 0; sb; sb = sb->next, i++) {
		void (*done)(void *, int) = sb->done;
		void *arg = sb->done_arg;

		sb->base = copies[i];
		sb->done = owned_done;
		sb->done_arg = copies[i];
		if (done)
			done(arg, -ECANCELED);
	}
	free(copies);
	return 0;
}

int tl_tcp_close(struct tl_tcp_conn *c, uint64_t now)
{
	struct tl_tcp_stack *s = c->stack;

	if (now > s->now)
		s->now = now;
	if (c->dead || c->fin_queued)
		return -ENOTCONN;
	switch (c->state) {
	case TL_TCP_SYN_SENT:
	case TL_TCP_SYN_RCVD:
		if (c->state == TL_TCP_SYN_SENT && c->sq_bytes == 0) {
			tl_conn_drop(c, 0); /* nothing to deliver: just forget the attempt */
			return 0;
		}
		/* Data queued before the handshake: FIN follows it once established. */
		c->fin_queued = true;
		return 0;
	case TL_TCP_ESTABLISHED:
		c->state = TL_TCP_FIN_WAIT_1;
		break;
	case TL_TCP_CLOSE_WAIT:
		c->state = TL_TCP_LAST_ACK;
		break;
	default:
		return -ENOTCONN;
	}
	c->fin_queued = true;
	tl_out_push(c);
	return 0;
}

void tl_tcp_abort(struct tl_tcp_conn *c)
{
	if (c->dead)
		return;
	if (c->state != TL_TCP_SYN_SENT && c->state != TL_TCP_CLOSED)
		tl_out_rst(c);
	tl_conn_drop(c, -ECONNABORTED);
}

void tl_tcp_conn_set_cbs(struct tl_tcp_conn *c, const struct tl_tcp_cbs *cbs, void *arg)
{
	c->cbs = cbs;
	c->arg = arg;
}

void tl_tcp_conn_tuple(const struct tl_tcp_conn *c, struct tl_tcp_tuple *out)
{
	*out = c->t;
}

void tl_tcp_conn_get_stats(const struct tl_tcp_conn *c, struct tl_tcp_conn_stats *o)
{
	memset(o, 0, sizeof(*o));
	o->seg_in = c->seg_in;
	o->seg_out = c->seg_out;
	o->bytes_acked = c->bytes_acked;
	o->bytes_rcvd = c->bytes_rcvd;
	o->retrans = c->retrans;
	o->srtt_us = (uint32_t)(c->srtt_ns / 1000u);
	o->rttvar_us = (uint32_t)(c->rttvar_ns / 1000u);
	o->rto_us = (uint32_t)(c->rto_ns / 1000u);
	o->cwnd = c->cwnd;
	o->ssthresh = c->ssthresh;
	o->snd_wnd = c->snd_wnd;
	o->rcv_wnd = c->rcv_adv - c->rcv_nxt;
	o->snd_rewound = c->snd_max - c->snd_nxt;
	o->dctcp_alpha = c->dctcp_alpha;
	o->state = c->state;
	o->ecn = c->ecn_ok;
	o->ts = c->ts_ok;
	o->ws = c->ws_ok;
	o->sack = c->sack_ok;
}

void tl_tcp_stack_get_stats(const struct tl_tcp_stack *s, struct tl_tcp_stats *out)
{
	*out = s->st;
}

uint32_t tl_tcp_conn_count(const struct tl_tcp_stack *s)
{
	return s->nconns;
}

uint32_t tl_tcp_sbufs_in_use(const struct tl_tcp_stack *s)
{
	return s->sbufs_used;
}

void tl_tcp_pkt_hold(struct tl_tcp_stack *s, void *pkt)
{
	s->ops.pkt_hold(s->ops_ctx, pkt);
}

void tl_tcp_pkt_release(struct tl_tcp_stack *s, void *pkt)
{
	s->ops.pkt_release(s->ops_ctx, pkt);
}
