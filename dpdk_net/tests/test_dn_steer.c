/*
 * test_dn_steer.c — software flow steering (dn_steer.c): two lcore contexts sharing one
 * net_ring port (one queue, Tx looped back to Rx) in an in-memory EAL, driven from one
 * thread. The flow parser is pure and runs on raw bytes; the rest checks where frames go:
 * TCP to the owner's ring and through its input, ARP and ICMP kept on lcore 0, ring-full
 * drops counted, lcore 1's Tx sent by lcore 0, and a sleeping lcore's eventfd written
 * exactly when it sleeps. Every test ends with the mempool full again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_ethdev.h>
#include <rte_thash.h>

#include "dn_testlib.h"

struct st_env {
	struct dn_port *port;
	struct dn_lcore *lc[2];
	struct rte_mempool *pool;
	unsigned l4_in[2];  /* IPv4 packets each lcore's l4 hook got */
	uint16_t l4_dport[2];
};

static struct st_env g_st;

static void st_l4(void *arg, struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct st_env *e = arg;
	unsigned i = dn_lcore_index(lc);
	const uint8_t *l4 = rte_pktmbuf_mtod_offset(m, const uint8_t *, m->l3_len);

	e->l4_in[i]++;
	e->l4_dport[i] = (uint16_t)(l4[2] << 8 | l4[3]);
	rte_pktmbuf_free(m);
}

static int group_setup(void **state)
{
	char err[256];
	struct dn_config cfg = {.port_id = DN_PORT_AUTO, .ip = DT_OUR_IP, .prefix_len = 24,
				.idle = DN_IDLE_SLEEP, .nb_mbufs = 8191, .nb_rxd = 256,
				.nb_txd = 256, .nb_lcores = 2};
	int rc;

	(void)state;
	rc = dn_port_create(&cfg, &g_st.port, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "port: %s\n", err);
		return rc;
	}
	for (uint16_t i = 0; i < 2 && rc == 0; i++)
		rc = dn_lcore_create(g_st.port, i, NULL, &g_st.lc[i]);
	if (rc == 0)
		g_st.pool = dn_lcore_pool(g_st.lc[0]);
	return rc;
}

static int group_teardown(void **state)
{
	(void)state;
	dn_lcore_destroy(g_st.lc[1]);
	dn_lcore_destroy(g_st.lc[0]);
	dn_port_destroy(g_st.port);
	return 0;
}

static int setup(void **state)
{
	*state = &g_st;
	for (int i = 0; i < 2; i++) {
		memset(&g_st.lc[i]->stats, 0, sizeof(g_st.lc[i]->stats));
		dn_lcore_set_hooks(g_st.lc[i], &(struct dn_hooks){.l4_input = st_l4,
			.steer = i == 0 ? dt_steer_by_parity : NULL, .arg = &g_st});
		g_st.l4_in[i] = 0;
	}
	return 0;
}

/* Everything handed around comes back: rings, software queues and the device drained. */
static int teardown(void **state)
{
	struct st_env *e = *state;
	struct rte_mbuf *m[32];
	uint16_t n;

	for (int round = 0; round < 4; round++) {
		dn_loop_once(e->lc[1], rte_rdtsc());
		dn_tx_flush(e->lc[1]);
		dn_loop_once(e->lc[0], rte_rdtsc());
		dn_tx_flush(e->lc[0]);
		while ((n = rte_eth_rx_burst(dn_port_id(e->port), 0, m, 32)) > 0)
			rte_pktmbuf_free_bulk(m, n);
	}
	if (!rte_mempool_full(e->pool)) {
		fprintf(stderr, "mempool not full at teardown: an mbuf leaked\n");
		return -1;
	}
	return 0;
}

static const struct rte_ether_addr *our_mac(struct st_env *e) { return dn_port_mac(e->port); }

static struct rte_mbuf *st_frame(struct st_env *e, const uint8_t *b, uint16_t len)
{
	struct rte_mbuf *m = dt_frame_in(e->pool, b, len);

	assert_non_null(m);
	return m;
}

/* A TCP segment (20-byte header, no payload) from the peer to dport. */
static uint16_t st_tcp(struct st_env *e, uint8_t *b, uint16_t sport, uint16_t dport)
{
	uint8_t tcp[20] = {0};

	tcp[0] = (uint8_t)(sport >> 8);
	tcp[1] = (uint8_t)sport;
	tcp[2] = (uint8_t)(dport >> 8);
	tcp[3] = (uint8_t)dport;
	tcp[12] = 5 << 4;
	tcp[13] = 0x10;
	return dt_build_ipv4(b, our_mac(e), IPPROTO_TCP, DT_PEER_IP, DT_OUR_IP, tcp, sizeof(tcp));
}

static void test_dn_steer_flow_parse_reads_tcp_and_udp(void **state)
{
	struct st_env *e = *state;
	uint8_t b[256];
	struct dn_flow f;
	uint16_t len = st_tcp(e, b, 40000, 5001);

	assert_true(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	assert_int_equal(f.saddr, DT_PEER_IP);
	assert_int_equal(f.daddr, DT_OUR_IP);
	assert_int_equal(f.sport, 40000);
	assert_int_equal(f.dport, 5001);
	assert_int_equal(f.proto, IPPROTO_TCP);
	dt_ip(b)->next_proto_id = IPPROTO_UDP;
	assert_true(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	assert_int_equal(f.proto, IPPROTO_UDP);
}

/* The queue a table of DN_PEER_RETA_SIZE entries round robin over nq gives this tuple. */
static uint16_t ref_queue(uint32_t sa, uint32_t da, uint16_t sp, uint16_t dp, uint16_t nq)
{
	struct rte_ipv4_tuple t = {.src_addr = sa, .dst_addr = da};
	uint8_t key[40];

	t.sport = sp;
	t.dport = dp;
	for (int i = 0; i < 40; i++) /* written out: the test must not take the key from dn */
		key[i] = (i & 1) ? 0x5a : 0x6d;
	return (uint16_t)(rte_softrss((uint32_t *)&t, sp || dp ? RTE_THASH_V4_L4_LEN :
				      RTE_THASH_V4_L3_LEN, key) % DN_PEER_RETA_SIZE % nq);
}

/*
 * dn_rss_queue, the switch's RSS for a port of several queues: DPDK's own Toeplitz over the
 * tuple with the symmetric key, both directions of a flow on one queue, flows spread over
 * every queue, and what is not IPv4 on queue 0.
 */
static void test_dn_steer_rss_queue_is_softrss_and_symmetric(void **state)
{
	struct st_env *e = *state;
	uint8_t b[256], r[256], tcp[20] = {0};
	unsigned hits[4] = {0};
	uint16_t len, rlen;

	for (uint16_t sp = 40000; sp < 40400; sp++) {
		struct rte_mbuf *m, *rm;
		uint16_t nq = (uint16_t)(2 + sp % 3), q;

		len = st_tcp(e, b, sp, 5001);
		m = st_frame(e, b, len);
		q = dn_rss_queue(m, nq);
		assert_int_equal(q, ref_queue(DT_PEER_IP, DT_OUR_IP, sp, 5001, nq));
		if (nq == 4)
			hits[q]++;
		/* The reply: addresses and ports swapped. */
		tcp[0] = 5001 >> 8;
		tcp[1] = 5001 & 255;
		tcp[2] = (uint8_t)(sp >> 8);
		tcp[3] = (uint8_t)sp;
		tcp[12] = 5 << 4;
		rlen = dt_build_ipv4(r, our_mac(e), IPPROTO_TCP, DT_OUR_IP, DT_PEER_IP, tcp, sizeof(tcp));
		rm = st_frame(e, r, rlen);
		assert_int_equal(dn_rss_queue(rm, nq), q);
		assert_int_equal(dn_rss_queue(m, 1), 0);
		rte_pktmbuf_free(rm);
		rte_pktmbuf_free(m);
	}
	for (int q = 0; q < 4; q++)
		assert_true(hits[q] > 0);
	/* A later fragment hashes by its addresses; ARP goes to queue 0. */
	len = st_tcp(e, b, 40000, 5001);
	dt_ip(b)->fragment_offset = rte_cpu_to_be_16(8);
	struct rte_mbuf *m = st_frame(e, b, len);
	assert_int_equal(dn_rss_queue(m, 3), ref_queue(DT_PEER_IP, DT_OUR_IP, 0, 0, 3));
	rte_pktmbuf_free(m);
	len = dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP);
	m = st_frame(e, b, len);
	assert_int_equal(dn_rss_queue(m, 4), 0);
	rte_pktmbuf_free(m);
}

static void test_dn_steer_flow_parse_refuses_the_rest(void **state)
{
	struct st_env *e = *state;
	uint8_t b[256];
	struct dn_flow f;
	uint16_t len = st_tcp(e, b, 40000, 5001);

	/* Headers cut before the ports; a header length below 20; not for us; a fragment. */
	assert_false(dn_steer_flow_parse(b, 14 + 20 + 3, DT_OUR_IP, &f));
	assert_false(dn_steer_flow_parse(b, 10, DT_OUR_IP, &f));
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP + 1, &f));
	dt_ip(b)->version_ihl = 0x44;
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	dt_ip(b)->version_ihl = 0x45;
	dt_ip(b)->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG);
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	dt_ip(b)->fragment_offset = 0;
	dt_ip(b)->version_ihl = 0x65; /* IPv6 version nibble with an IPv4 ethertype */
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	len = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8);
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
	len = dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP);
	assert_false(dn_steer_flow_parse(b, len, DT_OUR_IP, &f));
}

static void test_dn_steer_tcp_reaches_owner_lcore(void **state)
{
	struct st_env *e = *state;
	struct rte_mbuf *pkts[DN_BURST];
	uint8_t b[256];
	uint16_t n = 0, kept;

	for (uint16_t i = 0; i < 10; i++)
		pkts[n++] = st_frame(e, b, st_tcp(e, b, 40000, (uint16_t)(6000 + i)));
	kept = dn_steer_classify(e->lc[0], pkts, n);
	assert_int_equal(kept, 5);
	for (uint16_t i = 0; i < kept; i++)
		assert_int_equal(rte_pktmbuf_mtod(pkts[i], uint8_t *)[14 + 20 + 3] & 1, 0);
	dn_input_burst(e->lc[0], pkts, kept);
	assert_int_equal(e->l4_in[0], 5);
	assert_int_equal(e->lc[0]->stats.steered_out, 5);
	/* Lcore 1 finds them in its ring and runs them through its own input. */
	assert_int_equal(dn_loop_once(e->lc[1], rte_rdtsc()) > 0, 1);
	assert_int_equal(e->l4_in[1], 5);
	assert_int_equal(e->l4_dport[1] & 1, 1);
	assert_int_equal(e->lc[1]->stats.steered_in, 5);
	assert_int_equal(e->lc[1]->stats.rx_pkts, 5);
}

static void test_dn_steer_arp_and_icmp_stay_on_lcore0(void **state)
{
	struct st_env *e = *state;
	struct rte_mbuf *pkts[2];
	uint8_t b[256];

	pkts[0] = st_frame(e, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP,
					       DT_OUR_IP));
	pkts[1] = st_frame(e, b, dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8));
	assert_int_equal(dn_steer_classify(e->lc[0], pkts, 2), 2);
	dn_input_burst(e->lc[0], pkts, 2);
	assert_int_equal(e->lc[0]->stats.arp_replies_out, 1);
	assert_int_equal(e->lc[0]->stats.icmp_echo_replies, 1);
	assert_int_equal(e->lc[0]->stats.steered_out, 0);
	/* The sender was learnt by lcore 0, the one writer, and lcore 1 reads it. */
	struct rte_ether_addr mac;
	assert_int_equal(dn_arp_lookup(e->port, DT_PEER_IP, &mac), 0);
	assert_true(rte_is_same_ether_addr(&mac, &dt_peer_mac));
}

static void test_dn_steer_ring_full_drops_counted(void **state)
{
	struct st_env *e = *state;
	struct rte_mbuf *pkts[DN_BURST];
	uint8_t b[256];
	uint16_t len = st_tcp(e, b, 40000, 6001);
	unsigned bursts = DN_STEER_RX_RING / DN_BURST + 1;

	/* Lcore 1 never drains: the ring takes DN_STEER_RX_RING - 1, the rest are dropped. */
	for (unsigned k = 0; k < bursts; k++) {
		for (uint16_t i = 0; i < DN_BURST; i++)
			pkts[i] = st_frame(e, b, len);
		assert_int_equal(dn_steer_classify(e->lc[0], pkts, DN_BURST), 0);
	}
	assert_int_equal(e->lc[0]->stats.steered_out, DN_STEER_RX_RING - 1);
	assert_int_equal(e->lc[0]->stats.drops[DN_DROP_STEER_FULL],
			 bursts * DN_BURST - (DN_STEER_RX_RING - 1));
	assert_string_equal(dn_drop_name(DN_DROP_STEER_FULL), "steer_ring_full");
	while (dn_loop_once(e->lc[1], rte_rdtsc()) > 0)
		;
	assert_int_equal(e->l4_in[1], DN_STEER_RX_RING - 1);
}

static void test_dn_steer_tx_of_lcore1_leaves_through_lcore0(void **state)
{
	struct st_env *e = *state;
	struct rte_eth_stats before, after;
	uint8_t b[256];

	rte_eth_stats_get(dn_port_id(e->port), &before);
	dn_tx_enqueue(e->lc[1], st_frame(e, b, st_tcp(e, b, 6001, 40000)));
	dn_tx_flush(e->lc[1]);
	rte_eth_stats_get(dn_port_id(e->port), &after);
	assert_int_equal(after.opackets, before.opackets); /* lcore 1 never touches the device */
	assert_int_equal(e->lc[1]->stats.tx_handoff, 1);
	assert_false(dn_tx_pending(e->lc[1]));
	dn_loop_once(e->lc[0], rte_rdtsc());
	rte_eth_stats_get(dn_port_id(e->port), &after);
	assert_int_equal(after.opackets, before.opackets + 1);
	assert_int_equal(e->lc[0]->stats.tx_relayed, 1);
}

static void test_dn_steer_wake_only_when_sleeping(void **state)
{
	struct st_env *e = *state;
	struct rte_mbuf *m;
	uint8_t b[256];
	uint64_t v = 0;
	int efd = e->port->wake[1].efd;

	/* Awake: no eventfd write. */
	m = st_frame(e, b, st_tcp(e, b, 40000, 6001));
	dn_steer_classify(e->lc[0], &m, 1);
	assert_int_equal(e->lc[0]->stats.wakes_sent, 0);
	assert_int_equal(read(efd, &v, sizeof(v)), -1);
	assert_int_equal(errno, EAGAIN);
	/* Asleep: one write, the flag cleared, and a second frame writes nothing more. */
	atomic_store(&e->port->wake[1].sleeping, 1);
	for (int i = 0; i < 2; i++) {
		m = st_frame(e, b, st_tcp(e, b, 40000, 6001));
		dn_steer_classify(e->lc[0], &m, 1);
	}
	assert_int_equal(e->lc[0]->stats.wakes_sent, 1);
	assert_int_equal(atomic_load(&e->port->wake[1].sleeping), 0);
	assert_int_equal(read(efd, &v, sizeof(v)), (int)sizeof(v));
	assert_int_equal(v, 1);
	/*
	 * Lcore 1 with frames waiting does not sleep: idle_wait (past its adaptive spin, so it
	 * takes the sleep path) finds them and comes back without an epoll wait, which would
	 * have ended woken or timed out, counted either way.
	 */
	e->lc[1]->spin.worked = false;
	e->lc[1]->spin.busy = 0;
	dn_lcore_idle_wait(e->lc[1]);
	assert_int_equal(e->lc[1]->stats.idle_sleeps, 1);
	assert_int_equal(e->lc[1]->stats.intr_wakeups, 0);
	assert_int_equal(e->lc[1]->stats.intr_timeouts, 0);
}

static uint64_t g_due;

static uint64_t st_due(void *arg, struct dn_lcore *lc)
{
	(void)arg;
	(void)lc;
	return g_due;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of n sleeps of an idle lcore 1 (past its spin), in us; due_us ahead of each
 * (0: no due time). */
static uint64_t median_sleep_us(struct st_env *e, uint32_t n, uint64_t due_us)
{
	uint64_t hz = rte_get_tsc_hz(), took[32];

	assert_true(n <= 32);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t t0;
		e->lc[1]->spin.worked = false;
		e->lc[1]->spin.busy = 0;
		t0 = rte_rdtsc();
		g_due = due_us ? t0 + due_us * hz / 1000000u : UINT64_MAX;
		dn_lcore_idle_wait(e->lc[1]);
		took[i] = (rte_rdtsc() - t0) * 1000000u / hz;
	}
	qsort(took, n, sizeof(took[0]), cmp_u64);
	return took[n / 2];
}

/*
 * A sleep ends by the upper layer's next timer (dn_hooks.due) when that is near: an idle
 * lcore whose timer is 300 us ahead sleeps about that long, in epoll_pwait2 on its set with
 * the thread's own timer slack, each sleep counted as run to its timeout. With no timer, or
 * one past DN_DUE_NEAR_US (800 us), it sleeps the whole 1 ms and more (the slack that keeps
 * idle sleeps cheap); with one due already, not at all. (Medians of 21 and 5 sleeps, so a
 * slow wake-up on a busy host decides nothing.)
 */
static void test_dn_steer_sleep_ends_by_the_next_timer(void **state)
{
	struct st_env *e = *state;
	uint64_t med;

	assert_true(e->lc[1]->efd_registered);
	dn_lcore_set_hooks(e->lc[1], &(struct dn_hooks){.l4_input = st_l4, .due = st_due,
							.arg = e});
	med = median_sleep_us(e, 21, 300);
	print_message("sleeps with a timer 300 us ahead: median %" PRIu64 " us\n", med);
	assert_true(med >= 290 && med < 700);
	assert_int_equal(e->lc[1]->stats.idle_sleeps, 21);
	assert_int_equal(e->lc[1]->stats.intr_timeouts, 21);
	assert_int_equal(e->lc[1]->stats.timed_sleeps, 21);
	med = median_sleep_us(e, 5, 0);
	print_message("sleeps with no timer: median %" PRIu64 " us\n", med);
	assert_true(med >= 950);
	med = median_sleep_us(e, 5, 800);
	print_message("sleeps with a timer 800 us ahead: median %" PRIu64 " us\n", med);
	assert_true(med >= 950);
	assert_int_equal(e->lc[1]->stats.timed_sleeps, 21); /* neither was timed */
	g_due = rte_rdtsc();
	e->lc[1]->spin.worked = false;
	e->lc[1]->spin.busy = 0;
	dn_lcore_idle_wait(e->lc[1]);
	assert_int_equal(e->lc[1]->stats.idle_sleeps, 31);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dn_steer_flow_parse_reads_tcp_and_udp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_flow_parse_refuses_the_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_rss_queue_is_softrss_and_symmetric, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_tcp_reaches_owner_lcore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_arp_and_icmp_stay_on_lcore0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_ring_full_drops_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_tx_of_lcore1_leaves_through_lcore0, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_wake_only_when_sleeping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_steer_sleep_ends_by_the_next_timer, setup,
						teardown),
	};

	if (dt_eal_init() < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	int rc = cmocka_run_group_tests_name("dpdk_net software steering", tests, group_setup,
					     group_teardown);
	dn_eal_fini();
	dt_eal_remove_runtime_dir();
	return rc;
}
