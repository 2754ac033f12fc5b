/*
 * dn_ip.c — Ethernet and IPv4 in both directions, and ICMP echo.
 *
 * In:  dn_input_burst -> eth_input -> dn_arp_input (dn_arp.c)
 *                                  -> dn_ip_input -> icmp_input | hooks.l4_input
 * Out: dn_ip_send -> (ARP resolve | pending queue) -> dn_eth_fill -> dn_tx_enqueue
 *      -> dn_tx_flush -> rte_eth_tx_burst
 *
 * Every frame that fails a check is freed and counted under its reason (dn.h); nothing
 * here trusts a length it has not compared with the frame.
 */
#include <errno.h>
#include <string.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_prefetch.h>

#include "dpdk_net/dn_pvt.h"

#define DN_TTL 64

void dn_tx_flush(struct dn_lcore *lc)
{
	if (unlikely(lc->tx_ring != NULL || lc->port->stopped)) {
		if (!lc->port->stopped) {
			dn_steer_tx_flush(lc); /* not our device queue: lcore 0 sends for us */
			return;
		}
		while (lc->tx_head != lc->tx_tail) /* dn_port_stop: nothing leaves any more */
			rte_pktmbuf_free(lc->tx[lc->tx_head++ & (DN_TXQ_SLOTS - 1)]);
		return;
	}
	while (lc->tx_head != lc->tx_tail) {
		uint32_t at = lc->tx_head & (DN_TXQ_SLOTS - 1);
		uint32_t n = lc->tx_tail - lc->tx_head;
		uint16_t sent;

		/* One burst never wraps the ring: send up to its end, then from its start. */
		if (n > DN_TXQ_SLOTS - at)
			n = DN_TXQ_SLOTS - at;
		if (n > DN_BURST)
			n = DN_BURST;
		sent = rte_eth_tx_burst(lc->port_id, lc->queue, &lc->tx[at], (uint16_t)n);
		for (uint16_t i = 0; i < sent; i++)
			lc->stats.tx_bytes += rte_pktmbuf_pkt_len(lc->tx[at + i]);
		lc->stats.tx_pkts += sent;
		lc->tx_head += sent;
		if (sent < n)
			break; /* device ring full: the rest waits for the next flush */
	}
}

void dn_tx_enqueue(struct dn_lcore *lc, struct rte_mbuf *m)
{
	if (lc->tx_tail - lc->tx_head == DN_TXQ_SLOTS) {
		dn_tx_flush(lc);
		if (lc->tx_tail - lc->tx_head == DN_TXQ_SLOTS) {
			dn_drop(lc, m, DN_DROP_TX_FULL);
			return;
		}
	}
	if (lc->tx_tail == lc->tx_head)
		lc->tx_drain_tsc = rte_rdtsc() + lc->tx_drain_cycles;
	lc->tx[lc->tx_tail++ & (DN_TXQ_SLOTS - 1)] = m;
	if (lc->tx_tail - lc->tx_head >= DN_BURST)
		dn_tx_flush(lc);
}

bool dn_tx_pending(const struct dn_lcore *lc)
{
	return lc->tx_tail != lc->tx_head;
}

void dn_eth_fill(struct dn_lcore *lc, struct rte_mbuf *m, const struct rte_ether_addr *dst,
		 uint16_t ether_type)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);

	rte_ether_addr_copy(dst, &eth->dst_addr);
	rte_ether_addr_copy(&lc->port->mac, &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(ether_type);
	m->l2_len = sizeof(*eth);
}

/* Checksum of an ICMP message that may span segments, starting at offset off. */
static uint16_t icmp_cksum(const struct rte_mbuf *m, uint32_t off, uint32_t len)
{
	uint16_t raw;

	if (rte_raw_cksum_mbuf(m, off, len, &raw) != 0)
		return 0;
	return raw;
}

static void icmp_input(struct dn_lcore *lc, struct rte_mbuf *m, struct rte_ipv4_hdr *ip,
		       uint16_t ihl)
{
	uint32_t icmp_len = rte_be_to_cpu_16(ip->total_length) - ihl;
	uint32_t off = sizeof(struct rte_ether_hdr) + ihl;
	struct rte_icmp_hdr *icmp;

	if (icmp_len < sizeof(*icmp) || rte_pktmbuf_data_len(m) < off + sizeof(*icmp)) {
		dn_drop(lc, m, DN_DROP_ICMP_TRUNC);
		return;
	}
	/* A correct checksum sums (with itself) to all ones. */
	if (icmp_cksum(m, off, icmp_len) != 0xffff) {
		dn_drop(lc, m, DN_DROP_ICMP_CKSUM);
		return;
	}
	icmp = rte_pktmbuf_mtod_offset(m, struct rte_icmp_hdr *, off);
	if (icmp->icmp_type == RTE_IP_ICMP_ECHO_REPLY && lc->echo_fn != NULL) {
		uint8_t buf[64];
		uint32_t plen = icmp_len - sizeof(*icmp);
		const uint8_t *payload = rte_pktmbuf_read(m, off + sizeof(*icmp),
							  plen < sizeof(buf) ? plen : sizeof(buf), buf);

		lc->echo_fn(lc->echo_arg, rte_be_to_cpu_32(ip->src_addr),
			    rte_be_to_cpu_16(icmp->icmp_ident), rte_be_to_cpu_16(icmp->icmp_seq_nb),
			    payload, (uint16_t)(plen < sizeof(buf) ? plen : sizeof(buf)));
		rte_pktmbuf_free(m);
		return;
	}
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0) {
		dn_drop(lc, m, DN_DROP_ICMP_TYPE);
		return;
	}
	/* Turn the request around in place: same payload, addresses swapped. */
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ether_addr peer = eth->src_addr;
	uint32_t a = ip->src_addr;

	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~icmp_cksum(m, off, icmp_len);
	ip->src_addr = ip->dst_addr;
	ip->dst_addr = a;
	ip->time_to_live = DN_TTL;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	dn_eth_fill(lc, m, &peer, RTE_ETHER_TYPE_IPV4);
	m->ol_flags = 0;
	lc->stats.icmp_echo_replies++;
	dn_tx_enqueue(lc, m);
}

/* Drops with the matching reason, or returns the IPv4 header length (>= 20). */
static int ip_check(struct dn_lcore *lc, struct rte_mbuf *m, struct rte_ipv4_hdr *ip)
{
	uint32_t frame = rte_pktmbuf_pkt_len(m) - (uint32_t)sizeof(struct rte_ether_hdr);
	uint32_t first = rte_pktmbuf_data_len(m) - (uint32_t)sizeof(struct rte_ether_hdr);
	uint16_t ihl, tot;
	uint64_t ck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;

	if ((ip->version_ihl >> 4) != 4)
		return -DN_DROP_IP_VERSION;
	ihl = (uint16_t)((ip->version_ihl & 0xf) * 4);
	if (ihl < sizeof(*ip) || ihl > first)
		return -DN_DROP_IP_IHL;
	tot = rte_be_to_cpu_16(ip->total_length);
	if (tot < ihl || tot > frame)
		return -DN_DROP_IP_LEN;
	if (ck == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		return -DN_DROP_IP_CKSUM;
	if (ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD && rte_raw_cksum(ip, ihl) != 0xffff)
		return -DN_DROP_IP_CKSUM;
	if (ip->time_to_live == 0)
		return -DN_DROP_IP_TTL;
	if (rte_be_to_cpu_32(ip->dst_addr) != lc->port->ip)
		return -DN_DROP_IP_DST;
	if (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return -DN_DROP_IP_FRAG;
	/* Ethernet pads short frames: cut the tail so L4 sees exactly total_length. */
	if (tot < frame)
		rte_pktmbuf_trim(m, (uint16_t)(frame - tot));
	return ihl;
}

void dn_ip_input(struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip;
	int ihl;

	if (rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + sizeof(*ip)) {
		dn_drop(lc, m, DN_DROP_IP_TRUNC);
		return;
	}
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
	ihl = ip_check(lc, m, ip);
	if (ihl < 0) {
		dn_drop(lc, m, (enum dn_drop)-ihl);
		return;
	}
	if (ip->next_proto_id == IPPROTO_ICMP) {
		icmp_input(lc, m, ip, (uint16_t)ihl);
		return;
	}
	if (lc->hooks.l4_input == NULL) {
		dn_drop(lc, m, DN_DROP_IP_PROTO);
		return;
	}
	m->l2_len = sizeof(struct rte_ether_hdr);
	m->l3_len = (uint16_t)ihl;
	rte_pktmbuf_adj(m, sizeof(struct rte_ether_hdr));
	lc->hooks.l4_input(lc->hooks.arg, lc, m);
}

static void eth_input(struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth;
	uint16_t type;

	lc->stats.rx_pkts++;
	lc->stats.rx_bytes += rte_pktmbuf_pkt_len(m);
	if (rte_pktmbuf_data_len(m) < sizeof(*eth)) {
		dn_drop(lc, m, DN_DROP_ETH_TRUNC);
		return;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (!rte_is_same_ether_addr(&eth->dst_addr, &lc->port->mac) &&
	    !rte_is_broadcast_ether_addr(&eth->dst_addr)) {
		dn_drop(lc, m, DN_DROP_ETH_DST);
		return;
	}
	type = rte_be_to_cpu_16(eth->ether_type);
	if (type == RTE_ETHER_TYPE_IPV4)
		dn_ip_input(lc, m);
	else if (type == RTE_ETHER_TYPE_ARP)
		dn_arp_input(lc, m);
	else
		dn_drop(lc, m, DN_DROP_ETH_TYPE);
}

void dn_input_burst(struct dn_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		eth_input(lc, pkts[i]);
	}
}

/*
 * Ones'-complement sum of len bytes, folded to 16 bits, in the same (native) byte order as
 * rte_raw_cksum. DPDK 22.11's adds 16 bits at a time; this adds each 64-bit load's two
 * 32-bit halves into 64-bit accumulators (a 32-bit word is congruent to the sum of its two
 * 16-bit halves modulo 0xffff), four loads per round: about 4x fewer operations per byte,
 * and the checksum was the biggest single cost of a full-sized segment.
 */
uint16_t dn_raw_cksum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, w0, w1, w2, w3;
	uint32_t w;
	uint16_t h = 0;

	for (; len >= 32; p += 32, len -= 32) {
		memcpy(&w0, p, 8);
		memcpy(&w1, p + 8, 8);
		memcpy(&w2, p + 16, 8);
		memcpy(&w3, p + 24, 8);
		s0 += (w0 & 0xffffffffu) + (w0 >> 32);
		s1 += (w1 & 0xffffffffu) + (w1 >> 32);
		s2 += (w2 & 0xffffffffu) + (w2 >> 32);
		s3 += (w3 & 0xffffffffu) + (w3 >> 32);
	}
	for (; len >= 4; p += 4, len -= 4) {
		memcpy(&w, p, 4);
		s0 += w;
	}
	if (len >= 2) {
		memcpy(&h, p, 2);
		s1 += h;
		p += 2;
		len -= 2;
	}
	if (len == 1) { /* the odd byte is the first of a 16-bit word, zero-padded */
		h = 0;
		memcpy(&h, p, 1);
		s2 += h;
	}
	s0 += s1 + s2 + s3; /* each grows < 2^33 per 32 bytes: no overflow below 2^35 bytes */
	s0 = (s0 & 0xffffffffu) + (s0 >> 32);
	s0 = (s0 & 0xffffffffu) + (s0 >> 32);
	s0 = (s0 & 0xffff) + (s0 >> 16);
	s0 = (s0 & 0xffff) + (s0 >> 16);
	s0 = (s0 & 0xffff) + (s0 >> 16);
	return (uint16_t)s0;
}

/*
 * The TCP/UDP checksum over an mbuf chain in software. Written here rather than taken from
 * rte_ipv4_udptcp_cksum_mbuf: in DPDK 22.11 its helper truncates a segment's partial sum
 * to 16 bits before byte-swapping it for a segment that starts at an odd offset, so chains
 * with odd-length pieces (small tensors) left with wrong checksums. Each piece's sum is
 * folded first, then swapped when the piece starts at an odd byte of the L4 data.
 */
uint16_t dn_l4_cksum_sw(const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip, uint32_t l4_off)
{
	uint32_t sum = rte_ipv4_phdr_cksum(ip, 0), done = 0;
	uint32_t l4_len = rte_pktmbuf_pkt_len(m) - l4_off;

	for (const struct rte_mbuf *s = m; s != NULL && done < l4_len; s = s->next) {
		uint32_t off = 0, n = rte_pktmbuf_data_len(s);
		uint16_t part;

		if (l4_off >= n) {
			l4_off -= n;
			continue;
		}
		off = l4_off;
		l4_off = 0;
		n -= off;
		if (n > l4_len - done)
			n = l4_len - done;
		part = dn_raw_cksum(rte_pktmbuf_mtod_offset(s, const void *, off), n);
		if (done & 1)
			part = (uint16_t)(part << 8 | part >> 8);
		sum += part;
		done += n;
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

bool dn_l4_cksum_ok(const struct rte_ipv4_hdr *ip, const void *l4, uint32_t l4_len)
{
	uint32_t sum = (uint32_t)rte_ipv4_phdr_cksum(ip, 0) + dn_raw_cksum(l4, l4_len);

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* Fills the L4 checksum: the device does it from the pseudo-header sum, or we do it here. */
static void l4_csum(struct dn_lcore *lc, struct rte_mbuf *m, struct rte_ipv4_hdr *ip,
		    uint8_t proto)
{
	uint16_t *field;
	uint16_t l4_off = (uint16_t)(m->l2_len + m->l3_len);

	if (proto == IPPROTO_TCP)
		field = rte_pktmbuf_mtod_offset(m, uint16_t *, l4_off + 16);
	else if (proto == IPPROTO_UDP)
		field = rte_pktmbuf_mtod_offset(m, uint16_t *, l4_off + 6);
	else
		return;
	if ((lc->port->tx_l4_csum || (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)) && proto == IPPROTO_TCP) {
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM;
		*field = rte_ipv4_phdr_cksum(ip, m->ol_flags);
		return;
	}
	*field = 0;
	*field = dn_l4_cksum_sw(m, ip, l4_off);
	if (*field == 0 && proto == IPPROTO_UDP)
		*field = 0xffff;
}

/*
 * m's bytes in one buffer, its Tx metadata kept: in place where its first buffer has the
 * room, else in a new one (m freed, attached payload released). NULL, m untouched, when no
 * buffer holds it.
 */
static struct rte_mbuf *tx_flatten(struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct rte_mbuf *c;

	if (rte_pktmbuf_linearize(m) == 0)
		return m;
	c = rte_pktmbuf_alloc(lc->pool);
	if (c == NULL || rte_pktmbuf_tailroom(c) < rte_pktmbuf_pkt_len(m)) {
		rte_pktmbuf_free(c);
		return NULL;
	}
	for (const struct rte_mbuf *s = m; s != NULL; s = s->next)
		memcpy(rte_pktmbuf_append(c, rte_pktmbuf_data_len(s)),
		       rte_pktmbuf_mtod(s, const void *), rte_pktmbuf_data_len(s));
	c->ol_flags = m->ol_flags & RTE_MBUF_F_TX_OFFLOAD_MASK;
	c->tx_offload = m->tx_offload;
	rte_pktmbuf_free(m);
	return c;
}

/*
 * Makes *mp a frame the device takes (rte_eth_tx_prepare: its segment count, offload flags):
 * a chain over tx_seg_max, or one it refuses, is flattened once. False when it still is not
 * (*mp is then the caller's to drop).
 */
static bool tx_fit(struct dn_lcore *lc, struct rte_mbuf **mp)
{
	const struct dn_port *p = lc->port;
	struct rte_mbuf *m = *mp;

	if (unlikely(m->nb_segs > p->tx_seg_max) && !(m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)) {
		if ((m = tx_flatten(lc, m)) == NULL)
			return false;
		*mp = m;
	}
	if (!p->tx_prepare || rte_eth_tx_prepare(lc->port_id, lc->queue, mp, 1) == 1)
		return true;
	if (m->nb_segs == 1 || (m = tx_flatten(lc, m)) == NULL)
		return false;
	*mp = m;
	return rte_eth_tx_prepare(lc->port_id, lc->queue, mp, 1) == 1;
}

int dn_ip_send(struct dn_lcore *lc, struct rte_mbuf *m, uint32_t dst_ip, uint8_t proto,
	       uint32_t flags)
{
	struct dn_port *p = lc->port;
	struct rte_ether_addr mac;
	struct rte_ipv4_hdr *ip;
	uint32_t next_hop = dst_ip;
	uint32_t l4_len = rte_pktmbuf_pkt_len(m);

	if (!dn_on_link(p, dst_ip)) {
		if (p->gateway == 0) {
			dn_drop(lc, m, DN_DROP_NO_ROUTE);
			return -ENETUNREACH;
		}
		next_hop = p->gateway;
	}
	if ((flags & DN_TX_TSO) && (!p->tso || proto != IPPROTO_TCP || l4_len + sizeof(*ip) > 65535u)) {
		dn_drop(lc, m, DN_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (l4_len + sizeof(*ip) > p->cfg.mtu && !(flags & DN_TX_TSO)) {
		/* DF is always set and we never fragment: the device would refuse it for good. */
		dn_drop(lc, m, DN_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	ip = (struct rte_ipv4_hdr *)rte_pktmbuf_prepend(m, sizeof(*ip));
	if (ip == NULL || rte_pktmbuf_prepend(m, sizeof(struct rte_ether_hdr)) == NULL) {
		dn_drop(lc, m, DN_DROP_NO_MBUF);
		return -ENOSPC;
	}
	/*
	 * The header checksum is summed from the field values (host order, 16-bit words), not
	 * read back from memory: loading the header right after writing it field by field
	 * stalled on store forwarding (~8% of a stream).
	 */
	uint8_t tos = (flags & DN_TX_ECT0) ? 0x02 : 0;
	uint16_t tot = (uint16_t)(l4_len + sizeof(*ip)), id = lc->ip_id++;
	uint32_t sum = (uint32_t)(RTE_IPV4_VHL_DEF << 8 | tos) + tot + id + RTE_IPV4_HDR_DF_FLAG +
		       (uint32_t)(DN_TTL << 8 | proto) + (p->ip >> 16) + (p->ip & 0xffff) +
		       (dst_ip >> 16) + (dst_ip & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	struct rte_ipv4_hdr h = {
		.version_ihl = RTE_IPV4_VHL_DEF,
		.type_of_service = tos,
		.total_length = rte_cpu_to_be_16(tot),
		.packet_id = rte_cpu_to_be_16(id),
		.fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG),
		.time_to_live = DN_TTL,
		.next_proto_id = proto,
		.src_addr = rte_cpu_to_be_32(p->ip),
		.dst_addr = rte_cpu_to_be_32(dst_ip),
	};
	m->l2_len = sizeof(struct rte_ether_hdr);
	m->l3_len = sizeof(*ip);
	m->ol_flags &= ~(RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IPV4 |
			 RTE_MBUF_F_TX_TCP_SEG);
	if (flags & DN_TX_TSO) /* before l4_csum: the pseudo-header sum then leaves the length out */
		m->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
	if (p->tx_ip_csum)
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
	else
		h.hdr_checksum = rte_cpu_to_be_16((uint16_t)~sum);
	memcpy(ip, &h, sizeof(h));
	if (flags & DN_TX_L4_CSUM)
		l4_csum(lc, m, ip, proto);
	if (unlikely(!tx_fit(lc, &m))) {
		dn_drop(lc, m, DN_DROP_TX_REFUSED);
		return -EINVAL;
	}
	if (dn_arp_lookup(p, next_hop, &mac) != 0)
		return dn_arp_pending_add(lc, m, next_hop);
	dn_eth_fill(lc, m, &mac, RTE_ETHER_TYPE_IPV4);
	dn_tx_enqueue(lc, m);
	return 0;
}

int dn_icmp_echo_send(struct dn_lcore *lc, uint32_t dst_ip, uint16_t id, uint16_t seq,
		      uint16_t payload_len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(lc->pool);
	struct rte_icmp_hdr *icmp;
	uint8_t *payload;

	if (m == NULL) {
		lc->stats.drops[DN_DROP_NO_MBUF]++;
		return -ENOBUFS;
	}
	icmp = (struct rte_icmp_hdr *)rte_pktmbuf_append(m, (uint16_t)(sizeof(*icmp) + payload_len));
	if (icmp == NULL) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
	icmp->icmp_code = 0;
	icmp->icmp_ident = rte_cpu_to_be_16(id);
	icmp->icmp_seq_nb = rte_cpu_to_be_16(seq);
	payload = (uint8_t *)(icmp + 1);
	for (uint16_t i = 0; i < payload_len; i++)
		payload[i] = (uint8_t)(0x10 + i);
	/* The send timestamp rides in the payload so a reply is timed without a lookup. */
	if (payload_len >= sizeof(uint64_t)) {
		uint64_t tsc = rte_rdtsc();
		memcpy(payload, &tsc, sizeof(tsc));
	}
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, sizeof(*icmp) + payload_len);
	return dn_ip_send(lc, m, dst_ip, IPPROTO_ICMP, 0);
}
