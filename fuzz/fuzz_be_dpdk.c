/*
 * fuzz_be_dpdk.c — libFuzzer harness for the DPDK transport backend's receive glue
 * (transport/tl_be_dpdk.c: received IPv4 frames -> TCP-lite -> framing), on a real PMD:
 * EAL in memory with a net_ring port, set up once by dpdk_net/tests/dn_testlib.c.
 *
 * Call chain exercised: crafted mbufs put on the port's ring (rte_eth_tx_burst: net_ring's
 * Tx is its own Rx, so the PMD hands them over untouched) -> tl_poll -> db_poll ->
 * dn_loop_once -> rte_eth_rx_burst -> dn_input_burst -> dn_ip_input -> db_l4_input
 * (checksum offload flags, db_input_chain for a chained frame, or linearize) -> tl_tcp_input
 * | tl_tcp_input_pieces -> db_recv -> tl_up_input -> the msg callback; and back out:
 * db_emit -> dn_ip_send -> the ring, where the harness reads what the stack sent.
 *
 * Per input: a fresh struct tl on the one lcore, listening on port 80; the setup byte
 * opens a passive connection (the harness's SYN, the stack's SYN-ACK, the harness's ACK)
 * and/or an active one (tl_connect, SYN-ACK from the harness). The harness plays the peer:
 * it reads every segment the stack sends, remembers per flow the next sequence number it
 * sends itself and the highest the stack sent, so fuzzed segments can be placed in, near or
 * far from the window.
 *
 * Input layout:
 *   u8 setup  bit0 passive connection, bit1 active one, bit2 TS option in the handshake,
 *             bit3 WS option, bit4 the receiver holds every message, bit5 held messages
 *             are left to tl_destroy
 *   then up to BDF_RECORDS records, each starting with u8 op: bits0-1 kind (0, 1 a built
 *   segment, 2 a raw frame, 3 an application call, see bdf_record), bit2 the flow
 *   (passive, active), bit3 poll after this frame (else frames collect into a burst).
 * Every frame ends with u8 ol (offload flags: bits0-1 IP checksum UNKNOWN/BAD/GOOD/NONE,
 * bits2-3 L4 the same, bit4 LRO; bit5 nb_segs understates the chain) and u8 layout (bits0-3 buffers - 1, bits4-5 a lie about
 * the lengths: pkt_len longer, shorter, or the last buffer's data_len longer than what was
 * written; bits6-7 headroom 128, 0, 2 or 64), then the lie's size and the cut points.
 *
 * Checked besides ASan/UBSan (which cannot see into mempool memory, hence the explicit
 * checks): every body byte delivered lies in a buffer of a frame the harness handed in (as
 * the frame's buffers described it; the head's as far as linearizing gathers); after tl_destroy every mbuf is back in the port's
 * pool (except frames dpdk_net parks waiting for ARP), every send's done ran exactly once.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_random.h>

#include "dpdk_net/tests/dn_testlib.h"
#include "fuzz/fuzz_util.h"
#include "transport/tl.h"

#define BDF_RECORDS 48
#define BDF_MAX_PAYLOAD 4096u
#define BDF_MAX_FRAME (14u + 60u + 60u + BDF_MAX_PAYLOAD)
#define BDF_MAX_SEGS 16u
#define BDF_MAX_REGIONS (BDF_RECORDS * (BDF_MAX_SEGS + 4u))
#define BDF_LPORT 80u
#define BDF_PEER_PORT 40000u
#define BDF_PEER_LISTEN 5000u
#define BDF_PEER_ISS 0x10000000u
#define BDF_HELD_MAX 64u
#define BDF_TXBUF (64u << 10)

struct bdf_flow {
	struct tl_conn *c;
	uint16_t lport, rport;     /* ours, the peer's */
	uint32_t peer_nxt;         /* next sequence number the peer (harness) sends */
	uint32_t st_nxt;           /* highest sequence end the stack sent */
	uint32_t st_tsval;
	bool seen;                 /* the stack sent on this flow */
};

struct bdf_region {
	const uint8_t *lo, *hi;
};

struct bdf_ctx {
	struct tl *tl;
	struct bdf_flow flow[2];
	bool hold;
	struct tl_msg *held[BDF_HELD_MAX];
	uint32_t nheld;
	uint64_t sends, dones, msgs;
	struct bdf_region reg[BDF_MAX_REGIONS];
	uint32_t nreg;
	uint8_t *txbuf;            /* body memory for zero-copy sends, in DPDK memory */
	struct rte_mbuf *burst[DN_BURST];
	uint16_t nburst;
};

/* One EAL and port per process: libFuzzer runs every input in this process. */
static struct dt_env bdf_env;
static struct bdf_ctx bdf;

/* ---- what the stack sends ------------------------------------------------------------ */

static uint32_t bdf_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void bdf_st_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static bool bdf_seq_gt(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }

/* Learns the stack's sequence numbers and TSval from one frame it sent. */
static void bdf_note(struct rte_mbuf *m)
{
	uint8_t b[14 + 60 + 60];
	const uint8_t *f = rte_pktmbuf_read(m, 0, RTE_MIN(sizeof(b), m->pkt_len), b);
	uint32_t len = RTE_MIN((uint32_t)sizeof(b), m->pkt_len), ihl, doff, seq, end;
	const uint8_t *ip = f + 14, *tcp;
	struct bdf_flow *fl = NULL;

	if (f == NULL || len < 14 + 20 + 20 || f[12] != 0x08 || f[13] != 0x00 || ip[9] != 6)
		return;
	ihl = (ip[0] & 0xfu) * 4u;
	if (ihl < 20 || 14 + ihl + 20 > len || bdf_be32(ip + 12) != DT_OUR_IP)
		return;
	tcp = ip + ihl;
	for (int i = 0; i < 2; i++) {
		struct bdf_flow *x = &bdf.flow[i];
		uint16_t sp = (uint16_t)(tcp[0] << 8 | tcp[1]), dp = (uint16_t)(tcp[2] << 8 | tcp[3]);
		if (dp == x->rport && (sp == x->lport || x->lport == 0)) {
			x->lport = sp;
			fl = x;
			break;
		}
	}
	if (fl == NULL)
		return;
	doff = (uint32_t)(tcp[12] >> 4) * 4u;
	seq = bdf_be32(tcp + 4);
	end = seq + ((uint32_t)(ip[2] << 8 | ip[3]) - ihl - doff) + !!(tcp[13] & 0x02) +
	      !!(tcp[13] & 0x01);
	if (!fl->seen || bdf_seq_gt(end, fl->st_nxt))
		fl->st_nxt = end;
	fl->seen = true;
	for (uint32_t i = 20; i + 1 < doff && 14 + ihl + i + 1 < len;) {
		const uint8_t *o = tcp + i;
		if (o[0] == 0)
			break;
		if (o[0] == 1) {
			i++;
			continue;
		}
		if (o[1] < 2)
			break;
		if (o[0] == 8 && o[1] == 10 && 14 + ihl + i + 10 <= len)
			fl->st_tsval = bdf_be32(o + 2);
		i += o[1];
	}
}

/* Everything on the ring: what the stack sent (noted), and anything of ours left over. */
static void bdf_drain(void)
{
	struct rte_mbuf *m[DN_BURST];
	uint16_t n;

	while ((n = dt_sent(&bdf_env, m, DN_BURST)) > 0)
		for (uint16_t i = 0; i < n; i++) {
			bdf_note(m[i]);
			rte_pktmbuf_free(m[i]);
		}
}

/* ---- the application ------------------------------------------------------------------ */

static bool bdf_in_region(const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < bdf.nreg; i++)
		if (p >= bdf.reg[i].lo && p + len <= bdf.reg[i].hi)
			return true;
	return false;
}

static void bdf_check_view(const struct tl_msg_view *v)
{
	for (uint32_t i = 0; i < v->iovcnt; i++)
		FH_CHECK(bdf_in_region(v->iov[i].base, v->iov[i].len));
	(void)fh_touch_view(v);
}

static void bdf_msg(struct tl_conn *c, const struct tl_msg_view *v)
{
	(void)c;
	bdf.msgs++;
	bdf_check_view(v);
	if (bdf.hold && bdf.nheld < BDF_HELD_MAX) {
		struct tl_msg *m = tl_msg_hold(v);
		FH_CHECK(m != NULL);
		FH_CHECK(tl_msg_view_of(m) == v);
		bdf.held[bdf.nheld++] = m;
	}
}

static void bdf_forget(struct tl_conn *c)
{
	for (int i = 0; i < 2; i++)
		if (bdf.flow[i].c == c)
			bdf.flow[i].c = NULL;
}

static void bdf_connected(struct tl_conn *c, int status)
{
	if (status != 0)
		bdf_forget(c);
}

static void bdf_closed(struct tl_conn *c, int reason)
{
	(void)reason;
	bdf_forget(c);
}

static const struct tl_conn_ops bdf_ops = {bdf_connected, bdf_msg, bdf_closed};

static void bdf_accepted(struct tl_listener *l, struct tl_conn *c)
{
	(void)l;
	if (bdf.flow[0].c == NULL)
		bdf.flow[0].c = c;
}

static void bdf_done(void *arg, int status)
{
	(void)arg;
	(void)status;
	bdf.dones++;
}

static void bdf_release_held(void)
{
	for (uint32_t i = 0; i < bdf.nheld; i++) {
		bdf_check_view(tl_msg_view_of(bdf.held[i]));
		tl_msg_release(bdf.held[i]);
	}
	bdf.nheld = 0;
}

/* ---- frames to the stack -------------------------------------------------------------- */

static void bdf_poll(void)
{
	uint16_t sent;

	bdf_drain();
	if (bdf.nburst > 0) {
		sent = rte_eth_tx_burst(dn_port_id(bdf_env.port), 0, bdf.burst, bdf.nburst);
		for (uint16_t i = sent; i < bdf.nburst; i++)
			rte_pktmbuf_free(bdf.burst[i]);
		bdf.nburst = 0;
	}
	(void)tl_poll(bdf.tl, 0);
	bdf_drain();
}

static void bdf_region_add(const uint8_t *p, uint32_t len)
{
	if (bdf.nreg < BDF_MAX_REGIONS)
		bdf.reg[bdf.nreg++] = (struct bdf_region){p, p + len};
}

/*
 * The received bytes of a frame: each buffer's data; the head's also reaches as far as the
 * chain's bytes would, since rte_pktmbuf_linearize gathers them there (up to pkt_len, and
 * never past what the buffers hold, so a pkt_len longer than they are gains nothing).
 */
static void bdf_regions_of(const struct rte_mbuf *h)
{
	uint32_t sum = 0, head;

	for (const struct rte_mbuf *s = h; s != NULL; s = s->next) {
		bdf_region_add(rte_pktmbuf_mtod(s, const uint8_t *), s->data_len);
		sum += s->data_len;
	}
	head = RTE_MAX((uint32_t)h->data_len, RTE_MIN(h->pkt_len, sum));
	head = RTE_MIN(head, (uint32_t)(h->buf_len - h->data_off));
	bdf_region_add(rte_pktmbuf_mtod(h, const uint8_t *), head);
}

/*
 * Cuts frame f into a chain of up to BDF_MAX_SEGS buffers (more when a piece exceeds one
 * buffer), applies the offload flags and the length lie, and queues it for the next burst.
 */
static void bdf_queue(struct fh_in *in, const uint8_t *f, uint32_t len)
{
	static const uint16_t heads[4] = {RTE_PKTMBUF_HEADROOM, 0, 2, 64}; /* PMDs keep it even */
	static const uint64_t ipck[4] = {RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, RTE_MBUF_F_RX_IP_CKSUM_BAD,
					 RTE_MBUF_F_RX_IP_CKSUM_GOOD, RTE_MBUF_F_RX_IP_CKSUM_NONE};
	static const uint64_t l4ck[4] = {RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN, RTE_MBUF_F_RX_L4_CKSUM_BAD,
					 RTE_MBUF_F_RX_L4_CKSUM_GOOD, RTE_MBUF_F_RX_L4_CKSUM_NONE};
	uint8_t ol = fh_u8(in), lay = fh_u8(in), lie = (lay >> 4) & 3, k = 0;
	uint32_t nsegs = (lay & 0xfu) + 1u, cut[BDF_MAX_SEGS + 1], i, j, tmp;
	uint16_t head = heads[lay >> 6];
	struct rte_mbuf *h = NULL, *last = NULL;

	if (lie != 0)
		k = fh_u8(in);
	cut[0] = 0;
	for (i = 1; i < nsegs; i++)
		cut[i] = (uint32_t)(((uint64_t)len * fh_u8(in)) / 255u);
	cut[nsegs] = len;
	for (i = 1; i < nsegs; i++)
		for (j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
			tmp = cut[j];
			cut[j] = cut[j - 1];
			cut[j - 1] = tmp;
		}
	for (i = 0; i < nsegs; i++) {
		uint32_t off = cut[i], n = cut[i + 1] - cut[i];
		do { /* a piece above one buffer's room takes several */
			struct rte_mbuf *m = rte_pktmbuf_alloc(bdf_env.pool);
			uint32_t room, take;
			if (m == NULL)
				goto out_free;
			m->data_off = head;
			room = (uint32_t)(m->buf_len - head);
			take = RTE_MIN(n, room);
			memcpy(rte_pktmbuf_mtod(m, uint8_t *), f + off, take);
			m->data_len = (uint16_t)take;
			m->pkt_len = take;
			if (h == NULL) {
				h = m;
			} else {
				last->next = m;
				h->nb_segs++;
				h->pkt_len += take;
			}
			last = m;
			off += take;
			n -= take;
		} while (n > 0);
	}
	if (lie == 1)
		h->pkt_len += k;
	else if (lie == 2)
		h->pkt_len -= RTE_MIN((uint32_t)k, h->pkt_len);
	else if (lie == 3)
		last->data_len = (uint16_t)RTE_MIN((uint32_t)last->data_len + k,
						   (uint32_t)(last->buf_len - last->data_off));
	bdf_regions_of(h);
	if ((ol & 0x20) && h->nb_segs > 1)
		h->nb_segs = (uint16_t)(1u + (h->nb_segs - 1u) / 2u); /* a chain longer than it says */
	h->ol_flags = ipck[ol & 3] | l4ck[(ol >> 2) & 3] | ((ol & 0x10) ? RTE_MBUF_F_RX_LRO : 0);
	bdf.burst[bdf.nburst++] = h;
	if (bdf.nburst == DN_BURST)
		bdf_poll();
	return;
out_free:
	rte_pktmbuf_free(h); /* the pool ran dry (the stack holds the rest): no frame */
}

static void bdf_ip_fix(uint8_t *f, uint32_t len)
{
	uint8_t *ip = f + 14;
	uint32_t ihl = (ip[0] & 0xfu) * 4u;

	if (ihl < 20 || 14 + ihl > len)
		return;
	ip[10] = ip[11] = 0;
	uint16_t ck = (uint16_t)~rte_raw_cksum(ip, ihl);
	memcpy(ip + 10, &ck, 2);
}

/* The TCP checksum over what total_length covers, when that lies in the frame. */
static void bdf_tcp_fix(uint8_t *f, uint32_t len)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	uint32_t ihl = (ip->version_ihl & 0xfu) * 4u, tot = rte_be_to_cpu_16(ip->total_length);
	uint8_t *tcp = f + 14 + ihl;
	uint32_t sum;

	if (ihl < 20 || tot < ihl + 20 || 14 + tot > len)
		return;
	tcp[16] = tcp[17] = 0;
	sum = (uint32_t)rte_ipv4_phdr_cksum(ip, 0) + rte_raw_cksum(tcp, tot - ihl);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	uint16_t ck = (uint16_t)~sum;
	memcpy(tcp + 16, &ck, 2);
}

/* Ethernet and IPv4 headers from the peer to us; returns the IPv4 header length. */
static uint32_t bdf_l2l3(uint8_t *f, uint32_t ipopt, uint32_t l4_len)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	uint8_t *ip = f + 14;
	uint32_t ihl = 20 + ipopt;

	eth->dst_addr = *dn_port_mac(bdf_env.port);
	eth->src_addr = dt_peer_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, ihl);
	ip[0] = (uint8_t)(0x40 | ihl / 4);
	ip[2] = (uint8_t)((ihl + l4_len) >> 8);
	ip[3] = (uint8_t)(ihl + l4_len);
	ip[6] = 0x40;
	ip[8] = 64;
	ip[9] = 6;
	bdf_st_be32(ip + 12, DT_PEER_IP);
	bdf_st_be32(ip + 16, DT_OUR_IP);
	for (uint32_t i = 20; i < ihl; i++)
		ip[i] = 1; /* NOP options */
	return ihl;
}

/* The peer's TCP header of flow fl at tcp: doff bytes (the options, then zeros). */
static void bdf_tcp_hdr(uint8_t *tcp, const struct bdf_flow *fl, uint32_t seq, uint32_t ack,
			uint32_t doff, uint8_t flags, uint16_t wnd, const uint8_t *opts, uint32_t olen)
{
	memset(tcp, 0, doff);
	tcp[0] = (uint8_t)(fl->rport >> 8);
	tcp[1] = (uint8_t)fl->rport;
	tcp[2] = (uint8_t)(fl->lport >> 8);
	tcp[3] = (uint8_t)fl->lport;
	bdf_st_be32(tcp + 4, seq);
	bdf_st_be32(tcp + 8, ack);
	tcp[12] = (uint8_t)(doff / 4u << 4);
	tcp[13] = flags;
	tcp[14] = (uint8_t)(wnd >> 8);
	tcp[15] = (uint8_t)wnd;
	memcpy(tcp + 20, opts, olen);
}

/*
 * A segment built by the harness:
 *   u8 flags, u8 fix (bit0 seq relative to the peer's next, else raw u32; bit1 ack
 *   relative to the stack's highest, else raw u32; bit2 TS option echoing the stack; bit3
 *   the peer's next advances past it; bits4-5 TCP checksum: good, flipped, zero, good;
 *   bit6 IP checksum flipped; bit7 IP options), seq (s16 | u32), ack (s16 | u32), u16 wnd,
 *   u8 optlen (mod 41) + options, u16 payload length (mod 4097) + payload, u8 tweak
 *   (bits0-1 ECN; bit2 total_length from a u16; bit3 data offset from a nibble)
 */
static void bdf_segment(struct fh_in *in, struct bdf_flow *fl)
{
	static uint8_t f[BDF_MAX_FRAME];
	uint8_t flags = fh_u8(in), fix = fh_u8(in), optlen, tweak;
	uint32_t seq, ack, ihl, doff, plen, olen, ck, total;
	uint16_t wnd;
	size_t got;
	uint8_t opts[40] = {0}, *tcp;

	seq = (fix & 1) ? fl->peer_nxt + (uint32_t)(int16_t)fh_u16(in) : fh_u32(in);
	ack = (fix & 2) ? fl->st_nxt + (uint32_t)(int16_t)fh_u16(in) : fh_u32(in);
	wnd = fh_u16(in);
	optlen = (uint8_t)(fh_u8(in) % 41u);
	memcpy(opts, fh_take(in, optlen, &got), got);
	olen = optlen;
	if ((fix & 4) && olen + 12 <= 40) { /* NOP NOP TS */
		uint8_t *o = opts + olen;
		o[0] = o[1] = 1;
		o[2] = 8;
		o[3] = 10;
		bdf_st_be32(o + 4, 0x1000u + bdf.nreg);
		bdf_st_be32(o + 8, fl->st_tsval);
		olen += 12;
	}
	doff = 20 + (olen + 3u) / 4u * 4u;
	plen = fh_u16(in) % (BDF_MAX_PAYLOAD + 1u);
	ihl = bdf_l2l3(f, (fix & 0x80) ? 8u : 0u, doff + plen);
	tcp = f + 14 + ihl;
	bdf_tcp_hdr(tcp, fl, seq, ack, doff, flags, wnd, opts, olen);
	memcpy(tcp + doff, fh_take(in, plen, &got), got);
	for (uint32_t i = (uint32_t)got; i < plen; i++)
		tcp[doff + i] = (uint8_t)i;
	total = 14 + ihl + doff + plen;
	tweak = fh_u8(in);
	f[14 + 1] = tweak & 3;
	if (tweak & 4) {
		uint16_t tot = fh_u16(in);
		f[14 + 2] = (uint8_t)(tot >> 8);
		f[14 + 3] = (uint8_t)tot;
	}
	if (tweak & 8)
		tcp[12] = (uint8_t)(fh_u8(in) << 4);
	bdf_ip_fix(f, total);
	if (fix & 0x40)
		f[14 + 10] ^= 0x5a;
	ck = (fix >> 4) & 3;
	if (ck != 2)
		bdf_tcp_fix(f, total);
	if (ck == 1)
		tcp[16] ^= 0x01;
	if (fix & 8)
		fl->peer_nxt = seq + plen + !!(flags & 0x02) + !!(flags & 0x01);
	bdf_queue(in, f, total);
}

/*
 * A raw frame: u8 fix (bit0 Ethernet, IPv4 version/IHL 0x45, protocol TCP, addresses;
 * bit1 the flow's ports; bit2 IPv4 checksum; bit3 TCP checksum), u16 length (mod
 * BDF_MAX_FRAME + 1), the bytes.
 */
static void bdf_raw(struct fh_in *in, struct bdf_flow *fl)
{
	static uint8_t f[BDF_MAX_FRAME];
	uint8_t fix = fh_u8(in);
	uint32_t len = fh_u16(in) % (BDF_MAX_FRAME + 1u);
	size_t got;

	memcpy(f, fh_take(in, len, &got), got);
	len = (uint32_t)got;
	if ((fix & 1) && len >= 14 + 20) {
		uint8_t *ip = f + 14;
		struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
		eth->dst_addr = *dn_port_mac(bdf_env.port);
		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
		ip[0] = 0x45;
		ip[9] = 6;
		bdf_st_be32(ip + 12, DT_PEER_IP);
		bdf_st_be32(ip + 16, DT_OUR_IP);
	}
	if ((fix & 2) && len >= 14 + 24) {
		uint32_t ihl = (f[14] & 0xfu) * 4u;
		if (14 + ihl + 4 <= len) {
			uint8_t *tcp = f + 14 + ihl;
			tcp[0] = (uint8_t)(fl->rport >> 8);
			tcp[1] = (uint8_t)fl->rport;
			tcp[2] = (uint8_t)(fl->lport >> 8);
			tcp[3] = (uint8_t)fl->lport;
		}
	}
	if ((fix & 4) && len >= 14 + 20)
		bdf_ip_fix(f, len);
	if ((fix & 8) && len >= 14 + 20)
		bdf_tcp_fix(f, len);
	bdf_queue(in, f, len);
}

/*
 * An application call: u8 what (mod 9): 0 poll; 1 sleep 100..400 us then poll (timers);
 * 2 tl_send_copy of u8 bytes; 3 tl_send of u16 bytes from DPDK memory (zero copy);
 * 4 tl_close; 5 tl_abort; 6 pause / 7 resume reading; 8 release held messages.
 */
static void bdf_app(struct fh_in *in, struct bdf_flow *fl)
{
	struct tl_msg_hdr h = {.type = TL_TYPE_PS_MIN, .req_id = bdf.sends};
	uint8_t what = fh_u8(in) % 9u;
	struct tl_iov v;

	if (what == 0) {
		bdf_poll();
		return;
	}
	if (what == 1) {
		bdf_poll();
		usleep(100u * (1u + fh_u8(in) % 4u));
		bdf_poll();
		return;
	}
	if (what == 8) {
		bdf_release_held();
		return;
	}
	if (fl->c == NULL)
		return;
	switch (what) {
	case 2:
		v = (struct tl_iov){bdf.txbuf, fh_u8(in) % (TL_SEND_COPY_MAX + 1u)};
		(void)tl_send_copy(fl->c, &h, &v, 1);
		break;
	case 3:
		v = (struct tl_iov){bdf.txbuf, fh_u16(in) % BDF_TXBUF};
		if (tl_send(fl->c, &h, &v, 1, bdf_done, NULL) == 0)
			bdf.sends++;
		break;
	case 4:
		(void)tl_close(fl->c);
		break;
	case 5:
		(void)tl_abort(fl->c);
		break;
	default:
		(void)tl_conn_rx_pause(fl->c, what == 6);
		break;
	}
}

static void bdf_record(struct fh_in *in)
{
	uint8_t op = fh_u8(in);
	struct bdf_flow *fl = &bdf.flow[(op >> 2) & 1];

	switch (op & 3) {
	case 0:
	case 1:
		bdf_segment(in, fl);
		break;
	case 2:
		bdf_raw(in, fl);
		break;
	default:
		bdf_app(in, fl);
		return;
	}
	if (op & 8)
		bdf_poll();
}

/* ---- setup ------------------------------------------------------------------------- */

/* A handshake segment from the peer, contiguous, checksums right, sent at once. */
static void bdf_hs(struct bdf_flow *fl, uint8_t flags, uint32_t seq, uint32_t ack, uint8_t setup)
{
	static uint8_t f[128];
	uint8_t opt[20], *tcp;
	uint32_t olen = 0, ihl, doff;
	struct rte_mbuf *m;

	opt[olen++] = 2; /* MSS 1460 */
	opt[olen++] = 4;
	opt[olen++] = 0x05;
	opt[olen++] = 0xb4;
	if (setup & 8) { /* NOP, WS 7 */
		opt[olen++] = 1;
		opt[olen++] = 3;
		opt[olen++] = 3;
		opt[olen++] = 7;
	}
	if (setup & 4) { /* NOP NOP TS */
		opt[olen++] = 1;
		opt[olen++] = 1;
		opt[olen++] = 8;
		opt[olen++] = 10;
		bdf_st_be32(opt + olen, 1);
		bdf_st_be32(opt + olen + 4, fl->st_tsval);
		olen += 8;
	}
	doff = 20 + olen;
	ihl = bdf_l2l3(f, 0, doff);
	tcp = f + 14 + ihl;
	bdf_tcp_hdr(tcp, fl, seq, ack, doff, flags, 0xffff, opt, olen);
	bdf_ip_fix(f, 14 + ihl + doff);
	bdf_tcp_fix(f, 14 + ihl + doff);
	m = dt_frame(&bdf_env, f, (uint16_t)(14 + ihl + doff));
	FH_CHECK(m != NULL);
	bdf.burst[bdf.nburst++] = m;
	bdf_poll();
}

static void bdf_setup(uint8_t setup)
{
	struct bdf_flow *p = &bdf.flow[0], *a = &bdf.flow[1];
	struct tl_listener *l;

	FH_CHECK(tl_listen(bdf.tl, 0, BDF_LPORT, &bdf_ops, bdf_accepted, NULL, &l) == 0);
	*p = (struct bdf_flow){.lport = BDF_LPORT, .rport = BDF_PEER_PORT, .peer_nxt = BDF_PEER_ISS};
	*a = (struct bdf_flow){.rport = BDF_PEER_LISTEN, .peer_nxt = BDF_PEER_ISS + 0x1000000u};
	if (setup & 1) {
		bdf_hs(p, 0x02, p->peer_nxt, 0, setup);
		p->peer_nxt++;
		FH_CHECK(p->seen);
		bdf_hs(p, 0x10, p->peer_nxt, p->st_nxt, setup);
		FH_CHECK(p->c != NULL);
	}
	if (setup & 2) {
		FH_CHECK(tl_connect(bdf.tl, DT_PEER_IP, BDF_PEER_LISTEN, &bdf_ops, NULL, &a->c) == 0);
		bdf_poll();
		FH_CHECK(a->seen && a->lport != 0);
		bdf_hs(a, 0x12, a->peer_nxt, a->st_nxt, setup);
		a->peer_nxt++;
	}
}

/* ---- process ------------------------------------------------------------------------- */

/*
 * libFuzzer leaves through exit(): release the port and EAL then, and remove EAL's
 * (empty, with --no-shconf) runtime directory, which rte_eal_cleanup leaves behind.
 */
static void bdf_fini(void)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	dt_port_down(&bdf_env);
	rte_free(bdf.txbuf);
	dn_eal_fini();
	(void)rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Retransmission timers within reach of a short sleep (bdf_app). */
	FH_CHECK(setenv("WHARF_TCP_RTO_MIN_US", "100", 1) == 0);
	FH_CHECK(dt_eal_init() >= 0);
	FH_CHECK(dt_port_up(&bdf_env) == 0);
	/* What tl_buf_alloc hands out (DPDK memory), for the whole process: a send may
	 * still reference it when tl_destroy runs. */
	bdf.txbuf = rte_malloc("bdf_tx", BDF_TXBUF, 64);
	FH_CHECK(bdf.txbuf != NULL);
	memset(bdf.txbuf, 0x5a, BDF_TXBUF);
	FH_CHECK(atexit(bdf_fini) == 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fh_in in = {data, size};
	struct tl_config cfg;
	uint8_t setup;
	unsigned pool_size = bdf_env.pool->size;
	int n = 0;

	if (size > 65536)
		return 0;
	setup = fh_u8(&in);
	memset(&bdf, 0, offsetof(struct bdf_ctx, reg));
	bdf.nreg = 0;
	bdf.nburst = 0;
	bdf.hold = setup & 0x10;
	rte_srand(1); /* the stack's ISS and ports: the same for the same input */
	dn_arp_learn(bdf_env.port, DT_PEER_IP, &dt_peer_mac, true);
	tl_config_default(&cfg);
	cfg.protocol = TL_PROTO_DPDK;
	cfg.backend_arg = bdf_env.lc;
	cfg.max_conns = 4;
	cfg.max_body = 1u << 20;
	cfg.max_held_msgs = 256;
	cfg.max_msg_segs = 256;
	FH_CHECK(tl_create(&cfg, &bdf.tl) == 0);
	bdf_setup(setup);
	while (in.n > 0 && n++ < BDF_RECORDS)
		bdf_record(&in);
	bdf_poll();
	if (!(setup & 0x20))
		bdf_release_held();
	bdf_drain(); /* the PMD lets go of sent payload: teardown need not wait for it */
	tl_destroy(bdf.tl);
	bdf_drain();
	FH_CHECK(bdf.dones == bdf.sends);
	FH_CHECK(bdf_env.lc->n_pending <= DN_PENDING_MAX);
	FH_CHECK(rte_mempool_avail_count(bdf_env.pool) + bdf_env.lc->n_pending == pool_size);
	return 0;
}
