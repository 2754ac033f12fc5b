/*
 * tr.h — wharf-train internals: the options, the worker's network handle and the model loops
 * (tr_dense.c: Fashion-MNIST softmax/MLP; tr_ctr.c: CTR LR/FM and the exactly-once counter;
 * tr_geo_ledger.c: the counter in GEO mode).
 *
 * Call chain: main (role from wc_config_load) -> wc_psnet_run_server (server role) |
 *   tr_dense_run / tr_ctr_run / tr_count_run (worker role) -> tr_net_* -> wc_psnet + ps_client.
 */
#ifndef WHARF_TR_H
#define WHARF_TR_H

#include <stdbool.h>
#include <stdint.h>

#include "apps/common/wc.h"
#include "apps/common/wc_psnet.h"

struct tr_opts {
	enum wc_ps_model model;
	unsigned epochs, batch, hidden, fm_k, train_limit, test_limit, ctr_samples;
	unsigned decay_epochs, count_pushes, count_delay_us, seed, ctr_tail;
	float lr;
	const char *ckpt, *restore, *data_dir;
};

/* The worker's side of the cluster: client + glue, with recovery after a server restart. */
struct tr_net {
	const struct wc_cluster *cl;
	const struct tr_opts *o;
	struct ps_client *pc;
	struct wc_psnet *n;
	const sigset_t *sigs;
	char err[512];
	uint64_t full_pushes;   /* pushes a server answered "table full" (-EDQUOT) */
};

int tr_net_open(struct tr_net *t, const struct wc_cluster *cl, const struct tr_opts *o,
		const struct wc_model_tables *mt, int eal_argc, char **eal_argv,
		const sigset_t *sigs);
void tr_net_close(struct tr_net *t);
/*
 * After a failed network call: 0 when the caller should retry (the servers are back and
 * unacknowledged pushes were resent), else the error to give up with (message printed).
 */
int tr_net_recover(struct tr_net *t, int rc);
/*
 * A push answered -EDQUOT: applied, but keys new to sparse table `table` were refused by its
 * memory cap on a server (their gradients dropped). Counted and reported (the first, then
 * every 1000th); training goes on. Returns 0.
 */
int tr_net_table_full(struct tr_net *t, uint32_t table);
/* The sync barrier of step, retried across reconnects. */
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

int tr_dense_run(struct tr_net *t, const struct wc_model_tables *mt);
int tr_ctr_run(struct tr_net *t, const struct wc_model_tables *mt);
int tr_count_run(struct tr_net *t);
int tr_geo_ledger_run(struct tr_net *t);

#endif
