/*
 * wharf-pktgen — the raw PMD packet rate of a link, the ceiling every wharf figure is
 * measured against: no ARP, no IP, no TCP, just bursts of pre-built frames.
 *
 *   wharf-pktgen [EAL args] -- (--tx | --rx) [--seconds S] [--size BYTES]
 *                                [--step BYTES [--mtu M] [--piece N] [--plain]]
 *
 * --tx sends bursts of 32 frames of --size bytes (default 64, a UDP datagram to a
 * broadcast MAC) as fast as the device takes them for S seconds; --rx counts what arrives
 * until S seconds pass after the first frame (or a signal). Each prints one JSON line:
 *   {"role":"rx","pkts":N,"bytes":B,"seconds":s,"mpps":x,"gbit_per_s":y}
 *
 * --step BYTES (on both sides) measures the floor under a synchronous step instead: the
 * sender writes BYTES of payload into frames of --size bytes (default the MTU's largest),
 * sending each as soon as it is written, and waits for one frame back, which the receiver
 * sends once that much payload has arrived; then the next step. That is a step's bytes
 * written once, moved by the PMD and acknowledged, with no protocol at all. Frames are
 * written with the line writer fuse packs with (tl_wire.h: non-temporal stores of whole
 * lines), the payload in one piece or, with --piece N, N bytes at a time as a packer
 * appends small tensors; --plain writes with memcpy instead. The sender prints
 *   {"role":"tx","mode":"step","step_bytes":B,"frame_bytes":F,"frames_per_step":f,
 *    "writer":"lines"|"plain","steps":N,"seconds":s,"steps_per_s":x,"us_per_step":y,
 *    "write_us_per_step":w}   (w: writing the frames and handing each to the device)
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

#include "apps/common/wc_args.h"
#include "dpdk_net/dn.h"
#include "transport/tl_wire.h"

struct pg_opts {
	bool tx;
	double seconds;
	uint32_t size;       /* 0: 64, or in step mode the largest frame the MTU allows */
	uint32_t step;       /* payload bytes per step; 0 = rate mode */
	uint16_t mtu;        /* 0 = 1500 */
	bool plain;          /* step mode: memcpy, not the line writer */
	uint32_t piece;      /* step mode: payload written in pieces of this many bytes; 0 = whole */
};

#define PG_HDR (sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr) + \
		sizeof(struct rte_udp_hdr))
#define PG_MAX_FRAME (9000 + RTE_ETHER_HDR_LEN)

static volatile int g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int pg_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	int rc = wc_arg_u64("wharf-pktgen", flag, s, 10, lo, hi, &v);

	if (rc == 0)
		*out = (uint32_t)v;
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-pktgen [EAL args] -- (--tx | --rx) [--seconds S] [--size BYTES]\n"
		   "                    [--step BYTES [--mtu M] [--piece N] [--plain]]\n"
		   "  --tx         send bursts of 32 frames of --size bytes for S seconds\n"
		   "  --rx         count what arrives until S seconds after the first frame\n"
		   "  --seconds    length of the run (default 3, at most 3600)\n"
		   "  --size       frame bytes, 60..MTU+14 (default 64; with --step the MTU's largest)\n"
		   "  --step B     both sides: steps of B payload bytes, each acknowledged by one\n"
		   "               frame back (the floor under a synchronous step, no protocol)\n"
		   "  --mtu M      port MTU 576..9000 (default 1500)\n"
		   "  --piece N    --step sender: write the payload N bytes at a time\n"
		   "  --plain      --step sender: write with memcpy, not the line writer\n"
		   "Prints one JSON line. Exit status: 0 done, 1 run-time failure, 2 bad arguments.\n");
}

static int parse(int argc, char **argv, struct pg_opts *o)
{
	static const struct option lo[] = {
		{"tx", no_argument, 0, 't'}, {"rx", no_argument, 0, 'r'},
		{"seconds", required_argument, 0, 's'}, {"size", required_argument, 0, 'z'},
		{"step", required_argument, 0, 'p'}, {"mtu", required_argument, 0, 'm'},
		{"plain", no_argument, 0, 'P'}, {"piece", required_argument, 0, 'c'},
		{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	int c, roles = 0;
	uint32_t v;
	char *end;

	*o = (struct pg_opts){.seconds = 3};
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
		case 'z':
			if (pg_u32("--size", optarg, 60, PG_MAX_FRAME, &o->size) != 0)
				return -EINVAL;
			break;
		case 'p':
			if (pg_u32("--step", optarg, 1, 1u << 26, &o->step) != 0)
				return -EINVAL;
			break;
		case 'P':
			o->plain = true;
			break;
		case 'c':
			if (pg_u32("--piece", optarg, 1, PG_MAX_FRAME, &o->piece) != 0)
				return -EINVAL;
			break;
		case 'm':
			if (pg_u32("--mtu", optarg, 576, 9000, &v) != 0)
				return -EINVAL;
			o->mtu = (uint16_t)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (roles != 1 || optind != argc) {
		fprintf(stderr, "wharf-pktgen: give exactly one of --tx, --rx%s%s\n",
			optind != argc ? "; unexpected argument " : "", optind != argc ? argv[optind] : "");
		return -EINVAL;
	}
	uint32_t max = (o->mtu ? o->mtu : RTE_ETHER_MTU) + RTE_ETHER_HDR_LEN;
	if (o->size == 0)
		o->size = o->step ? max : 64;
	if (o->size > max || (o->step && o->size <= PG_HDR)) {
		fprintf(stderr, "wharf-pktgen: --size %u: expected %u..%u with this MTU\n", o->size,
			o->step ? (unsigned)PG_HDR + 1 : 60u, max);
		return -EINVAL;
	}
	return 0;
}

/* Sets the template's lengths (and the IP checksum) for a frame of size bytes. */
static void frame_lengths(uint8_t *b, uint32_t size)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(b + sizeof(struct rte_ether_hdr));
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	ip->total_length = rte_cpu_to_be_16((uint16_t)(size - sizeof(struct rte_ether_hdr)));
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(size - sizeof(struct rte_ether_hdr) -
						     sizeof(*ip)));
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
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
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0xC6120901); /* 198.18.9.1 */
	ip->dst_addr = rte_cpu_to_be_32(0xC6120902);
	udp->src_port = rte_cpu_to_be_16(9);
	udp->dst_port = rte_cpu_to_be_16(9);
	frame_lengths(b, size);
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
	uint8_t tmpl[PG_MAX_FRAME];
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

/* Sends n frames, retrying what the device did not take yet; false on a stop request. */
static bool tx_all(uint16_t port, struct rte_mbuf **b, uint32_t n)
{
	uint32_t sent = 0;

	while (sent < n && !g_stop)
		sent += rte_eth_tx_burst(port, 0, b + sent, (uint16_t)RTE_MIN(n - sent, 512u));
	if (sent < n)
		rte_pktmbuf_free_bulk(b + sent, n - sent);
	return sent == n;
}

/* Writes one frame of a step: the header, then len bytes of payload. */
static void step_frame(uint8_t *d, const uint8_t *hdr, const uint8_t *payload, uint32_t len,
		       const struct pg_opts *o, struct tl_lw *w)
{
	uint32_t piece = o->piece ? o->piece : len;

	if (o->plain) {
		memcpy(d, hdr, PG_HDR);
		for (uint32_t at = 0; at < len; at += piece)
			memcpy(d + PG_HDR + at, payload + at, RTE_MIN(piece, len - at));
		return;
	}
	tl_lw_open(w, d);
	tl_lw_put(w, hdr, PG_HDR);
	for (uint32_t at = 0; at < len; at += piece)
		tl_lw_put(w, payload + at, RTE_MIN(piece, len - at));
	tl_lw_finish(w);
}

/*
 * Step mode, sender: each step writes o->step bytes of payload (from a pattern, as a packer
 * copies tensors) into fresh frames, each sent once written, and waits for the receiver's
 * one frame.
 */
static int run_tx_step(uint16_t port, struct rte_mempool *mp, const struct pg_opts *o)
{
	uint32_t room = o->size - (uint32_t)PG_HDR, nf = (o->step + room - 1) / room;
	uint64_t hz = rte_get_tsc_hz(), t0, end, steps = 0, write = 0;
	struct rte_mbuf **b, *in[DN_BURST];
	struct rte_ether_addr mac;
	uint8_t tmpl[PG_MAX_FRAME], *pat;
	struct tl_lw *w;
	int rc = 0;

	b = malloc(nf * sizeof(*b));
	pat = malloc(o->step);
	w = malloc(sizeof(*w));
	if (b == NULL || pat == NULL || w == NULL) {
		fprintf(stderr, "wharf-pktgen: out of memory for a step of %u bytes\n", o->step);
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < o->step; i++)
		pat[i] = (uint8_t)(i * 131u + 7u);
	rte_eth_macaddr_get(port, &mac);
	frame_template(tmpl, o->size, &mac);
	t0 = rte_rdtsc();
	end = t0 + (uint64_t)(o->seconds * (double)hz);
	while (!g_stop && rte_rdtsc() < end) {
		uint64_t tw = rte_rdtsc(), sent_at;
		uint32_t off = 0, i;
		uint16_t n = 0;

		if (rte_pktmbuf_alloc_bulk(mp, b, nf) != 0) {
			fprintf(stderr, "wharf-pktgen: mbuf pool empty (%u frames per step)\n", nf);
			rc = -ENOMEM;
			break;
		}
		for (i = 0; i < nf; i++) {
			uint32_t len = RTE_MIN(room, o->step - off);
			uint8_t *d = (uint8_t *)rte_pktmbuf_append(b[i], (uint16_t)(PG_HDR + len));

			if (len != room || i == 0)
				frame_lengths(tmpl, (uint32_t)PG_HDR + len);
			step_frame(d, tmpl, pat + off, len, o, w);
			off += len;
			/* Each frame leaves once written: the peer copies while we write. */
			if (!tx_all(port, b + i, 1))
				break;
		}
		if (i < nf) {
			rte_pktmbuf_free_bulk(b + i + 1, nf - i - 1);
			break;
		}
		sent_at = rte_rdtsc();
		write += sent_at - tw;
		/* The acknowledgement: one frame back. */
		while (!g_stop && (n = rte_eth_rx_burst(port, 0, in, DN_BURST)) == 0)
			if (rte_rdtsc() - sent_at > hz)
				break;
		if (n == 0) {
			if (!g_stop) {
				fprintf(stderr, "wharf-pktgen: no acknowledgement of step %" PRIu64
					" within 1 s\n", steps + 1);
				rc = -ETIMEDOUT;
			}
			break;
		}
		rte_pktmbuf_free_bulk(in, n);
		steps++;
	}
	double secs = (double)(rte_rdtsc() - t0) / (double)hz;

	printf("{\"role\":\"tx\",\"mode\":\"step\",\"step_bytes\":%u,\"frame_bytes\":%u,"
	       "\"frames_per_step\":%u,\"writer\":\"%s\",\"steps\":%" PRIu64 ",\"seconds\":%.3f,"
	       "\"steps_per_s\":%.1f,\"us_per_step\":%.3f,\"write_us_per_step\":%.3f}\n",
	       o->step, o->size, nf, o->plain ? "plain" : "lines", steps, secs,
	       secs > 0 ? (double)steps / secs : 0, steps ? secs * 1e6 / (double)steps : 0,
	       steps ? (double)write / (double)hz * 1e6 / (double)steps : 0);
	fflush(stdout);
out:
	free(b);
	free(pat);
	free(w);
	return rc;
}

/* Step mode, receiver: one frame back for every o->step bytes of payload that arrive. */
static int run_rx_step(uint16_t port, struct rte_mempool *mp, const struct pg_opts *o)
{
	uint64_t hz = rte_get_tsc_hz(), last = 0, got = 0, steps = 0;
	uint64_t give_up = rte_rdtsc() + (uint64_t)((o->seconds + 30) * (double)hz);
	struct rte_mbuf *b[DN_BURST], *ack;
	struct rte_ether_addr mac;
	uint8_t tmpl[64];

	rte_eth_macaddr_get(port, &mac);
	frame_template(tmpl, sizeof(tmpl), &mac);
	while (!g_stop) {
		uint16_t n = rte_eth_rx_burst(port, 0, b, DN_BURST);
		uint64_t now = rte_rdtsc();

		if (n == 0) {
			if (last != 0 ? now - last > hz / 10 : now > give_up)
				break;
			continue;
		}
		last = now;
		for (uint16_t i = 0; i < n; i++)
			if (rte_pktmbuf_pkt_len(b[i]) > PG_HDR)
				got += rte_pktmbuf_pkt_len(b[i]) - PG_HDR;
		rte_pktmbuf_free_bulk(b, n);
		while (got >= o->step) {
			got -= o->step;
			ack = rte_pktmbuf_alloc(mp);
			if (ack == NULL) {
				fprintf(stderr, "wharf-pktgen: mbuf pool empty\n");
				return -ENOMEM;
			}
			memcpy(rte_pktmbuf_append(ack, sizeof(tmpl)), tmpl, sizeof(tmpl));
			if (!tx_all(port, &ack, 1))
				return 0;
			steps++;
		}
	}
	printf("{\"role\":\"rx\",\"mode\":\"step\",\"step_bytes\":%u,\"steps\":%" PRIu64
	       ",\"left_bytes\":%" PRIu64 "}\n", o->step, steps, got);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	char err[256];
	struct pg_opts o;
	struct dn_port *port;
	struct dn_lcore *lc;
	int n, rc = 0;

	if (wc_args_help_wanted(argc, argv)) {
		usage(stdout);
		return 0;
	}
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
				.idle = DN_IDLE_POLL, .mtu = o.mtu};
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
		if (o.step)
			rc = run_tx_step(dn_port_id(port), dn_lcore_pool(lc), &o);
		else
			run_tx(dn_port_id(port), dn_lcore_pool(lc), &o);
	} else if (o.step) {
		rc = run_rx_step(dn_port_id(port), dn_lcore_pool(lc), &o);
	} else {
		run_rx(dn_port_id(port), &o);
	}
	dn_lcore_destroy(lc);
	dn_port_destroy(port);
	dn_eal_fini();
	return rc ? 1 : 0;
}
