/*
 * dn_testlib.c — shared by dpdk_net's tests: EAL in memory with a net_ring port (a real
 * PMD whose Tx ring is its own Rx ring, so what dpdk_net sends can be read back), and
 * frame builders for ARP, IPv4 and ICMP with every field at the test's mercy.
 */
#include "dn_testlib.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_icmp.h>

const struct rte_ether_addr dt_peer_mac = {{0x02, 0, 0, 0, 0, 0x99}};

int dt_eal_init(void)
{
	char prefix[64];
	char *argv[] = {"dn_test", "--no-huge", "-m", "256", "--no-pci", "--no-shconf",
			"--no-telemetry", "--log-level=*:error", "--vdev=net_ring0", "-l", "0",
			"--file-prefix", prefix, NULL};
	char err[128];

	snprintf(prefix, sizeof(prefix), "wharf-dntest-%d", (int)getpid());
	return dn_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, err, sizeof(err));
}

/* EAL leaves its (empty) runtime directory behind even with --no-shconf: remove it. */
void dt_eal_remove_runtime_dir(void)
{
	char dir[128];

	snprintf(dir, sizeof(dir), "/var/run/dpdk/wharf-dntest-%d", (int)getpid());
	rmdir(dir);
}

int dt_port_up(struct dt_env *e)
{
	char err[256];
	struct dn_config cfg = {.port_id = DN_PORT_AUTO, .ip = DT_OUR_IP, .prefix_len = 24,
				.idle = DN_IDLE_POLL, .nb_mbufs = 2047, .nb_rxd = 256, .nb_txd = 256};
	int rc = dn_port_create(&cfg, &e->port, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "dt_port_up: %s\n", err);
		return rc;
	}
	rc = dn_lcore_create(e->port, 0, NULL, &e->lc);
	if (rc == 0)
		e->pool = dn_lcore_pool(e->lc);
	return rc;
}

void dt_port_down(struct dt_env *e)
{
	dn_lcore_destroy(e->lc);
	dn_port_destroy(e->port);
	e->lc = NULL;
	e->port = NULL;
}

uint16_t dt_sent(struct dt_env *e, struct rte_mbuf **out, uint16_t max)
{
	dn_tx_flush(e->lc);
	return rte_eth_rx_burst(dn_port_id(e->port), 0, out, max);
}

void dt_drain(struct dt_env *e)
{
	struct rte_mbuf *m[32];
	uint16_t n;

	while ((n = dt_sent(e, m, 32)) > 0)
		rte_pktmbuf_free_bulk(m, n);
}

bool dt_pool_full(struct dt_env *e)
{
	dt_drain(e);
	return rte_mempool_full(e->pool);
}

struct rte_mbuf *dt_frame(struct dt_env *e, const void *bytes, uint16_t len)
{
	return dt_frame_in(e->pool, bytes, len);
}

struct rte_mbuf *dt_frame_in(struct rte_mempool *pool, const void *bytes, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	void *d;

	if (m == NULL)
		return NULL;
	d = rte_pktmbuf_append(m, len);
	if (d == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(d, bytes, len);
	return m;
}

static void eth_hdr(uint8_t *b, const struct rte_ether_addr *dst, uint16_t type)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)b;

	eth->dst_addr = *dst;
	eth->src_addr = dt_peer_mac;
	eth->ether_type = rte_cpu_to_be_16(type);
}

uint16_t dt_build_arp(uint8_t *b, const struct rte_ether_addr *our_mac, uint16_t op,
		      uint32_t sip, uint32_t tip)
{
	static const struct rte_ether_addr bcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(b + sizeof(struct rte_ether_hdr));

	eth_hdr(b, op == RTE_ARP_OP_REQUEST ? &bcast : our_mac, RTE_ETHER_TYPE_ARP);
	memset(a, 0, sizeof(*a));
	a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = 6;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(op);
	a->arp_data.arp_sha = dt_peer_mac;
	a->arp_data.arp_sip = rte_cpu_to_be_32(sip);
	if (op == RTE_ARP_OP_REPLY)
		a->arp_data.arp_tha = *our_mac;
	a->arp_data.arp_tip = rte_cpu_to_be_32(tip);
	return sizeof(struct rte_ether_hdr) + sizeof(*a);
}

uint16_t dt_build_ipv4(uint8_t *b, const struct rte_ether_addr *our_mac, uint8_t proto,
		       uint32_t src, uint32_t dst, const void *l4, uint16_t l4_len)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(b + sizeof(struct rte_ether_hdr));

	eth_hdr(b, our_mac, RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + l4_len));
	ip->packet_id = rte_cpu_to_be_16(7);
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	memcpy(ip + 1, l4, l4_len);
	return (uint16_t)(sizeof(struct rte_ether_hdr) + sizeof(*ip) + l4_len);
}

uint16_t dt_build_echo(uint8_t *b, const struct rte_ether_addr *our_mac, uint8_t type,
		       uint16_t payload_len)
{
	uint8_t l4[1500];
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)l4;

	icmp->icmp_type = type;
	icmp->icmp_code = 0;
	icmp->icmp_ident = rte_cpu_to_be_16(0x1234);
	icmp->icmp_seq_nb = rte_cpu_to_be_16(9);
	for (uint16_t i = 0; i < payload_len; i++)
		l4[sizeof(*icmp) + i] = (uint8_t)i;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(l4, sizeof(*icmp) + payload_len);
	return dt_build_ipv4(b, our_mac, IPPROTO_ICMP, DT_PEER_IP, DT_OUR_IP, l4,
			     (uint16_t)(sizeof(*icmp) + payload_len));
}

struct rte_ipv4_hdr *dt_ip(uint8_t *frame)
{
	return (struct rte_ipv4_hdr *)(frame + sizeof(struct rte_ether_hdr));
}

void dt_ip_recsum(uint8_t *frame)
{
	struct rte_ipv4_hdr *ip = dt_ip(frame);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, (ip->version_ihl & 0xf) * 4u);
}

uint32_t dt_steer_by_parity(void *arg, const struct dn_flow *f)
{
	(void)arg;
	return f->proto == IPPROTO_TCP ? f->dport & 1u : 0;
}
