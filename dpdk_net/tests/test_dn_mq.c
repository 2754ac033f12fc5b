/*
 * test_dn_mq.c — flow steering with a queue per lcore (dn_steer.c, nb_queues == nb_lcores):
 * two lcore contexts on a net_ring port made of two Rx and two Tx rings of our own
 * (rte_eth_from_rings), in an in-memory EAL, driven from one thread. A test puts a frame on
 * Rx ring q to have it arrive on queue q, and reads what an lcore sent from Tx ring q.
 * Covered: DN_QUEUES_PER_LCORE gives each lcore its own queue; a TCP frame the device put
 * on the wrong queue is handed to its owner, one on the right queue stays; ARP, ICMP,
 * fragments and non-IPv4 frames go to lcore 0 (the ARP table's writer), with or without a
 * steer hook; handed frames are read before the lcore's own queue; each lcore sends on its
 * own Tx queue, ARP resolution of another lcore included; a sleeping lcore's eventfd is
 * written when another hands it a frame, and an lcore with frames on its queue or ring
 * does not sleep; WHARF_PORT_QUEUES=1 and a device with too few Tx queues fall back to one
 * shared queue. Every test ends with the mempool full again.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include "dn_testlib.h"

#define MQ_RING 1024 /* entries of each of our device rings */
#define MQ_SEEN 8    /* destination ports each lcore's l4 hook remembers, in order */

struct mq_env {
	struct dn_port *port;
	struct dn_lcore *lc[2];
	struct rte_mempool *pool;
	struct rte_ring *rx[2], *tx[2]; /* the device's Rx queue q reads rx[q]; Tx queue q fills tx[q] */
	unsigned l4_in[2];              /* IPv4 packets each lcore's l4 hook got */
	uint16_t seen[2][MQ_SEEN];      /* their destination ports, in arrival order */
};

static struct mq_env g_mq;

static void mq_l4(void *arg, struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct mq_env *e = arg;
	unsigned i = dn_lcore_index(lc);
	const uint8_t *l4 = rte_pktmbuf_mtod_offset(m, const uint8_t *, m->l3_len);

	if (e->l4_in[i] < MQ_SEEN)
		e->seen[i][e->l4_in[i]] = (uint16_t)(l4[2] << 8 | l4[3]);
	e->l4_in[i]++;
	rte_pktmbuf_free(m);
}

static void rings_free(struct rte_ring **r, unsigned n)
{
	struct rte_mbuf *m[32];
	unsigned k;

	for (unsigned q = 0; q < n; q++) {
		if (r[q] == NULL)
			continue;
		while ((k = rte_ring_dequeue_burst(r[q], (void **)m, 32, NULL)) > 0)
			rte_pktmbuf_free_bulk(m, k);
		rte_ring_free(r[q]);
		r[q] = NULL;
	}
}

/*
 * A net_ring port over nrx Rx rings and ntx Tx rings of our own (name must start with
 * net_ring: rte_eth_from_rings probes the vdev by it). The port id, or -1.
 */
static int ring_port(const char *name, unsigned nrx, struct rte_ring **rx, unsigned ntx,
		     struct rte_ring **tx)
{
	char rn[RTE_RING_NAMESIZE];
	int socket = (int)rte_socket_id();

	for (unsigned q = 0; q < nrx; q++) {
		snprintf(rn, sizeof(rn), "%s_r%u", name, q);
		rx[q] = rte_ring_create(rn, MQ_RING, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (rx[q] == NULL)
			return -1;
	}
	for (unsigned q = 0; q < ntx; q++) {
		snprintf(rn, sizeof(rn), "%s_t%u", name, q);
		tx[q] = rte_ring_create(rn, MQ_RING, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (tx[q] == NULL)
			return -1;
	}
	return rte_eth_from_rings(name, rx, nrx, tx, ntx, (unsigned)socket);
}

/* Two lcores on port pid, a queue each if the device has them (DN_QUEUES_PER_LCORE). */
static int port_two_lcores(uint16_t pid, uint32_t nb_mbufs, struct dn_port **port,
			   struct dn_lcore **lc)
{
	char err[256];
	struct dn_config cfg = {.port_id = pid, .ip = DT_OUR_IP, .prefix_len = 24,
				.idle = DN_IDLE_SLEEP, .nb_mbufs = nb_mbufs, .nb_rxd = 256,
				.nb_txd = 256, .nb_lcores = 2, .nb_queues = DN_QUEUES_PER_LCORE};
	int rc = dn_port_create(&cfg, port, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "port %u: %s\n", pid, err);
		return rc;
	}
	for (uint16_t i = 0; i < 2 && rc == 0; i++)
		rc = dn_lcore_create(*port, i, NULL, &lc[i]);
	return rc;
}

static int group_setup(void **state)
{
	int pid;

	(void)state;
	pid = ring_port("net_ring_mq", 2, g_mq.rx, 2, g_mq.tx);
	if (pid < 0) {
		fprintf(stderr, "net_ring port over our rings: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	if (port_two_lcores((uint16_t)pid, 4095, &g_mq.port, g_mq.lc) != 0)
		return -1;
	g_mq.pool = dn_lcore_pool(g_mq.lc[0]);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	dn_lcore_destroy(g_mq.lc[1]);
	dn_lcore_destroy(g_mq.lc[0]);
	rings_free(g_mq.rx, 2); /* the mbufs they may hold belong to the port's pool */
	rings_free(g_mq.tx, 2);
	dn_port_destroy(g_mq.port);
	return 0;
}

static void efd_clear(struct mq_env *e, unsigned i)
{
	uint64_t v;

	if (read(e->port->wake[i].efd, &v, sizeof(v)) < 0)
		return; /* EAGAIN: nothing written */
}

static int setup(void **state)
{
	*state = &g_mq;
	for (unsigned i = 0; i < 2; i++) {
		memset(&g_mq.lc[i]->stats, 0, sizeof(g_mq.lc[i]->stats));
		dn_lcore_set_hooks(g_mq.lc[i], &(struct dn_hooks){.l4_input = mq_l4,
			.steer = dt_steer_by_parity, .arg = &g_mq});
		g_mq.l4_in[i] = 0;
		atomic_store(&g_mq.port->wake[i].sleeping, 0);
		efd_clear(&g_mq, i);
	}
	return 0;
}

static unsigned tx_drain(struct rte_ring *r)
{
	struct rte_mbuf *m[32];
	unsigned n, total = 0;

	while ((n = rte_ring_dequeue_burst(r, (void **)m, 32, NULL)) > 0) {
		rte_pktmbuf_free_bulk(m, n);
		total += n;
	}
	return total;
}

/* Everything handed around comes back: device rings, steering rings, software queues. */
static int teardown(void **state)
{
	struct mq_env *e = *state;

	for (int round = 0; round < 4; round++) {
		for (unsigned i = 0; i < 2; i++) {
			dn_loop_once(e->lc[i], rte_rdtsc());
			dn_tx_flush(e->lc[i]);
		}
		for (unsigned q = 0; q < 2; q++)
			tx_drain(e->tx[q]);
	}
	for (unsigned i = 0; i < 2; i++)
		efd_clear(e, i);
	if (!rte_mempool_full(e->pool)) {
		fprintf(stderr, "mempool not full at teardown: an mbuf leaked\n");
		return -1;
	}
	return 0;
}

static const struct rte_ether_addr *our_mac(struct mq_env *e) { return dn_port_mac(e->port); }

static struct rte_mbuf *frame(struct rte_mempool *pool, const uint8_t *b, uint16_t len)
{
	struct rte_mbuf *m = dt_frame_in(pool, b, len);

	assert_non_null(m);
	return m;
}

/* The frame b[0..len) arrives on the device's Rx queue q. */
static void arrive(struct mq_env *e, unsigned q, const uint8_t *b, uint16_t len)
{
	assert_int_equal(rte_ring_enqueue(e->rx[q], frame(e->pool, b, len)), 0);
}

/* Takes up to max frames the port sent on Tx queue q. */
static unsigned sent(struct mq_env *e, unsigned q, struct rte_mbuf **out, unsigned max)
{
	return rte_ring_dequeue_burst(e->tx[q], (void **)out, max, NULL);
}

/* A TCP segment (20-byte header, no payload) from peer to dport. */
static uint16_t tcp_frame(struct mq_env *e, uint8_t *b, uint32_t peer, uint16_t sport,
			  uint16_t dport)
{
	uint8_t tcp[20] = {0};

	tcp[0] = (uint8_t)(sport >> 8);
	tcp[1] = (uint8_t)sport;
	tcp[2] = (uint8_t)(dport >> 8);
	tcp[3] = (uint8_t)dport;
	tcp[12] = 5 << 4;
	tcp[13] = 0x10;
	return dt_build_ipv4(b, our_mac(e), IPPROTO_TCP, peer, DT_OUR_IP, tcp, sizeof(tcp));
}

static uint16_t frame_op(struct rte_mbuf *m)
{
	const struct rte_arp_hdr *a = rte_pktmbuf_mtod_offset(m, const struct rte_arp_hdr *,
							      sizeof(struct rte_ether_hdr));

	return rte_be_to_cpu_16(a->arp_opcode);
}

static void test_dn_mq_a_queue_per_lcore(void **state)
{
	struct mq_env *e = *state;
	struct rte_eth_dev_info di;
	uint8_t b[256];

	assert_int_equal(dn_port_nb_queues(e->port), 2);
	assert_int_equal(dn_port_nb_lcores(e->port), 2);
	assert_true(dn_port_sw_steer(e->port));
	assert_int_equal(rte_eth_dev_info_get(dn_port_id(e->port), &di), 0);
	assert_int_equal(di.nb_rx_queues, 2);
	assert_int_equal(di.nb_tx_queues, 2);
	for (uint16_t i = 0; i < 2; i++) {
		assert_int_equal(dn_lcore_index(e->lc[i]), i);
		assert_int_equal(dn_lcore_queue(e->lc[i]), i);
	}
	/* Each reads its own queue: lcore 1 finds nothing on queue 0, lcore 0 nothing on 1. */
	arrive(e, 0, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7000));
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7001));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(rte_ring_count(e->rx[1]), 0);
	assert_int_equal(rte_ring_count(e->rx[0]), 1);
	assert_int_equal(e->l4_in[1], 1);
	assert_int_equal(e->seen[1][0], 7001);
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(rte_ring_count(e->rx[0]), 0);
	assert_int_equal(e->l4_in[0], 1);
	assert_int_equal(e->seen[0][0], 7000);
}

static void test_dn_mq_tcp_handed_to_owner_or_kept(void **state)
{
	struct mq_env *e = *state;
	uint8_t b[256];

	/* Owned by lcore 0, arrived on queue 1: lcore 1 hands it over, lcore 0 runs it. */
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7000));
	assert_true(dn_loop_once(e->lc[1], rte_rdtsc()) > 0);
	assert_int_equal(rte_ring_count(e->rx[1]), 0);
	assert_int_equal(e->lc[1]->stats.steered_out, 1);
	assert_int_equal(e->l4_in[1], 0);
	assert_int_equal(e->lc[1]->stats.rx_pkts, 0);
	assert_true(dn_loop_once(e->lc[0], rte_rdtsc()) > 0);
	assert_int_equal(e->lc[0]->stats.steered_in, 1);
	assert_int_equal(e->l4_in[0], 1);
	assert_int_equal(e->seen[0][0], 7000);
	/* Owned by lcore 1, arrived on queue 1: stays, no hand-over on either side. */
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7001));
	dn_loop_once(e->lc[1], rte_rdtsc());
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(e->l4_in[1], 1);
	assert_int_equal(e->seen[1][0], 7001);
	assert_int_equal(e->l4_in[0], 1);
	assert_int_equal(e->lc[1]->stats.steered_out, 1);
	assert_int_equal(e->lc[1]->stats.steered_in, 0);
	assert_int_equal(e->lc[0]->stats.steered_in, 1);
	assert_int_equal(e->lc[0]->stats.steered_out, 0);
	/* The other way: lcore 0 hands lcore 1 its frame from queue 0. What others handed an
	 * lcore is read before its own queue. */
	arrive(e, 0, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7003));
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(e->lc[0]->stats.steered_out, 1);
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7005));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->lc[1]->stats.steered_in, 1);
	assert_int_equal(e->l4_in[1], 3);
	assert_int_equal(e->seen[1][1], 7003);
	assert_int_equal(e->seen[1][2], 7005);
	assert_int_equal(e->l4_in[0], 1);
}

/* ARP request and ICMP echo arrive on queue 1: lcore 0 answers both, on its own queue. */
static void arp_icmp_on_queue1(struct mq_env *e, uint32_t sip)
{
	struct rte_mbuf *out[4];
	struct rte_ether_addr mac;
	uint8_t b[256];
	unsigned n;

	arrive(e, 1, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, sip, DT_OUR_IP));
	arrive(e, 1, b, dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8));
	dn_loop_once(e->lc[1], rte_rdtsc());
	dn_tx_flush(e->lc[1]);
	assert_int_equal(rte_ring_count(e->rx[1]), 0);
	assert_int_equal(e->lc[1]->stats.steered_out, 2);
	assert_int_equal(e->lc[1]->stats.rx_pkts, 0);
	assert_int_equal(e->lc[1]->stats.arp_replies_out, 0);
	assert_int_equal(e->lc[1]->stats.icmp_echo_replies, 0);
	assert_int_equal(dn_arp_lookup(e->port, sip, &mac), -ENOENT);
	dn_loop_once(e->lc[0], rte_rdtsc());
	dn_tx_flush(e->lc[0]);
	assert_int_equal(e->lc[0]->stats.steered_in, 2);
	assert_int_equal(e->lc[0]->stats.rx_pkts, 2);
	assert_int_equal(e->lc[0]->stats.arp_replies_out, 1);
	assert_int_equal(e->lc[0]->stats.icmp_echo_replies, 1);
	/* The sender was learnt by lcore 0, the one writer. */
	assert_int_equal(dn_arp_lookup(e->port, sip, &mac), 0);
	assert_true(rte_is_same_ether_addr(&mac, &dt_peer_mac));
	/* Both answers left on queue 0, none on queue 1. */
	assert_int_equal(sent(e, 1, out, 4), 0);
	n = sent(e, 0, out, 4);
	assert_int_equal(n, 2);
	assert_int_equal(rte_be_to_cpu_16(rte_pktmbuf_mtod(out[0], struct rte_ether_hdr *)->ether_type),
			 RTE_ETHER_TYPE_ARP);
	assert_int_equal(frame_op(out[0]), RTE_ARP_OP_REPLY);
	rte_pktmbuf_free_bulk(out, n);
}

static void test_dn_mq_no_flow_goes_to_lcore0(void **state)
{
	struct mq_env *e = *state;
	uint8_t b[256];
	uint16_t len;

	arp_icmp_on_queue1(e, DT_PEER_IP + 3);
	/* Without a steer hook too: frames with no flow still go to lcore 0 ... */
	for (unsigned i = 0; i < 2; i++) {
		memset(&e->lc[i]->stats, 0, sizeof(e->lc[i]->stats));
		dn_lcore_set_hooks(e->lc[i], &(struct dn_hooks){.l4_input = mq_l4, .arg = e});
	}
	arp_icmp_on_queue1(e, DT_PEER_IP + 4);
	/* ... a TCP fragment and an IPv6 frame as well, dropped there; a whole TCP frame
	 * stays where it arrived (no hook: no owner but the lcore that read it). */
	len = tcp_frame(e, b, DT_PEER_IP, 40000, 7000);
	dt_ip(b)->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG);
	dt_ip_recsum(b);
	arrive(e, 1, b, len);
	((struct rte_ether_hdr *)b)->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	arrive(e, 1, b, len);
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7000));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->lc[1]->stats.steered_out, 2 + 2);
	assert_int_equal(e->l4_in[1], 1);
	assert_int_equal(e->seen[1][0], 7000);
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(e->lc[0]->stats.drops[DN_DROP_IP_FRAG], 1);
	assert_int_equal(e->lc[0]->stats.drops[DN_DROP_ETH_TYPE], 1);
	assert_int_equal(e->lc[1]->stats.drops[DN_DROP_IP_FRAG], 0);
	assert_int_equal(e->lc[1]->stats.drops[DN_DROP_ETH_TYPE], 0);
	assert_int_equal(e->l4_in[0], 0);
}


static uint16_t tcp_sport(struct rte_mbuf *m)
{
	const uint8_t *l4 = rte_pktmbuf_mtod_offset(m, const uint8_t *,
						    sizeof(struct rte_ether_hdr) + 20);

	return (uint16_t)(l4[0] << 8 | l4[1]);
}

static void test_dn_mq_each_lcore_sends_on_its_queue(void **state)
{
	struct mq_env *e = *state;
	struct rte_mbuf *out[4], *m;
	struct rte_ether_addr mac;
	uint8_t b[256], *tcp;
	const uint32_t dst = DT_PEER_IP + 10;

	/* A frame each: lcore 1's leaves on Tx queue 1, lcore 0's on Tx queue 0. */
	dn_tx_enqueue(e->lc[1], frame(e->pool, b, tcp_frame(e, b, DT_PEER_IP, 7001, 40000)));
	dn_tx_flush(e->lc[1]);
	assert_false(dn_tx_pending(e->lc[1]));
	assert_int_equal(e->lc[1]->stats.tx_pkts, 1);
	assert_int_equal(e->lc[1]->stats.tx_handoff, 0);
	dn_loop_once(e->lc[0], rte_rdtsc());
	dn_tx_flush(e->lc[0]);
	assert_int_equal(e->lc[0]->stats.tx_relayed, 0);
	assert_int_equal(rte_ring_count(e->tx[0]), 0);
	assert_int_equal(sent(e, 1, out, 4), 1);
	assert_int_equal(tcp_sport(out[0]), 7001);
	rte_pktmbuf_free(out[0]);
	dn_tx_enqueue(e->lc[0], frame(e->pool, b, tcp_frame(e, b, DT_PEER_IP, 7000, 40000)));
	dn_tx_flush(e->lc[0]);
	assert_int_equal(rte_ring_count(e->tx[1]), 0);
	assert_int_equal(sent(e, 0, out, 4), 1);
	assert_int_equal(tcp_sport(out[0]), 7000);
	rte_pktmbuf_free(out[0]);
	/* Lcore 1 sends to an unknown next hop: its ARP request leaves on its own queue ... */
	assert_non_null(m = rte_pktmbuf_alloc(e->pool));
	tcp = (uint8_t *)rte_pktmbuf_append(m, 20);
	memset(tcp, 0, 20);
	tcp[12] = 5 << 4;
	assert_int_equal(dn_ip_send(e->lc[1], m, dst, IPPROTO_TCP, DN_TX_L4_CSUM), -EAGAIN);
	dn_tx_flush(e->lc[1]);
	assert_int_equal(rte_ring_count(e->tx[0]), 0);
	assert_int_equal(sent(e, 1, out, 4), 1);
	assert_int_equal(frame_op(out[0]), RTE_ARP_OP_REQUEST);
	rte_pktmbuf_free(out[0]);
	/* ... the reply arriving there goes to lcore 0, which learns the address ... */
	arrive(e, 1, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REPLY, dst, DT_OUR_IP));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->lc[1]->stats.steered_out, 1);
	assert_int_equal(dn_arp_lookup(e->port, dst, &mac), -ENOENT);
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(dn_arp_lookup(e->port, dst, &mac), 0);
	/* ... and lcore 1's packet leaves on queue 1 with the learnt MAC. */
	dn_loop_once(e->lc[1], rte_rdtsc() + rte_get_tsc_hz() / 10);
	dn_tx_flush(e->lc[1]);
	dn_tx_flush(e->lc[0]);
	assert_int_equal(rte_ring_count(e->tx[0]), 0);
	assert_int_equal(sent(e, 1, out, 4), 1);
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(out[0], struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	assert_true(rte_is_same_ether_addr(&eth->dst_addr, &dt_peer_mac));
	assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), dst);
	rte_pktmbuf_free(out[0]);
	assert_int_equal(e->lc[1]->stats.tx_pkts, 3);
	assert_int_equal(e->lc[1]->stats.tx_handoff, 0);
	assert_int_equal(e->lc[0]->stats.tx_relayed, 0);
}

static void test_dn_mq_wake_when_handed_a_frame(void **state)
{
	struct mq_env *e = *state;
	struct dn_wake *w = e->port->wake;
	uint8_t b[256];
	uint64_t v = 0;

	/* Lcore 0 awake: lcore 1 hands it a frame and writes no eventfd. */
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7000));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->lc[1]->stats.steered_out, 1);
	assert_int_equal(e->lc[1]->stats.wakes_sent, 0);
	assert_int_equal(read(w[0].efd, &v, sizeof(v)), -1);
	assert_int_equal(errno, EAGAIN);
	/* Asleep: one write for the burst (a frame with a flow, one without), flag cleared. */
	atomic_store(&w[0].sleeping, 1);
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7002));
	arrive(e, 1, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP));
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->lc[1]->stats.steered_out, 3);
	assert_int_equal(e->lc[1]->stats.wakes_sent, 1);
	assert_int_equal(atomic_load(&w[0].sleeping), 0);
	assert_int_equal(read(w[0].efd, &v, sizeof(v)), (int)sizeof(v));
	assert_int_equal(v, 1);
	/* The other way: lcore 0 wakes a sleeping lcore 1. */
	atomic_store(&w[1].sleeping, 1);
	arrive(e, 0, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7001));
	dn_loop_once(e->lc[0], rte_rdtsc());
	assert_int_equal(e->l4_in[0], 2);
	assert_int_equal(e->lc[0]->stats.wakes_sent, 1);
	assert_int_equal(read(w[1].efd, &v, sizeof(v)), (int)sizeof(v));
	/* Frames in its ring: lcore 1 does not sleep. */
	dn_lcore_idle_wait(e->lc[1]);
	assert_int_equal(e->lc[1]->stats.idle_sleeps, 1);
	assert_int_equal(e->lc[1]->stats.intr_timeouts + e->lc[1]->stats.intr_wakeups, 0);
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->l4_in[1], 1);
	/* A frame on its own device queue only: no sleep either, and the next turn runs it. */
	arrive(e, 1, b, tcp_frame(e, b, DT_PEER_IP, 40000, 7003));
	dn_lcore_idle_wait(e->lc[1]);
	assert_int_equal(e->lc[1]->stats.intr_timeouts + e->lc[1]->stats.intr_wakeups, 0);
	dn_loop_once(e->lc[1], rte_rdtsc());
	assert_int_equal(e->l4_in[1], 2);
	assert_int_equal(e->seen[1][1], 7003);
	/* Nothing waiting anywhere: it sleeps to the timeout (what the two checks above rule out). */
	dn_lcore_idle_wait(e->lc[1]);
	assert_int_equal(e->lc[1]->stats.intr_timeouts, 1);
	assert_int_equal(e->lc[1]->stats.intr_wakeups, 0);
}

/* A port of two lcores sharing queue 0: lcore 1's Tx goes out through lcore 0. */
static void check_one_shared_queue(struct dn_port *port, struct dn_lcore **lc,
				   struct rte_ring *tx0)
{
	struct rte_mempool *pool = dn_lcore_pool(lc[0]);
	struct rte_mbuf *m = NULL;
	uint8_t b[256];
	uint8_t l4[20] = {0};

	assert_int_equal(dn_port_nb_queues(port), 1);
	assert_true(dn_port_sw_steer(port));
	assert_int_equal(dn_lcore_queue(lc[0]), 0);
	assert_int_equal(dn_lcore_queue(lc[1]), 0);
	dn_tx_enqueue(lc[1], frame(pool, b, dt_build_ipv4(b, dn_port_mac(port), IPPROTO_TCP,
							  DT_OUR_IP, DT_PEER_IP, l4, sizeof(l4))));
	dn_tx_flush(lc[1]);
	assert_int_equal(lc[1]->stats.tx_handoff, 1);
	assert_int_equal(rte_ring_count(tx0), 0);
	dn_loop_once(lc[0], rte_rdtsc());
	assert_int_equal(lc[0]->stats.tx_relayed, 1);
	assert_int_equal(rte_ring_dequeue(tx0, (void **)&m), 0);
	rte_pktmbuf_free(m);
	assert_true(rte_mempool_full(pool));
}

/*
 * Claims on a device that takes no flow rule (net_ring has no rte_flow): no rule, and the
 * claim table alone names the owner; two claimers share the port; the last unclaim frees it.
 */
static void test_dn_mq_claim_without_flow_rules(void **state)
{
	struct mq_env *e = *state;

	assert_int_equal(dn_steer_claim(e->port, 6667, 1), 0);
	assert_false(dn_steer_rule(e->port, 6667));
	assert_int_equal(dn_steer_owner(e->port, 6667), 1);
	assert_int_equal(dn_steer_claim(e->port, 6667, 0), 0);
	assert_int_equal(dn_steer_owner(e->port, 6667), -1);
	assert_false(dn_steer_rule(e->port, 6667));
	dn_steer_unclaim(e->port, 6667, 0);
	dn_steer_unclaim(e->port, 6667, 1);
	assert_int_equal(dn_steer_owner(e->port, 6667), -1);
	assert_int_equal(dn_steer_claim(e->port, 6667, 0), 0);
	assert_int_equal(dn_steer_owner(e->port, 6667), 0);
	dn_steer_unclaim(e->port, 6667, 0);
	assert_int_equal(dn_steer_claim(e->port, 6667, 2), -EINVAL); /* no lcore 2 */
}

/* check_one_shared_queue, then the lcores, rings and port go. */
static void check_one_shared_queue_and_free(struct dn_port *port, struct dn_lcore **lc,
					    struct rte_ring **rx, unsigned nrx, struct rte_ring **tx,
					    unsigned ntx)
{
	check_one_shared_queue(port, lc, tx[0]);
	dn_lcore_destroy(lc[1]);
	dn_lcore_destroy(lc[0]);
	rings_free(rx, nrx);
	rings_free(tx, ntx);
	dn_port_destroy(port);
}

static void test_dn_mq_falls_back_to_one_queue(void **state)
{
	struct rte_ring *rx[2] = {NULL}, *tx[2] = {NULL};
	struct dn_port *port = NULL;
	struct dn_lcore *lc[2] = {NULL};
	int pid, rc;

	(void)state;
	/* WHARF_PORT_QUEUES=1 on a device with a queue pair per lcore. */
	pid = ring_port("net_ring_mq_env", 2, rx, 2, tx);
	assert_true(pid >= 0);
	setenv("WHARF_PORT_QUEUES", "2", 1); /* not a value it takes: refused, nothing made */
	rc = port_two_lcores((uint16_t)pid, 1023, &port, lc);
	assert_int_equal(rc, -EINVAL);
	assert_null(port);
	unsetenv("WHARF_PORT_QUEUES");
	/* The lower layers' other variables: a value they do not take is refused too. */
	{
		static const char *const bad[][2] = {
			{ "WHARF_TSO", "off" }, { "WHARF_TSO", "2" },
			{ "WHARF_IDLE_SPIN_US", "100001" }, { "WHARF_IDLE_SPIN_US", "50us" },
			{ "WHARF_IDLE_SPIN_US", "-1" },
		};
		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			setenv(bad[i][0], bad[i][1], 1);
			rc = port_two_lcores((uint16_t)pid, 1023, &port, lc);
			unsetenv(bad[i][0]);
			assert_int_equal(rc, -EINVAL);
			assert_null(port);
		}
	}
	setenv("WHARF_PORT_QUEUES", "1", 1);
	setenv("WHARF_TSO", "1", 1);
	setenv("WHARF_IDLE_SPIN_US", "100000", 1);
	rc = port_two_lcores((uint16_t)pid, 1023, &port, lc);
	unsetenv("WHARF_PORT_QUEUES");
	unsetenv("WHARF_TSO");
	unsetenv("WHARF_IDLE_SPIN_US");
	assert_int_equal(rc, 0);
	check_one_shared_queue_and_free(port, lc, rx, 2, tx, 2);
	/* A device with an Rx queue per lcore but one Tx queue. */
	pid = ring_port("net_ring_mq_1tx", 2, rx, 1, tx);
	assert_true(pid >= 0);
	assert_int_equal(port_two_lcores((uint16_t)pid, 1023, &port, lc), 0);
	check_one_shared_queue_and_free(port, lc, rx, 2, tx, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dn_mq_a_queue_per_lcore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_claim_without_flow_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_tcp_handed_to_owner_or_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_no_flow_goes_to_lcore0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_each_lcore_sends_on_its_queue, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_wake_when_handed_a_frame, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_mq_falls_back_to_one_queue, setup, teardown),
	};

	/* The port's queue choice reads this: the tests set their own. No spin after work: an
	 * idle wait here is to take the sleep path. */
	unsetenv("WHARF_PORT_QUEUES");
	setenv("WHARF_IDLE_SPIN_US", "0", 1);
	if (dt_eal_init() < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	int rc = cmocka_run_group_tests_name("dpdk_net a queue per lcore", tests, group_setup,
					     group_teardown);
	dn_eal_fini();
	dt_eal_remove_runtime_dir();
	return rc;
}
