/*
 * tl_cc.c — TCP-lite RTT estimation (RFC 6298) and congestion control: NewReno
 * (RFC 5681 slow start / congestion avoidance with byte counting, RFC 6582 fast
 * recovery) with a DCTCP reaction to ECN echoes (RFC 8257) when ECN was negotiated.
 * With SACK, recovery resends the holes the scoreboard shows, one per ACK, instead of
 * one hole per round trip (RFC 6675, lite: NewReno's window arithmetic is kept).
 *
 * Call chain: tl_in.c (ACK processing) -> tl_cc_on_ack / tl_cc_on_dupack;
 * tl_timer.c (RTO) -> tl_cc_on_rto. Output consults c->cwnd through tl_out_push.
 */
#include "tl_tcp_pvt.h"

#define TL_IW_SEGS      10u          /* RFC 6928 initial window... */
#define TL_IW_BYTES     14600u       /* ...and its byte cap */
#define TL_CWND_MAX     (1u << 30)
#define TL_DCTCP_ONE    1024u        /* alpha fixed point: 1.0 */
#define TL_DCTCP_G_SHIFT 4u          /* g = 1/16 */

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }
static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

uint32_t tl_cc_flight(const struct tl_tcp_conn *c)
{
	return c->snd_max - c->snd_una;
}

void tl_cc_init(struct tl_tcp_conn *c)
{
	/* RFC 6928: min(10 MSS, max(2 MSS, 14600)); jumbo segments get two, not ten. */
	c->cwnd = min_u32(TL_IW_SEGS * c->mss, max_u32(2u * c->mss, TL_IW_BYTES));
	c->ssthresh = TL_CWND_MAX;
	c->rto_ns = c->stack->cfg.rto_init_ns;
	c->srtt_ns = 0;
	c->rttvar_ns = 0;
	c->dupacks = 0;
	c->in_recovery = false;
	c->bytes_acked_ca = 0;
	/* RFC 8257 3.3: start pessimistic so the first marks cut hard, as Linux does. */
	c->dctcp_alpha = TL_DCTCP_ONE;
	c->dctcp_acked = c->dctcp_marked = 0;
	c->dctcp_next_seq = c->snd_nxt;
	c->dctcp_reduced = false;
}

void tl_cc_rtt_sample(struct tl_tcp_conn *c, uint64_t rtt_ns)
{
	const struct tl_tcp_cfg *cfg = &c->stack->cfg;
	uint64_t r = rtt_ns ? rtt_ns : 1u, rto;

	/*
	 * RFC 6298's averages, kept in nanoseconds: in whole microseconds, srtt - srtt/8 + r/8
	 * never fell below 7 for samples under 8 us (an eighth of them truncated to 0).
	 */
	if (c->srtt_ns == 0) {
		c->srtt_ns = r;
		c->rttvar_ns = r / 2;
	} else {
		uint64_t err = c->srtt_ns > r ? c->srtt_ns - r : r - c->srtt_ns;
		c->rttvar_ns = c->rttvar_ns - c->rttvar_ns / 4 + err / 4;
		c->srtt_ns = c->srtt_ns - c->srtt_ns / 8 + r / 8;
	}
	/* RTO = SRTT + max(G, 4 * RTTVAR), G the timer granularity (RFC 6298 2.3). */
	rto = c->srtt_ns + (cfg->tick_ns > 4u * c->rttvar_ns ? cfg->tick_ns : 4u * c->rttvar_ns);
	if (rto < cfg->rto_min_ns)
		rto = cfg->rto_min_ns;
	if (rto > cfg->rto_max_ns)
		rto = cfg->rto_max_ns;
	c->rto_ns = rto;
}

static void dctcp_on_ack(struct tl_tcp_conn *c, uint32_t acked, bool ece)
{
	c->dctcp_acked += acked;
	if (ece)
		c->dctcp_marked += acked;
	if (TL_SEQ_GEQ(c->snd_una, c->dctcp_next_seq)) {
		/* One observation window ended: alpha = (1 - g) alpha + g F. */
		uint32_t f = c->dctcp_acked ?
			(uint32_t)((uint64_t)c->dctcp_marked * TL_DCTCP_ONE / c->dctcp_acked) : 0;
		c->dctcp_alpha = c->dctcp_alpha - (c->dctcp_alpha >> TL_DCTCP_G_SHIFT) +
				 (f >> TL_DCTCP_G_SHIFT);
		c->dctcp_acked = c->dctcp_marked = 0;
		c->dctcp_next_seq = c->snd_nxt;
		c->dctcp_reduced = false;
	}
	if (ece && !c->dctcp_reduced) {
		/* cwnd = cwnd (1 - alpha / 2), once per window of data. */
		uint32_t cut = (uint32_t)((uint64_t)c->cwnd * c->dctcp_alpha / (2u * TL_DCTCP_ONE));
		c->cwnd = max_u32(c->cwnd - cut, 2u * c->mss);
		c->ssthresh = c->cwnd;
		c->dctcp_reduced = true;
		c->stack->st.ecn_cuts++;
		/* A classic RFC 3168 receiver keeps echoing ECE until it sees CWR. */
		c->cwr_pending = true;
	}
}

/* In recovery: the next segment to resend. With SACK information, the first hole not yet
 * resent (nothing when every hole has been); without, NewReno's segment at snd_una. */
static void recovery_rexmit(struct tl_tcp_conn *c)
{
	if (c->sack_ok && (c->nsacked || TL_SEQ_GT(c->rxt_next, c->snd_una))) {
		tl_out_sack_rexmit(c);
		return;
	}
	c->rxt_next = c->snd_una + tl_out_retransmit(c);
}

void tl_cc_on_ack(struct tl_tcp_conn *c, uint32_t acked, bool ece)
{
	if (c->ecn_ok)
		dctcp_on_ack(c, acked, ece);
	if (c->in_recovery) {
		if (TL_SEQ_GEQ(c->snd_una, c->recover)) {
			/* Full ACK: leave recovery with cwnd at ssthresh (RFC 6582 3.2 step 3). */
			c->cwnd = min_u32(c->ssthresh, max_u32(tl_cc_flight(c), c->mss) + c->mss);
			c->in_recovery = false;
			c->dupacks = 0;
			return;
		}
		/* Partial ACK: resend the next hole, deflate by what left the network. */
		c->cwnd = c->cwnd > acked ? c->cwnd - acked : c->mss;
		if (acked >= c->mss)
			c->cwnd += c->mss;
		c->stack->st.fast_retrans++;
		recovery_rexmit(c);
		return;
	}
	c->dupacks = 0;
	if (c->cwnd < c->ssthresh) {
		c->cwnd += min_u32(acked, 2u * c->mss); /* RFC 3465 byte counting, L = 2 */
	} else {
		c->bytes_acked_ca += acked;
		if (c->bytes_acked_ca >= c->cwnd) {
			c->bytes_acked_ca -= c->cwnd;
			c->cwnd += c->mss;
		}
	}
	if (c->cwnd > TL_CWND_MAX)
		c->cwnd = TL_CWND_MAX;
}

/*
 * RFC 6675 IsLost(snd_una), lite: more than two segments' worth SACKed above it. An ACK
 * that covers several segments (delayed, coalesced by GRO) stands for several dupacks,
 * so the third may never come; the scoreboard counts what the receiver holds instead.
 */
static bool sack_says_lost(const struct tl_tcp_conn *c)
{
	uint32_t bytes = 0;

	if (!c->sack_ok)
		return false;
	for (uint32_t i = 0; i < c->nsacked; i++)
		bytes += c->sacked[i].end - c->sacked[i].start;
	return bytes > 2u * c->mss;
}

void tl_cc_on_dupack(struct tl_tcp_conn *c)
{
	c->dupacks++;
	if (c->in_recovery) {
		/* Each dupack: one more segment left the network. A hole the scoreboard shows
		 * takes its place; else the window inflates for new data. */
		if (c->sack_ok && c->nsacked && tl_out_sack_rexmit(c))
			return;
		c->cwnd += c->mss;
		tl_out_push(c);
		return;
	}
	/*
	 * RFC 6582 4.1: only a loss after the last recovery point starts a new recovery. The
	 * RFC's recover is the highest sequence sent; ours is one past it (snd_max), so an ACK
	 * that reaches it covers all of the old episode, and a hole there is a new loss.
	 */
	if ((c->dupacks != 3 && !(c->dupacks < 3 && sack_says_lost(c))) ||
	    TL_SEQ_LT(c->snd_una, c->recover))
		return;
	c->ssthresh = max_u32(tl_cc_flight(c) / 2u, 2u * c->mss);
	c->cwnd = c->ssthresh + 3u * c->mss;
	c->recover = c->snd_max;
	c->in_recovery = true;
	c->stack->st.fast_retrans++;
	c->rtt_start = 0;
	c->rxt_next = c->snd_una;
	recovery_rexmit(c);
	/*
	 * The timer still runs from the last new ACK, before the dupacks; the resent head's
	 * ACK takes a round trip from now. With a steady RTT the RTO is barely above it and
	 * would fire in every recovery (Linux also rearms when it resends the head).
	 */
	tl_timer_rto_restart(c);
	tl_out_push(c);
}

void tl_cc_on_rto(struct tl_tcp_conn *c)
{
	c->ssthresh = max_u32(tl_cc_flight(c) / 2u, 2u * c->mss);
	c->cwnd = c->mss;
	c->recover = c->snd_max;
	c->in_recovery = false;
	c->dupacks = 0;
	c->bytes_acked_ca = 0;
	c->nsacked = 0;           /* RFC 2018 8: the receiver may have discarded them */
	c->rxt_next = c->snd_una;
}
