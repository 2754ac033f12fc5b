/*
 * test_dn_input.c — Ethernet/ARP/IPv4/ICMP input and IPv4 output of dpdk_net, on a real
 * PMD (net_ring, Tx looped back to Rx) in an in-memory EAL. Every malformed frame must land
 * on its own drop counter; every test ends with the mempool full again.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <cmocka.h>

#include <rte_icmp.h>

#include "dn_testlib.h"

static struct dt_env g_env;

/* The port lives for the whole group (closing a net_ring port releases it for good). */
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
	*state = &g_env;
	memset(&g_env.lc->stats, 0, sizeof(g_env.lc->stats));
	dn_lcore_set_hooks(g_env.lc, &(struct dn_hooks){0});
	return 0;
}

static int teardown(void **state)
{
	struct dt_env *e = *state;

	if (!dt_pool_full(e)) {
		fprintf(stderr, "mempool not full at teardown: an mbuf leaked\n");
		return -1;
	}
	return 0;
}

static const struct rte_ether_addr *our_mac(struct dt_env *e) { return dn_port_mac(e->port); }

static void input(struct dt_env *e, const uint8_t *b, uint16_t len)
{
	struct rte_mbuf *m = dt_frame(e, b, len);

	assert_non_null(m);
	dn_input_burst(e->lc, &m, 1);
}

static uint64_t drops(struct dt_env *e, enum dn_drop d) { return dn_lcore_stats(e->lc)->drops[d]; }

/* Feeds the frame and checks it was dropped for exactly this reason and nothing was sent. */
static void expect_drop(struct dt_env *e, const uint8_t *b, uint16_t len, enum dn_drop d)
{
	struct rte_mbuf *out[4];
	uint64_t before[DN_DROP_MAX];

	memcpy(before, dn_lcore_stats(e->lc)->drops, sizeof(before));
	input(e, b, len);
	for (int i = 0; i < DN_DROP_MAX; i++)
		if (i != (int)d && dn_lcore_stats(e->lc)->drops[i] != before[i])
			fail_msg("dropped as %s, expected %s", dn_drop_name(i), dn_drop_name(d));
	assert_int_equal(drops(e, d), before[d] + 1);
	assert_int_equal(dt_sent(e, out, 4), 0);
}

static void test_dn_arp_request_for_us_answered(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[128];
	struct rte_mbuf *out[4];
	struct rte_ether_addr mac;
	uint16_t len = dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP);

	input(e, b, len);
	assert_int_equal(dt_sent(e, out, 4), 1);
	struct rte_arp_hdr *a = rte_pktmbuf_mtod_offset(out[0], struct rte_arp_hdr *,
							sizeof(struct rte_ether_hdr));
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(out[0], struct rte_ether_hdr *);
	assert_int_equal(rte_be_to_cpu_16(a->arp_opcode), RTE_ARP_OP_REPLY);
	assert_true(rte_is_same_ether_addr(&a->arp_data.arp_sha, our_mac(e)));
	assert_int_equal(rte_be_to_cpu_32(a->arp_data.arp_sip), DT_OUR_IP);
	assert_int_equal(rte_be_to_cpu_32(a->arp_data.arp_tip), DT_PEER_IP);
	assert_true(rte_is_same_ether_addr(&eth->dst_addr, &dt_peer_mac));
	rte_pktmbuf_free(out[0]);
	/* The requester was learnt on the way. */
	assert_int_equal(dn_arp_lookup(e->port, DT_PEER_IP, &mac), 0);
	assert_true(rte_is_same_ether_addr(&mac, &dt_peer_mac));
}

static void test_dn_arp_malformed_dropped(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[128];
	uint16_t len = dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP);
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(b + sizeof(struct rte_ether_hdr));

	expect_drop(e, b, len - 1, DN_DROP_ARP_MALFORMED); /* truncated */
	a->arp_hlen = 8;
	expect_drop(e, b, len, DN_DROP_ARP_MALFORMED);
	a->arp_hlen = 6;
	a->arp_opcode = rte_cpu_to_be_16(9);
	expect_drop(e, b, len, DN_DROP_ARP_MALFORMED);
	a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	a->arp_protocol = rte_cpu_to_be_16(0x86dd);
	expect_drop(e, b, len, DN_DROP_ARP_MALFORMED);
}

static void test_dn_arp_request_for_other_dropped(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[128];
	uint16_t len = dt_build_arp(b, our_mac(e), RTE_ARP_OP_REQUEST, DT_PEER_IP, DT_OUR_IP + 5);

	expect_drop(e, b, len, DN_DROP_ARP_NOT_US);
}

static void test_dn_icmp_echo_answered(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[256];
	struct rte_mbuf *out[4];
	uint16_t len = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 56);

	input(e, b, len);
	assert_int_equal(dt_sent(e, out, 4), 1);
	assert_int_equal(rte_pktmbuf_pkt_len(out[0]), len);
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(out[0], struct rte_ipv4_hdr *,
							  sizeof(struct rte_ether_hdr));
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(ip + 1);
	assert_int_equal(rte_be_to_cpu_32(ip->src_addr), DT_OUR_IP);
	assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), DT_PEER_IP);
	assert_int_equal(rte_raw_cksum(ip, sizeof(*ip)), 0xffff);
	assert_int_equal(icmp->icmp_type, RTE_IP_ICMP_ECHO_REPLY);
	assert_int_equal(rte_raw_cksum(icmp, len - sizeof(struct rte_ether_hdr) - sizeof(*ip)), 0xffff);
	assert_int_equal(rte_be_to_cpu_16(icmp->icmp_seq_nb), 9);
	assert_int_equal(memcmp(icmp + 1, b + len - 56, 56), 0);
	assert_int_equal(dn_lcore_stats(e->lc)->icmp_echo_replies, 1);
	rte_pktmbuf_free(out[0]);
}

static void test_dn_icmp_echo_padded_frame_trimmed(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[256];
	struct rte_mbuf *out[4];
	uint16_t len = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 4);

	/* A 46-byte frame gets padded to the Ethernet minimum of 60 with junk. */
	memset(b + len, 0xee, 60 - len);
	input(e, b, 60);
	assert_int_equal(dt_sent(e, out, 4), 1);
	assert_int_equal(rte_pktmbuf_pkt_len(out[0]), len);
	rte_pktmbuf_free(out[0]);
}

static void test_dn_eth_malformed_dropped(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[256];
	uint16_t len = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)b;

	expect_drop(e, b, 10, DN_DROP_ETH_TRUNC);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	expect_drop(e, b, len, DN_DROP_ETH_TYPE);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	eth->dst_addr.addr_bytes[5] ^= 1;
	expect_drop(e, b, len, DN_DROP_ETH_DST);
}

static void test_dn_ipv4_malformed_dropped(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[256], good[256];
	uint16_t len = dt_build_echo(good, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8);
	struct rte_ipv4_hdr *ip = dt_ip(b);

#define FRESH() memcpy(b, good, len)
	FRESH();
	expect_drop(e, b, sizeof(struct rte_ether_hdr) + 12, DN_DROP_IP_TRUNC);
	FRESH(); ip->version_ihl = 0x65; dt_ip_recsum(b);
	expect_drop(e, b, len, DN_DROP_IP_VERSION);
	FRESH(); ip->version_ihl = 0x44; /* IHL 16 bytes: below the minimum */
	expect_drop(e, b, len, DN_DROP_IP_IHL);
	FRESH(); ip->version_ihl = 0x4f; /* 60-byte header in a 42-byte packet */
	expect_drop(e, b, len, DN_DROP_IP_IHL);
	FRESH(); ip->total_length = rte_cpu_to_be_16(len); dt_ip_recsum(b); /* past the frame */
	expect_drop(e, b, len, DN_DROP_IP_LEN);
	FRESH(); ip->total_length = rte_cpu_to_be_16(12); dt_ip_recsum(b); /* below the header */
	expect_drop(e, b, len, DN_DROP_IP_LEN);
	FRESH(); ip->hdr_checksum ^= 0x0100;
	expect_drop(e, b, len, DN_DROP_IP_CKSUM);
	FRESH(); ip->time_to_live = 0; dt_ip_recsum(b);
	expect_drop(e, b, len, DN_DROP_IP_TTL);
	FRESH(); ip->dst_addr = rte_cpu_to_be_32(DT_OUR_IP + 1); dt_ip_recsum(b);
	expect_drop(e, b, len, DN_DROP_IP_DST);
	FRESH(); ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG); dt_ip_recsum(b);
	expect_drop(e, b, len, DN_DROP_IP_FRAG);
	FRESH(); ip->fragment_offset = rte_cpu_to_be_16(185); dt_ip_recsum(b); /* a later fragment */
	expect_drop(e, b, len, DN_DROP_IP_FRAG);
	FRESH(); ip->next_proto_id = IPPROTO_UDP; dt_ip_recsum(b); /* no L4 hook installed */
	expect_drop(e, b, len, DN_DROP_IP_PROTO);
#undef FRESH
}

static void test_dn_icmp_malformed_dropped(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[256];
	uint16_t len = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 8);
	uint8_t *icmp = b + sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr);

	icmp[6] ^= 0xff; /* payload changed, checksum not */
	expect_drop(e, b, len, DN_DROP_ICMP_CKSUM);
	len = dt_build_echo(b, our_mac(e), 13 /* timestamp request */, 8);
	expect_drop(e, b, len, DN_DROP_ICMP_TYPE);
	len = dt_build_ipv4(b, our_mac(e), IPPROTO_ICMP, DT_PEER_IP, DT_OUR_IP, "\x08\x00\xf7\xff", 4);
	expect_drop(e, b, len, DN_DROP_ICMP_TRUNC);
}

struct l4_seen {
	unsigned calls;
	uint16_t l3_len;
	uint8_t proto;
	uint32_t pkt_len;
};

static void l4_hook(void *arg, struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct l4_seen *s = arg;
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod(m, struct rte_ipv4_hdr *);

	(void)lc;
	s->calls++;
	s->l3_len = m->l3_len;
	s->proto = ip->next_proto_id;
	s->pkt_len = rte_pktmbuf_pkt_len(m);
	rte_pktmbuf_free(m);
}

static void test_dn_l4_hook_gets_ip_packet(void **state)
{
	struct dt_env *e = *state;
	struct l4_seen seen = {0};
	struct dn_hooks h = {.l4_input = l4_hook, .arg = &seen};
	uint8_t b[256], tcp[40] = {0};
	uint16_t len = dt_build_ipv4(b, our_mac(e), IPPROTO_TCP, DT_PEER_IP, DT_OUR_IP, tcp, 40);

	dn_lcore_set_hooks(e->lc, &h);
	input(e, b, len);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.l3_len, 20);
	assert_int_equal(seen.proto, IPPROTO_TCP);
	assert_int_equal(seen.pkt_len, 60);
	dn_lcore_set_hooks(e->lc, &(struct dn_hooks){0});
}

static void test_dn_ip_send_waits_for_arp(void **state)
{
	struct dt_env *e = *state;
	struct rte_mbuf *out[4], *m = rte_pktmbuf_alloc(e->pool);
	uint8_t b[128];
	uint8_t *tcp = (uint8_t *)rte_pktmbuf_append(m, 20);
	const uint32_t dst = DT_PEER_IP + 10;

	memset(tcp, 0, 20);
	tcp[12] = 5 << 4;
	assert_int_equal(dn_ip_send(e->lc, m, dst, IPPROTO_TCP, DN_TX_L4_CSUM), -EAGAIN);
	/* The next hop is unknown: an ARP request went out, the packet waits. */
	assert_int_equal(dt_sent(e, out, 4), 1);
	struct rte_arp_hdr *a = rte_pktmbuf_mtod_offset(out[0], struct rte_arp_hdr *,
							sizeof(struct rte_ether_hdr));
	assert_int_equal(rte_be_to_cpu_16(a->arp_opcode), RTE_ARP_OP_REQUEST);
	assert_int_equal(rte_be_to_cpu_32(a->arp_data.arp_tip), dst);
	rte_pktmbuf_free(out[0]);
	/* The reply arrives; the pending packet leaves with the learnt MAC and valid checksums. */
	input(e, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REPLY, dst, DT_OUR_IP));
	dn_loop_once(e->lc, rte_rdtsc() + rte_get_tsc_hz());
	assert_int_equal(dt_sent(e, out, 4), 1);
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(out[0], struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	assert_true(rte_is_same_ether_addr(&eth->dst_addr, &dt_peer_mac));
	assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), dst);
	assert_int_equal(rte_raw_cksum(ip, sizeof(*ip)), 0xffff);
	assert_int_equal(rte_ipv4_udptcp_cksum_verify(ip, ip + 1), 0);
	rte_pktmbuf_free(out[0]);
}

static void test_dn_ip_send_off_link_without_gateway_dropped(void **state)
{
	struct dt_env *e = *state;
	struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);

	assert_non_null(rte_pktmbuf_append(m, 20));
	assert_int_equal(dn_ip_send(e->lc, m, 0x0a000001, IPPROTO_TCP, 0), -ENETUNREACH);
	assert_int_equal(drops(e, DN_DROP_NO_ROUTE), 1);
}

/* Off the subnet through the gateway: ARP asks for the gateway, the frame carries its MAC. */
static void test_dn_ip_send_off_link_via_gateway(void **state)
{
	struct dt_env *e = *state;
	const uint32_t gw = DT_PEER_IP + 20, far = 0x0a000001; /* 198.18.0.22, 10.0.0.1 */
	struct rte_mbuf *out[4];
	uint8_t b[128];

	e->port->gateway = gw;
	for (int round = 0; round < 2; round++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
		uint8_t *tcp = (uint8_t *)rte_pktmbuf_append(m, 20);

		memset(tcp, 0, 20);
		tcp[12] = 5 << 4;
		/* first: the gateway's MAC is unknown, an ARP request for it goes out */
		assert_int_equal(dn_ip_send(e->lc, m, far, IPPROTO_TCP, DN_TX_L4_CSUM),
				 round == 0 ? -EAGAIN : 0);
		if (round == 0) {
			assert_int_equal(dt_sent(e, out, 4), 1);
			struct rte_arp_hdr *a = rte_pktmbuf_mtod_offset(out[0], struct rte_arp_hdr *,
									sizeof(struct rte_ether_hdr));
			assert_int_equal(rte_be_to_cpu_16(a->arp_opcode), RTE_ARP_OP_REQUEST);
			assert_int_equal(rte_be_to_cpu_32(a->arp_data.arp_tip), gw);
			rte_pktmbuf_free(out[0]);
			input(e, b, dt_build_arp(b, our_mac(e), RTE_ARP_OP_REPLY, gw, DT_OUR_IP));
			/* later than the last test's loop round (+1 s), so the ARP timer is due */
			dn_loop_once(e->lc, rte_rdtsc() + 2 * rte_get_tsc_hz());
		}
		assert_int_equal(dt_sent(e, out, 4), 1);
		struct rte_ether_hdr *eth = rte_pktmbuf_mtod(out[0], struct rte_ether_hdr *);
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
		assert_int_equal(rte_be_to_cpu_16(eth->ether_type), RTE_ETHER_TYPE_IPV4);
		assert_true(rte_is_same_ether_addr(&eth->dst_addr, &dt_peer_mac));
		assert_int_equal(rte_be_to_cpu_32(ip->dst_addr), far);
		assert_int_equal(rte_ipv4_udptcp_cksum_verify(ip, ip + 1), 0);
		rte_pktmbuf_free(out[0]);
	}
	e->port->gateway = 0;
	assert_int_equal(drops(e, DN_DROP_NO_ROUTE), 0);
}

/*
 * A chain longer than the device takes for one frame (tx_seg_max: i40e and ice take 8, mlx5
 * its dev_info's nb_mtu_seg_max) leaves as one buffer with the same bytes: flattened in place
 * where its first buffer has room, copied into a new one where not.
 */
static void test_dn_ip_send_chain_over_device_limit_flattened(void **state)
{
	struct dt_env *e = *state;
	const uint16_t piece = 300, saved = e->port->tx_seg_max;
	struct rte_mbuf *out[4];
	uint8_t flat[20 + 3 * 300];

	dn_arp_learn(e->port, DT_PEER_IP, &dt_peer_mac, true);
	e->port->tx_seg_max = 2;
	for (int room = 0; room < 2; room++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
		uint8_t *tcp;

		if (room == 0) { /* a first buffer whose tailroom cannot take the rest: a copy */
			uint16_t fill = (uint16_t)(rte_pktmbuf_tailroom(m) - 40);

			assert_non_null(rte_pktmbuf_append(m, fill));
			rte_pktmbuf_adj(m, fill);
		}
		tcp = (uint8_t *)rte_pktmbuf_append(m, 20);
		memset(tcp, 0, 20);
		tcp[12] = 5 << 4;
		memcpy(flat, tcp, 20);
		for (int i = 0; i < 3; i++) {
			struct rte_mbuf *s = rte_pktmbuf_alloc(e->pool);
			uint8_t *d = (uint8_t *)rte_pktmbuf_append(s, piece);

			for (uint16_t k = 0; k < piece; k++)
				d[k] = flat[20 + i * piece + k] = (uint8_t)(i * 7 + k);
			assert_int_equal(rte_pktmbuf_chain(m, s), 0);
		}
		assert_int_equal(m->nb_segs, 4);
		assert_int_equal(dn_ip_send(e->lc, m, DT_PEER_IP, IPPROTO_TCP, DN_TX_L4_CSUM), 0);
		assert_int_equal(dt_sent(e, out, 4), 1);
		assert_int_equal(out[0]->nb_segs, 1);
		struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(out[0], struct rte_ipv4_hdr *,
								  sizeof(struct rte_ether_hdr));
		assert_int_equal(rte_pktmbuf_pkt_len(out[0]),
				 sizeof(struct rte_ether_hdr) + sizeof(*ip) + sizeof(flat));
		assert_int_equal(rte_ipv4_udptcp_cksum_verify(ip, ip + 1), 0);
		flat[16] = ((uint8_t *)(ip + 1))[16];
		flat[17] = ((uint8_t *)(ip + 1))[17];
		assert_memory_equal(ip + 1, flat, sizeof(flat));
		rte_pktmbuf_free(out[0]);
	}
	e->port->tx_seg_max = saved;
	assert_int_equal(drops(e, DN_DROP_TX_REFUSED), 0);
}

/*
 * The buffers a frame may span, from what the device states: its nb_mtu_seg_max, no limit
 * where it leaves that 0 (iavf, and every PMD that fills tx_desc_lim without it), one on a
 * device without RTE_ETH_TX_OFFLOAD_MULTI_SEGS, virtual or not (net_af_xdp).
 */
static void test_dn_tx_seg_max_from_dev_info(void **state)
{
	struct rte_eth_dev_info di;

	(void)state;
	memset(&di, 0, sizeof(di));
	di.tx_offload_capa = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	di.tx_desc_lim.nb_seg_max = 40;
	di.tx_desc_lim.nb_mtu_seg_max = 8;
	assert_int_equal(dn_tx_seg_max(&di), 8);
	di.tx_desc_lim.nb_mtu_seg_max = 0;
	assert_int_equal(dn_tx_seg_max(&di), UINT16_MAX);
	di.tx_offload_capa = RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	assert_int_equal(dn_tx_seg_max(&di), 1);
}

/* A prefix past 32, or a gateway off the subnet or equal to our address: refused at once. */
static void test_dn_port_create_refuses_bad_prefix_or_gateway(void **state)
{
	static const struct { uint8_t prefix; uint32_t gw; const char *why; } bad[] = {
		{ 33, 0, "prefix length 33" },
		{ 24, 0x0a000001, "gateway 10.0.0.1 is not" },
		{ 24, DT_OUR_IP, "gateway 198.18.0.1 is not" },
		{ 32, DT_PEER_IP, "gateway 198.18.0.2 is not" },
	};
	struct dn_port *p = NULL;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dn_config cfg = { .port_id = DN_PORT_AUTO, .ip = DT_OUR_IP,
					 .prefix_len = bad[i].prefix, .gateway = bad[i].gw };
		err[0] = '\0';
		assert_int_equal(dn_port_create(&cfg, &p, err, sizeof(err)), -EINVAL);
		assert_null(p);
		if (strstr(err, bad[i].why) == NULL)
			fail_msg("'%s' does not say '%s'", err, bad[i].why);
	}
}

/* A TCP checksum over a chain of odd-length pieces equals the one over the same bytes flat. */
static void test_dn_l4_cksum_chain_odd_pieces(void **state)
{
	struct dt_env *e = *state;
	static const uint16_t pieces[] = {20 + 33, 1, 7, 64, 3, 1200, 5};
	uint8_t flat[2048];
	struct rte_ipv4_hdr ip = {.version_ihl = RTE_IPV4_VHL_DEF, .next_proto_id = IPPROTO_TCP,
				  .src_addr = rte_cpu_to_be_32(DT_PEER_IP),
				  .dst_addr = rte_cpu_to_be_32(DT_OUR_IP)};
	struct rte_mbuf *head = NULL;
	uint32_t total = 0;

	srand(7);
	for (unsigned i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
		uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, pieces[i]);
		for (uint16_t k = 0; k < pieces[i]; k++)
			d[k] = flat[total + k] = (uint8_t)rand();
		total += pieces[i];
		if (head == NULL)
			head = m;
		else
			assert_int_equal(rte_pktmbuf_chain(head, m), 0);
	}
	flat[16] = flat[17] = 0; /* the checksum field itself */
	rte_pktmbuf_mtod_offset(head, uint8_t *, 16)[0] = 0;
	rte_pktmbuf_mtod_offset(head, uint8_t *, 17)[0] = 0;
	ip.total_length = rte_cpu_to_be_16((uint16_t)(20 + total));
	assert_int_equal(dn_l4_cksum_sw(head, &ip, 0), rte_ipv4_udptcp_cksum(&ip, flat));
	rte_pktmbuf_free(head);
}

/* One sleep's slack bracket on a thread whose own timer slack is 20 us: the values seen. */
static void *slack_bracket(void *arg)
{
	long *seen = arg;
	unsigned long was;

	seen[0] = prctl(PR_SET_TIMERSLACK, 20000ul, 0, 0, 0);
	was = dn_sleep_slack_begin();
	seen[1] = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	dn_sleep_slack_end(was);
	seen[2] = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	return NULL;
}

/*
 * A sleep widens its thread's timer slack to DN_SLEEP_SLACK_NS and gives the thread its own
 * back after. Without it the sleep's timeout timer reprograms the CPU's timer (a hypervisor
 * exit) whenever it would expire before the next tick; what that costs is a figure of make
 * bench (rtt_p99_over_p50_dpdk_sleeping), not of this test. On a thread of its own: the
 * slack the first sleep reads is kept per thread.
 */
static void test_dn_sleep_slack_widened_then_restored(void **state)
{
	long seen[3] = { -1, -1, -1 };
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, slack_bracket, seen), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(seen[0], 0);
	assert_int_equal(seen[1], DN_SLEEP_SLACK_NS);
	assert_int_equal(seen[2], 20000);
}

/*
 * dn_raw_cksum equals DPDK's rte_raw_cksum for every length 0..2100 at every alignment 0..7,
 * on random bytes and on all-0xff bytes (the carries), and dn_l4_cksum_ok accepts a segment
 * checksummed by DPDK and refuses it with any one bit flipped.
 */
static void test_dn_raw_cksum_matches_dpdk(void **state)
{
	static uint8_t buf[2200];
	struct rte_ipv4_hdr ip = {.version_ihl = RTE_IPV4_VHL_DEF, .next_proto_id = IPPROTO_TCP,
				  .src_addr = rte_cpu_to_be_32(DT_PEER_IP),
				  .dst_addr = rte_cpu_to_be_32(DT_OUR_IP)};
	uint8_t *l4 = buf + 2;

	(void)state;
	srand(11);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pass == 0 ? (uint8_t)rand() : 0xff;
		for (size_t len = 0; len <= 2100; len++)
			for (size_t a = 0; a < 8; a++)
				assert_int_equal(dn_raw_cksum(buf + a, len), rte_raw_cksum(buf + a, len));
	}
	for (int i = 0; i < 1500; i++)
		l4[i] = (uint8_t)rand();
	for (uint32_t len = 20; len <= 1480; len += 97) {
		uint16_t ck;
		ip.total_length = rte_cpu_to_be_16((uint16_t)(20 + len));
		l4[16] = l4[17] = 0;
		ck = rte_ipv4_udptcp_cksum(&ip, l4);
		memcpy(l4 + 16, &ck, 2);
		assert_true(dn_l4_cksum_ok(&ip, l4, len));
		for (uint32_t bit = 0; bit < len * 8; bit += 61) {
			l4[bit / 8] ^= (uint8_t)(1u << bit % 8);
			assert_false(dn_l4_cksum_ok(&ip, l4, len));
			l4[bit / 8] ^= (uint8_t)(1u << bit % 8);
		}
	}
}

static void test_dn_random_frames_never_crash(void **state)
{
	struct dt_env *e = *state;
	uint8_t b[1600];
	uint16_t base = dt_build_echo(b, our_mac(e), RTE_IP_ICMP_ECHO_REQUEST, 64);
	uint8_t good[1600];

	memcpy(good, b, base);
	srand(42);
	for (int i = 0; i < 20000; i++) {
		uint16_t len = (uint16_t)(rand() % 200);
		memcpy(b, good, base);
		/* Flip a few random bytes past the MAC addresses: every layer gets its share. */
		for (int k = rand() % 6; k >= 0; k--)
			b[12 + rand() % (base - 12)] = (uint8_t)rand();
		input(e, b, len ? len : 1);
		if (i % 64 == 0)
			dt_drain(e);
	}
	const struct dn_stats *s = dn_lcore_stats(e->lc);
	uint64_t dropped = 0;
	for (int d = 0; d < DN_DROP_MAX; d++)
		dropped += s->drops[d];
	assert_true(dropped > 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dn_arp_request_for_us_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_arp_malformed_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_arp_request_for_other_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_icmp_echo_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_icmp_echo_padded_frame_trimmed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_eth_malformed_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_ipv4_malformed_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_icmp_malformed_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_l4_hook_gets_ip_packet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_ip_send_waits_for_arp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_ip_send_off_link_without_gateway_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dn_ip_send_off_link_via_gateway, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dn_ip_send_chain_over_device_limit_flattened,
						setup, teardown),
		cmocka_unit_test(test_dn_tx_seg_max_from_dev_info),
		cmocka_unit_test(test_dn_port_create_refuses_bad_prefix_or_gateway),
		cmocka_unit_test_setup_teardown(test_dn_l4_cksum_chain_odd_pieces, setup, teardown),
		cmocka_unit_test(test_dn_raw_cksum_matches_dpdk),
		cmocka_unit_test(test_dn_sleep_slack_widened_then_restored),
		cmocka_unit_test_setup_teardown(test_dn_random_frames_never_crash, setup, teardown),
	};

	if (dt_eal_init() < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	int rc = cmocka_run_group_tests_name("dpdk_net input/output", tests, group_setup, group_teardown);
	dn_eal_fini();
	dt_eal_remove_runtime_dir();
	return rc;
}
