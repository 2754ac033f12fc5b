/*
 * ps_obs.h — a PS node's counters through DPDK telemetry (dpdk-telemetry.py), per node,
 * per table, per shard and per connection:
 *
 *   /wharf/ps/server          node counters (requests, errors, replies in flight, ...)
 *   /wharf/ps/tables          ids of the tables served
 *   /wharf/ps/table,<id>      one table: kind, dim, rows, bytes, ops and keys by kind, errors,
 *                             the memory policies' counters (struct ps_table_stats)
 *   /wharf/ps/shard,<i>       one shard's op counters and its owner lcore slot
 *   /wharf/ps/conns           one line per connection (up to PS_OBS_CONNS)
 *
 * Call chain: the serving loop (ps_net_poll) -> ps_obs_publish, at most every 100 ms, on
 * the thread that owns the server; every request -> ps_obs_count (a few adds, no syscall);
 * telemetry thread -> the command handlers -> copy of the last published snapshot.
 * One PS server per process: the node has one slot (DPDK 22.11 telemetry handlers take no
 * argument and cannot be unregistered, so the slot is static and marked free at destroy).
 */
#ifndef WHARF_PS_OBS_H
#define WHARF_PS_OBS_H

#include <stdint.h>

#include "ps_core/ps.h"

/*
 * As many tables as a model has (PS_MODEL_MAX_TABLES): the slot is static, and only the
 * counters of the tables served are ever touched (16 lanes x 4096 tables x 104 bytes at most).
 */
#define PS_OBS_TABLES 4096
#define PS_OBS_SHARDS 64
#define PS_OBS_CONNS  64
#define PS_OBS_LANES  16

struct ps_net;
struct ps_obs;

/*
 * Takes the process's slot for server ps (tables as in cfg; both must outlive the slot) and
 * registers the commands once per process. -EBUSY when a slot is taken, -EINVAL for a config
 * with more tables or shards than the snapshot holds (their counters would be cut: refused
 * rather than shown partly).
 */
int ps_obs_create(struct ps_server *ps, const struct ps_server_config *cfg,
		    struct ps_obs **out);
void ps_obs_destroy(struct ps_obs *o);
/*
 * One request of header type/table_id/key_count answered with status rc (0 or -errno) on
 * serving lane `lane` (its thread only: each lane counts into its own block).
 */
void ps_obs_count(struct ps_obs *o, uint32_t lane, uint32_t type, uint32_t table_id,
		    uint32_t keys, int rc);
/* Snapshots node n's counters when 100 ms passed since the last one (or force). */
void ps_obs_publish(struct ps_obs *o, const struct ps_net *n, uint64_t now_us, int force);

#endif /* WHARF_PS_OBS_H */
