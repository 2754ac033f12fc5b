/*
 * ps_mem.c — a sparse table's memory policies (ps.h, struct ps_table_config): the cap on
 * rows (max_rows, max_bytes), admission by push count, and eviction of rows not pushed for
 * evict_after steps. Called by ps_shard.c on the shard's owner lcore: op_push ->
 * ps_mem_push_rows (which keys get rows) -> apply_row -> ps_mem_stamp; op_sync_step ->
 * ps_mem_step. Below: ps_table.c (find, insert, remove, the free list).
 *
 * Everything here is a function of the table's state and the pushes in the order the shard
 * applies them: a key's admission counts pushes (never pulls, which are not logged), a step
 * is a sync step or a push, and eviction runs at fixed clock values (every ceil(evict_after
 * / 8) steps), not on a timer. So ps_recover, replaying the write-ahead log over a
 * checkpoint that holds each row's age and each counter (ps_ckpt.c), rebuilds the table a
 * crash interrupted: the same keys refused, admitted and evicted at the same pushes.
 *
 * Every change to a row, or to an admission counter, is preceded by ps_cow, so a checkpoint
 * in progress keeps the cut's contents; a row taken from the free list included.
 */
#include <errno.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

static uint64_t evict_period(const struct ps_table *t)
{
	return (t->cfg.evict_after + 7) / 8;
}

/* Drops the rows (si = ti) or counters (si = n_tables + ti) of t older than evict_after. */
static uint64_t sweep(struct ps_shard *sh, uint32_t si, struct ps_table *t, uint64_t clock,
		      uint64_t ttl)
{
	uint64_t dropped = 0;
	uint32_t r;

	for (r = 0; r < t->n_rows; r++) {
		uint64_t u = *ps_row_upd(t, r);
		if (u == PS_ROW_FREE || u >= clock || clock - u <= ttl)
			continue;
		ps_cow(sh, si, t, r);
		ps_table_remove(t, r);
		dropped++;
	}
	return dropped;
}

static void evict_if_due(struct ps_shard *sh, uint32_t ti)
{
	struct ps_table *t = &sh->tables[ti];
	uint64_t n;

	if (!t->cfg.evict_after || t->clock % evict_period(t) != 0)
		return;
	n = sweep(sh, ti, t, t->clock, t->cfg.evict_after);
	if (n)
		ps_count(&t->n_evicted, n);
	if (t->pend && (n = sweep(sh, sh->n_tables + ti, t->pend, t->clock, t->cfg.evict_after)))
		ps_count(&t->n_expired, n);
}

/* One step of table ti on this shard. */
static void tick(struct ps_shard *sh, uint32_t ti)
{
	struct ps_table *t = &sh->tables[ti];

	t->clock++;
	if (t->pend)
		t->pend->clock = t->clock;
	evict_if_due(sh, ti);
}

void ps_mem_step(struct ps_shard *sh)
{
	for (uint32_t ti = 0; ti < sh->n_tables; ti++)
		if (sh->tables[ti].cfg.kind == PS_TABLE_SPARSE)
			tick(sh, ti);
}

/* A stamp no counter of t holds: one per push op, so a key repeated in a push counts once. */
static uint32_t next_stamp(struct ps_table *t)
{
	struct ps_table *p = t->pend;

	if (++t->pend_mark == 0) {
		/* After 2^32 pushes: clear every stamp once (no snapshot needs them: not saved). */
		for (uint32_t r = 0; r < p->n_rows; r++)
			ps_row_meta(p, r)->mark = 0;
		t->pend_mark = 1;
	}
	return t->pend_mark;
}

/*
 * Counts this push of key (once per push op) and says whether it has been pushed
 * admit_after times. A key without a counter gets one if there is room; without room it
 * is not counted (its gradient dropped like any key not admitted yet).
 */
static bool admit(struct ps_shard *sh, uint32_t ti, uint64_t key, uint32_t stamp)
{
	struct ps_table *t = &sh->tables[ti], *p = t->pend;
	uint32_t si = sh->n_tables + ti, r = ps_table_find(p, key);
	struct ps_row_meta *m;

	if (r == PS_ROW_NONE) {
		if (ps_table_live(p) >= p->cap)
			return false;
		ps_cow(sh, si, p, ps_table_next_row(p));
		r = ps_table_insert(p, key); /* room reserved by ps_mem_push_rows */
	}
	m = ps_row_meta(p, r);
	if (m->mark != stamp) {
		ps_cow(sh, si, p, r);
		m->mark = stamp;
		if (m->version < t->cfg.admit_after)
			m->version++;
		*ps_row_upd(p, r) = t->clock;
	}
	return m->version >= t->cfg.admit_after;
}

/* The key's counter goes once the key is a row. */
static void admitted(struct ps_shard *sh, uint32_t ti, uint64_t key)
{
	struct ps_table *t = &sh->tables[ti], *p = t->pend;
	uint32_t r = ps_table_find(p, key);

	ps_cow(sh, sh->n_tables + ti, p, r);
	ps_table_remove(p, r);
	ps_count(&t->n_admitted, 1);
}

static uint32_t room(const struct ps_table *t, uint32_t n)
{
	uint32_t live = ps_table_live(t), left = t->cap > live ? t->cap - live : 0;

	return n < left ? n : left;
}

/* The first refusal of a shard's table is logged; the counter and the replies say the rest. */
static void refused_first(const struct ps_shard *sh, const struct ps_table *t)
{
	if (atomic_load_explicit(&t->n_refused_cap, memory_order_relaxed) == 0)
		PS_LOG(WARNING, "table %u shard %u: at its cap of %u rows (max_rows %llu, max_bytes "
		       "%llu): keys new to it are refused, their gradients dropped",
		       t->cfg.id, sh->id, t->cap, (unsigned long long)t->cfg.max_rows,
		       (unsigned long long)t->cfg.max_bytes);
}

int ps_mem_push_rows(struct ps_shard *sh, uint32_t ti, const struct ps_op *op, uint32_t *rows,
		     uint32_t *full)
{
	struct ps_table *t = &sh->tables[ti];
	uint32_t i, n = op->n, stamp = 0, dropped = 0;
	struct ps_keys k;
	int rc;

	if (sh->srv->cfg.mode != PS_MODE_SYNC)
		tick(sh, ti);
	/* Room for what may be created, within the caps: nothing below can fail. */
	if ((rc = ps_table_reserve(t, room(t, n))) < 0 ||
	    (t->pend && (rc = ps_table_reserve(t->pend, room(t->pend, n))) < 0))
		return rc;
	ps_keys_view(&k, op->v, op->keys_off, op->idx, op->v->hdr.key_count);
	ps_table_find_batch(t, &k, n, rows);
	if (t->pend)
		stamp = next_stamp(t);
	*full = 0;
	for (i = 0; i < n; i++) {
		uint64_t key;
		if (rows[i] != PS_ROW_NONE)
			continue;
		key = ps_key_at(&k, i);
		/* A key repeated in this push may have become a row at its first place. */
		if ((rows[i] = ps_table_find(t, key)) != PS_ROW_NONE)
			continue;
		if (t->pend && !admit(sh, ti, key, stamp)) {
			dropped++;
			continue;
		}
		if (ps_table_live(t) >= t->cap) {
			refused_first(sh, t);
			ps_count(&t->n_refused_cap, 1);
			(*full)++;
			continue; /* an admitted key keeps its counter: a row once there is room */
		}
		if (t->pend)
			admitted(sh, ti, key);
		ps_cow(sh, ti, t, ps_table_next_row(t));
		rows[i] = ps_table_insert(t, key);
	}
	if (dropped)
		ps_count(&t->n_adm_dropped, dropped);
	return 0;
}
