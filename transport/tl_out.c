/*
 * tl_out.c — TCP-lite output: builds TCP headers and options (SACK blocks from the
 * out-of-order queue among them), slices the zero-copy send queue into segments, resends
 * (at snd_una, or the holes of the SACK scoreboard) and hands segments to the backend
 * through ops.emit. Also the software checksum for the fake link and backends without
 * offload.
 *
 * Call chain: tl_tcp_send / tl_in.c (ACK clocking) / tl_timer.c (RTO, probes, delayed
 * ACK) -> tl_out_push / tl_out_ack / tl_out_retransmit -> emit_seg -> ops.emit.
 *
 * Sequence space of the send side:
 *   snd_una ...... snd_nxt ...... snd_una + sq_bytes (= data_end) [+1 for FIN]
 * The send queue holds exactly the bytes [snd_una, data_end); sq_head_off skips the
 * acknowledged prefix of its first buffer.
 */
#include <errno.h>
#include <string.h>

#include "tl_tcp_pvt.h"

#define TCPOPT_EOL    0
#define TCPOPT_NOP    1
#define TCPOPT_MSS    2
#define TCPOPT_WS     3
#define TCPOPT_SACK_OK 4
#define TCPOPT_SACK   5
#define TCPOPT_TS     8

static void be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* ---- checksum -------------------------------------------------------------- */

static uint32_t sum_bytes(uint32_t sum32, const uint8_t *p, uint32_t len, bool *odd)
{
	uint64_t sum = sum32;
	uint32_t i = 0;

	/* A piece that starts after an odd number of bytes continues the split word. */
	if (*odd && len > 0) {
		sum += p[0];
		i = 1;
		*odd = false;
	}
	/* Big-endian 32-bit words: the one's complement sum of 16-bit words is the
	 * folded sum of 32-bit ones, and a 64-bit accumulator cannot overflow here. */
	for (; i + 4 <= len; i += 4) {
		uint32_t w;
		memcpy(&w, p + i, 4);
		sum += __builtin_bswap32(w);
	}
	for (; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (i < len) {
		sum += (uint32_t)p[i] << 8;
		*odd = true;
	}
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint32_t)sum;
}

uint16_t tl_tcp_cksum(uint32_t saddr, uint32_t daddr, uint32_t tcp_len,
		      const struct tl_tcp_slice *pieces, uint32_t n)
{
	uint32_t sum = (saddr >> 16) + (saddr & 0xffff) + (daddr >> 16) + (daddr & 0xffff) + 6u +
		       (tcp_len >> 16) + (tcp_len & 0xffff);
	bool odd = false;

	for (uint32_t i = 0; i < n; i++)
		sum = sum_bytes(sum, pieces[i].base, pieces[i].len, &odd);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

void tl_tcp_tx_cksum(struct tl_tcp_tx *tx)
{
	struct tl_tcp_slice p[TL_TCP_TX_SLICES + 1];
	uint16_t ck;

	p[0].base = tx->hdr;
	p[0].len = tx->hdr_len;
	p[0].sb = NULL;
	memcpy(&p[1], tx->slice, tx->nslices * sizeof(tx->slice[0]));
	tx->hdr[16] = tx->hdr[17] = 0;
	ck = tl_tcp_cksum(tx->saddr, tx->daddr, tx->hdr_len + tx->payload_len, p, tx->nslices + 1u);
	be16(tx->hdr + 16, ck);
}

bool tl_tcp_rx_cksum_ok(const struct tl_tcp_rx *rx)
{
	struct tl_tcp_slice p = { .base = rx->tcp, .len = rx->tcp_len, .sb = NULL };

	return tl_tcp_cksum(rx->saddr, rx->daddr, rx->tcp_len, &p, 1) == 0;
}

/* ---- header ---------------------------------------------------------------- */

uint32_t tl_out_tsval(const struct tl_tcp_stack *s)
{
	/* Microsecond ticks by default: datacenter RTTs are far below RFC 7323's 1 ms
	 * suggestion. +1: a TSecr of 0 reads as "no echo". */
	return (uint32_t)((s->now - s->ts_base) / s->cfg.ts_tick_ns) + 1u;
}

uint32_t tl_out_rcv_wnd(struct tl_tcp_conn *c)
{
	const struct tl_tcp_cfg *cfg = &c->stack->cfg;
	uint32_t unit = 1u << c->rcv_wscale;
	uint32_t full = cfg->rcv_buf & ~(unit - 1u);
	uint32_t space = tl_conn_rcv_space(c) & ~(unit - 1u);
	uint32_t sws = min_u32(cfg->rcv_buf / 2u, cfg->mss);
	uint32_t edge = c->rcv_nxt + space;

	/* Never move the right edge left (RFC 9293 3.8.6), and open it only in steps
	 * worth a segment (receiver-side silly window avoidance, RFC 1122 4.2.3.3). */
	if (TL_SEQ_LT(edge, c->rcv_adv) ||
	    (edge - c->rcv_adv < sws && space < full))
		edge = c->rcv_adv;
	if (TL_SEQ_LT(edge, c->rcv_nxt))
		edge = c->rcv_nxt;
	c->rcv_adv = edge;
	return edge - c->rcv_nxt;
}

static uint32_t put_ts(struct tl_tcp_conn *c, uint8_t *o)
{
	o[0] = TCPOPT_NOP;
	o[1] = TCPOPT_NOP;
	o[2] = TCPOPT_TS;
	o[3] = 10;
	be32(o + 4, tl_out_tsval(c->stack));
	be32(o + 8, c->ts_recent);
	return 12;
}

/*
 * Rebuilds the SACK blocks kept beside the out-of-order queue (sack_top, sack_first) with
 * one walk of it: its ranges are its entries merged where they touch (a FIN counts as a
 * byte), ascending; the four highest are kept (sack_below: and there are more), and the
 * one holding sack_recent.
 */
static void sack_walk(struct tl_tcp_conn *c)
{
	const struct tl_ooo *q = c->ooo;
	struct tl_sack_range cur, *top = c->sack_top;
	uint32_t n = 0, all = 0;

	c->sack_has_first = false;
	for (uint32_t i = c->ooo_head; i != TL_OOO_NIL;) {
		cur.start = q[i].seq;
		cur.end = q[i].seq + q[i].len + q[i].fin;
		for (i = q[i].next; i != TL_OOO_NIL && TL_SEQ_LEQ(q[i].seq, cur.end); i = q[i].next)
			if (TL_SEQ_GT(q[i].seq + q[i].len + q[i].fin, cur.end))
				cur.end = q[i].seq + q[i].len + q[i].fin;
		if (TL_SEQ_GEQ(c->sack_recent, cur.start) && TL_SEQ_LT(c->sack_recent, cur.end)) {
			c->sack_first = cur;
			c->sack_has_first = true;
		}
		if (n == 4) {
			memmove(&top[0], &top[1], 3 * sizeof(top[0]));
			n = 3;
		}
		top[n++] = cur;
		all++;
	}
	c->sack_ntop = (uint8_t)n;
	c->sack_below = all > n;
	c->sack_stale = false;
	c->stack->st.sack_walks++;
}

/*
 * SACK blocks for what the out-of-order queue holds (RFC 2018 4): the range holding the
 * segment that arrived last first, then the highest others, as many as fit in room.
 */
static uint32_t put_sack(struct tl_tcp_conn *c, uint8_t *o, uint32_t room)
{
	uint32_t max = room >= 12u ? (room - 4u) / 8u : 0, n = 0;

	if (room < 12u || c->ooo_n == 0)
		return 0;
	if (max > 4)
		max = 4;
	if (c->sack_stale)
		sack_walk(c);
	o[0] = TCPOPT_NOP;
	o[1] = TCPOPT_NOP;
	o[2] = TCPOPT_SACK;
	if (c->sack_has_first) {
		be32(o + 4, c->sack_first.start);
		be32(o + 8, c->sack_first.end);
		n++;
	}
	for (uint32_t k = c->sack_ntop; k > 0 && n < max; k--) {
		const struct tl_sack_range *r = &c->sack_top[k - 1];
		if (c->sack_has_first && r->start == c->sack_first.start)
			continue;
		be32(o + 4 + 8 * n, r->start);
		be32(o + 8 + 8 * n, r->end);
		n++;
	}
	if (n == 0)
		return 0;
	o[3] = (uint8_t)(2u + 8u * n);
	return 4u + 8u * n;
}

static void put_hdr(struct tl_tcp_conn *c, struct tl_tcp_tx *tx, uint32_t seq, uint8_t flags,
		    uint32_t opt_len, uint16_t wnd)
{
	uint8_t *h = tx->hdr;

	tx->saddr = c->t.laddr;
	tx->daddr = c->t.raddr;
	be16(h, c->t.lport);
	be16(h + 2, c->t.rport);
	be32(h + 4, seq);
	be32(h + 8, (flags & TL_TCP_ACK) ? c->rcv_nxt : 0);
	h[12] = (uint8_t)(((20u + opt_len) / 4u) << 4);
	h[13] = flags;
	be16(h + 14, wnd);
	h[16] = h[17] = h[18] = h[19] = 0;
	tx->hdr_len = (uint8_t)(20u + opt_len);
}

static void do_emit(struct tl_tcp_stack *s, const struct tl_tcp_tx *tx)
{
	s->st.seg_out++;
	s->st.bytes_out += tx->payload_len;
	if (s->ops.emit(s->ops_ctx, tx) != 0)
		s->st.drop_emit++;
}

/* Fills tx->slice with send-queue bytes [seq, seq + len). Returns bytes covered
 * (less than len when the slice array runs out). */
static uint32_t fill_slices(struct tl_tcp_conn *c, struct tl_tcp_tx *tx, uint32_t seq, uint32_t len)
{
	struct tl_tcp_sbuf *sb = c->sq_head;
	uint32_t start = c->snd_una - c->sq_head_off, off, got = 0;

	/* Resume from the cursor when it is at or before seq: output walks the queue
	 * forward, so a long queue of small buffers is not rescanned per segment. */
	if (c->sq_cur && TL_SEQ_GEQ(seq, c->sq_cur_seq) && TL_SEQ_GEQ(c->sq_cur_seq, start)) {
		sb = c->sq_cur;
		start = c->sq_cur_seq;
	}
	off = seq - start;
	while (sb && off >= sb->len) {
		off -= sb->len;
		start += sb->len;
		sb = sb->next;
	}
	tx->nslices = 0;
	while (sb && got < len && tx->nslices < TL_TCP_TX_SLICES) {
		uint32_t n = min_u32(sb->len - off, len - got);
		tx->slice[tx->nslices].base = sb->base + off;
		tx->slice[tx->nslices].len = n;
		tx->slice[tx->nslices].sb = sb;
		tx->nslices++;
		got += n;
		/*
		 * The cursor stays on the buffer where the next segment starts: left where it
		 * was, each segment of small messages re-walked the ~30 buffers of the one before
		 * (a cache miss per piece, per message). The tail is kept, not NULL, so bytes
		 * queued behind it are found from there and not from the head.
		 */
		if (off + n < sb->len || !sb->next)
			break;
		start += sb->len;
		off = 0;
		sb = sb->next;
	}
	c->sq_cur = sb;
	c->sq_cur_seq = start;
	return got;
}

/* Emits one segment of a synchronized connection; returns payload bytes sent. */
static uint32_t emit_seg(struct tl_tcp_conn *c, uint32_t seq, uint32_t len, uint8_t flags)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_tcp_tx tx;
	uint32_t opt = 0, wnd, want = len;

	if (c->ts_ok)
		opt = put_ts(c, tx.hdr + 20);
	if (c->sack_ok && c->ooo_n) {
		uint32_t sack = put_sack(c, tx.hdr + 20 + opt, TL_TCP_HDR_MAX - 20u - opt);
		/* c->mss leaves room for the timestamp option only: SACK blocks take theirs
		 * from the payload, or the segment outgrows the MTU (RFC 6691). */
		opt += sack;
		len = min_u32(len, c->mss - sack);
	}
	len = len ? fill_slices(c, &tx, seq, len) : 0;
	if (!len)
		tx.nslices = 0;
	/* Cut short (SACK room, or the slice array ran out): the FIN goes after the last
	 * byte, in a later segment. Callers read the FIN as sent only if seq + len ends
	 * the data. */
	if (len < want)
		flags &= (uint8_t)~TL_TCP_FIN;
	if (c->ecn_ok && c->ce_state)
		flags |= TL_TCP_ECE;
	if (c->cwr_pending && len) {
		flags |= TL_TCP_CWR;
		c->cwr_pending = false;
	}
	wnd = tl_out_rcv_wnd(c) >> c->rcv_wscale;
	put_hdr(c, &tx, seq, flags | TL_TCP_ACK, opt, (uint16_t)min_u32(wnd, 0xffff));
	tx.payload_len = len;
	/* SACK blocks take room from every cut segment's payload: such a segment is never
	 * above the MSS (see above), so the device's cut size is the MSS itself. */
	tx.tso_segsz = len > c->mss ? (uint16_t)c->mss : 0;
	tx.ecn = (c->ecn_ok && len) ? TL_ECN_ECT0 : TL_ECN_NOT_ECT;
	do_emit(s, &tx);
	c->seg_out++;
	/* Every segment carries the latest ACK: nothing is owed any more. */
	c->unacked_segs = 0;
	c->delack_at = 0;
	c->ack_now = false;
	c->ts_last_ack_sent = c->rcv_nxt;
	return len;
}

void tl_out_syn(struct tl_tcp_conn *c, bool ack)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_tcp_tx tx;
	uint8_t *o = tx.hdr + 20, flags = TL_TCP_SYN;
	uint32_t opt = 0;

	o[opt++] = TCPOPT_MSS;
	o[opt++] = 4;
	be16(o + opt, s->cfg.mss);
	opt += 2;
	/* Active open offers what is configured; the SYN-ACK only echoes what was offered. */
	if (ack ? c->ws_ok : s->cfg.wscale) {
		o[opt++] = TCPOPT_NOP;
		o[opt++] = TCPOPT_WS;
		o[opt++] = 3;
		o[opt++] = c->rcv_wscale;
	}
	if (ack ? c->ts_ok : s->cfg.timestamps)
		opt += put_ts(c, o + opt);
	if (ack ? c->sack_ok : s->cfg.sack) {
		o[opt++] = TCPOPT_NOP;
		o[opt++] = TCPOPT_NOP;
		o[opt++] = TCPOPT_SACK_OK;
		o[opt++] = 2;
	}
	if (ack) {
		flags |= TL_TCP_ACK;
		if (c->ecn_ok)
			flags |= TL_TCP_ECE;
	} else if (s->cfg.ecn) {
		flags |= TL_TCP_ECE | TL_TCP_CWR;
	}
	/* The window in a SYN is never scaled (RFC 7323 2.2). */
	c->rcv_adv = c->rcv_nxt + min_u32(tl_conn_rcv_space(c), 0xffff);
	put_hdr(c, &tx, c->iss, flags, opt, (uint16_t)min_u32(tl_conn_rcv_space(c), 0xffff));
	tx.nslices = 0;
	tx.payload_len = 0;
	tx.tso_segsz = 0;
	tx.ecn = TL_ECN_NOT_ECT;
	do_emit(s, &tx);
	c->seg_out++;
	if (c->snd_nxt == c->iss)
		c->snd_nxt = c->snd_max = c->iss + 1;
	if (c->rto_at == 0)
		tl_timer_rto_restart(c);
}

/*
 * A pure ACK carries the highest sequence sent (snd_max), not snd_nxt: after a timeout
 * pulls snd_nxt back, an ACK at snd_nxt is below what the peer already received and the
 * peer finds it unacceptable, answers with an ACK of its own, and two stacks in that state
 * ping-pong ACKs forever. Clamped to the right edge of the peer's window, which it accepts.
 */
void tl_out_ack(struct tl_tcp_conn *c)
{
	uint32_t seq = c->snd_max, edge = c->snd_una + c->snd_wnd;

	if (TL_SEQ_GT(seq, edge) && TL_SEQ_GEQ(edge, c->snd_nxt))
		seq = edge;
	emit_seg(c, seq, 0, 0);
}

/*
 * ACKs we owe an unverified sender (RFC 5961 challenge ACKs, PAWS rejections) come out of
 * a budget per connection and second, of a random size: one stack-wide budget was the
 * CVE-2016-5696 side channel (an off-path attacker counts the challenge ACKs on its own
 * connection to learn whether its spoofed RST hit a live one) and let one client starve
 * everyone's challenge ACKs. Linux went the same way (per socket, randomised counts).
 * Returns true when the ACK went out.
 */
#define TL_CHALLENGE_PER_SEC 20u

bool tl_out_ack_limited(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;

	if (c->chal_at == 0 || s->now - c->chal_at >= 1000000000ull) {
		c->chal_at = s->now ? s->now : 1u;
		c->chal_left = TL_CHALLENGE_PER_SEC / 2u + tl_rand(s) % TL_CHALLENGE_PER_SEC;
	}
	if (c->chal_left == 0)
		return false;
	c->chal_left--;
	tl_out_ack(c);
	return true;
}

void tl_out_challenge_ack(struct tl_tcp_conn *c)
{
	if (tl_out_ack_limited(c))
		c->stack->st.challenge_acks++;
}

/*
 * At snd_max, the highest sequence sent: a timeout or a zero window pulls snd_nxt below
 * it, and a RST there lies below the window of a peer that got everything, which an
 * RFC 5961 receiver drops without a word. At snd_max it is exact, or in the window of a
 * peer that lacks some bytes (whose challenge ACK then draws an exact one).
 */
void tl_out_rst(struct tl_tcp_conn *c)
{
	struct tl_tcp_tx tx;

	put_hdr(c, &tx, c->snd_max, TL_TCP_RST | TL_TCP_ACK, 0, 0);
	tx.nslices = 0;
	tx.payload_len = 0;
	tx.tso_segsz = 0;
	tx.ecn = TL_ECN_NOT_ECT;
	c->stack->st.rst_out++;
	do_emit(c->stack, &tx);
}

/* A segment answering rx with no connection of its own: addresses and ports swapped, seq/ack. */
static void reply_to(struct tl_tcp_tx *tx, const struct tl_tcp_rx *rx, uint32_t seq, uint32_t ack)
{
	tx->saddr = rx->daddr;
	tx->daddr = rx->saddr;
	memcpy(tx->hdr, rx->tcp + 2, 2);
	memcpy(tx->hdr + 2, rx->tcp, 2);
	be32(tx->hdr + 4, seq);
	be32(tx->hdr + 8, ack);
}

void tl_out_rst_for(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint32_t seq, uint32_t ack,
		    uint8_t flags)
{
	struct tl_tcp_tx tx;
	uint8_t *h = tx.hdr;

	reply_to(&tx, rx, seq, ack);
	h[12] = 5u << 4;
	h[13] = (uint8_t)(TL_TCP_RST | flags);
	memset(h + 14, 0, 6);
	tx.hdr_len = 20;
	tx.nslices = 0;
	tx.payload_len = 0;
	tx.tso_segsz = 0;
	tx.ecn = TL_ECN_NOT_ECT;
	s->st.rst_out++;
	do_emit(s, &tx);
}

/*
 * A SYN-ACK that keeps no state (SYN cookies): iss is the cookie. Options as tl_out_syn
 * would send them for what the SYN offered; with timestamps, the TSval's low bits carry
 * what the cookie cannot (tl_cookie_tsval).
 */
void tl_out_cookie_synack(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint32_t iss,
			  uint32_t ack, const struct tl_cookie_opts *o, uint32_t peer_tsval)
{
	struct tl_tcp_tx tx;
	uint8_t *h = tx.hdr, *op = tx.hdr + 20, flags = TL_TCP_SYN | TL_TCP_ACK;
	uint32_t opt = 0;

	op[opt++] = TCPOPT_MSS;
	op[opt++] = 4;
	be16(op + opt, s->cfg.mss);
	opt += 2;
	if (o->ws_ok) {
		op[opt++] = TCPOPT_NOP;
		op[opt++] = TCPOPT_WS;
		op[opt++] = 3;
		op[opt++] = s->rcv_wscale;
	}
	if (o->ts_ok) {
		op[opt++] = TCPOPT_NOP;
		op[opt++] = TCPOPT_NOP;
		op[opt++] = TCPOPT_TS;
		op[opt++] = 10;
		be32(op + opt, tl_cookie_tsval(tl_out_tsval(s), o));
		be32(op + opt + 4, peer_tsval);
		opt += 8;
	}
	if (o->sack_ok) {
		op[opt++] = TCPOPT_NOP;
		op[opt++] = TCPOPT_NOP;
		op[opt++] = TCPOPT_SACK_OK;
		op[opt++] = 2;
	}
	if (o->ecn_ok)
		flags |= TL_TCP_ECE;
	reply_to(&tx, rx, iss, ack);
	h[12] = (uint8_t)(((20u + opt) / 4u) << 4);
	h[13] = flags;
	be16(h + 14, (uint16_t)min_u32(s->cfg.rcv_buf, 0xffff));
	h[16] = h[17] = h[18] = h[19] = 0;
	tx.hdr_len = (uint8_t)(20u + opt);
	tx.nslices = 0;
	tx.payload_len = 0;
	tx.tso_segsz = 0;
	tx.ecn = TL_ECN_NOT_ECT;
	s->st.syncookies_sent++;
	do_emit(s, &tx);
}

static bool can_send_data(const struct tl_tcp_conn *c)
{
	return c->state == TL_TCP_ESTABLISHED || c->state == TL_TCP_CLOSE_WAIT ||
	       c->state == TL_TCP_FIN_WAIT_1 || c->state == TL_TCP_CLOSING ||
	       c->state == TL_TCP_LAST_ACK;
}

/* Sender-side silly window avoidance (RFC 1122 4.2.3.4) without Nagle: a short
 * segment goes out only when it empties the queue or is half the peer's largest window. */
static bool worth_sending(const struct tl_tcp_conn *c, uint32_t len, uint32_t avail)
{
	return len >= c->mss || len == avail || len >= c->max_snd_wnd / 2u;
}

/* The most payload one new segment carries: the MSS, or whole MSS multiples with TSO. */
static uint32_t seg_max(const struct tl_tcp_conn *c)
{
	uint32_t t = c->stack->cfg.tso_max;

	return t > c->mss ? t - t % c->mss : c->mss;
}

static void note_sent(struct tl_tcp_conn *c, uint32_t len)
{
	if (TL_SEQ_GT(c->snd_nxt, c->snd_max)) {
		if (!c->ts_ok && c->rtt_start == 0) {
			c->rtt_start = c->stack->now + 1u; /* 0 means "not timing" */
			c->rtt_seq = c->snd_nxt;
		}
		c->snd_max = c->snd_nxt;
	} else if (len) {
		c->retrans++;
		c->stack->st.retrans++;
	}
	if (c->rto_at == 0)
		tl_timer_rto_restart(c);
}

void tl_out_push(struct tl_tcp_conn *c)
{
	uint32_t data_end = c->snd_una + c->sq_bytes;

	if (!can_send_data(c))
		return;
	if (c->fin_sent && TL_SEQ_GT(c->snd_una, data_end))
		return; /* FIN acknowledged: nothing left in sequence space */
	for (;;) {
		uint32_t wnd = min_u32(c->cwnd, c->snd_wnd), inflight = c->snd_nxt - c->snd_una;
		uint32_t avail = TL_SEQ_LT(c->snd_nxt, data_end) ? data_end - c->snd_nxt : 0;
		uint32_t len = min_u32(min_u32(avail, seg_max(c)), wnd > inflight ? wnd - inflight : 0);
		uint32_t seq = c->snd_nxt;
		uint8_t flags = 0;

		if (avail && (len == 0 || !worth_sending(c, len, avail)))
			break;
		if (!avail && !(c->fin_queued && c->snd_nxt == data_end))
			break;
		if (c->fin_queued && seq + len == data_end)
			flags = TL_TCP_FIN;
		if (len)
			flags |= TL_TCP_PSH;
		len = emit_seg(c, seq, len, flags);
		if ((flags & TL_TCP_FIN) && seq + len == data_end) {
			c->fin_sent = true;
			c->snd_nxt = seq + len + 1u;
			note_sent(c, len);
			break;
		}
		c->snd_nxt = seq + len;
		note_sent(c, len);
	}
	/*
	 * Data waiting that the peer's window keeps back: probe until it opens. Zero window:
	 * whatever is in flight sits past the peer's right edge and is discarded there, so it
	 * is no loss (no RTO, no cwnd cut): it goes again once the window opens. A window
	 * open but too small to be worth a segment, with nothing in flight (cwnd is never
	 * below an MSS then), is the same wait: no ACK is coming and no RTO runs, so a lost
	 * window update would stall the connection for good without the probe.
	 */
	if ((c->snd_wnd == 0 && TL_SEQ_LT(c->snd_una, data_end)) ||
	    (c->snd_una == c->snd_max && TL_SEQ_LT(c->snd_nxt, data_end))) {
		if (c->snd_wnd == 0) {
			c->snd_nxt = c->snd_una;
			c->rto_at = 0;
			c->rtt_start = 0; /* Karn: the timed segment goes again */
		}
		if (c->persist_at == 0) {
			c->persist_backoff = 0;
			c->persist_at = c->stack->now + c->rto_ns;
		}
		tl_timer_update(c);
	} else if (c->persist_at) {
		c->persist_at = 0;
		tl_timer_update(c);
	}
}

/*
 * Resends the segment at snd_una, made only of bytes sent before: [snd_una, snd_max).
 * The queue may have grown since (a short message went out alone and the app queued more
 * while its RTO backed off), but bytes past snd_max are new data, for tl_out_push, which
 * checks the windows and moves snd_max. Sent from here they would leave snd_max behind
 * what is on the wire: the peer's ACK for them is then "above snd_max" and dropped as
 * bad_ack, data and all, once snd_una reaches the stale snd_max no RTO runs, and our pure
 * ACKs (sent at snd_max) fall below what the peer holds, so it drops them too: both ends
 * stall for good (seen with 100 Linux connections over TAP).
 */
uint32_t tl_out_retransmit(struct tl_tcp_conn *c)
{
	uint32_t data_end = c->snd_una + c->sq_bytes;
	uint32_t len = min_u32(c->mss, min_u32(c->sq_bytes, c->snd_max - c->snd_una));
	uint8_t flags = 0;

	if (!can_send_data(c))
		return 0;
	if (c->fin_sent && TL_SEQ_GT(c->snd_una, data_end))
		return 0;
	if (len == 0 && !c->fin_sent)
		return 0;
	if (c->fin_sent && c->snd_una + len == data_end)
		flags = TL_TCP_FIN;
	len = emit_seg(c, c->snd_una, len, flags | (len ? TL_TCP_PSH : 0));
	c->retrans++;
	c->stack->st.retrans++;
	if (c->snd_nxt == c->snd_una)
		c->snd_nxt = c->snd_una + len + ((flags & TL_TCP_FIN) && c->snd_una + len == data_end);
	if (c->rto_at == 0)
		tl_timer_rto_restart(c);
	return len;
}

/*
 * Recovery with SACK (RFC 6675 NextSeg, lite): resends up to an MSS of the first hole at
 * or after rxt_next that lies below a SACKed range, i.e. bytes the peer lacks while it
 * holds later ones. A hole lies below snd_max, so it is bytes sent before and never the
 * FIN. Returns true when a segment went out.
 */
bool tl_out_sack_rexmit(struct tl_tcp_conn *c)
{
	uint32_t seq = TL_SEQ_LT(c->rxt_next, c->snd_una) ? c->snd_una : c->rxt_next;

	if (!can_send_data(c))
		return false;
	for (uint32_t i = 0; i < c->nsacked; i++) {
		const struct tl_sack_range *r = &c->sacked[i];
		uint32_t len;

		if (TL_SEQ_GEQ(seq, r->start)) {
			if (TL_SEQ_LT(seq, r->end))
				seq = r->end;
			continue;
		}
		len = min_u32(min_u32(c->mss, r->start - seq), c->snd_una + c->sq_bytes - seq);
		len = len ? emit_seg(c, seq, len, TL_TCP_PSH) : 0;
		if (len == 0)
			return false;
		c->rxt_next = seq + len;
		c->retrans++;
		c->stack->st.retrans++;
		c->stack->st.sack_rexmits++;
		if (c->rto_at == 0)
			tl_timer_rto_restart(c);
		return true;
	}
	return false;
}

void tl_out_probe(struct tl_tcp_conn *c)
{
	/* An old sequence number forces the peer to answer with its current window
	 * (RFC 9293 3.10.7.4) without us committing a byte past a closed window. */
	c->stack->st.probes++;
	emit_seg(c, c->snd_una - 1u, 0, 0);
}
