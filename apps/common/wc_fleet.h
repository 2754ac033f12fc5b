/*
 * wc_fleet.h — a role API after PaddlePaddle's fleet (`fleet.init(role)`, `is_server`,
 * `init_server`, `run_server`, `init_worker`, `stop_worker`), so one program is a parameter
 * server or a worker depending on its environment, as in Paddle's example:
 *
 *     wc_fleet_init(argc, argv, environ, &f, err, sizeof(err));   // role from the environment
 *     // define the model: which PS tables it keeps (struct wc_model_tables)
 *     if (wc_fleet_is_server(f)) {
 *             wc_fleet_init_server(f, &tables);
 *             wc_fleet_run_server(f);            // serves until shutdown or SIGINT/SIGTERM
 *     }
 *     if (wc_fleet_is_worker(f)) {
 *             wc_fleet_init_worker(f, &tables);  // waits for the servers, connects
 *             pc = wc_fleet_client(f, &io);      // ps_client_pull_wait(pc, io, ...) etc.
 *             wc_fleet_stop_worker(f);
 *     }
 *     wc_fleet_destroy(f);
 *
 * It is a thin layer over what exists: the role and cluster come from wc_config_load (flags,
 * TF_CONFIG, Paddle's TRAINING_ROLE/PADDLE_* variables, DeepRec knobs, JSON, .endpoint_map);
 * the server is wc_psnet_run_server; the worker is ps_client + wc_psnet_connect/recover.
 *
 * Call chain: app main -> wc_fleet_* -> wc_config_load | wc_psnet_run_server |
 *   ps_client_create + wc_psnet_create + wc_psnet_connect -> (app) ps_client_*_wait.
 *
 * Errors: every int function returns 0 or -errno and leaves one line saying what went wrong
 * in wc_fleet_error(f) (wc_fleet_init writes it into the caller's err, as there is no fleet
 * yet). Nothing here is on a hot path; the client and io it hands out are.
 *
 * Threads: a fleet is used by one thread. Signals: wc_fleet_init blocks SIGINT and SIGTERM
 * in the calling thread (threads it starts later, EAL's included, inherit that), so the
 * server loop and wc_fleet_signalled see them and stop cleanly instead of dying mid-write.
 */
#ifndef WHARF_WC_FLEET_H
#define WHARF_WC_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apps/common/wc_config.h"
#include "apps/common/wc_psnet.h"
#include "ps_core/ps.h"

struct wc_fleet;

/*
 * Paddle's fleet.init(role): argv is the whole command line, "[EAL args] -- [app args]" (or
 * app args only); the app part and envp go to wc_config_load. The EAL part is kept for
 * protocol=dpdk. argv must outlive the fleet (EAL keeps pointers into it). -errno with the
 * source named in err; *out untouched on failure.
 */
int wc_fleet_init(int argc, char **argv, char *const envp[], struct wc_fleet **out, char *err,
		  size_t errlen);
/*
 * The same with the app's own flags (app may be NULL) and -h/--help: when help was asked,
 * returns 0 with *help set and *out NULL (the app prints wc_flags_usage() and its own usage).
 * name is the log prefix ("wharf-ps-bench"); NULL means "wharf".
 */
int wc_fleet_init_app(int argc, char **argv, char *const envp[], const struct wc_app_opts *app,
		      const char *name, bool *help, struct wc_fleet **out, char *err, size_t errlen);
/* No-op for NULL. Stops the worker side if still up; a running server has returned already. */
void wc_fleet_destroy(struct wc_fleet *f);

bool wc_fleet_is_server(const struct wc_fleet *f);
bool wc_fleet_is_worker(const struct wc_fleet *f);
/* This node's index among its role (Paddle's trainer id / server index). */
unsigned wc_fleet_index(const struct wc_fleet *f);
/* The resolved cluster (role, endpoints, protocol, mode, knobs); valid until destroy. */
const struct wc_cluster *wc_fleet_cluster(const struct wc_fleet *f);
/* The last error line ("" when none). */
const char *wc_fleet_error(const struct wc_fleet *f);

/* ---- server role ---- */

/*
 * Paddle's init_server: the tables this server keeps (copied), and optionally a checkpoint to
 * start from (restore) and one to write at shutdown (ckpt); both may be NULL and are copied.
 * -EINVAL on a worker fleet or with no tables.
 */
int wc_fleet_init_server(struct wc_fleet *f, const struct wc_model_tables *tables);
int wc_fleet_set_checkpoints(struct wc_fleet *f, const char *ckpt, const char *restore);
/*
 * Paddle's run_server: serves until a "shutdown" control command (wharf-ctl, or
 * wc_fleet_stop_servers from a worker) or SIGINT/SIGTERM, then drains and checkpoints.
 * Blocks. 0 when it stopped cleanly.
 */
int wc_fleet_run_server(struct wc_fleet *f);

/* ---- worker role ---- */

/*
 * Paddle's init_worker: the client and the network for these tables (the same ones the
 * servers keep; they size the message buffers), then waits for every server as Paddle does
 * ("not ready" once per retry with the endpoints, -ETIMEDOUT after the wait timeout) and
 * connects. -EINVAL on a server fleet, -EALREADY when already initialised.
 */
int wc_fleet_init_worker(struct wc_fleet *f, const struct wc_model_tables *tables);
/*
 * The worker's PS client and the io for ps_client_*_wait (both owned by the fleet, valid
 * until wc_fleet_stop_worker). NULL before wc_fleet_init_worker succeeded.
 */
struct ps_client *wc_fleet_client(struct wc_fleet *f, const struct ps_client_io **io);
/*
 * After a ps_client_*_wait call failed with rc: 0 when the caller should retry it (the
 * servers are back and every unacknowledged push was resent exactly once), else the error to
 * give up with (-ECANCELED after a signal; a server's refusal is returned as is).
 */
int wc_fleet_recover(struct wc_fleet *f, int rc);
/*
 * Sync mode: the barrier of step, retried across reconnects. step is the one the worker is
 * in (ps_client_step of wc_fleet_client's client: where the servers were at its start).
 */
int wc_fleet_barrier(struct wc_fleet *f, uint64_t step);
/* SIGINT/SIGTERM arrived (checked at most every 100 ms; false before init_worker). */
bool wc_fleet_signalled(struct wc_fleet *f);
/* Paddle's stop_worker: closes this worker's connections and client. No-op when not up. */
void wc_fleet_stop_worker(struct wc_fleet *f);
/*
 * Tells every server to shut down (control command "shutdown", timeout_ms each): what a
 * job's last worker does when the job is over. Returns the first failure, after trying all.
 */
int wc_fleet_stop_servers(struct wc_fleet *f, int timeout_ms);

#endif
