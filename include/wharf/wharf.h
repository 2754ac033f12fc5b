/*
 * wharf.h — the public API of libwharf: a parameter server (PS) and its worker client over a
 * DPDK kernel-bypass TCP stack (or kernel TCP), for a training program to link.
 *
 *   pkg-config --cflags --libs wharf        (static: --static)
 *
 * A job is a cluster (servers and workers, from the same sources the wharf executables read:
 * flags, TF_CONFIG, Paddle's variables, DeepRec's knobs, a JSON cluster file, .endpoint_map)
 * and a model (its tables). A server process calls wharf_server_run; a worker opens a client
 * and calls pull/push/barrier from any of its threads.
 *
 * Conventions: every int function returns 0 or a negative errno; on failure the calling
 * thread's wharf_errmsg() names the cause in one line (a bad config line, a refused request,
 * a server that did not come up in time). Objects are opaque; x_free(NULL) does nothing.
 * Exported names all begin with wharf_ (or WHARF_ for constants).
 */
#ifndef WHARF_WHARF_H
#define WHARF_WHARF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WHARF_VERSION_MAJOR 0
#define WHARF_VERSION_MINOR 5
#define WHARF_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
const char *wharf_version(void);

/* The calling thread's last error message ("" when none); valid until its next wharf call. */
const char *wharf_errmsg(void);

/* ---------------------------------------------------------------- models */

enum wharf_table_kind { WHARF_TABLE_SPARSE = 0, WHARF_TABLE_DENSE = 1 };
enum wharf_optimizer { WHARF_OPT_SGD = 0, WHARF_OPT_ADAGRAD, WHARF_OPT_ADAM, WHARF_OPT_FTRL };
enum wharf_init { WHARF_INIT_ZEROS = 0, WHARF_INIT_UNIFORM, WHARF_INIT_NORMAL };

#define WHARF_NAME_MAX 64u        /* table name bytes, NUL included */
#define WHARF_MAX_TABLES 4096u    /* tables per model */
#define WHARF_MAX_DIM 1024u       /* floats per row */

/*
 * One table. Sparse: rows created by a key's first push, keyed by any uint64; dense: `rows` rows
 * numbered 0..rows-1. Each row has `dim` floats. The optimizer runs on the servers.
 * The model file spells the same fields in JSON (see docs/api.md).
 */
struct wharf_table {
	char name[WHARF_NAME_MAX];   /* unique in the model: [A-Za-z0-9_.-], 1..63 bytes */
	enum wharf_table_kind kind;
	uint32_t dim;                /* 1..WHARF_MAX_DIM */
	uint64_t rows;               /* dense: 1..2^31-1; sparse: 0 */
	enum wharf_optimizer optimizer;
	float lr;                    /* SGD, Adagrad, Adam; FTRL's alpha. (0, 100] */
	float eps;                   /* Adagrad, Adam: > 0 */
	float beta1, beta2;          /* Adam: [0, 1); FTRL: beta1 is FTRL's beta */
	float l1, l2;                /* FTRL: >= 0 */
	float init_accum;            /* Adagrad's initial accumulator: >= 0 */
	enum wharf_init init;
	float init_a, init_b;        /* uniform [a, b) or normal (mean a, stddev b) */
	uint64_t seed;               /* a row's initial value depends on (seed, key) only */
};

/*
 * Defaults: sparse, dim 1, SGD lr 0.01, eps 1e-8, Adam betas 0.9/0.999, l1 = l2 = init_accum
 * = 0, zeros (init_a = init_b = 0), seed 42. A name of WHARF_NAME_MAX bytes or more is left
 * empty (wharf_model_add then refuses it).
 */
void wharf_table_defaults(struct wharf_table *t, const char *name);

struct wharf_model;

int wharf_model_new(struct wharf_model **out);
/* Checks t (ranges, a unique name) and appends it; *id_out (may be NULL) is its id. */
int wharf_model_add(struct wharf_model *m, const struct wharf_table *t, uint32_t *id_out);
/*
 * A JSON model file: {"tables": [{"name": "emb", "kind": "sparse", "dim": 8, ...}, ...]}
 * (docs/api.md, "Model files"). Errors name FILE:LINE:COLUMN (syntax, a duplicate key) or
 * FILE, the table's index and name, and the field. Parse takes text (name is used in
 * messages). load: -ENOENT for a missing file.
 */
int wharf_model_load(const char *path, struct wharf_model **out);
int wharf_model_parse(const char *text, const char *name, struct wharf_model **out);
uint32_t wharf_model_count(const struct wharf_model *m);
/* Table `id` (0..count-1) copied into *out; -ENOENT when there is none. */
int wharf_model_table(const struct wharf_model *m, uint32_t id, struct wharf_table *out);
/* The id of the table called name; -ENOENT when there is none. */
int wharf_model_find(const struct wharf_model *m, const char *name, uint32_t *id_out);
/*
 * A sparse table's memory policies (docs/api.md, "Memory policies"; a model file spells them
 * as the table's keys of the same names). All zero: none, as wharf_table_defaults leaves a
 * table: rows are made by pushes only, without bound. Each holds on every server, split
 * evenly over its shards; only servers apply them (they are not in the digest).
 */
struct wharf_table_memory {
	uint64_t max_rows;     /* rows on a server at most (0: no cap) */
	uint64_t max_bytes;    /* bytes on a server at most: rows, index, admission counters */
	uint32_t admit_after;  /* a key becomes a row at its admit_after-th push (0, 1: first) */
	uint64_t evict_after;  /* rows not pushed for more than this many steps go (0: never) */
	bool pull_inserts;     /* a pull of an unknown key makes its row (false: answered with
				* the initializer's values, nothing stored); not with the others */
};

/*
 * Sets table id's memory policies, checked as wharf_model_add checks a table (-EINVAL with
 * the field and why; the table keeps the policies it had). A push's keys new to a table at
 * its cap are refused with -EDQUOT, the push's other keys applied.
 */
int wharf_model_set_memory(struct wharf_model *m, uint32_t id, const struct wharf_table_memory *mem);
/* Table id's memory policies into *out; -ENOENT when there is no such table. */
int wharf_model_memory(const struct wharf_model *m, uint32_t id, struct wharf_table_memory *out);
/* A 64-bit digest of every table's definition: servers and workers compare it. */
uint64_t wharf_model_digest(const struct wharf_model *m);
void wharf_model_free(struct wharf_model *m);

/* ---------------------------------------------------------------- the cluster */

struct wharf_config;

enum wharf_role { WHARF_ROLE_SERVER = 1, WHARF_ROLE_WORKER = 2 };
enum wharf_mode { WHARF_MODE_SYNC = 0, WHARF_MODE_ASYNC, WHARF_MODE_GEO };

/*
 * The cluster as a wharf executable sees it: argv holds its cluster flags without a program
 * name (e.g. {"--role", "worker", "--ps", "10.0.0.1:6000"}; argc may be 0), merged over
 * envp's TF_CONFIG, Paddle variables, DeepRec knobs and WHARF_* (envp NULL: the process
 * environment), the --config file and .endpoint_map. EAL arguments (protocol dpdk) come from
 * WHARF_EAL_ARGS in envp (split at spaces), else from the --config file's eal_args, unless
 * wharf_config_set_eal gives them. Not thread-safe (getopt): load configurations from one
 * thread.
 */
int wharf_config_load(int argc, const char *const *argv, const char *const *envp,
		      struct wharf_config **out);
/* EAL arguments, space-separated, e.g. "-l 0-1 --vdev=net_virtio_user0,path=/tmp/s --no-huge". */
int wharf_config_set_eal(struct wharf_config *c, const char *eal_args);
enum wharf_role wharf_config_role(const struct wharf_config *c);
uint32_t wharf_config_index(const struct wharf_config *c);
uint32_t wharf_config_servers(const struct wharf_config *c);
uint32_t wharf_config_workers(const struct wharf_config *c);
enum wharf_mode wharf_config_mode(const struct wharf_config *c);
uint32_t wharf_config_geo_k(const struct wharf_config *c);
/* "dpdk" or "kernel". */
const char *wharf_config_protocol(const struct wharf_config *c);
void wharf_config_free(struct wharf_config *c);

/* ---------------------------------------------------------------- the server */

/*
 * Serves model m as server wharf_config_index(c) until wharf_server_stop, a "shutdown"
 * control command, or SIGINT/SIGTERM when the caller blocked them. ckpt (may be NULL): the
 * checkpoint written at shutdown and periodically, with its write-ahead log; restore (may be
 * NULL): the checkpoint to start from. Blocks; 0 after a clean stop.
 */
int wharf_server_run(const struct wharf_config *c, const struct wharf_model *m,
		     const char *ckpt, const char *restore);
/* Asks every wharf_server_run of this process to drain and return. Any thread. */
void wharf_server_stop(void);

/* ---------------------------------------------------------------- the worker client */

struct wharf_client;
struct wharf_req;

struct wharf_client_opts {
	/* A waiter spins on its core instead of sleeping (lowest latency, burns the core). */
	bool spin_wait;
	/* Requests queued from application threads before submitters wait: 0 means 1024. */
	uint32_t queue_depth;
};

/*
 * Connects worker wharf_config_index(c) to every server: starts the client's network thread
 * (protocol dpdk: brings up EAL inside the library, once per process), waits for the servers
 * as the executables do (wait_timeout_s), checks that they serve model m, and says hello.
 * opts may be NULL. The client then takes calls from any thread. c and m must stay valid
 * until wharf_client_close: the network thread reads them (reconnecting, for one).
 */
int wharf_client_open(const struct wharf_config *c, const struct wharf_model *m,
		      const struct wharf_client_opts *opts, struct wharf_client **out);
/*
 * wharf_client_open that the caller can interrupt: while it waits, interrupted(arg) runs on
 * the calling thread about every 50 ms (never before the network thread started), and once
 * it returns nonzero the wait for the servers ends and the open returns -ECANCELED
 * ("interrupted"). A binding checks its language's pending signals there (Python: Ctrl-C).
 * The network thread starts with every signal blocked, whatever the caller's mask.
 */
int wharf_client_open_interruptible(const struct wharf_config *c, const struct wharf_model *m,
				    const struct wharf_client_opts *opts,
				    int (*interrupted)(void *arg), void *arg,
				    struct wharf_client **out);
/* Completes what is in flight, stops the network thread, frees. */
void wharf_client_close(struct wharf_client *cl);
/*
 * Ends the client's waits for servers, now and from then on. While every server answers,
 * nothing changes. Once the client waits for a server (one that went away, until
 * wait_timeout_s), it stops waiting: every call in flight or queued then fails with
 * -ECANCELED ("interrupted"), and so does every later call; only wharf_client_close is left.
 * So a close that would wait out a server that is down returns at once. One atomic store:
 * safe from any thread and from a signal handler. The Python binding calls it when Ctrl-C
 * comes during a close, or when a call Ctrl-C interrupted is still in flight at the close.
 */
void wharf_client_interrupt(struct wharf_client *cl);

/*
 * Completion of an asynchronous call: status is 0 or -errno, and then wharf_errmsg() in the
 * function says why, as wharf_wait's would. Runs on the client's network thread: it must not
 * block, and must not wait on another request of this client.
 */
typedef void wharf_done_fn(void *arg, int status);

/*
 * Calls. Each blocking call is its _async form plus wharf_wait. Sparse tables: n keys
 * (any n: the client splits what exceeds one message), out/grads n * dim floats in key
 * order. Dense tables: the whole table (rows * dim floats). Buffers are the caller's and
 * are read or written by the network thread until the call completes: no copy is made of
 * out, so out must not overlap keys, nor grads unless it is grads itself (a push_pull then
 * leaves the rows' new values where their gradients were); -EINVAL otherwise. A push returns once every server that holds its keys acknowledged it (and logged it);
 * after a lost connection the client reconnects and resends it, and the server applies it
 * exactly once. A push that returns -EDQUOT was applied but for keys new to a table at its
 * memory cap (wharf_table_memory), whose gradients were dropped: not an error to retry.
 *
 * _async: done (may be NULL) runs at completion with arg; when req is not NULL, *req is a
 * handle the caller must pass to wharf_wait exactly once. At least one of done and req.
 * An _async call that returns an error queued nothing: done never runs and *req is NULL.
 * done may run before the _async call returns.
 */
int wharf_pull(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
	       float *out);
int wharf_push(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
	       const float *grads);
/* Push, then the rows' values after it was applied into out. */
int wharf_push_pull(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		    const float *grads, float *out);
int wharf_dense_pull(struct wharf_client *cl, uint32_t table, float *out);
int wharf_dense_push(struct wharf_client *cl, uint32_t table, const float *grads);
/*
 * Sync mode: returns once every worker reached step and the step's pushes were applied.
 * step is wharf_step's (-EINVAL otherwise). A step whose barrier waited past the servers'
 * barrier timeout fails with -ETIME naming the missing workers (policy fail).
 */
int wharf_barrier(struct wharf_client *cl, uint64_t step);
/*
 * Sync mode: the step this worker is in, which its pushes belong to: where its servers were
 * when it connected (a worker restarted under its old id resumes there: count steps from
 * it), then one more per completed barrier. 0 on a new job.
 */
uint64_t wharf_step(const struct wharf_client *cl);

int wharf_pull_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		     float *out, wharf_done_fn *done, void *arg, struct wharf_req **req);
int wharf_push_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		     const float *grads, wharf_done_fn *done, void *arg, struct wharf_req **req);
int wharf_push_pull_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys,
			  uint32_t n, const float *grads, float *out, wharf_done_fn *done,
			  void *arg, struct wharf_req **req);
int wharf_dense_pull_async(struct wharf_client *cl, uint32_t table, float *out,
			   wharf_done_fn *done, void *arg, struct wharf_req **req);
int wharf_dense_push_async(struct wharf_client *cl, uint32_t table, const float *grads,
			   wharf_done_fn *done, void *arg, struct wharf_req **req);
int wharf_barrier_async(struct wharf_client *cl, uint64_t step, wharf_done_fn *done, void *arg,
			struct wharf_req **req);

/* Waits (sleeping unless opts.spin_wait) for req, frees it, returns its status. */
int wharf_wait(struct wharf_req *req);
/*
 * As wharf_wait but gives up after timeout_ms: -EAGAIN (not complete yet) and req stays the
 * caller's; any other value is the call's status and req is freed. A call's status is never
 * -EAGAIN (a server's final refusal carrying it, which the protocol sends only as one to
 * retry, fails the call with -EPROTO).
 */
int wharf_wait_timeout(struct wharf_req *req, int timeout_ms);
/* True once req completed (wharf_wait then returns at once). */
bool wharf_req_done(const struct wharf_req *req);

/*
 * GEO mode: the rows of sparse table `table` changed since this worker's last call, each
 * handed to fn while the caller waits (fn runs on the network thread; row is valid during
 * the call only; fn must not call the client). Blocking; the number of rows or -errno. A
 * server moves this worker's position only when the next call acknowledges the rows, so a
 * row can come again (after a lost connection, a server restart or a full resync): take it
 * as the server's value (Paddle's rule: local = row + (local - base), base = row), never as
 * a change to add. A GEO push is a delta the server adds as it is.
 */
typedef void wharf_row_fn(void *arg, uint64_t key, const float *row, uint32_t dim);
int64_t wharf_geo_pull(struct wharf_client *cl, uint32_t table, wharf_row_fn *fn, void *arg);
/* The same without waiting: rows reach fn as they come, then the completion (status only). */
int wharf_geo_pull_async(struct wharf_client *cl, uint32_t table, wharf_row_fn *fn,
			 void *fn_arg, wharf_done_fn *done, void *arg, struct wharf_req **req);

struct wharf_client_stats {
	uint64_t calls, requests, replies, bytes_out, bytes_in, reconnects, resent;
};
void wharf_client_stats(const struct wharf_client *cl, struct wharf_client_stats *out);

#ifdef __cplusplus
}
#endif

#endif
