/*
 * ps_shard.c — one shard: its tables, exactly-once state, sync/GEO bookkeeping and the
 * copy-on-write snapshot. Everything here runs on the shard's owner lcore only, called
 * from ps_server.c (ps_handler_run_op directly, or ps_handler_poll after an SPSC ring), so
 * nothing is locked and nothing does an atomic read-modify-write.
 *
 * A push op: fence (the sender's incarnation is the one its worker id said hello with) ->
 * sync step and exactly-once checks (a push of another step than the shard's is refused,
 * never mixed into a later step, unless it is a resend of one applied) -> reserve (the
 * only step that can fail, before any change) -> rows of the keys (created by the push; on
 * a table with memory policies, ps_mem.c decides which keys get one and the others are left
 * out) -> duplicate keys merged -> per row:
 * copy-on-write if a snapshot is in progress, then by mode: optimizer (async), add to the
 * step's sum (sync), add the delta and log the row (GEO). Each row's new floats are
 * computed into the shard's scratch row first and kept only when all are finite: a row
 * whose update would not be leaves the op as it was, counted (op->refused, n_nonfinite),
 * while the op's other rows are applied.
 *
 * GEO (struct ps_geo_log): a pull op first commits what the worker acknowledged, then reads
 * from its committed position (a full resync when the log no longer holds it) and leaves
 * where it ended pending under the reply's id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

int ps_shard_init(struct ps_shard *sh, struct ps_server *srv, uint32_t id, uint32_t owner, int node)
{
	const struct ps_server_config *c = &srv->cfg;
	uint32_t t, nt = c->n_tables, nw = c->n_workers;
	int rc = -ENOMEM;

	memset(sh, 0, sizeof(*sh));
	sh->id = id;
	sh->owner = owner;
	sh->srv = srv;
	sh->node = node;
	sh->n_tables = nt;
	sh->tables = calloc(nt, sizeof(*sh->tables));
	sh->last_seq = calloc(nw, sizeof(*sh->last_seq));
	sh->inc = calloc(nw, sizeof(*sh->inc));
	sh->pstep1 = calloc(nw, sizeof(*sh->pstep1));
	sh->pfirst = calloc(nw, sizeof(*sh->pfirst));
	sh->touched = calloc(nt, sizeof(*sh->touched));
	sh->n_touched = calloc(nt, sizeof(uint32_t));
	sh->cap_touched = calloc(nt, sizeof(uint32_t));
	sh->geo = calloc((size_t)nw * nt, sizeof(*sh->geo));
	sh->glog = calloc(nt, sizeof(*sh->glog));
	sh->rows = ps_mem_alloc((size_t)srv->max_keys * sizeof(uint32_t), node);
	sh->chain = ps_mem_alloc(2 * (size_t)srv->max_keys * sizeof(uint32_t), node);
	sh->pos = ps_mem_alloc((size_t)srv->max_keys * sizeof(uint32_t), node);
	sh->merge = ps_mem_alloc((size_t)srv->max_dim * sizeof(float), node);
	for (t = 0; t < nt; t++) {
		uint32_t n = srv->tcfg[t].dim + ps_optim_state_floats(srv->tcfg[t].optim, srv->tcfg[t].dim);
		if (n > sh->scratch_n)
			sh->scratch_n = n;
	}
	sh->scratch = ps_mem_alloc((size_t)sh->scratch_n * sizeof(float), node);
	if (!sh->tables || !sh->last_seq || !sh->inc || !sh->pstep1 || !sh->pfirst || !sh->touched ||
	    !sh->n_touched || !sh->cap_touched || !sh->geo || !sh->glog || !sh->rows ||
	    !sh->chain || !sh->pos || !sh->merge || !sh->scratch)
		goto out_fini;
	for (t = 0; t < nt; t++) {
		const struct ps_table_config *tc = &srv->tcfg[t];
		uint64_t first = 0, last = 0;
		if (tc->kind == PS_TABLE_DENSE && ps_dense_shard(tc->id, c->n_shards) == id)
			ps_dense_range(tc->dense_rows, c->server_id, c->n_servers, &first, &last);
		rc = ps_table_init(&sh->tables[t], tc, c->mode == PS_MODE_SYNC, first, last - first, node,
				   c->n_shards);
		if (rc < 0)
			goto out_fini;
	}
	ps_shard_geo_reset(sh);
	return 0;
out_fini:
	ps_shard_fini(sh);
	return rc < 0 ? rc : -ENOMEM;
}

void ps_shard_fini(struct ps_shard *sh)
{
	uint32_t t;
	const struct ps_server *srv = sh->srv;

	if (sh->tables)
		for (t = 0; t < sh->n_tables; t++)
			ps_table_fini(&sh->tables[t]);
	if (sh->touched)
		for (t = 0; t < sh->n_tables; t++)
			free(sh->touched[t]);
	free(sh->tables);
	free(sh->last_seq);
	free(sh->inc);
	free(sh->pstep1);
	free(sh->pfirst);
	free(sh->touched);
	free(sh->n_touched);
	free(sh->cap_touched);
	free(sh->geo);
	for (t = 0; sh->glog && t < sh->n_tables; t++)
		free(sh->glog[t].e);
	free(sh->glog);
	ps_mem_free(sh->rows, (size_t)srv->max_keys * sizeof(uint32_t), sh->node);
	ps_mem_free(sh->chain, 2 * (size_t)srv->max_keys * sizeof(uint32_t), sh->node);
	ps_mem_free(sh->pos, (size_t)srv->max_keys * sizeof(uint32_t), sh->node);
	ps_mem_free(sh->merge, (size_t)srv->max_dim * sizeof(float), sh->node);
	ps_mem_free(sh->scratch, (size_t)sh->scratch_n * sizeof(float), sh->node);
	memset(sh, 0, sizeof(*sh));
}

/* ---------------------------------------------------------------- snapshot */

void ps_snap_copy(struct ps_snap_table *st, const struct ps_table *t, uint32_t r)
{
	memcpy(st->rows + (size_t)r * t->stride, ps_row(t, r), t->stride);
	st->copied[r >> 6] |= 1ull << (r & 63);
}

static inline void cow(struct ps_shard *sh, uint32_t ti, uint32_t r)
{
	ps_cow(sh, ti, &sh->tables[ti], r);
}

/* The table behind snapshot table i: a table, or a table's admission counters (or NULL). */
static const struct ps_table *snap_src(const struct ps_shard *sh, uint32_t i)
{
	return i < sh->n_tables ? &sh->tables[i] : sh->tables[i - sh->n_tables].pend;
}

void ps_snap_free(struct ps_snap *s)
{
	uint32_t t;

	if (!s)
		return;
	for (t = 0; t < s->n_tables && s->t; t++) {
		free(s->t[t].rows);
		free(s->t[t].copied);
	}
	free(s->t);
	free(s->last_seq);
	free(s->inc);
	free(s->step_first);
	free(s->bar_seen);
	for (t = 0; s->geo && t < s->n_geo; t++)
		free(s->geo[t].e);
	free(s->geo);
	free(s->geo_seen);
	free(s);
}

/* GEO state of the cut: each table's log (bounded: copied whole) and committed positions. */
static int snap_geo(struct ps_shard *sh, struct ps_snap *s)
{
	uint32_t t, w, nt = sh->n_tables, nw = sh->srv->cfg.n_workers;

	s->geo = calloc(nt, sizeof(*s->geo));
	s->geo_seen = malloc((size_t)nw * nt * sizeof(*s->geo_seen));
	if (!s->geo || !s->geo_seen)
		return -ENOMEM;
	s->n_geo = nt;
	for (t = 0; t < nt; t++) {
		const struct ps_geo_log *g = &sh->glog[t];
		s->geo[t].e = malloc((size_t)g->n * sizeof(*g->e) + 1);
		if (!s->geo[t].e)
			return -ENOMEM;
		memcpy(s->geo[t].e, g->e, (size_t)g->n * sizeof(*g->e));
		s->geo[t].n = g->n;
		s->geo[t].base = g->base;
		s->geo[t].max_pos = g->max_pos;
	}
	for (w = 0; w < nw * nt; w++)
		s->geo_seen[w] = sh->geo[w].seen;
	return 0;
}

static int snap_begin(struct ps_shard *sh, struct ps_snap *s)
{
	uint32_t t, w, nw = sh->srv->cfg.n_workers;

	if (sh->snap)
		return -EBUSY;
	s->t = calloc(2 * (size_t)sh->n_tables, sizeof(*s->t));
	if (!s->t)
		return -ENOMEM;
	s->n_tables = 2 * sh->n_tables;
	s->last_seq = malloc(sh->srv->cfg.n_workers * sizeof(*s->last_seq));
	if (!s->last_seq)
		return -ENOMEM;
	memcpy(s->last_seq, sh->last_seq, sh->srv->cfg.n_workers * sizeof(*s->last_seq));
	s->inc = malloc(nw * sizeof(*s->inc));
	s->step_first = malloc(nw * sizeof(*s->step_first));
	if (!s->inc || !s->step_first)
		return -ENOMEM;
	memcpy(s->inc, sh->inc, nw * sizeof(*s->inc));
	for (w = 0; w < nw; w++)
		s->step_first[w] = sh->pstep1[w] == sh->step + 1 ? sh->pfirst[w] : 0;
	s->sync_step = sh->sync_step;
	if (sh->id == 0) {
		/* Shard 0's owner holds the barrier (ps_barrier_run): its state of the cut too. */
		s->bar_step = sh->srv->bar_step;
		s->bar_seen = malloc(sh->srv->cfg.n_workers);
		if (!s->bar_seen)
			return -ENOMEM;
		memcpy(s->bar_seen, sh->srv->bar_seen, sh->srv->cfg.n_workers);
	}
	if (sh->srv->cfg.mode == PS_MODE_GEO && snap_geo(sh, s) < 0)
		return -ENOMEM;
	for (t = 0; t < s->n_tables; t++) {
		const struct ps_table *tb = snap_src(sh, t);
		struct ps_snap_table *st = &s->t[t];
		if (!tb)
			continue; /* no admission counters: nothing to copy */
		st->n_rows = tb->n_rows;
		st->clock = tb->clock;
		st->rows = malloc((size_t)tb->n_rows * tb->stride + 1);
		st->copied = calloc((tb->n_rows + 63) / 64 + 1, sizeof(uint64_t));
		if (!st->rows || !st->copied)
			return -ENOMEM; /* the requester frees s */
	}
	s->cur_table = 0;
	s->cursor = 0;
	sh->snap = s;
	return 0;
}

void ps_shard_snap_step(struct ps_shard *sh, uint32_t budget)
{
	struct ps_snap *s = sh->snap;

	if (!s)
		return;
	while (budget > 0 && s->cur_table < s->n_tables) {
		struct ps_snap_table *st = &s->t[s->cur_table];
		const struct ps_table *t = snap_src(sh, s->cur_table);
		if (s->cursor >= st->n_rows) {
			s->cur_table++;
			s->cursor = 0;
			continue;
		}
		if (!(st->copied[s->cursor >> 6] & (1ull << (s->cursor & 63))))
			ps_snap_copy(st, t, s->cursor);
		s->cursor++;
		budget--;
	}
	if (s->cur_table == s->n_tables) {
		sh->snap = NULL;
		/* Partner: the acquire load in ps_save before it reads the copies. */
		atomic_store_explicit(&s->ready, 1, memory_order_release);
	}
}

/* ---------------------------------------------------------------- apply */

static void sync_touch(struct ps_shard *sh, uint32_t ti, uint32_t r)
{
	struct ps_table *t = &sh->tables[ti];
	struct ps_row_meta *m = ps_row_meta(t, r);

	if (m->version == sh->sync_step + 1)
		return;
	m->version = sh->sync_step + 1;
	memset(ps_row_val(t, r) + t->acc_off, 0, t->cfg.dim * sizeof(float));
	/* Capacity was ensured by sync_reserve before the op changed anything. */
	sh->touched[ti][sh->n_touched[ti]++] = r;
}

static int sync_reserve(struct ps_shard *sh, uint32_t ti, uint32_t n)
{
	uint64_t need = (uint64_t)sh->n_touched[ti] + n;
	uint32_t cap = sh->cap_touched[ti] ? sh->cap_touched[ti] : 1024;
	uint32_t *p;

	if (need <= sh->cap_touched[ti])
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(sh->touched[ti], (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	sh->touched[ti] = p;
	sh->cap_touched[ti] = cap;
	return 0;
}

int ps_shard_sync_restore(struct ps_shard *sh, uint32_t ti, uint32_t r, const uint8_t *acc)
{
	struct ps_table *t = &sh->tables[ti];
	int rc = sync_reserve(sh, ti, 1);

	if (rc < 0)
		return rc;
	if (ps_row_meta(t, r)->version == sh->sync_step + 1)
		return -EEXIST; /* the same row twice */
	sync_touch(sh, ti, r);
	memcpy(ps_row_val(t, r) + t->acc_off, acc, t->cfg.dim * sizeof(float));
	return 0;
}

static inline void count(_Atomic uint64_t *c, uint64_t n)
{
	ps_count(c, n);
}

/* ---------------------------------------------------------------- GEO log */

/* Drops the log's first drop entries (callers make it a large part: amortised O(1)). */
static void geo_drop(struct ps_geo_log *g, uint32_t drop)
{
	memmove(g->e, g->e + drop, (size_t)(g->n - drop) * sizeof(*g->e));
	g->n -= drop;
	g->base += drop;
}

/*
 * Room for n more entries of table ti's log. A log that would pass geo_log_max loses its
 * oldest quarter (at least what makes room) whoever still needed it: those workers get a
 * full resync at their next pull. That can happen before the op fails later (memory): it
 * changes where workers read, never what they get.
 */
static int geo_reserve(struct ps_shard *sh, uint32_t ti, uint32_t n)
{
	struct ps_geo_log *g = &sh->glog[ti];
	uint32_t max = sh->srv->geo_log_max, cap, *p;
	uint64_t drop;

	if ((uint64_t)g->n + n > max) {
		drop = max / 4;
		if ((uint64_t)g->n + n - drop > max)
			drop = (uint64_t)g->n + n - max;
		geo_drop(g, drop < g->n ? (uint32_t)drop : g->n);
	}
	if ((uint64_t)g->n + n <= g->cap)
		return 0;
	cap = g->cap ? g->cap : 1024;
	while (cap < g->n + n)
		cap *= 2; /* n <= max_keys <= geo_log_max <= 2^30: no overflow */
	if (cap > max)
		cap = max;
	p = realloc(g->e, (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	g->e = p;
	g->cap = cap;
	return 0;
}

/*
 * Position of row r's latest log entry, or UINT64_MAX when the log no longer holds it. The
 * row keeps the low 32 bits of that position + 1; the log is shorter than 2^32, so they
 * name one entry, and the entry must be the row's (else an old version aliases).
 */
static uint64_t geo_entry_of(const struct ps_geo_log *g, const struct ps_row_meta *m, uint32_t r)
{
	uint64_t end = g->base + g->n;
	uint32_t back;

	if (m->version == 0 || g->n == 0)
		return UINT64_MAX;
	back = (uint32_t)(end - 1) - (m->version - 1);
	if (back >= g->n || g->e[g->n - 1 - back] != r)
		return UINT64_MAX;
	return end - 1 - back;
}

/* Entry i of the log is its row's latest. */
static inline bool geo_latest(const struct ps_geo_log *g, const struct ps_row_meta *m, uint32_t i)
{
	return m->version == (uint32_t)(g->base + i + 1);
}

/* A GEO change of row r: log it unless its latest entry is still ahead of every reply served. */
static inline void geo_note(struct ps_geo_log *g, struct ps_row_meta *m, uint32_t r)
{
	uint64_t p = geo_entry_of(g, m, r);

	if (p != UINT64_MAX && p >= g->max_pos)
		return;
	/* Capacity was ensured by geo_reserve before the op changed anything. */
	m->version = (uint32_t)(g->base + g->n + 1);
	g->e[g->n++] = r;
}

static void geo_reset_log(struct ps_geo_log *g, uint64_t base)
{
	g->n = 0;
	g->base = base;
	g->max_pos = base;
}

static void geo_reset_workers(struct ps_shard *sh)
{
	uint32_t i, n = sh->srv->cfg.n_workers * sh->n_tables;

	for (i = 0; i < n; i++) {
		sh->geo[i].seen = (struct ps_geo_pos){ 0, PS_GEO_NO_RESYNC };
		sh->geo[i].pend = sh->geo[i].seen;
		sh->geo[i].pend_id = 0;
	}
}

void ps_shard_geo_reset(struct ps_shard *sh)
{
	for (uint32_t t = 0; t < sh->n_tables; t++)
		geo_reset_log(&sh->glog[t], 0);
	geo_reset_workers(sh);
}

void ps_shard_geo_resync_all(struct ps_shard *sh)
{
	/* Every position (0) is then before the log's start (1). */
	for (uint32_t t = 0; t < sh->n_tables; t++)
		geo_reset_log(&sh->glog[t], 1);
	geo_reset_workers(sh);
}

int ps_shard_geo_restore(struct ps_shard *sh, uint32_t ti, uint64_t base, uint64_t max_pos,
			 const uint32_t *rows, uint32_t n)
{
	struct ps_geo_log *g = &sh->glog[ti];
	const struct ps_table *t = &sh->tables[ti];
	int rc;

	if (n > sh->srv->geo_log_max)
		return -EINVAL;
	geo_reset_log(g, base);
	if ((rc = geo_reserve(sh, ti, n)) < 0)
		return rc;
	memcpy(g->e, rows, (size_t)n * sizeof(*rows));
	g->n = n;
	g->max_pos = max_pos;
	for (uint32_t i = 0; i < n; i++)
		if (rows[i] != PS_GEO_HOLE)
			ps_row_meta(t, rows[i])->version = (uint32_t)(base + i + 1);
	return 0;
}

/* dst[j] + g[j] for j < d into scratch; copied to dst only when every sum is finite. */
static inline bool add_finite(struct ps_shard *sh, float *dst, const uint8_t *g, uint32_t d)
{
	uint32_t j;
	float f;

	for (j = 0; j < d; j++) {
		memcpy(&f, g + 4 * j, 4);
		sh->scratch[j] = dst[j] + f;
	}
	if (PS_UNLIKELY(!ps_all_finite(sh->scratch, d)))
		return false;
	memcpy(dst, sh->scratch, d * sizeof(float));
	return true;
}

/* One row's update by mode; false (the row as it was) when its result would not be finite. */
static inline bool apply_row(struct ps_shard *sh, uint32_t ti, uint32_t r, const uint8_t *g)
{
	struct ps_table *t = &sh->tables[ti];
	float *w = ps_row_val(t, r);
	bool ok = true;

	cow(sh, ti, r);
	ps_mem_stamp(t, r);
	switch (sh->srv->cfg.mode) {
	case PS_MODE_ASYNC:
		ok = ps_optim_apply(t, w, g, sh->scratch);
		break;
	case PS_MODE_SYNC:
		sync_touch(sh, ti, r);
		ok = add_finite(sh, w + t->acc_off, g, t->cfg.dim);
		break;
	case PS_MODE_GEO:
		ok = add_finite(sh, w, g, t->cfg.dim);
		if (ok && t->cfg.kind == PS_TABLE_SPARSE) /* only sparse tables are GEO-pulled */
			geo_note(&sh->glog[ti], ps_row_meta(t, r), r);
		break;
	}
	if (PS_UNLIKELY(!ok))
		count(&sh->n_nonfinite, 1);
	return ok;
}

/* Chains for a push of n keys (struct ps_dups) in sh->chain, stamped past the last push's. */
static struct ps_dups dups_begin(struct ps_shard *sh, uint32_t n)
{
	struct ps_dups d = { .nxt = sh->chain, .tail = sh->chain + n };
	uint32_t i, r;

	if (sh->push_mark == 0 || sh->push_mark > UINT32_MAX - n - 1) {
		/* Stamps wrapped (after 2^32 keys pushed): clear every stamp once. */
		for (i = 0; i < sh->n_tables; i++)
			for (r = 0; r < sh->tables[i].n_rows; r++)
				ps_row_meta(&sh->tables[i], r)->mark = 0;
		sh->push_mark = 1;
	}
	d.base = sh->push_mark;
	sh->push_mark += n;
	return d;
}

/* A push's repeated keys among rows already found (the policed path: see ps_mem.c). */
static bool find_dups(struct ps_shard *sh, struct ps_table *t, const uint32_t *rows, uint32_t n)
{
	struct ps_dups d = dups_begin(sh, n);
	uint32_t i;

	for (i = 0; i < n; i++)
		ps_dups_note(&d, ps_row_meta(t, rows[i]), i, n);
	return d.any;
}

/*
 * Row r takes gradient g. An async push on a shard with no snapshot open and no update
 * stamps (the common case) goes straight to the optimizer; anything else by apply_row.
 */
static inline bool apply_one(struct ps_shard *sh, uint32_t ti, struct ps_table *t, bool plain,
			     uint32_t r, const uint8_t *g)
{
	if (PS_LIKELY(plain)) {
		if (PS_LIKELY(ps_optim_apply_inl(t, ps_row_val(t, r), g, sh->scratch)))
			return true;
		count(&sh->n_nonfinite, 1);
		return false;
	}
	return apply_row(sh, ti, r, g);
}

/*
 * apply_one's plain SGD (see apply_op) of row r from gradient record p, which is not in the
 * piece g stands in: read in place from the pieces it lies in (a row of dim 1024 lies in
 * three or four MTU-sized ones; only a float split between two is put together), copied
 * into tmp only when it lies in more than PS_SPAN_PIECES parts.
 */
static bool sgd_spanning(struct ps_shard *sh, struct ps_table *t, struct ps_span *g, uint32_t r,
			 uint32_t p, float *tmp)
{
	struct ps_parts parts;
	bool ok = ps_span_pieces(g, p, &parts) > 0
			  ? ps_sgd_pieces(t, ps_row_val(t, r), &parts)
			  : ps_sgd_inplace(t, ps_row_val(t, r), ps_span_at(g, p, tmp));

	if (PS_UNLIKELY(!ok))
		count(&sh->n_nonfinite, 1);
	return ok;
}

/* sum += gradient record p of d floats, read in place as sgd_spanning reads one. */
static void add_record(struct ps_span *g, float *sum, uint32_t p, uint32_t d, float *tmp)
{
	struct ps_parts parts;
	uint32_t k, j;

	if (!ps_span_here(g, p) && ps_span_pieces(g, p, &parts) > 0) {
		for (k = 0, j = 0; k < parts.n; j += parts.len[k++] / 4)
			ps_add_bytes(sum + j, parts.at[k], parts.len[k] / 4);
		return;
	}
	ps_add_bytes(sum, ps_span_at(g, p, tmp), d);
}

/*
 * The op's gradients into its rows (all of them rows: none PS_ROW_NONE); returns the rows
 * refused. dups: the push has repeats, chained in sh->chain (struct ps_dups): each first
 * occurrence gets the sum of its chain, in request order.
 */
static uint32_t apply_op(struct ps_shard *sh, struct ps_table *t, const struct ps_op *op,
			 const uint32_t *rows, bool dups)
{
	uint32_t d = t->cfg.dim, i, k, n = op->n, *nxt = sh->chain, *tail = nxt + n;
	uint32_t ti = op->table, refused = 0;
	bool plain = sh->srv->cfg.mode == PS_MODE_ASYNC && !sh->snap && !t->upd_off;
	bool sgd = plain && t->cfg.optim == PS_OPT_SGD;
	const uint32_t *idx = op->idx;
	float tmp[PS_MAX_DIM];
	struct ps_span g; /* the gradients, in place */

	ps_span_init(&g, op->v, op->vals_off, d * 4);
	for (i = 0; i < n; i++) {
		uint32_t p = idx ? idx[i] : i;
		const uint8_t *gp;
		if (dups && tail[i] == UINT32_MAX)
			continue; /* a repeat: in its first occurrence's sum */
		if (dups && nxt[i] != UINT32_MAX) {
			float *sum = sh->merge;
			if ((gp = ps_span_at(&g, p, sum)) != (const uint8_t *)sum)
				memcpy(sum, gp, d * sizeof(float));
			for (k = nxt[i]; k != UINT32_MAX; k = nxt[k])
				add_record(&g, sum, idx ? idx[k] : k, d, tmp);
			gp = (const uint8_t *)sum;
		} else if (sgd && !ps_span_here(&g, p)) {
			refused += !sgd_spanning(sh, t, &g, rows[i], p, tmp);
			continue;
		} else {
			gp = ps_span_at(&g, p, tmp);
		}
		refused += !apply_one(sh, ti, t, plain, rows[i], gp);
	}
	return refused;
}

/* The op's keys, read in place from its request. */
static void op_keys(const struct ps_op *op, struct ps_keys *k)
{
	ps_keys_view(k, op->v, op->keys_off, op->idx, op->v->hdr.key_count);
}


/*
 * Values of the op's rows into op->out (the reply's memory: written once, there); a key
 * without a row gets its initializer's values. Rows are prefetched a few ahead.
 */
static void fill_out(const struct ps_table *t, const struct ps_op *op, const uint32_t *rows)
{
	uint32_t i, d = t->cfg.dim;
	struct ps_keys k;

	op_keys(op, &k);
	for (i = 0; i < op->n; i++) {
		uint32_t p = op->idx ? op->idx[i] : i;
		if (PS_UNLIKELY(rows[i] == PS_ROW_NONE)) /* sparse only: the initializer's values */
			ps_table_init_values(t, ps_key_at(&k, i), op->out + (size_t)p * d);
		else
			memcpy(op->out + (size_t)p * d, ps_row_val(t, rows[i]), d * sizeof(float));
	}
}

/*
 * Rows of the op's keys (sparse) or row range (dense). create: keys without a row get one
 * (may fail -ENOMEM before any is made); else they are PS_ROW_NONE. dups (a push's, with
 * create; or NULL): its repeats are chained there as their rows are found.
 */
static int op_rows(struct ps_shard *sh, struct ps_table *t, const struct ps_op *op,
		   uint32_t *rows, bool create, struct ps_dups *dups)
{
	struct ps_keys k;
	uint32_t i;
	int rc;

	if (t->cfg.kind == PS_TABLE_DENSE) {
		for (i = 0; i < op->n; i++)
			rows[i] = (uint32_t)(op->dense_first - t->dense_first) + i;
		return 0; /* a dense range has no repeats */
	}
	if (create && (rc = ps_table_reserve(t, op->n)) < 0)
		return rc;
	if (dups != NULL)
		*dups = dups_begin(sh, op->n);
	op_keys(op, &k);
	if (create)
		ps_table_lookup_batch(t, &k, op->n, rows, dups);
	else
		ps_table_find_batch(t, &k, op->n, rows);
	return 0;
}

/*
 * A policed push: the keys that got no row leave the op (their values out, for a push-pull,
 * are the initializer's); sub takes the rest, with rows[] compacted to match.
 */
static void drop_rowless(struct ps_shard *sh, const struct ps_table *t, const struct ps_op *op,
			 uint32_t *rows, struct ps_op *sub)
{
	uint32_t i, m = 0, d = t->cfg.dim;
	struct ps_keys k;

	op_keys(op, &k);
	*sub = *op;
	sub->idx = sh->pos;
	for (i = 0; i < op->n; i++) {
		uint32_t p = op->idx[i];
		if (rows[i] == PS_ROW_NONE) {
			if (op->out)
				ps_table_init_values(t, ps_key_at(&k, i), op->out + (size_t)p * d);
			continue;
		}
		sh->pos[m] = p;
		rows[m++] = rows[i];
	}
	sub->n = m;
}

/*
 * Whether op's sender may act for its worker id here: its incarnation is the one the id
 * said hello with. 0, or -ESTALE (an older process: fenced) / -EPROTO (a newer one that did
 * not say hello), with the registered one in op->have.
 */
static int fence(const struct ps_shard *sh, struct ps_op *op)
{
	uint64_t reg = sh->inc[op->worker];

	if (PS_LIKELY(op->inc == reg))
		return 0;
	op->have = reg;
	op->err_kind = PS_ERR_FENCED;
	return op->inc < reg ? -ESTALE : -EPROTO;
}

/* A sync push of another step than the shard's: refused, nothing applied. */
static int wrong_step(struct ps_shard *sh, struct ps_op *op, int rc)
{
	count(&sh->n_wrong_step, 1);
	op->have = sh->step;
	op->err_kind = PS_ERR_WRONG_STEP;
	return rc;
}

static int op_push(struct ps_shard *sh, struct ps_op *op)
{
	struct ps_table *t = &sh->tables[op->table];
	uint32_t *rows = sh->rows, w = op->worker;
	struct ps_op sub;
	int rc;

	op->refused = 0;
	op->full = 0;
	if (PS_UNLIKELY((rc = fence(sh, op)) < 0)) {
		count(&sh->n_fenced, 1);
		return rc;
	}
	/*
	 * Sync: a push of a step not begun is refused before anything (no push is a resend of
	 * a later step); one of a closed step only when it is not a resend (a restarted worker
	 * repeats the pushes of the step its predecessor was in: answered as duplicates).
	 */
	if (sh->srv->cfg.mode == PS_MODE_SYNC && PS_UNLIKELY(op->step > sh->step))
		return wrong_step(sh, op, -EINVAL);
	if (op->seq <= sh->last_seq[w]) {
		if (!op->out)
			return 1; /* already applied: acknowledge only */
		rc = op_rows(sh, t, op, rows, false, NULL); /* a push-pull still answers with values */
		if (rc == 0)
			fill_out(t, op, rows);
		return rc < 0 ? rc : 1;
	}
	if (sh->srv->cfg.mode == PS_MODE_SYNC && PS_UNLIKELY(op->step < sh->step))
		return wrong_step(sh, op, -ESTALE); /* the step closed without it */
	if (sh->srv->cfg.mode == PS_MODE_SYNC && (rc = sync_reserve(sh, op->table, op->n)) < 0)
		return rc;
	if (sh->srv->cfg.mode == PS_MODE_GEO && t->cfg.kind == PS_TABLE_SPARSE &&
	    (rc = geo_reserve(sh, op->table, op->n)) < 0)
		return rc;
	if (!ps_mem_policed(t)) {
		struct ps_dups dups = { .any = false };
		if ((rc = op_rows(sh, t, op, rows, true, &dups)) < 0)
			return rc;
		op->refused = apply_op(sh, t, op, rows, dups.any);
		if (op->out)
			fill_out(t, op, rows);
	} else {
		if ((rc = ps_mem_push_rows(sh, op->table, op, rows, &op->full)) < 0)
			return rc;
		drop_rowless(sh, t, op, rows, &sub);
		op->refused = apply_op(sh, t, &sub, rows, find_dups(sh, t, rows, sub.n));
		if (op->out)
			fill_out(t, &sub, rows);
	}
	sh->last_seq[w] = op->seq;
	/* Where this worker's pushes of the step began: a restart of it numbers from there. */
	if (sh->srv->cfg.mode == PS_MODE_SYNC && sh->pstep1[w] != sh->step + 1) {
		sh->pstep1[w] = sh->step + 1;
		sh->pfirst[w] = op->seq;
	}
	return 0;
}

static int op_pull(struct ps_shard *sh, struct ps_op *op)
{
	struct ps_table *t = &sh->tables[op->table];
	int rc = op_rows(sh, t, op, sh->rows, t->cfg.pull_inserts, NULL);

	if (rc == 0)
		fill_out(t, op, sh->rows);
	return rc;
}

static void op_sync_step(struct ps_shard *sh)
{
	uint32_t ti, i;

	for (ti = 0; ti < sh->n_tables; ti++) {
		struct ps_table *t = &sh->tables[ti];
		for (i = 0; i < sh->n_touched[ti]; i++) {
			uint32_t r = sh->touched[ti][i];
			float *w = ps_row_val(t, r);
			cow(sh, ti, r);
			/* A sum whose step would not be finite leaves the row as it was. */
			if (PS_UNLIKELY(!ps_optim_apply(t, w, (const uint8_t *)(w + t->acc_off),
							sh->scratch)))
				count(&sh->n_nonfinite, 1);
		}
		sh->n_touched[ti] = 0;
	}
	sh->sync_step++;
	ps_mem_step(sh);
	sh->step++;
}

/*
 * Drops the log prefix every worker's committed position has passed, when that is a large
 * part. A position before the log's start needs nothing of it (that worker resyncs).
 */
static void geo_trim(struct ps_shard *sh, uint32_t ti)
{
	struct ps_geo_log *g = &sh->glog[ti];
	uint64_t end = g->base + g->n, min = end, drop;
	uint32_t w, nw = sh->srv->cfg.n_workers;

	for (w = 0; w < nw; w++) {
		uint64_t p = sh->geo[w * sh->n_tables + ti].seen.pos;
		if (p >= g->base && p < min)
			min = p;
	}
	drop = min - g->base;
	if (drop >= 1024 && drop >= g->n / 2)
		geo_drop(g, (uint32_t)drop);
}

static inline void geo_emit(const struct ps_table *t, struct ps_op *op, uint32_t r, size_t rec)
{
	uint8_t *o = op->geo_out + op->geo_n * rec;

	memcpy(o, &ps_row_meta(t, r)->key, 8);
	memcpy(o + 8, ps_row_val(t, r), rec - 8);
	op->geo_n++;
}

/* Where this reply ended waits for the worker's acknowledgement; served that far. */
static void geo_pend(struct ps_geo_log *g, struct ps_geo_worker *gw, struct ps_geo_pos at,
		     uint64_t id)
{
	gw->pend = at;
	gw->pend_id = id;
	if (at.pos > g->max_pos)
		g->max_pos = at.pos;
}

/*
 * GEO pull: first, if op->geo_ack names the reply pending for this worker, its end becomes
 * the worker's committed position (then the log is trimmed). Then (op->geo_out set) records
 * (u64 key, dim f32) of the rows changed since that position, at most geo_cap (then returns
 * 1: more), and where they end pending under op->geo_id. A position the log no longer holds
 * starts a full resync: every row of the table, then the log from its end at that moment
 * (max_pos moves there, so a row changed after it was sent is logged again).
 */
static int op_geo_pull(struct ps_shard *sh, struct ps_op *op)
{
	const struct ps_table *t = &sh->tables[op->table];
	struct ps_geo_log *g = &sh->glog[op->table];
	struct ps_geo_worker *gw = &sh->geo[op->worker * sh->n_tables + op->table];
	size_t rec = 8 + (size_t)t->cfg.dim * 4;
	struct ps_geo_pos at;
	uint32_t i;
	int rc;

	/* An older process of this worker id must not move the position its successor reads. */
	if ((rc = fence(sh, op)) < 0)
		return rc;
	if (op->geo_ack != 0 && op->geo_ack == gw->pend_id) {
		gw->seen = gw->pend;
		geo_trim(sh, op->table);
	}
	gw->pend_id = 0;
	op->geo_n = 0;
	if (!op->geo_out)
		return 0;
	at = gw->seen;
	if (at.pos < g->base) {
		at = (struct ps_geo_pos){ g->base + g->n, 0 };
		count(&sh->n_geo_resync, 1);
	}
	if (at.row != PS_GEO_NO_RESYNC) {
		if (at.pos > g->max_pos)
			g->max_pos = at.pos;
		for (; at.row < t->n_rows; at.row++) {
			if (ps_row_is_free(t, at.row))
				continue; /* evicted: on the free list */
			if (op->geo_n == op->geo_cap)
				goto out_full;
			geo_emit(t, op, at.row, rec);
		}
		at.row = PS_GEO_NO_RESYNC;
	}
	for (i = (uint32_t)(at.pos - g->base); i < g->n; i++) {
		uint32_t r = g->e[i];
		if (r == PS_GEO_HOLE || !geo_latest(g, ps_row_meta(t, r), i) || ps_row_is_free(t, r))
			continue; /* not the row's latest entry, or the row was evicted */
		if (op->geo_n == op->geo_cap) {
			at.pos = g->base + i;
			goto out_full;
		}
		geo_emit(t, op, r, rec);
	}
	at.pos = g->base + g->n;
	geo_pend(g, gw, at, op->geo_id);
	return 0;
out_full:
	geo_pend(g, gw, at, op->geo_id);
	return 1;
}

/*
 * PS_OP_HELLO: the worker's last applied sequence (op->seq), the first sequence it pushed in
 * the current sync step (op->dense_first, 0 none), shard 0 the barrier's step (op->step);
 * the fence: -ESTALE when op->inc is older than the registered incarnation (op->have), 1
 * when the hello changes something (a newer incarnation; on shard 0 also a left-out worker
 * coming back), else 0. PS_OP_HELLO_COMMIT makes that change (-ESTALE when a newer one came
 * first), then answers the same.
 */
static int op_hello(struct ps_shard *sh, struct ps_op *op)
{
	struct ps_server *s = sh->srv;
	uint32_t w = op->worker;
	bool change;

	if (op->inc < sh->inc[w]) {
		op->have = sh->inc[w];
		return -ESTALE;
	}
	if (op->kind == PS_OP_HELLO_COMMIT) {
		sh->inc[w] = op->inc;
		if (sh->id == 0 && s->bar_seen[w] == 2)
			ps_barrier_readmit(s, w);
	}
	change = op->inc > sh->inc[w] || (sh->id == 0 && s->bar_seen[w] == 2);
	op->seq = sh->last_seq[w];
	op->dense_first = sh->pstep1[w] == sh->step + 1 ? sh->pfirst[w] : 0;
	if (sh->id == 0)
		op->step = s->bar_step; /* shard 0's owner holds the barrier */
	return change;
}

static void account(struct ps_shard *sh, const struct ps_op *op)
{
	bool push = op->kind == PS_OP_PUSH || op->kind == PS_OP_DENSE_PUSH;

	if (push || op->kind == PS_OP_PULL || op->kind == PS_OP_DENSE_PULL) {
		count(push ? &sh->n_push : &sh->n_pull, 1);
		count(&sh->n_keys, op->n);
	}
	if (sh->srv->cfg.mode == PS_MODE_GEO && (push || op->kind == PS_OP_GEO_PULL)) {
		uint64_t n = 0;
		for (uint32_t t = 0; t < sh->n_tables; t++)
			n += sh->glog[t].n;
		atomic_store_explicit(&sh->n_geo_log, n, memory_order_relaxed);
	}
	if (push && op->status == 1) /* other ops' 1 means something else (done, more) */
		count(&sh->n_dup, 1);
	else if (op->status < 0)
		count(&sh->n_fail, 1);
	if (sh->cow_rows != atomic_load_explicit(&sh->n_cow, memory_order_relaxed))
		atomic_store_explicit(&sh->n_cow, sh->cow_rows, memory_order_relaxed);
}

void ps_shard_run(struct ps_shard *sh, struct ps_op *op)
{
	switch (op->kind) {
	case PS_OP_PULL:
	case PS_OP_DENSE_PULL:
		op->status = op_pull(sh, op);
		break;
	case PS_OP_PUSH:
	case PS_OP_DENSE_PUSH:
		op->status = op_push(sh, op);
		break;
	case PS_OP_SYNC_STEP:
		op_sync_step(sh);
		op->status = 0;
		break;
	case PS_OP_GEO_PULL:
		op->status = op_geo_pull(sh, op);
		break;
	case PS_OP_SNAP_BEGIN:
		op->status = snap_begin(sh, op->snap);
		break;
	case PS_OP_HELLO:
	case PS_OP_HELLO_COMMIT:
		op->status = op_hello(sh, op);
		break;
	case PS_OP_BARRIER:
	case PS_OP_BARRIER_ARRIVE:
	case PS_OP_BARRIER_CLAIM:
	case PS_OP_BARRIER_UNCLAIM:
	case PS_OP_BARRIER_DONE:
		if (op->kind == PS_OP_BARRIER && (op->status = fence(sh, op)) < 0)
			break; /* the barrier's fence is shard 0's */
		ps_barrier_run(sh->srv, op); /* shard 0 only: its owner holds the barrier */
		break;
	default:
		op->status = -EINVAL;
	}
	account(sh, op);
}
