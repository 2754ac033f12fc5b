/*
 * ps_server.c — the server request handler. The network glue hands each received PS
 * message here (ps_handle) on the lcore that received it; this file validates the whole
 * request first (so a refused request changes nothing), splits its keys by shard
 * (h2(key) mod shards), runs each shard's part on the shard's owner — directly when that
 * is this lcore, else over the SPSC rte_ring from this lcore to the owner — and writes
 * the reply into the caller's storage.
 *
 * Below: ps_shard.c (apply), ps_table.c (rows). Beside: ps_ckpt.c (save/load).
 * Rings are rte_rings initialised on our own memory (rte_ring_init), so no EAL is needed.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_hash_crc.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "ps_core/ps_pvt.h"

DN_LOG_REGISTER(ps_logtype, "wharf.ps")

void ps_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

uint32_t ps_key_server(uint64_t key, uint32_t n_servers)
{
	return (uint32_t)(ps_mix64(key ^ PS_H1_SALT) % n_servers);
}

uint32_t ps_key_shard(uint64_t key, uint32_t n_shards)
{
	return ps_key_shard_inl(key, n_shards);
}

uint64_t ps_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 64 random bits: getrandom, or (no entropy yet) the clocks and the pid mixed. */
static uint64_t random64(void)
{
	struct timespec a, b;
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	clock_gettime(CLOCK_REALTIME, &a);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ps_mix64((uint64_t)a.tv_nsec ^ (uint64_t)a.tv_sec << 32 ^ ps_mix64((uint64_t)b.tv_nsec) ^
			(uint64_t)getpid() << 40);
}

uint64_t ps_incarnation_new(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) & ~0xffffull) |
	       (random64() & 0xffffull);
}

void ps_dense_range(uint64_t rows, uint32_t s, uint32_t n, uint64_t *first, uint64_t *last)
{
	*first = rows * s / n;
	*last = rows * (s + 1) / n;
}

int ps_server_table_index(const struct ps_server *s, uint32_t table_id)
{
	uint32_t i;

	/* Ids that are places (every model of ps_model_tables.c) are found without a search. */
	if (table_id < s->cfg.n_tables && s->tcfg[table_id].id == table_id)
		return (int)table_id;
	for (i = 0; i < s->cfg.n_tables; i++)
		if (s->tcfg[i].id == table_id)
			return (int)i;
	return -ENOENT;
}

/*
 * What the optimizer's arithmetic needs to stay defined on every finite gradient, zero
 * included: a positive learning rate; Adagrad and Adam a positive eps (0 with a zero
 * accumulator divides 0 by 0); Adagrad a non-negative initial accumulator (its square root);
 * Adam betas in [0, 1) (1 divides by 1 - beta^t = 0); FTRL beta, l1, l2 non-negative. Wider
 * policy (upper bounds) is the caller's: ps_model_table_check for the apps.
 */
static int check_optim(const struct ps_table_config *t, char *err, size_t errlen)
{
	const struct ps_optim_params *o = &t->op;
	static const char *const names[] = { "sgd", "adagrad", "adam", "ftrl" };
	const char *why = NULL;

	if (!isfinite(o->lr) || !isfinite(o->eps) || !isfinite(o->beta1) || !isfinite(o->beta2) ||
	    !isfinite(o->l1) || !isfinite(o->l2) || !isfinite(o->init_accum))
		why = "every optimizer parameter must be finite";
	else if (!(o->lr > 0))
		why = "lr must be > 0";
	else if ((t->optim == PS_OPT_ADAGRAD || t->optim == PS_OPT_ADAM) && !(o->eps > 0))
		why = "eps must be > 0";
	else if (t->optim == PS_OPT_ADAGRAD && !(o->init_accum >= 0))
		why = "init_accum must be >= 0";
	else if (t->optim == PS_OPT_ADAM && !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 &&
					      o->beta2 < 1))
		why = "beta1 and beta2 must be in [0, 1)";
	else if (t->optim == PS_OPT_FTRL && !(o->beta1 >= 0 && o->l1 >= 0 && o->l2 >= 0))
		why = "beta (beta1), l1 and l2 must be >= 0";
	if (!why)
		return 0;
	ps_errf(err, errlen, "table %u: %s: %s (lr %g eps %g beta1 %g beta2 %g l1 %g l2 %g "
		"init_accum %g)", t->id, names[t->optim], why, (double)o->lr, (double)o->eps,
		(double)o->beta1, (double)o->beta2, (double)o->l1, (double)o->l2,
		(double)o->init_accum);
	return -EINVAL;
}

static int check_table(const struct ps_table_config *t, char *err, size_t errlen)
{
	int rc;

	if (t->dim == 0 || t->dim > PS_MAX_DIM) {
		ps_errf(err, errlen, "table %u: dim %u outside 1..%u", t->id, t->dim, PS_MAX_DIM);
		return -EINVAL;
	}
	if (t->kind > PS_TABLE_DENSE || t->optim > PS_OPT_FTRL || t->init > PS_INIT_NORMAL) {
		ps_errf(err, errlen, "table %u: unknown kind, optimizer or initializer", t->id);
		return -EINVAL;
	}
	if ((rc = check_optim(t, err, errlen)) < 0)
		return rc;
	if (!isfinite(t->init_a) || !isfinite(t->init_b) ||
	    (t->init == PS_INIT_UNIFORM && !(t->init_a <= t->init_b)) ||
	    (t->init == PS_INIT_NORMAL && !(t->init_b >= 0))) {
		ps_errf(err, errlen, "table %u: initializer parameters %g, %g: finite, and uniform "
			"needs a <= b, normal a stddev b >= 0", t->id, (double)t->init_a,
			(double)t->init_b);
		return -EINVAL;
	}
	if (t->kind == PS_TABLE_DENSE && (t->dense_rows == 0 || t->dense_rows > UINT32_MAX / 2)) {
		ps_errf(err, errlen, "table %u: dense rows %llu outside 1..2^31", t->id,
		     (unsigned long long)t->dense_rows);
		return -EINVAL;
	}
	return 0;
}

/* Memory policies: sparse only, within range, each shard able to hold a row. */
static int check_mem(const struct ps_table_config *t, const struct ps_server_config *c, char *err,
		     size_t errlen)
{
	uint32_t rows, pend;
	bool any = t->max_rows || t->max_bytes || t->admit_after > 1 || t->evict_after;
	int rc;

	if (t->kind == PS_TABLE_DENSE && (any || t->admit_after || t->pull_inserts)) {
		ps_errf(err, errlen, "table %u: max_rows, max_bytes, admit_after, evict_after and "
			"pull_inserts are for sparse tables (a dense table holds all its rows)", t->id);
		return -EINVAL;
	}
	if (t->admit_after > PS_ADMIT_MAX || t->evict_after > PS_EVICT_MAX) {
		ps_errf(err, errlen, "table %u: admit_after %u (at most %u) or evict_after %llu (at "
			"most %llu) out of range", t->id, t->admit_after, PS_ADMIT_MAX,
			(unsigned long long)t->evict_after, (unsigned long long)PS_EVICT_MAX);
		return -EINVAL;
	}
	if (t->pull_inserts && any) {
		ps_errf(err, errlen, "table %u: pull_inserts makes rows from pulls, which the "
			"write-ahead log does not hold: not with max_rows, max_bytes, admit_after "
			"or evict_after", t->id);
		return -EINVAL;
	}
	if (t->kind == PS_TABLE_SPARSE &&
	    (rc = ps_table_caps(t, c->mode == PS_MODE_SYNC, c->n_shards, &rows, &pend, err,
				errlen)) < 0) {
		char why[200];
		snprintf(why, sizeof(why), "%s", err ? err : "");
		ps_errf(err, errlen, "table %u: %s", t->id, why);
		return rc;
	}
	return 0;
}

static int check_config(const struct ps_server_config *c, char *err, size_t errlen)
{
	uint32_t i, j;
	int rc;

	if (c->n_servers == 0 || c->server_id >= c->n_servers || c->n_shards == 0 ||
	    c->n_lcores == 0 || c->n_lcores > 64 || c->n_workers == 0 || c->n_workers > 65536 ||
	    c->mode > PS_MODE_GEO || c->n_tables == 0 || !c->tables ||
	    c->barrier_policy > PS_BARRIER_CONTINUE) {
		ps_errf(err, errlen, "server config: need server_id < n_servers, 1..64 lcores, "
		     "shards >= 1, 1..65536 workers, a known mode and barrier policy and at least "
		     "one table");
		return -EINVAL;
	}
	if (c->geo_log_max != 0 && (c->geo_log_max < (c->max_keys ? c->max_keys : 65536) ||
				    c->geo_log_max > (1u << 30))) {
		ps_errf(err, errlen, "server config: GEO log of %u entries: expected the keys of one "
			"request (%u) .. 2^30", c->geo_log_max, c->max_keys ? c->max_keys : 65536);
		return -EINVAL;
	}
	for (i = 0; i < c->n_tables; i++) {
		if ((rc = check_table(&c->tables[i], err, errlen)) < 0 ||
		    (rc = check_mem(&c->tables[i], c, err, errlen)) < 0)
			return rc;
		for (j = 0; j < i; j++)
			if (c->tables[j].id == c->tables[i].id) {
				ps_errf(err, errlen, "table id %u configured twice", c->tables[i].id);
				return -EINVAL;
			}
	}
	return 0;
}

static int create_rings(struct ps_server *s)
{
	uint32_t n = s->cfg.n_lcores, sz = s->cfg.ring_size ? s->cfg.ring_size : 1024, i;
	ssize_t bytes = rte_ring_get_memsize(sz);

	if (bytes < 0)
		return (int)bytes;
	s->rings = calloc((size_t)n * n, sizeof(*s->rings));
	if (!s->rings)
		return -ENOMEM;
	for (i = 0; i < n * n; i++) {
		if (i / n == i % n)
			continue;
		int node = s->lcore_node[i % n]; /* the consumer's node */
		s->rings[i] = ps_mem_alloc((size_t)bytes, node);
		if (!s->rings[i])
			return -ENOMEM;
		/* SPSC: lcore i/n is the only producer, lcore i%n the only consumer. */
		int rc = rte_ring_init(s->rings[i], "ps", sz, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* CRC of what a log record's meaning depends on: ids, kinds, dims, optimizers, rows. */
static uint32_t layout_crc(const struct ps_server *s)
{
	uint32_t crc = 0xffffffffu, i;
	uint8_t b[24];

	for (i = 0; i < s->cfg.n_tables; i++) {
		const struct ps_table_config *t = &s->tcfg[i];
		tl_st32(b, t->id);
		tl_st32(b + 4, t->kind);
		tl_st32(b + 8, t->dim);
		tl_st32(b + 12, t->optim);
		tl_st64(b + 16, t->kind == PS_TABLE_DENSE ? t->dense_rows : 0);
		crc = rte_hash_crc(b, sizeof(b), crc);
	}
	return crc;
}

/* Copies the log's paths (the caller's strings) and makes sure the directory exists. */
static int setup_wal(struct ps_server *s, const struct ps_server_config *c, char *err,
		     size_t errlen)
{
	struct stat st;

	s->cfg.wal_dir = NULL;
	s->cfg.ckpt_path = NULL;
	s->layout_crc = layout_crc(s);
	s->wal_seg = c->wal_segment_bytes ? (size_t)c->wal_segment_bytes : (size_t)64 << 20;
	if (c->ckpt_path && !(s->ckpt_path = strdup(c->ckpt_path)))
		return -ENOMEM;
	s->cfg.ckpt_path = s->ckpt_path;
	if (!c->wal_dir)
		return 0;
	if (s->wal_seg < 4096 || s->wal_seg > ((size_t)1 << 40)) {
		ps_errf(err, errlen, "log segment size %zu outside 4 KiB..1 TiB", s->wal_seg);
		return -EINVAL;
	}
	if (!(s->wal_dir = strdup(c->wal_dir)))
		return -ENOMEM;
	s->cfg.wal_dir = s->wal_dir;
	if (mkdir(s->wal_dir, 0755) < 0 && errno != EEXIST) {
		int rc = -errno;
		ps_errf(err, errlen, "log directory %s: %s", s->wal_dir, strerror(-rc));
		return rc;
	}
	if (stat(s->wal_dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(s->wal_dir, W_OK | X_OK) < 0) {
		ps_errf(err, errlen, "log directory %s: not a writable directory", s->wal_dir);
		return -ENOTDIR;
	}
	return 0;
}

/*
 * Where GEO reply ids start: random, so that an id a worker acknowledges to a server that
 * restarted since matches none the new one handed out (it is then served from its committed
 * position again).
 */
static uint64_t geo_id_start(void)
{
	struct timespec ts;
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		v = ps_mix64(((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
			     ((uint64_t)getpid() << 32));
	}
	return v >> 1 | 1; /* far from wrapping to 0, which means "no reply" */
}

int ps_server_create(const struct ps_server_config *cfg, struct ps_server **out,
		     char *err, size_t errlen)
{
	struct ps_server *s;
	uint32_t i;
	int rc = check_config(cfg, err, errlen), caller_node = ps_mem_node_of_caller();

	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->max_keys = cfg->max_keys ? cfg->max_keys : 65536;
	s->geo_log_max = cfg->geo_log_max ? cfg->geo_log_max : PS_GEO_LOG_MAX_DEFAULT;
	if (s->geo_log_max < s->max_keys)
		s->geo_log_max = s->max_keys;
	atomic_init(&s->geo_next_id, geo_id_start());
	s->tcfg = calloc(cfg->n_tables, sizeof(*s->tcfg));
	s->shards = calloc(cfg->n_shards, sizeof(*s->shards));
	s->handlers = calloc(cfg->n_lcores, sizeof(*s->handlers));
	s->bar_seen = calloc(cfg->n_workers, 1);
	s->pub_late = calloc((cfg->n_workers + 63) / 64, sizeof(*s->pub_late));
	if (!s->tcfg || !s->shards || !s->handlers || !s->bar_seen || !s->pub_late)
		goto out_nomem;
	/* A server that starts empty starts a new state; ps_load / ps_recover may restore one. */
	while ((s->epoch = random64()) == 0)
		;
	memcpy(s->tcfg, cfg->tables, cfg->n_tables * sizeof(*s->tcfg));
	s->cfg.tables = s->tcfg;
	s->cfg.lcore_numa = NULL; /* the caller's array: copied into lcore_node */
	s->lcore_node = malloc(cfg->n_lcores * sizeof(*s->lcore_node));
	if (!s->lcore_node)
		goto out_nomem;
	for (i = 0; i < cfg->n_lcores; i++)
		s->lcore_node[i] = cfg->lcore_numa ? cfg->lcore_numa[i] : -1;
	for (i = 0; i < cfg->n_tables; i++)
		if (s->tcfg[i].dim > s->max_dim)
			s->max_dim = s->tcfg[i].dim;
	if ((rc = setup_wal(s, cfg, err, errlen)) < 0)
		goto out_free;
	if ((rc = create_rings(s)) < 0)
		goto out_destroy;
	for (i = 0; i < cfg->n_shards; i++) {
		uint32_t owner = i % cfg->n_lcores;
		int node = cfg->lcore_numa ? cfg->lcore_numa[owner] : caller_node;
		if ((rc = ps_shard_init(&s->shards[i], s, i, owner, node)) < 0)
			goto out_destroy;
	}
	*out = s;
	return 0;
out_nomem:
	rc = -ENOMEM;
out_destroy:
	ps_errf(err, errlen, "server create: %s", strerror(-rc));
out_free:
	ps_server_destroy(s);
	return rc;
}

void ps_server_destroy(struct ps_server *s)
{
	uint32_t i, n;

	if (!s)
		return;
	n = s->cfg.n_lcores;
	for (i = 0; s->shards && i < s->cfg.n_shards; i++)
		if (s->shards[i].srv)
			ps_shard_fini(&s->shards[i]);
	for (i = 0; s->rings && i < n * n; i++)
		if (s->rings[i])
			ps_mem_free(s->rings[i], (size_t)rte_ring_get_memsize(s->cfg.ring_size ?
					      s->cfg.ring_size : 1024), s->lcore_node[i % n]);
	free(s->rings);
	free(s->lcore_node);
	free(s->shards);
	free(s->handlers);
	free(s->bar_seen);
	free(s->pub_late);
	free(s->tcfg);
	free(s->wal_dir);
	free(s->ckpt_path);
	free(s);
}

int ps_handler_create(struct ps_server *s, uint32_t slot, struct ps_handler **out)
{
	struct ps_handler *h;
	uint32_t ns = s->cfg.n_shards;

	if (slot >= s->cfg.n_lcores || s->handlers[slot])
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->s = s;
	h->slot = slot;
	h->wal.fd = -1;
	atomic_init(&h->wal.sync_fd, -1);
	atomic_init(&h->wal.retired_fd, -1);
	h->idx = malloc((size_t)s->max_keys * sizeof(*h->idx));
	h->ksh = malloc((size_t)s->max_keys * sizeof(*h->ksh));
	h->cnt = calloc(ns + 1, sizeof(*h->cnt));
	h->ops = calloc(ns, sizeof(*h->ops));
	h->ids = calloc(s->cfg.n_workers, sizeof(*h->ids));
	h->rec = calloc(1, TL_MSG_HDR_LEN + 16 + 4 * (size_t)s->cfg.n_workers);
	if (!h->idx || !h->ksh || !h->cnt || !h->ops || !h->ids || !h->rec) {
		ps_handler_destroy(h);
		return -ENOMEM;
	}
	s->handlers[slot] = h;
	*out = h;
	return 0;
}

void ps_handler_destroy(struct ps_handler *h)
{
	if (!h)
		return;
	if (h->s->handlers[h->slot] == h)
		h->s->handlers[h->slot] = NULL;
	ps_wal_close(&h->wal); /* the records stay in the page cache: nothing is lost here */
	free(h->idx);
	free(h->ksh);
	free(h->cnt);
	free(h->ops);
	free(h->ids);
	free(h->rec);
	free(h);
}

/* ---------------------------------------------------------------- op transport */

#define PS_POLL_BURST 32u
#define PS_SNAP_BUDGET 4096u
/*
 * Idle rounds a waiting lcore spins (rte_pause) before it yields its core each round. Lanes
 * need not have a core each (kernel TCP lanes, DPDK lanes left unpinned, a PS taskset to
 * fewer cores): a waiter that only spun would hold the core the lane it waits for needs, until
 * the scheduler's time slice ended (a sync step took milliseconds that way).
 */
#define PS_SPINS_BEFORE_YIELD 256u

static unsigned serve_rings(struct ps_handler *h);

/* One idle round of a wait: spin at first, then let another thread of this core run. */
static inline void wait_idle(uint32_t *spins)
{
	if (*spins < PS_SPINS_BEFORE_YIELD) {
		(*spins)++;
		rte_pause();
	} else {
		sched_yield();
	}
}

/* A counter only its owner thread writes: a plain add, published for readers. */
static inline void ctr_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

unsigned ps_handler_poll(struct ps_handler *h)
{
	if (!h->in_request)
		ps_handler_park_if_asked(h);
	return serve_rings(h);
}

/*
 * A save wants a cut with no request half-applied: between requests, wait here (still
 * serving our rings, which is how the saver reaches our shards) until it lets go.
 */
void ps_handler_park_if_asked(struct ps_handler *h)
{
	/* Partner: the release CAS in ps_server_pause. */
	uint32_t e = atomic_load_explicit(&h->s->pause, memory_order_acquire), spins = 0;

	if (PS_LIKELY(e == 0) || atomic_load_explicit(&h->parked, memory_order_relaxed) == e)
		return;
	/* Partner: the acquire load in ps_server_pause's wait for every handler. */
	atomic_store_explicit(&h->parked, e, memory_order_release);
	/* Partner: the release store in ps_server_resume. */
	while (atomic_load_explicit(&h->s->pause, memory_order_acquire) == e)
		if (serve_rings(h) == 0)
			wait_idle(&spins);
}

int ps_server_pause(struct ps_handler *h)
{
	struct ps_server *s = h->s;
	uint32_t e = atomic_load_explicit(&s->save_epoch, memory_order_relaxed) + 1, zero = 0, i;
	uint32_t spins = 0;

	if (e == 0)
		e = 1;
	/* Release: our earlier writes before others park; acquire: a previous saver's. */
	if (!atomic_compare_exchange_strong_explicit(&s->pause, &zero, e, memory_order_acq_rel,
						     memory_order_relaxed))
		return -EBUSY;
	atomic_store_explicit(&s->save_epoch, e, memory_order_relaxed);
	/* We never park for our own save. */
	atomic_store_explicit(&h->parked, e, memory_order_relaxed);
	for (i = 0; s->cfg.wake && i < s->cfg.n_lcores; i++)
		if (i != h->slot)
			s->cfg.wake(s->cfg.wake_arg, i); /* asleep, they would park only on their timeout */
	for (i = 0; i < s->cfg.n_lcores; i++) {
		struct ps_handler *o = s->handlers[i];
		/* Partner: the release store of parked in ps_handler_park_if_asked. */
		while (o && o != h && atomic_load_explicit(&o->parked, memory_order_acquire) != e)
			if (serve_rings(h) == 0) /* others may be finishing a request on our shards */
				wait_idle(&spins);
	}
	return 0;
}

void ps_server_pause_wait(struct ps_handler *h)
{
	struct ps_server *s = h->s;
	uint32_t e, spins = 0;

	while (ps_server_pause(h) != 0) {
		/* Partner: the release CAS in ps_server_pause of the holder. */
		e = atomic_load_explicit(&s->pause, memory_order_acquire);
		if (e == 0)
			continue;
		/* Partner: the holder's acquire load of parked in ps_server_pause. */
		atomic_store_explicit(&h->parked, e, memory_order_release);
		/* Partner: the release store in ps_server_resume. */
		while (atomic_load_explicit(&s->pause, memory_order_acquire) == e)
			if (serve_rings(h) == 0)
				wait_idle(&spins);
	}
}

void ps_server_resume(struct ps_handler *h)
{
	/* Partner: the acquire loads in ps_handler_park_if_asked. */
	atomic_store_explicit(&h->s->pause, 0, memory_order_release);
}

static unsigned serve_rings(struct ps_handler *h)
{
	struct ps_server *s = h->s;
	uint32_t n = s->cfg.n_lcores, from, i, got, total = 0;
	void *ops[PS_POLL_BURST];

	for (from = 0; from < n; from++) {
		struct rte_ring *r = s->rings[from * n + h->slot];
		if (!r || rte_ring_empty(r))
			continue;
		got = rte_ring_sc_dequeue_burst(r, ops, PS_POLL_BURST, NULL);
		for (i = 0; i < got; i++) {
			struct ps_op *op = ops[i];
			/*
			 * Partner: the release store of done = 0 in ps_handler_run_op. The ring
			 * orders the pointer; this makes the op's fields visible in C11 terms
			 * too (and to ThreadSanitizer), at one load per op, not per key.
			 */
			(void)atomic_load_explicit(&op->done, memory_order_acquire);
			/* Debug builds: a shard only ever runs on its owner (cf. lwIP's core lock check). */
			assert(s->shards[op->shard].owner == h->slot);
			ps_shard_run(&s->shards[op->shard], op);
			/* Partner: the acquire load in ps_handler_wait (requester lcore). */
			atomic_store_explicit(&op->done, 1, memory_order_release);
		}
		total += got;
	}
	if (total)
		ctr_add(&h->ops_served, total);
	/* Advance copy-on-write snapshots of this lcore's shards between ops. */
	for (i = h->slot; i < s->cfg.n_shards; i += n)
		ps_shard_snap_step(&s->shards[i], PS_SNAP_BUDGET);
	return total;
}

void ps_handler_run_op(struct ps_handler *h, uint32_t shard, struct ps_op *op)
{
	struct ps_server *s = h->s;
	uint32_t owner = s->shards[shard].owner, spins = 0;

	op->shard = shard;
	/* Partner: the acquire load after the owner's dequeue in serve_rings. */
	atomic_store_explicit(&op->done, 0, memory_order_release);
	/* Replay (ps_recover) runs alone: every shard is this thread's for its duration. */
	if (owner == h->slot || h->replaying) {
		ps_shard_run(&s->shards[shard], op);
		atomic_store_explicit(&op->done, 1, memory_order_relaxed);
		return;
	}
	/*
	 * The enqueue publishes the op (the ring's own release); the owner's dequeue acquires.
	 * A full ring: serve ours meanwhile (the owner may be waiting on us), and with nothing to
	 * serve let the owner run (it may share our CPU).
	 */
	while (rte_ring_sp_enqueue(s->rings[h->slot * s->cfg.n_lcores + owner], op) != 0)
		if (serve_rings(h) == 0)
			wait_idle(&spins);
	ctr_add(op->kind <= PS_OP_DENSE_PUSH ? &h->data_ops_remote : &h->ctl_ops_remote, 1);
	if (s->cfg.wake)
		s->cfg.wake(s->cfg.wake_arg, owner); /* it may sleep in its network poll */
}

void ps_handler_wait(struct ps_handler *h, struct ps_op *op)
{
	uint32_t spins = 0;

	/* Partner: the release store in ps_handler_poll on the owner lcore. */
	while (!atomic_load_explicit(&op->done, memory_order_acquire)) {
		if (serve_rings(h) == 0)
			wait_idle(&spins);
	}
}

int ps_server_lcore_stats(struct ps_server *s, uint32_t slot, struct ps_lcore_stats *st)
{
	struct ps_handler *h;

	if (slot >= s->cfg.n_lcores)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	h = s->handlers[slot];
	if (h == NULL)
		return 0;
	st->data_ops_remote = atomic_load_explicit(&h->data_ops_remote, memory_order_relaxed);
	st->ctl_ops_remote = atomic_load_explicit(&h->ctl_ops_remote, memory_order_relaxed);
	st->ops_served = atomic_load_explicit(&h->ops_served, memory_order_relaxed);
	return 0;
}

int ps_server_table_stats(struct ps_server *s, uint32_t table_id, struct ps_table_stats *st)
{
	int ti = ps_server_table_index(s, table_id);
	uint32_t i;

	if (ti < 0)
		return ti;
	memset(st, 0, sizeof(*st));
	for (i = 0; i < s->cfg.n_shards; i++) {
		const struct ps_table *t = &s->shards[i].tables[ti];
		st->rows += ps_table_live(t);
		st->bytes += ps_table_bytes(t);
		st->rows_cap += t->cap < PS_ROWS_MAX ? t->cap : 0;
		if (t->pend) {
			st->admission_pending += ps_table_live(t->pend);
			st->pending_cap += t->pend->cap < PS_ROWS_MAX ? t->pend->cap : 0;
		}
		st->rows_refused_cap += atomic_load_explicit(&t->n_refused_cap, memory_order_relaxed);
		st->admission_admitted += atomic_load_explicit(&t->n_admitted, memory_order_relaxed);
		st->admission_dropped += atomic_load_explicit(&t->n_adm_dropped, memory_order_relaxed);
		st->admission_expired += atomic_load_explicit(&t->n_expired, memory_order_relaxed);
		st->evicted += atomic_load_explicit(&t->n_evicted, memory_order_relaxed);
	}
	return 0;
}

int ps_server_shard_stats(struct ps_server *s, uint32_t shard, struct ps_shard_stats *st)
{
	struct ps_shard *sh;

	if (shard >= s->cfg.n_shards)
		return -EINVAL;
	sh = &s->shards[shard];
	st->pushes = atomic_load_explicit(&sh->n_push, memory_order_relaxed);
	st->pulls = atomic_load_explicit(&sh->n_pull, memory_order_relaxed);
	st->keys = atomic_load_explicit(&sh->n_keys, memory_order_relaxed);
	st->dup_pushes = atomic_load_explicit(&sh->n_dup, memory_order_relaxed);
	st->failed_ops = atomic_load_explicit(&sh->n_fail, memory_order_relaxed);
	st->cow_rows = atomic_load_explicit(&sh->n_cow, memory_order_relaxed);
	st->nonfinite_rows = atomic_load_explicit(&sh->n_nonfinite, memory_order_relaxed);
	st->fenced = atomic_load_explicit(&sh->n_fenced, memory_order_relaxed);
	st->wrong_step = atomic_load_explicit(&sh->n_wrong_step, memory_order_relaxed);
	st->geo_log = atomic_load_explicit(&sh->n_geo_log, memory_order_relaxed);
	st->geo_resyncs = atomic_load_explicit(&sh->n_geo_resync, memory_order_relaxed);
	st->owner = sh->owner;
	return 0;
}
