/*
 * tl_cookie.c — TCP-lite SYN cookies (RFC 4987 3.6, after Linux's syncookies.c): when a
 * listener's backlog (or the connection table) is full, a SYN is answered with a SYN-ACK
 * whose ISS encodes the connection instead of a table entry, and the ACK that returns it
 * creates the connection. A spoofed SYN then costs one SYN-ACK and no memory.
 *
 * The ISS: hash1(tuple) + peer ISN + (minute << 24) + (hash2(tuple, minute) + MSS index
 * mod 2^24). The minute (64 s ticks) bounds a cookie's life to two of them; the MSS index
 * picks from a short table the largest MSS not above the peer's. What the ISS cannot
 * carry rides in the low 6 bits of our TSval when the peer offered timestamps (it echoes
 * them in TSecr): window scale (4 bits, 15: none), SACK permitted, ECN. Without
 * timestamps a cookie connection has none of these, as on Linux.
 *
 * Call chain: tl_in.c listen_input -> tl_cookie_synack (SYN over the backlog) /
 * tl_cookie_check (an ACK for no connection) -> tl_in.c creates the connection.
 */
#include "tl_tcp_pvt.h"

#define TL_COOKIE_BITS    24u
#define TL_COOKIE_MASK    ((1u << TL_COOKIE_BITS) - 1u)
#define TL_COOKIE_TICK_NS (64ull * 1000000000ull)
#define TL_COOKIE_MAX_AGE 2u           /* ticks a cookie stays good */
#define TL_COOKIE_TS_BITS 6u
#define TL_COOKIE_TS_MASK ((1u << TL_COOKIE_TS_BITS) - 1u)
#define TL_COOKIE_NO_WS   0xfu

/* MSS values a cookie can say; the index of the largest not above the peer's is encoded. */
static const uint16_t cookie_mss[] = { 536, 1220, 1440, 1460, 4312, 8960 };
#define TL_COOKIE_NMSS (sizeof(cookie_mss) / sizeof(cookie_mss[0]))

static uint32_t cookie_hash(const struct tl_tcp_stack *s, const struct tl_tcp_tuple *t,
			    uint32_t count, uint32_t which)
{
	uint64_t h = tl_mix64(s->cfg.iss_secret ^ ((uint64_t)t->laddr << 32 | t->raddr) ^
			   (0x9e3779b97f4a7c15ull * (which + 1u)));

	h = tl_mix64(h ^ ((uint64_t)t->lport << 48 | (uint64_t)t->rport << 32 | count));
	return (uint32_t)(h >> 32);
}

static uint32_t cookie_count(const struct tl_tcp_stack *s)
{
	return (uint32_t)(s->now / TL_COOKIE_TICK_NS);
}

uint32_t tl_cookie_make(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t, uint32_t peer_isn,
			uint16_t peer_mss, uint16_t *mss_out)
{
	uint32_t count = cookie_count(s), idx = 0;

	for (uint32_t i = 1; i < TL_COOKIE_NMSS; i++)
		if (cookie_mss[i] <= peer_mss)
			idx = i;
	*mss_out = cookie_mss[idx];
	return cookie_hash(s, t, 0, 0) + peer_isn + (count << TL_COOKIE_BITS) +
	       ((cookie_hash(s, t, count, 1) + idx) & TL_COOKIE_MASK);
}

uint32_t tl_cookie_tsval(uint32_t tsval, const struct tl_cookie_opts *o)
{
	uint32_t bits = (o->ws_ok ? o->snd_wscale : TL_COOKIE_NO_WS) | (uint32_t)o->sack_ok << 4 |
			(uint32_t)o->ecn_ok << 5;
	uint32_t ts = (tsval & ~TL_COOKIE_TS_MASK) | bits;

	/* Never ahead of the clock: the peer's PAWS must not see our next TSval go back. */
	if (TL_SEQ_GT(ts, tsval))
		ts -= TL_COOKIE_TS_MASK + 1u;
	return ts;
}

bool tl_cookie_check(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t, uint32_t seq,
		     uint32_t ack, bool has_ts, uint32_t tsecr, struct tl_cookie_opts *o)
{
	uint32_t cookie = ack - 1u - cookie_hash(s, t, 0, 0) - (seq - 1u);
	uint32_t count = cookie_count(s), age = (count - (cookie >> TL_COOKIE_BITS)) & 0xffu, idx;

	/* The top byte holds the tick's low 8 bits: the age follows, then the whole tick. */
	if (age > TL_COOKIE_MAX_AGE)
		return false;
	idx = (cookie - cookie_hash(s, t, count - age, 1)) & TL_COOKIE_MASK;
	if (idx >= TL_COOKIE_NMSS)
		return false;
	o->mss = cookie_mss[idx];
	o->ts_ok = has_ts && tsecr != 0 && s->cfg.timestamps;
	o->ws_ok = o->sack_ok = o->ecn_ok = false;
	o->snd_wscale = 0;
	if (o->ts_ok) {
		uint32_t ws = tsecr & 0xfu;
		o->ws_ok = ws != TL_COOKIE_NO_WS && s->cfg.wscale;
		o->snd_wscale = o->ws_ok ? (uint8_t)(ws > TL_MAX_WSCALE ? TL_MAX_WSCALE : ws) : 0;
		o->sack_ok = (tsecr >> 4 & 1u) && s->cfg.sack;
		o->ecn_ok = (tsecr >> 5 & 1u) && s->cfg.ecn;
	}
	return true;
}
