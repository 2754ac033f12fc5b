/*
 * pt_util.h — shared helpers for ps_core's tests: an in-process cluster (servers with
 * their handlers, clients, message buffers) that carries every encoded request through
 * the real ps_handle and every reply through the real ps_client_on_reply, optionally
 * cutting bodies into odd-sized views so values straddle them.
 */
#ifndef WHARF_PT_UTIL_H
#define WHARF_PT_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "ps_core/ps.h"

#define PT_MAX_SERVERS 4
#define PT_MAX_CLIENTS 8
#define PT_BUF (4u << 20)

struct pt_cluster {
	uint32_t n_servers, n_clients;
	struct ps_server *srv[PT_MAX_SERVERS];
	struct ps_handler *h[PT_MAX_SERVERS];
	struct ps_client *cl[PT_MAX_CLIENTS];
	struct ps_msgbuf msgs[PT_MAX_SERVERS];
	uint8_t *rep_buf;
	uint32_t split;       /* 0: one view per body; else views of this many bytes */
	uint32_t errors;      /* error replies seen by pt_deliver */
	int last_rc;          /* last ps_handle return */
	/* how the servers were made, for pt_server_restart */
	uint32_t n_shards, n_workers, nt;
	enum ps_mode mode;
	const struct ps_table_config *t;
	char dir[256];
	uint64_t seg;
};

int pt_cluster_create(uint32_t n_servers, uint32_t n_shards, enum ps_mode mode, uint32_t n_workers,
		      const struct ps_table_config *t, uint32_t nt, struct pt_cluster **out);
/*
 * The same with a write-ahead log per server: server i logs into <dir>/s<i>.wal (segments of
 * seg bytes, 0: default) paired with the checkpoint <dir>/s<i>.ckpt (pt_wal_paths). The
 * caller runs ps_recover on each server before using it.
 */
int pt_cluster_create_wal(uint32_t n_servers, uint32_t n_shards, enum ps_mode mode,
			  uint32_t n_workers, const struct ps_table_config *t, uint32_t nt,
			  const char *dir, uint64_t seg, struct pt_cluster **out);
void pt_wal_paths(const char *dir, uint32_t server, char *wal, char *ckpt, size_t len);
/*
 * Server i stops (destroyed as a killed process leaves it: no save) and starts again with
 * n_shards shards (0: as before), from its log and checkpoint when the cluster has a log
 * (ps_recover), else from the checkpoint file restore (may be NULL: empty). The clients stay.
 * 0 or the -errno of the restart.
 */
int pt_server_restart(struct pt_cluster *c, uint32_t i, uint32_t n_shards, const char *restore);
/* Set before pt_cluster_create: the servers' GEO log bound (ps_server_config.geo_log_max). */
extern uint32_t pt_geo_log_max;
/* Set before pt_cluster_create_wal: the servers' logs are synced by another thread
 * (cfg.wal_bg_sync; the test runs it with ps_server_wal_sync_bg). */
extern bool pt_wal_bg_sync;
/* Set before pt_cluster_create*: the servers' barrier timeout and policy (default 0, fail). */
extern uint32_t pt_barrier_timeout_ms;
extern enum ps_barrier_policy pt_barrier_policy;
/* Client w replaced by a new process of the same worker id with incarnation inc (no hello). */
void pt_client_restart(struct pt_cluster *c, uint32_t w, uint64_t inc);
void pt_cluster_destroy(struct pt_cluster *c);
/* Sends every non-empty c->msgs[s] to server s and its reply to client `worker`. */
void pt_deliver(struct pt_cluster *c, uint32_t worker);
/* Builds a view of an encoded message, body cut into pieces of `split` bytes (0: whole). */
void pt_view(const uint8_t *msg, uint32_t split, struct tl_iov *iov, uint32_t max_iov,
	     struct tl_msg_view *v);
/* Done callback that stores status into *(int *)arg. */
void pt_done(void *arg, int status);
/* Blocking helpers over pt_deliver; return the request's status. */
int pt_pull(struct pt_cluster *c, uint32_t w, uint32_t table, uint32_t dim, const uint64_t *keys,
	    uint32_t n, float *out);
int pt_push(struct pt_cluster *c, uint32_t w, uint32_t table, uint32_t dim, const uint64_t *keys,
	    uint32_t n, const float *grads);
struct ps_table_config pt_table(uint32_t id, uint32_t dim, enum ps_optim_kind o);
/* One barrier request of worker w at step; *done as the replies said. The request's status. */
int pt_barrier(struct pt_cluster *c, uint32_t w, uint64_t step, bool *done);
/*
 * Sync step `step` through the barrier: workers 0..n-1 arrive in turn, only the last one's
 * reply is done; then each asks again (done), which moves its client to the next step.
 * 0, or the first failure (-EPROTO when a reply's done flag was not as said).
 */
int pt_barrier_all(struct pt_cluster *c, uint64_t step);
/* Says hello from client w: its status. */
int pt_hello(struct pt_cluster *c, uint32_t w);

#endif
