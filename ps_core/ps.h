/*
 * ps.h — the parameter server engine: tables, shards, optimizers, modes, checkpoints,
 * the server request handler and the worker-side client. The one public header of ps_core.
 *
 * Call chain (server):  transport/fuse hand up a message as a struct tl_msg_view
 *   -> ps_handle() (validate everything, split keys by shard, nothing applied on refusal)
 *   -> shard ops, run by the shard's owner lcore (directly, or over an SPSC rte_ring)
 *   -> reply written into the caller's struct ps_reply.
 * Call chain (worker):  ps_client_pull()/push() encode one message per server into the
 *   caller's struct ps_msgbuf array -> the network side sends them -> it hands each reply
 *   to ps_client_on_reply() -> completion callback.
 *
 * ps_core never sees DPDK ethdev or sockets; everything here is testable in one process.
 */
#ifndef WHARF_PS_H
#define WHARF_PS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tl_wire.h"

/*
 * Message types. Every body is little-endian, no padding beyond what is shown. Header
 * fields used by all PS messages: table_id, key_count, dim, aux = element type
 * (PS_ELEM_F32, the only one accepted), req_id (a reply carries its request's id).
 *
 * PS_T_PULL           body: key_count x u64 key
 * PS_T_PULL_R         body: key_count x dim x f32 values, in request key order
 * PS_T_PUSH           body: u32 worker, u32 zero, u64 seq, u64 incarnation, u64 step,
 *                           key_count x u64 key, key_count x dim x f32 gradient (GEO mode:
 *                           parameter delta). incarnation: the sending process's (see
 *                           PS_T_HELLO); step: sync mode, the step the push belongs to (the
 *                           other modes ignore it). A push of another step than the server's
 *                           is refused (PS_ERR_WRONG_STEP): never mixed into a later step.
 * PS_T_PUSH_R         body: u64 seq, u32 applied (1) or duplicate (0), u32 zero
 * PS_T_PUSH_PULL      body: as PS_T_PUSH; the reply carries the values after the apply
 * PS_T_PUSH_PULL_R    body: key_count x dim x f32 values
 * PS_T_DENSE_PULL     body: u64 first row (global row index); key_count = rows
 * PS_T_DENSE_PULL_R   body: key_count x dim x f32
 * PS_T_DENSE_PUSH     body: u32 worker, u32 zero, u64 seq, u64 incarnation, u64 step,
 *                           u64 first row, key_count x dim x f32 gradient
 * PS_T_DENSE_PUSH_R   body: as PS_T_PUSH_R
 * PS_T_BARRIER        body: u32 worker, u32 zero, u64 step, u64 incarnation. table_id,
 *                     key_count, dim 0. Idempotent: resending it only asks again. Any lcore
 *                     may receive it.
 * PS_T_BARRIER_R      body: u64 step, u32 arrived, u32 workers, u32 done (1 when every
 *                     worker reached the step and the summed gradients were applied), u32 0
 * PS_T_GEO_PULL       body: u32 worker, u32 zero, u64 ack: the id of the last GEO-pull
 *                     reply for table_id this worker took from this server (0: none), u64
 *                     incarnation (fenced as a push is: an older process of the worker id
 *                     is refused and moves nothing). Rows of table_id changed since the
 *                     position that reply ended at: the server commits a worker's position
 *                     only when the worker's next GEO pull acknowledges it, so a reply that
 *                     was lost is served again.
 * PS_T_GEO_PULL_R     body: u64 id (acknowledge it with the next GEO pull), then key_count
 *                     records of (u64 key, dim x f32 values). flags PS_F_MORE: the reply
 *                     was full; pull again for the remaining rows. A worker whose position
 *                     fell out of the bounded change log gets every row (a full resync).
 * PS_T_SAVE           body: UTF-8 path of the checkpoint file (no NUL). Control plane.
 * PS_T_SAVE_R         body: u64 rows written
 * PS_T_HELLO          body: u32 worker, u32 zero, u64 incarnation. table_id, key_count, dim
 *                     0. A worker process says it before its first push (and after every
 *                     reconnect). Incarnation fencing: the server keeps the largest
 *                     incarnation each worker id said hello with; a hello, push or barrier
 *                     of a smaller one (an older process of that id) is refused
 *                     (PS_ERR_FENCED), as are pushes and barriers of a larger one that has
 *                     not said hello yet.
 * PS_T_HELLO_R        body: u64 last applied sequence (max over shards; 0 = none), u32
 *                     worker, u32 zero, u64 epoch (the server state's: made when a server
 *                     starts empty, kept by its checkpoints and log, so a new epoch means a
 *                     server that came back without its state), u64 sync step (the step
 *                     its barrier is at), u64 step seq (the sequence of the worker's first
 *                     push applied in that step, 0 = none: a worker restarted mid-step
 *                     numbers the step's pushes from there again, so the ones it repeats
 *                     are taken for what its previous process already handed in), u32
 *                     lanes (the lcores serving it), u32 shards: key k belongs to lane
 *                     ps_shard_owner(ps_key_shard(k, shards), lanes), dense table t to lane
 *                     ps_shard_owner(ps_dense_shard(t, shards), lanes). A client that
 *                     routes by another layout fails the hello (-EPROTO).
 * PS_T_ERROR          body: i32 -errno, u32 PS_ERR_* kind, UTF-8 text naming the problem.
 *                     flags PS_F_RETRY: nothing of the request was applied and the same
 *                     bytes may succeed when sent again later (the write-ahead log could not
 *                     take it, or an earlier push of the worker waits for such a retry:
 *                     PS_ERR_ORDER); without it the refusal is final.
 */
enum ps_msg_type {
	PS_T_PULL = TL_TYPE_PS_MIN,
	PS_T_PULL_R,
	PS_T_PUSH,
	PS_T_PUSH_R,
	PS_T_PUSH_PULL,
	PS_T_PUSH_PULL_R,
	PS_T_DENSE_PULL,
	PS_T_DENSE_PULL_R,
	PS_T_DENSE_PUSH,
	PS_T_DENSE_PUSH_R,
	PS_T_BARRIER,
	PS_T_BARRIER_R,
	PS_T_GEO_PULL,
	PS_T_GEO_PULL_R,
	PS_T_SAVE,
	PS_T_SAVE_R,
	PS_T_HELLO,
	PS_T_HELLO_R,
	PS_T_ERROR = 63,
};

#define PS_ELEM_F32 1u
#define PS_F_MORE   1u  /* header flag of PS_T_GEO_PULL_R: more changed rows remain */
#define PS_F_RETRY  2u  /* header flag of PS_T_ERROR: nothing applied, send it again later */

/* Fixed parts of the bodies above, in bytes. */
#define PS_PUSH_HEAD       32u  /* worker, zero, seq, incarnation, step */
#define PS_DENSE_PUSH_HEAD 40u  /* the same, then the first row */
#define PS_BARRIER_BODY    24u
#define PS_HELLO_BODY      16u
#define PS_GEO_PULL_BODY   24u
#define PS_HELLO_R_BODY    48u

/* What a PS_T_ERROR reply names. */
enum ps_err_kind {
	PS_ERR_BAD_TYPE = 1,   /* unknown message type or element type */
	PS_ERR_UNKNOWN_TABLE,  /* table_id not configured, or wrong kind for the op */
	PS_ERR_WRONG_DIM,      /* dim differs from the table's */
	PS_ERR_BAD_LENGTH,     /* key_count and body_len do not add up, or too many keys */
	PS_ERR_NOT_FINITE,     /* a gradient is NaN or infinite (-EDOM: nothing applied), or an
				* update's result would not be finite (-ERANGE: those rows were
				* left as they were, the push's other rows applied, its sequence
				* recorded, so a resend is a duplicate) */
	PS_ERR_BAD_WORKER,     /* worker id out of range */
	PS_ERR_WRONG_SERVER,   /* a key or row that this server does not own */
	PS_ERR_BAD_MODE,       /* op not valid in the server's mode */
	PS_ERR_NO_SPACE,       /* reply does not fit, or memory ran out before applying */
	PS_ERR_IO,             /* checkpoint save failed, or the write-ahead log could not take
				* the request (nothing applied, PS_F_RETRY: retry later) */
	PS_ERR_TABLE_FULL,     /* -EDQUOT: keys new to a table at its cap (max_rows, max_bytes)
				* were refused, their gradients dropped; the push's other keys
				* were applied and its sequence recorded (a resend is a duplicate) */
	PS_ERR_FENCED,         /* -ESTALE: the worker id said hello with a larger incarnation (a
				* newer process took it over: this one must stop); -EPROTO: an
				* incarnation that has not said hello to this server */
	PS_ERR_WRONG_STEP,     /* sync push of another step: -ESTALE an earlier one (the step
				* closed without it), -EINVAL a later one. Nothing applied */
	PS_ERR_BARRIER_TIMEOUT,/* -ETIME: the step waited past the barrier timeout for the
				* workers the text names (policy PS_BARRIER_FAIL) */
	PS_ERR_ORDER,          /* a push after one of the same worker that was refused with
				* PS_F_RETRY on this connection: it waits until that one is sent
				* again (PS_F_RETRY; see ps_handle_ordered) */
};

enum ps_mode { PS_MODE_ASYNC = 0, PS_MODE_SYNC, PS_MODE_GEO };
/* What a barrier does once its step waited barrier_timeout_ms for missing workers. */
enum ps_barrier_policy {
	PS_BARRIER_FAIL = 0, /* answer the waiting workers PS_ERR_BARRIER_TIMEOUT */
	PS_BARRIER_CONTINUE, /* close the step without the missing workers */
};
enum ps_table_kind { PS_TABLE_SPARSE = 0, PS_TABLE_DENSE };
enum ps_optim_kind { PS_OPT_SGD = 0, PS_OPT_ADAGRAD, PS_OPT_ADAM, PS_OPT_FTRL };
enum ps_init_kind { PS_INIT_ZEROS = 0, PS_INIT_UNIFORM, PS_INIT_NORMAL };

struct ps_optim_params {
	float lr;            /* SGD, Adagrad, Adam; FTRL alpha */
	float eps;           /* Adagrad, Adam */
	float beta1, beta2;  /* Adam; FTRL: beta1 is FTRL's beta */
	float l1, l2;        /* FTRL */
	float init_accum;    /* Adagrad initial accumulator */
};

struct ps_table_config {
	uint32_t id;
	enum ps_table_kind kind;
	uint32_t dim;
	uint64_t dense_rows;     /* dense: global rows, split by range across servers */
	enum ps_optim_kind optim;
	struct ps_optim_params op;
	enum ps_init_kind init;
	float init_a, init_b;    /* uniform [a, b) or normal (mean a, stddev b) */
	uint64_t seed;           /* initializer seed; a row's init depends on (seed, key) only */
	/*
	 * Memory policies, sparse tables only (0 / false: off). Each is per server (each PS
	 * process), split evenly over its shards, and a function of the pushes alone, so a
	 * write-ahead log replays to the same table:
	 * - max_rows, max_bytes: at most this many rows / bytes (with admit_after, max_rows
	 *   admission counters too; max_bytes counts rows, their index and the
	 *   admission counters as allocated: whole 1024-row chunks, the index at its size; with
	 *   admit_after, 1/8 of max_bytes is the counters', at least a chunk of them a shard).
	 *   A push's keys new to a full table are refused (PS_ERR_TABLE_FULL), the rest
	 *   applied; existing rows keep being served.
	 * - admit_after: a key becomes a row at its admit_after-th push (DeepRec's counter
	 *   filter); until then pulls get the initializer's values and its gradients are dropped
	 *   and counted. Counters live in a compact side table (32 bytes a key).
	 * - evict_after: a row (or an admission counter) not pushed for more than this many
	 *   steps is dropped (DeepRec's steps_to_live). A step is a sync step in sync mode, and
	 *   otherwise one push to the table that reaches the shard. Checked every
	 *   ceil(evict_after / 8) steps.
	 * - pull_inserts: a pull of an unknown key creates its row, as a push would. Off, it is
	 *   answered with the initializer's values and nothing is stored (the same values: a
	 *   row's first value depends on (seed, key) only). Not with the other policies: pulls
	 *   are not logged, so the table would no longer be a function of the log.
	 */
	uint64_t max_rows;
	uint64_t max_bytes;
	uint32_t admit_after;
	uint64_t evict_after;
	bool pull_inserts;
};

#define PS_ADMIT_MAX 1000000u       /* admit_after: 0..this */
#define PS_EVICT_MAX (1ull << 40)   /* evict_after: 0..this steps */

/* Per-row optimizer state floats, as a multiple of dim plus a constant. */
uint32_t ps_optim_state_floats(enum ps_optim_kind k, uint32_t dim);

/* Routing: independent hashes, stable across processes. */
uint32_t ps_key_server(uint64_t key, uint32_t n_servers);
uint32_t ps_key_shard(uint64_t key, uint32_t n_shards);
/* The shard that holds the whole of dense table table_id on each server. */
static inline uint32_t ps_dense_shard(uint32_t table_id, uint32_t n_shards)
{
	return table_id % n_shards;
}
/* The lcore slot that owns shard `shard` (shards are dealt to lcores round-robin). */
static inline uint32_t ps_shard_owner(uint32_t shard, uint32_t n_lcores)
{
	return shard % n_lcores;
}
/* Dense rows [first, last) of server s out of n for a table of `rows` rows. */
void ps_dense_range(uint64_t rows, uint32_t s, uint32_t n, uint64_t *first, uint64_t *last);

/* ---------------------------------------------------------------- server */

struct ps_server_config {
	uint32_t server_id, n_servers;
	uint32_t n_shards;        /* shard s is owned by lcore slot s % n_lcores */
	uint32_t n_lcores;        /* handler contexts that will exist (1 for a single loop) */
	uint32_t n_workers;       /* sync barrier size; upper bound of worker ids */
	enum ps_mode mode;
	uint32_t max_keys;        /* per request; 0 means 65536 */
	uint32_t ring_size;       /* per (lcore -> lcore) SPSC ring; 0 means 1024 */
	const int *lcore_numa;    /* NUMA node per lcore slot, or NULL: node of the creator */
	const struct ps_table_config *tables;
	uint32_t n_tables;
	/*
	 * Optional: called with wake_arg and an lcore slot right after an op was queued on
	 * that slot's ring (a cross-lcore op, or a save asking it to park), from the queuing
	 * thread. The network glue wakes that lcore if it sleeps; must be safe from any thread.
	 */
	void (*wake)(void *wake_arg, uint32_t slot);
	void *wake_arg;
	/*
	 * PS_T_SAVE names a file the server writes: only a control plane may send it. Off (the
	 * default), ps_handle refuses it (PS_ERR_BAD_TYPE) so no data-plane peer can make the
	 * server write a file of its choosing; the owner calls ps_save directly.
	 */
	bool allow_save_requests;
	/*
	 * Durability (ps_wal.c). wal_dir (NULL: no log): every accepted push-type request
	 * (PUSH, PUSH_PULL, DENSE_PUSH, a worker's first BARRIER of a step) is appended to a
	 * per-lcore-slot log segment in this directory after validation and before its reply,
	 * so a server killed at any moment loses nothing it acknowledged: the records sit in
	 * MAP_SHARED pages (the page cache survives the process); ps_handler_wal_sync makes
	 * them survive the machine too. Segments are wal_segment_bytes (0: 64 MiB), rolled when
	 * full. ckpt_path: the checkpoint the log is paired with — a ps_save to exactly this
	 * path starts new segments at its cut and deletes the ones it covers once renamed into
	 * place (a save to any other path is a plain snapshot). A server with a wal_dir must go
	 * through ps_recover before it serves.
	 */
	const char *wal_dir;
	uint64_t wal_segment_bytes;
	const char *ckpt_path;
	/*
	 * Syncing off the serving lcores: another thread calls ps_server_wal_sync_bg every few
	 * hundred ms (fdatasync of each handler's segment files), and a handler never syncs
	 * while it serves (a full segment goes to that thread for its last sync). false: each
	 * handler's thread calls ps_handler_wal_sync itself.
	 */
	bool wal_bg_sync;
	/*
	 * A step whose barrier has waited barrier_timeout_ms (0: for ever) since its first
	 * arrival names the workers still missing (PS log, once per step, and
	 * ps_server_barrier_stats), then by barrier_policy: PS_BARRIER_FAIL answers every
	 * worker that asks PS_ERR_BARRIER_TIMEOUT naming them (the step still completes if they
	 * come); PS_BARRIER_CONTINUE closes the step with the pushes that arrived and leaves the
	 * missing workers out of the barrier until they say hello or reach a barrier again
	 * (their pushes of the closed step are refused as PS_ERR_WRONG_STEP). The closing is
	 * logged, so recovery replays it.
	 */
	uint32_t barrier_timeout_ms;
	enum ps_barrier_policy barrier_policy;
	/*
	 * GEO: the change log of each shard and sparse table holds at most this many entries
	 * (4 bytes each; 0: PS_GEO_LOG_MAX_DEFAULT; at least max_keys, at most 2^30). It is
	 * trimmed to the slowest worker's position, and when full past it: a worker whose
	 * position falls out of it (dead, or far behind) gets a full resync of the table's rows
	 * at its next GEO pull instead of the log.
	 */
	uint32_t geo_log_max;
};

#define PS_GEO_LOG_MAX_DEFAULT (1u << 20)

struct ps_server;
struct ps_handler;

/* Builds every shard and table. Returns 0 or -EINVAL (message in err), -ENOMEM. */
int ps_server_create(const struct ps_server_config *cfg, struct ps_server **out,
		     char *err, size_t errlen);
void ps_server_destroy(struct ps_server *s);

/*
 * One handler per lcore slot: its scratch, its inbound rings, the shards it owns. A
 * handler is used by exactly one thread, and every slot needs one that runs (ps_handle
 * or ps_handler_poll in its loop): other lcores' requests reach its shards only that way.
 * ps_handler_create is not on the hot path.
 */
int ps_handler_create(struct ps_server *s, uint32_t lcore_slot, struct ps_handler **out);
void ps_handler_destroy(struct ps_handler *h);

/* Caller-supplied reply storage: the handler writes header + body into buf. */
struct ps_reply {
	uint8_t *buf;
	uint32_t cap;
	uint32_t len;
};

/*
 * Handles one request. Always produces a reply (the answer, or a PS_T_ERROR naming the
 * problem) unless rep->cap is below TL_MSG_HDR_LEN + 64 (then -ENOBUFS, nothing applied).
 * Returns 0 when the request was applied/answered, or the -errno that the error reply
 * carries. A refused request changed nothing (validation runs before any shard op; the
 * exceptions: running out of memory, where each shard is all-or-nothing but a shard that had
 * room may have applied its part; -ERANGE, rows whose update would not have been finite,
 * which are left as they were while the others are applied; and -EDQUOT, keys new to a table
 * at its cap, which get no row while the others are applied). The request's views are only read during the
 * call; the reply buffer must be 4-byte aligned. Shards of other lcores are reached over
 * rings; while waiting for them this handler keeps serving its own inbound rings, so two
 * handlers never deadlock.
 */
int ps_handle(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep);

/*
 * Exactly once needs a worker's pushes applied in the order of their sequences (a shard
 * takes a sequence at or below the last one it applied for a duplicate). When a push is
 * refused with PS_F_RETRY, the pushes the worker pipelined behind it on the same connection
 * must not be applied before it is sent again: the push order, one per connection (the
 * caller's storage, zeroed when the connection opens), remembers the refused sequence, and
 * ps_handle_ordered refuses (PS_ERR_ORDER, PS_F_RETRY, -EAGAIN) a later push of that worker
 * until a push at or below it was answered otherwise. A new connection starts with none:
 * the client sends everything unacknowledged again, oldest first. Otherwise as ps_handle.
 */
struct ps_push_order {
	uint64_t seq;      /* sequence of the push refused for a retry; 0: none */
	uint32_t worker;
};
int ps_handle_ordered(struct ps_handler *h, struct ps_push_order *o, const struct tl_msg_view *req,
		      struct ps_reply *rep);

/*
 * Serves ops other lcores queued for this lcore's shards, advances this lcore's part of a
 * running checkpoint, and parks here briefly while another lcore's save takes its cut.
 * Returns ops run. Call it from the lcore loop whenever there is nothing else to do.
 */
unsigned ps_handler_poll(struct ps_handler *h);

/*
 * Checkpoint: a consistent snapshot of all shards — values and optimizer state from one
 * cut (every other handler parks between two requests for the moment the snapshots
 * begin), then copied by each shard's owner incrementally with copy-on-write so applies
 * go on — with the exactly-once sequences, the barrier step and (sync mode) the step's
 * pending gradient sums of the same cut, written to path.tmp, CRC32C, fsync, rename. Called on one handler; every other
 * lcore slot must have a handler that keeps calling ps_handle or ps_handler_poll.
 * -EBUSY if another save is running.
 */
int ps_save(struct ps_handler *h, const char *path, uint64_t *rows_out, char *err, size_t errlen);
/*
 * The same in steps, so the saving lcore serves meanwhile and the disk is written from
 * another thread. ps_save_start (a handler's thread; the other handlers must keep serving)
 * takes the cut and begins each shard's copy-on-write snapshot; the owners copy as they
 * poll (ps_handle, ps_handler_poll), the starter included. ps_save_copied (any thread) is
 * true once every copy is done; then ps_save_write (any thread: no handler state) writes,
 * fsyncs and renames the file, and for cfg.ckpt_path drops the log it covers. ps_save_free
 * ends the job (a job freed before it was copied waits for nothing: free it only once
 * copied). One job at a time: -EBUSY.
 */
struct ps_save_job;
int ps_save_start(struct ps_handler *h, const char *path, struct ps_save_job **out, char *err,
		  size_t errlen);
bool ps_save_copied(struct ps_save_job *j);
int ps_save_write(struct ps_save_job *j, uint64_t *rows_out, char *err, size_t errlen);
void ps_save_free(struct ps_save_job *j);
/*
 * Restore into a server that has not served yet (all tables empty), from the handler of
 * lcore slot 0 with no other handler running. Restores values, optimizer state, the
 * exactly-once sequences and the barrier/sync-step state of the cut. Refuses (-EBADMSG/-EINVAL/-EIO, message in
 * err, nothing loaded) a damaged, truncated or mismatched file.
 */
int ps_load(struct ps_handler *h, const char *path, char *err, size_t errlen);

/*
 * Restart after a stop of any kind: loads ckpt (may be NULL or a missing file: empty
 * tables) and then replays, through the same apply path, every log record not covered by
 * it, in the order the server accepted them (per-shard per-worker sequences make a record
 * that is already in the checkpoint a no-op). Damage in the last segment of an lcore slot
 * with no valid record after it (a torn tail: a kill in the middle of an append, or pages a
 * power loss did not write) ends that slot's replay, is counted, and is cut off the file.
 * Refused (-EBADMSG/-EINVAL/-ENOENT, message in err; tables may then hold part of the log:
 * destroy the server): damage followed by a valid record or a later segment, a segment of
 * another server or table layout, a missing checkpoint that the log needs, and a
 * checkpoint the log does not continue (older than where the log starts: the records
 * between were deleted by later saves to cfg.ckpt_path). Same calling rules as ps_load.
 * New records go to new segments; old ones are deleted by the next save to cfg.ckpt_path.
 */
struct ps_recover_stats {
	bool ckpt_loaded;
	uint32_t segments;    /* segment files read */
	uint64_t records;     /* log records replayed */
	uint64_t applied;     /* of them, applied (pushes new to their shards, barrier arrivals) */
	uint64_t skipped;     /* of them, already in the checkpoint (duplicates: not applied) */
	uint64_t torn;        /* torn tails dropped and cut off (one per segment) */
	uint64_t covered;     /* segment files left out: older than the checkpoint's cut */
};
int ps_recover(struct ps_handler *h, const char *ckpt, struct ps_recover_stats *st, char *err,
	       size_t errlen);
/*
 * msync of this handler's log records appended since the last call (a syscall: call it
 * from the lcore loop every few hundred ms, not per request). After it returns 0, those
 * records survive a machine crash as well. Same thread as the handler. 0 or -errno.
 */
int ps_handler_wal_sync(struct ps_handler *h);
/*
 * cfg.wal_bg_sync: makes every handler's log records appended so far survive a machine
 * crash (fdatasync of their segment files), from a thread that is not a handler's: the
 * serving lcores never wait for the disk. One thread at a time. Returns the first -errno.
 */
int ps_server_wal_sync_bg(struct ps_server *s);
/* Log bytes appended since the last save to cfg.ckpt_path (all handlers; any thread). */
uint64_t ps_server_wal_bytes(struct ps_server *s);

/*
 * Introspection for tests, benchmarks and telemetry (any thread; a recent value). Counters
 * of the memory policies, summed over the shards: rows_refused_cap, keys of pushes refused
 * because the table was at its cap; admission_pending, keys counted but not admitted yet;
 * admission_admitted, keys that became rows by admission; admission_dropped, key gradients
 * dropped because their key was not admitted (yet); admission_expired, counters dropped by
 * eviction; evicted, rows dropped by eviction. rows_cap and pending_cap: what the server's
 * shards may hold together (0: no cap).
 */
struct ps_table_stats {
	uint64_t rows;
	uint64_t bytes;      /* slots + row storage + admission counters, all shards */
	uint64_t rows_cap, pending_cap;
	uint64_t rows_refused_cap, admission_pending, admission_admitted, admission_dropped;
	uint64_t admission_expired, evicted;
};
int ps_server_table_stats(struct ps_server *s, uint32_t table_id, struct ps_table_stats *st);

/*
 * Per-shard op counters, for telemetry; readable from any thread at any time. nonfinite_rows:
 * row updates refused because their result would not have been finite (the row kept its
 * values; the request was answered PS_ERR_NOT_FINITE, or, for a sync step, the row skipped it).
 */
struct ps_shard_stats {
	uint64_t pushes, pulls, keys, dup_pushes, failed_ops, cow_rows, nonfinite_rows;
	uint64_t fenced;         /* pushes refused: PS_ERR_FENCED */
	uint64_t wrong_step;     /* pushes refused: PS_ERR_WRONG_STEP */
	uint64_t geo_log;        /* GEO: change-log entries held now, all tables */
	uint64_t geo_resyncs;    /* GEO: full resyncs begun (a worker behind the log's start) */
	uint32_t owner;          /* lcore slot */
};
int ps_server_shard_stats(struct ps_server *s, uint32_t shard, struct ps_shard_stats *st);

/*
 * The barrier, readable from any thread (recent values, for telemetry and logs). missing:
 * up to cap ids of the workers the last timeout found missing (late_n of them in all).
 */
struct ps_barrier_stats {
	uint64_t step;           /* the step the barrier is at */
	uint32_t arrived;        /* workers that reached it */
	uint32_t gone;           /* workers left out (PS_BARRIER_CONTINUE) until they return */
	uint64_t waited_ms;      /* since the step's first arrival; 0: nobody waits */
	uint64_t timeouts;       /* steps that waited past the timeout */
	uint64_t dropped;        /* workers left out by those timeouts */
	uint64_t late_step;      /* the step of the last timeout */
	uint32_t late_n;         /* workers missing then */
	uint64_t epoch;          /* the server state's epoch (PS_T_HELLO_R) */
};
int ps_server_barrier_stats(struct ps_server *s, struct ps_barrier_stats *st, uint32_t *missing,
			    uint32_t cap);

/*
 * Per lcore slot, readable from any thread: ops this slot's handler ran on shards of other
 * slots (over the rings), split into keyed data ops (sparse and dense pull/push: zero when
 * every client sends each key to its owner's lcore) and the rest (barriers, sync steps,
 * hellos, GEO pulls, which reach every shard by design); and ops it served for others.
 */
struct ps_lcore_stats {
	uint64_t data_ops_remote, ctl_ops_remote, ops_served;
};
int ps_server_lcore_stats(struct ps_server *s, uint32_t slot, struct ps_lcore_stats *st);

/* ---------------------------------------------------------------- client */

struct ps_msgbuf;

/*
 * Requests kept by reference (ps_client_keep_by_ref). Without it the client copies every
 * request it encodes, to send the same bytes again after a refusal for a retry or a
 * reconnect. With it, the client keeps the caller's encode buffer itself until that
 * destination answered or the request was let go, so the caller counts its buffers and does
 * not reuse or free one the client holds:
 *   writable(ctx, m)  before a request is encoded into m->buf: when the client still holds
 *                     that buffer (a request encoded there was never sent, so the caller
 *                     did not put a fresh one in its place), the caller puts a fresh one in
 *                     m: 0, or -ENOBUFS (the request fails with it, nothing held);
 *   hold(ctx, buf)    the request just encoded in buf is kept there;
 *   release(ctx, buf) the client lets go of it.
 * Retries (ps_client_tick) and ps_client_resend pass the held buffer itself to send.
 */
struct ps_client_keep {
	int (*writable)(void *ctx, struct ps_msgbuf *m);
	void (*hold)(void *ctx, uint8_t *buf);
	void (*release)(void *ctx, uint8_t *buf);
	void *ctx;
};

struct ps_client_config {
	uint32_t worker_id;
	uint32_t n_servers;
	uint32_t max_inflight;  /* requests in flight; 0 means 64 */
	uint32_t max_keys;      /* per request; 0 means 65536 */
	/*
	 * This process's incarnation (ps_incarnation_new): a later process of the same worker
	 * id must have a larger one. 0 (tests) is the servers' initial value: no hello needed.
	 */
	uint64_t incarnation;
	/*
	 * A request that waited this long (on ps_client_tick's clock) for a destination's
	 * answer gives that destination up: see ps_client_tick. 0: never.
	 */
	uint64_t request_timeout_us;
};

/*
 * An incarnation for a process starting now: the wall clock in ns with its low 16 bits
 * random, so a restart (later) gets a larger one and two processes started together
 * differ. Hosts' clocks must agree better than the time a restart takes.
 */
uint64_t ps_incarnation_new(void);

/* One encoded message per server. len == 0 means nothing to send to that server. */
struct ps_msgbuf {
	uint8_t *buf;
	uint32_t cap;
	uint32_t len;
};

/*
 * status: 0, or the -errno of the first error; info: see each call. During a call with
 * status < 0, and until the next request ends, ps_client_error names the reason.
 */
typedef void ps_done_fn(void *arg, int status);

struct ps_client;

int ps_client_create(const struct ps_client_config *cfg, struct ps_client **out);
/*
 * Frees the client. With ps_client_keep_by_ref, every buffer it still holds goes back first
 * (release on each, as ps_client_unkeep does); after ps_client_unkeep it holds none, so
 * nothing is released twice. The owner of the buffers that frees them before the client
 * calls ps_client_unkeep first (ps_net_destroy does).
 */
void ps_client_destroy(struct ps_client *c);
/*
 * From now on the client keeps the requests it encodes by reference, through k (which must
 * outlive the client or the next ps_client_unkeep, as must the buffers it holds): see
 * struct ps_client_keep.
 */
void ps_client_keep_by_ref(struct ps_client *c, const struct ps_client_keep *k);

/*
 * Each call below routes keys to servers (ps_key_server), encodes one message per
 * server into msgs[0..n_servers) (caller storage; returns -ENOBUFS if one does not fit,
 * -EAGAIN if max_inflight requests are outstanding, nothing recorded on failure), and
 * records the request. keys/grads are only read during the call (push messages are kept
 * as encoded copies until acknowledged, for resending); out must stay valid until done
 * runs. done runs from ps_client_on_reply once every server has answered.
 */
int ps_client_pull(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
		   uint32_t n, float *out, ps_done_fn *done, void *arg, struct ps_msgbuf *msgs);
int ps_client_push(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
		   uint32_t n, const float *grads, ps_done_fn *done, void *arg,
		   struct ps_msgbuf *msgs);
/* Push, then the values after the apply into out (may be NULL for a plain push). */
int ps_client_push_pull(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
			uint32_t n, const float *grads, float *out, ps_done_fn *done, void *arg,
			struct ps_msgbuf *msgs);
/* Dense rows [first, first+rows) of a table of total_rows rows. */
int ps_client_dense_pull(struct ps_client *c, uint32_t table, uint32_t dim, uint64_t total_rows,
			 uint64_t first, uint32_t rows, float *out, ps_done_fn *done, void *arg,
			 struct ps_msgbuf *msgs);
int ps_client_dense_push(struct ps_client *c, uint32_t table, uint32_t dim, uint64_t total_rows,
			 uint64_t first, uint32_t rows, const float *grads, ps_done_fn *done,
			 void *arg, struct ps_msgbuf *msgs);
/*
 * Says hello with this process's incarnation to every server: asks for the last sequence
 * each applied from this worker id, its state's epoch and its sync step. Numbering goes on
 * after the largest sequence (never backwards); a client that never pushed and whose
 * servers are in the middle of a step it already pushed to (its previous process did)
 * numbers from that step's first push instead, so the pushes it repeats are recognised.
 * The client's step becomes the servers' (ps_client_step); servers more than one step
 * apart fail it (-EPROTO, ps_client_error says which). Call it after connecting and before
 * the first push. A server whose epoch differs from the one this client first met there
 * came back without its state: see ps_client_epoch_changed.
 */
int ps_client_hello(struct ps_client *c, ps_done_fn *done, void *arg, struct ps_msgbuf *msgs);
/* The sequence the next push will carry. */
uint64_t ps_client_next_seq(const struct ps_client *c);
/*
 * Sync mode: the step this worker is in, which its pushes carry: the servers' step at the
 * last hello (where a restarted worker resumes), then one more per completed barrier.
 */
uint64_t ps_client_step(const struct ps_client *c);
/*
 * True when server's last hello answered another epoch than the first one this client met
 * there (*was, *now: the two): the server came back without its state. The new epoch is
 * taken only by ps_client_epoch_accept.
 */
bool ps_client_epoch_changed(const struct ps_client *c, uint32_t server, uint64_t *was,
			     uint64_t *now);
void ps_client_epoch_accept(struct ps_client *c, uint32_t server);
/*
 * The text of the last error reply (a server's PS_T_ERROR), or of the last call this client
 * refused itself (a barrier of the wrong step, servers steps apart at hello); "" if none.
 */
const char *ps_client_error(const struct ps_client *c);
/* Inside a done callback: the text of the error that request got, "" if none. */
const char *ps_client_done_error(const struct ps_client *c);
/*
 * Sync mode: *done_out (read after done runs) is true when the step completed, and the
 * client's step then moves past it. step must be ps_client_step (-EINVAL otherwise, with
 * ps_client_error saying why: a worker that counts its own steps from 0 after a restart
 * would take the earlier steps' barriers for done and hand extra pushes to this one).
 */
int ps_client_barrier(struct ps_client *c, uint64_t step, bool *done_out, ps_done_fn *done,
		      void *arg, struct ps_msgbuf *msgs);
/*
 * GEO: rows changed since this worker's last GEO pull. Each (key, row) of every reply
 * is handed to row_fn during ps_client_on_reply (the row is valid during the call only).
 * *more_out (read after done runs) is true when a server had more than fit in its reply:
 * pull again. Each pull acknowledges the replies of the last one (per server and table):
 * a server moves the worker's position only then, so the rows of a reply lost with its
 * connection come again, as can rows after a server restart or a full resync. row_fn must
 * take a row as the server's value (idempotent), never as a change to add.
 */
typedef void ps_geo_row_fn(void *arg, uint64_t key, const float *row, uint32_t dim);
int ps_client_geo_pull(struct ps_client *c, uint32_t table, uint32_t dim, ps_geo_row_fn *row_fn,
		       void *row_arg, bool *more_out, ps_done_fn *done, void *arg,
		       struct ps_msgbuf *msgs);

/*
 * Hands one reply from destination `dest` (a server, or one lane of it) to the client.
 * Returns 0, or -ENOENT for a reply that matches no outstanding request (e.g. the answer to
 * a resent push that was already answered: harmless), -EBADMSG for a reply whose length
 * does not add up. An error reply (PS_T_ERROR, or the transport's TL_TYPE_ERROR) with
 * PS_F_RETRY keeps the request waiting: its bytes go out again from ps_client_tick after
 * the destination's back-off (1 ms, doubling per refusal up to 1 s, back to 1 ms after an
 * answer that is not such a refusal). Any other error reply is final: the request ends
 * with its -errno, and ps_client_error gives "server S: <the server's text>". A push is
 * thus never given up while a server asks for it again.
 */
int ps_client_on_reply(struct ps_client *c, uint32_t dest, const struct tl_msg_view *rep);

/*
 * The connection to dest was lost: call this first. Every request still waiting for
 * dest's answer that ps_client_resend will not send again (pulls, barriers, hellos, GEO
 * pulls: anything but a push) counts dest as answered with status (e.g. -ECONNRESET), and
 * completes (its done runs) when nothing else is awaited, freeing its slot; the caller asks
 * again. Retries to dest wait for ps_client_resend. Returns how many requests it let go.
 */
uint32_t ps_client_forget_dest(struct ps_client *c, uint32_t dest, int status);

/*
 * After a (re)connect to `dest`, before anything else is sent on it: lets go of what
 * ps_client_forget_dest would (with -ECONNRESET; whatever was sent on the lost connection
 * or never sent cannot be answered on this one), then calls fn for every push to it not yet
 * acknowledged, oldest first, with the exact bytes to send again (valid during the call).
 * Returns the pushes handed to fn.
 */
typedef void ps_resend_fn(void *arg, const uint8_t *msg, uint32_t len);
uint32_t ps_client_resend(struct ps_client *c, uint32_t dest, ps_resend_fn *fn, void *arg);
/*
 * With ps_client_keep_by_ref: lets go of every buffer the client holds (release on each)
 * and keeps requests as copies from then on; what was held is no longer sent again. For
 * the owner of the buffers, before it frees them while the client lives on (otherwise
 * ps_client_destroy lets go of them).
 */
void ps_client_unkeep(struct ps_client *c);

/* Requests still waiting for replies. */
uint32_t ps_client_inflight(const struct ps_client *c);

/*
 * Why the last request that ended with an error failed: a server's error text ("server 1:
 * table 7: no sparse table of that id on this server"), or the client's ("server 0: no
 * answer in 30000 ms", "server 0: connection lost"). "" before any failure.
 */
const char *ps_client_error(const struct ps_client *c);
/*
 * The text of the last refusal that asked for the request again (PS_F_RETRY: nothing was
 * applied, the client sends it again after a back-off, for as long as the server refuses:
 * "server 0: write-ahead log cannot take the push (No space left on device); nothing
 * applied, retry"), for the caller to say why it waits. "" before any.
 */
const char *ps_client_retry_reason(const struct ps_client *c);

/* Counters since create. */
struct ps_client_stats {
	uint64_t retries;      /* error replies with PS_F_RETRY: the request was sent again */
	uint64_t timeouts;     /* requests other than pushes ended by request_timeout_us */
	uint64_t stalls;       /* destinations given up after a timeout */
	uint64_t forgotten;    /* (request, destination) waits let go with a lost connection */
};
void ps_client_stats_get(const struct ps_client *c, struct ps_client_stats *out);

/*
 * Shard-aware routing. A server that runs several lcores (lanes) takes one connection per
 * lane, and a key is sent to the lane owning its shard (ps_shard_owner(ps_key_shard(key,
 * shards), lanes)), so the server never hands a request's keys to another lcore. Every
 * call above encodes one message per destination, a destination being a (server, lane)
 * pair numbered server by server: dest = ps_client_dest(c, server, lane); msgs, the
 * glue's send, ps_client_on_reply and ps_client_resend are indexed by destination. Dense
 * tables go to the lane owning ps_dense_shard(table); barriers, hellos and GEO pulls to
 * lane 0. The default layout is one lane per server (dest == server).
 * ps_client_set_lanes sets it from what each server announced (lanes[s] in 1..256,
 * shards[s] >= lanes[s]); only with no request in flight (-EBUSY), -EINVAL for a bad
 * layout, -ENOMEM (the old layout stays).
 */
int ps_client_set_lanes(struct ps_client *c, const uint32_t *lanes, const uint32_t *shards);
uint32_t ps_client_dests(const struct ps_client *c);
uint32_t ps_client_dest(const struct ps_client *c, uint32_t server, uint32_t lane);
uint32_t ps_client_lanes(const struct ps_client *c, uint32_t server);

/*
 * Blocking calls, for a trainer loop that has nothing else to do meanwhile. The glue
 * supplies how to send one encoded message to a server and how to make progress (poll the
 * transport; replies must reach ps_client_on_reply from inside poll). poll returning < 0
 * gives up: the call returns that value and the request is forgotten by the caller (a push
 * stays queued for ps_client_resend). msgs: one encode buffer per destination.
 */
struct ps_client_io {
	int (*send)(void *ctx, uint32_t dest, const uint8_t *msg, uint32_t len);
	int (*poll)(void *ctx);
	void *ctx;
	struct ps_msgbuf *msgs;
};
/*
 * The client's timers; the glue calls it every poll round with a monotonic time in
 * microseconds. The client's clock advances by the time between calls, at most 100 ms per
 * call, so time the program spent away from its poll loop (computing a batch) does not
 * count against a request. It sends again, through io->send, what servers refused with
 * PS_F_RETRY once the destination's back-off has passed (oldest push first; not to a
 * destination lost and not yet resent to). A request that waited request_timeout_us for a
 * destination's answer gives the destination up: it becomes stalled (ps_client_dest_stalled;
 * the glue closes its connection and recovers as from any loss), and the request, unless it
 * is a push, counts the destination as answered with -ETIMEDOUT (a push waits for
 * ps_client_resend). Returns the destinations that became stalled in this call.
 */
uint32_t ps_client_tick(struct ps_client *c, uint64_t now_us, const struct ps_client_io *io);
/* True from a timeout on dest until ps_client_forget_dest or ps_client_resend for it. */
bool ps_client_dest_stalled(const struct ps_client *c, uint32_t dest);

int ps_client_pull_wait(struct ps_client *c, const struct ps_client_io *io, uint32_t table,
			uint32_t dim, const uint64_t *keys, uint32_t n, float *out);
int ps_client_push_wait(struct ps_client *c, const struct ps_client_io *io, uint32_t table,
			uint32_t dim, const uint64_t *keys, uint32_t n, const float *grads);
/* ps_client_hello, blocking. */
int ps_client_hello_wait(struct ps_client *c, const struct ps_client_io *io);
/* Sync mode: returns once every worker reached `step` and the step was applied. */
int ps_client_barrier_wait(struct ps_client *c, const struct ps_client_io *io, uint64_t step);

#endif /* WHARF_PS_H */
