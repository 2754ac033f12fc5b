/*
 * tl_in.c — TCP-lite input: validates a received segment, finds its connection or
 * listener, and runs the RFC 9293 3.10.7 "segment arrives" steps with RFC 5961
 * protections (exact-sequence RST, challenge ACKs, ACK range check), RFC 7323
 * options and PAWS, RFC 2018 SACK blocks into the sender's scoreboard, the out-of-order
 * queue (tl_ooo.c) and in-order delivery to the receiver.
 *
 * Call chain: backend -> tl_tcp_input -> seg_parse -> listen_input | syn_sent_input |
 * sync_input -> ack_input (tl_cc.c) / data_input -> cbs.recv; then tl_out_push and the
 * ACK decision (now or delayed, tl_timer.c).
 *
 * Packet ownership: the caller's reference on rx->pkt stays the caller's. A segment
 * parked out of order is held with ops.pkt_hold (once for the pieces of a frame parked side
 * by side) and released once the last of them is delivered or dropped.
 */
#include <errno.h>
#include <string.h>

#include "tl_tcp_pvt.h"

/* A parsed, validated segment. */
struct seg {
	uint32_t seq, ack, len, wnd;
	uint8_t flags;
	bool has_mss, has_ws, has_ts, has_sack_ok;
	uint16_t mss;
	uint8_t ws;
	uint32_t tsval, tsecr;
	uint32_t nsack;                /* SACK blocks (RFC 2018): at most 4 fit the options */
	struct tl_sack_range sack[4];
	const uint8_t *data;
};

static uint16_t ld_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t ld_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

static int parse_opts(const uint8_t *o, uint32_t n, struct seg *g)
{
	uint32_t i = 0;

	while (i < n) {
		uint8_t kind = o[i], len;
		if (kind == 0)
			break;                  /* end of option list */
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= n)
			return -EBADMSG;        /* kind without its length byte */
		len = o[i + 1];
		if (len < 2 || i + len > n)
			return -EBADMSG;        /* runs past the header */
		if (kind == 2) {
			if (len != 4)
				return -EBADMSG;
			g->has_mss = true;
			g->mss = ld_be16(o + i + 2);
		} else if (kind == 3) {
			if (len != 3)
				return -EBADMSG;
			g->has_ws = true;
			g->ws = o[i + 2];
		} else if (kind == 8) {
			if (len != 10)
				return -EBADMSG;
			g->has_ts = true;
			g->tsval = ld_be32(o + i + 2);
			g->tsecr = ld_be32(o + i + 6);
		} else if (kind == 4) {
			if (len != 2)
				return -EBADMSG;
			g->has_sack_ok = true;
		} else if (kind == 5) {
			if (len < 10 || (len - 2u) % 8u != 0 || g->nsack)
				return -EBADMSG;
			for (uint32_t b = 0; b < (len - 2u) / 8u; b++) {
				g->sack[b].start = ld_be32(o + i + 2 + 8 * b);
				g->sack[b].end = ld_be32(o + i + 6 + 8 * b);
			}
			g->nsack = (len - 2u) / 8u;
		}
		i += len;
	}
	return 0;
}

static int seg_parse(const struct tl_tcp_rx *rx, struct seg *g)
{
	const uint8_t *h = rx->tcp;
	uint32_t doff;
	uint8_t f;

	memset(g, 0, sizeof(*g));
	if (!h || rx->tcp_len < 20)
		return -EBADMSG;
	doff = (uint32_t)(h[12] >> 4) * 4u;
	if (doff < 20 || doff > rx->tcp_len)
		return -EBADMSG;
	if (ld_be16(h) == 0 || ld_be16(h + 2) == 0)
		return -EBADMSG;
	if (rx->saddr == rx->daddr && ld_be16(h) == ld_be16(h + 2))
		return -EBADMSG; /* "land": a segment claiming to come from its own socket */
	f = h[13];
	/* Combinations no TCP sends: scans and confused stacks. */
	if ((f & TL_TCP_SYN) && (f & (TL_TCP_FIN | TL_TCP_RST)))
		return -EBADMSG;
	if (!(f & (TL_TCP_SYN | TL_TCP_RST | TL_TCP_ACK)))
		return -EBADMSG;
	if (parse_opts(h + 20, doff - 20, g))
		return -EBADMSG;
	g->seq = ld_be32(h + 4);
	g->ack = ld_be32(h + 8);
	g->flags = f;
	g->wnd = ld_be16(h + 14);
	if (rx->payload != NULL) {
		g->data = rx->payload;
		g->len = rx->payload_len;
	} else {
		g->data = h + doff;
		g->len = rx->tcp_len - doff;
	}
	return 0;
}

static void take_syn_opts(struct tl_tcp_conn *c, const struct seg *g)
{
	const struct tl_tcp_cfg *cfg = &c->stack->cfg;
	uint16_t peer_mss = g->has_mss ? g->mss : 536u; /* RFC 9293 3.7.1 default */

	c->mss = min_u32(cfg->mss, peer_mss < 64 ? 64 : peer_mss);
	c->ws_ok = cfg->wscale && g->has_ws;
	c->snd_wscale = c->ws_ok ? (uint8_t)min_u32(g->ws, TL_MAX_WSCALE) : 0;
	c->rcv_wscale = c->ws_ok ? c->stack->rcv_wscale : 0;
	c->ts_ok = cfg->timestamps && g->has_ts;
	c->sack_ok = cfg->sack && g->has_sack_ok;
	if (c->ts_ok)
		c->ts_recent = g->tsval;
	/*
	 * The MSS option counts payload without TCP options (RFC 6691): every segment will
	 * carry the 12-byte timestamp option, so the payload shrinks by that much or the
	 * segment overflows the MTU.
	 */
	if (c->ts_ok)
		c->mss -= 12u;
	c->irs = g->seq;
	c->rcv_nxt = g->seq + 1u;
	c->rcv_adv = c->rcv_nxt;
	c->snd_wnd = g->wnd; /* never scaled in a SYN */
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = g->seq;
}

/* An RTT sample from an echoed timestamp, if the echo is plausible: a peer's TSecr is
 * not trusted to be one of ours (it could push the RTO to its ceiling). */
static void ts_rtt_sample(struct tl_tcp_conn *c, uint32_t tsecr)
{
	const struct tl_tcp_stack *s = c->stack;
	uint32_t ticks = tl_out_tsval(s) - tsecr;
	uint64_t ns = (uint64_t)ticks * s->cfg.ts_tick_ns;

	if ((int32_t)ticks >= 0 && ns <= s->cfg.rto_max_ns * 4u)
		tl_cc_rtt_sample(c, ns ? ns : 1u);
}

/* ---- no connection: listeners and RSTs --------------------------------------- */

static void rst_reply(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, const struct seg *g)
{
	if (g->flags & TL_TCP_RST)
		return;
	if (g->flags & TL_TCP_ACK)
		tl_out_rst_for(s, rx, g->ack, 0, 0);
	else
		tl_out_rst_for(s, rx, 0, g->seq + g->len + !!(g->flags & TL_TCP_SYN) +
				       !!(g->flags & TL_TCP_FIN), TL_TCP_ACK);
}

static int sync_input(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g);

/* A SYN the backlog (or the table) has no room for: a SYN cookie answers it, no state kept. */
static void cookie_synack(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, const struct seg *g,
			  const struct tl_tcp_tuple *t)
{
	struct tl_cookie_opts o = { 0 };
	uint16_t mss;
	uint32_t iss = tl_cookie_make(s, t, g->seq, g->has_mss ? g->mss : 536u, &mss);

	o.ts_ok = s->cfg.timestamps && g->has_ts;
	/* Without timestamps nothing carries these back: the connection goes without. */
	if (o.ts_ok) {
		o.ws_ok = s->cfg.wscale && g->has_ws;
		o.snd_wscale = o.ws_ok ? (uint8_t)min_u32(g->ws, TL_MAX_WSCALE) : 0;
		o.sack_ok = s->cfg.sack && g->has_sack_ok;
		o.ecn_ok = s->cfg.ecn && (g->flags & TL_TCP_ECE) && (g->flags & TL_TCP_CWR);
	}
	tl_out_cookie_synack(s, rx, iss, g->seq + 1u, &o, g->tsval);
}

/*
 * The ACK that returns a SYN cookie: the connection is made as if its SYN had found room
 * (SYN_RCVD, our SYN-ACK sent), and the ACK then completes it the usual way. Returns NULL
 * when the ACK carries no valid cookie or the table is full.
 */
static struct tl_tcp_conn *cookie_conn(struct tl_tcp_stack *s, struct tl_tcp_listener *l,
				       const struct tl_tcp_tuple *t, const struct seg *g)
{
	struct tl_cookie_opts o;
	struct tl_tcp_conn *c;

	if (!tl_cookie_check(s, t, g->seq, g->ack, g->has_ts, g->tsecr, &o)) {
		s->st.syncookies_bad++;
		return NULL;
	}
	c = tl_conn_alloc(s, t);
	if (!c)
		return NULL;
	s->st.syncookies_ok++;
	c->state = TL_TCP_SYN_RCVD;
	c->listener = l;
	l->embryonic++;
	c->cbs = l->cbs;
	c->arg = l->arg;
	c->iss = g->ack - 1u;
	c->snd_una = c->recover = c->iss;
	c->snd_nxt = c->snd_max = g->ack;
	c->mss = (uint16_t)min_u32(s->cfg.mss, o.mss);
	c->ts_ok = o.ts_ok;
	c->ws_ok = o.ws_ok;
	c->snd_wscale = o.snd_wscale;
	c->rcv_wscale = o.ws_ok ? s->rcv_wscale : 0;
	c->sack_ok = o.sack_ok;
	c->ecn_ok = o.ecn_ok;
	if (c->ts_ok) {
		c->ts_recent = g->tsval;
		c->mss -= 12u;
	}
	c->irs = g->seq - 1u;
	c->rcv_nxt = c->ts_last_ack_sent = g->seq;
	c->rcv_adv = c->rcv_nxt + min_u32(tl_conn_rcv_space(c), 0xffff); /* as the SYN-ACK said */
	tl_cc_init(c);
	return c;
}

static int listen_input(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_listener *l = tl_listener_lookup(s, rx->daddr, ld_be16(rx->tcp + 2));
	struct tl_tcp_tuple t;
	struct tl_tcp_conn *c;
	int rc;

	t.laddr = rx->daddr;
	t.raddr = rx->saddr;
	t.lport = ld_be16(rx->tcp + 2);
	t.rport = ld_be16(rx->tcp);
	/* An ACK for no connection may return a SYN cookie, if the listener sent one lately
	 * (a cookie lives two minutes): one that never overflowed has none to look for, and
	 * a blind attacker none to guess at. */
	if (l && l->cookie_at && s->now - l->cookie_at < 2u * 64000000000ull &&
	    (g->flags & (TL_TCP_SYN | TL_TCP_RST | TL_TCP_ACK)) == TL_TCP_ACK &&
	    (c = cookie_conn(s, l, &t, g)) != NULL) {
		c->busy++;
		c->seg_in++;
		rc = sync_input(c, rx, g);
		tl_conn_put(c);
		return rc;
	}
	if (!l || (g->flags & (TL_TCP_ACK | TL_TCP_RST)) || !(g->flags & TL_TCP_SYN)) {
		s->st.drop_no_conn++;
		rst_reply(s, rx, g);
		return -ENOTCONN;
	}
	/* Bounded backlog: a SYN flood fills embryonic slots, never the whole table. */
	if (l->embryonic >= l->backlog || !(c = tl_conn_alloc(s, &t))) {
		s->st.drop_backlog++;
		if (!s->cfg.syncookies)
			return -ENOBUFS;
		l->cookie_at = s->now ? s->now : 1u;
		cookie_synack(s, rx, g, &t);
		return 0;
	}
	c->state = TL_TCP_SYN_RCVD;
	c->listener = l;
	l->embryonic++;
	c->cbs = l->cbs;
	c->arg = l->arg;
	tl_conn_init_seq(c);
	take_syn_opts(c, g);
	c->ecn_ok = s->cfg.ecn && (g->flags & TL_TCP_ECE) && (g->flags & TL_TCP_CWR);
	tl_cc_init(c);
	tl_out_syn(c, true);
	return 0;
}

/* ---- SYN_SENT ------------------------------------------------------------------ */

static void established(struct tl_tcp_conn *c)
{
	/* tl_tcp_close during the handshake queued a FIN behind the data. */
	c->state = c->fin_queued ? TL_TCP_FIN_WAIT_1 : TL_TCP_ESTABLISHED;
	c->backoff = 0;
	c->rto_at = 0;
	tl_timer_update(c);
	c->dctcp_next_seq = c->snd_nxt;
	c->last_rx = c->stack->now;
	if (c->stack->cfg.keepalive_ns) {
		c->ka_at = c->last_rx + c->stack->cfg.keepalive_ns;
		tl_timer_update(c);
	}
	/* RFC 6582: recover starts at ISS, below every data byte, so a loss of the very
	 * first data segment may start fast recovery. */
	c->recover = c->iss;
}

static int syn_sent_input(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;
	bool ack_ok = (g->flags & TL_TCP_ACK) && TL_SEQ_GT(g->ack, c->iss) &&
		      TL_SEQ_LEQ(g->ack, c->snd_max);

	if ((g->flags & TL_TCP_ACK) && !ack_ok) {
		s->st.drop_bad_ack++;
		if (!(g->flags & TL_TCP_RST))
			tl_out_rst_for(s, rx, g->ack, 0, 0);
		return -EINVAL;
	}
	if (g->flags & TL_TCP_RST) {
		if (!ack_ok)
			return -EINVAL;
		s->st.rst_in++;
		tl_conn_drop(c, -ECONNREFUSED);
		return 0;
	}
	if (!(g->flags & TL_TCP_SYN))
		return -EINVAL;
	take_syn_opts(c, g);
	if (!ack_ok) {
		/* Simultaneous open: both SYNs crossed; answer with SYN-ACK (RFC 9293 3.5). */
		c->ecn_ok = s->cfg.ecn && (g->flags & TL_TCP_ECE) && (g->flags & TL_TCP_CWR);
		c->state = TL_TCP_SYN_RCVD;
		tl_cc_init(c); /* again: the MSS is known now */
		tl_out_syn(c, true);
		return 0;
	}
	c->ecn_ok = s->cfg.ecn && (g->flags & TL_TCP_ECE) && !(g->flags & TL_TCP_CWR);
	c->snd_una = g->ack;
	c->snd_wl2 = g->ack;
	tl_cc_init(c); /* again: the MSS is known now */
	if (c->ts_ok && g->tsecr && c->backoff == 0)
		ts_rtt_sample(c, g->tsecr);
	established(c);
	tl_out_ack(c);
	if (c->cbs && c->cbs->connected)
		c->cbs->connected(c->arg, c);
	if (!c->dead)
		tl_out_push(c);
	return 0;
}

/* ---- synchronized states: acceptability, RST, SYN ------------------------------ */

static bool seq_acceptable(const struct tl_tcp_conn *c, const struct seg *g)
{
	uint32_t wnd = c->rcv_adv - c->rcv_nxt;
	uint32_t seglen = g->len + !!(g->flags & TL_TCP_SYN) + !!(g->flags & TL_TCP_FIN);

	if (TL_SEQ_LT(c->rcv_adv, c->rcv_nxt))
		wnd = 0;
	if (seglen == 0) {
		if (wnd == 0)
			return g->seq == c->rcv_nxt;
		return TL_SEQ_GEQ(g->seq, c->rcv_nxt) && TL_SEQ_LT(g->seq, c->rcv_nxt + wnd);
	}
	/* A bare FIN at RCV.NXT takes no buffer: taken into a zero window too (as Linux),
	 * or a reader that stalled makes a graceful close end in the sender's RST. */
	if (wnd == 0)
		return g->len == 0 && (g->flags & (TL_TCP_FIN | TL_TCP_SYN)) == TL_TCP_FIN &&
		       g->seq == c->rcv_nxt;
	return (TL_SEQ_GEQ(g->seq, c->rcv_nxt) && TL_SEQ_LT(g->seq, c->rcv_nxt + wnd)) ||
	       (TL_SEQ_GEQ(g->seq + seglen - 1u, c->rcv_nxt) &&
		TL_SEQ_LT(g->seq + seglen - 1u, c->rcv_nxt + wnd));
}

/* Returns true when the segment was consumed here (dropped, answered or fatal). */
static bool sync_filter(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;

	if (c->state == TL_TCP_SYN_RCVD && (g->flags & TL_TCP_SYN) && !(g->flags & TL_TCP_ACK) &&
	    g->seq == c->irs) {
		tl_out_syn(c, true); /* our SYN-ACK was lost: the peer repeats its SYN */
		return true;
	}
	if (c->ts_ok && g->has_ts && !(g->flags & TL_TCP_RST) && TL_SEQ_LT(g->tsval, c->ts_recent)) {
		s->st.drop_window++; /* PAWS (RFC 7323 5.3) */
		tl_out_ack_limited(c);
		return true;
	}
	if (!seq_acceptable(c, g)) {
		if (TL_SEQ_LEQ(g->seq + g->len, c->rcv_nxt))
			s->st.dup_segs++;
		else
			s->st.drop_window++;
		if (!(g->flags & TL_TCP_RST)) {
			if (c->state == TL_TCP_TIME_WAIT && (g->flags & TL_TCP_FIN))
				tl_conn_enter_time_wait(c); /* their FIN again: our ACK was lost */
			/*
			 * An unacceptable pure ACK is answered at most every 500 ms (as Linux's
			 * tcp_invalid_ratelimit): two stacks that each find the other's ACKs
			 * unacceptable would otherwise answer each other forever.
			 */
			/* A window or keepalive probe (RCV.NXT - 1, no data) is always answered:
			 * its sender learns from the answer when the window opens. */
			if (g->len == 0 && !(g->flags & (TL_TCP_SYN | TL_TCP_FIN)) &&
			    g->seq != c->rcv_nxt - 1u) {
				if (c->oow_ack_at != 0 && s->now - c->oow_ack_at < 500000000ull)
					return true;
				c->oow_ack_at = s->now;
			}
			tl_out_ack(c);
		}
		return true;
	}
	if ((g->flags & TL_TCP_RST) && c->state == TL_TCP_TIME_WAIT)
		return true; /* RFC 1337: a RST must not cut TIME_WAIT short */
	if (g->flags & TL_TCP_RST) {
		/* RFC 5961 3.2: only the exact next sequence resets; in window gets a challenge. */
		if (g->seq != c->rcv_nxt) {
			tl_out_challenge_ack(c);
			return true;
		}
		s->st.rst_in++;
		s->st.conns_reset++;
		tl_conn_drop(c, -ECONNRESET);
		return true;
	}
	if (g->flags & TL_TCP_SYN) {
		tl_out_challenge_ack(c); /* RFC 5961 4.2 */
		return true;
	}
	(void)rx;
	return !(g->flags & TL_TCP_ACK);
}

static bool syn_rcvd_ack(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;
	struct tl_tcp_listener *l = c->listener;

	if (TL_SEQ_LEQ(g->ack, c->snd_una) || TL_SEQ_GT(g->ack, c->snd_max)) {
		s->st.drop_bad_ack++;
		tl_out_rst_for(s, rx, g->ack, 0, 0);
		return false;
	}
	if (c->ts_ok && g->has_ts && g->tsecr && c->backoff == 0)
		ts_rtt_sample(c, g->tsecr);
	c->snd_una = c->iss + 1u;
	c->snd_wnd = g->wnd << c->snd_wscale;
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = g->seq;
	c->snd_wl2 = g->ack;
	established(c);
	if (l) {
		l->embryonic--;
		c->listener = NULL;
		if (l->cbs->accept && l->cbs->accept(l->arg, c) < 0) {
			tl_out_rst(c);
			tl_conn_drop(c, -ECONNREFUSED);
			return false;
		}
		c->app_attached = true;
	} else if (c->cbs && c->cbs->connected) {
		c->cbs->connected(c->arg, c); /* simultaneous open completes */
	}
	return !c->dead;
}

/* ---- ACK processing ------------------------------------------------------------ */

static void fin_acked(struct tl_tcp_conn *c)
{
	switch (c->state) {
	case TL_TCP_FIN_WAIT_1:
		c->state = TL_TCP_FIN_WAIT_2;
		tl_timer_fin_wait_2(c);
		break;
	case TL_TCP_CLOSING:
		tl_conn_enter_time_wait(c);
		break;
	case TL_TCP_LAST_ACK:
		tl_conn_drop(c, 0);
		break;
	default:
		break;
	}
}

static void new_ack(struct tl_tcp_conn *c, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t acked = g->ack - c->snd_una;
	uint32_t data = min_u32(acked, c->sq_bytes);
	bool fin = c->fin_sent && g->ack == c->snd_una + c->sq_bytes + 1u;

	if (c->eifel_armed) {
		c->eifel_armed = false;
		if (g->has_ts && g->tsecr && TL_SEQ_LT(g->tsecr, c->eifel_tsval)) {
			/* RFC 4015 response: the window comes back, new data goes on from snd_max. */
			s->st.spurious_rto++;
			c->cwnd = c->eifel_cwnd;
			c->ssthresh = c->eifel_ssthresh;
			c->snd_nxt = c->snd_max;
		}
	}
	if (c->ts_ok && g->has_ts && g->tsecr)
		ts_rtt_sample(c, g->tsecr);
	else if (c->rtt_start && TL_SEQ_GEQ(g->ack, c->rtt_seq))
		tl_cc_rtt_sample(c, s->now + 1u - c->rtt_start);
	if (c->rtt_start && TL_SEQ_GEQ(g->ack, c->rtt_seq))
		c->rtt_start = 0;
	c->snd_una = g->ack;
	if (TL_SEQ_LT(c->snd_nxt, c->snd_una))
		c->snd_nxt = c->snd_una;
	c->backoff = 0;
	c->persist_backoff = 0;
	tl_conn_free_acked(c, data);
	c->bytes_acked += data;
	tl_cc_on_ack(c, acked, c->ecn_ok && (g->flags & TL_TCP_ECE));
	c->rto_at = 0;
	if (c->snd_una != c->snd_max)
		tl_timer_rto_restart(c);
	else
		tl_timer_update(c);
	if (data && c->cbs && c->cbs->sent && c->app_attached)
		c->cbs->sent(c->arg, c, data);
	if (fin && !c->dead)
		fin_acked(c);
}

/* Merges [start, end) into the scoreboard (sorted, disjoint). When full, the highest
 * range goes: forgetting a SACK costs at most a needless retransmission. Returns true
 * when the range told something new (bytes not SACKed before). */
static bool sack_add(struct tl_tcp_conn *c, uint32_t start, uint32_t end)
{
	struct tl_sack_range *r = c->sacked;
	uint32_t i = 0, j;

	while (i < c->nsacked && TL_SEQ_LT(r[i].end, start))
		i++;
	if (i < c->nsacked && TL_SEQ_LEQ(r[i].start, start) && TL_SEQ_GEQ(r[i].end, end))
		return false;
	for (j = i; j < c->nsacked && TL_SEQ_LEQ(r[j].start, end); j++) {
		if (TL_SEQ_LT(r[j].start, start))
			start = r[j].start;
		if (TL_SEQ_GT(r[j].end, end))
			end = r[j].end;
	}
	if (j == i) {
		if (c->nsacked == TL_SACK_SB) {
			if (i == c->nsacked)
				return false;
			c->nsacked--;
		}
		memmove(&r[i + 1], &r[i], (c->nsacked - i) * sizeof(r[0]));
		c->nsacked++;
	} else if (j > i + 1) {
		memmove(&r[i + 1], &r[j], (c->nsacked - j) * sizeof(r[0]));
		c->nsacked -= j - i - 1;
	}
	r[i].start = start;
	r[i].end = end;
	return true;
}

/*
 * Brings the scoreboard up to this ACK before it is acted on (dupack and partial-ACK
 * retransmissions read it): ranges the cumulative ACK reaches go, and the segment's
 * blocks come in. A range the ACK reaches but does not cover was reneged: a receiver
 * holding it would have acknowledged past it (its out-of-order queue was full and gave
 * it up), so it goes too and its bytes count as holes again rather than wait for an
 * RTO. A block is only believed inside (ack, snd_max]: one at or below the ACK is a
 * D-SACK or stale (RFC 2883), one past snd_max is not ours to trust.
 */
static bool sack_input(struct tl_tcp_conn *c, const struct seg *g)
{
	uint32_t k = 0;
	bool news = false;

	for (uint32_t i = 0; i < c->nsacked; i++)
		if (TL_SEQ_GT(c->sacked[i].start, g->ack))
			c->sacked[k++] = c->sacked[i];
	c->nsacked = k;
	for (uint32_t b = 0; b < g->nsack; b++) {
		const struct tl_sack_range *r = &g->sack[b];
		if (TL_SEQ_LT(r->start, r->end) && TL_SEQ_GT(r->start, g->ack) &&
		    TL_SEQ_LEQ(r->end, c->snd_max))
			news |= sack_add(c, r->start, r->end);
	}
	return news;
}

/* Returns false when the segment must go no further. */
static bool ack_input(struct tl_tcp_conn *c, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t wnd = g->wnd << c->snd_wscale;
	bool sack_news = false;

	/* RFC 5961 5.2: ACKs for data never sent, or far too old, are answered, not used. */
	if (TL_SEQ_GT(g->ack, c->snd_max) || TL_SEQ_LT(g->ack, c->snd_una - c->max_snd_wnd)) {
		s->st.drop_bad_ack++;
		tl_out_challenge_ack(c);
		return false;
	}
	/* TS.Recent moves only once the ACK is found good (as Linux's tcp_ack): a refused
	 * segment, a spoofed one say, that set it would make PAWS refuse the genuine peer
	 * from then on. Before anything is sent, so that echoes this TSval. */
	if (c->ts_ok && g->has_ts && TL_SEQ_LEQ(g->seq, c->ts_last_ack_sent))
		c->ts_recent = g->tsval;
	/* The peer is alive: probes are answered (the keepalive timer reads last_rx when it
	 * fires, so the fast path only stores). */
	c->last_rx = s->now;
	c->probes_out = 0;
	if (c->sack_ok && (c->nsacked || g->nsack) && TL_SEQ_GEQ(g->ack, c->snd_una))
		sack_news = sack_input(c, g);
	/*
	 * A duplicate ACK is one in every respect (RFC 5681 2), or, with SACK, any ACK that
	 * brings new SACK information, data or window update or not (RFC 6675 2): between
	 * two stacks sending both ways the receiver's reports ride on its data.
	 */
	if (TL_SEQ_GT(g->ack, c->snd_una)) {
		new_ack(c, g);
		if (c->dead)
			return false;
		if (sack_news && !c->in_recovery && c->snd_max != c->snd_una)
			tl_cc_on_dupack(c);
	} else if (g->ack == c->snd_una && c->snd_max != c->snd_una &&
		   (sack_news || (g->len == 0 && !(g->flags & (TL_TCP_SYN | TL_TCP_FIN)) &&
				  wnd == c->snd_wnd))) {
		s->st.dup_acks++;
		tl_cc_on_dupack(c);
	}
	if (TL_SEQ_LT(c->snd_wl1, g->seq) || (c->snd_wl1 == g->seq && TL_SEQ_LEQ(c->snd_wl2, g->ack))) {
		c->snd_wnd = wnd;
		c->snd_wl1 = g->seq;
		c->snd_wl2 = g->ack;
		if (wnd > c->max_snd_wnd)
			c->max_snd_wnd = wnd;
	}
	return true;
}

/* ---- data and FIN ---------------------------------------------------------------- */

static void deliver(struct tl_tcp_conn *c, const uint8_t *data, uint32_t len, void *pkt)
{
	c->rcv_nxt += len;
	c->rcv_unread += len;
	c->bytes_rcvd += len;
	if (c->cbs && c->cbs->recv && c->app_attached)
		c->cbs->recv(c->arg, c, data, len, pkt);
}

static void fin_input(struct tl_tcp_conn *c)
{
	c->rcv_nxt++;
	c->fin_rcvd = true;
	c->ack_now = true;
	switch (c->state) {
	case TL_TCP_ESTABLISHED:
		c->state = TL_TCP_CLOSE_WAIT;
		break;
	case TL_TCP_FIN_WAIT_1:
		c->state = TL_TCP_CLOSING; /* simultaneous close */
		break;
	case TL_TCP_FIN_WAIT_2:
		/* TIME_WAIT owes the peer an ACK: send it before the app hears closed. */
		tl_out_ack(c);
		tl_conn_enter_time_wait(c);
		break;
	default:
		return;
	}
	if (c->cbs && c->cbs->recv && c->app_attached)
		c->cbs->recv(c->arg, c, NULL, 0, NULL);
}

/* Delivers what the out-of-order queue holds up to rcv_nxt, from the front. An entry
 * leaves the queue before its bytes go up (the receiver may drop the connection) and lets
 * go of its packet after. */
static void ooo_drain(struct tl_tcp_conn *c)
{
	if (c->ooo_n == 0)
		return; /* in order, nothing held: the common case costs one test */
	while (c->ooo_n && !c->dead && TL_SEQ_LEQ(c->ooo[c->ooo_head].seq, c->rcv_nxt)) {
		uint32_t i = tl_ooo_pop(c);
		const struct tl_ooo *e = &c->ooo[i];
		uint32_t skip = c->rcv_nxt - e->seq;

		if (skip < e->len)
			deliver(c, e->data + skip, e->len - skip, e->pkt);
		if (e->fin && skip <= e->len && !c->dead && !c->fin_rcvd)
			fin_input(c);
		tl_ooo_put(c, i);
	}
	if (c->fin_rcvd && !c->dead)
		tl_ooo_clear(c); /* end of stream: nothing can follow */
}

static void data_input(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;
	uint32_t seq = g->seq, len = g->len;
	const uint8_t *data = g->data;
	bool fin = g->flags & TL_TCP_FIN;
	uint32_t right = TL_SEQ_LT(c->rcv_adv, c->rcv_nxt) ? c->rcv_nxt : c->rcv_adv;
	bool had_ooo = c->ooo_n > 0;

	if (c->state != TL_TCP_ESTABLISHED && c->state != TL_TCP_FIN_WAIT_1 &&
	    c->state != TL_TCP_FIN_WAIT_2)
		return;
	if (len == 0 && !fin)
		return;
	if (len && c->ecn_ok) {
		bool ce = rx->ecn == TL_ECN_CE;
		if (ce)
			s->st.ce_marks++;
		if (ce != c->ce_state) {
			/* DCTCP receiver: echo exactly which data was marked, so ACK at each flip. */
			c->ce_state = ce;
			c->ack_now = true;
		}
	}
	if (TL_SEQ_LT(seq, c->rcv_nxt)) {
		uint32_t skip = c->rcv_nxt - seq;
		s->st.dup_segs++;
		data += skip;
		len -= skip;
		seq = c->rcv_nxt;
	}
	if (TL_SEQ_GT(seq + len, right)) {
		len = right - seq;   /* beyond what we offered: the peer resends it later */
		fin = false;
	}
	if (had_ooo && !tl_ooo_fit_fin(c, seq, &len, &fin)) {
		c->ack_now = true;
		return;
	}
	if (seq != c->rcv_nxt) {
		if (len || fin)
			tl_ooo_insert(c, seq, len, data, fin, rx->pkt);
		c->ack_now = true;   /* the duplicate ACK that drives fast retransmit */
		return;
	}
	if (len) {
		deliver(c, data, len, rx->pkt);
		/* The bound is for a peer that never sends its FIN, not one still sending. */
		if (c->state == TL_TCP_FIN_WAIT_2 && !c->dead)
			tl_timer_fin_wait_2(c);
	}
	if (fin && !c->dead)
		fin_input(c);
	if (!c->dead)
		ooo_drain(c);
	/* A bare FIN was answered in fin_input; only data waits for a delayed ACK. */
	if (had_ooo || (len && ++c->unacked_segs >= 2u))
		c->ack_now = true;
}

static int sync_input(struct tl_tcp_conn *c, const struct tl_tcp_rx *rx, const struct seg *g)
{
	struct tl_tcp_stack *s = c->stack;

	if (sync_filter(c, rx, g))
		return c->dead ? 0 : -EINVAL;
	if (c->state == TL_TCP_SYN_RCVD && !syn_rcvd_ack(c, rx, g))
		return 0;
	if (!ack_input(c, g))
		return 0;
	data_input(c, rx, g);
	if (c->dead)
		return 0;
	tl_out_push(c);
	if (c->dead)
		return 0;
	if (c->ack_now && !rx->more) {
		tl_out_ack(c);
	} else if ((c->ack_now || c->unacked_segs) && c->delack_at == 0) {
		/* (A due ACK held for the frame's last piece still has the timer behind it, in
		 * case that piece is refused before it gets here.) */
		c->delack_at = s->now + s->cfg.delack_ns;
		tl_timer_update(c);
	}
	return 0;
}

/* RFC 6191: a new SYN may end a TIME_WAIT when it is provably from a later incarnation. */
static bool time_wait_reusable(const struct tl_tcp_conn *c, const struct seg *g)
{
	if ((g->flags & (TL_TCP_SYN | TL_TCP_ACK | TL_TCP_RST)) != TL_TCP_SYN)
		return false;
	/* RFC 6191 2: a connection that had timestamps needs one that proves the SYN later;
	 * a SYN without one proves nothing. The sequence test is for connections without. */
	if (c->ts_ok)
		return g->has_ts && TL_SEQ_GT(g->tsval, c->ts_recent);
	return TL_SEQ_GT(g->seq, c->rcv_nxt);
}

int tl_tcp_input_pieces(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx,
			const struct tl_tcp_piece *p, uint32_t n, uint64_t now)
{
	uint8_t hdr[TL_TCP_HDR_MAX], flags;
	struct tl_tcp_rx r;
	uint32_t seq;
	int rc = 0;

	if (!rx || !rx->tcp || rx->tcp_len < 20 || rx->tcp_len > sizeof(hdr) || n == 0 ||
	    (uint32_t)(rx->tcp[12] >> 4) * 4u != rx->tcp_len ||
	    (rx->tcp[13] & (TL_TCP_SYN | TL_TCP_RST)))
		return -EINVAL;
	memcpy(hdr, rx->tcp, rx->tcp_len);
	flags = hdr[13];
	seq = ld_be32(hdr + 4);
	r = *rx;
	r.tcp = hdr;
	for (uint32_t i = 0; i < n; seq += p[i].len, i++) {
		bool last = i + 1 == n;

		if (p[i].len == 0 && !last)
			continue;
		hdr[4] = (uint8_t)(seq >> 24);
		hdr[5] = (uint8_t)(seq >> 16);
		hdr[6] = (uint8_t)(seq >> 8);
		hdr[7] = (uint8_t)seq;
		hdr[13] = last ? flags : (uint8_t)(flags & ~(TL_TCP_FIN | TL_TCP_PSH));
		r.payload = p[i].data;
		r.payload_len = p[i].len;
		r.more = !last;
		rc = tl_tcp_input(s, &r, now);
	}
	return rc;
}

int tl_tcp_input(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint64_t now)
{
	struct tl_tcp_conn *c;
	struct seg g;
	int rc;

	if (now > s->now)
		s->now = now;
	s->st.seg_in++;
	if (!rx || seg_parse(rx, &g) != 0) {
		s->st.drop_malformed++;
		return -EBADMSG;
	}
	s->st.bytes_in += g.len;
	c = tl_conn_lookup(s, rx->daddr, ld_be16(rx->tcp + 2), rx->saddr, ld_be16(rx->tcp));
	if (c && c->state == TL_TCP_TIME_WAIT && time_wait_reusable(c, &g)) {
		tl_conn_drop(c, 0);
		c = NULL;
	}
	if (!c)
		return listen_input(s, rx, &g);
	c->busy++;
	c->seg_in++;
	if (c->state == TL_TCP_SYN_SENT)
		rc = syn_sent_input(c, rx, &g);
	else
		rc = sync_input(c, rx, &g);
	tl_conn_put(c);
	return rc;
}
