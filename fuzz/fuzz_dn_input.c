/*
 * fuzz_dn_input.c — libFuzzer harness for dpdk_net's Ethernet/ARP/IPv4/ICMP input,
 * dn_input_burst (dpdk_net/dn.h), on a real PMD: EAL in memory with a net_ring port,
 * set up once by dpdk_net/tests/dn_testlib.c (linked in, not copied).
 *
 * Call chain exercised: (rte_eth_rx_burst, simulated by mbufs from the port's own pool)
 * -> dn_input_burst -> dn_arp_input | dn_ip_input -> ICMP echo reply | l4_input hook
 * -> dn_tx_enqueue -> the ring (drained and freed by the harness).
 *
 * Input layout: up to DN_BURST frames, each
 *   u8  fix   bit0 Ethernet destination := our MAC, bit1 := broadcast (bit0 wins);
 *             bit2 EtherType := IPv4, bit3 := ARP (bit2 wins); bit4 IPv4: version/IHL
 *             := 0x45 unless the frame says otherwise in bit6, destination := our
 *             address and header checksum fixed (ARP: target := our address); bit5
 *             ICMP checksum fixed; bit6 keep the fuzzed version/IHL
 *   u16 len   frame length (mod 1601), then the frame bytes
 * The fix bits let the fuzzer reach past the checks a random frame fails first.
 *
 * Checked besides ASan/UBSan: after each input every mbuf is back in the pool, except
 * those dpdk_net legitimately parks waiting for ARP resolution.
 */
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_icmp.h>
#include <rte_mempool.h>

#include "dpdk_net/tests/dn_testlib.h"
#include "fuzz/fuzz_util.h"

#define DNF_MAX_FRAME 1600u

/* One EAL and port per process: libFuzzer runs every input in this process. */
static struct dt_env dnf_env;

static void dnf_l4(void *arg, struct dn_lcore *lc, struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t i, sum = 0;

	(void)arg;
	(void)lc;
	FH_CHECK(m->l3_len >= 20 && m->l3_len <= rte_pktmbuf_data_len(m));
	for (i = 0; i < rte_pktmbuf_data_len(m); i++)
		sum += p[i];
	(void)sum;
	rte_pktmbuf_free(m);
}

/*
 * libFuzzer leaves through exit(): release the port and EAL then, and remove EAL's
 * (empty, with --no-shconf) runtime directory, which rte_eal_cleanup leaves behind.
 */
static void dnf_fini(void)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	dt_port_down(&dnf_env);
	dn_eal_fini();
	(void)rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct dn_hooks hooks = {.l4_input = dnf_l4};

	(void)argc;
	(void)argv;
	FH_CHECK(dt_eal_init() >= 0);
	FH_CHECK(dt_port_up(&dnf_env) == 0);
	dn_lcore_set_hooks(dnf_env.lc, &hooks);
	FH_CHECK(atexit(dnf_fini) == 0);
	return 0;
}

static void dnf_fix_ip(uint8_t *f, uint16_t len, uint8_t fix)
{
	struct rte_ipv4_hdr *ip = dt_ip(f);
	uint32_t ihl;

	if (len < RTE_ETHER_HDR_LEN + sizeof(*ip))
		return;
	if (!(fix & 0x40))
		ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->dst_addr = rte_cpu_to_be_32(DT_OUR_IP);
	ihl = (ip->version_ihl & 0xfu) * 4u;
	if (ihl >= sizeof(*ip) && RTE_ETHER_HDR_LEN + ihl <= len)
		dt_ip_recsum(f);
	if ((fix & 0x20) && ip->next_proto_id == IPPROTO_ICMP && ihl >= sizeof(*ip)) {
		uint32_t off = RTE_ETHER_HDR_LEN + ihl, ilen = len - off;
		struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(f + off);
		if (off + sizeof(*icmp) <= len) {
			icmp->icmp_cksum = 0;
			icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, ilen);
		}
	}
}

static void dnf_fix(uint8_t *f, uint16_t len, uint8_t fix)
{
	static const struct rte_ether_addr bcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;

	if (len < RTE_ETHER_HDR_LEN)
		return;
	if (fix & 1)
		eth->dst_addr = *dn_port_mac(dnf_env.port);
	else if (fix & 2)
		eth->dst_addr = bcast;
	if (fix & 4)
		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	else if (fix & 8)
		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	if (!(fix & 0x10))
		return;
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
		dnf_fix_ip(f, len, fix);
	} else if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP) &&
		   len >= RTE_ETHER_HDR_LEN + sizeof(struct rte_arp_hdr)) {
		struct rte_arp_hdr *a = (struct rte_arp_hdr *)(f + RTE_ETHER_HDR_LEN);
		a->arp_data.arp_tip = rte_cpu_to_be_32(DT_OUR_IP);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fh_in in = {data, size};
	struct rte_mbuf *burst[DN_BURST];
	uint8_t frame[DNF_MAX_FRAME];
	uint16_t n = 0;
	unsigned pool_size = dnf_env.pool->size;

	while (in.n > 0 && n < DN_BURST) {
		uint8_t fix = fh_u8(&in);
		uint16_t len = (uint16_t)(fh_u16(&in) % (DNF_MAX_FRAME + 1u));
		size_t got;
		const uint8_t *p = fh_take(&in, len, &got);
		memcpy(frame, p, got);
		dnf_fix(frame, (uint16_t)got, fix);
		burst[n] = dt_frame(&dnf_env, frame, (uint16_t)got);
		FH_CHECK(burst[n] != NULL);
		n++;
	}
	if (n > 0)
		dn_input_burst(dnf_env.lc, burst, n);
	dt_drain(&dnf_env);
	FH_CHECK(dnf_env.lc->n_pending <= DN_PENDING_MAX);
	FH_CHECK(rte_mempool_avail_count(dnf_env.pool) + dnf_env.lc->n_pending == pool_size);
	return 0;
}
