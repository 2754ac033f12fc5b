/*
 * dn.h — dpdk_net: the floor wharf stands on.
 *
 * EAL bring-up from argv, one port with one Rx/Tx queue pair per worker lcore, NUMA-local
 * mempools, Ethernet/ARP/IPv4/ICMP-echo input, IPv4 output with ARP resolution, and the
 * per-lcore run loop with its two idle modes. Upper layers (transport) plug in through two
 * hooks: an L4 input callback for protocols dpdk_net does not answer itself, and a poll
 * callback run once per loop iteration (timers, queued output).
 *
 * Call chain on an lcore:  dn_loop_run -> rte_eth_rx_burst -> dn_input_burst
 *   -> dn_arp_input | dn_ip_input -> (ICMP echo answered here) | l4_input hook
 *   -> ... -> dn_ip_send -> dn_tx_enqueue (software Tx queue, 4096 frames) -> rte_eth_tx_burst
 *   (once a burst is queued, or when the TSC drain timer fires; what the device ring does
 *   not take waits in the queue).
 *
 * Threads: a struct dn_lcore is owned by exactly one lcore; nothing in it is shared. The
 * port's ARP table has one writer (the lcore owning queue 0, where non-IP frames land) and
 * lock-free readers (see dn_arp.c).
 *
 * Flow steering (dn_steer.c), nb_lcores > 1. With one queue, lcore 0 receives every frame,
 * asks hooks.steer which lcore owns each IPv4 TCP/UDP flow and hands the frame over an SPSC
 * rte_ring; that lcore's loop drains its ring as if it were an Rx queue. The device's one Tx
 * queue stays lcore 0's: the others hand their frames back over one MP/SC ring that lcore 0
 * drains into its own Tx path. With a queue per lcore, each reads and sends on its own and
 * hands a frame the device put on the wrong queue to its owner's MP/SC ring. Sleeping lcores
 * are woken by an eventfd in their epoll set when a ring they read gets frames.
 */
#ifndef WHARF_DN_H
#define WHARF_DN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#define DN_BURST 32
#define DN_MAX_LCORES 16

/* Drop reasons. Each has a counter per lcore; names are what telemetry and tests print. */
#define DN_DROP_REASONS(X)                                                                    \
	X(ETH_TRUNC, "eth_truncated")          /* shorter than an Ethernet header */             \
	X(ETH_TYPE, "eth_type")                /* neither IPv4 nor ARP (VLANs, IPv6, ...) */      \
	X(ETH_DST, "eth_dst")                  /* unicast to some other MAC */                   \
	X(ARP_MALFORMED, "arp_malformed")      /* short, or not Ethernet/IPv4 ARP */             \
	X(ARP_NOT_US, "arp_not_us")            /* a request for someone else's address */        \
	X(ARP_PENDING_FULL, "arp_pending_full") /* no room to wait for resolution */             \
	X(ARP_TIMEOUT, "arp_timeout")          /* next hop never answered */                      \
	X(IP_TRUNC, "ip_truncated")            /* frame shorter than the IPv4 header */           \
	X(IP_VERSION, "ip_version")                                                               \
	X(IP_IHL, "ip_ihl")                    /* header length below 20 or past the frame */     \
	X(IP_LEN, "ip_total_length")           /* total length below IHL or past the frame, or  */\
						/* an mbuf chain whose lengths disagree        */\
	X(IP_CKSUM, "ip_checksum")                                                                \
	X(IP_TTL, "ip_ttl")                    /* TTL 0 on arrival */                             \
	X(IP_DST, "ip_dst")                    /* not our address (we do not route) */            \
	X(IP_FRAG, "ip_fragment")              /* fragments are never reassembled */             \
	X(IP_PROTO, "ip_proto")                /* no handler for this protocol */                 \
	X(ICMP_TRUNC, "icmp_truncated")                                                           \
	X(ICMP_CKSUM, "icmp_checksum")                                                            \
	X(ICMP_TYPE, "icmp_type")              /* neither echo request nor a reply we wait for */ \
	X(L4_CKSUM, "l4_checksum")             /* TCP/UDP checksum bad (hardware or software) */   \
	X(TX_FULL, "tx_full")                  /* the PMD would not take the packet */           \
	X(TX_TOO_BIG, "tx_too_big")            /* an IPv4 packet above the port MTU (DF set) */  \
	X(NO_MBUF, "no_mbuf")                  /* mempool empty when building a reply */         \
	X(NO_ROUTE, "no_route")                /* destination off-link and no gateway */        \
	X(STEER_FULL, "steer_ring_full")       /* software steering: owner lcore's ring full */ \
	X(TX_REFUSED, "tx_refused")            /* rte_eth_tx_prepare refused it, copied too */

enum dn_drop {
#define DN_X(n, s) DN_DROP_##n,
	DN_DROP_REASONS(DN_X)
#undef DN_X
	DN_DROP_MAX
};

const char *dn_drop_name(enum dn_drop d);

struct dn_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t arp_requests_out, arp_replies_out, icmp_echo_replies;
	uint64_t idle_sleeps, intr_wakeups;
	/* Interrupt sleeps that ran to their timeout, and those of them after which frames or a
	 * dn_lcore_wake were waiting (a wake-up that did not come: each cost the whole timeout). */
	uint64_t intr_timeouts, intr_late;
	/* Sleeps timed to end at an upper-layer timer due within DN_DUE_NEAR_US (dn_hooks.due). */
	uint64_t timed_sleeps;
	/* Flow steering: frames this lcore read from its device queue (rx_queue), handed to
	 * another lcore (steered_out) or took from its ring (steered_in); frames given to lcore
	 * 0 for Tx (tx_handoff) and, on lcore 0, frames of other lcores it sent (tx_relayed)
	 * on a one-queue port; eventfd wake-ups it caused. */
	uint64_t rx_queue, steered_out, steered_in, tx_handoff, tx_relayed, wakes_sent;
	uint64_t drops[DN_DROP_MAX];
};

/* Idle policy of the run loop (docs/architecture.md, "Threads and the data path"). */
enum dn_idle {
	DN_IDLE_POLL,  /* spin: lowest latency, one core per lcore */
	DN_IDLE_SLEEP, /* Rx interrupts where the PMD has them, else bounded back-off sleep */
};

struct dn_config {
	uint16_t port_id;        /* ethdev port; DN_PORT_AUTO picks the first one EAL found */
	uint32_t ip;             /* our IPv4 address, host byte order */
	uint8_t prefix_len;      /* on-link prefix */
	uint32_t gateway;        /* host order; 0 = none (off-link destinations are dropped);
				  * else an address of the on-link subnet, ARPed for like a peer */
	uint16_t mtu;            /* 0 = 1500; up to the device's max (jumbo: 9000 on virtio) */
	uint16_t nb_rxd, nb_txd; /* 0 = 1024 each */
	uint16_t nb_queues;      /* queue pairs; 0 = 1; DN_QUEUES_PER_LCORE: nb_lcores when
				  * the device has that many, else 1 */
	uint16_t nb_lcores;      /* lcores using the port; 0 = nb_queues. With more than one
				  * (up to DN_MAX_LCORES; nb_queues 1 or nb_lcores) frames
				  * are steered to their flow's owner, see dn_steer.c */
	enum dn_idle idle;
	uint32_t idle_max_sleep_us; /* back-off ceiling in sleep mode; 0 = 500 us */
	uint32_t idle_spin_us;      /* sleep mode: keep polling up to this long after work;
				     * 0: the environment's WHARF_IDLE_SPIN_US, else
				     * DN_IDLE_SPIN_DEFAULT_US (dn_idle_spin_us) */
	uint32_t link_wait_ms;      /* 0 = 3000; a link still down then is reported, not fatal */
	bool promiscuous;           /* the vswitch wants every frame */
	bool no_l3;                 /* raw L2 use (vswitch): no ARP/IP, no gratuitous ARP */
	uint32_t nb_mbufs;          /* 0 = sized from queue depths and lcore count */
};

#define DN_PORT_AUTO UINT16_MAX
#define DN_QUEUES_PER_LCORE UINT16_MAX
/* 2 ms: a sync training step's compute (a millisecond or two on the MLPs here) is bridged, so
 * its pull, push and barrier are not each paid a wake-up; gaps longer than that halve the
 * window down (docs/benchmarks.md, "The spin after work"). */
#define DN_IDLE_SPIN_DEFAULT_US 2000u
#define DN_IDLE_SPIN_MAX_US 100000u /* WHARF_IDLE_SPIN_US's most; dn_port_create refuses more */
/* The adaptive spin an lcore of a port with this config does after work (see idle_spin_us). */
uint32_t dn_idle_spin_us(const struct dn_config *cfg);
/*
 * An environment variable's number: s is decimal digits only (no sign, no blanks) in
 * lo..hi; its value into *out (out may be NULL). The transport's variables use it too.
 */
bool dn_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out);
/* WHARF_IDLE_SPIN_US, or DN_IDLE_SPIN_DEFAULT_US when unset (or not a number up to the most). */
uint32_t dn_idle_spin_env_us(void);

/*
 * The spin of a sleeping loop (a DPDK lcore, the kernel backend's epoll loop): after work it
 * keeps polling for a window before it sleeps, so the next message of a request and response
 * exchange (a reply, the next request) is taken without a wake-up, and an idle loop sleeps.
 * The window adapts between DN_SPIN_MIN_US and the configured most (as KVM's halt polling
 * does): a sleep that an event ended within the most doubles it (a longer window would have
 * caught that event), a sleep that lasted past the most halves it (the traffic has gaps no
 * window worth its CPU would bridge). A spin must not hold a CPU another thread is waiting
 * for (an application thread woken by the completion the loop just ran, another process on
 * the core): every DN_SPIN_YIELD_US of spinning it yields the CPU (sched_yield), which returns
 * at once when nobody else is ready. Times are in the caller's ticks (TSC cycles, ns).
 */
#define DN_SPIN_YIELD_US 2u
#define DN_SPIN_MIN_US 10u
struct dn_spin {
	uint64_t win;     /* the window now, between min and max; 0: never spin */
	uint64_t min, max;
	uint64_t busy;    /* when the loop first found nothing to do after its last work */
	uint64_t yield;   /* ticks of spinning between yields */
	uint64_t yielded; /* the last yield */
	bool worked;      /* work since the last idle check: the next one opens the window */
	bool spinning;    /* polled since the last work, window open */
	/* Spins that work ended (taken without a sleep) and that ran out (the loop slept):
	 * whether the window pays, for telemetry. Written by the loop's thread only. */
	uint64_t caught, expired;
};

/* max_us: the longest window in µs (0: never spin); tick_us: the caller's ticks in a µs. The
 * window starts at its most. */
void dn_spin_init(struct dn_spin *s, uint32_t max_us, uint64_t tick_us);

/*
 * The loop did work. The window opens at the next idle check, when the work is over: a
 * request whose handling (or the caller's own work between two polls) outlasts the window
 * still gets the whole window after it.
 */
static inline void dn_spin_work(struct dn_spin *s)
{
	if (s->spinning) {
		s->spinning = false;
		s->caught++;
	}
	s->worked = true;
}

/* True: keep polling (the window after the last work is still open at now); false: sleep. */
bool dn_spin_more(struct dn_spin *s, uint64_t now);

/* A sleep the window ran out into ended at now, woken by an event or not: adapts the window. */
void dn_spin_slept(struct dn_spin *s, uint64_t now, bool woken);

struct dn_port;
struct dn_lcore;

/*
 * Runs rte_eal_init on argv. On success returns how many arguments EAL consumed (so the
 * app's own arguments start at argv[ret]); on failure -errno with the reason in err.
 */
int dn_eal_init(int argc, char **argv, char *err, size_t errlen);

/* Releases EAL (rte_eal_cleanup). Hugepage files of this process go with it. */
void dn_eal_fini(void);

/* Configures and starts the port. Reason for a failure in err. */
int dn_port_create(const struct dn_config *cfg, struct dn_port **out, char *err, size_t errlen);
void dn_port_destroy(struct dn_port *port);
/*
 * rte_eth_dev_callback_unregister that waits out a run of the callback in progress on the
 * interrupt thread (-EAGAIN), so the callback's argument can go once it returns. Returns
 * what the last try said (0, or -ENOENT: none registered).
 */
int dn_callback_unregister(uint16_t port_id, enum rte_eth_event_type event,
			   rte_eth_dev_cb_fn cb, void *arg);
/*
 * Stops the device before teardown, so its PMD lets go of every frame it still holds (PMDs
 * such as virtio free sent mbufs only under ring pressure; their zero-copy payload goes back
 * to its owner now), and frees what the steering rings hold. Call once every lcore of the
 * port is quiet and before the upper layers free their send buffers; from then on frames
 * sent are freed, not transmitted. dn_port_destroy still frees the port.
 */
void dn_port_stop(struct dn_port *port);

uint16_t dn_port_id(const struct dn_port *port);
const struct rte_ether_addr *dn_port_mac(const struct dn_port *port);
uint32_t dn_port_ip(const struct dn_port *port);
uint16_t dn_port_mtu(const struct dn_port *port);
/* True when the device computes TCP checksums on Tx (else dpdk_net does it in software). */
bool dn_port_tx_l4_csum(const struct dn_port *port);
/*
 * The most TCP payload one frame may carry when the device segments TCP itself (TSO; on the
 * virtio pair a segmented frame crosses whole and arrives as one LRO frame), else 0.
 */
uint32_t dn_port_tso_max(const struct dn_port *port);
/*
 * A net_vhost endpoint learns TSO from its guest: on while the attached virtio driver
 * negotiated GUEST_TSO4 and GUEST_CSUM (it takes a segmentation request as virtio GSO),
 * off otherwise or with none attached. Re-reads that (cheap) into dn_port_tso_max; a no-op
 * for every other port. Called by one lcore (lcore 0); every lcore reads dn_port_tso_max.
 */
void dn_port_tso_refresh(struct dn_port *port);
/* True when Rx interrupts work for the port's queues, i.e. DN_IDLE_SLEEP really sleeps in epoll. */
bool dn_port_rx_intr(const struct dn_port *port);
bool dn_port_rss(const struct dn_port *port);
bool dn_port_link_up(const struct dn_port *port);
/*
 * The RSS dpdk_net gives a port with a queue per lcore: a symmetric Toeplitz key (a 16-bit
 * pattern repeated, so both directions of a flow hash alike; dn_rss_key_fill writes its
 * first len bytes, len at most 64) and a redirection table round robin over the queues. On
 * a virtio port the device does not hash; WHARF_PORT_RSS=peer says its peer does (the
 * testbed switch, wharf-vswitch --queues): the port then has the key and a table of
 * DN_PEER_RETA_SIZE entries, and dn_rss_queue is the queue the peer picks for a frame, from
 * its IPv4 addresses and TCP or UDP ports (the addresses alone for other protocols and later
 * fragments; queue 0 for what is not IPv4).
 */
#define DN_PEER_RETA_SIZE 128
void dn_rss_key_fill(uint8_t *key, uint32_t len);
uint16_t dn_rss_queue(const struct rte_mbuf *m, uint16_t nb_queues);
/* RSS key and redirection table as programmed (for steering); NULL/0 when no RSS. */
const uint8_t *dn_port_rss_key(const struct dn_port *port, uint32_t *key_len);
const uint16_t *dn_port_reta(const struct dn_port *port, uint32_t *reta_size);
/* Lcores sharing the port, whether they steer flows among themselves (more than one), and
 * the queue pairs they use (1: shared by all; nb_lcores: one each). */
uint16_t dn_port_nb_lcores(const struct dn_port *port);
bool dn_port_sw_steer(const struct dn_port *port);
uint16_t dn_port_nb_queues(const struct dn_port *port);

/*
 * Steering by listening port: lcore `index` claims the flows to local L4 port
 * lport (it listens there alone, so every connection to that port is its own). Claimed by
 * two lcores the port is shared, and its flows go to the hooks' steer function as before.
 * Control path (a spinlock); -EINVAL without flow steering. dn_steer_owner is what
 * the classifier reads per frame: the claiming lcore, or -1 (unclaimed or shared).
 */
int dn_steer_claim(struct dn_port *p, uint16_t lport, uint16_t index);
void dn_steer_unclaim(struct dn_port *p, uint16_t lport, uint16_t index);
int dn_steer_owner(const struct dn_port *p, uint16_t lport);
/* True when the device took a flow rule delivering lport's TCP segments to its claimer's
 * queue (a queue per lcore on a device with rte_flow queue rules: NICs, not virtio here). */
bool dn_steer_rule(const struct dn_port *p, uint16_t lport);

/* An IPv4 flow as the classifier sees it for flow steering (host byte order). */
struct dn_flow {
	uint32_t saddr, daddr;   /* the packet's source (the peer) and destination (us) */
	uint16_t sport, dport;
	uint8_t proto;           /* IPPROTO_TCP or IPPROTO_UDP */
};

/*
 * Reads the flow of a received Ethernet frame (first len bytes at frame) for steering: true
 * for an unfragmented IPv4 TCP/UDP frame to our_ip whose headers up to the ports are there;
 * false for anything else (lcore 0 processes those: ARP, ICMP, malformed frames get its usual
 * checks and drop counters). Pure; nothing is validated beyond what reading needs.
 */
bool dn_steer_flow_parse(const uint8_t *frame, uint32_t len, uint32_t our_ip, struct dn_flow *f);

/* Hooks an upper layer installs on an lcore. */
struct dn_hooks {
	/*
	 * An IPv4 packet for us with a protocol dpdk_net does not answer. m->data_off points at
	 * the IPv4 header; l3_len holds its length. The hook owns m from then on.
	 */
	void (*l4_input)(void *arg, struct dn_lcore *lc, struct rte_mbuf *m);
	/* Once per loop iteration with the current TSC; returns how much work it did (0 = idle). */
	unsigned (*poll)(void *arg, struct dn_lcore *lc, uint64_t now_tsc);
	/*
	 * Flow steering, read on each lcore that reads a device queue (one queue: lcore 0): the
	 * index of the lcore owning flow f (an index >= nb_lcores counts as 0). NULL: a frame
	 * stays on the lcore that read it (with a queue each, frames with no flow still go to
	 * lcore 0). Runs once per received TCP/UDP frame: pure, no allocation.
	 */
	uint32_t (*steer)(void *arg, const struct dn_flow *f);
	/*
	 * Asked before each sleep (dn_lcore_idle_wait): the TSC by which the lcore must run its
	 * loop again, the upper layer's next timer or the end of its caller's wait; UINT64_MAX
	 * for none. The sleep ends by then (none is longer than 1 ms either way). NULL: none.
	 */
	uint64_t (*due)(void *arg, struct dn_lcore *lc);
	void *arg;
};

/*
 * Per-lcore context: created on (and used only by) the lcore it serves. index is the queue
 * it owns, or with software steering its lcore index 0..nb_lcores-1 (0 owns the device
 * queue). -EINVAL for an index out of range, -ENOMEM.
 */
int dn_lcore_create(struct dn_port *port, uint16_t index, const struct dn_hooks *hooks,
		    struct dn_lcore **out);
void dn_lcore_destroy(struct dn_lcore *lc);
struct dn_port *dn_lcore_port(struct dn_lcore *lc);
uint16_t dn_lcore_queue(const struct dn_lcore *lc);
uint16_t dn_lcore_index(const struct dn_lcore *lc);
/*
 * Wakes lc if it sleeps in dn_lcore_idle_wait, or makes its next sleep return at once: one
 * eventfd write in lc's epoll set (effective where lc sleeps in epoll: Rx interrupts or
 * software steering; a back-off sleep without them lasts at most idle_max_sleep_us). Safe
 * from any thread: for work handed to lc from elsewhere (e.g. Tx completions it must see).
 */
void dn_lcore_wake(struct dn_lcore *lc);
/*
 * On lc's own thread: true (once) when dn_lcore_wake was called since the last call. A
 * caller that waits for events in a loop of dn_loop_once and dn_lcore_idle_wait returns on
 * it, for the work handed over lies outside the device queue the loop looks at.
 */
bool dn_lcore_take_wake(struct dn_lcore *lc);
/*
 * The cheap form for frequent hand-offs under software steering (a ring lc re-checks before
 * sleeping): writes the eventfd only when lc's sleeping flag is up; a no-op without steering.
 */
void dn_lcore_wake_sleeper(struct dn_lcore *lc);
struct rte_mempool *dn_lcore_pool(struct dn_lcore *lc);
const struct dn_stats *dn_lcore_stats(const struct dn_lcore *lc);
/* The lcore's spin after work (its caught and expired counts). */
const struct dn_spin *dn_lcore_spin(const struct dn_lcore *lc);
/* Counts a drop an upper layer decided on (e.g. a bad TCP checksum). */
void dn_lcore_count_drop(struct dn_lcore *lc, enum dn_drop why);
void dn_lcore_set_hooks(struct dn_lcore *lc, const struct dn_hooks *hooks);

/*
 * Input a burst of received frames (what the run loop does after rte_eth_rx_burst).
 * Consumes every mbuf.
 */
void dn_input_burst(struct dn_lcore *lc, struct rte_mbuf **pkts, uint16_t n);

/* Send flags for dn_ip_send. */
#define DN_TX_L4_CSUM (1u << 0) /* fill the TCP/UDP checksum (offload or software) */
#define DN_TX_ECT0    (1u << 1) /* mark ECN-capable transport, ECT(0) (RFC 3168) */
/* TCP segmentation offload: m->l4_len and m->tso_segsz set by the caller, the frame may
 * exceed the MTU (up to an IPv4 total length of 65535); needs dn_port_tso_max() > 0. */
#define DN_TX_TSO     (1u << 2)

/*
 * Sends an IPv4 packet. m->data_off points at the L4 header; there must be headroom for
 * IPv4 + Ethernet. Resolves the next hop through ARP (the packet waits in a small pending
 * queue while a request is out). Consumes m on success and on failure (failures are counted
 * as drops); returns 0, -EAGAIN when queued behind ARP, or -errno.
 */
int dn_ip_send(struct dn_lcore *lc, struct rte_mbuf *m, uint32_t dst_ip, uint8_t proto,
	       uint32_t flags);

/* Queues a complete Ethernet frame for Tx on this lcore's queue. Consumes m. */
void dn_tx_enqueue(struct dn_lcore *lc, struct rte_mbuf *m);
/* Pushes buffered Tx frames to the PMD now (as many as its ring takes). */
void dn_tx_flush(struct dn_lcore *lc);
/* True while frames wait in the lcore's software Tx queue. */
bool dn_tx_pending(const struct dn_lcore *lc);
/* Asks the PMD to free the mbufs of frames it has sent (most free lazily); now = rte_rdtsc(). */
void dn_tx_reclaim(struct dn_lcore *lc, uint64_t now);

/*
 * TCP/UDP checksum, in software, of the L4 data starting l4_off bytes into m (any chain),
 * with ip's pseudo header; the value to store (for UDP a 0 result is sent as 0xffff).
 */
uint16_t dn_l4_cksum_sw(const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip, uint32_t l4_off);
/* Ones'-complement sum of len bytes folded to 16 bits (what rte_raw_cksum returns, faster). */
uint16_t dn_raw_cksum(const void *buf, size_t len);
/* True when the TCP/UDP segment at l4 (l4_len bytes, contiguous) sums correctly with ip's
 * pseudo header (whose total length must cover it). */
bool dn_l4_cksum_ok(const struct rte_ipv4_hdr *ip, const void *l4, uint32_t l4_len);

/* Sends an ICMP echo request (id, seq, payload_len bytes of pattern). */
int dn_icmp_echo_send(struct dn_lcore *lc, uint32_t dst_ip, uint16_t id, uint16_t seq,
		      uint16_t payload_len);
/* Echo replies addressed to us are handed here when set (wharf-ping); else dropped. */
typedef void (*dn_echo_reply_fn)(void *arg, uint32_t src_ip, uint16_t id, uint16_t seq,
				 const uint8_t *payload, uint16_t len);
void dn_lcore_set_echo_reply(struct dn_lcore *lc, dn_echo_reply_fn fn, void *arg);

/* Sends a gratuitous ARP for our address. */
int dn_arp_announce(struct dn_lcore *lc);
/* Looks up the MAC for an on-link IPv4 address (host order); 0 if known, -ENOENT if not. */
int dn_arp_lookup(struct dn_port *port, uint32_t ip, struct rte_ether_addr *mac);

/*
 * Runs the loop on the calling lcore until *stop becomes true (relaxed load; the writer
 * is a signal handler or another thread and needs no ordering beyond eventual visibility).
 * In DN_IDLE_SLEEP mode an idle lcore sleeps in epoll on the queue's Rx interrupt (or backs
 * off up to idle_max_sleep_us when the PMD has none) and wakes on traffic.
 */
int dn_loop_run(struct dn_lcore *lc, volatile const int *stop);
/* One iteration: Rx burst, input, hooks, Tx drain. Returns the work done (packets + hook). */
unsigned dn_loop_once(struct dn_lcore *lc, uint64_t now_tsc);
/* Sleeps as the idle policy says (Rx interrupt, at most 1 ms; or one back-off step). */
void dn_lcore_idle_wait(struct dn_lcore *lc);
/*
 * The calling thread's timer slack widened to DN_SLEEP_SLACK_NS for one sleep with a timeout
 * (begin returns what to restore with end). A short timeout is almost never what ends an idle
 * network sleep, yet arming and cancelling its timer reprograms the CPU's timer whenever it
 * expires before the next tick, and under a hypervisor each reprogramming exits to it: on
 * this Firecracker VM (HZ 250) a same-core sleeping ping-pong took 5 us or 25-35 us per round
 * trip depending on where the tick fell (p99 28 us against a p50 of 5). With the slack the
 * timer lands past the next tick and is never reprogrammed for (p99 6-7 us); a sleep that
 * does run to its timeout ends at most DN_SLEEP_SLACK_NS later. Other sleeps of the thread
 * keep their slack.
 */
#define DN_SLEEP_SLACK_NS 4000000ul
/*
 * A sleep whose end is a timer due within DN_DUE_NEAR_US (a delayed ACK, 200 us after the
 * data; a fused frame's hold, 50 us; the end of a short tl_poll) is timed exactly: that
 * timeout is what will likely end it, so it keeps the thread's own slack (50 us by default).
 * A timer further out (a retransmission timeout, at least 1 ms) waits for the next wake-up:
 * traffic, or a sleep of at most 1 ms and its slack.
 */
#define DN_DUE_NEAR_US 500u
unsigned long dn_sleep_slack_begin(void);
void dn_sleep_slack_end(unsigned long was);

/*
 * Observability (dn_obs.c): registers the /wharf/dn/... telemetry commands and enables
 * rte_pdump capture (call once after EAL init), and lists an lcore context for telemetry.
 */
int dn_obs_init(void);
/* Lists lc in the first free slot of DN_MAX_LCORES (slots of unregistered ones are reused);
 * -ENOSPC when every slot is taken. */
int dn_obs_register(struct dn_lcore *lc);
/*
 * dn_lcore_destroy does it: the context leaves the list, and the call returns once no
 * telemetry read holds any listed context (one that found lc before it left may be
 * reading it), so the context can be freed.
 */
void dn_obs_unregister(struct dn_lcore *lc);
/*
 * A telemetry handler's read of slot i: the context listed there (NULL: none), which stays
 * valid until dn_obs_put. Every dn_obs_get, NULL or not, is followed by one dn_obs_put.
 */
const struct dn_lcore *dn_obs_get(unsigned i);
void dn_obs_put(void);

/* Parses "a.b.c.d" or "a.b.c.d/len" into host-order address and prefix. 0 or -EINVAL. */
int dn_parse_ipv4(const char *s, uint32_t *ip, uint8_t *prefix_len);

#endif /* WHARF_DN_H */
