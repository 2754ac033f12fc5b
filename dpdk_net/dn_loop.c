/*
 * dn_loop.c — the per-lcore run loop and its idle policy.
 *
 * dn_loop_run -> dn_loop_once: rte_eth_rx_burst -> dn_input_burst -> hooks.poll
 *   -> ARP pending queue (at most every 100 us) -> Tx drain when DN_TX_DRAIN_US elapsed
 *   -> when idle: spin (DN_IDLE_POLL) or dn_lcore_idle_wait (DN_IDLE_SLEEP).
 *
 * Sleeping: after work the lcore keeps polling for the spin window (dn_spin, dn.h: adapted
 * between 10 us and WHARF_IDLE_SPIN_US, 2 ms by default, yielding the CPU every 2 us to any
 * thread that wants it); past it the lcore arms its queue's Rx interrupt and sleeps in epoll
 * for at most 1 ms (so upper-layer timers still run), or, on PMDs without Rx interrupts
 * (net_tap), sleeps with an exponential back-off capped at idle_max_sleep_us. A sleep ends
 * on time for an upper-layer timer due within DN_DUE_NEAR_US (dn_hooks.due). Either way a
 * packet wakes the lcore (or is found within idle_max_sleep_us) while an idle process costs
 * a few percent of a core at most. Lcores steering flows among themselves read rings too
 * and sleep on an eventfd as well (dn_steer.c).
 */
#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_pause.h>

#include "dpdk_net/dn_pvt.h"

#define DN_IDLE_SPINS 256     /* idle iterations before the first sleep */
#define DN_INTR_TIMEOUT_US 1000 /* longest epoll sleep: upper layers without a due hook
				 * need their timers run every ~1 ms */
#define DN_SLEEP_MIN_US 10

unsigned dn_loop_once(struct dn_lcore *lc, uint64_t now)
{
	struct rte_mbuf *pkts[DN_STEER_RX_MAX];
	unsigned work, rx;
	uint16_t n;

	if (likely(!lc->steer)) {
		n = dn_rx_device(lc, pkts);
		rx = n;
	} else {
		n = dn_steer_rx(lc, pkts, &rx); /* frames handed on or relayed count as Rx work */
	}
	work = rx;
	if (n > 0)
		dn_input_burst(lc, pkts, n);
	if (lc->hooks.poll != NULL)
		work += lc->hooks.poll(lc->hooks.arg, lc, now);
	if (lc->n_pending > 0 && now >= lc->next_arp_tsc) {
		dn_arp_pending_run(lc, now);
		lc->next_arp_tsc = now + rte_get_tsc_hz() / 10000;
	}
	if (dn_tx_pending(lc) && (now >= lc->tx_drain_tsc || rx == 0))
		dn_tx_flush(lc);
	if (rx == 0 && lc->tx_cleanup_ok && now >= lc->next_cleanup_tsc)
		dn_tx_reclaim(lc, now);
	if (work > 0)
		dn_spin_work(&lc->spin);
	return work;
}

/*
 * Asks the PMD to free the mbufs of frames it has sent. Most PMDs (virtio among them) free
 * them lazily, only when their ring runs short: until then the mbufs stay referenced, and
 * with zero-copy sends so does the application memory attached to them, whose owner waits
 * for it. On an idle link the ring never runs short, so an idle lcore reclaims explicitly.
 */
void dn_tx_reclaim(struct dn_lcore *lc, uint64_t now)
{
	int rc = rte_eth_tx_done_cleanup(lc->port_id, lc->queue, 0);

	if (rc == -ENOTSUP)
		lc->tx_cleanup_ok = false;
	lc->next_cleanup_tsc = now + lc->tx_drain_cycles;
}

/* The thread's own slack, read once (prctl returns it); DN_SLEEP_SLACK_NS while sleeping. */
static __thread long base_slack = -1;

unsigned long dn_sleep_slack_begin(void)
{
	if (base_slack < 0)
		base_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (base_slack >= 0 && (unsigned long)base_slack < DN_SLEEP_SLACK_NS)
		(void)prctl(PR_SET_TIMERSLACK, DN_SLEEP_SLACK_NS, 0, 0, 0);
	return base_slack >= 0 ? (unsigned long)base_slack : DN_SLEEP_SLACK_NS; /* end: no-op */
}

void dn_sleep_slack_end(unsigned long was)
{
	if (was < DN_SLEEP_SLACK_NS)
		(void)prctl(PR_SET_TIMERSLACK, was ? was : 1ul, 0, 0, 0);
}

void dn_spin_init(struct dn_spin *s, uint32_t max_us, uint64_t tick_us)
{
	uint64_t max = max_us * tick_us, min = DN_SPIN_MIN_US * tick_us;

	*s = (struct dn_spin){.win = max, .min = min < max ? min : max, .max = max,
			      .yield = DN_SPIN_YIELD_US * tick_us};
}

void dn_spin_slept(struct dn_spin *s, uint64_t now, bool woken)
{
	uint64_t gap = now - s->busy;

	if (gap > s->max)
		s->win = s->win / 2 > s->min ? s->win / 2 : s->min;
	else if (woken)
		s->win = s->win * 2 < s->max ? s->win * 2 : s->max;
}

bool dn_spin_more(struct dn_spin *s, uint64_t now)
{
	if (s->worked) {
		s->worked = false;
		s->busy = now;
	}
	if (now - s->busy >= s->win) {
		if (s->spinning) {
			s->spinning = false;
			s->expired++;
		}
		return false;
	}
	s->spinning = true;
	if (now - s->yielded >= s->yield) {
		sched_yield();
		s->yielded = now;
	}
	return true;
}

static void sleep_us(uint32_t us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

uint32_t dn_sleep_cap_us(struct dn_lcore *lc, uint64_t now, uint32_t cap_us)
{
	uint64_t due, hz = rte_get_tsc_hz(), left;

	if (lc->hooks.due == NULL || (due = lc->hooks.due(lc->hooks.arg, lc)) == UINT64_MAX)
		return cap_us;
	if (due <= now)
		return 0;
	left = due - now;
	if (left >= (uint64_t)(cap_us < DN_DUE_NEAR_US ? cap_us : DN_DUE_NEAR_US) * hz / 1000000u)
		return cap_us;
	/* Rounded up: waking a little early would only poll and sleep again. */
	return (uint32_t)((left * 1000000u + hz - 1) / hz);
}

void dn_lcore_idle_wait(struct dn_lcore *lc)
{
	uint64_t now = rte_rdtsc();
	uint32_t cap, max;

	/*
	 * Adaptive polling: right after traffic the next packet usually follows within tens
	 * of microseconds (a reply, the next request), far sooner than an interrupt wake-up;
	 * keep polling for the spin window after the last work (dn_spin, dn.h), then sleep.
	 */
	if (dn_spin_more(&lc->spin, now)) {
		rte_pause();
		return;
	}
	/* A timer of the upper layer due within DN_DUE_NEAR_US ends the sleep on time; one due
	 * now runs at once, in the loop's next round. */
	max = lc->intr_registered || lc->steer ? DN_INTR_TIMEOUT_US :
						 lc->port->cfg.idle_max_sleep_us;
	cap = dn_sleep_cap_us(lc, now, max);
	if (cap == 0)
		return;
	if (cap < max)
		lc->stats.timed_sleeps++;
	if (lc->steer) {
		dn_steer_idle_wait(lc, cap, cap < max);
		return;
	}

	if (dn_rx_intr_arm(lc)) {
		/*
		 * A packet that arrived between the last empty burst and arming the interrupt
		 * raised no event: look once more before sleeping.
		 */
		if (!dn_rx_recheck(lc))
			dn_epoll_sleep(lc, cap, cap < max, dn_rx_recheck);
		dn_rx_intr_disarm(lc);
		lc->stats.idle_sleeps++;
		return;
	}
	if (lc->sleep_us < DN_SLEEP_MIN_US)
		lc->sleep_us = DN_SLEEP_MIN_US;
	sleep_us(lc->sleep_us < cap ? lc->sleep_us : cap);
	/* No interrupt says whether frames came meanwhile: look (kept for the next burst). */
	dn_spin_slept(&lc->spin, rte_rdtsc(), dn_rx_recheck(lc));
	lc->stats.idle_sleeps++;
	lc->sleep_us *= 2;
	if (lc->sleep_us > lc->port->cfg.idle_max_sleep_us)
		lc->sleep_us = lc->port->cfg.idle_max_sleep_us;
}

int dn_loop_run(struct dn_lcore *lc, volatile const int *stop)
{
	bool sleepy = lc->port->cfg.idle == DN_IDLE_SLEEP;

	while (!*stop) {
		unsigned work = dn_loop_once(lc, rte_rdtsc());

		if (work > 0) {
			lc->idle_spins = 0;
			lc->sleep_us = 0;
			continue;
		}
		if (sleepy && ++lc->idle_spins >= DN_IDLE_SPINS && !dn_tx_pending(lc))
			dn_lcore_idle_wait(lc);
	}
	dn_tx_flush(lc);
	return 0;
}
