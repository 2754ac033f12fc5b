/*
 * wharf-vswitch — the CI fabric: an L2 learning switch with one vhost-user port per node
 * and seeded per-port impairments.
 *
 *   wharf-vswitch [EAL args] -- --ports N --sock-dir DIR [--queues Q0,Q1,..] [--loss P]
 *        [--dup P] [--reorder P] [--corrupt P] [--delay-us D] [--rate-mbps R] [--queue-frames Q]
 *        [--ecn-k K] [--seed S] [--poll] [--seconds S]
 *
 * Port i is a net_vhost device listening on DIR/port<i>.sock; a node attaches with
 * --vdev=virtio_user0,path=DIR/port<i>.sock. Frames are switched by destination MAC
 * (learnt from sources; unknown and broadcast flood). Impairments act on the egress port,
 * on IPv4 frames only: ARP and other control frames pass untouched, so the sequence of
 * random draws on a port depends only on the IPv4 traffic through it and a given seed
 * reproduces the same fates run after run. Each port has its own generator seeded from
 * (seed, port). Draw order per frame: loss, corrupt, duplicate, reorder.
 *
 * Checksums: a node sends TCP with its checksum partial (virtio NEEDS_CSUM); the frame
 * arrives here marked L4_CKSUM_NONE and leaves marked for the Tx offload, so the egress
 * vhost port hands it on partial and the receiving node trusts it, as between VMs on one
 * host. A frame about to be corrupted gets its checksum completed first: the damage is
 * done on the wire, to a frame that carries its sum, and the receiver must catch it.
 *
 * Bottleneck: with --rate-mbps each port sends at most R Mbit/s, its frames leaving one
 * after another at the link's pace from a FIFO of at most --queue-frames (tail drop past
 * it), as a switch port drains into a slower link. With --ecn-k, an ECN-capable IPv4 frame
 * (ECT(0) or ECT(1)) that finds K or more frames waiting is marked CE instead (RFC 3168; the
 * step marking DCTCP expects, RFC 8257 3.1), its IPv4 header sum redone. The FIFO is the
 * delay line's: --delay-us adds propagation after serialisation, and frames still on their
 * way then count as waiting too.
 *
 * Queues: port i has Qi queue pairs (--queues, default 1; its node attaches with queues=Qi
 * and, for Qi > 1, WHARF_PORT_RSS=peer). The switch reads every queue, and spreads what it
 * sends to a port of several queues as an RSS NIC programmed by dpdk_net would: the queue
 * dn_rss_queue picks (the symmetric Toeplitz key, a 128-entry table round robin over the
 * queues), so a node's lcores each get their own flows' frames. A queue its node has not
 * enabled (a node of fewer lcores than queues uses queue 0 alone) gets nothing: its frames
 * go to queue 0 instead (counted as queue_fallback), never to a ring nobody reads.
 *
 * Idle policy: sleeps on the vhost queues' Rx interrupts (or backs off) unless --poll.
 * On SIGINT/SIGTERM or after --seconds it prints its per-port counters as one JSON line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <stdatomic.h>

#include <rte_cycles.h>
#include <rte_epoll.h>
#include <rte_eth_vhost.h>
#include <rte_ethdev.h>
#include <rte_ether.h>

#include "dpdk_net/dn.h"

#define VS_MAX_PORTS 16
#define VS_MAC_SLOTS 1024
#define VS_DELAY_SLOTS 4096 /* frames in flight through the delay line, per port */
#define VS_MAX_QUEUES 8

struct vs_opts {
	unsigned ports;
	const char *sock_dir;
	uint16_t queues[VS_MAX_PORTS]; /* queue pairs of each port (0: 1) */
	double loss, dup, reorder, corrupt;
	uint32_t delay_us;
	uint32_t rate_mbps;    /* 0: no bottleneck */
	uint32_t queue_frames; /* the egress FIFO's most (VS_DELAY_SLOTS) */
	uint32_t ecn_k;        /* mark CE at this many frames waiting; 0: never */
	uint64_t seed;
	bool poll;
	double seconds;
};

struct vs_counters {
	uint64_t rx, tx, lost, corrupted, duplicated, reordered, delayed, tx_fail, delay_full,
		queue_fallback, ce_marked, queue_max;
};

struct vs_delayed {
	struct rte_mbuf *m;
	uint64_t due;
};

struct vs_port {
	uint16_t port_id;
	struct dn_port *dp;
	uint64_t rng;               /* xorshift64* state, seeded from (seed, port) */
	struct rte_mbuf *held;      /* a frame kept back to be sent after the next one */
	uint64_t held_since;
	struct vs_delayed *dl;      /* ring of delayed frames, in due order */
	uint32_t dl_head, dl_tail;
	uint64_t link_free;         /* --rate-mbps: when the link has sent what it was given */
	uint16_t nq;                /* queue pairs */
	/* The node's receive rings it enabled (vhost Tx queues), from the vhost thread's
	 * queue-state events (queue_state_event); queue 0 is always used. */
	_Atomic bool q_on[VS_MAX_QUEUES];
	struct rte_mbuf *txq[VS_MAX_QUEUES][DN_BURST];
	uint16_t txn[VS_MAX_QUEUES];
	struct rte_mempool *pool;
	struct vs_counters c;
};

struct vs_mac {
	struct rte_ether_addr mac;
	uint16_t port; /* UINT16_MAX = empty */
};

struct vs {
	struct vs_opts o;
	struct vs_port port[VS_MAX_PORTS];
	struct vs_mac macs[VS_MAC_SLOTS];
	uint64_t delay_cycles, hold_cycles;
	double cycles_per_byte;     /* --rate-mbps: TSC cycles a byte takes on the link; 0 none */
};

static volatile int g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* xorshift64* — small, fast and good enough for impairment draws. */
static inline double rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return (double)((x * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

static uint64_t seed_mix(uint64_t seed, uint64_t port)
{
	/* splitmix64 of (seed, port): distinct, never-zero generator states per port. */
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + port + 1;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

static uint32_t mac_slot(const struct rte_ether_addr *a)
{
	uint64_t w = 0;

	memcpy(&w, a->addr_bytes, RTE_ETHER_ADDR_LEN);
	return (uint32_t)((w * 0x9e3779b97f4a7c15ull) >> 54) & (VS_MAC_SLOTS - 1);
}

static void mac_learn(struct vs *vs, const struct rte_ether_addr *a, uint16_t port)
{
	uint32_t s = mac_slot(a);

	if (!rte_is_unicast_ether_addr(a))
		return;
	for (uint32_t i = 0; i < VS_MAC_SLOTS; i++, s = (s + 1) & (VS_MAC_SLOTS - 1)) {
		struct vs_mac *e = &vs->macs[s];
		if (e->port == UINT16_MAX || rte_is_same_ether_addr(&e->mac, a)) {
			e->mac = *a;
			e->port = port; /* a station that moved is learnt again */
			return;
		}
	}
}

static int mac_lookup(struct vs *vs, const struct rte_ether_addr *a)
{
	uint32_t s = mac_slot(a);

	for (uint32_t i = 0; i < VS_MAC_SLOTS; i++, s = (s + 1) & (VS_MAC_SLOTS - 1)) {
		struct vs_mac *e = &vs->macs[s];
		if (e->port == UINT16_MAX)
			return -1;
		if (rte_is_same_ether_addr(&e->mac, a))
			return e->port;
	}
	return -1;
}

static void port_txq_flush(struct vs_port *p, uint16_t q)
{
	uint16_t sent;

	if (p->txn[q] == 0)
		return;
	sent = rte_eth_tx_burst(p->port_id, q, p->txq[q], p->txn[q]);
	p->c.tx += sent;
	/* A node that is not attached (or is slow) loses the frame, as a real port would. */
	for (uint16_t i = sent; i < p->txn[q]; i++) {
		rte_pktmbuf_free(p->txq[q][i]);
		p->c.tx_fail++;
	}
	p->txn[q] = 0;
}

static void port_tx_flush(struct vs_port *p)
{
	for (uint16_t q = 0; q < p->nq; q++)
		port_txq_flush(p, q);
}

/* Onto the queue the node's RSS would put m on (one queue: queue 0). */
static void port_tx(struct vs_port *p, struct rte_mbuf *m)
{
	uint16_t q = dn_rss_queue(m, p->nq);

	if (q != 0 && !atomic_load_explicit(&p->q_on[q], memory_order_relaxed)) {
		q = 0;
		p->c.queue_fallback++;
	}

	if (p->txn[q] == DN_BURST)
		port_txq_flush(p, q);
	p->txq[q][p->txn[q]++] = m;
}

static bool is_ipv4(const struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);

	return rte_pktmbuf_data_len(m) >= sizeof(*eth) &&
	       eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
}

/* An ECN-capable IPv4 frame's codepoint to CE, its header sum redone: true when marked. */
static bool ce_mark(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip;

	if (!is_ipv4(m) ||
	    rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr))
		return false;
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
	if ((ip->type_of_service & 3u) == 0 || (ip->type_of_service & 3u) == 3u)
		return false;
	ip->type_of_service |= 3u;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	return true;
}

/*
 * The delay line: frames leave in arrival order once their due time has come. With a
 * bottleneck, a frame's time is when the link has sent the frames before it and then this
 * one (its bytes at the link's rate), plus the delay.
 */
static void port_out(struct vs *vs, struct vs_port *p, struct rte_mbuf *m, uint64_t now)
{
	uint32_t waiting = p->dl_tail - p->dl_head;
	uint64_t due = now;

	if (vs->delay_cycles == 0 && vs->cycles_per_byte == 0) {
		port_tx(p, m);
		return;
	}
	if (waiting >= vs->o.queue_frames) {
		rte_pktmbuf_free(m);
		p->c.delay_full++;
		return;
	}
	if (waiting > p->c.queue_max)
		p->c.queue_max = waiting;
	if (vs->o.ecn_k != 0 && waiting >= vs->o.ecn_k && ce_mark(m))
		p->c.ce_marked++;
	if (vs->cycles_per_byte != 0) {
		if (p->link_free > due)
			due = p->link_free;
		due += (uint64_t)(rte_pktmbuf_pkt_len(m) * vs->cycles_per_byte);
		p->link_free = due;
	}
	p->dl[p->dl_tail++ % VS_DELAY_SLOTS] = (struct vs_delayed){m, due + vs->delay_cycles};
	p->c.delayed++;
}

static unsigned port_drain(struct vs *vs, struct vs_port *p, uint64_t now)
{
	unsigned n = 0;

	while (p->dl_head != p->dl_tail && p->dl[p->dl_head % VS_DELAY_SLOTS].due <= now) {
		port_tx(p, p->dl[p->dl_head++ % VS_DELAY_SLOTS].m);
		n++;
	}
	/* A frame held back for reordering never waits more than hold_cycles for company. */
	if (p->held != NULL && now - p->held_since > vs->hold_cycles) {
		port_out(vs, p, p->held, now);
		p->held = NULL;
		n++;
	}
	return n;
}

/* The IPv4 header of a TCP frame whose checksum its sender left partial, else NULL. */
static struct rte_ipv4_hdr *partial_tcp(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip;
	uint32_t ihl;

	if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_NONE ||
	    rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + sizeof(*ip))
		return NULL;
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
	ihl = (ip->version_ihl & 0xfu) * 4u;
	if (ip->next_proto_id != IPPROTO_TCP || ihl < sizeof(*ip) ||
	    rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + ihl + 20u)
		return NULL;
	return ip;
}

/* Completes the partial TCP checksum of m (ip: partial_tcp's) in software. */
static void cksum_complete(struct rte_mbuf *m, const struct rte_ipv4_hdr *ip)
{
	uint32_t l4_off = (uint32_t)sizeof(struct rte_ether_hdr) + (ip->version_ihl & 0xfu) * 4u;
	uint16_t *field = rte_pktmbuf_mtod_offset(m, uint16_t *, l4_off + 16);

	*field = 0;
	*field = dn_l4_cksum_sw(m, ip, l4_off);
	m->ol_flags &= ~(RTE_MBUF_F_RX_L4_CKSUM_MASK | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IPV4);
}

static void egress(struct vs *vs, struct vs_port *p, struct rte_mbuf *m, uint64_t now)
{
	const struct vs_opts *o = &vs->o;
	struct rte_mbuf *dup = NULL;
	struct rte_ipv4_hdr *ip;

	if (!is_ipv4(m)) {
		port_out(vs, p, m, now);
		return;
	}
	ip = partial_tcp(m);
	if (ip != NULL) {
		/* Pass the offload on: the egress port marks the frame partial for its node. */
		m->l2_len = sizeof(struct rte_ether_hdr);
		m->l3_len = (ip->version_ihl & 0xfu) * 4u;
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM;
		if (!dn_port_tx_l4_csum(p->dp))
			cksum_complete(m, ip);
	}
	if (rng_next(&p->rng) < o->loss) {
		rte_pktmbuf_free(m);
		p->c.lost++;
		return;
	}
	if (rng_next(&p->rng) < o->corrupt && rte_pktmbuf_data_len(m) > sizeof(struct rte_ether_hdr)) {
		/* Flip one bit past the Ethernet header: every checksum above must catch it. */
		uint32_t span = rte_pktmbuf_data_len(m) - (uint32_t)sizeof(struct rte_ether_hdr);
		uint32_t bit = (uint32_t)(rng_next(&p->rng) * span * 8);
		uint8_t *b = rte_pktmbuf_mtod_offset(m, uint8_t *, sizeof(struct rte_ether_hdr));

		if (ip != NULL && (m->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM))
			cksum_complete(m, ip); /* still partial: the damage goes on a summed frame */

		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		p->c.corrupted++;
	}
	if (rng_next(&p->rng) < o->dup) {
		dup = rte_pktmbuf_copy(m, p->pool, 0, UINT32_MAX);
		if (dup != NULL)
			p->c.duplicated++;
	}
	if (rng_next(&p->rng) < o->reorder && p->held == NULL) {
		/* Keep this frame back; the next one out of this port overtakes it. */
		p->held = m;
		p->held_since = now;
		p->c.reordered++;
		m = dup;
		dup = NULL;
		if (m == NULL)
			return;
		port_out(vs, p, m, now);
	} else {
		port_out(vs, p, m, now);
		if (dup != NULL)
			port_out(vs, p, dup, now);
	}
	if (p->held != NULL) {
		port_out(vs, p, p->held, now);
		p->held = NULL;
	}
}

static void forward(struct vs *vs, unsigned in, struct rte_mbuf *m, uint64_t now)
{
	struct rte_ether_hdr *eth;
	int out;

	if (rte_pktmbuf_data_len(m) < sizeof(*eth)) {
		rte_pktmbuf_free(m);
		return;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	mac_learn(vs, &eth->src_addr, (uint16_t)in);
	out = rte_is_unicast_ether_addr(&eth->dst_addr) ? mac_lookup(vs, &eth->dst_addr) : -1;
	if (out >= 0) {
		if ((unsigned)out == in)
			rte_pktmbuf_free(m);
		else
			egress(vs, &vs->port[out], m, now);
		return;
	}
	/* Flood: each port gets its own copy, since impairments may write to it. */
	for (unsigned j = 0; j < vs->o.ports; j++) {
		struct rte_mbuf *c;

		if (j == in)
			continue;
		c = rte_pktmbuf_copy(m, vs->port[j].pool, 0, UINT32_MAX);
		if (c != NULL)
			egress(vs, &vs->port[j], c, now);
	}
	rte_pktmbuf_free(m);
}

static unsigned switch_once(struct vs *vs, uint64_t now)
{
	struct rte_mbuf *pkts[DN_BURST];
	unsigned work = 0;

	for (unsigned i = 0; i < vs->o.ports; i++) {
		for (uint16_t q = 0; q < vs->port[i].nq; q++) {
			uint16_t n = rte_eth_rx_burst(vs->port[i].port_id, q, pkts, DN_BURST);

			vs->port[i].c.rx += n;
			for (uint16_t k = 0; k < n; k++)
				forward(vs, i, pkts[k], now);
			work += n;
		}
	}
	for (unsigned i = 0; i < vs->o.ports; i++) {
		work += port_drain(vs, &vs->port[i], now);
		port_tx_flush(&vs->port[i]);
	}
	return work;
}

static bool pending_frames(const struct vs *vs)
{
	for (unsigned i = 0; i < vs->o.ports; i++)
		if (vs->port[i].held != NULL || vs->port[i].dl_head != vs->port[i].dl_tail)
			return true;
	return false;
}

static bool link_up(uint16_t port_id)
{
	struct rte_eth_link l;

	return rte_eth_link_get_nowait(port_id, &l) == 0 && l.link_status;
}

/*
 * Sleeps until an attached port's queue raises its Rx interrupt, at most 1 ms; ports with
 * no node attached have no queue to arm and are looked at again after the timeout. Without
 * interrupts it backs off with sleeps up to 500 us.
 */
static void idle_wait(struct vs *vs, bool intr, uint32_t *sleep_us)
{
	struct rte_epoll_event ev[VS_MAX_PORTS * VS_MAX_QUEUES];
	bool armed[VS_MAX_PORTS][VS_MAX_QUEUES] = {{false}}, any = false, busy = false;

	for (unsigned i = 0; intr && i < vs->o.ports; i++) {
		uint16_t pid = vs->port[i].port_id;

		if (!link_up(pid))
			continue;
		for (uint16_t q = 0; q < vs->port[i].nq; q++) {
			if (rte_eth_dev_rx_intr_enable(pid, q) != 0)
				continue;
			armed[i][q] = any = true;
		}
	}
	/*
	 * Frames that landed before the arm raised no event: one more pass forwards them, and
	 * then it does not sleep. Bursts, not rte_eth_rx_queue_count: net_vhost's count lacks
	 * the guard its bursts take against a node leaving (a sleeping switch once segfaulted
	 * in librte_vhost, reading past a mapping, as nodes left).
	 */
	if (any)
		busy = switch_once(vs, rte_rdtsc()) > 0;
	if (any && !busy)
		rte_epoll_wait(RTE_EPOLL_PER_THREAD, ev, RTE_DIM(ev), 1);
	for (unsigned i = 0; i < vs->o.ports; i++)
		for (uint16_t q = 0; q < vs->port[i].nq; q++)
			if (armed[i][q])
				rte_eth_dev_rx_intr_disable(vs->port[i].port_id, q);
	if (any)
		return;
	struct timespec ts = {0, (long)*sleep_us * 1000};
	nanosleep(&ts, NULL);
	*sleep_us = *sleep_us * 2 > 500 ? 500 : *sleep_us * 2;
}

static int parse_prob(const char *flag, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= 0.0 && v <= 1.0)) {
		fprintf(stderr, "wharf-vswitch: %s: expected a probability in [0, 1], got '%s'\n",
			flag, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_range(const char *flag, const char *s, uint64_t min, uint64_t max,
		       uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *s == '\0' || *s == '-' || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "wharf-vswitch: %s: expected an integer in [%" PRIu64 ", %" PRIu64
			"], got '%s'\n", flag, min, max, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_uint(const char *flag, const char *s, uint64_t max, uint64_t *out)
{
	return parse_range(flag, s, 0, max, out);
}

/* --queues "Q0,Q1,..": each 1..VS_MAX_QUEUES; ports not named keep 1. */
static int parse_queues(const char *s, uint16_t *out)
{
	const char *p = s;

	for (unsigned i = 0; i < VS_MAX_PORTS; i++) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (errno || end == p || *p == '-' || v < 1 || v > VS_MAX_QUEUES ||
		    (*end != ',' && *end != '\0'))
			break;
		out[i] = (uint16_t)v;
		if (*end == '\0')
			return 0;
		p = end + 1;
	}
	fprintf(stderr, "wharf-vswitch: --queues: expected at most %u comma-separated counts of "
		"1..%u, got '%s'\n", VS_MAX_PORTS, VS_MAX_QUEUES, s);
	return -EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: wharf-vswitch [EAL args] -- --ports N --sock-dir DIR [--loss P] [--dup P]\n"
		   "         [--reorder P] [--corrupt P] [--delay-us D] [--seed S] [--poll] [--seconds S]\n"
		   "  --ports N      vhost-user ports, DIR/port0.sock .. port<N-1>.sock (2..%u)\n"
		   "  --sock-dir DIR where the port sockets go (created if missing)\n"
		   "  --queues Q0,Q1,..\n"
		   "                 queue pairs of port 0, 1, .. (1..%u, default 1); a port of\n"
		   "                 several gets each frame on the queue dpdk_net's RSS picks\n"
		   "  --loss P, --dup P, --reorder P, --corrupt P\n"
		   "                 probability (0..1) of each impairment per IPv4 frame, on egress\n"
		   "  --delay-us D   delay the frames leaving each port by D microseconds\n"
		   "  --rate-mbps R  each port sends at most R Mbit/s (1..1000000), from a FIFO\n"
		   "  --queue-frames Q\n"
		   "                 that FIFO's most, frames (1..%u, default %u): tail drop past it\n"
		   "  --ecn-k K      mark ECN-capable IPv4 frames CE when K or more frames wait\n"
		   "  --seed S       the impairments' seed (default 1): the same seed, the same fates\n"
		   "  --poll         busy-poll (default: sleep on the vhost queues' Rx interrupts)\n"
		   "  --seconds S    stop after S seconds (default: at SIGINT/SIGTERM)\n"
		   "On exit prints its per-port counters as one JSON line.\n", VS_MAX_PORTS, VS_MAX_QUEUES,
		   VS_DELAY_SLOTS, VS_DELAY_SLOTS);
}

static int parse_args(int argc, char **argv, struct vs_opts *o)
{
	static const struct option lo[] = {
		{"ports", required_argument, 0, 'n'},   {"sock-dir", required_argument, 0, 'd'},
		{"loss", required_argument, 0, 'l'},    {"dup", required_argument, 0, 'u'},
		{"reorder", required_argument, 0, 'r'}, {"corrupt", required_argument, 0, 'c'},
		{"delay-us", required_argument, 0, 'D'}, {"seed", required_argument, 0, 's'},
		{"poll", no_argument, 0, 'P'},          {"seconds", required_argument, 0, 'S'},
		{"queues", required_argument, 0, 'q'},  {"help", no_argument, 0, 'h'},
		{"rate-mbps", required_argument, 0, 'B'}, {"queue-frames", required_argument, 0, 'Q'},
		{"ecn-k", required_argument, 0, 'K'},
		{0, 0, 0, 0}};
	uint64_t v;
	int c, rc = 0;
	char *end;

	*o = (struct vs_opts){.seed = 1, .queue_frames = VS_DELAY_SLOTS};
	optind = 1;
	while (rc == 0 && (c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			rc = parse_uint("--ports", optarg, VS_MAX_PORTS, &v);
			o->ports = (unsigned)v;
			if (rc == 0 && v < 2) {
				fprintf(stderr, "wharf-vswitch: --ports: at least 2\n");
				rc = -EINVAL;
			}
			break;
		case 'd': o->sock_dir = optarg; break;
		case 'q': rc = parse_queues(optarg, o->queues); break;
		case 'l': rc = parse_prob("--loss", optarg, &o->loss); break;
		case 'u': rc = parse_prob("--dup", optarg, &o->dup); break;
		case 'r': rc = parse_prob("--reorder", optarg, &o->reorder); break;
		case 'c': rc = parse_prob("--corrupt", optarg, &o->corrupt); break;
		case 'D':
			rc = parse_uint("--delay-us", optarg, 1000000, &v);
			o->delay_us = (uint32_t)v;
			break;
		case 's': rc = parse_uint("--seed", optarg, UINT64_MAX, &o->seed); break;
		case 'B':
			rc = parse_range("--rate-mbps", optarg, 1, 1000000, &v);
			o->rate_mbps = (uint32_t)v;
			break;
		case 'Q':
			rc = parse_range("--queue-frames", optarg, 1, VS_DELAY_SLOTS, &v);
			o->queue_frames = (uint32_t)v;
			break;
		case 'K':
			rc = parse_uint("--ecn-k", optarg, VS_DELAY_SLOTS, &v);
			o->ecn_k = (uint32_t)v;
			break;
		case 'P': o->poll = true; break;
		case 'S':
			o->seconds = strtod(optarg, &end);
			if (*end != '\0' || !(o->seconds > 0)) {
				fprintf(stderr, "wharf-vswitch: --seconds: expected a positive number\n");
				rc = -EINVAL;
			}
			break;
		case 'h': usage(stdout); exit(0);
		default: rc = -EINVAL; break;
		}
	}
	if (rc == 0 && (o->ports == 0 || o->sock_dir == NULL)) {
		fprintf(stderr, "wharf-vswitch: --ports N and --sock-dir DIR are required\n");
		rc = -EINVAL;
	}
	if (rc == 0 && optind != argc) {
		fprintf(stderr, "wharf-vswitch: unexpected argument '%s'\n", argv[optind]);
		rc = -EINVAL;
	}
	return rc;
}

/* EAL needs the vhost vdevs on its command line: build argv = EAL args + --vdev per port. */
static char **eal_argv(int argc, char **argv, int dashdash, const struct vs_opts *o, int *out_argc)
{
	char **nv = calloc((size_t)argc + o->ports + 2, sizeof(char *));
	int k = 0;

	if (nv == NULL)
		return NULL;
	for (int i = 0; i < dashdash; i++)
		nv[k++] = argv[i];
	for (unsigned i = 0; i < o->ports; i++) {
		char *s = NULL;
		if (asprintf(&s, "--vdev=net_vhost%u,iface=%s/port%u.sock,queues=%u,tso=1", i,
			     o->sock_dir, i, o->queues[i] ? o->queues[i] : 1u) < 0)
			return NULL;
		nv[k++] = s;
	}
	*out_argc = k;
	return nv;
}

static void print_counters(const struct vs *vs)
{
	printf("{\"ports\":[");
	for (unsigned i = 0; i < vs->o.ports; i++) {
		const struct vs_counters *c = &vs->port[i].c;
		printf("%s{\"rx\":%" PRIu64 ",\"tx\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"corrupted\":%" PRIu64
		       ",\"duplicated\":%" PRIu64 ",\"reordered\":%" PRIu64 ",\"delayed\":%" PRIu64
		       ",\"tx_fail\":%" PRIu64 ",\"delay_full\":%" PRIu64 ",\"queue_fallback\":%" PRIu64
		       ",\"ce_marked\":%" PRIu64 ",\"queue_max\":%" PRIu64
		       "}", i ? "," : "", c->rx, c->tx, c->lost, c->corrupted, c->duplicated,
		       c->reordered, c->delayed, c->tx_fail, c->delay_full, c->queue_fallback,
		       c->ce_marked, c->queue_max);
	}
	printf("]}\n");
	fflush(stdout);
}

/*
 * RTE_ETH_EVENT_QUEUE_STATE, on the vhost thread: which of its receive rings a node enabled.
 * RTE_ETH_EVENT_INTR_LSC: a node that left takes its rings with it (net_vhost forgets their
 * state then without an event), so the next node to attach enables its own.
 */
static int queue_state_event(uint16_t port_id, enum rte_eth_event_type type, void *arg,
			     void *ret_param)
{
	struct vs_port *p = arg;
	struct rte_eth_vhost_queue_event ev;

	(void)ret_param;
	if (type == RTE_ETH_EVENT_INTR_LSC) {
		if (!link_up(port_id))
			for (uint16_t q = 1; q < VS_MAX_QUEUES; q++)
				atomic_store_explicit(&p->q_on[q], false, memory_order_relaxed);
		return 0;
	}
	while (rte_eth_vhost_get_queue_event(port_id, &ev) == 0)
		if (!ev.rx && ev.queue_id < VS_MAX_QUEUES) /* our Tx: the node's Rx ring */
			atomic_store_explicit(&p->q_on[ev.queue_id], ev.enable, memory_order_relaxed);
	return 0;
}

static int ports_up(struct vs *vs, char *err, size_t errlen)
{
	uint16_t pid;
	unsigned i = 0;

	RTE_ETH_FOREACH_DEV(pid) {
		uint16_t nq = i < vs->o.ports && vs->o.queues[i] ? vs->o.queues[i] : 1;
		struct dn_config cfg = {.port_id = pid, .no_l3 = true, .promiscuous = true,
					.idle = vs->o.poll ? DN_IDLE_POLL : DN_IDLE_SLEEP,
					.nb_mbufs = 8191, .nb_queues = nq, .nb_lcores = nq};
		struct dn_port *dp;
		struct dn_lcore *lc = NULL;
		int rc;

		if (i == vs->o.ports)
			break;
		rc = dn_port_create(&cfg, &dp, err, errlen);
		if (rc != 0)
			return rc;
		/* A per-lcore context per queue registers its Rx interrupt on this thread; the
		 * switch reads the queues itself (the first context's pool takes the copies). */
		for (uint16_t q = nq; q-- > 0;)
			if ((rc = dn_lcore_create(dp, q, NULL, &lc)) != 0)
				return rc;
		vs->port[i].nq = nq;
		vs->port[i].port_id = pid;
		if (nq > 1 && ((rc = rte_eth_dev_callback_register(pid, RTE_ETH_EVENT_QUEUE_STATE,
						 queue_state_event, &vs->port[i])) != 0 ||
				(rc = rte_eth_dev_callback_register(pid, RTE_ETH_EVENT_INTR_LSC,
						 queue_state_event, &vs->port[i])) != 0)) {
			snprintf(err, errlen, "port %u: queue-state events: %s", i, rte_strerror(-rc));
			return rc;
		}
		vs->port[i].dp = dp;
		vs->port[i].pool = dn_lcore_pool(lc);
		vs->port[i].rng = seed_mix(vs->o.seed, i);
		vs->port[i].dl = calloc(VS_DELAY_SLOTS, sizeof(struct vs_delayed));
		if (vs->port[i].dl == NULL)
			return -ENOMEM;
		i++;
	}
	if (i != vs->o.ports) {
		snprintf(err, errlen, "only %u of %u vhost ports came up", i, vs->o.ports);
		return -ENODEV;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct vs vs;
	char err[256];
	int dashdash = argc, eargc, n, rc;
	char **eargv;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dashdash = i;
			break;
		}
	if (dashdash == argc) {
		fprintf(stderr, "wharf-vswitch: usage: wharf-vswitch [EAL args] -- --ports N --sock-dir DIR ...\n");
		return 2;
	}
	/* getopt wants a program name in front of the app's arguments: borrow the "--" slot. */
	argv[dashdash] = argv[0];
	rc = parse_args(argc - dashdash, argv + dashdash, &vs.o);
	argv[dashdash] = (char *)"--";
	if (rc != 0)
		return 2;
	mkdir(vs.o.sock_dir, 0755);
	eargv = eal_argv(argc, argv, dashdash, &vs.o, &eargc);
	if (eargv == NULL) {
		fprintf(stderr, "wharf-vswitch: out of memory\n");
		return 1;
	}
	n = dn_eal_init(eargc, eargv, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "wharf-vswitch: %s\n", err);
		return 1;
	}
	memset(vs.macs, 0xff, sizeof(vs.macs));
	if (ports_up(&vs, err, sizeof(err)) != 0) {
		fprintf(stderr, "wharf-vswitch: %s\n", err);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	uint64_t hz = rte_get_tsc_hz();
	vs.delay_cycles = hz / 1000000 * vs.o.delay_us;
	vs.cycles_per_byte = vs.o.rate_mbps ? (double)hz * 8.0 / ((double)vs.o.rate_mbps * 1e6) : 0;
	vs.hold_cycles = hz / 1000; /* 1 ms */
	uint64_t end = vs.o.seconds > 0 ? rte_rdtsc() + (uint64_t)(vs.o.seconds * (double)hz)
					: UINT64_MAX;
	bool intr = !vs.o.poll;
	uint32_t idle = 0, sleep_us = 10;

	fprintf(stderr, "wharf-vswitch: %u ports in %s, seed %" PRIu64 "\n", vs.o.ports,
		vs.o.sock_dir, vs.o.seed);
	while (!g_stop && rte_rdtsc() < end) {
		if (switch_once(&vs, rte_rdtsc()) > 0) {
			idle = 0;
			sleep_us = 10;
			continue;
		}
		if (!vs.o.poll && ++idle > 256 && !pending_frames(&vs))
			idle_wait(&vs, intr, &sleep_us);
	}
	print_counters(&vs);
	for (unsigned i = 0; i < vs.o.ports; i++) {
		uint16_t pid = vs.port[i].port_id;
		/*
		 * Closing a net_vhost port ends its node's connection, which raises LSC on the
		 * vhost thread while the port goes away: queue_state_event would read a closing
		 * port. Unregistered first (ports of one queue never registered it: -ENOENT).
		 */
		dn_callback_unregister(pid, RTE_ETH_EVENT_INTR_LSC, queue_state_event, &vs.port[i]);
		dn_callback_unregister(pid, RTE_ETH_EVENT_QUEUE_STATE, queue_state_event,
				       &vs.port[i]);
		rte_eth_dev_stop(pid);
		rte_eth_dev_close(pid);
	}
	dn_eal_fini();
	return 0;
}
