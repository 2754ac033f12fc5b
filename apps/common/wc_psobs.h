/*
 * wc_psobs.h — a PS node's counters through DPDK telemetry (dpdk-telemetry.py), per node,
 * per table, per shard and per connection:
 *
 *   /wharf/ps/server          node counters (requests, errors, replies in flight, ...)
 *   /wharf/ps/tables          ids of the tables served
 *   /wharf/ps/table,<id>      one table: kind, dim, rows, bytes, ops and keys by kind, errors,
 *                             the memory policies' counters (struct ps_table_stats)
 *   /wharf/ps/shard,<i>       one shard's op counters and its owner lcore slot
 *   /wharf/ps/conns           one line per connection (up to WC_PSOBS_CONNS)
 *
 * Call chain: the serving loop (wc_psnet_poll) -> wc_psobs_publish, at most every 100 ms, on
 * the thread that owns the server; every request -> wc_psobs_count (a few adds, no syscall);
 * telemetry thread -> the command handlers -> copy of the last published snapshot.
 * One PS server per process: the node has one slot (DPDK 22.11 telemetry handlers take no
 * argument and cannot be unregistered, so the slot is static and marked free at destroy).
 */
#ifndef WHARF_WC_PSOBS_H
#define WHARF_WC_PSOBS_H

#include <stdint.h>

#include "ps_core/ps.h"

/*
 * As many tables as a model has (WC_MODEL_MAX_TABLES): the slot is static, and only the
 * counters of the tables served are ever touched (16 lanes x 4096 tables x 104 bytes at most).
 */
#define WC_PSOBS_TABLES 4096
#define WC_PSOBS_SHARDS 64
#define WC_PSOBS_CONNS  64
#define WC_PSOBS_LANES  16

struct wc_psnet;
struct wc_psobs;

/*
 * Takes the process's slot for server ps (tables as in cfg; both must outlive the slot) and
 * registers the commands once per process. -EBUSY when a slot is taken, -EINVAL for a config
 * with more tables or shards than the snapshot holds (their counters would be cut: refused
 * rather than shown partly).
 */
int wc_psobs_create(struct ps_server *ps, const struct ps_server_config *cfg,
		    struct wc_psobs **out);
void wc_psobs_destroy(struct wc_psobs *o);
/*
 * One request of header type/table_id/key_count answered with status rc (0 or -errno) on
 * serving lane `lane` (its thread only: each lane counts into its own block).
 */
void wc_psobs_count(struct wc_psobs *o, uint32_t lane, uint32_t type, uint32_t table_id,
		    uint32_t keys, int rc);
/* Snapshots node n's counters when 100 ms passed since the last one (or force). */
void wc_psobs_publish(struct wc_psobs *o, const struct wc_psnet *n, uint64_t now_us, int force);

#endif /* WHARF_WC_PSOBS_H */
