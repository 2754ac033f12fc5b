/*
 * fuzz_tcp.c — libFuzzer harness for TCP-lite segment input (transport/tl_tcp.h) against
 * a connection in each state.
 *
 * Call chain exercised: (backend: checksum check, simulated) -> tl_tcp_input -> listen |
 * SYN_SENT | synchronized input -> ACK and data processing -> cbs -> ops.emit; then
 * tl_tcp_timers (retransmission, delayed ACK, probes, TIME_WAIT) between segments.
 *
 * The harness plays the peer by hand: one stack (10.0.0.1) with a fake emit that checks
 * and records every segment the stack sends, a fixed ISS (so the fuzzer can learn the
 * sequence space), and a peer model (10.0.0.2) that remembers the next sequence number it
 * sends and the highest one the stack sent, so fuzzed segments can be placed exactly
 * in, near or far from the window.
 *
 * Input layout:
 *   u8 state  (mod 12) the state the handshake drives the connection to, see tcp_setup
 *   u8 cfg    bit0 timestamps, bit1 window scale, bit2 ECN, bit3 receiver reads at once,
 *             bit4 every 7th emit fails (-ENOBUFS), bits 5..7 ISS choice (wraparound)
 *   then up to 64 records, each starting with u8 op (see tcp_record).
 * Checked besides ASan/UBSan: every emitted header is well formed and its payload lies
 * in the application's send buffer; delivered bytes lie in the packet handed in; after
 * the stack is destroyed every packet reference taken was released, every send's done ran
 * once, and no send descriptor is in use once no connection is left.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuzz/fuzz_util.h"
#include "transport/tl_tcp.h"
#include "transport/tl_tcp_pvt.h"

#define TCP_LADDR 0x0a000001u
#define TCP_RADDR 0x0a000002u
#define TCP_LPORT 80u
#define TCP_RPORT 40000u
#define TCP_PEER_ISS 0x10000u
#define TCP_APP_BUF 65536u
#define TCP_MAX_RECORDS 64
#define TCP_MS 1000000ull

enum tcp_target {
	TS_LISTEN, TS_SYN_RCVD, TS_EST_PASSIVE, TS_SYN_SENT, TS_EST_ACTIVE, TS_EST_INFLIGHT,
	TS_FIN_WAIT_1, TS_FIN_WAIT_2, TS_CLOSE_WAIT, TS_LAST_ACK, TS_CLOSING, TS_TIME_WAIT,
	TS_N
};

struct tcp_pkt {
	long *live;
	int refs;
	uint32_t len;
	uint8_t bytes[];
};

struct tcp_ctx {
	struct tl_tcp_stack *s;
	struct tl_tcp_conn *conn;      /* the connection under test while the app has it */
	uint64_t now;
	bool ts, read_now, fail_emits;
	bool active;                   /* the stack opened: ports swap */
	uint32_t iss;
	uint32_t peer_nxt;             /* next sequence number the peer sends */
	uint32_t st_max;               /* highest sequence end the stack sent */
	uint32_t st_tsval;             /* last TSval the stack sent (peer echoes it) */
	uint32_t peer_tsval;
	uint64_t emits, sends, dones;
	long pkts_live;
	uint8_t *app_buf;              /* what the application sends from */
	uint32_t app_off;
};

/* ---- the fake backend ------------------------------------------------------------- */

static uint32_t tcp_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void tcp_st_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Remembers the stack's TSval from an emitted header's options. */
static void tcp_note_ts(struct tcp_ctx *cx, const uint8_t *h, uint32_t hlen)
{
	uint32_t i = 20;

	while (i + 1 < hlen) {
		if (h[i] == 0)
			break;
		if (h[i] == 1) {
			i++;
			continue;
		}
		if (h[i] == 8 && h[i + 1] == 10 && i + 10 <= hlen)
			cx->st_tsval = tcp_be32(h + i + 2);
		FH_CHECK(h[i + 1] >= 2);
		i += h[i + 1];
	}
}

static int tcp_emit(void *arg, const struct tl_tcp_tx *tx)
{
	struct tcp_ctx *cx = arg;
	uint32_t seq, end, sum = 0, i, j, total = 0;

	FH_CHECK(tx->hdr_len >= 20 && tx->hdr_len <= TL_TCP_HDR_MAX && tx->hdr_len % 4 == 0);
	FH_CHECK((uint32_t)(tx->hdr[12] >> 4) * 4u == tx->hdr_len);
	FH_CHECK(tx->nslices <= TL_TCP_TX_SLICES);
	for (i = 0; i < tx->nslices; i++) {
		const struct tl_tcp_slice *sl = &tx->slice[i];
		FH_CHECK(sl->base >= cx->app_buf && sl->base + sl->len <= cx->app_buf + TCP_APP_BUF);
		for (j = 0; j < sl->len; j++)
			sum += sl->base[j];
		total += sl->len;
	}
	(void)sum;
	FH_CHECK(total == tx->payload_len);
	cx->emits++;
	if (cx->fail_emits && cx->emits % 7 == 0)
		return -ENOBUFS;
	if (tx->daddr != TCP_RADDR)
		return 0;
	tcp_note_ts(cx, tx->hdr, tx->hdr_len);
	seq = tcp_be32(tx->hdr + 4);
	end = seq + tx->payload_len + !!(tx->hdr[13] & TL_TCP_SYN) + !!(tx->hdr[13] & TL_TCP_FIN);
	if (!(tx->hdr[13] & TL_TCP_RST) && TL_SEQ_GT(end, cx->st_max))
		cx->st_max = end;
	return 0;
}

static void tcp_pkt_put(struct tcp_pkt *p)
{
	FH_CHECK(p->refs > 0);
	if (--p->refs == 0) {
		(*p->live)--;
		free(p);
	}
}

static void tcp_pkt_hold(void *arg, void *pkt)
{
	struct tcp_pkt *p = pkt;

	(void)arg;
	FH_CHECK(p->refs > 0);
	p->refs++;
}

static void tcp_pkt_release(void *arg, void *pkt)
{
	(void)arg;
	tcp_pkt_put(pkt);
}

static uint32_t tcp_iss(void *arg, const struct tl_tcp_tuple *t)
{
	(void)t;
	return ((struct tcp_ctx *)arg)->iss;
}

static const struct tl_tcp_ops tcp_ops = {tcp_emit, tcp_pkt_hold, tcp_pkt_release, tcp_iss};

/* ---- the application -------------------------------------------------------------- */

static int tcp_accept(void *arg, struct tl_tcp_conn *c)
{
	struct tcp_ctx *cx = arg;

	if (cx->conn == NULL)
		cx->conn = c;
	return 0;
}

static void tcp_connected(void *arg, struct tl_tcp_conn *c)
{
	(void)arg;
	(void)c;
}

static void tcp_recv(void *arg, struct tl_tcp_conn *c, const uint8_t *data, uint32_t len, void *pkt)
{
	struct tcp_ctx *cx = arg;
	const struct tcp_pkt *p = pkt;
	uint32_t i, sum = 0;

	if (data == NULL) {
		FH_CHECK(len == 0);
		return;
	}
	FH_CHECK(p != NULL && p->refs > 0);
	FH_CHECK(data >= p->bytes && data + len <= p->bytes + p->len);
	for (i = 0; i < len; i++)
		sum += data[i];
	(void)sum;
	if (cx->read_now)
		tl_tcp_recved(c, len, cx->now);
}

static void tcp_closed(void *arg, struct tl_tcp_conn *c, int reason)
{
	struct tcp_ctx *cx = arg;

	(void)reason;
	if (cx->conn == c)
		cx->conn = NULL;
}

static const struct tl_tcp_cbs tcp_cbs = {tcp_accept, tcp_connected, tcp_recv, NULL, tcp_closed};

static void tcp_send_done(void *arg, int status)
{
	(void)status;
	((struct tcp_ctx *)arg)->dones++;
}

static void tcp_app_send(struct tcp_ctx *cx, uint32_t len)
{
	if (cx->conn == NULL || len == 0)
		return;
	if (cx->app_off + len > TCP_APP_BUF)
		cx->app_off = 0;
	if (len > TCP_APP_BUF)
		len = TCP_APP_BUF;
	if (tl_tcp_send(cx->conn, cx->app_buf + cx->app_off, len, tcp_send_done, cx, cx->now) == 0) {
		cx->sends++;
		cx->app_off += len;
	}
}

/* ---- the peer ---------------------------------------------------------------------- */

struct tcp_seg {
	uint32_t seq, ack;
	uint8_t flags, ecn;
	uint16_t wnd;
	const uint8_t *opts;
	uint32_t optlen;
	bool add_ts, bad_cksum;
	uint16_t cksum;              /* used when bad_cksum */
	const uint8_t *payload;
	uint32_t plen;
};

/*
 * The segment as the dpdk backend hands over a frame held in several buffers (an LRO frame):
 * its payload in `pieces` parts (tl_tcp_input_pieces). What that refuses (a SYN or RST, a
 * header that is not whole) goes in whole, as the backend linearizes it.
 */
static void tcp_deliver_pieces(struct tcp_ctx *cx, struct tl_tcp_rx *rx, uint32_t pieces)
{
	const uint8_t *t = rx->tcp;
	uint32_t doff = (uint32_t)(t[12] >> 4) * 4u, plen, off = 0;
	struct tl_tcp_piece p[8];
	struct tl_tcp_rx h = *rx;

	if (doff <= rx->tcp_len) {
		plen = rx->tcp_len - doff;
		for (uint32_t i = 0; i < pieces; i++) {
			uint32_t n = i + 1 == pieces ? plen - off : plen / pieces;
			p[i] = (struct tl_tcp_piece){t + doff + off, n};
			off += n;
		}
		h.tcp_len = doff;
		if (tl_tcp_input_pieces(cx->s, &h, p, pieces, cx->now) != -EINVAL)
			return;
	}
	(void)tl_tcp_input(cx->s, rx, cx->now);
}

/*
 * Hands tcp_len bytes at b to the stack as a received packet (in `pieces` parts when above
 * 1). A segment whose checksum does not verify is dropped here, as the backend does before
 * tl_tcp_input.
 */
static void tcp_deliver(struct tcp_ctx *cx, const uint8_t *b, uint32_t tcp_len, uint8_t ecn,
			uint32_t pieces)
{
	struct tcp_pkt *p = malloc(sizeof(*p) + tcp_len);
	struct tl_tcp_rx rx = {0};

	if (p == NULL)
		return;
	p->live = &cx->pkts_live;
	p->refs = 1;
	p->len = tcp_len;
	memcpy(p->bytes, b, tcp_len);
	cx->pkts_live++;
	rx = (struct tl_tcp_rx){.saddr = TCP_RADDR, .daddr = TCP_LADDR, .tcp = p->bytes,
				.tcp_len = tcp_len, .ecn = ecn, .pkt = p};
	if (tl_tcp_rx_cksum_ok(&rx)) {
		if (pieces > 1 && tcp_len >= 20)
			tcp_deliver_pieces(cx, &rx, pieces);
		else
			(void)tl_tcp_input(cx->s, &rx, cx->now);
	}
	tcp_pkt_put(p);
}

static void tcp_put_cksum(uint8_t *b, uint32_t len)
{
	struct tl_tcp_slice sl = {.base = b, .len = len, .sb = NULL};
	uint16_t ck;

	b[16] = b[17] = 0;
	ck = tl_tcp_cksum(TCP_RADDR, TCP_LADDR, len, &sl, 1);
	b[16] = (uint8_t)(ck >> 8);
	b[17] = (uint8_t)ck;
}

static void tcp_peer_send(struct tcp_ctx *cx, const struct tcp_seg *g)
{
	uint8_t b[TL_TCP_HDR_MAX + 4096];
	uint32_t ol = 0, hl, plen = g->plen > 4096 ? 4096 : g->plen;

	memset(b, 0, TL_TCP_HDR_MAX);
	if (g->add_ts && cx->ts) {
		uint8_t *o = b + 20;
		o[0] = 1;
		o[1] = 1;
		o[2] = 8;
		o[3] = 10;
		tcp_st_be32(o + 4, ++cx->peer_tsval);
		tcp_st_be32(o + 8, cx->st_tsval);
		ol = 12;
	}
	if (g->optlen > 0 && ol + g->optlen <= 40) {
		memcpy(b + 20 + ol, g->opts, g->optlen);
		ol += g->optlen;
	}
	hl = 20 + (ol + 3) / 4 * 4;
	b[0] = (uint8_t)((cx->active ? TCP_LPORT : TCP_RPORT) >> 8);
	b[1] = (uint8_t)(cx->active ? TCP_LPORT : TCP_RPORT);
	b[2] = (uint8_t)((cx->active ? TCP_RPORT : TCP_LPORT) >> 8);
	b[3] = (uint8_t)(cx->active ? TCP_RPORT : TCP_LPORT);
	tcp_st_be32(b + 4, g->seq);
	tcp_st_be32(b + 8, g->ack);
	b[12] = (uint8_t)(hl / 4 << 4);
	b[13] = g->flags;
	b[14] = (uint8_t)(g->wnd >> 8);
	b[15] = (uint8_t)g->wnd;
	if (plen > 0)
		memcpy(b + hl, g->payload, plen);
	tcp_put_cksum(b, hl + plen);
	if (g->bad_cksum) {
		b[16] = (uint8_t)(g->cksum >> 8);
		b[17] = (uint8_t)g->cksum;
	}
	tcp_deliver(cx, b, hl + plen, g->ecn, 1);
}

/* A well-behaved peer segment: in sequence, acknowledging everything the stack sent. */
static void tcp_peer_ctl(struct tcp_ctx *cx, uint8_t flags, uint32_t ack)
{
	/* SYN options: MSS 1460, window scale 7, SACK-permitted is not offered. */
	static const uint8_t syn_opts[] = {2, 4, 0x05, 0xb4, 1, 3, 3, 7};
	struct tcp_seg g = {.seq = cx->peer_nxt, .ack = ack, .flags = flags, .wnd = 65535,
			    .add_ts = true};

	if (flags & TL_TCP_SYN) {
		g.seq = TCP_PEER_ISS;
		g.opts = syn_opts;
		g.optlen = sizeof(syn_opts);
	}
	tcp_peer_send(cx, &g);
	if (flags & (TL_TCP_SYN | TL_TCP_FIN))
		cx->peer_nxt = g.seq + 1u;
}

/* ---- driving the connection to a state ---------------------------------------------- */

static uint8_t tcp_state_now(struct tcp_ctx *cx)
{
	struct tl_tcp_conn *c = tl_conn_lookup(cx->s, TCP_LADDR, TCP_LPORT, TCP_RADDR, TCP_RPORT);

	if (c == NULL)
		c = tl_conn_lookup(cx->s, TCP_LADDR, TCP_RPORT, TCP_RADDR, TCP_LPORT);
	return c == NULL ? TL_TCP_CLOSED : c->state;
}

/* Runs the handshake (and close steps) to target; returns the state expected. */
static uint8_t tcp_setup(struct tcp_ctx *cx, enum tcp_target target)
{
	struct tl_tcp_tuple t = {TCP_LADDR, TCP_RADDR, TCP_RPORT, TCP_LPORT};
	struct tl_tcp_listener *l;
	cx->active = target == TS_SYN_SENT || target == TS_EST_ACTIVE;
	if (!cx->active) {
		FH_CHECK(tl_tcp_listen(cx->s, TCP_LADDR, TCP_LPORT, 4, &tcp_cbs, cx, &l) == 0);
		if (target == TS_LISTEN)
			return TL_TCP_CLOSED;
		tcp_peer_ctl(cx, TL_TCP_SYN, 0);
		if (target == TS_SYN_RCVD)
			return TL_TCP_SYN_RCVD;
		tcp_peer_ctl(cx, TL_TCP_ACK, cx->st_max);
	} else {
		/* Active open from the stack: local port 40000 to the peer's 80, so the
		 * peer's segments carry the same ports as in the passive cases, swapped. */
		FH_CHECK(tl_tcp_connect(cx->s, &t, &tcp_cbs, cx, cx->now, &cx->conn) == 0);
		if (target == TS_SYN_SENT)
			return TL_TCP_SYN_SENT;
		tcp_peer_ctl(cx, TL_TCP_SYN | TL_TCP_ACK, cx->st_max);
		return TL_TCP_ESTABLISHED;
	}
	FH_CHECK(cx->conn != NULL);
	switch (target) {
	case TS_EST_INFLIGHT:
		tcp_app_send(cx, 3000);
		return TL_TCP_ESTABLISHED;
	case TS_FIN_WAIT_1:
	case TS_FIN_WAIT_2:
	case TS_CLOSING:
	case TS_TIME_WAIT:
		FH_CHECK(tl_tcp_close(cx->conn, cx->now) == 0);
		if (target == TS_FIN_WAIT_1)
			return TL_TCP_FIN_WAIT_1;
		if (target == TS_CLOSING) {
			tcp_peer_ctl(cx, TL_TCP_FIN | TL_TCP_ACK, cx->st_max - 1u);
			return TL_TCP_CLOSING;
		}
		tcp_peer_ctl(cx, TL_TCP_ACK, cx->st_max);
		if (target == TS_FIN_WAIT_2)
			return TL_TCP_FIN_WAIT_2;
		tcp_peer_ctl(cx, TL_TCP_FIN | TL_TCP_ACK, cx->st_max);
		return TL_TCP_TIME_WAIT;
	case TS_CLOSE_WAIT:
	case TS_LAST_ACK:
		tcp_peer_ctl(cx, TL_TCP_FIN | TL_TCP_ACK, cx->st_max);
		if (target == TS_CLOSE_WAIT)
			return TL_TCP_CLOSE_WAIT;
		FH_CHECK(tl_tcp_close(cx->conn, cx->now) == 0);
		return TL_TCP_LAST_ACK;
	default:
		return TL_TCP_ESTABLISHED;
	}
}

/* ---- fuzzed records ------------------------------------------------------------------ */

/*
 * A structured segment: u8 ctl, u8 flags, u16 wnd, u32 seq/ack word, u8 optlen, options,
 * u16 plen, payload. ctl bits 0..1 choose seq (0 peer_nxt, 1 peer_nxt + (int8) low byte
 * of the word, 2 the word itself, 3 peer_nxt - (u16)word), bits 2..3 ack likewise
 * against the stack's highest sequence, bit4 bad checksum (the word's high half), bit5 a
 * valid timestamp option first, bit6 CE mark, bit7 the peer counts the payload as sent.
 */
static void tcp_rec_segment(struct tcp_ctx *cx, struct fh_in *in)
{
	uint8_t ctl = fh_u8(in), optlen;
	uint32_t word;
	size_t got;
	struct tcp_seg g = {0};

	g.flags = fh_u8(in);
	g.wnd = fh_u16(in);
	word = fh_u32(in);
	optlen = fh_u8(in) % 41u;
	g.opts = fh_take(in, optlen, &got);
	g.optlen = (uint32_t)got;
	g.plen = fh_u16(in) % 4097u;
	g.payload = fh_take(in, g.plen, &got);
	g.plen = (uint32_t)got;
	switch (ctl & 3u) {
	case 0: g.seq = cx->peer_nxt; break;
	case 1: g.seq = cx->peer_nxt + (uint32_t)(int8_t)word; break;
	case 2: g.seq = word; break;
	default: g.seq = cx->peer_nxt - (word & 0xffffu); break;
	}
	switch ((ctl >> 2) & 3u) {
	case 0: g.ack = cx->st_max; break;
	case 1: g.ack = cx->st_max + (uint32_t)(int8_t)(word >> 8); break;
	case 2: g.ack = word; break;
	default: g.ack = cx->st_max - (word >> 16); break;
	}
	g.bad_cksum = ctl & 0x10u;
	g.cksum = (uint16_t)(word >> 16);
	g.add_ts = ctl & 0x20u;
	g.ecn = ctl & 0x40u ? TL_ECN_CE : TL_ECN_ECT0;
	tcp_peer_send(cx, &g);
	if (ctl & 0x80u)
		cx->peer_nxt = g.seq + g.plen + !!(g.flags & TL_TCP_SYN) + !!(g.flags & TL_TCP_FIN);
}

/* Raw bytes as a whole TCP segment (header fully fuzzed), valid checksum or not, handed
 * over whole or in 2..8 pieces (ctl bits 1-3) as the backend hands over an LRO frame. */
static void tcp_rec_raw(struct tcp_ctx *cx, struct fh_in *in)
{
	uint8_t ctl = fh_u8(in), b[2048];
	size_t got;
	uint32_t len = fh_u16(in) % sizeof(b);
	const uint8_t *p = fh_take(in, len, &got);

	memcpy(b, p, got);
	if ((ctl & 1) && got >= 18)
		tcp_put_cksum(b, (uint32_t)got);
	tcp_deliver(cx, b, (uint32_t)got, ctl >> 6, ((ctl >> 1) & 7u) + 1u);
}

static void tcp_rec_app(struct tcp_ctx *cx, struct fh_in *in)
{
	uint8_t a = fh_u8(in);
	uint16_t n = fh_u16(in);
	struct tl_tcp_tuple t = {TCP_LADDR, TCP_RADDR, (uint16_t)(41000u + (n & 7u)), TCP_LPORT};
	struct tl_tcp_conn *other;

	switch (a % 5u) {
	case 0: tcp_app_send(cx, 1u + n % 8192u); break;
	case 1: if (cx->conn) tl_tcp_recved(cx->conn, n, cx->now); break;
	case 2: if (cx->conn) (void)tl_tcp_close(cx->conn, cx->now); break;
	case 3: if (cx->conn) tl_tcp_abort(cx->conn); break;
	default: (void)tl_tcp_connect(cx->s, &t, &tcp_cbs, cx, cx->now, &other); break;
	}
}

/* Advances the clock in steps, running timers at each (at most ~2 s of fake time). */
static void tcp_advance(struct tcp_ctx *cx, uint64_t ns, uint32_t steps)
{
	uint32_t i;

	for (i = 0; i < steps; i++) {
		cx->now += ns;
		tl_tcp_timers(cx->s, cx->now);
	}
}

static void tcp_record(struct tcp_ctx *cx, struct fh_in *in)
{
	uint8_t op = fh_u8(in);

	switch (op % 8u) {
	case 5: tcp_rec_raw(cx, in); break;
	case 6: tcp_rec_app(cx, in); break;
	case 7: tcp_advance(cx, (uint64_t)(fh_u8(in) + 1u) * 50000u, 1u + fh_u8(in) % 16u); break;
	default: tcp_rec_segment(cx, in); break;
	}
	tcp_advance(cx, 20000, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t isses[8] = {1000, 0, 0x7fffff00u, 0xfffff000u, 0xffffffffu,
					  0x80000000u, 12345678u, 0xfffffc00u};
	struct fh_in in = {data, size};
	enum tcp_target target = (enum tcp_target)(fh_u8(&in) % TS_N);
	uint8_t cfgb = fh_u8(&in), want;
	struct tcp_ctx cx = {0};
	struct tl_tcp_cfg cfg;
	int n = 0;

	if (size > 65536)
		return 0;
	tl_tcp_cfg_default(&cfg);
	cfg.rcv_buf = 16384;
	cfg.snd_buf = 32768;
	cfg.max_conns = 8;
	cfg.max_listeners = 2;
	cfg.max_sbufs = 32;
	cfg.ooo_max = 4;
	cfg.rto_init_ns = 10 * TCP_MS;
	cfg.time_wait_ns = 20 * TCP_MS;
	cfg.max_retrans = 4;
	cfg.timestamps = cfgb & 1;
	cfg.wscale = cfgb & 2;
	cfg.ecn = cfgb & 4;
	cx.ts = cfg.timestamps;
	cx.read_now = cfgb & 8;
	cx.fail_emits = cfgb & 16;
	cx.iss = isses[cfgb >> 5];
	cx.st_max = cx.iss;
	cx.peer_nxt = TCP_PEER_ISS;
	cx.now = 1000 * TCP_MS;
	cx.app_buf = malloc(TCP_APP_BUF);
	FH_CHECK(cx.app_buf != NULL);
	memset(cx.app_buf, 0x5a, TCP_APP_BUF);
	FH_CHECK(tl_tcp_stack_create(&cfg, &tcp_ops, &cx, cx.now, &cx.s) == 0);
	want = tcp_setup(&cx, target);
	/* Failed emits can stall the handshake; only a clean wire must reach the state. */
	if (!cx.fail_emits)
		FH_CHECK(tcp_state_now(&cx) == want);
	while (in.n > 0 && n++ < TCP_MAX_RECORDS)
		tcp_record(&cx, &in);
	/* Let every timer run out: retransmissions give up, TIME_WAIT ends. */
	tcp_advance(&cx, 50 * TCP_MS, 40);
	if (tl_tcp_conn_count(cx.s) == 0)
		FH_CHECK(tl_tcp_sbufs_in_use(cx.s) == 0);
	tl_tcp_stack_destroy(cx.s);
	FH_CHECK(cx.pkts_live == 0);
	FH_CHECK(cx.dones == cx.sends);
	free(cx.app_buf);
	return 0;
}
