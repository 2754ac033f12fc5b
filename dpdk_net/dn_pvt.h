/*
 * dn_pvt.h — dpdk_net internals shared by its files and its tests. Not for other layers.
 */
#ifndef WHARF_DN_PVT_H
#define WHARF_DN_PVT_H

#include <stdatomic.h>
#include <sys/epoll.h>
#include <time.h>

#include <rte_branch_prediction.h>
#include <rte_epoll.h>
#include <rte_ether.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "dpdk_net/dn_log.h"

#include "dpdk_net/dn.h"

/* dpdk_net's log type, "wharf.dn" (dn_log.c). */
extern int dn_logtype;
#define DN_LOG(lvl, ...) WLOG(dn_logtype, lvl, __VA_ARGS__)

#define DN_ARP_SLOTS 256           /* power of two; on-link neighbours of one host */
#define DN_ARP_EXPIRE_MS 60000     /* an entry is trusted this long after it was learnt */
#define DN_ARP_RETRY_MS 200        /* re-ask an unanswered next hop this often */
#define DN_ARP_GIVEUP_MS 1000      /* then drop what waits for it */
#define DN_PENDING_MAX 64          /* packets waiting for ARP, per lcore */
#define DN_TX_DRAIN_US 50          /* longest a buffered Tx frame waits for company */
#define DN_TXQ_SLOTS 4096          /* software Tx queue per lcore (power of two) */
#define DN_TSO_MAX 65000           /* TCP payload of one TSO frame: IPv4 total length <= 65535 */
#define DN_TSO_DATA_ROOM (RTE_PKTMBUF_HEADROOM + 9216)
#define DN_RSS_KEY_MAX 64
#define DN_RETA_MAX 512
#define DN_STEER_RX_RING 4096      /* frames the others may queue to one lcore */
#define DN_STEER_RX_MAX (2 * DN_BURST) /* one Rx step with a queue each: ring + device burst */
#define DN_STEER_TX_RING 8192      /* frames the other lcores may queue for lcore 0's Tx */

/*
 * Wake-up of one lcore in software steering, written by its owner (sleeping) and by
 * whoever hands it work (the producer of a ring it reads). Dekker's pattern: the sleeper
 * stores sleeping = 1, fences (seq_cst) and looks at its rings once more; the producer
 * enqueues, fences (seq_cst) and reads sleeping. Either the sleeper sees the frames or the
 * producer sees the flag and writes the eventfd the sleeper waits on. One cache line each:
 * producers poll these flags at burst rate.
 */
struct dn_wake {
	_Atomic int sleeping;
	int efd;
} __rte_cache_aligned;

/*
 * ARP table: open addressing on the IPv4 address, one writer (the lcore owning queue 0,
 * where non-IP frames land: RSS hashes only IP), readers on any lcore. An entry's word
 * packs the MAC (low 48 bits) and a valid bit; the writer clears it (release), writes
 * ip/expiry, and publishes the word again (release). A reader loads the word (acquire),
 * reads ip, and re-loads the word: an unchanged valid word means ip and MAC belong together.
 */
#define DN_ARP_VALID (1ull << 63)
struct dn_arp_entry {
	_Atomic uint64_t word;
	_Atomic uint32_t ip;
	_Atomic uint64_t expire_tsc;
};

struct dn_port {
	uint16_t port_id;
	uint16_t nb_queues;
	/*
	 * A virtio/vhost device's queues past nb_queues (its queues=N for another lcore count):
	 * configured, never sent on, read by lcore 0 beside its own, since the peer may send
	 * on them (dn_rx_device).
	 */
	uint16_t nb_rx_extra;
	/* net_vhost: the guest's Tx queues past ours already reported (vhost_queue_event) */
	_Atomic uint64_t told_queues;
	bool auto_queues;       /* created with DN_QUEUES_PER_LCORE: dpdk_net picked the queues */
	bool queue_cb;          /* vhost_queue_event registered */
	uint16_t data_room;            /* mbuf data room: one frame of the MTU per buffer */
	struct rte_ether_addr mac;
	uint32_t ip, netmask, gateway; /* host order */
	struct dn_config cfg;
	bool tx_ip_csum, tx_l4_csum, rx_ip_csum, rx_l4_csum;
	uint16_t tx_seg_max;    /* buffers one frame of at most the MTU may span (dn_tx_seg_max) */
	bool tx_prepare;        /* frames pass rte_eth_tx_prepare before they are queued */
	/* The device cuts TCP segments (TSO) and takes large frames in; a net_vhost endpoint's
	 * follows its guest (written by lcore 0 in dn_port_tso_refresh, read by every lcore). */
	_Atomic bool tso;
	bool vhost_tso;         /* a net_vhost endpoint: tso follows its guest (dn_port_tso_refresh) */
	bool rx_intr;
	int rx_sock;            /* net_af_xdp, one queue: its AF_XDP socket, slept on as an Rx
				 * interrupt (dn_port.c, xsk_rx_sock); -1 none */
	bool keep_at_exit; /* virtio_user with Rx interrupts: never stopped or closed (dn_port_destroy) */
	bool rss;
	bool rss_by_peer;       /* WHARF_PORT_RSS=peer: the peer hashes, as dn_rss_queue */
	uint8_t rss_key[DN_RSS_KEY_MAX];
	uint32_t rss_key_len;
	uint16_t reta[DN_RETA_MAX];
	uint32_t reta_size;
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
	/* Flow steering (nb_lcores > 1); rings and eventfds made at create. */
	uint16_t nb_lcores;
	bool sw_steer;                            /* lcores steer flows among themselves */
	bool mq;                                  /* ... each on a queue of its own */
	bool stopped;                             /* dn_port_stop: Tx frees, never sends */
	/* -> lcore i: one queue, from lcore 0 (SP/SC; [0] unused); a queue each, from any (MP/SC) */
	struct rte_ring *steer_rx[DN_MAX_LCORES];
	struct rte_ring *steer_tx;                /* one queue: lcores 1.. -> lcore 0's Tx (MP/SC) */
	struct dn_wake wake[DN_MAX_LCORES];
	/*
	 * Local L4 ports claimed by one lcore (dn_steer_claim): 0 none, i + 1 lcore i, 0xff two
	 * lcores (shared). Written under claim_lock on the control path, read by lcore 0 per
	 * steered frame (relaxed: a claim is made before its listener takes connections).
	 */
	_Atomic uint8_t *lport_owner;
	uint8_t *lport_claims;
	struct rte_flow **lport_rule; /* a queue each: the device's rule for a claimed port, or NULL */
	rte_spinlock_t claim_lock;
	struct dn_arp_entry arp[DN_ARP_SLOTS];
};

struct dn_pending {
	struct rte_mbuf *m; /* Ethernet header room reserved; IPv4 header already written */
	uint32_t next_hop;
	uint64_t since_tsc;
};

struct dn_lcore {
	struct dn_port *port;
	struct rte_mempool *pool;
	uint16_t port_id;
	uint16_t queue;
	uint16_t index;         /* lcore index on the port (== queue without steering) */
	uint16_t ip_id;
	bool steer;             /* flow steering: see dn_steer.c */
	struct rte_ring *rx_ring; /* steering (one queue: index > 0): frames others handed us */
	struct rte_ring *tx_ring; /* steering, one queue, index > 0: our Tx goes to lcore 0 here */
	bool efd_registered;    /* our eventfd is in this thread's epoll set */
	_Atomic uint32_t handed; /* dn_lcore_wake since the last dn_lcore_take_wake */
	struct rte_epoll_event efd_ev;
	/*
	 * Software Tx queue in front of the device ring, like a qdisc: a ring that is full for
	 * a moment (a virtio peer that has not polled yet) delays frames instead of dropping
	 * them, while this lcore goes on draining its own Rx. tx_head..tx_tail, free-running.
	 */
	uint32_t tx_head, tx_tail;
	struct rte_mbuf *tx[DN_TXQ_SLOTS];
	uint64_t tx_drain_tsc;  /* flush buffered Tx at or after this TSC */
	uint64_t tx_drain_cycles;
	struct dn_hooks hooks;
	dn_echo_reply_fn echo_fn;
	void *echo_arg;
	unsigned n_pending;
	uint64_t next_arp_tsc;  /* next look at the pending queue */
	uint64_t last_arp_req_tsc;
	uint32_t idle_spins;
	uint32_t sleep_us;      /* current back-off step */
	/*
	 * Frames the last look before sleeping found (dn_rx_recheck): taken by the next Rx
	 * burst. A real burst, not rte_eth_rx_queue_count, which virtio does not implement.
	 */
	uint16_t stash_n;
	struct rte_mbuf *stash[DN_BURST];
	uint16_t rx_extra;      /* lcore 0: the port's nb_rx_extra queues it reads too */
	uint16_t rx_next;       /* ... the queue its next burst starts at (0: its own) */
	bool intr_registered;   /* an Rx interrupt, or the AF_XDP socket, wakes its sleeps */
	bool sock_registered;   /* the port's rx_sock is in this thread's epoll set */
	struct rte_epoll_event sock_ev;
	bool tx_cleanup_ok;     /* the PMD answers rte_eth_tx_done_cleanup */
	struct dn_spin spin;    /* sleep mode's adaptive spin after work, in TSC cycles */
	uint64_t next_cleanup_tsc;
	struct dn_pending pending[DN_PENDING_MAX];
	struct dn_stats stats;
} __rte_cache_aligned;

static inline void dn_drop(struct dn_lcore *lc, struct rte_mbuf *m, enum dn_drop why)
{
	lc->stats.drops[why]++;
	rte_pktmbuf_free(m);
}

static inline bool dn_on_link(const struct dn_port *p, uint32_t ip)
{
	return ((ip ^ p->ip) & p->netmask) == 0;
}

/* dn_arp.c */
void dn_arp_input(struct dn_lcore *lc, struct rte_mbuf *m);
void dn_arp_learn(struct dn_port *p, uint32_t ip, const struct rte_ether_addr *mac, bool create);
int dn_arp_request(struct dn_lcore *lc, uint32_t ip);
void dn_arp_pending_run(struct dn_lcore *lc, uint64_t now);
int dn_arp_pending_add(struct dn_lcore *lc, struct rte_mbuf *m, uint32_t next_hop);

/* dn_loop.c */

/*
 * A burst from lc's queue and, for lcore 0 of a device with extra queues, from those too,
 * each burst beginning at the next queue in turn so that none waits behind a busy one.
 */
static inline uint16_t dn_rx_burst(struct dn_lcore *lc, struct rte_mbuf **pkts)
{
	uint16_t n, k, q;

	if (likely(lc->rx_extra == 0))
		return rte_eth_rx_burst(lc->port_id, lc->queue, pkts, DN_BURST);
	q = lc->rx_next;
	lc->rx_next = q == lc->rx_extra ? 0 : q + 1;
	for (n = 0, k = 0; k <= lc->rx_extra && n < DN_BURST; k++) {
		n += rte_eth_rx_burst(lc->port_id, q, pkts + n, (uint16_t)(DN_BURST - n));
		q = q == lc->rx_extra ? 0 : q + 1;
	}
	return n;
}

/*
 * The device's Rx queue, frames found by the look before sleeping first: what dn_loop_once
 * and lcore 0 under software steering read.
 */
static inline uint16_t dn_rx_device(struct dn_lcore *lc, struct rte_mbuf **pkts)
{
	uint16_t n = lc->stash_n;

	if (likely(n == 0)) {
		n = dn_rx_burst(lc, pkts);
		lc->stats.rx_queue += n;
		return n;
	}
	for (uint16_t i = 0; i < n; i++)
		pkts[i] = lc->stash[i];
	lc->stash_n = 0;
	lc->stats.rx_queue += n;
	return n;
}

/*
 * After arming the Rx interrupt: a frame that arrived since the last empty burst raised no
 * event, so look once more. True when frames came (kept for the next burst: do not sleep).
 */
static inline bool dn_rx_recheck(struct dn_lcore *lc)
{
	if (lc->stash_n == 0)
		lc->stash_n = dn_rx_burst(lc, lc->stash);
	return lc->stash_n > 0;
}

/* Arms the Rx interrupts of lc's queues (its extra ones too): true when its own is armed. */
static inline bool dn_rx_intr_arm(struct dn_lcore *lc)
{
	if (lc->sock_registered) /* a socket needs no arming */
		return true;
	if (!lc->intr_registered || rte_eth_dev_rx_intr_enable(lc->port_id, lc->queue) != 0)
		return false;
	for (uint16_t q = 1; q <= lc->rx_extra; q++)
		rte_eth_dev_rx_intr_enable(lc->port_id, q);
	return true;
}

static inline void dn_rx_intr_disarm(struct dn_lcore *lc)
{
	if (lc->sock_registered)
		return;
	rte_eth_dev_rx_intr_disable(lc->port_id, lc->queue);
	for (uint16_t q = 1; q <= lc->rx_extra; q++)
		rte_eth_dev_rx_intr_disable(lc->port_id, q);
}

/*
 * One epoll sleep of lc on its thread's set (Rx interrupt, wake-up eventfd) of at most
 * timeout_us, counted: woken (intr_wakeups), or run to its timeout (intr_timeouts; intr_late
 * when waiting(lc) then finds frames, an interrupt that did not come, or a dn_lcore_wake is
 * still untaken, a hand-off whose eventfd write did not end the wait it was meant for).
 * Whole milliseconds wait in rte_epoll_wait. A shorter wait (an upper-layer timer falls due
 * sooner: dn_hooks.due) waits in epoll_pwait2 on the same set, found as the set the wake-up
 * eventfd's entry names; rte_epoll_ctl made every entry in it (its data is the struct
 * rte_epoll_event), so each event's callback is run here as rte_epoll_wait would run it.
 * Without that eventfd, whole milliseconds, rounded up. exact: the timeout is a timer's,
 * which will likely end the sleep, so the thread keeps its own timer slack
 * (dn_sleep_slack_begin widens it otherwise).
 */
static inline void dn_epoll_sleep(struct dn_lcore *lc, uint32_t timeout_us, bool exact,
				  bool (*waiting)(struct dn_lcore *lc))
{
	struct rte_epoll_event ev;
	unsigned long slack = exact ? 0 : dn_sleep_slack_begin();
	int r;

	/* The set's descriptor is the one rte_epoll_ctl put the wake-up eventfd in. */
	if (timeout_us % 1000u == 0 || !lc->efd_registered) {
		r = rte_epoll_wait(RTE_EPOLL_PER_THREAD, &ev, 1, (int)((timeout_us + 999u) / 1000u));
	} else {
		struct timespec ts = {.tv_sec = timeout_us / 1000000u,
				      .tv_nsec = (long)(timeout_us % 1000000u) * 1000};
		struct epoll_event e[4];
		r = epoll_pwait2(lc->efd_ev.epfd, e, 4, &ts, NULL);
		/* What rte_epoll_wait does with an event, done here: an Rx interrupt's is
		 * edge-triggered, so a second wait would not see it again. */
		for (int i = 0; i < r; i++) {
			struct rte_epoll_event *rev = e[i].data.ptr;
			if (rev->epdata.cb_fun != NULL)
				rev->epdata.cb_fun(rev->fd, rev->epdata.cb_arg);
		}
	}

	if (!exact)
		dn_sleep_slack_end(slack);
	dn_spin_slept(&lc->spin, rte_rdtsc(), r > 0);
	if (r > 0) {
		lc->stats.intr_wakeups++;
	} else if (r == 0) {
		lc->stats.intr_timeouts++;
		if (waiting(lc) || atomic_load_explicit(&lc->handed, memory_order_relaxed))
			lc->stats.intr_late++;
	}
}

/*
 * dn_loop.c: the longest sleep at TSC now: cap_us, or the time left to the hooks' due time
 * when that is within DN_DUE_NEAR_US (0: due already).
 */
uint32_t dn_sleep_cap_us(struct dn_lcore *lc, uint64_t now, uint32_t cap_us);

/* dn_steer.c */
int dn_steer_port_init(struct dn_port *p, char *err, size_t errlen);
void dn_steer_port_fini(struct dn_port *p);
/* Frees the frames in the steering rings, keeping the rings. */
void dn_steer_port_drain(struct dn_port *p);
void dn_steer_lcore_init(struct dn_lcore *lc);
/* Every port: one wake-up eventfd per lcore (dn_lcore_wake), in the lcore's epoll set. */
int dn_wake_port_init(struct dn_port *p, char *err, size_t errlen);
void dn_wake_port_fini(struct dn_port *p);
void dn_wake_lcore_init(struct dn_lcore *lc);
void dn_wake_lcore_fini(struct dn_lcore *lc);
/* Rx step of a steered lcore. One queue: lcore 0 relays others' Tx, reads the device and
 * hands away the flows it does not own; others read their ring. A queue each: the ring,
 * then the own queue, handing away what others own. Local frames land in pkts (room for
 * DN_STEER_RX_MAX); *work counts everything done (frames relayed and handed away too). */
uint16_t dn_steer_rx(struct dn_lcore *lc, struct rte_mbuf **pkts, unsigned *work);
/* Tx flush of a steered lcore other than 0: its software queue into lcore 0's ring. */
void dn_steer_tx_flush(struct dn_lcore *lc);
/* The sleep of a steered lcore whose spin after work ran out (dn_lcore_idle_wait), at most
 * cap_us (exact: see dn_epoll_sleep). */
void dn_steer_idle_wait(struct dn_lcore *lc, uint32_t cap_us, bool exact);
/* Lcore 0: classify a burst; frames for others go to their rings (or are dropped, counted
 * as STEER_FULL). Returns how many stay, compacted to the front of pkts. */
uint16_t dn_steer_classify(struct dn_lcore *lc, struct rte_mbuf **pkts, uint16_t n);
/* Wakes lcore index if it sleeps; true when it wrote its eventfd. Any thread. */
bool dn_steer_wake(struct dn_port *p, uint16_t index);

/*
 * Buffers the device takes for one frame of at most the MTU: its dev_info's nb_mtu_seg_max
 * (0, as many PMDs leave it, states no limit), 1 on a device (virtual too) that does not offer
 * RTE_ETH_TX_OFFLOAD_MULTI_SEGS. dn_ip_send copies a longer chain into one buffer.
 */
uint16_t dn_tx_seg_max(const struct rte_eth_dev_info *di);

/* dn_ip.c */
void dn_ip_input(struct dn_lcore *lc, struct rte_mbuf *m);
void dn_eth_fill(struct dn_lcore *lc, struct rte_mbuf *m, const struct rte_ether_addr *dst,
		 uint16_t ether_type);

#endif /* WHARF_DN_PVT_H */

/* True once a port was left open for the process exit (dn_port_destroy): EAL stays up. */
bool dn_port_keeps_eal(void);
