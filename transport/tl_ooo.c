/*
 * tl_ooo.c — TCP-lite's out-of-order queue: the segments a connection holds above a hole,
 * sorted by sequence number, bounded in entries and bytes, handed back in order once the
 * hole is filled.
 *
 * Call chain: tl_in.c data_input -> tl_ooo_fit_fin, tl_ooo_insert (parks a segment) |
 * ooo_drain -> tl_ooo_pop / tl_ooo_put (delivers); tl_conn_drop -> tl_ooo_clear;
 * tl_out.c put_sack walks the queue for SACK blocks.
 *
 * The queue is a doubly linked list in the connection's slice of the stack's pool (no
 * allocation per segment). A received frame in a chain of k buffers (an LRO frame) comes in
 * as k pieces, each a segment of its own, one after the other and ascending. So that parking
 * such a frame costs k and not k^2:
 *  - a piece is placed by walking on from the entry queued last, which is its predecessor,
 *    or else back from the tail, where a segment past the hole usually goes; linking it in
 *    moves no other entry;
 *  - the pieces of one packet next to each other in the queue share one reference on it
 *    (ops.pkt_hold on a chain updates every buffer's count): the entries holding a packet
 *    form a ring, and the packet is released when the last of them leaves.
 * A single-segment frame is one entry with its own reference, as it would be anyway.
 * The SACK blocks the connection's ACKs carry are kept beside the queue (sack_top): a
 * segment joining it among the ranges kept (at the tail, as every segment past a hole does
 * until it is filled, or one reordered a little) updates them in place; any other change
 * marks them stale, for one walk at the next ACK.
 */
#include <string.h>

#include "tl_tcp_pvt.h"

/* A slot of the connection's slice: off the free list, else one never used since the
 * queue last emptied. Slots in use (queued or popped) never reach ooo_max while one is
 * taken (tl_ooo_insert makes room first), so one is always there. */
static uint32_t slot_get(struct tl_tcp_conn *c)
{
	uint32_t i = c->ooo_free;

	if (i == TL_OOO_NIL)
		return c->ooo_fresh++;
	c->ooo_free = c->ooo[i].next;
	return i;
}

/* The SACK blocks of an empty queue: none, and exact. */
static void sack_empty(struct tl_tcp_conn *c)
{
	c->sack_ntop = 0;
	c->sack_has_first = false;
	c->sack_below = false;
	c->sack_stale = false;
}

void tl_ooo_reset(struct tl_tcp_conn *c)
{
	c->ooo = &c->stack->ooo_pool[(size_t)c->idx * c->stack->cfg.ooo_max];
	c->ooo_head = c->ooo_tail = c->ooo_last = TL_OOO_NIL;
	c->ooo_free = TL_OOO_NIL;
	c->ooo_fresh = 0;
	c->ooo_n = 0;
	sack_empty(c);
}

/* Takes entry i off the list (ooo_n counts listed entries only). */
static void unlink_entry(struct tl_tcp_conn *c, uint32_t i)
{
	struct tl_ooo *e = &c->ooo[i];

	if (e->prev != TL_OOO_NIL)
		c->ooo[e->prev].next = e->next;
	else
		c->ooo_head = e->next;
	if (e->next != TL_OOO_NIL)
		c->ooo[e->next].prev = e->prev;
	else
		c->ooo_tail = e->prev;
	if (c->ooo_last == i)
		c->ooo_last = TL_OOO_NIL;
	c->ooo_n--;
	if (c->ooo_n == 0)
		sack_empty(c);
	else
		c->sack_stale = true;
}

uint32_t tl_ooo_pop(struct tl_tcp_conn *c)
{
	uint32_t i = c->ooo_head;

	unlink_entry(c, i);
	return i;
}

/*
 * An unlinked entry lets go of its charge, its share of the packet reference and its
 * slot. When nothing is queued any more the slice starts afresh (an entry popped for
 * delivery whose connection was dropped meanwhile is the last one out: nothing is queued
 * on a dead connection).
 */
void tl_ooo_put(struct tl_tcp_conn *c, uint32_t i)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_ooo *e = &c->ooo[i];

	c->ooo_bytes -= e->charge;
	s->ooo_bytes -= e->charge;
	if (e->snext == i) {
		s->ops.pkt_release(s->ops_ctx, e->pkt);
	} else {
		c->ooo[e->sprev].snext = e->snext;
		c->ooo[e->snext].sprev = e->sprev;
	}
	e->next = c->ooo_free;
	c->ooo_free = i;
	if (c->ooo_n == 0) {
		c->ooo_free = TL_OOO_NIL;
		c->ooo_fresh = 0;
	}
}

static void drop_tail(struct tl_tcp_conn *c)
{
	uint32_t i = c->ooo_tail;

	unlink_entry(c, i);
	tl_ooo_put(c, i);
}

void tl_ooo_clear(struct tl_tcp_conn *c)
{
	while (c->ooo_n)
		drop_tail(c);
}

/*
 * A FIN fixes where the stream ends (RFC 9293 3.10.7.4: data past it is not data). The
 * queue keeps the invariant that a FIN it holds is on its last entry and nothing reaches
 * past it: a segment is cut to a queued FIN, and a FIN coming in cuts the queue back to
 * it. Returns false when nothing of the segment is left to queue.
 */
bool tl_ooo_fit_fin(struct tl_tcp_conn *c, uint32_t seq, uint32_t *len, bool *fin)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_ooo *q = c->ooo;
	uint32_t end = seq + *len;

	if (c->ooo_n && q[c->ooo_tail].fin) {
		uint32_t fin_seq = q[c->ooo_tail].seq + q[c->ooo_tail].len;
		if (TL_SEQ_GT(end, fin_seq)) { /* bytes past the queued FIN: cut there */
			if (TL_SEQ_GEQ(seq, fin_seq)) {
				s->st.drop_window++;
				return false;
			}
			*len = fin_seq - seq;
			*fin = false;
		} else if (*fin && end != fin_seq) {
			/* A FIN before the queued one: the queued one stands, the bytes are kept.
			 * (The segment is never lengthened: its bytes end where its data does.) */
			*fin = false;
		}
		return true;
	}
	if (!*fin)
		return true;
	while (c->ooo_n && TL_SEQ_GEQ(q[c->ooo_tail].seq, end)) {
		drop_tail(c);
		s->st.drop_window++;
	}
	for (uint32_t i = c->ooo_head; i != TL_OOO_NIL; i = q[i].next)
		if (TL_SEQ_GT(q[i].seq + q[i].len, end)) {
			q[i].len = end - q[i].seq;
			c->sack_stale = true;
		}
	return true;
}

/* The last entry starting below seq (TL_OOO_NIL: none), i.e. where seq goes after: on
 * from the entry queued last when it starts below seq, else back from the tail. */
static uint32_t find_pred(const struct tl_tcp_conn *c, uint32_t seq)
{
	const struct tl_ooo *q = c->ooo;
	uint32_t p = c->ooo_last;

	if (p != TL_OOO_NIL && TL_SEQ_LT(q[p].seq, seq)) {
		while (q[p].next != TL_OOO_NIL && TL_SEQ_LT(q[q[p].next].seq, seq))
			p = q[p].next;
		return p;
	}
	for (p = c->ooo_tail; p != TL_OOO_NIL && TL_SEQ_GEQ(q[p].seq, seq); p = q[p].prev)
		;
	return p;
}

/*
 * Room for a segment going after entry p charging `charge` bytes: the connection holds at
 * most rcv_buf and the stack cfg.ooo_mem, ooo_max entries each. When over, entries after p
 * (the furthest from the hole, the last the sender will need) go first; if that is not
 * enough the new segment is refused. Returns false then.
 */
static bool make_room(struct tl_tcp_conn *c, uint32_t p, uint32_t charge)
{
	struct tl_tcp_stack *s = c->stack;

	while (c->ooo_n == s->cfg.ooo_max || c->ooo_bytes + charge > s->cfg.rcv_buf ||
	       s->ooo_bytes + charge > s->cfg.ooo_mem) {
		if (c->ooo_tail == p) {
			s->st.drop_ooo_full++;
			return false;
		}
		drop_tail(c);
		s->st.drop_ooo_full++;
	}
	return true;
}

/* Entry i holds its packet: with a neighbour of the same packet (a piece of the same frame,
 * which that neighbour holds), through the neighbour's reference; else with its own. */
static void share_pkt(struct tl_tcp_conn *c, uint32_t i)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_ooo *q = c->ooo;
	uint32_t n = q[i].prev;

	if (n == TL_OOO_NIL || q[n].pkt != q[i].pkt)
		n = q[i].next;
	if (n == TL_OOO_NIL || q[n].pkt != q[i].pkt) {
		s->ops.pkt_hold(s->ops_ctx, q[i].pkt);
		q[i].sprev = q[i].snext = i;
		return;
	}
	/* (A packet still held cannot have been freed and its handle reused: same handle,
	 * same packet.) */
	q[i].sprev = n;
	q[i].snext = q[n].snext;
	q[q[n].snext].sprev = i;
	q[n].snext = i;
}

/*
 * Entry i, just linked, into the SACK blocks without a walk where the blocks kept can tell:
 * when they are every range the queue has (sack_below false), or the entry lies at or above
 * the lowest one kept. It merges with the ranges it touches, or stands as a range of its
 * own (the lowest kept then makes room for it, and ranges are left below); it is the
 * newest. A merge that leaves fewer than four ranges kept above others goes stale instead.
 */
static void sack_add(struct tl_tcp_conn *c, uint32_t i)
{
	const struct tl_ooo *e = &c->ooo[i];
	struct tl_sack_range *top = c->sack_top, r = { e->seq, e->seq + e->len + e->fin }, t[5];
	uint32_t n = c->sack_ntop, j, k, m;

	if (c->sack_stale || (c->sack_below && TL_SEQ_LT(r.start, top[0].start))) {
		c->sack_stale = true;
		return;
	}
	for (j = 0; j < n && TL_SEQ_LT(top[j].end, r.start); j++)
		;
	for (k = j; k < n && TL_SEQ_LEQ(top[k].start, r.end); k++) {
		if (TL_SEQ_LT(top[k].start, r.start))
			r.start = top[k].start;
		if (TL_SEQ_GT(top[k].end, r.end))
			r.end = top[k].end;
	}
	memcpy(t, top, j * sizeof(t[0]));
	m = j;
	t[m++] = r;
	memcpy(t + m, top + k, (n - k) * sizeof(t[0]));
	m += n - k;
	if (m == 5) {
		memmove(t, t + 1, 4 * sizeof(t[0]));
		m = 4;
		c->sack_below = true;
	}
	if (c->sack_below && m < 4) {
		c->sack_stale = true;
		return;
	}
	memcpy(top, t, m * sizeof(t[0]));
	c->sack_ntop = (uint8_t)m;
	c->sack_first = r;
	c->sack_has_first = true;
}

void tl_ooo_insert(struct tl_tcp_conn *c, uint32_t seq, uint32_t len, const uint8_t *data,
		   bool fin, void *pkt)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_ooo *q = c->ooo;
	uint32_t p = find_pred(c, seq), i, charge = len > c->mss ? len : c->mss;

	for (i = p != TL_OOO_NIL ? p : c->ooo_head;
	     i != TL_OOO_NIL && TL_SEQ_LEQ(q[i].seq, seq); i = q[i].next)
		if (TL_SEQ_GEQ(q[i].seq + q[i].len, seq + len) && (q[i].fin || !fin)) {
			s->st.dup_segs++; /* already held in full */
			return;
		}
	if (!make_room(c, p, charge))
		return;
	i = slot_get(c);
	q[i] = (struct tl_ooo){ .seq = seq, .len = len, .charge = charge, .data = data,
				.pkt = pkt, .fin = fin, .prev = p };
	q[i].next = p != TL_OOO_NIL ? q[p].next : c->ooo_head;
	if (p != TL_OOO_NIL)
		q[p].next = i;
	else
		c->ooo_head = i;
	if (q[i].next != TL_OOO_NIL)
		q[q[i].next].prev = i;
	else
		c->ooo_tail = i;
	share_pkt(c, i);
	c->ooo_n++;
	c->ooo_last = i;
	c->sack_recent = seq;
	sack_add(c, i);
	c->ooo_bytes += charge;
	s->ooo_bytes += charge;
	s->st.ooo_queued++;
}
