/*
 * wharf-pktgen — the raw PMD packet rate of a link, the ceiling every wharf figure is
 * measured against: no ARP, no IP, no TCP, just bursts of pre-built frames.
 *
 *   wharf-pktgen [EAL args] -- (--tx | --rx) [--seconds S] [--size BYTES]
 *
 * --tx sends bursts of 32 frames of --size bytes (default 64, a UDP datagram to a
 * broadcast MAC) as fast as the device takes them for S seconds; --rx counts what arrives
 * until S seconds pass after the first frame (or a signal). Each prints one JSON line:
 *   {"role":"rx","pkts":N,"bytes":B,"seconds":s,"mpps":x,"gbit_per_s":y}
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "dpdk_net/dn.h"

struct pg_opts {
	bool tx;
	double seconds;
	uint32_t size;
};

static volatile int g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int parse(int argc, char **argv, struct pg_opts *o)
{
	static const struct option lo[] = {
		{"tx", no_argument, 0, 't'}, {"rx", no_argument, 0, 'r'},
		{"seconds", required_argument, 0, 's'}, {"size", required_argument, 0, 'z'},
		{0, 0, 0, 0}};
	int c, roles = 0;
	char *end;

	*o = (struct pg_opts){.seconds = 3, .size = 64};
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 't': o->tx = true; roles++; break;
		case 'r': o->tx = false; roles++; break;
		case 's':
			o->seconds = strtod(optarg, &end);
			if (*end != '\0' || !(o->seconds > 0 && o->seconds <= 3600)) {
				fprintf(stderr, "wharf-pktgen: --seconds: expected (0, 3600], got '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case 'z': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v < 60 || v > 1514) {
				fprintf(stderr, "wharf-pktgen: --size: expected 60..1514, got '%s'\n", optarg);
				return -EINVAL;
			}
			o->size = (uint32_t)v;
			break;
		}
		default:
			return -EINVAL;
		}
	}
	if (roles != 1) {
		fprintf(stderr, "wharf-pktgen: give exactly one of --tx, --rx\n");
		return -EINVAL;
	}
	return 0;
}

static void frame_template(uint8_t *b, uint32_t size, const struct rte_ether_addr *src)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)b;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	memset(b, 0, size);
	memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
	eth->src_addr = *src;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(size - sizeof(*eth)));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0xC6120901); /* 198.18.9.1 */
	ip->dst_addr = rte_cpu_to_be_32(0xC6120902);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(9);
	udp->dst_port = rte_cpu_to_be_16(9);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(size - sizeof(*eth) - sizeof(*ip)));
}

static void report(const char *role, uint64_t pkts, uint64_t bytes, double secs)
{
	printf("{\"role\":\"%s\",\"pkts\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%.3f,"
	       "\"mpps\":%.3f,\"gbit_per_s\":%.3f}\n", role, pkts, bytes, secs,
	       secs > 0 ? (double)pkts / secs / 1e6 : 0, secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0);
	fflush(stdout);
}

static void run_tx(uint16_t port, struct rte_mempool *mp, const struct pg_opts *o)
{
	struct rte_mbuf *b[DN_BURST];
	struct rte_ether_addr mac;
	uint8_t tmpl[1514];
	uint64_t hz = rte_get_tsc_hz(), t0 = rte_rdtsc(), end = t0 + (uint64_t)(o->seconds * (double)hz);
	uint64_t pkts = 0;

	rte_eth_macaddr_get(port, &mac);
	frame_template(tmpl, o->size, &mac);
	while (!g_stop && rte_rdtsc() < end) {
		if (rte_pktmbuf_alloc_bulk(mp, b, DN_BURST) != 0)
			continue;
		for (int i = 0; i < DN_BURST; i++)
			rte_memcpy(rte_pktmbuf_append(b[i], (uint16_t)o->size), tmpl, o->size);
		uint16_t n = rte_eth_tx_burst(port, 0, b, DN_BURST);
		pkts += n;
		if (n < DN_BURST)
			rte_pktmbuf_free_bulk(b + n, DN_BURST - n);
	}
	report("tx", pkts, pkts * o->size, (double)(rte_rdtsc() - t0) / (double)hz);
}

static void run_rx(uint16_t port, const struct pg_opts *o)
{
	struct rte_mbuf *b[DN_BURST];
	uint64_t hz = rte_get_tsc_hz(), t0 = 0, last = 0, pkts = 0, bytes = 0;
	uint64_t give_up = rte_rdtsc() + (uint64_t)((o->seconds + 30) * (double)hz);

	while (!g_stop) {
		uint16_t n = rte_eth_rx_burst(port, 0, b, DN_BURST);
		uint64_t now = rte_rdtsc();

		if (n == 0) {
			/* Done once the sender has been quiet for 100 ms after its run. */
			if (t0 != 0 && now - last > hz / 10 && now - t0 > (uint64_t)(o->seconds * (double)hz))
				break;
			if (t0 == 0 && now > give_up)
				break;
			continue;
		}
		if (t0 == 0)
			t0 = now;
		last = now;
		pkts += n;
		for (uint16_t i = 0; i < n; i++)
			bytes += rte_pktmbuf_pkt_len(b[i]);
		rte_pktmbuf_free_bulk(b, n);
	}
	report("rx", pkts, bytes, t0 ? (double)(last - t0) / (double)hz : 0);
}

int main(int argc, char **argv)
{
	char err[256];
	struct pg_opts o;
	struct dn_port *port;
	struct dn_lcore *lc;
	int n;

	n = dn_eal_init(argc, argv, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "wharf-pktgen: %s\n", err);
		return 1;
	}
	argv[n] = argv[0];
	if (parse(argc - n, argv + n, &o) != 0) {
		dn_eal_fini();
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct dn_config cfg = {.port_id = DN_PORT_AUTO, .no_l3 = true, .promiscuous = true,
				.idle = DN_IDLE_POLL};
	if (dn_port_create(&cfg, &port, err, sizeof(err)) != 0 ||
	    dn_lcore_create(port, 0, NULL, &lc) != 0) {
		fprintf(stderr, "wharf-pktgen: %s\n", err);
		dn_eal_fini();
		return 1;
	}
	if (o.tx) {
		/* The receiver's link may come up a moment after ours. */
		for (int i = 0; i < 300 && !dn_port_link_up(port); i++)
			rte_delay_ms(10);
		run_tx(dn_port_id(port), dn_lcore_pool(lc), &o);
	} else {
		run_rx(dn_port_id(port), &o);
	}
	dn_lcore_destroy(lc);
	dn_port_destroy(port);
	dn_eal_fini();
	return 0;
}
