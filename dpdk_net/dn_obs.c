/*
 * dn_obs.c — observability: dpdk_net's counters through DPDK telemetry, and packet capture
 * through rte_pdump, so DPDK's own tools work on a running wharf node:
 *
 *   dpdk-telemetry.py -f <file-prefix>   then   /wharf/dn/lcores   /wharf/dn/stats,<i>
 *   dpdk-dumpcap --file-prefix <file-prefix> -i <port> -w capture.pcapng
 *
 * Telemetry runs its handlers on its own thread and DPDK 22.11 gives handlers no user
 * argument, so the registry of lcore contexts is file-scope state. Lanes register from
 * their own threads at once: each claims a slot with an atomic add and publishes its context
 * there with a release store; the telemetry thread reads a slot with an acquire load, and a
 * slot not yet published (or cleared by dn_lcore_destroy) reads as no context. The
 * counters themselves are plain 64-bit words written by their lcore; an aligned 64-bit
 * load never tears on the platforms DPDK runs on, so a reader sees each counter at some
 * recent value.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_pdump.h>
#include <rte_telemetry.h>

#include "dpdk_net/dn_pvt.h"

static struct dn_lcore *_Atomic obs_lcores[DN_MAX_LCORES];
static _Atomic unsigned obs_count; /* slots claimed */

static unsigned obs_claimed(void)
{
	unsigned n = atomic_load_explicit(&obs_count, memory_order_relaxed);

	return n < DN_MAX_LCORES ? n : DN_MAX_LCORES;
}

/* acquire: pairs with the release store in dn_obs_register. */
static const struct dn_lcore *obs_slot(unsigned i)
{
	return atomic_load_explicit(&obs_lcores[i], memory_order_acquire);
}

static int obs_lcores_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned n = obs_claimed();

	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
	for (unsigned i = 0; i < n; i++)
		if (obs_slot(i) != NULL)
			rte_tel_data_add_array_int(d, (int)i);
	return 0;
}

static int obs_stats_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned n = obs_claimed();
	char *end;
	long i;
	const struct dn_lcore *lc;

	(void)cmd;
	if (params == NULL || *params == '\0')
		return -EINVAL;
	i = strtol(params, &end, 10);
	if (*end != '\0' || i < 0 || (unsigned long)i >= n || (lc = obs_slot((unsigned)i)) == NULL)
		return -EINVAL;
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
	return 0;
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
	unsigned i = atomic_fetch_add_explicit(&obs_count, 1, memory_order_relaxed);

	if (i >= DN_MAX_LCORES)
		return -ENOSPC;
	/* release: the context is complete before the telemetry thread can read it. */
	atomic_store_explicit(&obs_lcores[i], lc, memory_order_release);
	return 0;
}

void dn_obs_unregister(struct dn_lcore *lc)
{
	for (unsigned i = 0; i < obs_claimed(); i++) {
		struct dn_lcore *want = lc;
		atomic_compare_exchange_strong_explicit(&obs_lcores[i], &want, NULL,
							memory_order_relaxed, memory_order_relaxed);
	}
}
