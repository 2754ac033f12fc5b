/*
 * ps_pvt.h — ps_core internals shared by its files: the sparse/dense table, the shard
 * (tables + exactly-once + mode state + snapshot), the op that crosses lcores, hashes.
 *
 * Ownership: a shard and everything it points to is touched only by its owner lcore,
 * except struct ps_op's done flag (store-release by the owner, load-acquire by the
 * requester) and the snapshot's ready flag (same pairing).
 */
#ifndef WHARF_PS_PVT_H
#define WHARF_PS_PVT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dpdk_net/dn_log.h"
#include "ps_core/ps.h"

/* ps_core's log type, "wharf.ps" (ps_server.c). */
extern int ps_logtype;
#define PS_LOG(lvl, ...) WLOG(ps_logtype, lvl, __VA_ARGS__)

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "gradients are read from the wire as host floats");

/*
 * Four floats / words as one SIMD value (GCC's vector extension, one SSE register): the
 * hot loops over a row are written with it because -O2 does not vectorize a loop whose trip
 * count (the dim) is known only at run time. Loads and stores go through memcpy: gradients
 * lie in received bytes at any alignment.
 */
typedef float ps_v4f __attribute__((vector_size(16)));
typedef uint32_t ps_v4u __attribute__((vector_size(16)));

static inline ps_v4f ps_v4f_ld(const void *p)
{
	ps_v4f v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void ps_v4f_st(void *p, ps_v4f v)
{
	memcpy(p, &v, sizeof(v));
}

/* sum[j] += g[j] for j < d (g: floats as received, any alignment). */
static inline void ps_add_bytes(float *sum, const uint8_t *g, uint32_t d)
{
	uint32_t j = 0;

	for (; j + 4 <= d; j += 4)
		ps_v4f_st(sum + j, ps_v4f_ld(sum + j) + ps_v4f_ld(g + 4 * j));
	for (; j < d; j++) {
		float f;
		memcpy(&f, g + 4 * j, sizeof(f));
		sum[j] += f;
	}
}

#define PS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define PS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PS_CACHE_LINE  64
#define PS_MAX_DIM     1024u

/* fmix64 from MurmurHash3's finalizer (idea, not code): full avalanche of 64 bits. */
static inline uint64_t ps_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

/* Three independent hashes: server (h1), shard (h2), slot inside a shard's table (h3). */
#define PS_H1_SALT 0x9e3779b97f4a7c15ull
#define PS_H2_SALT 0xd1b54a32d192ed03ull
#define PS_H3_SALT 0x8cb92ba72f3d8dd7ull

/* ps_key_shard, inline for the loops that route a request's every key. */
static inline uint32_t ps_key_shard_inl(uint64_t key, uint32_t n_shards)
{
	/* Multiply-shift onto [0, n): no division per key. */
	return (uint32_t)(((ps_mix64(key ^ PS_H2_SALT) >> 32) * n_shards) >> 32);
}

/* A key's hash in a shard's table (its slot, and the tag kept there). */
static inline uint32_t ps_slot_hash(uint64_t key) { return (uint32_t)ps_mix64(key ^ PS_H3_SALT); }

/* ---------------------------------------------------------------- memory */

/* Zeroed, cache aligned, node-local if NUMA; whole units of this in huge-page regions. */
#define PS_HUGE_BYTES ((size_t)2 << 20)
void *ps_mem_alloc(size_t bytes, int node);
void ps_mem_free(void *p, size_t bytes, int node);
int ps_mem_node_of_caller(void);

/* ---------------------------------------------------------------- table */

/*
 * A row in the arena: meta then floats. value[dim], then optimizer state, then (sync
 * mode only) the step's gradient sum acc[dim].
 */
struct ps_row_meta {
	uint64_t key;      /* sparse: key; dense: global row index */
	uint32_t version;  /* GEO: low 32 bits of (log position of its latest entry + 1), 0 =
			    * none; sync: step+1 when acc was touched */
	uint32_t mark;     /* per-push stamp: detects duplicate keys inside one push */
};
_Static_assert(sizeof(struct ps_row_meta) == 16, "row meta stays 16 bytes");

/* A hash slot: row index + 1 (0 = empty) and the low 32 bits of h3 (index and tag). */
struct ps_slot {
	uint32_t row1;
	uint32_t h;
};

#define PS_ROWS_MAX (UINT32_MAX / 2 - 1) /* rows of one shard's table */
/* Bytes of an admission counter: meta, then the u64 step of its last push. */
#define PS_PEND_STRIDE 32u
_Static_assert(((sizeof(struct ps_row_meta) + sizeof(uint64_t) + 15) & ~15u) == PS_PEND_STRIDE,
	       "an admission counter is a row of dim 0 with its step");

#define PS_CHUNK_SHIFT 10u
#define PS_CHUNK_ROWS  (1u << PS_CHUNK_SHIFT)

/* A row's last-update step (upd_off) when it is free: on the free list, in no slot. */
#define PS_ROW_FREE UINT64_MAX
/* rows[] entry of a key that has no row and gets none (not admitted, or the table is full). */
#define PS_ROW_NONE UINT32_MAX

struct ps_table {
	struct ps_table_config cfg;
	uint32_t sfl;           /* optimizer state floats per row */
	uint32_t acc_off;       /* float offset of acc[] in a row, 0 if none */
	uint32_t stride;        /* bytes per row, multiple of 16 */
	int node;
	/* rows */
	uint8_t **chunks;
	uint32_t n_chunks, cap_chunks;
	uint32_t n_solo;        /* chunks with pages of their own; the rest in huge-page regions */
	uint32_t n_rows;        /* rows of the arena in use or free: [0, n_rows) */
	/* sparse index: slots (new) and, while growing, old slots still being moved */
	struct ps_slot *slots, *old;
	uint32_t mask, old_mask;
	uint32_t mig;           /* next old slot to move */
	uint32_t limit;         /* rows at which the next grow starts */
	uint64_t dense_first;   /* dense: first global row held here */
	/*
	 * Memory policies (ps_mem.c), owner lcore only. upd_off: byte offset in a row of its
	 * u64 last-update step (0: not kept, the table never evicts); PS_ROW_FREE marks a free
	 * row, whose meta key links the free list (free_head, PS_ROW_NONE = empty). cap: live
	 * rows this shard may hold. clock: the table's steps on this shard. pend: the
	 * admission counters (a table of dim 0: meta key, version = pushes counted, mark = the
	 * stamp of the last push that counted, upd = its step; its own cap), or NULL;
	 * pend_mark: the next such stamp.
	 */
	uint32_t upd_off;
	uint32_t n_free, free_head;
	uint32_t cap;
	uint64_t clock;
	struct ps_table *pend;
	uint32_t pend_mark;
	/* Counters: written by the owner only (load + store), read relaxed by anyone. */
	_Atomic uint64_t n_refused_cap, n_adm_dropped, n_admitted, n_expired, n_evicted;
};

static inline uint8_t *ps_row(const struct ps_table *t, uint32_t r)
{
	return t->chunks[r >> PS_CHUNK_SHIFT] + (size_t)(r & (PS_CHUNK_ROWS - 1)) * t->stride;
}
/* Row r's cache lines after the one it starts in (which a lookup has just read). */
static inline void ps_row_prefetch_rest(const struct ps_table *t, uint32_t r, int write)
{
	const uint8_t *p = ps_row(t, r);
	uint32_t o = PS_CACHE_LINE - (uint32_t)((uintptr_t)p & (PS_CACHE_LINE - 1));

	for (; o < t->stride; o += PS_CACHE_LINE)
		if (write)
			__builtin_prefetch(p + o, 1);
		else
			__builtin_prefetch(p + o, 0);
}
static inline struct ps_row_meta *ps_row_meta(const struct ps_table *t, uint32_t r)
{
	return (struct ps_row_meta *)ps_row(t, r);
}
static inline float *ps_row_val(const struct ps_table *t, uint32_t r)
{
	return (float *)(ps_row(t, r) + sizeof(struct ps_row_meta));
}

/*
 * n_shards: the server's, over which the memory policies' caps are split. -EINVAL for a
 * policy that cannot hold one row per shard (ps_table_caps says why), -ENOMEM.
 */
int ps_table_init(struct ps_table *t, const struct ps_table_config *cfg, bool sync_acc,
		  uint64_t dense_first, uint64_t dense_rows, int node, uint32_t n_shards);
void ps_table_fini(struct ps_table *t);
/* Bytes per row of a table of cfg (sync_acc: with the sync step's sum). */
uint32_t ps_table_stride(const struct ps_table_config *cfg, bool sync_acc);
/*
 * Per-shard caps of cfg's memory policies over n_shards shards: live rows and admission
 * counters (UINT32_MAX / 2 when uncapped). 0, or -EINVAL with why in err.
 */
int ps_table_caps(const struct ps_table_config *cfg, bool sync_acc, uint32_t n_shards,
		  uint32_t *rows, uint32_t *pend, char *err, size_t errlen);
/*
 * Fixed-size records read in place from a received body: record p is the size bytes at body
 * offset off + p * size. Body offsets [lo, hi) are contiguous at base (the piece of the
 * message the last read stood in), so a record inside it costs a comparison and an add;
 * one in another piece moves the cursor, and one that straddles two pieces is copied into
 * the caller's tmp (size bytes).
 */
struct ps_span {
	struct tl_view_cur cur;
	const uint8_t *base;
	uint32_t lo, hi, off, size;
};

static inline void ps_span_init(struct ps_span *s, const struct tl_msg_view *v, uint32_t off,
				uint32_t size)
{
	tl_cur_init(&s->cur, v);
	s->base = NULL;
	s->lo = s->hi = 0;
	s->off = off;
	s->size = size;
}

/* Record at body offset o when it is not inside [lo, hi): moves the cursor there. */
const uint8_t *ps_span_slow(struct ps_span *s, uint32_t o, void *tmp);

/* Is record p inside the piece the span stands in (ps_span_at reads it in place)? */
static inline bool ps_span_here(const struct ps_span *s, uint32_t p)
{
	uint32_t o = s->off + p * s->size;

	return o >= s->lo && o + s->size <= s->hi;
}

#define PS_SPAN_PIECES 16 /* parts of a record: a 4 KiB row over 536-byte pieces */
/*
 * A record of a span of floats as the parts of the body it lies in, in order: part k is
 * len[k] bytes (a whole number of floats) at at[k]. A float that a piece boundary splits is
 * put together in carry and is a part of its own; the rest is read in place.
 */
struct ps_parts {
	const uint8_t *at[PS_SPAN_PIECES];
	uint32_t len[PS_SPAN_PIECES];
	uint32_t n;
	uint8_t carry[PS_SPAN_PIECES * 4];
};
/* Record p's parts into *out: their count, or 0 when there would be more than
 * PS_SPAN_PIECES (read it with ps_span_at). */
uint32_t ps_span_pieces(struct ps_span *s, uint32_t p, struct ps_parts *out);

static inline const uint8_t *ps_span_at(struct ps_span *s, uint32_t p, void *tmp)
{
	uint32_t o = s->off + p * s->size;

	if (PS_LIKELY(o >= s->lo && o + s->size <= s->hi))
		return s->base + o;
	return ps_span_slow(s, o, tmp);
}

/*
 * The keys of a batch lookup: an array (arr), or read in place from a request's body
 * (sp, records of 8 bytes): key i is the one at position idx[i] (the positions this shard
 * handles, ascending, so the cursor walks forward).
 */
struct ps_keys {
	const uint64_t *arr;
	struct ps_span sp;
	const uint32_t *idx;
	const uint8_t *flat; /* all the request's keys in one view (the common case): key 0 */
};

/* Keys from the body of v, key i at offset off + 8 * idx[i] (the request has n keys). */
static inline void ps_keys_view(struct ps_keys *k, const struct tl_msg_view *v, uint32_t off,
				const uint32_t *idx, uint32_t n)
{
	uint32_t avail;
	const uint8_t *p;

	k->arr = NULL;
	ps_span_init(&k->sp, v, off, 8);
	k->idx = idx;
	p = n ? tl_cur_span(&k->sp.cur, off, &avail) : NULL;
	k->flat = p && avail >= 8ull * n ? p : NULL;
}

/* The key at request position p (from the body). */
static inline uint64_t ps_key_at_pos(struct ps_keys *k, uint32_t p)
{
	uint8_t tmp[8];

	return tl_ld64(ps_span_at(&k->sp, p, tmp));
}

/* Key i of the batch. */
static inline uint64_t ps_key_at(struct ps_keys *k, uint32_t i)
{
	return k->arr ? k->arr[i] : ps_key_at_pos(k, k->idx[i]);
}

/*
 * Key i of the batch, with k->flat and k->idx loaded by the caller's loop once (stores to
 * the caller's rows[] would otherwise make the compiler load them again for every key).
 */
static inline uint64_t ps_key_fast(struct ps_keys *k, const uint8_t *flat, const uint32_t *idx,
				   uint32_t i)
{
	return flat ? tl_ld64(flat + 8 * (size_t)idx[i]) : ps_key_at(k, i);
}

/* Row of key, or UINT32_MAX. */
uint32_t ps_table_find(const struct ps_table *t, uint64_t key);
/* Rows of n keys, PS_ROW_NONE for a key without one. Prefetches ahead; changes nothing. */
void ps_table_find_batch(const struct ps_table *t, struct ps_keys *keys, uint32_t n,
			 uint32_t *rows);
/*
 * A push's repeated keys, in O(n) and without sorting: a row's meta mark holds base + the
 * batch index of its first occurrence in this push, so "seen in this push" is mark - base
 * < n. A repeat is chained behind its first occurrence: nxt[i] is the next occurrence of
 * key i's row (UINT32_MAX: none), tail[i] the last one so far for a first occurrence and
 * UINT32_MAX for a repeat (applied with its first). any: a repeat was seen.
 */
struct ps_dups {
	uint32_t base;
	uint32_t *nxt, *tail;
	bool any;
};

/* Row r, found or made for batch key i, into d's chains (d: see struct ps_dups). */
static inline void ps_dups_note(struct ps_dups *d, struct ps_row_meta *m, uint32_t i,
				uint32_t n)
{
	uint32_t first = m->mark - d->base;

	d->nxt[i] = UINT32_MAX;
	if (PS_LIKELY(first >= n)) {
		m->mark = d->base + i;
		d->tail[i] = i;
		return;
	}
	d->any = true;
	d->nxt[d->tail[first]] = i;
	d->tail[first] = i;
	d->tail[i] = UINT32_MAX;
}

/*
 * Rows of n keys, created (and initialised) on first touch. Looks keys up in a pipeline:
 * while key i is resolved, key i+12's home slot names a row that is prefetched and key
 * i+24 is hashed and its slot prefetched, so the misses of slot and row (what bounds a
 * shard) overlap instead of one per key in turn. dups (or NULL): the batch's repeated
 * keys are chained there as their rows are resolved (the row's first line is in cache
 * then); a dense table's rows are a range with no repeats, and leave it as it was. Call
 * ps_table_reserve(t, n) first: after it succeeds this cannot fail. Never on a table with
 * free rows (ps_mem.c inserts there, one key at a time).
 */
void ps_table_lookup_batch(struct ps_table *t, struct ps_keys *keys, uint32_t n, uint32_t *rows,
			   struct ps_dups *dups);
/* Room for n more live rows (a free row is used before the arena grows). */
int ps_table_reserve(struct ps_table *t, uint32_t n);
/*
 * New initialised row for key (a free one first), or UINT32_MAX if the key exists.
 * Reserve first. ps_table_next_row: the row the next insert takes (to copy it for a
 * snapshot before it changes).
 */
uint32_t ps_table_insert(struct ps_table *t, uint64_t key);
uint32_t ps_table_next_row(const struct ps_table *t);
/* Takes row r out of the index and onto the free list (a table with upd_off only). */
void ps_table_remove(struct ps_table *t, uint32_t r);
/* Rows in use (not free). */
static inline uint32_t ps_table_live(const struct ps_table *t) { return t->n_rows - t->n_free; }
void ps_table_init_row(const struct ps_table *t, uint32_t r, uint64_t key);
/* The initializer's values of key's row (dim floats) into v: what a row starts as. */
void ps_table_init_values(const struct ps_table *t, uint64_t key, float *v);
uint64_t ps_table_bytes(const struct ps_table *t);
static inline uint64_t *ps_row_upd(const struct ps_table *t, uint32_t r)
{
	return (uint64_t *)(ps_row(t, r) + t->upd_off);
}
static inline bool ps_row_is_free(const struct ps_table *t, uint32_t r)
{
	return t->upd_off != 0 && *ps_row_upd(t, r) == PS_ROW_FREE;
}

/* ---------------------------------------------------------------- optimizers */

/*
 * Applies gradient g (dim floats, maybe unaligned wire bytes) to value+state of a row,
 * computing the new row in scratch (dim + state floats). Returns false, the row unchanged,
 * when a float of the result would not be finite.
 */
bool ps_optim_apply(const struct ps_table *t, float *row, const uint8_t *g, float *scratch);

/* Float j of g (bytes as received, any alignment). */
static inline float ps_ldf(const uint8_t *g, uint32_t j)
{
	float f;

	memcpy(&f, g + 4 * (size_t)j, sizeof(f));
	return f;
}

#define PS_EXP_BITS 0x7f800000u

/* A float is not finite when its exponent bits are all ones: those lanes come out all ones. */
static inline ps_v4u ps_nonfinite4(ps_v4u w)
{
	const ps_v4u exp = { PS_EXP_BITS, PS_EXP_BITS, PS_EXP_BITS, PS_EXP_BITS };

	return (ps_v4u)((w & exp) == exp);
}

static inline bool ps_nonfinite1(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return (x & PS_EXP_BITS) == PS_EXP_BITS;
}

static inline bool ps_any4(ps_v4u bad) { return (bad[0] | bad[1] | bad[2] | bad[3]) != 0; }

/*
 * SGD in place (ps_sgd_inplace, ps_sgd_pieces): the new values are computed once to check
 * them (ps_sgd_ok: would w - lr * g, n floats, be finite everywhere?) and again to store
 * them (ps_sgd_step), only when every one is finite. For SGD that is cheaper than a scratch
 * row, its check and its copy back; the two passes compute the same expression over the
 * same runs of floats, so the stored values are the checked ones.
 */
static inline bool ps_sgd_ok(const float *w, const uint8_t *g, uint32_t n, float lr)
{
	ps_v4u bad = { 0, 0, 0, 0 };
	ps_v4f x;
	uint32_t j;

	for (j = 0; j + 4 <= n; j += 4) {
		x = ps_v4f_ld(w + j) - lr * ps_v4f_ld(g + 4 * j);
		bad |= ps_nonfinite4((ps_v4u)x);
	}
	for (; j < n; j++)
		if (ps_nonfinite1(w[j] - lr * ps_ldf(g, j)))
			return false;
	return !ps_any4(bad);
}
static inline void ps_sgd_step(float *restrict w, const uint8_t *restrict g, uint32_t n,
			       float lr)
{
	uint32_t j;

	for (j = 0; j + 4 <= n; j += 4)
		ps_v4f_st(w + j, ps_v4f_ld(w + j) - lr * ps_v4f_ld(g + 4 * j));
	for (; j < n; j++)
		w[j] = w[j] - lr * ps_ldf(g, j);
}
static inline bool ps_sgd_inplace(const struct ps_table *t, float *restrict w,
				  const uint8_t *restrict g)
{
	if (PS_UNLIKELY(!ps_sgd_ok(w, g, t->cfg.dim, t->cfg.op.lr)))
		return false;
	ps_sgd_step(w, g, t->cfg.dim, t->cfg.op.lr);
	return true;
}
/* ps_sgd_inplace with the gradient in parts as received (ps_span_pieces), read in place. */
static inline bool ps_sgd_pieces(const struct ps_table *t, float *restrict w,
				 const struct ps_parts *g)
{
	const float lr = t->cfg.op.lr;
	uint32_t k, j;

	for (k = 0, j = 0; k < g->n; j += g->len[k++] / 4)
		if (PS_UNLIKELY(!ps_sgd_ok(w + j, g->at[k], g->len[k] / 4, lr)))
			return false;
	for (k = 0, j = 0; k < g->n; j += g->len[k++] / 4)
		ps_sgd_step(w + j, g->at[k], g->len[k] / 4, lr);
	return true;
}

/* ps_optim_apply with SGD inlined: a shard's apply loop calls it once per row. */
static inline bool ps_optim_apply_inl(const struct ps_table *t, float *row, const uint8_t *g,
				      float *scratch)
{
	if (t->cfg.optim == PS_OPT_SGD)
		return ps_sgd_inplace(t, row, g);
	return ps_optim_apply(t, row, g, scratch);
}
/* Every one of n floats finite? */
bool ps_all_finite(const float *v, uint32_t n);
/* Every one of n floats at p (any alignment, as received) finite? */
bool ps_all_finite_bytes(const uint8_t *p, uint32_t n);

/* ---------------------------------------------------------------- shard */

enum ps_op_kind {
	PS_OP_PULL = 1,
	PS_OP_PUSH,       /* async apply, sync accumulate, or GEO add, by mode */
	PS_OP_DENSE_PULL,
	PS_OP_DENSE_PUSH,
	PS_OP_SYNC_STEP,  /* sync: apply the step's sums */
	PS_OP_GEO_PULL,   /* commit what the worker acknowledged, then read (see op_geo_pull) */
	PS_OP_SNAP_BEGIN,
	/* The barrier (shard 0, see ps_barrier_run): */
	PS_OP_BARRIER,        /* a worker asks at a step: fenced? done? new arrival? overdue? */
	PS_OP_BARRIER_ARRIVE, /* counts an arrival that is in the log */
	PS_OP_BARRIER_CLAIM,  /* the step is to be applied: by this caller (others paused) */
	PS_OP_BARRIER_UNCLAIM,/* the claim's log record could not be written */
	PS_OP_BARRIER_DONE,   /* the step was applied: left-out workers marked, next step */
	PS_OP_HELLO,      /* a worker's sequences and fence on this shard (see ps_shard_run) */
	PS_OP_HELLO_COMMIT,
};

/* ps_barrier_run's answers besides 0 (waiting), 1 (done) and -errno. */
#define PS_BAR_APPLY 2u  /* every worker is in: the step is to be applied (claim it) */
#define PS_BAR_DROP  3u  /* overdue, policy continue: to be applied without the missing */
#define PS_BAR_FRESH 4u  /* this worker's first arrival at the step: log it, then arrive */

/*
 * A record only the write-ahead log holds (never accepted from a peer): a sync step was
 * applied. body: u64 step, u32 count, u32 zero, count x u32 the workers it left out (its
 * barrier timed out, policy continue). Logged, with every other handler paused, right
 * before the step's sums are applied, so the replay applies each step at the same place in
 * the stream of pushes as the live server did.
 */
#define PS_T_WAL_STEP 62u

struct ps_snap;

/*
 * One shard's slice of a request. The requester fills it, the owner runs it and then
 * sets done with a release store (partner: the requester's acquire load in ps_op_wait).
 */
struct ps_op {
	enum ps_op_kind kind;
	uint32_t shard;
	uint32_t table;          /* index into the server's tables */
	const struct tl_msg_view *v;
	uint32_t keys_off;       /* body offset of the request's keys (read in place) */
	const uint32_t *idx;     /* positions (in the request) this shard handles, ascending */
	uint32_t n;
	uint32_t vals_off;       /* body offset of the gradient block */
	uint32_t worker;
	uint64_t seq;
	uint64_t inc;            /* the sender's incarnation */
	uint64_t step;           /* push: its sync step; hello: out, the barrier's step */
	uint64_t have;           /* refused: the registered incarnation, or the shard's step */
	uint8_t err_kind;        /* refused: enum ps_err_kind */
	bool replay;             /* barrier ops from the log: no clock, no apply of its own */
	bool first;              /* barrier: the first report of this step's timeout */
	uint32_t *ids;           /* barrier: workers missing / left out (n_workers room) */
	uint32_t n_ids;
	float *out;              /* values out, request order (row pos * dim) */
	/* GEO pull: the reply acknowledged, this reply's id, the output (NULL: acknowledge only) */
	uint64_t geo_ack, geo_id;
	uint8_t *geo_out;        /* records of u64 key + dim f32 */
	uint32_t geo_cap, geo_n;
	struct ps_snap *snap;
	uint64_t dense_first;    /* dense: first global row of the request */
	uint32_t fresh;          /* barrier: 1 when this was the worker's first arrival at the step */
	uint32_t refused;        /* push: rows left as they were (their result was not finite) */
	uint32_t full;           /* push: keys refused because the table was at its cap */
	int status;              /* 0, 1 = duplicate push, or -errno */
	_Atomic uint32_t done;
};

/*
 * GEO: where a worker reads a table's changes in one shard. A full resync (row != none) sends
 * rows [row, n_rows) first, then goes on with the log at pos.
 */
#define PS_GEO_NO_RESYNC UINT32_MAX
/* A log entry that names no row (restored from a checkpoint whose row was evicted). */
#define PS_GEO_HOLE UINT32_MAX
struct ps_geo_pos {
	uint64_t pos;             /* log position to read from */
	uint32_t row;             /* next row of a full resync, or PS_GEO_NO_RESYNC */
};

/* A worker's GEO state for one table in one shard. */
struct ps_geo_worker {
	struct ps_geo_pos seen;   /* committed: the worker acknowledged a reply ending here */
	struct ps_geo_pos pend;   /* where the last reply to it ended, until acknowledged */
	uint64_t pend_id;         /* that reply's id; 0: nothing pending */
};

/* A GEO log at a snapshot's cut (copied at the cut: it is bounded by geo_log_max). */
struct ps_snap_geo {
	uint32_t *e;
	uint32_t n;
	uint64_t base, max_pos;
};

/*
 * Snapshot of one shard: copies of rows [0, n_rows[t]) of each table, then of each table's
 * admission counters (snapshot table n_tables + t; none when the table has no admission).
 */
struct ps_snap_table {
	uint8_t *rows;           /* n_rows * stride bytes */
	uint64_t *copied;        /* bitmap: row already copied (copy-on-write done) */
	uint32_t n_rows;
	uint64_t clock;          /* the table's clock at the cut */
};
struct ps_snap {
	struct ps_snap_table *t; /* 2 x n_tables: the tables, then their admission counters */
	uint32_t n_tables;       /* 2 x the shard's tables */
	uint64_t *last_seq;      /* exactly-once state at the same moment, per worker */
	uint64_t *inc;           /* registered incarnations, per worker */
	uint64_t *step_first;    /* per worker: first sequence applied in the cut's step, 0 none */
	uint32_t cur_table, cursor;
	uint32_t sync_step;      /* the shard's sync step at the cut */
	/* shard 0's snapshot only (its owner holds the barrier): barrier state of the cut */
	uint64_t bar_step;
	uint8_t *bar_seen;       /* n_workers */
	/* GEO mode: each table's log and each worker's committed position (worker x table) */
	struct ps_snap_geo *geo;  /* n_geo: the shard's tables */
	struct ps_geo_pos *geo_seen;
	uint32_t n_geo;
	_Atomic uint32_t ready;  /* release by owner when complete; acquire in ps_save */
};

/*
 * GEO: the rows of a sparse table changed, in order of change, as a log of row indices at
 * 64-bit logical positions base, base+1, ... A worker's GEO pull returns the rows logged at
 * or after its committed position; where the reply ended becomes its position once its next
 * pull acknowledges that reply. A changed row is logged again only if some worker has been
 * served past its latest entry (row meta version: the low 32 bits of that entry's position
 * + 1, checked against the entry itself); the pull skips every entry of a row but its latest,
 * so each changed row comes back once. The prefix every worker has passed is dropped, and
 * when the log would pass geo_log_max its oldest part goes regardless: a worker whose
 * position it held gets a full resync. O(changed rows) per pull, not O(table).
 */
struct ps_geo_log {
	uint32_t *e;
	uint32_t n, cap;
	uint64_t base;            /* logical position of e[0] */
	uint64_t max_pos;         /* furthest position any worker was served to */
};

struct ps_shard {
	uint32_t id, owner;
	struct ps_server *srv;
	struct ps_table *tables;  /* one per configured table */
	uint32_t n_tables;
	uint64_t *last_seq;       /* per worker: last applied push sequence (+1; 0 = none) */
	uint64_t *inc;            /* per worker: incarnation it said hello with (fence) */
	uint32_t push_mark;       /* stamp for duplicate detection */
	/* sync */
	uint32_t **touched;       /* per table: rows whose acc is non-zero this step */
	uint32_t *n_touched, *cap_touched;
	uint32_t sync_step;       /* steps applied, mod 2^32: marks the rows of this step */
	uint64_t step;            /* steps applied: the step pushes must carry */
	/* per worker: step + 1 of its last applied push (0 none), and that step's first sequence */
	uint64_t *pstep1, *pfirst;
	/* GEO */
	struct ps_geo_log *glog;  /* per table (sparse tables only log) */
	struct ps_geo_worker *geo; /* per worker x table */
	/* merge scratch for pushes with duplicate keys */
	uint32_t *rows;           /* max_keys */
	uint32_t *chain;          /* 2 x max_keys: a push's repeated keys (find_dups) */
	uint32_t *pos;            /* max_keys: request positions of the keys that have rows */
	float *merge;             /* one merged gradient row */
	float *scratch;           /* a row's new value and state, before it is known finite */
	uint32_t scratch_n;       /* its floats: the largest dim + state of the tables */
	struct ps_snap *snap;     /* in progress, or NULL */
	uint64_t cow_rows;        /* rows copied early because an apply came first */
	/*
	 * Counters: written only by the owner (load + store, no read-modify-write), read by
	 * anyone with relaxed loads: telemetry wants a recent value, not an ordering.
	 */
	_Atomic uint64_t n_push, n_pull, n_keys, n_dup, n_fail, n_cow, n_nonfinite;
	_Atomic uint64_t n_fenced, n_wrong_step;
	_Atomic uint64_t n_geo_log, n_geo_resync;
	int node;
};

/* A counter only its owner thread writes: a plain add, published for readers. */
static inline void ps_count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

void ps_snap_copy(struct ps_snap_table *st, const struct ps_table *t, uint32_t r);
/*
 * Before row r of table t changes: keeps its pre-snapshot contents if the snapshot still
 * needs them. si: t's snapshot table (ti, or n_tables + ti for its admission counters).
 */
static inline void ps_cow(struct ps_shard *sh, uint32_t si, const struct ps_table *t, uint32_t r)
{
	struct ps_snap_table *st;

	if (PS_LIKELY(!sh->snap))
		return;
	st = &sh->snap->t[si];
	if (r < st->n_rows && !(st->copied[r >> 6] & (1ull << (r & 63)))) {
		ps_snap_copy(st, t, r);
		sh->cow_rows++;
	}
}

int ps_shard_init(struct ps_shard *sh, struct ps_server *srv, uint32_t id, uint32_t owner, int node);
void ps_shard_fini(struct ps_shard *sh);
void ps_shard_run(struct ps_shard *sh, struct ps_op *op);
/* Copies up to budget rows of an in-progress snapshot. */
void ps_shard_snap_step(struct ps_shard *sh, uint32_t budget);
void ps_snap_free(struct ps_snap *s);

/* ---------------------------------------------------------------- memory policies */

/* A table whose pushes go through ps_mem.c: a cap, admission or eviction. */
static inline bool ps_mem_policed(const struct ps_table *t)
{
	return t->cap < PS_ROWS_MAX || t->pend || t->upd_off;
}
/*
 * Rows of a push op's keys on a policed table (async and GEO: the push is one step of the
 * table first): existing rows, and new keys the admission filter and the cap let in
 * (created); PS_ROW_NONE for the others, counted (admission_dropped; *full for the cap).
 * -ENOMEM/-ENOSPC before any row changed.
 */
int ps_mem_push_rows(struct ps_shard *sh, uint32_t ti, const struct ps_op *op, uint32_t *rows,
		     uint32_t *full);
/* Sync mode, at the end of a step: every table's clock moves on; evictions when due. */
void ps_mem_step(struct ps_shard *sh);
/* Row r was pushed now: its last-update step. */
static inline void ps_mem_stamp(struct ps_table *t, uint32_t r)
{
	if (t->upd_off)
		*ps_row_upd(t, r) = t->clock;
}

/* ---------------------------------------------------------------- server */

struct rte_ring;

struct ps_server {
	struct ps_server_config cfg;
	struct ps_table_config *tcfg;
	struct ps_shard *shards;
	struct rte_ring **rings;    /* [from * n_lcores + to], SPSC */
	int *lcore_node;            /* NUMA node per lcore slot, -1: no preference */
	struct ps_handler **handlers;
	uint32_t max_keys, max_dim;
	uint32_t geo_log_max;       /* GEO: entries per shard and table log */
	/* GEO: the next reply id (relaxed fetch-add per GEO pull; starts at a random value, so
	 * an id acknowledged to a server before its restart matches nothing after it) */
	_Atomic uint64_t geo_next_id;
	/*
	 * Barrier (server-wide; touched only by shard 0's owner): per worker 0 waited for, 1
	 * arrived at bar_step, 2 left out by a timeout (policy continue) until it returns.
	 */
	uint64_t bar_step;
	uint8_t *bar_seen;
	uint32_t bar_arrived, bar_gone;
	bool bar_applying;
	uint64_t bar_t0;            /* CLOCK_MONOTONIC ns the step's wait began; 0: not yet */
	uint64_t bar_told;          /* step + 1 whose timeout was reported */
	/*
	 * For any thread (ps_server_barrier_stats): copies the owner stores (relaxed) as they
	 * change; late: bitmap of the workers the last timeout found missing.
	 */
	_Atomic uint64_t pub_step, pub_t0, pub_timeouts, pub_dropped, pub_late_step;
	_Atomic uint32_t pub_arrived, pub_gone, pub_late_n;
	_Atomic uint64_t *pub_late;
	/* The server state's epoch: made at create, replaced by a restored checkpoint or log. */
	uint64_t epoch;
	bool epoch_restored;
	/*
	 * Save epoch in progress, 0 = none. Set by the saving handler (CAS from 0: one save at
	 * a time), read by every handler between requests, which then parks until it clears.
	 */
	_Atomic uint32_t pause;
	_Atomic uint32_t save_epoch;
	_Atomic uint32_t save_busy; /* a save job exists (ps_save_start .. ps_save_free) */
	/*
	 * Write-ahead log. wal_gen: the generation new records go to; bumped by a primary save
	 * while every other handler is parked (the pause/park pairs order it), loaded relaxed.
	 * wal_order: one number per logged request, the replay order across lcore slots (one
	 * relaxed fetch-add per request, not per key: the only RMW the log adds).
	 */
	char *wal_dir, *ckpt_path;
	size_t wal_seg;
	_Atomic uint64_t wal_gen;
	_Atomic uint64_t wal_order;
	uint32_t layout_crc;        /* of the table configs: a segment of another layout is refused */
};

/*
 * A handler's write-ahead log segment (ps_wal.c): a preallocated file mapped MAP_SHARED,
 * written only by the handler's thread. bytes is read by any thread (ps_server_wal_bytes).
 */
struct ps_wal {
	int fd;                  /* -1: none open */
	uint8_t *map;
	size_t size, off;        /* mapping size; next record's offset */
	size_t synced;           /* records before this offset were msynced */
	size_t populated;        /* pages below this offset are mapped writable (prefaulted) */
	uint64_t gen;            /* checkpoint generation of the open segment */
	uint32_t part;           /* segment number within (gen, slot) */
	_Atomic uint64_t bytes;  /* appended since the last primary cut (owner stores only) */
	/*
	 * cfg.wal_bg_sync: a dup of the open segment's fd for the sync thread, and a full
	 * segment's dup waiting for its last sync. Each is owned by whoever holds it: the sync
	 * thread takes one with an exchange for -1 and gives it back with a CAS (if the handler
	 * installed a newer one meanwhile, the old file is complete: synced once more, closed).
	 */
	_Atomic int sync_fd, retired_fd;
};

/* One per lcore slot; used by one thread. */
struct ps_handler {
	struct ps_server *s;
	uint32_t slot;
	uint32_t *idx;     /* request positions grouped by shard */
	uint32_t *cnt;     /* per shard */
	uint32_t *ksh;     /* the request's shard per key (hashed once) */
	struct ps_op *ops; /* per shard */
	uint32_t *ids;     /* n_workers: a barrier's missing or left-out workers */
	uint8_t *rec;      /* a PS_T_WAL_STEP record being built */
	bool in_request;   /* inside ps_handle: never park mid-request */
	bool replaying;    /* ps_recover: no logging, every shard run directly */
	struct ps_wal wal;
	_Atomic uint32_t parked; /* save epoch this handler is parked for */
	/* Cross-lcore op counts (ps_lcore_stats): stored by this handler's thread only,
	 * relaxed; read by any thread for telemetry. */
	_Atomic uint64_t data_ops_remote, ctl_ops_remote, ops_served;
};

/* Checkpoint cut (ps_server.c): park every other handler between requests. */
int ps_server_pause(struct ps_handler *h);
/*
 * ps_server_pause from inside a request (a sync step's apply, a hello that changes the
 * fence): while another handler holds the pause, this one parks for it (its state is whole:
 * what it changed so far is logged), then takes it. Never fails.
 */
void ps_server_pause_wait(struct ps_handler *h);
/* CLOCK_MONOTONIC in ns. */
uint64_t ps_now_ns(void);
void ps_server_resume(struct ps_handler *h);
void ps_handler_park_if_asked(struct ps_handler *h);

/* snprintf into err (may be NULL). */
void ps_errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ps_barrier_run(struct ps_server *s, struct ps_op *op);
/* Copies the barrier's state for other threads (after it changed, or was loaded). */
void ps_barrier_publish(struct ps_server *s);
/* A left-out worker said hello: the barrier waits for it again (shard 0's owner). */
void ps_barrier_readmit(struct ps_server *s, uint32_t w);
int ps_server_table_index(const struct ps_server *s, uint32_t table_id);
void ps_handler_run_op(struct ps_handler *h, uint32_t shard, struct ps_op *op);
void ps_handler_wait(struct ps_handler *h, struct ps_op *op);

/* Client internals shared with ps_client_wait.c. */
uint32_t ps_client_servers(const struct ps_client *c);
/* Forgets the callback, output and barrier flag of every request whose arg is `arg`. */
void ps_client_detach(struct ps_client *c, void *arg);

/* Checkpoint file (ps_ckpt.c). gen: the log generation the file's cut covers up to. */
int ps_ckpt_write(struct ps_server *s, struct ps_snap **snaps, uint64_t gen, const char *path,
		  uint64_t *rows_out, char *err, size_t errlen);
int ps_ckpt_read(struct ps_server *s, const char *path, uint64_t *gen, char *err, size_t errlen);
/* Empty tables, barrier and exactly-once state again, as before a load. */
void ps_ckpt_unload(struct ps_server *s);
/* Sync mode restore: row r of table ti has pending sum acc (dim floats, wire bytes). */
int ps_shard_sync_restore(struct ps_shard *sh, uint32_t ti, uint32_t r, const uint8_t *acc);
/*
 * GEO restore of table ti's log: rows[n] oldest first from position base (row versions set
 * from them), and max_pos. -ENOMEM, or -EINVAL when n passes geo_log_max.
 */
int ps_shard_geo_restore(struct ps_shard *sh, uint32_t ti, uint64_t base, uint64_t max_pos,
			 const uint32_t *rows, uint32_t n);
/*
 * GEO state that cannot be restored (a checkpoint without it, or cut over other shard or
 * worker counts): every worker's next GEO pull of every table is a full resync.
 */
void ps_shard_geo_resync_all(struct ps_shard *sh);
/* GEO: back to an empty log and no positions (a load that was refused). */
void ps_shard_geo_reset(struct ps_shard *sh);

/* Write-ahead log (ps_wal.c). */
/*
 * Appends request v (type stored as `type`: PUSH_PULL is logged as PUSH, its reply is not
 * needed to replay it) to h's segment. No-op without a log or while replaying. 0, or
 * -errno when no segment could take it (the request must then be refused unapplied).
 */
int ps_wal_append(struct ps_handler *h, const struct tl_msg_view *v, uint8_t type);
void ps_wal_close(struct ps_wal *w);
/* Deletes segment files of generations below gen (covered by a renamed checkpoint). */
int ps_wal_drop_before(struct ps_server *s, uint64_t gen);
/* Replays segments of generation >= gen; sets wal_gen/wal_order above what it found. */
int ps_wal_replay(struct ps_handler *h, uint64_t gen, struct ps_recover_stats *st, char *err,
		  size_t errlen);
/*
 * The generation from which the log holds every record (the floor file): written by a save
 * to cfg.ckpt_path before it deletes the segments it covers; read as -1 when there is none
 * (no such save yet). 0 or -errno (read: a damaged file is -EBADMSG, message in err).
 */
int ps_wal_floor_write(struct ps_server *s, uint64_t gen);
int ps_wal_floor_read(struct ps_server *s, int64_t *gen, char *err, size_t errlen);
/* Highest generation among the segment files, or -1 when there are none; -errno. */
int ps_wal_scan(struct ps_server *s, int64_t *max_gen, int64_t *min_gen);
/* fsync of directory dir, so a file created or renamed in it survives a power loss. 0, -errno. */
int ps_fsync_dir(const char *dir);
/* ps_handle for one log record: no logging, reply into rep. */
int ps_handle_replay(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep);

/* Replies (ps_handle.c) for the request handlers of ps_barrier.c. */
int ps_reply_text(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
		  enum ps_err_kind kind, const char *text);
/* The same with PS_F_RETRY: nothing was applied, the same request may pass later. */
int ps_reply_retry_text(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
			enum ps_err_kind kind, const char *text);
void ps_reply_hdr(struct ps_reply *rep, uint8_t type, const struct tl_msg_hdr *req,
		  uint32_t body_len);
/* PS_ERR_FENCED: rc -ESTALE (inc older than have) or -EPROTO (inc not said hello). */
int ps_reply_fenced(struct ps_reply *rep, const struct tl_msg_hdr *req, uint32_t worker,
		    uint64_t inc, uint64_t have, int rc);
/* PS_T_BARRIER, PS_T_HELLO and the log's PS_T_WAL_STEP (ps_barrier.c). */
int ps_handle_barrier(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep);
int ps_handle_hello(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep);
int ps_handle_wal_step(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep);

#endif /* WHARF_PS_PVT_H */
