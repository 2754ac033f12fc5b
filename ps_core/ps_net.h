/*
 * ps_net.h — the PS's network side: puts ps_core's server handler and client on the
 * transport (tl.h, through fuse's fz_net so tensor_fuse works on either protocol), and the
 * control plane every node answers on its control endpoint (kernel TCP).
 *
 * Call chain (server):  psd/train main -> ps_net_serve_loop -> ps_net_poll -> fz_net_poll
 *   -> request callback -> ps_handle (handler of this lcore) -> reply from a pooled buffer
 *   -> fz_conn_send (zero copy) -> done: buffer back to the pool.
 * Call chain (worker):  trainer -> ps_client_* (encode into pooled buffers) -> io.send
 *   (hands the buffer to fz_conn_send, a fresh one takes its place) -> io.poll ->
 *   reply callback -> ps_client_on_reply -> completion.
 * Control plane:  wharf-ctl / a worker's readiness check -> one PS_T_CTL message holding a
 *   command line ("health", "status", "save PATH", "shutdown"), after the node's control
 *   token for all but health (ps_net_auth.c) -> PS_T_CTL_R holding text. With
 *   protocol=dpdk it runs on a second, kernel-socket transport instance and the data port
 *   refuses it; with protocol=kernel data and control share the control endpoint and a
 *   connection is one or the other, by the type of its first message.
 *
 * Threads: one struct ps_net is driven by one thread. A PS runs NETWORK_PS_CORE_NUMBER
 * lanes (ps_net_lanes.c): one struct ps_net per lane, each with its own transport
 * instance (a DPDK lcore's TCP-lite stack, or a kernel epoll loop), its own listener, and
 * the ps_core handler of its lcore slot, which owns the shards s with s % lanes == lane.
 * Lane 0 also answers the control plane. Its health answer names every lane's data port, a
 * worker opens one connection per lane and sends each key to the lane owning its shard, so
 * a request's keys never cross lanes on the PS. A worker runs NETWORK_WORKER_CORE_NUMBER
 * lanes (ps_net_wlanes.c): lane 0 is the node its client's thread drives, lane k > 0 a
 * thread with its own transport carrying destinations d % lanes == k; ps_client stays on the
 * client's thread, requests and replies cross over SPSC rings.
 */
#ifndef WHARF_PS_NET_H
#define WHARF_PS_NET_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_core/ps_config.h"
#include "fuse/fz.h"
#include "ps_core/ps.h"

/*
 * Control messages. Their numbers sit in ps_core's range (32..255) at its top, which ps_core
 * leaves unused; the glue dispatches them before ps_handle ever sees a message.
 */
#define PS_T_CTL 240u   /* body: ["token T\n"] one command line, UTF-8, no NUL */
#define PS_T_CTL_R 241u /* body: the answer text; first word "ok" or "error" */
#define PS_CTL_MAX 16384u

/* ---- models as PS tables (ps_model_tables.c, ps_model_file.c) ---- */

#define PS_MODEL_MAX_TABLES 4096u   /* tables in one model */
#define PS_MODEL_NAME_MAX 64u       /* table name bytes, NUL included */
#define PS_MODEL_MAX_DIM 1024u      /* floats per row (ps_core's limit) */
#define PS_MODEL_MAX_ROWS 2147483647u /* rows of a dense table (ps_core's limit) */
#define PS_MODEL_MAX_KEYS 65536u    /* keys of one sparse request (ps_core's limit) */
#define PS_MODEL_DEF_MAX_KEYS 6656u /* 256 CTR samples x 26 fields */
#define PS_MODEL_MAX_CAP_ROWS (1ull << 48) /* max_rows of a table */
#define PS_MODEL_MAX_CAP_BYTES (1ull << 60) /* max_bytes of a table */
/*
 * Bytes of values one request or reply carries at most: a larger sparse request or dense
 * slice is split by the caller (ps_model_req_rows says where). Keeps every message buffer,
 * and so a node's memory, bounded whatever the tables are.
 */
#define PS_MODEL_REQ_BYTES (16u << 20)

/*
 * The tables a job's servers and workers agree on. Table i has id i (t[i].id == i) and the
 * name name[i], unique in the model. Built by ps_model_tables_add (or a built-in model, or a
 * model file); the arrays are allocated: ps_model_tables_free. max_keys: the most keys one
 * sparse request carries (both sides size their message buffers from it).
 */
struct ps_model_tables {
	uint32_t n, cap;
	struct ps_table_config *t;
	char (*name)[PS_MODEL_NAME_MAX];
	uint32_t max_keys;
};

/* An empty model with max_keys PS_MODEL_DEF_MAX_KEYS. */
void ps_model_tables_init(struct ps_model_tables *mt);
void ps_model_tables_free(struct ps_model_tables *mt);
/* Deep copy into dst (initialized here); 0 or -ENOMEM. */
int ps_model_tables_copy(struct ps_model_tables *dst, const struct ps_model_tables *src);
/*
 * The defaults of a table definition: sparse, dim 1, SGD lr 0.01, eps 1e-8, beta1 0.9,
 * beta2 0.999, l1 = l2 = init_accum = 0, zeros (init_a = init_b = 0), seed 42.
 */
void ps_model_table_defaults(struct ps_table_config *t);
/*
 * Checks one definition (ranges of every field, the optimizer's parameters, the name's
 * characters): 0, or -EINVAL with "FIELD: why" in err. t->id is not looked at.
 */
int ps_model_table_check(const struct ps_table_config *t, const char *name, char *err,
			 size_t errlen);
/*
 * Checks t and name (unique in mt), then appends it with id mt->n. -EINVAL (err: "table I
 * 'NAME': FIELD: why"), -E2BIG past PS_MODEL_MAX_TABLES, -ENOMEM; mt unchanged on failure.
 */
int ps_model_tables_add(struct ps_model_tables *mt, const struct ps_table_config *t,
			const char *name, char *err, size_t errlen);
/* The id of the table called name, or -ENOENT. */
int ps_model_tables_find(const struct ps_model_tables *mt, const char *name);
/* 1..PS_MODEL_MAX_KEYS, else -EINVAL. */
int ps_model_tables_set_max_keys(struct ps_model_tables *mt, uint32_t max_keys, char *err,
				 size_t errlen);
/*
 * The most keys (sparse) or rows (dense) one request of table id carries: sparse,
 * max_keys capped so the request fits PS_MODEL_REQ_BYTES; dense, the table's rows capped
 * the same way (a larger dense pull or push goes in slices of this many rows).
 */
uint32_t ps_model_req_rows(const struct ps_model_tables *mt, uint32_t id);
/*
 * The largest body any request or reply of this model carries (what ps_net_params's
 * max_msg wants): over the tables, a sparse push of ps_model_req_rows keys (16-byte head,
 * then a key and dim floats each) and a dense push of that many rows (24-byte head, then
 * the floats; a dense pull's reply carries the same floats without the head).
 */
uint32_t ps_model_max_msg(const struct ps_model_tables *mt);
/*
 * 64-bit digest of every table's definition (name, kind, dim, rows, optimizer and its
 * parameters, initializer, seed, in id order; not the memory policies, which only servers
 * apply): FNV-1a 64 over a little-endian encoding, so the same model gives the same digest
 * in every process and on every architecture.
 */
uint64_t ps_model_digest(const struct ps_model_tables *mt);

/*
 * A JSON model file (docs/api.md, "Model files") into out (initialized here; nothing to
 * free on failure). -EINVAL with "FILE:LINE: why" for a syntax error or a duplicate key,
 * "FILE: table I 'NAME': FIELD: why" for a refused value; -ENOENT when path is missing.
 * parse reads text; name stands for the file in messages.
 */
int ps_model_file_load(const char *path, struct ps_model_tables *out, char *err, size_t errlen);
int ps_model_file_parse(const char *text, const char *name, struct ps_model_tables *out,
			char *err, size_t errlen);

/* ---- the node ---- */

struct ps_net;

struct ps_net_params {
	const struct ps_cluster *cl;
	int eal_argc;          /* EAL arguments (before "--"), used with protocol=dpdk */
	char **eal_argv;
	uint32_t max_msg;      /* largest message body this node sends or receives */
	const char *name;      /* log prefix, e.g. "wharf-psd" */
	/* Set by a multi-lane PS for each of its lanes; zero for a node of one lane. */
	uint32_t lane, lanes;
	void *backend_arg;     /* protocol=dpdk: what tl_lanes_open gave the lane (the lanes are up) */
	/*
	 * ps_model_digest of the model: a PS names it in its health answer; a worker with a
	 * non-zero one refuses (ps_net_connect) a server that names another.
	 */
	uint64_t model_digest;
};

/*
 * Brings up the data transport (protocol from cl; dpdk: EAL and the port from eal_argv and
 * this node's data address) and the control listener (this node's control endpoint, when the
 * cluster names it). -errno with a message in err; nothing left running on failure.
 */
int ps_net_create(const struct ps_net_params *p, struct ps_net **out, char *err,
		    size_t errlen);
void ps_net_destroy(struct ps_net *n);

/*
 * One round of the node's loop: the data transport (spinning when the role's polling knob
 * is on, else sleeping up to 1 ms waiting for packets), and the control transport at most
 * every 2 ms. A PS then serves the requests that waited for a reply buffer; a worker runs
 * ps_client_tick (retries after a back-off; a connection that answered nothing for
 * request_timeout_s is closed). Returns tl_poll's count or -errno.
 */
int ps_net_poll(struct ps_net *n);
/* ps_net_poll, but never sleeping when may_sleep is false (the caller has work queued). */
int ps_net_poll_for(struct ps_net *n, bool may_sleep);
/* True once a "shutdown" command arrived or ps_net_request_stop was called. */
bool ps_net_stopping(const struct ps_net *n);
void ps_net_request_stop(struct ps_net *n);
/*
 * Blocked SIGINT/SIGTERM pending (checked at most every 100 ms), or ps_net_stop_all(true)
 * called? What the serving and waiting loops ask.
 */
bool ps_net_signalled(struct ps_net *n, const sigset_t *sigs);
/*
 * A worker's waits for its servers (ps_net_connect, ps_net_recover) end on a pending blocked
 * signal of sigs as well as on a shutdown command: -ECANCELED, the node stopping, and
 * ps_net_stop_signal says which signal it took. sigs stays the caller's; NULL: not asked.
 */
void ps_net_stop_on(struct ps_net *n, const sigset_t *sigs);
/*
 * The same waits end when *flag becomes nonzero, set by any thread (a library caller giving
 * up: an interrupted open, wharf_client_interrupt): -ECANCELED, "interrupted". NULL: not
 * asked.
 */
void ps_net_stop_flag(struct ps_net *n, const _Atomic int *flag);
/* The signal ps_net_signalled took on this node, 0 if none. */
int ps_net_stop_signal(const struct ps_net *n);
/* Makes every node of this process stop as a signal would (on) or forgets it (off). Any thread. */
void ps_net_stop_all(bool on);
/* Wakes the node's thread if it sleeps in ps_net_poll. The one call any thread may make. */
void ps_net_wake(struct ps_net *n);
/* Worker: is the data connection of ps_client destination dest up? */
bool ps_net_dest_up(const struct ps_net *n, uint32_t dest);

/* ---- server side (ps_net_srv.c) ---- */

/*
 * Serves ps on this node's data endpoint with handler h (lcore slot 0 of ps). ckpt_path
 * (may be NULL) is where the shutdown checkpoint goes. ps and h stay the caller's and must
 * outlive n's serving.
 */
int ps_net_serve(struct ps_net *n, struct ps_server *ps, struct ps_handler *h,
		   const struct ps_server_config *cfg, const char *ckpt_path, char *err,
		   size_t errlen);
/*
 * Runs until a shutdown command or a signal in sigs. Then drains: stops taking requests
 * (a request arriving now is dropped unapplied: its client resends it to the next server),
 * waits up to 5 s for every reply to complete, writes the checkpoint when a path was given,
 * and closes. So a push is either acknowledged and in the checkpoint, or neither. 0 or -errno.
 */
int ps_net_serve_loop(struct ps_net *n, const sigset_t *sigs);

/* ---- worker side (ps_net_cli.c) ---- */

/*
 * Waits until every server answers "health" on its control endpoint (one line per retry
 * naming the endpoints not ready, every retry_interval_s), then opens one data connection per
 * server. -ETIMEDOUT after wait_timeout_s with those endpoints in err. With a non-zero
 * params model_digest, a server whose health answer names another model (or none) is
 * refused at once: -EPROTO, err naming the server and both digests. Reconnects check again.
 */
int ps_net_connect(struct ps_net *n, struct ps_client *pc, char *err, size_t errlen);
/* send/poll for ps_client_*_wait; msgs are pooled buffers of max_msg + header bytes. */
const struct ps_client_io *ps_net_io(struct ps_net *n);
/*
 * After a call failed because a server went away (or answered nothing for request_timeout_s:
 * the poll closed that connection): waits for it as ps_net_connect does, reconnects, says
 * hello, and then, on every connection opened since the last call (a server lost again
 * meanwhile included), resends every push it had not acknowledged (ps_client_resend), oldest
 * first; what else the lost connection owed was let go (its calls end with -ECONNRESET or
 * -ETIMEDOUT: ask again).
 */
int ps_net_recover(struct ps_net *n, char *err, size_t errlen);

/*
 * Several requests in flight at once (e.g. one dense pull per table): begin, then for each
 * request take a completion with ps_net_call_track, encode it with ps_client_* into
 * ps_net_io(n)->msgs, hand the encode result to ps_net_call_issue (sends, or forgets the
 * completion on failure), and finally ps_net_call_wait. Returns the first error.
 */
void ps_net_call_begin(struct ps_net *n);
int ps_net_call_track(struct ps_net *n, ps_done_fn **done, void **arg);
int ps_net_call_issue(struct ps_net *n, int encode_rc);
int ps_net_call_wait(struct ps_net *n);

/* Worker counters for status lines and the final report. */
struct ps_net_cli_stats {
	uint64_t requests, replies, reconnects, resent, bytes_out, bytes_in;
};
void ps_net_cli_stats(const struct ps_net *n, struct ps_net_cli_stats *out);
/* The node's fuse counters (fz.h), summed over its data connections, closed ones too. */
void ps_net_fuse_stats(const struct ps_net *n, struct fz_conn_stats *out);

/* ---- control plane client (ps_net_ctl.c) ---- */

/*
 * Sends one command to a control endpoint over kernel TCP, with token (NULL or "": none;
 * health needs none), and copies the answer text into out. -ECONNREFUSED/-ETIMEDOUT when
 * nobody answers within timeout_ms; err says so.
 */
int ps_ctl_request(const struct ps_endpoint *ep, const char *token, const char *cmd,
		   int timeout_ms, char *out, size_t outlen, char *err, size_t errlen);

/* ---- control token and save paths (ps_net_auth.c) ---- */

/*
 * health needs no token (readiness and liveness probes ask it); status, save and shutdown
 * need the node's control token. ps_ctl_request sends token (NULL or "": none) on a line of
 * its own before the command ("token T\n" + command).
 */
/* 16..256 printable ASCII bytes without spaces, else -EINVAL naming what. */
int ps_ctl_token_check(const char *tok, const char *what, char *err, size_t errlen);
/* A token file: one line, trailing newline and spaces dropped, then checked. -errno. */
int ps_ctl_token_read(const char *path, char *tok, size_t toklen, const char *what, char *err,
		      size_t errlen);
/* WHARF_RUNTIME_DIR, else $XDG_RUNTIME_DIR/wharf, else /tmp/wharf-<euid>. */
void ps_ctl_run_dir_default(char *const envp[], char *out, size_t len);
/*
 * <run_dir>/ctl-<ip>-<port>.token (the host as given when ep is not resolved): where the
 * node at ep writes a token it made.
 */
void ps_ctl_token_path(const char *run_dir, const struct ps_endpoint *ep, char *out, size_t len);
/*
 * Makes a token (32 random bytes as 64 hex digits) into tok and writes it to
 * ps_ctl_token_path (mode 0600, renamed into place), run_dir made 0700 when missing and
 * refused when it is not a private directory of ours. path gets the file's name. -errno.
 */
int ps_ctl_token_make(const char *run_dir, const struct ps_endpoint *ep, char *tok, size_t toklen,
		      char *path, size_t pathlen, char *err, size_t errlen);
/* Removes path when it still holds tok (a node started on the endpoint since keeps its own). */
void ps_ctl_token_unmake(const char *path, const char *tok);
/*
 * A client's token for the node at ep: file (NULL or "": none given), else WHARF_CTL_TOKEN,
 * else WHARF_CTL_TOKEN_FILE's file, else the file a node at ep made in the run directory.
 * tok is "" when that file does not exist either (health still works); src says which
 * source it was. -errno for a token source that is given but unreadable or malformed.
 */
int ps_ctl_token_find(const char *file, char *const envp[], const struct ps_endpoint *ep,
		      char *tok, size_t toklen, char *src, size_t srclen, char *err, size_t errlen);
/*
 * The token a node of cluster cl sends to the node at ep: cl's own (the job's token), else
 * the file a node at ep made in cl's run directory ("" when there is none).
 */
int ps_ctl_token_of(const struct ps_cluster *cl, const struct ps_endpoint *ep, char *tok,
		    size_t toklen, char *err, size_t errlen);
/* Equal, in time that depends on wlen only (want is the secret). */
bool ps_ctl_token_equal(const char *given, size_t glen, const char *want, size_t wlen);
/*
 * Where "save PATH" may write: PATH relative to the checkpoint's directory, or absolute
 * inside it, with no ".." component, its directory existing and (resolved, links and all)
 * at or below the checkpoint's, and not in the log directory wal_dir (may be NULL). out is
 * the path to write (ckpt itself when it names the checkpoint). -EPERM/-EINVAL/-errno.
 */
int ps_ctl_save_target(const char *ckpt, const char *wal_dir, const char *path, char *out,
		       size_t outlen, char *err, size_t errlen);

/* ---- whole server (ps_net_run.c) ---- */

/* ps_core's mode for the cluster's. */
enum ps_mode ps_job_to_mode(enum ps_job_mode m);
/*
 * A PS node from start to stop: ps_server with the model's tables (restored from restore when
 * given), the glue, serving until shutdown or a signal in sigs, the shutdown checkpoint into
 * ckpt (may be NULL). What psd and a train process in the server role both run. 0 or -errno.
 */
int ps_net_run_server(const struct ps_cluster *cl, const struct ps_model_tables *mt,
			int eal_argc, char **eal_argv, const char *name, const char *ckpt,
			const char *restore, const sigset_t *sigs, char *err, size_t errlen);

#endif
