/*
 * dn_steer.c — flow steering among the lcores that share a port: each TCP/UDP frame is
 * processed by the lcore that owns its flow (hooks.steer, installed by the upper layer,
 * which knows how it chose its ports), whatever queue the device put it on.
 *
 * One queue (virtio-user, net_vhost and net_tap here by default, nb_lcores > nb_queues == 1):
 * lcore 0 reads the queue (and a virtio device's extra ones, dn_rx_burst) and hands each
 * frame it does not own to its owner over an SPSC rte_ring; that lcore runs the frame through its own eth/ip input and everything above,
 * exactly as if it had read it from a queue.
 *
 * A queue per lcore (nb_queues == nb_lcores > 1: a multi-queue NIC, net_tap, virtio-user and
 * net_vhost with queues=N): every lcore reads its own queue and sends on its own queue. The
 * device decides where a frame lands (RSS, a tap's flow table, the peer's Tx queue), and
 * its choice need not match the owner: a frame another lcore owns goes to that lcore's ring
 * (MP/SC, any lcore may produce), a frame with no flow (ARP, ICMP, fragments) to lcore 0's.
 * Where the device's hash is known (RSS with our key), active opens pick ports it lands on
 * their own queue (tl_be_dpdk); a local port one lcore claims (a PS lane's listening port)
 * gets a flow rule sending its TCP segments to that lcore's queue where the device takes
 * one (rte_flow: NICs; not virtio or net_tap here). Only frames the device misplaces cross.
 *
 * Call chain (one queue):
 *   lcore 0:  dn_loop_once -> dn_steer_rx -> relay (steer_tx -> software Tx queue)
 *             -> rte_eth_rx_burst -> dn_steer_classify -> hooks.steer -> steer_rx[i]
 *             -> (own frames) dn_input_burst
 *   lcore i:  dn_loop_once -> dn_steer_rx -> rte_ring_sc_dequeue_burst -> dn_input_burst
 *             ... dn_ip_send -> dn_tx_enqueue -> dn_tx_flush -> dn_steer_tx_flush
 *             -> rte_ring_mp_enqueue_burst(steer_tx) -> (lcore 0 relays it)
 * Call chain (a queue per lcore), every lcore i:
 *   dn_loop_once -> dn_steer_rx -> steer_rx[i] (frames others handed us)
 *   -> rte_eth_rx_burst(queue i) -> dn_steer_classify -> steer_rx[owner] -> dn_input_burst;
 *   Tx: dn_tx_flush -> rte_eth_tx_burst(queue i).
 *
 * Tx with one queue: other lcores never call rte_eth_tx_burst on the device's one Tx queue;
 * they hand frames to lcore 0 over one MP/SC ring. A Tx queue per lcore beside one Rx queue
 * would need the peer to serve N queues: the testbed's vswitch serves one, and a frame put
 * on a queue nobody polls is lost. The ring works with every one-queue device and costs
 * lcore 0 one dequeue per burst.
 *
 * Sleeping: an idle lcore sleeps in its thread's epoll set, where it registered an eventfd
 * (and the Rx interrupt of the queue it reads). Whoever fills a ring it reads wakes it
 * (struct dn_wake): a syscall per sleep, never per packet.
 *
 * ARP: only lcore 0 processes non-TCP/UDP frames, so it stays the ARP table's one writer;
 * the others resolve through the lock-free reads of dn_arp_lookup and send their requests
 * like any frame (dn_arp.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "dpdk_net/dn_pvt.h"

#define DN_STEER_SHARED 0xffu /* lport_owner: claimed by more than one lcore */

#define DN_STEER_RELAY_BURSTS 4 /* bursts of others' Tx lcore 0 takes per loop turn */

bool dn_steer_flow_parse(const uint8_t *b, uint32_t len, uint32_t our_ip, struct dn_flow *f)
{
	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)b;
	const struct rte_ipv4_hdr *ip;
	uint32_t ihl;
	const uint8_t *l4;

	if (len < sizeof(*eth) + sizeof(*ip) || eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return false;
	ip = (const struct rte_ipv4_hdr *)(b + sizeof(*eth));
	ihl = (uint32_t)(ip->version_ihl & 0xf) * 4u;
	if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) || len < sizeof(*eth) + ihl + 4u)
		return false;
	if (ip->next_proto_id != IPPROTO_TCP && ip->next_proto_id != IPPROTO_UDP)
		return false;
	/* A fragment's ports are not where they seem: lcore 0 drops it (IP_FRAG) itself. */
	if (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return false;
	if (rte_be_to_cpu_32(ip->dst_addr) != our_ip)
		return false;
	l4 = b + sizeof(*eth) + ihl;
	f->saddr = rte_be_to_cpu_32(ip->src_addr);
	f->daddr = our_ip;
	f->sport = (uint16_t)(l4[0] << 8 | l4[1]);
	f->dport = (uint16_t)(l4[2] << 8 | l4[3]);
	f->proto = ip->next_proto_id;
	return true;
}

/* ---- set-up -------------------------------------------------------------------------- */

int dn_steer_port_init(struct dn_port *p, char *err, size_t errlen)
{
	char name[RTE_RING_NAMESIZE];
	int socket = (int)rte_socket_id();

	if (p->nb_lcores > DN_MAX_LCORES || (p->nb_queues != 1 && p->nb_queues != p->nb_lcores)) {
		snprintf(err, errlen, "flow steering: %u lcores on %u queues (wants 1 queue or one "
			 "per lcore, at most %d lcores)", p->nb_lcores, p->nb_queues, DN_MAX_LCORES);
		return -EINVAL;
	}
	p->mq = p->nb_queues > 1;
	/* One queue: lcore 0 alone hands frames to i. A queue each: every lcore may, to any. */
	for (uint16_t i = p->mq ? 0 : 1; i < p->nb_lcores; i++) {
		snprintf(name, sizeof(name), "dn_srx_%u_%u", p->port_id, i);
		p->steer_rx[i] = rte_ring_create(name, DN_STEER_RX_RING, socket,
						 p->mq ? RING_F_SC_DEQ : RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (p->steer_rx[i] == NULL)
			goto out_ring;
	}
	if (!p->mq) {
		snprintf(name, sizeof(name), "dn_stx_%u", p->port_id);
		p->steer_tx = rte_ring_create(name, DN_STEER_TX_RING, socket, RING_F_SC_DEQ);
		if (p->steer_tx == NULL)
			goto out_ring;
	}
	p->lport_owner = rte_zmalloc_socket("dn_lport_owner", 65536, RTE_CACHE_LINE_SIZE, socket);
	p->lport_claims = rte_zmalloc_socket("dn_lport_claims", 65536, RTE_CACHE_LINE_SIZE, socket);
	if (p->mq) /* a flow rule per claimed port, where the device takes them */
		p->lport_rule = rte_zmalloc_socket("dn_lport_rule", 65536 * sizeof(*p->lport_rule),
						   RTE_CACHE_LINE_SIZE, socket);
	if (p->lport_owner == NULL || p->lport_claims == NULL || (p->mq && p->lport_rule == NULL)) {
		snprintf(err, errlen, "flow steering: no memory for the port claim table");
		return -ENOMEM;
	}
	rte_spinlock_init(&p->claim_lock);
	p->sw_steer = true;
	return 0;
out_ring:
	snprintf(err, errlen, "flow steering: ring %s: %s", name, rte_strerror(rte_errno));
	return -ENOMEM;
}

static void ring_drain(struct rte_ring *r)
{
	struct rte_mbuf *m[DN_BURST];
	unsigned n;

	if (r == NULL)
		return;
	while ((n = rte_ring_dequeue_burst(r, (void **)m, DN_BURST, NULL)) > 0)
		rte_pktmbuf_free_bulk(m, n);
}

static void ring_free_all(struct rte_ring *r)
{
	ring_drain(r);
	rte_ring_free(r);
}

void dn_steer_port_drain(struct dn_port *p)
{
	for (uint16_t i = 0; i < DN_MAX_LCORES; i++)
		ring_drain(p->steer_rx[i]);
	ring_drain(p->steer_tx);
}

static void claim_rule_drop(struct dn_port *p, uint16_t lport);

/* Called with every lcore stopped: frames still in the rings are freed. */
void dn_steer_port_fini(struct dn_port *p)
{
	for (uint16_t i = 0; i < DN_MAX_LCORES; i++) {
		ring_free_all(p->steer_rx[i]);
		p->steer_rx[i] = NULL;
	}
	ring_free_all(p->steer_tx);
	p->steer_tx = NULL;
	rte_free((void *)p->lport_owner);
	if (p->lport_rule != NULL) /* before the device closes: dn_port_destroy calls us first */
		for (uint32_t l = 0; l < 65536; l++)
			claim_rule_drop(p, (uint16_t)l);
	rte_free(p->lport_rule);
	p->lport_rule = NULL;
	rte_free(p->lport_claims);
	p->lport_owner = NULL;
	p->lport_claims = NULL;
	p->sw_steer = false;
	p->mq = false;
}

/* ---- port claims ------------------------------------------------------------------------ */

/*
 * A queue each: asks the device to deliver TCP segments to our address and local port lport
 * on queue q (rte_flow), so they need no hand-over. NULL where the device takes no such rule.
 */
static struct rte_flow *claim_rule(struct dn_port *p, uint16_t lport, uint16_t q)
{
	struct rte_flow_attr attr = {.ingress = 1};
	struct rte_flow_item_ipv4 ip = {.hdr.dst_addr = rte_cpu_to_be_32(p->ip),
					.hdr.next_proto_id = IPPROTO_TCP};
	struct rte_flow_item_ipv4 ip_mask = {.hdr.dst_addr = RTE_BE32(0xffffffff),
					     .hdr.next_proto_id = 0xff};
	struct rte_flow_item_tcp tcp = {.hdr.dst_port = rte_cpu_to_be_16(lport)};
	struct rte_flow_item_tcp tcp_mask = {.hdr.dst_port = RTE_BE16(0xffff)};
	struct rte_flow_item pattern[] = {
		{.type = RTE_FLOW_ITEM_TYPE_ETH},
		{.type = RTE_FLOW_ITEM_TYPE_IPV4, .spec = &ip, .mask = &ip_mask},
		{.type = RTE_FLOW_ITEM_TYPE_TCP, .spec = &tcp, .mask = &tcp_mask},
		{.type = RTE_FLOW_ITEM_TYPE_END},
	};
	struct rte_flow_action_queue queue = {.index = q};
	struct rte_flow_action actions[] = {
		{.type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &queue},
		{.type = RTE_FLOW_ACTION_TYPE_END},
	};
	struct rte_flow_error error = {0};
	struct rte_flow *f = NULL;

	if (!p->mq || p->ip == 0)
		return NULL;
	if (rte_flow_validate(p->port_id, &attr, pattern, actions, &error) == 0)
		f = rte_flow_create(p->port_id, &attr, pattern, actions, &error);
	if (f != NULL)
		DN_LOG(INFO, "port %u: TCP port %u goes to queue %u by a flow rule", p->port_id,
		       lport, q);
	else
		DN_LOG(DEBUG, "port %u: no flow rule for TCP port %u (%s): the claim table steers it",
		       p->port_id, lport, error.message != NULL ? error.message : "refused");
	return f;
}

static void claim_rule_drop(struct dn_port *p, uint16_t lport)
{
	struct rte_flow_error error;

	if (p->lport_rule == NULL || p->lport_rule[lport] == NULL)
		return;
	(void)rte_flow_destroy(p->port_id, p->lport_rule[lport], &error);
	p->lport_rule[lport] = NULL;
}

int dn_steer_claim(struct dn_port *p, uint16_t lport, uint16_t index)
{
	uint8_t mine = (uint8_t)(index + 1u), cur;

	if (!p->sw_steer || index >= p->nb_lcores)
		return -EINVAL;
	rte_spinlock_lock(&p->claim_lock);
	cur = atomic_load_explicit(&p->lport_owner[lport], memory_order_relaxed);
	if (p->lport_claims[lport] == 0)
		cur = mine;
	else if (cur != mine)
		cur = DN_STEER_SHARED;
	atomic_store_explicit(&p->lport_owner[lport], cur, memory_order_relaxed);
	/* Control path, a few times per process: the device call under the lock is fine. */
	if (p->lport_rule != NULL) {
		if (p->lport_claims[lport] == 0)
			p->lport_rule[lport] = claim_rule(p, lport, index);
		else if (cur == DN_STEER_SHARED)
			claim_rule_drop(p, lport); /* shared: the device's own spreading decides */
	}
	if (p->lport_claims[lport] < UINT8_MAX)
		p->lport_claims[lport]++;
	rte_spinlock_unlock(&p->claim_lock);
	return 0;
}

void dn_steer_unclaim(struct dn_port *p, uint16_t lport, uint16_t index)
{
	if (!p->sw_steer || index >= p->nb_lcores)
		return;
	rte_spinlock_lock(&p->claim_lock);
	if (p->lport_claims[lport] > 0 && --p->lport_claims[lport] == 0) {
		atomic_store_explicit(&p->lport_owner[lport], 0, memory_order_relaxed);
		claim_rule_drop(p, lport);
	}
	rte_spinlock_unlock(&p->claim_lock);
}

bool dn_steer_rule(const struct dn_port *p, uint16_t lport)
{
	return p->lport_rule != NULL && p->lport_rule[lport] != NULL;
}

int dn_steer_owner(const struct dn_port *p, uint16_t lport)
{
	uint8_t o;

	if (p->lport_owner == NULL)
		return -1;
	o = atomic_load_explicit(&p->lport_owner[lport], memory_order_relaxed);
	return o == 0 || o == DN_STEER_SHARED ? -1 : (int)o - 1;
}

/* Epoll callback (runs inside rte_epoll_wait): empty the eventfd so it can fire again. */
static void efd_clear(int fd, void *arg)
{
	uint64_t v;

	(void)arg;
	if (read(fd, &v, sizeof(v)) < 0)
		return; /* EAGAIN: another wake-up already emptied it */
}

void dn_steer_lcore_init(struct dn_lcore *lc)
{
	struct dn_port *p = lc->port;

	lc->steer = true;
	if (p->mq) {
		lc->rx_ring = p->steer_rx[lc->index]; /* sends on its own queue: no tx_ring */
		return;
	}
	if (lc->index > 0) {
		lc->rx_ring = p->steer_rx[lc->index];
		lc->tx_ring = p->steer_tx;
		lc->tx_cleanup_ok = false; /* the device queue is lcore 0's */
	}
}

/* ---- wake-up eventfds (every port, steered or not) ------------------------------------ */

int dn_wake_port_init(struct dn_port *p, char *err, size_t errlen)
{
	for (uint16_t i = 0; i < DN_MAX_LCORES; i++)
		p->wake[i].efd = -1; /* dn_wake_port_fini closes only what was opened */
	for (uint16_t i = 0; i < p->nb_lcores && i < DN_MAX_LCORES; i++) {
		p->wake[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (p->wake[i].efd < 0) {
			snprintf(err, errlen, "wake-up eventfd: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

void dn_wake_port_fini(struct dn_port *p)
{
	for (uint16_t i = 0; i < DN_MAX_LCORES; i++) {
		if (p->wake[i].efd >= 0)
			close(p->wake[i].efd);
		p->wake[i].efd = -1;
	}
}

/* On the lcore itself: its eventfd joins its thread's epoll set (RTE_EPOLL_PER_THREAD). */
void dn_wake_lcore_init(struct dn_lcore *lc)
{
	struct dn_port *p = lc->port;

	if (lc->index >= DN_MAX_LCORES || p->wake[lc->index].efd < 0)
		return;
	memset(&lc->efd_ev, 0, sizeof(lc->efd_ev));
	lc->efd_ev.epdata.event = EPOLLIN;
	lc->efd_ev.epdata.cb_fun = efd_clear;
	lc->efd_registered = rte_epoll_ctl(RTE_EPOLL_PER_THREAD, EPOLL_CTL_ADD,
					   p->wake[lc->index].efd, &lc->efd_ev) == 0;
}

void dn_wake_lcore_fini(struct dn_lcore *lc)
{
	if (lc->efd_registered)
		rte_epoll_ctl(lc->efd_ev.epfd, EPOLL_CTL_DEL, lc->efd_ev.fd, &lc->efd_ev);
	lc->efd_registered = false;
}

/* ---- wake-ups ------------------------------------------------------------------------- */

bool dn_steer_wake(struct dn_port *p, uint16_t index)
{
	struct dn_wake *w = &p->wake[index];
	uint64_t one = 1;

	/* seq_cst: orders our ring enqueue before reading the flag; partner: the fence in
	 * dn_steer_idle_wait between storing the flag and looking at the rings. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&w->sleeping, memory_order_relaxed) == 0)
		return false;
	/* One eventfd write per sleep: whoever clears the flag writes. */
	if (atomic_exchange_explicit(&w->sleeping, 0, memory_order_relaxed) == 0)
		return false;
	/* A failed write means the counter is saturated: the sleeper is due to wake anyway. */
	return write(w->efd, &one, sizeof(one)) == (ssize_t)sizeof(one);
}

void dn_lcore_wake_sleeper(struct dn_lcore *lc)
{
	if (lc->steer)
		(void)dn_steer_wake(lc->port, lc->index);
}

/*
 * Work handed to lc from another thread (tl_wake): the eventfd is written whether or not lc
 * sleeps yet. The write stays pending until lc's next epoll wait returns on it, so a hand-off
 * made just before lc goes to sleep is not lost (dn_steer_wake's cheaper test of the sleeping
 * flag would race with a sleeper that only re-checks its frame rings).
 */
void dn_lcore_wake(struct dn_lcore *lc)
{
	uint64_t one = 1;
	int fd = lc->index < DN_MAX_LCORES ? lc->port->wake[lc->index].efd : -1;

	/* release: what the caller handed over is visible to the lcore's acquire exchange. */
	atomic_store_explicit(&lc->handed, 1, memory_order_release);
	if (fd >= 0 && write(fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		lc->stats.wakes_sent++;
}

bool dn_lcore_take_wake(struct dn_lcore *lc)
{
	if (atomic_load_explicit(&lc->handed, memory_order_relaxed) == 0)
		return false;
	return atomic_exchange_explicit(&lc->handed, 0, memory_order_acquire) != 0;
}

/* True when a ring this lcore reads (or its device queue) has frames waiting. */
static bool steer_has_work(struct dn_lcore *lc)
{
	if (lc->port->mq)
		return rte_ring_count(lc->rx_ring) > 0 || dn_rx_recheck(lc);
	if (lc->index > 0)
		return rte_ring_count(lc->rx_ring) > 0;
	return rte_ring_count(lc->port->steer_tx) > 0 || dn_rx_recheck(lc);
}

void dn_steer_idle_wait(struct dn_lcore *lc, uint32_t cap_us, bool exact)
{
	struct dn_wake *w = &lc->port->wake[lc->index];
	bool intr;

	intr = dn_rx_intr_arm(lc);
	atomic_store_explicit(&w->sleeping, 1, memory_order_relaxed);
	/* seq_cst: the flag is visible before we look at the rings; partner: the fence in
	 * dn_steer_wake after the producer's enqueue. */
	atomic_thread_fence(memory_order_seq_cst);
	if (!steer_has_work(lc)) {
		if (lc->efd_registered || intr) {
			dn_epoll_sleep(lc, cap_us, exact, steer_has_work);
		} else {
			/* No epoll set (should not happen): a short bounded sleep instead. */
			rte_delay_us_sleep(cap_us < 100 ? cap_us : 100);
		}
	}
	atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
	if (intr)
		dn_rx_intr_disarm(lc);
	lc->stats.idle_sleeps++;
}

/* ---- Rx and Tx -------------------------------------------------------------------------- */

uint16_t dn_steer_classify(struct dn_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	struct dn_port *p = lc->port;
	struct rte_mbuf *to[DN_MAX_LCORES][DN_BURST];
	uint16_t cnt[DN_MAX_LCORES] = {0}, keep = 0;
	uint32_t owner_mask = 0, self = lc->index;
	struct dn_flow f;

	/* One queue and no classifier: lcore 0 keeps all. A queue each: lcore 0 still gets
	 * what has no flow (it alone writes the ARP table). */
	if (lc->hooks.steer == NULL && !p->mq)
		return n;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t o = 0;

		/* Bursts are at most DN_BURST (the buckets' size); anything past stays here. */
		if (i >= DN_BURST) {
			pkts[keep++] = m;
			continue;
		}
		if (dn_steer_flow_parse(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m),
					p->ip, &f))
			o = lc->hooks.steer != NULL ? lc->hooks.steer(lc->hooks.arg, &f) : self;
		if (o >= p->nb_lcores)
			o = 0;
		if (o == self) {
			pkts[keep++] = m;
			continue;
		}
		to[o][cnt[o]++] = m;
		owner_mask |= 1u << o;
	}
	while (owner_mask != 0) {
		uint32_t o = (uint32_t)__builtin_ctz(owner_mask);
		unsigned k = rte_ring_enqueue_burst(p->steer_rx[o], (void **)to[o], cnt[o], NULL);

		owner_mask &= owner_mask - 1;
		lc->stats.steered_out += k;
		for (unsigned j = k; j < cnt[o]; j++)
			dn_drop(lc, to[o][j], DN_DROP_STEER_FULL);
		if (k > 0 && dn_steer_wake(p, (uint16_t)o))
			lc->stats.wakes_sent++;
	}
	return keep;
}

/* Lcore 0: takes other lcores' frames into its software Tx queue, as far as it has room. */
static unsigned steer_relay(struct dn_lcore *lc)
{
	struct rte_mbuf *m[DN_BURST];
	unsigned total = 0;

	for (int b = 0; b < DN_STEER_RELAY_BURSTS; b++) {
		uint32_t room = DN_TXQ_SLOTS - (lc->tx_tail - lc->tx_head);
		unsigned n = rte_ring_sc_dequeue_burst(lc->port->steer_tx, (void **)m,
						       room < DN_BURST ? room : DN_BURST, NULL);

		for (unsigned i = 0; i < n; i++)
			dn_tx_enqueue(lc, m[i]);
		total += n;
		if (n < DN_BURST)
			break;
	}
	lc->stats.tx_relayed += total;
	/* Their lcore batched them already: waiting for our drain timer would only add delay. */
	if (total > 0)
		dn_tx_flush(lc);
	return total;
}

uint16_t dn_steer_rx(struct dn_lcore *lc, struct rte_mbuf **pkts, unsigned *work)
{
	uint16_t n, m;

	if (lc->index > 0 || lc->port->mq) {
		/* What others handed us first: it waited already. Then, with a queue of our own,
		 * a burst from it (pkts holds DN_STEER_RX_MAX). */
		n = (uint16_t)rte_ring_sc_dequeue_burst(lc->rx_ring, (void **)pkts, DN_BURST, NULL);
		lc->stats.steered_in += n;
		*work = n;
		if (!lc->port->mq)
			return n;
		m = dn_rx_device(lc, pkts + n);
		*work += m;
		return (uint16_t)(n + (m > 0 ? dn_steer_classify(lc, pkts + n, m) : 0));
	}
	*work = steer_relay(lc);
	n = dn_rx_device(lc, pkts);
	*work += n;
	return n > 0 ? dn_steer_classify(lc, pkts, n) : 0;
}

void dn_steer_tx_flush(struct dn_lcore *lc)
{
	unsigned total = 0;

	while (lc->tx_head != lc->tx_tail) {
		uint32_t at = lc->tx_head & (DN_TXQ_SLOTS - 1);
		uint32_t n = lc->tx_tail - lc->tx_head;
		unsigned sent;

		if (n > DN_TXQ_SLOTS - at)
			n = DN_TXQ_SLOTS - at;
		sent = rte_ring_mp_enqueue_burst(lc->tx_ring, (void **)&lc->tx[at], n, NULL);
		for (unsigned i = 0; i < sent; i++)
			lc->stats.tx_bytes += rte_pktmbuf_pkt_len(lc->tx[at + i]);
		lc->tx_head += sent;
		total += sent;
		if (sent < n)
			break; /* lcore 0 is behind: the rest waits in our queue */
	}
	lc->stats.tx_pkts += total;
	lc->stats.tx_handoff += total;
	if (total > 0 && dn_steer_wake(lc->port, 0))
		lc->stats.wakes_sent++;
}
