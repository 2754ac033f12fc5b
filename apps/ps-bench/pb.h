/*
 * pb.h — wharf-ps-bench's own declarations, shared by main.c (options, tables, the JSON line)
 * and pb_run.c (the worker's timed phases with requests in flight).
 */
#ifndef WHARF_PB_H
#define WHARF_PB_H

#include <stdbool.h>
#include <stdint.h>

#include "ps_core/ps_fleet.h"
#include "apps/common/wc_model.h"

#define PB_MAX_LIST 8u      /* values of one list option (--batch 16,256) */
#define PB_MAX_INFLIGHT 64u /* --inflight */

enum pb_kind { PB_SPARSE = 0, PB_DENSE, PB_KINDS };
enum pb_op { PB_PULL = 0, PB_PUSH, PB_PUSH_PULL, PB_OPS };

extern const char *const pb_kind_name[PB_KINDS];
extern const char *const pb_op_name[PB_OPS];   /* as on the command line: "push-pull" */
extern const char *const pb_op_field[PB_OPS];  /* as in JSON field names: "push_pull" */

struct pb_opts {
	unsigned long long keys;
	unsigned dim, seconds, dense_rows;
	double start_at;
	const char *model_file, *table_name;
	bool dim_set;
	/* The sweep: every kind x batch x inflight x op, in that nesting, one timed phase each. */
	unsigned batch[PB_MAX_LIST], n_batch;
	unsigned inflight[PB_MAX_LIST], n_inflight;
	enum pb_op op[PB_OPS];
	unsigned n_op;
	enum pb_kind kind[PB_KINDS];
	unsigned n_kind;
	uint32_t table[PB_KINDS]; /* each kind's table id: 0 (or the model file's), dense 1 */
};

/* One timed phase's point and what it measured. */
struct pb_phase {
	enum pb_kind kind;
	enum pb_op op;
	unsigned batch, inflight;
	uint64_t reqs;
	double secs, p50_us, p99_us, lat_sum_us;
};

/*
 * The worker: init_worker, wait for --start-at, then every phase of the sweep into ph
 * (count: the sweep's size). 0, or -errno with the reason on stderr (-ECANCELED: stopped by
 * SIGINT or SIGTERM). *done: the phases finished, ph[0..*done), whatever it returns.
 */
int pb_worker_run(struct ps_fleet *f, const struct pb_opts *o, const struct ps_model_tables *mt,
		  struct pb_phase *ph, unsigned count, unsigned *done);
unsigned pb_sweep_size(const struct pb_opts *o);

#endif
