/*
 * tr.h — wharf-train internals: the options, the worker's network handle and the model loops
 * (tr_dense.c: Fashion-MNIST softmax/MLP, and
 * tr_deep.c: the deep MLP of many small tensors; tr_ctr.c: CTR LR/FM and the exactly-once counter;
 * tr_geo_ledger.c: the counter in GEO mode).
 *
 * Call chain: main (role from ps_config_load) -> ps_net_run_server (server role) |
 *   tr_dense_run / tr_ctr_run / tr_count_run (worker role) -> tr_net_* -> ps_net + ps_client.
 */
#ifndef WHARF_TR_H
#define WHARF_TR_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "apps/common/wc.h"
#include "ps_core/ps_net.h"

struct tr_opts {
	enum wc_ps_model model;
	unsigned epochs, batch, hidden, layers, fm_k, train_limit, test_limit, ctr_samples;
	unsigned decay_epochs, count_pushes, count_delay_us, seed, ctr_tail;
	float lr;
	const char *ckpt, *restore, *data_dir;
};

/* The worker's side of the cluster: client + glue, with recovery after a server restart. */
struct tr_net {
	const struct ps_cluster *cl;
	const struct tr_opts *o;
	struct ps_client *pc;
	struct ps_net *n;
	const sigset_t *sigs;   /* SIGINT, SIGTERM: blocked by main, taken by tr_net_stop_asked */
	/* The stop, latched: the signal taken (0: none), or a "shutdown" control command. */
	int stop_sig;
	bool stop_cmd;
	const char *given_up;   /* what the stop gave up ("the wait at the barrier"), or NULL */
	double next_sig_look;   /* tr_now() of the next look at the pending signals */
	double stop_t;          /* tr_now() when the stop was seen */
	char stop_at[160];      /* where the loop stopped, for main's log line */
	struct ps_client_io bio; /* ps_net_io with a poll that gives up on a stop (the barrier) */
	char err[512];
	uint64_t full_pushes;   /* pushes a server answered "table full" (-EDQUOT) */
};

int tr_net_open(struct tr_net *t, const struct ps_cluster *cl, const struct tr_opts *o,
		const struct ps_model_tables *mt, int eal_argc, char **eal_argv,
		const sigset_t *sigs);
void tr_net_close(struct tr_net *t);
/*
 * After a failed network call: 0 when the caller should retry (the servers are back and
 * unacknowledged pushes were resent), else the error to give up with (message printed).
 */
int tr_net_recover(struct tr_net *t, int rc);
/*
 * The graceful stop. Was this worker asked to stop: SIGINT or SIGTERM (main blocks them, so
 * no handler runs: they stay pending until taken here with sigtimedwait, looked for at most
 * every 10 ms) or a "shutdown" command on its control endpoint? Latched: once true, true for
 * good. The model loops ask it at every step, push or round boundary, where no request is in
 * flight, and then return -ECANCELED after tr_net_stopped_at; main logs the stop, closes the
 * connections and exits 0. A stop found by tr_net_recover (a call failed, or a shutdown
 * command ended its wait for the answer) gives that call's request up (given_up): a push it
 * held was numbered, so the servers apply it once or never.
 */
bool tr_net_stop_asked(struct tr_net *t);
/* "SIGTERM", "SIGINT" or "shutdown" once asked, else NULL. */
const char *tr_net_stop_name(const struct tr_net *t);
/* Whether rc is a loop's end on the stop (-ECANCELED once asked), not a cancelled request. */
static inline bool tr_net_stopped(const struct tr_net *t, int rc)
{
	return rc == -ECANCELED && tr_net_stop_name(t) != NULL;
}
/* Where the loop stopped ("after 512 acknowledged pushes"), for the log line. -ECANCELED. */
int tr_net_stopped_at(struct tr_net *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * A model loop stopped after `step` steps: its JSON line (geo_synced: its local GEO change
 * went out first), then tr_net_stopped_at with `synced` added to the place when it did.
 * -ECANCELED.
 */
int tr_net_steps_stopped(struct tr_net *t, uint64_t step, bool geo_synced, const char *synced);
/* Sleeps us microseconds; SIGINT/SIGTERM end it early and ask the stop. */
void tr_net_pause(struct tr_net *t, unsigned us);
/*
 * A push answered -EDQUOT: applied, but keys new to sparse table `table` were refused by its
 * memory cap on a server (their gradients dropped). Counted and reported (the first, then
 * every 1000th); training goes on. Returns 0.
 */
int tr_net_table_full(struct tr_net *t, uint32_t table);
/* The sync barrier of step, retried across reconnects; given up (-ECANCELED) on a stop. */
int tr_net_barrier(struct tr_net *t, uint64_t step);
/*
 * Sync mode: the step to start at, where the servers are (0 on a new job; a worker
 * restarted under its old id resumes there and skips the steps before). 0 in other modes.
 */
uint64_t tr_net_resume(struct tr_net *t);
/* A sparse pull asked again across reconnects; a push resent by the recovery until acked. */
int tr_net_pull(struct tr_net *t, uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n,
		float *out);
int tr_net_push(struct tr_net *t, uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n,
		const float *grads);
/*
 * GEO: the rows others changed since this worker's last GEO pull of table, each handed to
 * fn; pulls again while a server says more, and after a reconnect (a reply lost with its
 * connection is served again: fn must take rows as values, wc_geo_recv).
 */
int tr_net_geo_pull(struct tr_net *t, uint32_t table, uint32_t dim, ps_geo_row_fn *fn, void *arg);
double tr_now(void);
/* One progress line: "\r" redraw on a terminal, a plain line per quarter epoch otherwise. */
void tr_progress(unsigned epoch, unsigned epochs, uint64_t done, uint64_t total, double loss,
		 double acc, double sps, bool final);

int tr_dense_run(struct tr_net *t, const struct ps_model_tables *mt);

/*
 * The deep MLP (tr_deep.c): layers hidden layers of width hid, each weight and bias a dense
 * table; every call but create/destroy/tables runs on the trainer's thread, no allocation.
 */
#define TR_DEEP_MAX_LAYERS 64u
struct tr_deep;
/* 0, -EINVAL (layers outside 2..TR_DEEP_MAX_LAYERS, a zero size) or -ENOMEM. */
int tr_deep_create(uint32_t in, uint32_t hid, uint32_t layers, uint32_t classes,
		   uint32_t max_batch, struct tr_deep **out);
void tr_deep_destroy(struct tr_deep *m);
/* Its tensors in table order (W1, b1, .., WL, bL, Wout, bout); returns their count. */
unsigned tr_deep_tensors(const struct tr_deep *m, const struct wc_tensor_desc **td);
size_t tr_deep_param_count(const struct tr_deep *m);
/* As wc_dense_loss_grad: mean cross-entropy of n samples, its gradient into grad (if any). */
int tr_deep_loss_grad(struct tr_deep *m, const float *params, const float *x, const uint8_t *y,
		      uint32_t n, float *grad, double *loss, uint32_t *correct);
int tr_deep_evaluate(struct tr_deep *m, const float *params, const float *x, const uint8_t *y,
		     uint32_t n, double *accuracy, double *loss);
/*
 * The PS tables of the Fashion-MNIST deep MLP (both roles build them: the digest must
 * agree): SGD at lr; weights He-uniform (residual branches scaled by 1/sqrt(layers)),
 * biases zero. out is initialized here; -EINVAL with a sentence in err for a bad size.
 */
int tr_deep_tables(uint32_t hid, uint32_t layers, float lr, struct ps_model_tables *out,
		   char *err, size_t errlen);
int tr_ctr_run(struct tr_net *t, const struct ps_model_tables *mt);
int tr_count_run(struct tr_net *t);
int tr_geo_ledger_run(struct tr_net *t);

#endif
