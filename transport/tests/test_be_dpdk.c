/*
 * test_be_dpdk.c — the DPDK transport backend's receive glue (tl_be_dpdk.c: db_l4_input) on
 * a real PMD: net_ring in an in-memory EAL (dpdk_net/tests/dn_testlib.c), one transport
 * instance per test on the port's lcore, listening on port 80. Frames go in through
 * dn_input_burst, as the lcore's Rx burst hands them over; what the stack answers is read
 * back from the ring. Every test ends with the instance destroyed and the mempool full.
 *
 * A frame whose buffers disagree with its head (pkt_len, nb_segs) is a driver's bug, but
 * TCP must not read, nor rte_pktmbuf_linearize copy, past the bytes actually received.
 * One test runs a whole tl_poll round instead, the SYN arriving through the port's Rx burst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dpdk_net/tests/dn_testlib.h"
#include "transport/tl.h"

#define LPORT 80u
#define FRAME_LEN (14u + 20u + 20u)

static struct dt_env g_env;

struct bfx {
	struct tl *tl;
	struct tl_listener *l;
};

static void noop_msg(struct tl_conn *c, const struct tl_msg_view *v)
{
	(void)c;
	(void)v;
}

static const struct tl_conn_ops ops = {.msg = noop_msg};

static int group_setup(void **state)
{
	(void)state;
	return dt_port_up(&g_env);
}

static int group_teardown(void **state)
{
	(void)state;
	dt_port_down(&g_env);
	return 0;
}

static int setup(void **state)
{
	static struct bfx f;
	struct tl_config cfg;

	memset(&f, 0, sizeof(f));
	memset(&g_env.lc->stats, 0, sizeof(g_env.lc->stats));
	tl_config_default(&cfg);
	cfg.protocol = TL_PROTO_DPDK;
	cfg.backend_arg = g_env.lc;
	cfg.max_conns = 4;
	if (tl_create(&cfg, &f.tl) != 0 ||
	    tl_listen(f.tl, 0, LPORT, &ops, NULL, NULL, &f.l) != 0)
		return -1;
	/* The peer's MAC is known: an answer leaves at once instead of waiting for ARP. */
	dn_arp_learn(g_env.port, DT_PEER_IP, &dt_peer_mac, true);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct bfx *f = *state;

	dt_drain(&g_env);
	tl_destroy(f->tl);
	if (!dt_pool_full(&g_env)) {
		fprintf(stderr, "mempool not full at teardown: an mbuf leaked\n");
		return -1;
	}
	return 0;
}

/* A SYN from the peer to port 80, checksums right. */
static void build_syn(uint8_t *b)
{
	uint8_t tcp[20] = {0};
	struct rte_ipv4_hdr *ip;
	uint16_t *ck;

	tcp[0] = 0x9c; /* source port 40000 */
	tcp[1] = 0x40;
	tcp[3] = LPORT;
	tcp[4] = 0x10; /* sequence number 0x10000000 */
	tcp[12] = 5 << 4;
	tcp[13] = 0x02;
	tcp[14] = 0xff;
	tcp[15] = 0xff;
	dt_build_ipv4(b, dn_port_mac(g_env.port), IPPROTO_TCP, DT_PEER_IP, DT_OUR_IP, tcp, 20);
	ip = dt_ip(b);
	ck = (uint16_t *)(b + 14 + 20 + 16);
	*ck = rte_ipv4_udptcp_cksum(ip, b + 14 + 20);
}

/* A chain of two buffers holding b[0, cut) and b[cut, len), lengths consistent. */
static struct rte_mbuf *chain2(const uint8_t *b, uint16_t cut, uint16_t len)
{
	struct rte_mbuf *h = dt_frame(&g_env, b, cut), *t = dt_frame(&g_env, b + cut, len - cut);

	assert_non_null(h);
	assert_non_null(t);
	assert_int_equal(rte_pktmbuf_chain(h, t), 0);
	return h;
}

/* True when one of the n frames is a SYN-ACK; frees them. */
static bool has_synack(struct rte_mbuf **out, uint16_t n)
{
	bool synack = false;

	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *p = rte_pktmbuf_mtod(out[i], const uint8_t *);
		if (rte_pktmbuf_data_len(out[i]) >= FRAME_LEN && p[14 + 9] == IPPROTO_TCP &&
		    (p[14 + 20 + 13] & 0x12) == 0x12)
			synack = true;
	}
	rte_pktmbuf_free_bulk(out, n);
	return synack;
}

/* Feeds m; true when the stack answered with a SYN-ACK. */
static bool syn_acked(struct rte_mbuf *m)
{
	struct rte_mbuf *out[8];

	dn_input_burst(g_env.lc, &m, 1);
	return has_synack(out, dt_sent(&g_env, out, 8));
}

static uint64_t len_drops(void) { return dn_lcore_stats(g_env.lc)->drops[DN_DROP_IP_LEN]; }

/* The frames below only lie; this one, cut the same way, is answered. */
static void test_be_dpdk_chained_syn_answered(void **state)
{
	uint8_t b[FRAME_LEN];

	(void)state;
	build_syn(b);
	/* TCP's header straddles the buffers: the backend linearizes the frame. */
	assert_true(syn_acked(chain2(b, 40, FRAME_LEN)));
	assert_int_equal(len_drops(), 0);
}

/* pkt_len says 54 bytes, the buffer holds 40: the TCP header's rest was never received. */
static void test_be_dpdk_pkt_len_past_buffer_dropped(void **state)
{
	uint8_t b[FRAME_LEN];
	struct rte_mbuf *m;

	(void)state;
	build_syn(b);
	m = dt_frame(&g_env, b, FRAME_LEN);
	assert_non_null(m);
	m->data_len = 40; /* the bytes past it are in the buffer, stale as far as TCP knows */
	m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	assert_false(syn_acked(m));
	assert_int_equal(len_drops(), 1);
}

/* Two buffers, nb_segs 1: read as one, TCP would run past the first buffer. */
static void test_be_dpdk_chain_longer_than_nb_segs_dropped(void **state)
{
	uint8_t b[FRAME_LEN];
	struct rte_mbuf *m;

	(void)state;
	build_syn(b);
	m = chain2(b, 40, FRAME_LEN);
	m->nb_segs = 1;
	m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	assert_false(syn_acked(m));
	assert_int_equal(len_drops(), 1);
}

/* The buffers hold 10 bytes more than pkt_len: linearizing would copy them past it. */
static void test_be_dpdk_buffers_past_pkt_len_dropped(void **state)
{
	uint8_t b[FRAME_LEN + 10] = {0};
	struct rte_mbuf *m;

	(void)state;
	build_syn(b);
	m = chain2(b, FRAME_LEN, FRAME_LEN + 10);
	m->pkt_len = FRAME_LEN;
	assert_false(syn_acked(m));
	assert_int_equal(len_drops(), 1);
}

/*
 * A round's answer reaches the device before tl_poll returns. Left in the lcore's software
 * Tx queue, it went out in the next round, after that round's Rx poll: every request and
 * reply waited a round.
 */
static void test_be_dpdk_answer_leaves_in_its_round(void **state)
{
	struct bfx *f = *state;
	uint8_t b[FRAME_LEN];
	struct rte_mbuf *m, *out[8];

	build_syn(b);
	m = dt_frame(&g_env, b, FRAME_LEN);
	assert_non_null(m);
	/* net_ring loops its Tx to its Rx: the SYN is the round's Rx burst. */
	assert_int_equal(rte_eth_tx_burst(dn_port_id(g_env.port), 0, &m, 1), 1);
	assert_true(tl_poll(f->tl, 0) > 0);
	assert_false(dn_tx_pending(g_env.lc));
	/* Read from the ring itself: dt_sent would flush the Tx queue first. */
	assert_true(has_synack(out, rte_eth_rx_burst(dn_port_id(g_env.port), 0, out, 8)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_be_dpdk_chained_syn_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_be_dpdk_pkt_len_past_buffer_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_be_dpdk_chain_longer_than_nb_segs_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_be_dpdk_buffers_past_pkt_len_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_be_dpdk_answer_leaves_in_its_round, setup,
						teardown),
	};

	if (dt_eal_init() < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	int rc = cmocka_run_group_tests_name("transport dpdk backend input", tests, group_setup,
					     group_teardown);
	dn_eal_fini();
	dt_eal_remove_runtime_dir();
	return rc;
}
