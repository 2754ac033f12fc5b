/*
 * ps_fleet.h — a role API after PaddlePaddle's fleet (`fleet.init(role)`, `is_server`,
 * `init_server`, `run_server`, `init_worker`, `stop_worker`), so one program is a parameter
 * server or a worker depending on its environment, as in Paddle's example:
 *
 *     ps_fleet_init(argc, argv, environ, &f, err, sizeof(err));   // role from the environment
 *     // define the model: which PS tables it keeps (struct ps_model_tables)
 *     if (ps_fleet_is_server(f)) {
 *             ps_fleet_init_server(f, &tables);
 *             ps_fleet_run_server(f);            // serves until shutdown or SIGINT/SIGTERM
 *     }
 *     if (ps_fleet_is_worker(f)) {
 *             ps_fleet_init_worker(f, &tables);  // waits for the servers, connects
 *             pc = ps_fleet_client(f, &io);      // ps_client_pull_wait(pc, io, ...) etc.
 *             ps_fleet_stop_worker(f);
 *     }
 *     ps_fleet_destroy(f);
 *
 * It is a thin layer over what exists: the role and cluster come from ps_config_load (flags,
 * TF_CONFIG, Paddle's TRAINING_ROLE/PADDLE_* variables, DeepRec knobs, JSON, .endpoint_map);
 * the server is ps_net_run_server; the worker is ps_client + ps_net_connect/recover.
 *
 * Call chain: app main -> ps_fleet_* -> ps_config_load | ps_net_run_server |
 *   ps_client_create + ps_net_create + ps_net_connect -> (app) ps_client_*_wait.
 *
 * Errors: every int function returns 0 or -errno and leaves one line saying what went wrong
 * in ps_fleet_error(f) (ps_fleet_init writes it into the caller's err, as there is no fleet
 * yet). Nothing here is on a hot path; the client and io it hands out are.
 *
 * Threads: a fleet is used by one thread. Signals: ps_fleet_init blocks SIGINT and SIGTERM
 * in the calling thread (threads it starts later, EAL's included, inherit that), so the
 * server loop and ps_fleet_signalled see them and stop cleanly instead of dying mid-write.
 */
#ifndef WHARF_PS_FLEET_H
#define WHARF_PS_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_core/ps_config.h"
#include "ps_core/ps_net.h"
#include "ps_core/ps.h"

struct ps_fleet;

/*
 * Paddle's fleet.init(role): argv is the whole command line, "[EAL args] -- [app args]" (or
 * app args only); the app part and envp go to ps_config_load. The EAL part is kept for
 * protocol=dpdk. argv must outlive the fleet (EAL keeps pointers into it). -errno with the
 * source named in err; *out untouched on failure.
 */
int ps_fleet_init(int argc, char **argv, char *const envp[], struct ps_fleet **out, char *err,
		  size_t errlen);
/*
 * The same with the app's own flags (app may be NULL) and -h/--help: when help was asked,
 * returns 0 with *help set and *out NULL (the app prints ps_flags_usage() and its own usage).
 * name is the log prefix ("wharf-ps-bench"); NULL means "wharf".
 */
int ps_fleet_init_app(int argc, char **argv, char *const envp[], const struct ps_app_opts *app,
		      const char *name, bool *help, struct ps_fleet **out, char *err, size_t errlen);
/* No-op for NULL. Stops the worker side if still up; a running server has returned already. */
void ps_fleet_destroy(struct ps_fleet *f);

bool ps_fleet_is_server(const struct ps_fleet *f);
bool ps_fleet_is_worker(const struct ps_fleet *f);
/* This node's index among its role (Paddle's trainer id / server index). */
unsigned ps_fleet_index(const struct ps_fleet *f);
/* The resolved cluster (role, endpoints, protocol, mode, knobs); valid until destroy. */
const struct ps_cluster *ps_fleet_cluster(const struct ps_fleet *f);
/* The last error line ("" when none). */
const char *ps_fleet_error(const struct ps_fleet *f);

/* ---- server role ---- */

/*
 * Paddle's init_server: the tables this server keeps (copied), and optionally a checkpoint to
 * start from (restore) and one to write at shutdown (ckpt); both may be NULL and are copied.
 * -EINVAL on a worker fleet or with no tables.
 */
int ps_fleet_init_server(struct ps_fleet *f, const struct ps_model_tables *tables);
int ps_fleet_set_checkpoints(struct ps_fleet *f, const char *ckpt, const char *restore);
/*
 * Paddle's run_server: serves until a "shutdown" control command (wharf-ctl, or
 * ps_fleet_stop_servers from a worker) or SIGINT/SIGTERM, then drains and checkpoints.
 * Blocks. 0 when it stopped cleanly.
 */
int ps_fleet_run_server(struct ps_fleet *f);

/* ---- worker role ---- */

/*
 * Paddle's init_worker: the client and the network for these tables (the same ones the
 * servers keep; they size the message buffers), then waits for every server as Paddle does
 * ("not ready" once per retry with the endpoints, -ETIMEDOUT after the wait timeout) and
 * connects. -EINVAL on a server fleet, -EALREADY when already initialised.
 */
int ps_fleet_init_worker(struct ps_fleet *f, const struct ps_model_tables *tables);
/*
 * The worker's PS client and the io for ps_client_*_wait (both owned by the fleet, valid
 * until ps_fleet_stop_worker). NULL before ps_fleet_init_worker succeeded.
 */
struct ps_client *ps_fleet_client(struct ps_fleet *f, const struct ps_client_io **io);
/*
 * After a ps_client_*_wait call failed with rc: 0 when the caller should retry it (the
 * servers are back and every unacknowledged push was resent exactly once), else the error to
 * give up with (-ECANCELED after a signal; a server's refusal is returned as is).
 */
int ps_fleet_recover(struct ps_fleet *f, int rc);
/*
 * Sync mode: the barrier of step, retried across reconnects. step is the one the worker is
 * in (ps_client_step of ps_fleet_client's client: where the servers were at its start).
 */
int ps_fleet_barrier(struct ps_fleet *f, uint64_t step);
/* SIGINT/SIGTERM arrived (checked at most every 100 ms; false before init_worker). */
bool ps_fleet_signalled(struct ps_fleet *f);
/* Paddle's stop_worker: closes this worker's connections and client. No-op when not up. */
void ps_fleet_stop_worker(struct ps_fleet *f);
/*
 * Tells every server to shut down (control command "shutdown", timeout_ms each): what a
 * job's last worker does when the job is over. Returns the first failure, after trying all.
 */
int ps_fleet_stop_servers(struct ps_fleet *f, int timeout_ms);

#endif
