/*
 * ps_obs.c — a PS node's counters through DPDK telemetry (see ps_obs.h for the paths).
 *
 * Call chain: ps_net_srv.c per request -> ps_obs_count (plain adds on the serving thread);
 * ps_net_poll -> ps_obs_publish (every 100 ms) -> snapshot into the slot; telemetry
 * thread -> ps_*_cmd -> psobs_read -> copy out.
 *
 * The serving thread never waits for the telemetry thread and vice versa: the slot is a
 * seqlock (transport/tl_seqlock.h). Table row counts are read by the serving thread,
 * which owns every shard while the node runs one handler (ps_net_run.c); with more lanes
 * the row counts are read from other lanes' shards while they run (a recent value, not an
 * exact one). Connections are lane 0's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "ps_core/ps_net_pvt.h"
#include "ps_core/ps_obs.h"
#include "transport/tl_seqlock.h"

struct psobs_table {
	uint32_t id, kind, dim;
	uint64_t rows, bytes;
	uint64_t pulls, pushes, dense_pulls, dense_pushes, geo_pulls, keys_pulled, keys_pushed,
		errors;
};

struct psobs_conn {
	uint32_t id, kind, server;
	int32_t up;
	uint64_t reqs, replies, errors, bytes_in, bytes_out;
};

struct psobs_snap {
	uint64_t requests, errors, dropped, inflight, deferred, control, barriers, saves, hellos,
		unknown;
	uint64_t data_ops_remote, ctl_ops_remote;
	uint32_t server_id, n_servers, mode, n_tables, n_shards, nconns, shown, lanes;
	struct ps_barrier_stats bar;
	uint64_t fenced, wrong_step;           /* summed over the shards */
	char late[RTE_TEL_MAX_STRING_LEN];     /* workers the last barrier timeout found missing */
	struct psobs_table t[PS_OBS_TABLES];
	struct ps_table_stats mem[PS_OBS_TABLES]; /* the memory policies' counters */
	struct ps_shard_stats sh[PS_OBS_SHARDS];
	struct psobs_conn c[PS_OBS_CONNS];
};

struct ps_obs {
	_Atomic uint32_t seq;
	_Atomic int in_use;
	struct ps_server *ps;
	const struct ps_server_config *cfg;
	uint64_t next_us;
	uint32_t lanes;
	/*
	 * Live op counters, one block per serving lane, each written by its lane's thread only
	 * (relaxed atomic stores of plain adds) and summed at publish (relaxed loads).
	 */
	struct psobs_live {
		struct psobs_table t[PS_OBS_TABLES];
		uint64_t barriers, saves, hellos, unknown;
	} live[PS_OBS_LANES];
	struct psobs_snap snap;
};

/* A counter of one lane's block: written by that lane only, read by the publisher. */
#define LIVE_ADD(x, v) __atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (v), \
					__ATOMIC_RELAXED)
#define LIVE_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

_Static_assert(PS_OBS_TABLES >= PS_MODEL_MAX_TABLES, "every table of a model is counted");

static struct ps_obs psobs_slot;
static _Atomic int psobs_registered;

static int psobs_read(struct psobs_snap *out)
{
	struct ps_obs *o = &psobs_slot;

	return tl_seq_read(&o->seq, &o->in_use, out, &o->snap, sizeof(*out));
}

/* The parameter as an unsigned number, or -1 when missing or not a number. */
static long long psobs_param(const char *params)
{
	char *end;
	long long v;

	if (params == NULL || *params < '0' || *params > '9')
		return -1;
	v = strtoll(params, &end, 10);
	return *end == '\0' ? v : -1;
}

/* Runs fill on a fresh copy of the snapshot (too big for the telemetry thread's stack). */
static int psobs_with_snap(const char *params, struct rte_tel_data *d,
			   int (*fill)(const struct psobs_snap *, long long, struct rte_tel_data *))
{
	struct psobs_snap *s = malloc(sizeof(*s));
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = psobs_read(s);
	if (rc == 0)
		rc = fill(s, psobs_param(params), d);
	free(s);
	return rc;
}

#define DICT_U64(d, s, f) rte_tel_data_add_dict_u64(d, #f, (s)->f)

static int fill_server(const struct psobs_snap *s, long long p, struct rte_tel_data *d)
{
	(void)p;
	rte_tel_data_start_dict(d);
	DICT_U64(d, s, server_id); DICT_U64(d, s, n_servers); DICT_U64(d, s, mode);
	DICT_U64(d, s, requests); DICT_U64(d, s, errors); DICT_U64(d, s, dropped);
	DICT_U64(d, s, inflight); DICT_U64(d, s, deferred); DICT_U64(d, s, control);
	DICT_U64(d, s, barriers);
	DICT_U64(d, s, saves); DICT_U64(d, s, hellos); DICT_U64(d, s, unknown); DICT_U64(d, s, n_tables);
	DICT_U64(d, s, n_shards); DICT_U64(d, s, nconns); DICT_U64(d, s, lanes);
	DICT_U64(d, s, data_ops_remote); DICT_U64(d, s, ctl_ops_remote);
	rte_tel_data_add_dict_u64(d, "epoch", s->bar.epoch);
	rte_tel_data_add_dict_u64(d, "barrier_step", s->bar.step);
	rte_tel_data_add_dict_u64(d, "barrier_arrived", s->bar.arrived);
	rte_tel_data_add_dict_u64(d, "barrier_gone", s->bar.gone);
	rte_tel_data_add_dict_u64(d, "barrier_waited_ms", s->bar.waited_ms);
	rte_tel_data_add_dict_u64(d, "barrier_timeouts", s->bar.timeouts);
	rte_tel_data_add_dict_u64(d, "barrier_dropped", s->bar.dropped);
	rte_tel_data_add_dict_u64(d, "barrier_late_step", s->bar.late_step);
	rte_tel_data_add_dict_string(d, "barrier_late", s->late);
	DICT_U64(d, s, fenced); DICT_U64(d, s, wrong_step);
	return 0;
}

static int fill_tables(const struct psobs_snap *s, long long p, struct rte_tel_data *d)
{
	(void)p;
	rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
	for (uint32_t i = 0; i < s->n_tables; i++)
		rte_tel_data_add_array_int(d, (int)s->t[i].id);
	return 0;
}

static int fill_table(const struct psobs_snap *s, long long p, struct rte_tel_data *d)
{
	for (uint32_t i = 0; i < s->n_tables; i++) {
		const struct psobs_table *t = &s->t[i];

		if ((long long)t->id != p)
			continue;
		rte_tel_data_start_dict(d);
		DICT_U64(d, t, id);
		rte_tel_data_add_dict_string(d, "kind", t->kind == PS_TABLE_DENSE ? "dense" : "sparse");
		DICT_U64(d, t, dim); DICT_U64(d, t, rows); DICT_U64(d, t, bytes);
		DICT_U64(d, t, pulls); DICT_U64(d, t, pushes); DICT_U64(d, t, dense_pulls);
		DICT_U64(d, t, dense_pushes); DICT_U64(d, t, geo_pulls);
		DICT_U64(d, t, keys_pulled); DICT_U64(d, t, keys_pushed); DICT_U64(d, t, errors);
		DICT_U64(d, &s->mem[i], rows_cap); DICT_U64(d, &s->mem[i], rows_refused_cap);
		DICT_U64(d, &s->mem[i], admission_pending);
		DICT_U64(d, &s->mem[i], admission_admitted);
		DICT_U64(d, &s->mem[i], admission_dropped);
		DICT_U64(d, &s->mem[i], admission_expired); DICT_U64(d, &s->mem[i], evicted);
		return 0;
	}
	return -EINVAL;
}

static int fill_shard(const struct psobs_snap *s, long long p, struct rte_tel_data *d)
{
	const struct ps_shard_stats *sh;

	if (p < 0 || p >= (long long)s->n_shards)
		return -EINVAL;
	sh = &s->sh[p];
	rte_tel_data_start_dict(d);
	DICT_U64(d, sh, owner); DICT_U64(d, sh, pushes); DICT_U64(d, sh, pulls);
	DICT_U64(d, sh, keys); DICT_U64(d, sh, dup_pushes); DICT_U64(d, sh, failed_ops);
	DICT_U64(d, sh, cow_rows); DICT_U64(d, sh, nonfinite_rows); DICT_U64(d, sh, fenced);
	DICT_U64(d, sh, wrong_step);
	DICT_U64(d, sh, geo_log); DICT_U64(d, sh, geo_resyncs);
	return 0;
}

static int fill_conns(const struct psobs_snap *s, long long p, struct rte_tel_data *d)
{
	(void)p;
	rte_tel_data_start_dict(d);
	for (uint32_t k = 0; k < s->shown; k++) {
		const struct psobs_conn *c = &s->c[k];
		char name[32], v[RTE_TEL_MAX_STRING_LEN];

		snprintf(name, sizeof(name), "conn%u", c->id);
		snprintf(v, sizeof(v), "%s server=%u up=%d reqs=%" PRIu64 " replies=%" PRIu64
			 " errors=%" PRIu64 " bytes_in=%" PRIu64 " bytes_out=%" PRIu64,
			 c->kind == PS_NET_ACCEPTED ? "accepted" : "to_server", c->server, c->up, c->reqs,
			 c->replies, c->errors, c->bytes_in, c->bytes_out);
		rte_tel_data_add_dict_string(d, name, v);
	}
	return 0;
}

#undef DICT_U64

static int ps_server_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return psobs_with_snap(params, d, fill_server);
}

static int ps_tables_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return psobs_with_snap(params, d, fill_tables);
}

static int ps_table_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return psobs_with_snap(params, d, fill_table);
}

static int ps_shard_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return psobs_with_snap(params, d, fill_shard);
}

static int ps_conns_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return psobs_with_snap(params, d, fill_conns);
}

static void psobs_register_cmds(void)
{
	int expected = 0;

	/* Once per process; a failure only means no telemetry (e.g. --no-telemetry). */
	if (!atomic_compare_exchange_strong(&psobs_registered, &expected, 1))
		return;
	rte_telemetry_register_cmd("/wharf/ps/server", ps_server_cmd,
				   "PS node counters. No parameters");
	rte_telemetry_register_cmd("/wharf/ps/tables", ps_tables_cmd,
				   "Ids of the PS tables served. No parameters");
	rte_telemetry_register_cmd("/wharf/ps/table", ps_table_cmd,
				   "Counters of one PS table. Parameter: table id");
	rte_telemetry_register_cmd("/wharf/ps/shard", ps_shard_cmd,
				   "Op counters of one PS shard. Parameter: shard index");
	rte_telemetry_register_cmd("/wharf/ps/conns", ps_conns_cmd,
				   "PS connections with their counters. No parameters");
}

int ps_obs_create(struct ps_server *ps, const struct ps_server_config *cfg,
		    struct ps_obs **out)
{
	struct ps_obs *o = &psobs_slot;
	int free_slot = 0;

	if (cfg->n_tables > PS_OBS_TABLES || cfg->n_shards > PS_OBS_SHARDS ||
	    cfg->n_lcores > PS_OBS_LANES)
		return -EINVAL;
	if (!atomic_compare_exchange_strong(&o->in_use, &free_slot, 1))
		return -EBUSY;
	psobs_register_cmds();
	o->ps = ps;
	o->cfg = cfg;
	o->next_us = 0;
	o->lanes = cfg->n_lcores;
	memset(o->live, 0, sizeof(o->live));
	for (uint32_t l = 0; l < PS_OBS_LANES; l++)
		for (uint32_t i = 0; i < cfg->n_tables; i++) {
			o->live[l].t[i].id = cfg->tables[i].id;
			o->live[l].t[i].kind = cfg->tables[i].kind;
			o->live[l].t[i].dim = cfg->tables[i].dim;
		}
	*out = o;
	return 0;
}

void ps_obs_destroy(struct ps_obs *o)
{
	if (o != NULL)
		atomic_store_explicit(&o->in_use, 0, memory_order_release);
}

static struct psobs_table *psobs_table(struct psobs_live *lv, uint32_t n, uint32_t table_id)
{
	/* Table ids are places in the model (ps_model_tables): no search per request. */
	if (table_id < n && lv->t[table_id].id == table_id)
		return &lv->t[table_id];
	for (uint32_t i = 0; i < n; i++)
		if (lv->t[i].id == table_id)
			return &lv->t[i];
	return NULL;
}

void ps_obs_count(struct ps_obs *o, uint32_t lane, uint32_t type, uint32_t table_id,
		    uint32_t keys, int rc)
{
	struct psobs_live *lv;
	struct psobs_table *t;

	if (o == NULL || lane >= PS_OBS_LANES)
		return;
	lv = &o->live[lane];
	if (type == PS_T_BARRIER || type == PS_T_SAVE || type == PS_T_HELLO) {
		LIVE_ADD(lv->barriers, type == PS_T_BARRIER);
		LIVE_ADD(lv->saves, type == PS_T_SAVE);
		LIVE_ADD(lv->hellos, type == PS_T_HELLO);
		return;
	}
	t = psobs_table(lv, o->cfg->n_tables, table_id);
	if (t == NULL) {
		LIVE_ADD(lv->unknown, 1);
		return;
	}
	if (rc != 0) {
		LIVE_ADD(t->errors, 1);
		return;
	}
	switch (type) {
	case PS_T_PULL: LIVE_ADD(t->pulls, 1); LIVE_ADD(t->keys_pulled, keys); break;
	case PS_T_PUSH: LIVE_ADD(t->pushes, 1); LIVE_ADD(t->keys_pushed, keys); break;
	case PS_T_PUSH_PULL:
		LIVE_ADD(t->pushes, 1); LIVE_ADD(t->pulls, 1);
		LIVE_ADD(t->keys_pushed, keys); LIVE_ADD(t->keys_pulled, keys);
		break;
	case PS_T_DENSE_PULL: LIVE_ADD(t->dense_pulls, 1); LIVE_ADD(t->keys_pulled, keys); break;
	case PS_T_DENSE_PUSH: LIVE_ADD(t->dense_pushes, 1); LIVE_ADD(t->keys_pushed, keys); break;
	case PS_T_GEO_PULL: LIVE_ADD(t->geo_pulls, 1); break;
	default: LIVE_ADD(lv->unknown, 1); break;
	}
}

/* Table i summed over the lanes. */
static void live_table_sum(const struct ps_obs *o, uint32_t i, struct psobs_table *out)
{
	*out = o->live[0].t[i];
	memset(&out->pulls, 0, sizeof(*out) - offsetof(struct psobs_table, pulls));
	for (uint32_t l = 0; l < o->lanes; l++) {
		const struct psobs_table *t = &o->live[l].t[i];
		out->pulls += LIVE_GET(t->pulls);
		out->pushes += LIVE_GET(t->pushes);
		out->dense_pulls += LIVE_GET(t->dense_pulls);
		out->dense_pushes += LIVE_GET(t->dense_pushes);
		out->geo_pulls += LIVE_GET(t->geo_pulls);
		out->keys_pulled += LIVE_GET(t->keys_pulled);
		out->keys_pushed += LIVE_GET(t->keys_pushed);
		out->errors += LIVE_GET(t->errors);
	}
}

/* The barrier, and the workers its last timeout found missing as "3,5" (cut to fit). */
static void psobs_late(struct ps_obs *o, struct psobs_snap *s)
{
	uint32_t ids[64], n, i;
	size_t off = 0;

	n = (uint32_t)ps_server_barrier_stats(o->ps, &s->bar, ids, 64);
	s->late[0] = '\0';
	for (i = 0; i < n && off + 12 < sizeof(s->late); i++)
		off += (size_t)snprintf(s->late + off, sizeof(s->late) - off, "%s%u", i ? "," : "",
					ids[i]);
	if (i < s->bar.late_n && off + 4 < sizeof(s->late))
		snprintf(s->late + off, sizeof(s->late) - off, ",...");
}

static void psobs_fill(struct ps_obs *o, const struct ps_net *n, struct psobs_snap *s)
{
	struct ps_table_stats ts;
	uint32_t shown = 0, nconns = 0;

	struct ps_net_lane_sum ls;

	ps_net_lanes_sum(n, &ls);
	s->requests = ls.reqs;
	s->errors = ls.errors;
	s->dropped = ls.dropped;
	s->inflight = ls.inflight;
	s->deferred = ls.deferred;
	s->data_ops_remote = ls.data_ops_remote;
	s->ctl_ops_remote = ls.ctl_ops_remote;
	s->control = n->ctl_reqs;
	s->lanes = o->lanes;
	s->barriers = s->saves = s->hellos = s->unknown = 0;
	for (uint32_t l = 0; l < o->lanes; l++) {
		s->barriers += LIVE_GET(o->live[l].barriers);
		s->saves += LIVE_GET(o->live[l].saves);
		s->hellos += LIVE_GET(o->live[l].hellos);
		s->unknown += LIVE_GET(o->live[l].unknown);
	}
	s->server_id = o->cfg->server_id;
	s->n_servers = o->cfg->n_servers;
	s->mode = (uint32_t)o->cfg->mode;
	s->n_tables = o->cfg->n_tables;
	s->n_shards = o->cfg->n_shards;
	for (uint32_t i = 0; i < s->n_tables; i++) {
		live_table_sum(o, i, &s->t[i]);
		if (ps_server_table_stats(o->ps, s->t[i].id, &ts) == 0) {
			s->t[i].rows = ts.rows;
			s->t[i].bytes = ts.bytes;
			s->mem[i] = ts;
		}
	}
	s->fenced = s->wrong_step = 0;
	for (uint32_t i = 0; i < s->n_shards; i++) {
		ps_server_shard_stats(o->ps, i, &s->sh[i]);
		s->fenced += s->sh[i].fenced;
		s->wrong_step += s->sh[i].wrong_step;
	}
	psobs_late(o, s);
	for (const struct ps_net_conn *c = n->conns; c != NULL; c = c->next, nconns++) {
		if (shown == PS_OBS_CONNS)
			continue;
		s->c[shown] = (struct psobs_conn){ .id = c->id, .kind = c->kind, .server = c->server,
					   .up = c->up, .reqs = c->reqs, .replies = c->replies,
					   .errors = c->errors, .bytes_in = c->bytes_in,
					   .bytes_out = c->bytes_out };
		shown++;
	}
	s->nconns = nconns;
	s->shown = shown;
}

void ps_obs_publish(struct ps_obs *o, const struct ps_net *n, uint64_t now_us, int force)
{
	uint32_t seq;

	if (o == NULL || (!force && now_us < o->next_us))
		return;
	o->next_us = now_us + 100000u;
	seq = tl_seq_write_begin(&o->seq);
	psobs_fill(o, n, &o->snap);
	tl_seq_write_end(&o->seq, seq);
}
