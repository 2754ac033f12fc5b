/*
 * dn_arp.c — ARP (RFC 826) for one IPv4 address on one port.
 *
 * In:  dn_input_burst -> eth_input -> dn_arp_input -> learn sender, answer requests for us
 * Out: dn_ip_send -> dn_arp_lookup (hit) | dn_arp_pending_add -> dn_arp_request
 *      dn_loop_once -> dn_arp_pending_run (send what got resolved, retry, give up)
 *
 * The table is written only by lcore 0, which flow steering hands every ARP frame whatever
 * queue it came in on, and read by all (the other lcores resolve here too; their requests
 * leave through lcore 0 on a one-queue port, through their own queue otherwise, and the
 * replies reach lcore 0);
 * see struct dn_arp_entry for the publication protocol. Entries expire DN_ARP_EXPIRE_MS
 * after they were last confirmed; an expired entry reads as a miss and is asked again.
 */
#include <errno.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_cycles.h>

#include "dpdk_net/dn_pvt.h"

static inline uint32_t arp_slot(uint32_t ip)
{
	/* Fibonacci hashing spreads consecutive host numbers across the table. */
	return (uint32_t)((ip * 2654435761u) >> 24) & (DN_ARP_SLOTS - 1);
}

static inline uint64_t mac_pack(const struct rte_ether_addr *mac)
{
	uint64_t w = 0;

	memcpy(&w, mac->addr_bytes, RTE_ETHER_ADDR_LEN);
	return w | DN_ARP_VALID;
}

int dn_arp_lookup(struct dn_port *p, uint32_t ip, struct rte_ether_addr *mac)
{
	uint32_t s = arp_slot(ip);
	uint64_t now = rte_rdtsc();

	for (uint32_t i = 0; i < DN_ARP_SLOTS; i++, s = (s + 1) & (DN_ARP_SLOTS - 1)) {
		struct dn_arp_entry *e = &p->arp[s];
		/* acquire: pairs with the writer's release store in dn_arp_learn. */
		uint64_t w = atomic_load_explicit(&e->word, memory_order_acquire);
		uint32_t eip = atomic_load_explicit(&e->ip, memory_order_relaxed);
		uint64_t exp = atomic_load_explicit(&e->expire_tsc, memory_order_relaxed);

		if (w == 0 && eip == 0)
			return -ENOENT; /* never-used slot ends the probe sequence */
		if (eip != ip)
			continue;
		/* acquire: re-read; an unchanged word means eip and the MAC were published together. */
		if (!(w & DN_ARP_VALID) || atomic_load_explicit(&e->word, memory_order_acquire) != w)
			return -ENOENT;
		if (now > exp)
			return -ENOENT;
		memcpy(mac->addr_bytes, &w, RTE_ETHER_ADDR_LEN);
		return 0;
	}
	return -ENOENT;
}

void dn_arp_learn(struct dn_port *p, uint32_t ip, const struct rte_ether_addr *mac, bool create)
{
	uint32_t s = arp_slot(ip), victim = DN_ARP_SLOTS;
	uint64_t now = rte_rdtsc(), oldest = UINT64_MAX;
	uint64_t exp = now + rte_get_tsc_hz() / 1000 * DN_ARP_EXPIRE_MS;

	if (ip == 0 || !dn_on_link(p, ip) || ip == p->ip)
		return;
	for (uint32_t i = 0; i < DN_ARP_SLOTS; i++, s = (s + 1) & (DN_ARP_SLOTS - 1)) {
		struct dn_arp_entry *e = &p->arp[s];
		uint32_t eip = atomic_load_explicit(&e->ip, memory_order_relaxed);
		uint64_t eexp = atomic_load_explicit(&e->expire_tsc, memory_order_relaxed);

		if (eip == ip) {
			victim = s;
			break;
		}
		if (eip == 0) {
			if (victim == DN_ARP_SLOTS)
				victim = s;
			break;
		}
		if (eexp < oldest) {
			oldest = eexp;
			if (eexp < now)
				victim = s; /* reuse an expired slot rather than growing the chain */
		}
	}
	if (victim == DN_ARP_SLOTS || (!create && atomic_load_explicit(&p->arp[victim].ip,
					memory_order_relaxed) != ip))
		return;
	struct dn_arp_entry *e = &p->arp[victim];
	/* release: readers that see the cleared word do not trust ip/expiry until republished. */
	atomic_store_explicit(&e->word, 0, memory_order_release);
	atomic_store_explicit(&e->ip, ip, memory_order_relaxed);
	atomic_store_explicit(&e->expire_tsc, exp, memory_order_relaxed);
	/* release: pairs with the acquire loads in dn_arp_lookup. */
	atomic_store_explicit(&e->word, mac_pack(mac), memory_order_release);
}

/* Builds an ARP frame; op, target MAC/IP given, sender is us. */
static struct rte_mbuf *arp_build(struct dn_lcore *lc, uint16_t op,
				  const struct rte_ether_addr *eth_dst,
				  const struct rte_ether_addr *tha, uint32_t tip)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(lc->pool);
	struct rte_arp_hdr *a;

	if (m == NULL) {
		lc->stats.drops[DN_DROP_NO_MBUF]++;
		return NULL;
	}
	if (rte_pktmbuf_append(m, sizeof(struct rte_ether_hdr) + sizeof(*a)) == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	dn_eth_fill(lc, m, eth_dst, RTE_ETHER_TYPE_ARP);
	a = rte_pktmbuf_mtod_offset(m, struct rte_arp_hdr *, sizeof(struct rte_ether_hdr));
	a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = RTE_ETHER_ADDR_LEN;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(op);
	rte_ether_addr_copy(&lc->port->mac, &a->arp_data.arp_sha);
	a->arp_data.arp_sip = rte_cpu_to_be_32(lc->port->ip);
	rte_ether_addr_copy(tha, &a->arp_data.arp_tha);
	a->arp_data.arp_tip = rte_cpu_to_be_32(tip);
	return m;
}

int dn_arp_request(struct dn_lcore *lc, uint32_t ip)
{
	static const struct rte_ether_addr bcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
	static const struct rte_ether_addr zero = {{0}};
	struct rte_mbuf *m = arp_build(lc, RTE_ARP_OP_REQUEST, &bcast, &zero, ip);

	if (m == NULL)
		return -ENOBUFS;
	lc->stats.arp_requests_out++;
	dn_tx_enqueue(lc, m);
	return 0;
}

int dn_arp_announce(struct dn_lcore *lc)
{
	/* Gratuitous ARP: a request for our own address, so every cache refreshes us. */
	return dn_arp_request(lc, lc->port->ip);
}

void dn_arp_input(struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct dn_port *p = lc->port;
	struct rte_arp_hdr *a;
	uint32_t sip, tip;
	uint16_t op;
	bool for_us;

	if (rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + sizeof(*a)) {
		dn_drop(lc, m, DN_DROP_ARP_MALFORMED);
		return;
	}
	a = rte_pktmbuf_mtod_offset(m, struct rte_arp_hdr *, sizeof(struct rte_ether_hdr));
	op = rte_be_to_cpu_16(a->arp_opcode);
	if (a->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    a->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    a->arp_hlen != RTE_ETHER_ADDR_LEN || a->arp_plen != 4 ||
	    (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY) ||
	    !rte_is_unicast_ether_addr(&a->arp_data.arp_sha)) {
		dn_drop(lc, m, DN_DROP_ARP_MALFORMED);
		return;
	}
	sip = rte_be_to_cpu_32(a->arp_data.arp_sip);
	tip = rte_be_to_cpu_32(a->arp_data.arp_tip);
	for_us = tip == p->ip;
	/*
	 * RFC 826 merge: refresh a known sender always; create an entry only when it talks to us.
	 * The table has one writer, lcore 0 (where flow steering hands every non-IP frame); an
	 * ARP frame elsewhere (lcores of a port without steering) is answered, never learnt from.
	 */
	if (lc->index == 0)
		dn_arp_learn(p, sip, &a->arp_data.arp_sha, for_us);
	if (op == RTE_ARP_OP_REPLY || (sip == tip && sip != 0)) {
		/* A reply, or someone's gratuitous announcement: learning was the whole job. */
		rte_pktmbuf_free(m);
		return;
	}
	if (!for_us) {
		dn_drop(lc, m, DN_DROP_ARP_NOT_US);
		return;
	}
	/* Answer in place. */
	struct rte_ether_addr peer = a->arp_data.arp_sha;

	a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	rte_ether_addr_copy(&peer, &a->arp_data.arp_tha);
	a->arp_data.arp_tip = a->arp_data.arp_sip;
	rte_ether_addr_copy(&p->mac, &a->arp_data.arp_sha);
	a->arp_data.arp_sip = rte_cpu_to_be_32(p->ip);
	dn_eth_fill(lc, m, &peer, RTE_ETHER_TYPE_ARP);
	m->ol_flags = 0;
	lc->stats.arp_replies_out++;
	dn_tx_enqueue(lc, m);
}

int dn_arp_pending_add(struct dn_lcore *lc, struct rte_mbuf *m, uint32_t next_hop)
{
	uint64_t now = rte_rdtsc();
	bool asked = false;

	if (lc->n_pending == DN_PENDING_MAX) {
		dn_drop(lc, m, DN_DROP_ARP_PENDING_FULL);
		return -ENOBUFS;
	}
	for (unsigned i = 0; i < lc->n_pending; i++)
		asked |= lc->pending[i].next_hop == next_hop;
	lc->pending[lc->n_pending++] = (struct dn_pending){m, next_hop, now};
	if (!asked) {
		dn_arp_request(lc, next_hop);
		lc->last_arp_req_tsc = now;
	}
	return -EAGAIN;
}

void dn_arp_pending_run(struct dn_lcore *lc, uint64_t now)
{
	uint64_t ms = rte_get_tsc_hz() / 1000;
	bool retry = now - lc->last_arp_req_tsc > DN_ARP_RETRY_MS * ms;
	unsigned kept = 0;

	for (unsigned i = 0; i < lc->n_pending; i++) {
		struct dn_pending *pd = &lc->pending[i];
		struct rte_ether_addr mac;

		if (dn_arp_lookup(lc->port, pd->next_hop, &mac) == 0) {
			dn_eth_fill(lc, pd->m, &mac, RTE_ETHER_TYPE_IPV4);
			dn_tx_enqueue(lc, pd->m);
			continue;
		}
		if (now - pd->since_tsc > DN_ARP_GIVEUP_MS * ms) {
			dn_drop(lc, pd->m, DN_DROP_ARP_TIMEOUT);
			continue;
		}
		if (retry) {
			bool dup = false;
			for (unsigned j = 0; j < kept; j++)
				dup |= lc->pending[j].next_hop == pd->next_hop;
			if (!dup)
				dn_arp_request(lc, pd->next_hop);
		}
		lc->pending[kept++] = *pd;
	}
	if (retry)
		lc->last_arp_req_tsc = now;
	lc->n_pending = kept;
}
