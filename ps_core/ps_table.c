/*
 * ps_table.c — the shard-local table: a row arena plus, for sparse tables, a hand-written
 * open-addressing index. Called by ps_shard.c (lookups, reserve) on the owner lcore only.
 *
 * Why hand-written and not rte_hash: rte_hash stores a 16-byte-aligned key copy, a
 * signature array and bucket metadata (~2x our per-row overhead), grows only by a full
 * stop-the-world rebuild, and pays for multi-writer support we never use (one owner per
 * shard). Here a slot is 8 bytes (row index + 32 bits of hash), the key lives once in the
 * row, and the index grows incrementally: a grow allocates a table twice the size and
 * every later lookup moves a few old slots across (Redis-style progressive rehash), with
 * lookups checking the new table, then the old one, until the move is complete. Rows
 * never move (chunked arena), so a grow never touches row memory.
 *
 * Linear probing with a seeded 64-bit finalizer hash: adversarial keys (same low bits,
 * arithmetic progressions) spread like random ones. A row leaves the index by backward-shift
 * deletion (ps_table_remove), so there are no tombstones. Load factor stays <= 3/4.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <numa.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "ps_core/ps_pvt.h"

#define PS_MIGRATE_PER_LOOKUP 4u
#define PS_MIN_SLOTS 1024u

/*
 * Huge-page regions: an allocation of whole 2 MiB units (a large table's row regions, a
 * large slot index) is mapped 2 MiB-aligned and advised for transparent huge pages. A
 * shard's hot rows then cost a TLB entry per 2 MiB rather than per 4 KiB, and under a
 * hypervisor every TLB miss is a two-level page walk. Only advice: without THP the pages
 * are 4 KiB and nothing else changes.
 */
static bool huge_size(size_t bytes) { return bytes >= PS_HUGE_BYTES && bytes % PS_HUGE_BYTES == 0; }

static void *alloc_huge(size_t bytes, int node)
{
	uint8_t *m = mmap(NULL, bytes + PS_HUGE_BYTES, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *p;

	if (m == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)m + PS_HUGE_BYTES - 1) & ~(uintptr_t)(PS_HUGE_BYTES - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	munmap(p + bytes, (size_t)(m + PS_HUGE_BYTES - p));
	(void)madvise(p, bytes, MADV_HUGEPAGE);
	if (node >= 0 && numa_available() >= 0)
		numa_tonode_memory(p, bytes, node);
	return p; /* fresh pages: already zero */
}

void *ps_mem_alloc(size_t bytes, int node)
{
	void *p;

	if (bytes == 0)
		bytes = PS_CACHE_LINE;
	if (huge_size(bytes))
		return alloc_huge(bytes, node);
	if (node >= 0 && numa_available() >= 0)
		return numa_alloc_onnode(bytes, node); /* fresh pages: already zero */
	bytes = (bytes + PS_CACHE_LINE - 1) & ~(size_t)(PS_CACHE_LINE - 1);
	p = aligned_alloc(PS_CACHE_LINE, bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

int ps_mem_node_of_caller(void)
{
	int cpu;

	if (numa_available() < 0)
		return -1;
	cpu = sched_getcpu();
	return cpu < 0 ? -1 : numa_node_of_cpu(cpu);
}

/* Frees what ps_mem_alloc(bytes, node) returned. */
void ps_mem_free(void *p, size_t bytes, int node)
{
	if (!p)
		return;
	if (huge_size(bytes))
		munmap(p, bytes);
	else if (node >= 0 && numa_available() >= 0)
		numa_free(p, bytes ? bytes : PS_CACHE_LINE);
	else
		free(p);
}

uint32_t ps_optim_state_floats(enum ps_optim_kind k, uint32_t dim)
{
	switch (k) {
	case PS_OPT_ADAGRAD: return dim;
	case PS_OPT_ADAM: return 2 * dim + 2;   /* m, v, beta1^t, beta2^t */
	case PS_OPT_FTRL: return 2 * dim;       /* z, n */
	default: return 0;
	}
}

static size_t chunk_bytes(const struct ps_table *t) { return (size_t)t->stride * PS_CHUNK_ROWS; }

/*
 * Chunks of rows in one huge-page region: as many as fit in 2 MiB (one, rounded up to
 * whole 2 MiB, when a chunk is larger).
 */
static uint32_t reg_chunks(const struct ps_table *t)
{
	size_t cb = chunk_bytes(t);

	return cb >= PS_HUGE_BYTES ? 1 : (uint32_t)(PS_HUGE_BYTES / cb);
}

static size_t reg_bytes(const struct ps_table *t)
{
	size_t b = (size_t)reg_chunks(t) * chunk_bytes(t);

	return (b + PS_HUGE_BYTES - 1) & ~(size_t)(PS_HUGE_BYTES - 1);
}

/*
 * A table's first chunk of rows has pages of its own (a table of up to PS_CHUNK_ROWS rows
 * stays small); the chunks after it are carved from huge-page regions (ps_mem_alloc),
 * region k holding chunks n_solo + k * reg_chunks on. A region's unused part (up to 2 MiB a
 * table, less one chunk) is the price of the huge pages, so a table with a cap (max_rows,
 * max_bytes: what it may hold is what it may take) keeps every chunk on its own pages.
 */
static int add_chunk(struct ps_table *t)
{
	size_t cb = chunk_bytes(t);
	uint8_t *c;

	if (t->n_chunks == t->cap_chunks) {
		uint32_t cap = t->cap_chunks ? t->cap_chunks * 2 : 16;
		uint8_t **a = realloc(t->chunks, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		t->chunks = a;
		t->cap_chunks = cap;
	}
	if (t->n_chunks == t->n_solo && (t->n_chunks == 0 || t->cap < PS_ROWS_MAX)) {
		if (!(c = ps_mem_alloc(cb, t->node)))
			return -ENOMEM;
		t->n_solo++;
	} else if ((t->n_chunks - t->n_solo) % reg_chunks(t) == 0) {
		if (!(c = ps_mem_alloc(reg_bytes(t), t->node)))
			return -ENOMEM;
	} else {
		c = t->chunks[t->n_chunks - 1] + cb;
	}
	t->chunks[t->n_chunks++] = c;
	return 0;
}

/* splitmix64 step: the per-row initializer's generator. */
static inline uint64_t sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline double u01(uint64_t *s) { return (double)(sm64(s) >> 11) * (1.0 / 9007199254740992.0); }

/*
 * A key's initial values, from (seed, key) alone. The kind is chosen once, not per value:
 * a dim-16 row of zeros took 78 cycles and a normal one 1,660 (a logarithm, a square root
 * and a cosine per value) when the choice sat in the loop and Box-Muller's sine went unused;
 * every pull of a key without a row and every row a push makes pays this.
 */
void ps_table_init_values(const struct ps_table *t, uint64_t key, float *v)
{
	uint32_t d = t->cfg.dim, j;
	double a = t->cfg.init_a, w = t->cfg.init_b - t->cfg.init_a, b = t->cfg.init_b;
	uint64_t s;

	if (t->cfg.init == PS_INIT_ZEROS) {
		memset(v, 0, d * sizeof(float));
		return;
	}
	s = ps_mix64(t->cfg.seed ^ ps_mix64(key));
	if (t->cfg.init == PS_INIT_UNIFORM) {
		for (j = 0; j < d; j++)
			v[j] = (float)(a + w * u01(&s));
		return;
	}
	/* Normal (mean init_a, deviation init_b): Box-Muller, a pair of values per draw. */
	for (j = 0; j < d; j += 2) {
		float u1 = (float)u01(&s), th = (float)(2 * M_PI * u01(&s));
		float r = (float)b * sqrtf(-2.0f * logf(u1 > 0 ? u1 : FLT_MIN));
		v[j] = (float)a + r * cosf(th);
		if (j + 1 < d)
			v[j + 1] = (float)a + r * sinf(th);
	}
}

void ps_table_init_row(const struct ps_table *t, uint32_t r, uint64_t key)
{
	struct ps_row_meta *m = ps_row_meta(t, r);
	float *v = ps_row_val(t, r);
	uint32_t d = t->cfg.dim, j;

	m->key = key;
	m->version = 0;
	m->mark = 0;
	ps_table_init_values(t, key, v);
	memset(v + d, 0, ((size_t)t->sfl + (t->acc_off ? d : 0)) * sizeof(float));
	if (t->upd_off)
		*ps_row_upd(t, r) = t->clock;
	if (t->cfg.optim == PS_OPT_ADAGRAD)
		for (j = 0; j < d; j++)
			v[d + j] = t->cfg.op.init_accum;
	if (t->cfg.optim == PS_OPT_ADAM) {
		v[3 * d] = 1.0f;
		v[3 * d + 1] = 1.0f;
	}
}

static int alloc_slots(struct ps_table *t, uint32_t n_slots)
{
	struct ps_slot *s = ps_mem_alloc((size_t)n_slots * sizeof(*s), t->node);

	if (!s)
		return -ENOMEM;
	t->old = t->slots;
	t->old_mask = t->mask;
	t->mig = 0;
	t->slots = s;
	t->mask = n_slots - 1;
	t->limit = n_slots / 4 * 3;
	return 0;
}

/* Floats of a row: value, optimizer state and (sync) the step's sum. */
static uint32_t row_floats(const struct ps_table_config *cfg, bool sync_acc)
{
	return cfg->dim + ps_optim_state_floats(cfg->optim, cfg->dim) + (sync_acc ? cfg->dim : 0);
}

/* Byte offset of the last-update step: after the floats, 8-byte aligned. */
static uint32_t upd_offset(const struct ps_table_config *cfg, bool sync_acc)
{
	return (uint32_t)((sizeof(struct ps_row_meta) + row_floats(cfg, sync_acc) * sizeof(float) +
			   7) & ~7u);
}

uint32_t ps_table_stride(const struct ps_table_config *cfg, bool sync_acc)
{
	size_t end = sizeof(struct ps_row_meta) + row_floats(cfg, sync_acc) * sizeof(float);

	if (cfg->evict_after)
		end = upd_offset(cfg, sync_acc) + sizeof(uint64_t);
	return (uint32_t)((end + 15) & ~(size_t)15);
}

/*
 * The most a shard's table of `rows` rows can take: whole chunks of rows, an index sized for
 * them, and the half-size index a grow may still be moving.
 */
static uint64_t model_bytes(uint64_t rows, uint32_t stride)
{
	uint64_t slots = PS_MIN_SLOTS;

	while (slots / 4 * 3 < rows)
		slots *= 2;
	return (rows + PS_CHUNK_ROWS - 1) / PS_CHUNK_ROWS * PS_CHUNK_ROWS * stride +
	       slots * sizeof(struct ps_slot) * 3 / 2;
}

/* The most rows whose model_bytes fit in bytes (0: not even one). */
static uint32_t rows_in(uint64_t bytes, uint32_t stride)
{
	uint64_t lo = 0, hi = PS_ROWS_MAX;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		if (model_bytes(mid, stride) <= bytes)
			lo = mid;
		else
			hi = mid - 1;
	}
	return (uint32_t)lo;
}

int ps_table_caps(const struct ps_table_config *cfg, bool sync_acc, uint32_t n_shards,
		  uint32_t *rows, uint32_t *pend, char *err, size_t errlen)
{
	uint64_t q, qr, qp;
	bool adm = cfg->admit_after > 1;

	*rows = PS_ROWS_MAX;
	*pend = PS_ROWS_MAX;
	if (cfg->max_rows) {
		if (cfg->max_rows < n_shards) {
			ps_errf(err, errlen, "max_rows %llu is below the server's %u shards (each "
				"holds max_rows / shards rows)", (unsigned long long)cfg->max_rows,
				n_shards);
			return -EINVAL;
		}
		if (cfg->max_rows / n_shards < *rows)
			*rows = (uint32_t)(cfg->max_rows / n_shards);
		if (adm)
			*pend = *rows;
	}
	if (cfg->max_bytes == 0)
		return 0;
	/* The admission counters' share: 1/8, at least their first chunk. */
	q = cfg->max_bytes / n_shards;
	qp = adm ? q / 8 : 0;
	if (adm && qp < model_bytes(1, PS_PEND_STRIDE))
		qp = model_bytes(1, PS_PEND_STRIDE);
	qr = q > qp ? q - qp : 0;
	if (rows_in(qr, ps_table_stride(cfg, sync_acc)) == 0) {
		ps_errf(err, errlen, "max_bytes %llu leaves a shard (of %u) %llu bytes: below what "
			"its first rows%s take (%llu)", (unsigned long long)cfg->max_bytes,
			n_shards, (unsigned long long)q, adm ? " and admission counters" : "",
			(unsigned long long)(model_bytes(1, ps_table_stride(cfg, sync_acc)) +
					     (adm ? model_bytes(1, PS_PEND_STRIDE) : 0)));
		return -EINVAL;
	}
	if (rows_in(qr, ps_table_stride(cfg, sync_acc)) < *rows)
		*rows = rows_in(qr, ps_table_stride(cfg, sync_acc));
	if (adm && rows_in(qp, PS_PEND_STRIDE) < *pend)
		*pend = rows_in(qp, PS_PEND_STRIDE);
	return 0;
}

/* The admission counters of cfg: rows of dim 0 with a last-update step. */
static int pend_init(struct ps_table *t, uint32_t cap)
{
	struct ps_table_config pc = { .id = t->cfg.id, .kind = PS_TABLE_SPARSE, .evict_after = 1 };
	int rc;

	t->pend = calloc(1, sizeof(*t->pend));
	if (!t->pend)
		return -ENOMEM;
	if ((rc = ps_table_init(t->pend, &pc, false, 0, 0, t->node, 1)) < 0) {
		free(t->pend);
		t->pend = NULL;
		return rc;
	}
	t->pend->cap = cap;
	return 0;
}

int ps_table_init(struct ps_table *t, const struct ps_table_config *cfg, bool sync_acc,
		  uint64_t dense_first, uint64_t dense_rows, int node, uint32_t n_shards)
{
	uint32_t r, pend_cap;
	int rc;

	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	t->node = node;
	t->sfl = ps_optim_state_floats(cfg->optim, cfg->dim);
	if (sync_acc)
		t->acc_off = cfg->dim + t->sfl;
	t->stride = ps_table_stride(cfg, sync_acc);
	t->free_head = PS_ROW_NONE;
	t->cap = PS_ROWS_MAX;
	if (cfg->kind == PS_TABLE_SPARSE) {
		if ((rc = ps_table_caps(cfg, sync_acc, n_shards, &t->cap, &pend_cap, NULL, 0)) < 0)
			return rc;
		if (cfg->evict_after)
			t->upd_off = upd_offset(cfg, sync_acc);
		if (alloc_slots(t, PS_MIN_SLOTS) < 0)
			return -ENOMEM;
		t->old = NULL;
		if (cfg->admit_after > 1 && pend_init(t, pend_cap) < 0)
			goto out_fini;
		return 0;
	}
	if (dense_rows > UINT32_MAX / 2)
		return -EINVAL;
	t->dense_first = dense_first;
	while ((uint64_t)t->n_chunks * PS_CHUNK_ROWS < dense_rows)
		if (add_chunk(t) < 0)
			goto out_fini;
	for (r = 0; r < dense_rows; r++)
		ps_table_init_row(t, r, dense_first + r);
	t->n_rows = (uint32_t)dense_rows;
	return 0;
out_fini:
	ps_table_fini(t);
	return -ENOMEM;
}

void ps_table_fini(struct ps_table *t)
{
	uint32_t i;

	if (!t)
		return;
	if (t->pend) {
		ps_table_fini(t->pend);
		free(t->pend);
	}
	for (i = 0; i < t->n_solo; i++)
		ps_mem_free(t->chunks[i], chunk_bytes(t), t->node);
	for (; i < t->n_chunks; i += reg_chunks(t))
		ps_mem_free(t->chunks[i], reg_bytes(t), t->node);
	free(t->chunks);
	if (t->slots)
		ps_mem_free(t->slots, ((size_t)t->mask + 1) * sizeof(struct ps_slot), t->node);
	if (t->old)
		ps_mem_free(t->old, ((size_t)t->old_mask + 1) * sizeof(struct ps_slot), t->node);
	memset(t, 0, sizeof(*t));
}

#define PS_PF_DIST 12u /* keys between the stages of a batch lookup's pipeline */
#define PS_SLOTS_PER_LINE (PS_CACHE_LINE / (uint32_t)sizeof(struct ps_slot))

static inline uint32_t probe(const struct ps_table *t, const struct ps_slot *s, uint32_t mask,
			     uint32_t h, uint64_t key, uint32_t *pos)
{
	uint32_t i = h & mask;

	for (;;) {
		uint32_t r1 = s[i].row1;
		if (r1 == 0) {
			*pos = i;
			return UINT32_MAX;
		}
		if (s[i].h == h && ps_row_meta(t, r1 - 1)->key == key)
			return r1 - 1;
		i = (i + 1) & mask;
	}
}

static inline void place(struct ps_slot *s, uint32_t mask, uint32_t h, uint32_t row1)
{
	uint32_t i = h & mask;

	while (s[i].row1)
		i = (i + 1) & mask;
	s[i].row1 = row1;
	s[i].h = h;
}

/* Moves up to `budget` slots of the old index into the new one. */
static void migrate_some(struct ps_table *t, uint32_t budget)
{
	while (t->old && budget--) {
		struct ps_slot *o = &t->old[t->mig];
		if (o->row1)
			place(t->slots, t->mask, o->h, o->row1);
		if (t->mig++ == t->old_mask) {
			ps_mem_free(t->old, ((size_t)t->old_mask + 1) * sizeof(struct ps_slot), t->node);
			t->old = NULL;
		}
	}
}

/* Called once per lookup: the common case, no move under way, costs a test, not a call. */
static inline void migrate(struct ps_table *t, uint32_t budget)
{
	if (PS_UNLIKELY(t->old != NULL))
		migrate_some(t, budget);
}

static inline uint32_t find_h(const struct ps_table *t, uint64_t key, uint32_t h, uint32_t *pos)
{
	uint32_t r = probe(t, t->slots, t->mask, h, key, pos), dummy;

	if (r == UINT32_MAX && t->old)
		r = probe(t, t->old, t->old_mask, h, key, &dummy);
	return r;
}

uint32_t ps_table_find(const struct ps_table *t, uint64_t key)
{
	uint32_t pos;

	if (t->cfg.kind == PS_TABLE_DENSE)
		return key - t->dense_first < t->n_rows ? (uint32_t)(key - t->dense_first) : UINT32_MAX;
	return find_h(t, key, ps_slot_hash(key), &pos);
}

int ps_table_reserve(struct ps_table *t, uint32_t n)
{
	uint64_t need = (uint64_t)ps_table_live(t) + n;
	uint64_t arena = (uint64_t)t->n_rows + (n > t->n_free ? n - t->n_free : 0);

	if (arena >= UINT32_MAX / 2)
		return -ENOSPC;
	while ((uint64_t)t->n_chunks * PS_CHUNK_ROWS < arena)
		if (add_chunk(t) < 0)
			return -ENOMEM;
	if (need <= t->limit)
		return 0;
	/* Only when inserts outran the progressive move (a huge batch): finish it now. */
	migrate(t, UINT32_MAX);
	uint64_t slots = ((uint64_t)t->mask + 1) * 2;
	while (slots / 4 * 3 < need)
		slots *= 2;
	if (slots > (1ull << 31))
		return -ENOSPC;
	return alloc_slots(t, (uint32_t)slots);
}

uint32_t ps_table_next_row(const struct ps_table *t)
{
	return t->free_head != PS_ROW_NONE ? t->free_head : t->n_rows;
}

static uint32_t insert_at(struct ps_table *t, uint64_t key, uint32_t h, uint32_t pos)
{
	uint32_t r;

	if (t->free_head != PS_ROW_NONE) {
		r = t->free_head;
		t->free_head = (uint32_t)ps_row_meta(t, r)->key;
		t->n_free--;
	} else {
		r = t->n_rows++;
	}
	ps_table_init_row(t, r, key);
	t->slots[pos].row1 = r + 1;
	t->slots[pos].h = h;
	return r;
}

uint32_t ps_table_insert(struct ps_table *t, uint64_t key)
{
	uint32_t pos, h = ps_slot_hash(key);

	if (find_h(t, key, h, &pos) != UINT32_MAX)
		return UINT32_MAX;
	return insert_at(t, key, h, pos);
}

/*
 * Linear probing's deletion without tombstones (Knuth's algorithm R): empty the slot, then
 * move back every later slot of the run whose home is not between the hole and it.
 */
void ps_table_remove(struct ps_table *t, uint32_t r)
{
	struct ps_row_meta *m = ps_row_meta(t, r);
	uint32_t h = ps_slot_hash(m->key), i, j, home;

	migrate(t, UINT32_MAX); /* one index to delete from */
	for (i = h & t->mask; t->slots[i].row1 != r + 1; i = (i + 1) & t->mask)
		;
	for (j = i;;) {
		j = (j + 1) & t->mask;
		if (t->slots[j].row1 == 0)
			break;
		home = t->slots[j].h & t->mask;
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		t->slots[i] = t->slots[j];
		i = j;
	}
	t->slots[i].row1 = 0;
	*ps_row_upd(t, r) = PS_ROW_FREE;
	m->key = t->free_head;
	t->free_head = r;
	t->n_free++;
}

const uint8_t *ps_span_slow(struct ps_span *s, uint32_t o, void *tmp)
{
	uint32_t avail;
	const uint8_t *p = tl_cur_span(&s->cur, o, &avail);

	/* The request's length was checked against its record count: never past the body. */
	if (avail < s->size)
		return tl_cur_get(&s->cur, o, s->size, tmp);
	s->base = p - o;
	s->lo = o;
	s->hi = o + avail;
	return p;
}

uint32_t ps_span_pieces(struct ps_span *s, uint32_t p, struct ps_parts *out)
{
	uint32_t o = s->off + p * s->size, left = s->size, n = 0, avail, part = 0, k;
	uint8_t *carry = out->carry;
	const uint8_t *q;

	out->n = 0;
	while (left > 0) {
		/* The request's length was checked against its record count: never past it. */
		if ((q = tl_cur_span(&s->cur, o, &avail)) == NULL)
			return 0;
		s->base = q - o;
		s->lo = o;
		s->hi = o + avail;
		if (avail > left)
			avail = left;
		o += avail;
		left -= avail;
		if (part > 0) { /* the rest of a float the previous piece began */
			k = 4 - part < avail ? 4 - part : avail;
			avail -= k;
			while (k-- > 0) /* 1 to 3 bytes: no call to memcpy */
				carry[part++] = *q++;
			if (part < 4)
				continue;
			if (n == PS_SPAN_PIECES)
				return 0;
			out->at[n] = carry;
			out->len[n++] = 4;
			carry += 4;
			part = 0;
		}
		if (avail >= 4) {
			if (n == PS_SPAN_PIECES)
				return 0;
			out->at[n] = q;
			out->len[n++] = avail & ~3u;
		}
		if ((part = avail & 3) != 0) { /* a float this piece only begins: a part more */
			if (n == PS_SPAN_PIECES)
				return 0;
			for (k = 0; k < part; k++)
				carry[k] = q[(avail & ~3u) + k];
		}
	}
	return out->n = n;
}

/*
 * The lookup pipeline (rows[] holds the hashes ahead of the key being resolved): key j is
 * hashed and its home slot prefetched PS_PF_DIST keys ahead of the row prefetch, which
 * reads the slots of that cache line from the home slot on (there by then) and prefetches
 * the row the first one whose tag matches names (almost always the key's row; a key that
 * linear probing placed past its home slot is found too), PS_PF_DIST keys ahead of the
 * resolve. The resolve reads
 * the row's first line (its key); the rest of the row is prefetched there, for the update
 * that follows the whole batch's lookups (the apply's own prefetch, a few rows ahead, comes
 * too late for a row in memory). A move or an insert meanwhile only makes a prefetch
 * useless: the resolving probe does the lookup again.
 */
static inline void pf_slot(const struct ps_table *t, uint64_t key, uint32_t j, uint32_t *rows)
{
	rows[j] = ps_slot_hash(key);
	__builtin_prefetch(&t->slots[rows[j] & t->mask]);
}

static inline void pf_row(const struct ps_table *t, uint32_t h)
{
	uint32_t i = h & t->mask;

	for (;;) {
		const struct ps_slot *s = &t->slots[i];
		if (s->row1 == 0)
			return;
		if (s->h == h) {
			__builtin_prefetch(ps_row(t, s->row1 - 1));
			return;
		}
		i = (i + 1) & t->mask;
		if ((i & (PS_SLOTS_PER_LINE - 1)) == 0)
			return;
	}
}

/* Keys of the batch as the pipeline reads them (k->flat, k->idx loaded once). */
#define KEY(j) ps_key_fast(keys, flat, idx, (j))

static void pf_start(const struct ps_table *t, struct ps_keys *keys, uint32_t n, uint32_t *rows)
{
	const uint8_t *flat = keys->flat;
	const uint32_t *idx = keys->idx;
	uint32_t j;

	for (j = 0; j < n && j < 2 * PS_PF_DIST; j++)
		pf_slot(t, KEY(j), j, rows);
	for (j = 0; j < n && j < PS_PF_DIST; j++)
		pf_row(t, rows[j]);
}

/* The pipeline's step before key i resolves: the slot of key i + 2 * PS_PF_DIST, the row of
 * key i + PS_PF_DIST. */
static inline void pf_ahead(const struct ps_table *t, struct ps_keys *keys, const uint8_t *flat,
			    const uint32_t *idx, uint32_t i, uint32_t n, uint32_t *rows)
{
	if (i + 2 * PS_PF_DIST < n)
		pf_slot(t, KEY(i + 2 * PS_PF_DIST), i + 2 * PS_PF_DIST, rows);
	if (i + PS_PF_DIST < n)
		pf_row(t, rows[i + PS_PF_DIST]);
}

/*
 * Rows of n keys without creating any (rows[] the hash scratch too): the pipeline of
 * ps_table_lookup_batch (a key's slot 2 * PS_PF_DIST keys ahead, its row's first line
 * PS_PF_DIST ahead), and a found row's lines past its first (the resolve read that one) for
 * the copy out after the batch. Without the row stage the resolve waited on the row's key:
 * wharf-shard-bench's dim-16 pulls measured 22.9 M keys per CPU-second against 27.4 M with
 * it (medians of 10 interleaved runs).
 */
void ps_table_find_batch(const struct ps_table *t, struct ps_keys *keys, uint32_t n,
			 uint32_t *rows)
{
	const uint8_t *flat = keys->flat;
	const uint32_t *idx = keys->idx;
	uint32_t i, pos;

	pf_start(t, keys, n, rows);
	for (i = 0; i < n; i++) {
		pf_ahead(t, keys, flat, idx, i, n, rows);
		rows[i] = find_h(t, KEY(i), rows[i], &pos);
		if (rows[i] != UINT32_MAX)
			ps_row_prefetch_rest(t, rows[i], 0);
	}
}

void ps_table_lookup_batch(struct ps_table *t, struct ps_keys *keys, uint32_t n, uint32_t *rows,
			   struct ps_dups *dups)
{
	const uint8_t *flat = keys->flat;
	const uint32_t *idx = keys->idx;
	uint32_t i, pos;

	if (t->cfg.kind == PS_TABLE_DENSE) { /* a range of distinct rows: no repeats */
		for (i = 0; i < n; i++)
			rows[i] = (uint32_t)(KEY(i) - t->dense_first);
		return;
	}
	pf_start(t, keys, n, rows);
	for (i = 0; i < n; i++) {
		uint64_t key = KEY(i);
		uint32_t h = rows[i], r;
		pf_ahead(t, keys, flat, idx, i, n, rows);
		migrate(t, PS_MIGRATE_PER_LOOKUP);
		r = find_h(t, key, h, &pos);
		if (r == UINT32_MAX)
			r = insert_at(t, key, h, pos);
		rows[i] = r;
		if (dups)
			ps_dups_note(dups, ps_row_meta(t, r), i, n);
		ps_row_prefetch_rest(t, r, 1);
	}
}

#undef KEY

uint64_t ps_table_bytes(const struct ps_table *t)
{
	uint64_t b = (uint64_t)t->n_chunks * chunk_bytes(t) + (t->pend ? ps_table_bytes(t->pend) : 0);

	if (t->slots)
		b += ((uint64_t)t->mask + 1) * sizeof(struct ps_slot);
	if (t->old)
		b += ((uint64_t)t->old_mask + 1) * sizeof(struct ps_slot);
	return b;
}
