/*
 * dn_obs.c — observability: dpdk_net's counters through DPDK telemetry, and packet capture
 * through rte_pdump, so DPDK's own tools work on a running wharf node:
 *
 *   dpdk-telemetry.py -f <file-prefix>   then   /wharf/dn/lcores   /wharf/dn/stats,<i>
 *   dpdk-dumpcap --file-prefix <file-prefix> -i <port> -w capture.pcapng
 *
 * Telemetry runs its handlers on its own thread and DPDK 22.11 gives handlers no user
 * argument, so the registry of lcore contexts is file-scope state. Lanes register from
 * their own threads at once: each takes a free slot with a compare-and-swap that publishes
 * its context there; a slot that is empty (never taken, or cleared by dn_lcore_destroy)
 * reads as no context. A handler that reads a context holds it: it counts itself in
 * obs_readers before it loads the slot (dn_obs_get) and out after (dn_obs_put), and
 * dn_obs_unregister clears the slot and then waits until no handler is in, so the context
 * is never freed under a read. (All four operations are sequentially consistent: either the
 * handler's load sees the slot cleared, or the unregister's load sees the handler in.) A
 * handler runs for microseconds and the wait happens only when a lane is destroyed; the
 * lcore never waits otherwise. The counters themselves are plain 64-bit words written by
 * their lcore; an aligned 64-bit load never tears on the platforms DPDK runs on, so a
 * reader sees each counter at some recent value.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_pause.h>
#include <rte_pdump.h>
#include <rte_telemetry.h>

#include "dpdk_net/dn_pvt.h"

static struct dn_lcore *_Atomic obs_lcores[DN_MAX_LCORES];
static _Atomic unsigned obs_readers; /* handlers holding a context (dn_obs_get) */

const struct dn_lcore *dn_obs_get(unsigned i)
{
	atomic_fetch_add_explicit(&obs_readers, 1, memory_order_seq_cst);
	return i < DN_MAX_LCORES ? atomic_load_explicit(&obs_lcores[i], memory_order_seq_cst) : NULL;
}

void dn_obs_put(void)
{
	atomic_fetch_sub_explicit(&obs_readers, 1, memory_order_release);
}

static int obs_lcores_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
	for (unsigned i = 0; i < DN_MAX_LCORES; i++) /* slots are only tested, never read */
		if (atomic_load_explicit(&obs_lcores[i], memory_order_relaxed) != NULL)
			rte_tel_data_add_array_int(d, (int)i);
	return 0;
}

static void obs_stats_fill(const struct dn_lcore *lc, struct rte_tel_data *d);

static int obs_stats_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	const struct dn_lcore *lc;
	char *end;
	long i;

	(void)cmd;
	if (params == NULL || *params == '\0')
		return -EINVAL;
	i = strtol(params, &end, 10);
	if (*end != '\0' || i < 0 || i >= DN_MAX_LCORES)
		return -EINVAL;
	lc = dn_obs_get((unsigned)i);
	if (lc != NULL)
		obs_stats_fill(lc, d);
	dn_obs_put();
	return lc != NULL ? 0 : -EINVAL;
}

static void obs_stats_fill(const struct dn_lcore *lc, struct rte_tel_data *d)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_int(d, "port", lc->port_id);
	rte_tel_data_add_dict_int(d, "queue", lc->queue);
	rte_tel_data_add_dict_int(d, "index", lc->index);
	rte_tel_data_add_dict_u64(d, "rx_pkts", lc->stats.rx_pkts);
	rte_tel_data_add_dict_u64(d, "rx_bytes", lc->stats.rx_bytes);
	rte_tel_data_add_dict_u64(d, "tx_pkts", lc->stats.tx_pkts);
	rte_tel_data_add_dict_u64(d, "tx_bytes", lc->stats.tx_bytes);
	rte_tel_data_add_dict_u64(d, "arp_requests_out", lc->stats.arp_requests_out);
	rte_tel_data_add_dict_u64(d, "arp_replies_out", lc->stats.arp_replies_out);
	rte_tel_data_add_dict_u64(d, "icmp_echo_replies", lc->stats.icmp_echo_replies);
	rte_tel_data_add_dict_u64(d, "idle_sleeps", lc->stats.idle_sleeps);
	rte_tel_data_add_dict_u64(d, "intr_wakeups", lc->stats.intr_wakeups);
	rte_tel_data_add_dict_u64(d, "intr_timeouts", lc->stats.intr_timeouts);
	rte_tel_data_add_dict_u64(d, "intr_late", lc->stats.intr_late);
	rte_tel_data_add_dict_u64(d, "timed_sleeps", lc->stats.timed_sleeps);
	rte_tel_data_add_dict_u64(d, "spin_caught", lc->spin.caught);
	rte_tel_data_add_dict_u64(d, "spin_expired", lc->spin.expired);
	rte_tel_data_add_dict_u64(d, "spin_window_us", lc->spin.win / (rte_get_tsc_hz() / 1000000));
	rte_tel_data_add_dict_u64(d, "steered_out", lc->stats.steered_out);
	rte_tel_data_add_dict_u64(d, "rx_queue", lc->stats.rx_queue);
	rte_tel_data_add_dict_u64(d, "steered_in", lc->stats.steered_in);
	rte_tel_data_add_dict_u64(d, "tx_handoff", lc->stats.tx_handoff);
	rte_tel_data_add_dict_u64(d, "tx_relayed", lc->stats.tx_relayed);
	rte_tel_data_add_dict_u64(d, "wakes_sent", lc->stats.wakes_sent);
	for (int r = 0; r < DN_DROP_MAX; r++) {
		char name[48];
		snprintf(name, sizeof(name), "drop_%s", dn_drop_name(r));
		rte_tel_data_add_dict_u64(d, name, lc->stats.drops[r]);
	}
}

int dn_obs_init(void)
{
	int rc;

	rc = rte_telemetry_register_cmd("/wharf/dn/lcores", obs_lcores_cmd,
					"Indexes of wharf dpdk_net lcore contexts. No parameters");
	if (rc == 0)
		rc = rte_telemetry_register_cmd("/wharf/dn/stats", obs_stats_cmd,
						"dpdk_net counters of one lcore context. Parameter: index");
	if (rc != 0)
		return rc;
	/* Capture for dpdk-dumpcap; a process without shared config (--no-shconf) has none. */
	rte_pdump_init();
	return 0;
}

int dn_obs_register(struct dn_lcore *lc)
{
	for (unsigned i = 0; i < DN_MAX_LCORES; i++) {
		struct dn_lcore *none = NULL;
		/* seq_cst (release at least): the context is complete before a handler reads it. */
		if (atomic_compare_exchange_strong_explicit(&obs_lcores[i], &none, lc,
							    memory_order_seq_cst,
							    memory_order_relaxed))
			return 0;
	}
	return -ENOSPC;
}

void dn_obs_unregister(struct dn_lcore *lc)
{
	for (unsigned i = 0; i < DN_MAX_LCORES; i++) {
		struct dn_lcore *want = lc;
		atomic_compare_exchange_strong_explicit(&obs_lcores[i], &want, NULL,
							memory_order_seq_cst, memory_order_relaxed);
	}
	/* A handler that found lc before the slot was cleared may still read it. */
	while (atomic_load_explicit(&obs_readers, memory_order_seq_cst) != 0)
		rte_pause();
}
