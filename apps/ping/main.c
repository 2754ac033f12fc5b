/*
 * wharf-ping — brings up a port, answers ARP and ICMP echo, and optionally pings a peer.
 *
 *   wharf-ping [EAL args] -- --ip A/len [--peer B] [--count N] [--interval-us U]
 *              [--seconds S] [--poll] [--gateway G]
 *
 * With --peer it sends N echo requests U microseconds apart, waits up to a second for
 * stragglers and prints one JSON line last:
 *   {"sent":N,"received":M,"rtt_p50_us":x,"rtt_p99_us":y, ...}
 * Without --peer it only answers, until SIGINT/SIGTERM or --seconds elapse.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "apps/common/wc_args.h"
#include "dpdk_net/dn.h"

struct ping_opts {
	uint32_t ip, peer, gateway;
	uint8_t prefix;
	uint32_t count, interval_us;
	double seconds;
	bool poll;
};

struct ping_state {
	uint64_t *rtt_tsc; /* per sequence number; 0 = no reply yet */
	uint32_t count, received, dups, stray;
	uint16_t ident;
};

static volatile int g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-ping [EAL args] -- --ip A.B.C.D/LEN [--peer A.B.C.D] [--count N]\n"
		   "                  [--interval-us U] [--seconds S] [--poll] [--gateway A.B.C.D]\n"
		   "  --peer       ping this address; without it, only answer ARP/ICMP\n"
		   "  --count      echo requests to send (default 10, at most 1000000)\n"
		   "  --interval-us  gap between requests (default 1000)\n"
		   "  --seconds    answer-only mode: stop after S seconds (default: until signalled)\n"
		   "  --poll       busy-poll (default: sleep when idle, woken by Rx interrupts)\n");
}

static int parse_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "wharf-ping: %s: expected an integer in [%u, %u], got '%s'\n", flag,
			lo, hi, s);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct ping_opts *o)
{
	static const struct option lo[] = {
		{"ip", required_argument, 0, 'i'},      {"peer", required_argument, 0, 'p'},
		{"count", required_argument, 0, 'c'},   {"interval-us", required_argument, 0, 'u'},
		{"seconds", required_argument, 0, 's'}, {"poll", no_argument, 0, 'P'},
		{"gateway", required_argument, 0, 'g'}, {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	bool have_ip = false;
	int c;
	char *end;

	*o = (struct ping_opts){.count = 10, .interval_us = 1000};
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (dn_parse_ipv4(optarg, &o->ip, &o->prefix) != 0 || o->prefix == 0) {
				fprintf(stderr, "wharf-ping: --ip: expected A.B.C.D/LEN, got '%s'\n", optarg);
				return -EINVAL;
			}
			have_ip = true;
			break;
		case 'p':
		case 'g':
			if (dn_parse_ipv4(optarg, c == 'p' ? &o->peer : &o->gateway, NULL) != 0) {
				fprintf(stderr, "wharf-ping: --%s: expected A.B.C.D, got '%s'\n",
					c == 'p' ? "peer" : "gateway", optarg);
				return -EINVAL;
			}
			break;
		case 'c':
			if (parse_u32("--count", optarg, 1, 1000000, &o->count))
				return -EINVAL;
			break;
		case 'u':
			if (parse_u32("--interval-us", optarg, 0, 10000000, &o->interval_us))
				return -EINVAL;
			break;
		case 's':
			o->seconds = strtod(optarg, &end);
			if (*optarg == '\0' || *end != '\0' || !(o->seconds > 0 && o->seconds < 1e7)) {
				fprintf(stderr, "wharf-ping: --seconds: expected a positive number, got '%s'\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'P':
			o->poll = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "wharf-ping: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!have_ip) {
		fprintf(stderr, "wharf-ping: --ip is required\n");
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static void on_reply(void *arg, uint32_t src, uint16_t id, uint16_t seq, const uint8_t *payload,
		     uint16_t len)
{
	struct ping_state *st = arg;
	uint64_t sent;

	(void)src;
	if (id != st->ident || seq >= st->count || len < sizeof(sent)) {
		st->stray++;
		return;
	}
	if (st->rtt_tsc[seq] != 0) {
		st->dups++; /* a duplicated reply (the switch may duplicate) counts once */
		return;
	}
	memcpy(&sent, payload, sizeof(sent));
	st->rtt_tsc[seq] = rte_rdtsc() - sent + 1;
	st->received++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void print_stats(const struct dn_lcore *lc)
{
	const struct dn_stats *s = dn_lcore_stats(lc);

	fprintf(stderr, "wharf-ping: rx %" PRIu64 " pkts, tx %" PRIu64 " pkts, echo replies %" PRIu64
		", sleeps %" PRIu64 ", intr wakeups %" PRIu64 "\n", s->rx_pkts, s->tx_pkts,
		s->icmp_echo_replies, s->idle_sleeps, s->intr_wakeups);
	for (int d = 0; d < DN_DROP_MAX; d++)
		if (s->drops[d])
			fprintf(stderr, "wharf-ping: drop %s %" PRIu64 "\n", dn_drop_name(d), s->drops[d]);
}

/* Runs the loop until deadline (TSC) or a signal; sleeps when idle unless polling. */
static void run_until(struct dn_lcore *lc, uint64_t deadline, bool poll, bool (*done)(void *),
		      void *arg)
{
	uint32_t idle = 0;

	while (!g_stop && rte_rdtsc() < deadline && !(done && done(arg))) {
		if (dn_loop_once(lc, rte_rdtsc()) > 0) {
			idle = 0;
			continue;
		}
		if (!poll && ++idle > 64)
			dn_lcore_idle_wait(lc);
	}
}

struct arp_wait {
	struct dn_port *port;
	uint32_t peer;
};

static bool arp_done(void *arg)
{
	struct arp_wait *w = arg;
	struct rte_ether_addr mac;

	return dn_arp_lookup(w->port, w->peer, &mac) == 0;
}

static int pinger(struct dn_lcore *lc, struct ping_opts *o)
{
	struct ping_state st = {.count = o->count, .ident = (uint16_t)(getpid() & 0xffff)};
	uint64_t hz = rte_get_tsc_hz(), gap = hz / 1000000 * o->interval_us, next;
	uint64_t *sorted;
	uint32_t sent = 0;

	st.rtt_tsc = calloc(o->count, sizeof(*st.rtt_tsc));
	sorted = calloc(o->count, sizeof(*sorted));
	if (st.rtt_tsc == NULL || sorted == NULL) {
		fprintf(stderr, "wharf-ping: out of memory\n");
		free(st.rtt_tsc);
		free(sorted);
		return 1;
	}
	dn_lcore_set_echo_reply(lc, on_reply, &st);
	/* Resolve the peer before timing anything, so RTTs measure the path, not ARP. */
	struct arp_wait w = {dn_lcore_port(lc), o->peer};
	for (int tries = 0; tries < 10 && !arp_done(&w) && !g_stop; tries++) {
		/* An echo with another ident triggers the ARP request; its reply is ignored. */
		dn_icmp_echo_send(lc, o->peer, (uint16_t)(st.ident ^ 0xffff), 0, 8);
		run_until(lc, rte_rdtsc() + hz / 2, o->poll, arp_done, &w);
	}
	next = rte_rdtsc();
	while (!g_stop && sent < o->count) {
		uint64_t now = rte_rdtsc();
		if (now >= next) {
			dn_icmp_echo_send(lc, o->peer, st.ident, (uint16_t)sent, 56);
			sent++;
			next += gap;
			dn_tx_flush(lc);
		}
		dn_loop_once(lc, now);
	}
	run_until(lc, rte_rdtsc() + hz, o->poll, NULL, NULL);
	for (uint32_t i = 0, n = 0; i < o->count; i++)
		if (st.rtt_tsc[i])
			sorted[n++] = st.rtt_tsc[i];
	qsort(sorted, st.received, sizeof(*sorted), cmp_u64);
	double us = 1e6 / (double)hz;
	double p50 = st.received ? (double)sorted[(st.received - 1) / 2] * us : 0;
	double p99 = st.received ? (double)sorted[(uint32_t)((st.received - 1) * 0.99)] * us : 0;
	print_stats(lc);
	printf("{\"sent\":%u,\"received\":%u,\"duplicates\":%u,\"rtt_p50_us\":%.1f,\"rtt_p99_us\":%.1f}\n",
	       sent, st.received, st.dups, p50, p99);
	fflush(stdout);
	dn_lcore_set_echo_reply(lc, NULL, NULL);
	free(st.rtt_tsc);
	free(sorted);
	return 0;
}

int main(int argc, char **argv)
{
	char err[256];
	struct ping_opts o;
	struct dn_port *port;
	struct dn_lcore *lc;
	int n, rc;

	if (wc_args_help_wanted(argc, argv)) {
		usage(stdout);
		return 0;
	}
	n = dn_eal_init(argc, argv, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "wharf-ping: %s\n", err);
		return 1;
	}
	argv[n] = argv[0];
	if (parse_args(argc - n, argv + n, &o) != 0) {
		dn_eal_fini();
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct dn_config cfg = {.port_id = DN_PORT_AUTO, .ip = o.ip, .prefix_len = o.prefix,
				.gateway = o.gateway, .idle = o.poll ? DN_IDLE_POLL : DN_IDLE_SLEEP,
				.nb_mbufs = 4095};
	rc = dn_port_create(&cfg, &port, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "wharf-ping: %s\n", err);
		dn_eal_fini();
		return 1;
	}
	rc = dn_lcore_create(port, 0, NULL, &lc);
	if (rc != 0) {
		fprintf(stderr, "wharf-ping: lcore context: %s\n", strerror(-rc));
		dn_port_destroy(port);
		dn_eal_fini();
		return 1;
	}
	dn_obs_init();
	dn_obs_register(lc);
	fprintf(stderr, "wharf-ping: up on port %u, rx interrupts %s, tcp checksum %s\n",
		dn_port_id(port), dn_port_rx_intr(port) ? "on" : "off (back-off sleep)",
		dn_port_tx_l4_csum(port) ? "offloaded" : "in software");
	dn_arp_announce(lc);
	dn_tx_flush(lc);
	rc = 0;
	if (o.peer != 0) {
		rc = pinger(lc, &o);
	} else {
		uint64_t end = o.seconds > 0 ? rte_rdtsc() + (uint64_t)(o.seconds * (double)rte_get_tsc_hz())
					     : UINT64_MAX;
		run_until(lc, end, o.poll, NULL, NULL);
		print_stats(lc);
	}
	dn_lcore_destroy(lc);
	dn_port_destroy(port);
	dn_eal_fini();
	return rc;
}
