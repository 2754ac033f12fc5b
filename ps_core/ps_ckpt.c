/*
 * ps_ckpt.c — checkpoints. ps_save asks every shard's owner for a copy-on-write snapshot
 * (ps_shard.c: values and optimizer state of every row from one moment, copied between
 * ops so applies go on) at one cut — every other handler is parked between two requests
 * while the snapshots begin, so no request is half in it — then writes them to <path>.tmp,
 * appends a CRC32C, fsyncs, renames onto path and fsyncs the directory. ps_load checks the
 * structure before loading anything and streams the rest (see "restore" below).
 * Control plane: called from ps_handle (PS_T_SAVE) or by the server's owner (psd).
 *
 * File (little-endian):
 *   header   8 "WHFCKPT1", u32 version 1, u32 n_tables, u32 server_id, u32 n_servers,
 *            u32 mode, u32 0
 *   tables   per table: u32 id, u32 kind, u32 dim, u32 optim, u32 state floats, u32 flags
 *            (version 3; bit 0: the table evicts, its row records carry an age), u64 rows in
 *            file, u64 dense_rows
 *   rows     per table, per row: u64 key, (dim + state) x f32, [u64 age: the table's clock
 *            at the cut minus the row's last-update step]
 *   seqs     u32 n_shards, u32 n_workers, then per shard per worker the u64 last applied
 *            push sequence (exactly-once state of the same cut; restored when the
 *            shard and worker counts match, so a resent push already in it stays single)
 *   fence    (version 4) u64 the server state's epoch, u32 n_shards, u32 n_workers, then
 *            per shard per worker: u64 the incarnation it said hello with, u64 the sequence
 *            of its first push applied in the cut's sync step (0 none); restored as seqs
 *   durable  (version 2) u64 log generation the cut covers up to (ps_wal.c: segments of
 *            lower generations hold nothing the file lacks), u64 barrier step, u32 sync
 *            step, u32 n_workers, n_workers bytes (0 waited for, 1 reached the barrier step, 2 left
 *            out by a barrier timeout), zeros to 8;
 *            then, when the file's mode is sync, per table: u64 count, count x (u64 key,
 *            dim x f32 the step's pending gradient sum of that row)
 *   memory   (version 3) the memory policies' state (ps_mem.c): u32 n_shards, u32 0; per
 *            table: n_shards x u64 clock (the table's steps on each shard), u64 admission
 *            counters, each u64 key, u32 pushes counted, u32 0, u64 age
 *   geo      (version 5, when the file's mode is GEO) u32 n_shards, u32 n_workers, then per
 *            shard, per sparse table: u64 log base, u64 max_pos, u64 entries n, n x u64 key
 *            (the change log, oldest first), then per worker u64 committed position, u32 1
 *            when a full resync was under way (it starts over), u32 0. Restored when the
 *            shard and worker counts match (an entry whose key is not in the file, a row
 *            evicted by the cut, stays as a hole); otherwise, and from files without it,
 *            every worker's next GEO pull is a full resync
 *   trailer  u64 bytes before the trailer, u32 CRC32C of those bytes, u32 0
 * Every length and offset is 64-bit; the CRC32C is taken in chunks of at most CK_IO bytes
 * (rte_hash_crc's length is 32-bit; the chunks chain). Version 1 files (no durable section),
 * version 2 files (no memory section: every row as fresh as the cut), version 3 files (no
 * fence section) and version 4 files (no GEO section) still load. With a log, ps_recover =
 * this file + the log records after its cut, when the log continues it (its floor file,
 * ps_wal.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_hash_crc.h>

#include "ps_core/ps_pvt.h"

#define CK_MAGIC "WHFCKPT1"
#define CK_VERSION 5u
#define CK_F_AGES 1u /* table flag: row records carry an age */
#define CK_PAD8(x) (((x) + 7ull) & ~7ull)
#define CK_HDR 32u
#define CK_TDESC 40u
#define CK_TRAILER 16u
#define CK_IO (1u << 20) /* write and read buffer, and the CRC's step */

struct ck_out {
	int fd;
	uint8_t *buf;
	size_t len, cap;
	uint64_t total;
	uint32_t crc;
	int err;
};

static void ck_flush(struct ck_out *o)
{
	size_t off = 0;

	while (!o->err && off < o->len) {
		ssize_t w = write(o->fd, o->buf + off, o->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			o->err = w < 0 ? -errno : -EIO;
		else
			off += (size_t)w;
	}
	o->len = 0;
}

/* CRC32C (seeded, no final xor: chunks chain) of n bytes, any n: rte_hash_crc takes a u32. */
static uint32_t ck_crc(const void *p, uint64_t n, uint32_t crc)
{
	const uint8_t *b = p;

	while (n > 0) {
		uint32_t m = n < CK_IO ? (uint32_t)n : CK_IO;
		crc = rte_hash_crc(b, m, crc);
		b += m;
		n -= m;
	}
	return crc;
}

static void ck_put(struct ck_out *o, const void *p, size_t n)
{
	const uint8_t *b = p;

	o->crc = ck_crc(p, n, o->crc);
	o->total += n;
	while (n) {
		size_t m = o->cap - o->len < n ? o->cap - o->len : n;
		memcpy(o->buf + o->len, b, m);
		o->len += m;
		b += m;
		n -= m;
		if (o->len == o->cap)
			ck_flush(o);
	}
}

static void ck_u32(struct ck_out *o, uint32_t v) { uint8_t b[4]; tl_st32(b, v); ck_put(o, b, 4); }
static void ck_u64(struct ck_out *o, uint64_t v) { uint8_t b[8]; tl_st64(b, v); ck_put(o, b, 8); }

/* A snapshot copy of a row of tb: not a free row? (its step, when kept, is not PS_ROW_FREE) */
static bool snap_live(const struct ps_table *tb, const uint8_t *row)
{
	uint64_t u;

	if (!tb->upd_off)
		return true;
	memcpy(&u, row + tb->upd_off, sizeof(u));
	return u != PS_ROW_FREE;
}

/* The row's age at the cut: the clock minus its last-update step. */
static uint64_t snap_age(const struct ps_table *tb, const struct ps_snap_table *st,
			 const uint8_t *row)
{
	uint64_t u;

	memcpy(&u, row + tb->upd_off, sizeof(u));
	return u < st->clock ? st->clock - u : 0;
}

/* Rows in use of snapshot table t (si: in snaps[i]->t) over all shards. */
static uint64_t snap_rows(struct ps_server *s, struct ps_snap **snaps, const struct ps_table *tb,
			  uint32_t si)
{
	uint64_t n = 0;
	uint32_t i, r;

	for (i = 0; i < s->cfg.n_shards; i++) {
		const struct ps_snap_table *st = &snaps[i]->t[si];
		if (!tb->upd_off) {
			n += st->n_rows;
			continue;
		}
		for (r = 0; r < st->n_rows; r++)
			n += snap_live(tb, st->rows + (size_t)r * tb->stride);
	}
	return n;
}

static void write_body(struct ck_out *o, struct ps_server *s, struct ps_snap **snaps, uint64_t *rows)
{
	uint32_t t, i, r, nt = s->cfg.n_tables;

	ck_put(o, CK_MAGIC, 8);
	ck_u32(o, CK_VERSION);
	ck_u32(o, nt);
	ck_u32(o, s->cfg.server_id);
	ck_u32(o, s->cfg.n_servers);
	ck_u32(o, s->cfg.mode);
	ck_u32(o, 0);
	for (t = 0; t < nt; t++) {
		const struct ps_table_config *c = &s->tcfg[t];
		const struct ps_table *tb = &s->shards[0].tables[t];
		ck_u32(o, c->id);
		ck_u32(o, c->kind);
		ck_u32(o, c->dim);
		ck_u32(o, c->optim);
		ck_u32(o, ps_optim_state_floats(c->optim, c->dim));
		ck_u32(o, tb->upd_off ? CK_F_AGES : 0);
		ck_u64(o, snap_rows(s, snaps, tb, t));
		ck_u64(o, c->kind == PS_TABLE_DENSE ? c->dense_rows : 0);
	}
	for (t = 0; t < nt; t++) {
		const struct ps_table *tb = &s->shards[0].tables[t];
		size_t fl = (size_t)tb->cfg.dim + tb->sfl;
		for (i = 0; i < s->cfg.n_shards; i++) {
			const struct ps_snap_table *st = &snaps[i]->t[t];
			for (r = 0; r < st->n_rows; r++) {
				const uint8_t *row = st->rows + (size_t)r * tb->stride;
				if (!snap_live(tb, row))
					continue;
				ck_u64(o, ((const struct ps_row_meta *)row)->key);
				ck_put(o, row + sizeof(struct ps_row_meta), fl * sizeof(float));
				if (tb->upd_off)
					ck_u64(o, snap_age(tb, st, row));
				++*rows;
			}
		}
	}
	ck_u32(o, s->cfg.n_shards);
	ck_u32(o, s->cfg.n_workers);
	for (i = 0; i < s->cfg.n_shards; i++)
		for (r = 0; r < s->cfg.n_workers; r++)
			ck_u64(o, snaps[i]->last_seq[r]);
	ck_u64(o, s->epoch);
	ck_u32(o, s->cfg.n_shards);
	ck_u32(o, s->cfg.n_workers);
	for (i = 0; i < s->cfg.n_shards; i++)
		for (r = 0; r < s->cfg.n_workers; r++) {
			ck_u64(o, snaps[i]->inc[r]);
			ck_u64(o, snaps[i]->step_first[r]);
		}
}

/* Rows of snapshot table st whose sum was touched in the cut's step (sync mode). */
static bool snap_touched(const struct ps_snap *sn, const struct ps_snap_table *st,
			 const struct ps_table *tb, uint32_t r)
{
	const uint8_t *row = st->rows + (size_t)r * tb->stride;
	const struct ps_row_meta *m = (const void *)row;

	return m->version == sn->sync_step + 1 && snap_live(tb, row);
}

/* Version 3: each table's clocks, then its admission counters (ps_mem.c). */
static void write_memory(struct ck_out *o, struct ps_server *s, struct ps_snap **snaps)
{
	uint32_t nt = s->cfg.n_tables, ns = s->cfg.n_shards, t, i, r;

	ck_u32(o, ns);
	ck_u32(o, 0);
	for (t = 0; t < nt; t++) {
		const struct ps_table *pb = s->shards[0].tables[t].pend;
		uint64_t n = 0;
		for (i = 0; i < ns; i++)
			ck_u64(o, snaps[i]->t[t].clock);
		if (pb)
			n = snap_rows(s, snaps, pb, nt + t);
		ck_u64(o, n);
		for (i = 0; pb && i < ns; i++) {
			const struct ps_snap_table *st = &snaps[i]->t[nt + t];
			for (r = 0; r < st->n_rows; r++) {
				const uint8_t *row = st->rows + (size_t)r * pb->stride;
				const struct ps_row_meta *m = (const void *)row;
				if (!snap_live(pb, row))
					continue;
				ck_u64(o, m->key);
				ck_u32(o, m->version);
				ck_u32(o, 0);
				ck_u64(o, snap_age(pb, st, row));
			}
		}
	}
}

static void write_durable(struct ck_out *o, struct ps_server *s, struct ps_snap **snaps, uint64_t gen)
{
	static const uint8_t zero[8];
	uint32_t nw = s->cfg.n_workers, t, i, r;

	ck_u64(o, gen);
	ck_u64(o, snaps[0]->bar_step);
	ck_u32(o, snaps[0]->sync_step);
	ck_u32(o, nw);
	ck_put(o, snaps[0]->bar_seen, nw);
	ck_put(o, zero, CK_PAD8(nw) - nw);
	if (s->cfg.mode != PS_MODE_SYNC)
		return;
	for (t = 0; t < s->cfg.n_tables; t++) {
		const struct ps_table *tb = &s->shards[0].tables[t];
		uint64_t n = 0;
		for (i = 0; i < s->cfg.n_shards; i++)
			for (r = 0; r < snaps[i]->t[t].n_rows; r++)
				n += snap_touched(snaps[i], &snaps[i]->t[t], tb, r);
		ck_u64(o, n);
		for (i = 0; i < s->cfg.n_shards; i++) {
			const struct ps_snap_table *st = &snaps[i]->t[t];
			for (r = 0; r < st->n_rows; r++) {
				const uint8_t *row = st->rows + (size_t)r * tb->stride;
				if (!snap_touched(snaps[i], st, tb, r))
					continue;
				ck_u64(o, ((const struct ps_row_meta *)row)->key);
				ck_put(o, row + sizeof(struct ps_row_meta) + tb->acc_off * sizeof(float),
				       (size_t)tb->cfg.dim * sizeof(float));
			}
		}
	}
}

/*
 * Version 5, GEO mode: each shard's change logs as keys, and the committed positions. An
 * entry of a row evicted by the cut writes that row's last key: the load finds no such row
 * (a hole) or the key's new row, which is then merely sent once more.
 */
static void write_geo(struct ck_out *o, struct ps_server *s, struct ps_snap **snaps)
{
	uint32_t ns = s->cfg.n_shards, nw = s->cfg.n_workers, nt = s->cfg.n_tables, i, t, j, w;

	ck_u32(o, ns);
	ck_u32(o, nw);
	for (i = 0; i < ns; i++)
		for (t = 0; t < nt; t++) {
			const struct ps_snap_geo *g = &snaps[i]->geo[t];
			const struct ps_snap_table *st = &snaps[i]->t[t];
			uint32_t stride = s->shards[0].tables[t].stride;
			if (s->tcfg[t].kind != PS_TABLE_SPARSE)
				continue;
			ck_u64(o, g->base);
			ck_u64(o, g->max_pos);
			ck_u64(o, g->n);
			/* Logged rows existed at the cut: each is in the snapshot. A hole writes
			 * key 0: at worst that key's row is sent once more after a restore. */
			for (j = 0; j < g->n; j++)
				ck_u64(o, g->e[j] == PS_GEO_HOLE ? 0 : ((const struct ps_row_meta *)
					(st->rows + (size_t)g->e[j] * stride))->key);
			for (w = 0; w < nw; w++) {
				const struct ps_geo_pos *p = &snaps[i]->geo_seen[w * nt + t];
				ck_u64(o, p->pos);
				ck_u32(o, p->row != PS_GEO_NO_RESYNC);
				ck_u32(o, 0);
			}
		}
}

/* fsync of the directory holding path (the rename into it must survive a power loss). */
static int fsync_dir(const char *path)
{
	char *dup = strdup(path);
	int rc;

	if (!dup)
		return -ENOMEM;
	rc = ps_fsync_dir(dirname(dup));
	free(dup);
	return rc;
}

int ps_ckpt_write(struct ps_server *s, struct ps_snap **snaps, uint64_t gen, const char *path,
		  uint64_t *rows_out, char *err, size_t errlen)
{
	char tmp[4200];
	struct ck_out o = { .cap = CK_IO, .crc = 0xffffffffu };
	uint64_t rows = 0, total;
	uint8_t tr[CK_TRAILER];
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		ps_errf(err, errlen, "checkpoint path too long");
		return -ENAMETOOLONG;
	}
	o.buf = malloc(o.cap);
	if (!o.buf)
		return -ENOMEM;
	o.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o.fd < 0) {
		rc = -errno;
		ps_errf(err, errlen, "%s: %s", tmp, strerror(-rc));
		free(o.buf);
		return rc;
	}
	write_body(&o, s, snaps, &rows);
	write_durable(&o, s, snaps, gen);
	write_memory(&o, s, snaps);
	if (s->cfg.mode == PS_MODE_GEO)
		write_geo(&o, s, snaps);
	total = o.total;
	tl_st64(tr, total);
	tl_st32(tr + 8, o.crc);
	tl_st32(tr + 12, 0);
	ck_put(&o, tr, sizeof(tr));
	ck_flush(&o);
	rc = o.err;
	if (rc == 0 && fsync(o.fd) < 0)
		rc = -errno;
	if (close(o.fd) < 0 && rc == 0)
		rc = -errno;
	free(o.buf);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc == 0)
		rc = fsync_dir(path);
	if (rc < 0) {
		ps_errf(err, errlen, "writing checkpoint %s: %s", path, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	*rows_out = rows;
	PS_LOG(DEBUG, "ps_save: checkpoint %s written: generation %llu, %llu rows, %llu bytes", path,
	       (unsigned long long)gen, (unsigned long long)rows, (unsigned long long)total + CK_TRAILER);
	return 0;
}

/* ---------------------------------------------------------------- restore */

/*
 * A load streams the file front to back through one CK_IO buffer, so a checkpoint of any
 * size costs a megabyte of memory here (the rows themselves go straight into the tables),
 * and the CRC32C is taken of each chunk as it is read. The structure (header, table list,
 * every section's length, all 64-bit) is checked first from a few preads, so a file whose
 * parts do not add up is refused before any row is loaded; rows are loaded as they stream
 * by, and a checksum that does not match at the end, or a row refused on the way, puts
 * the tables back to empty (ps_ckpt_unload). The checksum speaks first: a damaged file is
 * refused as damaged, whatever else it shows.
 */
struct ck_in {
	int fd;
	uint8_t *buf;
	uint32_t pos, len;   /* unread bytes: buf[pos, len) */
	uint64_t off;        /* file offset of buf[len] */
	uint64_t body;       /* bytes before the trailer: what the CRC covers */
	uint32_t crc;        /* CRC32C of the bytes [0, off) */
};

static int ck_pread(int fd, uint64_t off, void *dst, size_t n)
{
	uint8_t *p = dst;

	while (n > 0) {
		ssize_t r = pread(fd, p, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO; /* short: the file shrank under us */
		p += r;
		off += (uint64_t)r;
		n -= (size_t)r;
	}
	return 0;
}

/* The next chunk of the body into the buffer, and into the CRC. */
static int ck_fill(struct ck_in *in)
{
	uint64_t left = in->body - in->off;
	uint32_t n = left < CK_IO ? (uint32_t)left : CK_IO;
	int rc;

	if (n == 0)
		return -EBADMSG; /* past the body: the structure check lets no section do this */
	if ((rc = ck_pread(in->fd, in->off, in->buf, n)) < 0)
		return rc;
	in->crc = ck_crc(in->buf, n, in->crc);
	in->off += n;
	in->pos = 0;
	in->len = n;
	return 0;
}

/* The next n bytes of the body into dst, or skipped (dst NULL). 0 or -errno. */
static int ck_take(struct ck_in *in, void *dst, uint64_t n)
{
	uint8_t *d = dst;
	int rc;

	while (n > 0) {
		uint32_t m;
		if (in->pos == in->len && (rc = ck_fill(in)) < 0)
			return rc;
		m = n < in->len - in->pos ? (uint32_t)n : in->len - in->pos;
		if (d) {
			memcpy(d, in->buf + in->pos, m);
			d += m;
		}
		in->pos += m;
		n -= m;
	}
	return 0;
}

static uint64_t ck_used(const struct ck_in *in) { return in->off - (in->len - in->pos); }

static int ck_take_u32(struct ck_in *in, uint32_t *v)
{
	uint8_t b[4];
	int rc = ck_take(in, b, 4);

	*v = tl_ld32(b);
	return rc;
}

static int ck_take_u64(struct ck_in *in, uint64_t *v)
{
	uint8_t b[8];
	int rc = ck_take(in, b, 8);

	*v = tl_ld64(b);
	return rc;
}

/* Do table t's row records carry an age? (hdr: the header and table list) */
static bool ck_ages(const uint8_t *hdr, uint32_t t)
{
	return tl_ld32(hdr + 8) >= 3 && (tl_ld32(hdr + CK_HDR + (size_t)t * CK_TDESC + 20) & CK_F_AGES);
}

/* End of the version 2 durable section starting at off; body + 1 when it cannot fit. */
static int durable_need(const struct ps_server *s, int fd, uint64_t body, uint32_t file_mode,
			uint64_t *off)
{
	uint8_t b[24];
	uint32_t t;
	int rc;

	if (*off + 24 > body)
		goto out_nofit;
	if ((rc = ck_pread(fd, *off, b, 24)) < 0)
		return rc;
	*off += 24 + CK_PAD8((uint64_t)tl_ld32(b + 20));
	if (file_mode != PS_MODE_SYNC)
		return 0;
	for (t = 0; t < s->cfg.n_tables; t++) {
		uint64_t n;
		if (*off + 8 > body)
			goto out_nofit;
		if ((rc = ck_pread(fd, *off, b, 8)) < 0)
			return rc;
		n = tl_ld64(b);
		if (n > body)
			goto out_nofit;
		*off += 8 + n * (8 + 4ull * s->tcfg[t].dim);
		if (*off > body)
			goto out_nofit;
	}
	return 0;
out_nofit:
	*off = body + 1;
	return 0;
}

/* End of the version 3 memory section starting at off; body + 1 when it cannot fit. */
static int memory_need(const struct ps_server *s, int fd, uint64_t body, uint64_t *off)
{
	uint8_t b[8];
	uint64_t ns, n;
	int rc;

	if (*off + 8 > body)
		goto out_nofit;
	if ((rc = ck_pread(fd, *off, b, 8)) < 0)
		return rc;
	ns = tl_ld32(b);
	*off += 8;
	for (uint32_t t = 0; t < s->cfg.n_tables; t++) {
		if (ns > body / 8 || (*off += 8 * ns) + 8 > body)
			goto out_nofit;
		if ((rc = ck_pread(fd, *off, b, 8)) < 0)
			return rc;
		n = tl_ld64(b);
		if (n > body / 24)
			goto out_nofit;
		*off += 8 + 24 * n;
		if (*off > body)
			goto out_nofit;
	}
	return 0;
out_nofit:
	*off = body + 1;
	return 0;
}

/* End of the version 5 GEO section starting at off; body + 1 when it cannot fit. */
static int geo_need(const struct ps_server *s, int fd, uint64_t body, uint64_t *off)
{
	uint32_t ns, nw, i, t;
	uint8_t b[24];
	int rc;

	if (*off + 8 > body)
		goto out_nofit;
	if ((rc = ck_pread(fd, *off, b, 8)) < 0)
		return rc;
	ns = tl_ld32(b);
	nw = tl_ld32(b + 4);
	*off += 8;
	for (i = 0; i < ns; i++)
		for (t = 0; t < s->cfg.n_tables; t++) {
			uint64_t n;
			if (s->tcfg[t].kind != PS_TABLE_SPARSE)
				continue;
			if (*off + 24 > body)
				goto out_nofit;
			if ((rc = ck_pread(fd, *off, b, 24)) < 0)
				return rc;
			n = tl_ld64(b + 16);
			if (n > body)
				goto out_nofit;
			*off += 24 + 8 * n + 16ull * nw;
			if (*off > body)
				goto out_nofit;
		}
	return 0;
out_nofit:
	*off = body + 1;
	return 0;
}

/*
 * A section of `head` bytes, then u32 n_shards, u32 n_workers and n_shards x n_workers
 * entries of `entry` bytes, at *need: *need moves past it (past the body when it cannot fit).
 */
static int table_need(int fd, uint64_t body, uint32_t head, uint32_t entry, uint64_t *need)
{
	uint64_t n;
	uint8_t b[8];
	int rc;

	if (*need + head + 8 > body) {
		*need = body + 1;
		return 0;
	}
	if ((rc = ck_pread(fd, *need + head, b, 8)) < 0)
		return rc;
	n = (uint64_t)tl_ld32(b) * tl_ld32(b + 4);
	*need += head + 8 + (n <= body / entry ? entry * n : body); /* a huge count cannot fit */
	return 0;
}

/*
 * Checks the header and table layout against the server, and that the sections add up to
 * the body; reads hdr (CK_HDR + n_tables * CK_TDESC bytes) and sets per-table row counts.
 */
static int check_layout(struct ps_server *s, int fd, uint64_t body, uint8_t *hdr, uint64_t *rows,
			char *err, size_t errlen)
{
	uint32_t nt = s->cfg.n_tables, t;
	uint64_t need = CK_HDR + (uint64_t)nt * CK_TDESC;
	int rc;

	if ((rc = ck_pread(fd, 0, hdr, CK_HDR)) < 0)
		return rc;
	if (memcmp(hdr, CK_MAGIC, 8) != 0 || tl_ld32(hdr + 8) < 1 || tl_ld32(hdr + 8) > CK_VERSION) {
		ps_errf(err, errlen, "not a wharf checkpoint (magic/version)");
		return -EBADMSG;
	}
	if (tl_ld32(hdr + 12) != nt || tl_ld32(hdr + 16) != s->cfg.server_id ||
	    tl_ld32(hdr + 20) != s->cfg.n_servers) {
		ps_errf(err, errlen, "checkpoint of server %u/%u with %u tables, this is server "
			"%u/%u with %u", tl_ld32(hdr + 16), tl_ld32(hdr + 20), tl_ld32(hdr + 12),
			s->cfg.server_id, s->cfg.n_servers, nt);
		return -EINVAL;
	}
	if (need > body) {
		ps_errf(err, errlen, "checkpoint truncated in the table list");
		return -EBADMSG;
	}
	if ((rc = ck_pread(fd, CK_HDR, hdr + CK_HDR, (size_t)nt * CK_TDESC)) < 0)
		return rc;
	for (t = 0; t < nt; t++) {
		const uint8_t *d = hdr + CK_HDR + (size_t)t * CK_TDESC;
		const struct ps_table_config *c = &s->tcfg[t];
		uint32_t sfl = ps_optim_state_floats(c->optim, c->dim);
		if (tl_ld32(d) != c->id || tl_ld32(d + 4) != c->kind || tl_ld32(d + 8) != c->dim ||
		    tl_ld32(d + 12) != c->optim || tl_ld32(d + 16) != sfl ||
		    tl_ld64(d + 32) != (c->kind == PS_TABLE_DENSE ? c->dense_rows : 0)) {
			ps_errf(err, errlen, "table %u in the checkpoint (id %u kind %u dim %u optim "
				"%u) does not match the configured table %u (kind %u dim %u optim %u)",
				t, tl_ld32(d), tl_ld32(d + 4), tl_ld32(d + 8), tl_ld32(d + 12), c->id,
				c->kind, c->dim, c->optim);
			return -EINVAL;
		}
		rows[t] = tl_ld64(d + 24);
		if (rows[t] > UINT32_MAX) {
			ps_errf(err, errlen, "table %u: %llu rows", c->id, (unsigned long long)rows[t]);
			return -EBADMSG;
		}
		need += rows[t] * (8 + 4ull * (c->dim + sfl) + (ck_ages(hdr, t) ? 8 : 0));
	}
	if ((rc = table_need(fd, body, 0, 8, &need)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 4 && (rc = table_need(fd, body, 8, 16, &need)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 2 && need <= body &&
	    (rc = durable_need(s, fd, body, tl_ld32(hdr + 24), &need)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 3 && need <= body && (rc = memory_need(s, fd, body, &need)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 5 && tl_ld32(hdr + 24) == PS_MODE_GEO && need <= body &&
	    (rc = geo_need(s, fd, body, &need)) < 0)
		return rc;
	if (need != body) {
		ps_errf(err, errlen, "checkpoint body is %llu bytes, its tables need %llu",
			(unsigned long long)body, (unsigned long long)need);
		return -EBADMSG;
	}
	return 0;
}

/*
 * Exactly-once state: per shard, when the file was cut with the same worker count. A file
 * of one shard (every push of a worker applied in order on it) gives its sequences to every
 * shard, exactly; a file cut over another number of shards is refused: a worker's pushes may
 * have been applied out of order across its shards' lanes, so no mapping is exact.
 */
static int load_seqs(struct ps_server *s, struct ck_in *in, char *err, size_t errlen)
{
	uint32_t ns, nw, i, w, k;
	uint64_t v;
	int rc;

	if ((rc = ck_take_u32(in, &ns)) < 0 || (rc = ck_take_u32(in, &nw)) < 0)
		return rc;
	if (nw != s->cfg.n_workers)
		return ck_take(in, NULL, 8 * (uint64_t)ns * nw);
	if (ns != s->cfg.n_shards && ns != 1) {
		ps_errf(err, errlen, "checkpoint cut over %u shards, this server runs %u: its "
			"exactly-once state does not map onto them", ns, s->cfg.n_shards);
		return -EINVAL;
	}
	for (i = 0; i < ns; i++)
		for (w = 0; w < nw; w++) {
			if ((rc = ck_take_u64(in, &v)) < 0)
				return rc;
			for (k = ns == 1 ? 0 : i; k < (ns == 1 ? s->cfg.n_shards : i + 1); k++)
				s->shards[k].last_seq[w] = v;
		}
	return 0;
}

/*
 * Version 3: the state's epoch, and per shard per worker the incarnation and the first
 * sequence of the cut's step, mapped onto the shards as load_seqs maps the sequences.
 */
static int load_fence(struct ps_server *s, struct ck_in *in)
{
	uint32_t ns, nw, i, w, k;
	uint64_t inc, first;
	int rc;

	if ((rc = ck_take_u64(in, &s->epoch)) < 0 || (rc = ck_take_u32(in, &ns)) < 0 ||
	    (rc = ck_take_u32(in, &nw)) < 0)
		return rc;
	s->epoch_restored = true;
	if (nw != s->cfg.n_workers || (ns != s->cfg.n_shards && ns != 1))
		return ck_take(in, NULL, 16 * (uint64_t)ns * nw);
	for (i = 0; i < ns; i++)
		for (w = 0; w < nw; w++) {
			if ((rc = ck_take_u64(in, &inc)) < 0 || (rc = ck_take_u64(in, &first)) < 0)
				return rc;
			for (k = ns == 1 ? 0 : i; k < (ns == 1 ? s->cfg.n_shards : i + 1); k++) {
				s->shards[k].inc[w] = inc;
				s->shards[k].pfirst[w] = first;
				s->shards[k].pstep1[w] = first ? 1 : 0; /* "this step": set with the step */
			}
		}
	return 0;
}

/*
 * A sync file's pending sums of the cut step (rows already loaded): the pushes of that step
 * were acknowledged, so none is dropped. A sync server keeps them pending for the barrier;
 * another mode has no barrier, so each sum is applied at once, as the barrier would have.
 */
static int load_sums(struct ps_server *s, struct ck_in *in, char *err, size_t errlen)
{
	uint32_t t, ns = s->cfg.n_shards;
	uint8_t acc[PS_MAX_DIM * sizeof(float)];
	uint64_t i, n, key;
	int rc;

	for (t = 0; t < s->cfg.n_tables; t++) {
		const struct ps_table_config *c = &s->tcfg[t];
		if ((rc = ck_take_u64(in, &n)) < 0)
			return rc;
		for (i = 0; i < n; i++) {
			struct ps_shard *sh;
			uint32_t r;
			if ((rc = ck_take_u64(in, &key)) < 0 ||
			    (rc = ck_take(in, acc, 4ull * c->dim)) < 0)
				return rc;
			sh = &s->shards[c->kind == PS_TABLE_DENSE ? ps_dense_shard(c->id, ns) :
					ps_key_shard(key, ns)];
			r = ps_table_find(&sh->tables[t], key);
			if (r == UINT32_MAX)
				rc = -EBADMSG;
			else if (s->cfg.mode == PS_MODE_SYNC)
				rc = ps_shard_sync_restore(sh, t, r, acc);
			else if (!ps_optim_apply(&sh->tables[t], ps_row_val(&sh->tables[t], r), acc,
						 sh->scratch))
				ps_count(&sh->n_nonfinite, 1); /* left as it was, as the barrier does */
			if (rc < 0) {
				ps_errf(err, errlen, "table %u: pending sync sum for key/row %llu %s", c->id,
					(unsigned long long)key, rc == -ENOMEM ? ": out of memory" :
					"that is not in the file or appears twice");
				return rc == -EEXIST ? -EBADMSG : rc;
			}
		}
	}
	return 0;
}

/* Version 2 section: log generation, barrier, sync step, pending sums. */
static int load_durable(struct ps_server *s, struct ck_in *in, uint32_t file_mode, uint64_t *gen,
			char *err, size_t errlen)
{
	uint32_t nw, sync_step, i;
	uint64_t bar_step;
	uint8_t b[24];
	bool same = false;
	int rc;

	if ((rc = ck_take(in, b, 24)) < 0)
		return rc;
	*gen = tl_ld64(b);
	bar_step = tl_ld64(b + 8);
	sync_step = tl_ld32(b + 16);
	nw = tl_ld32(b + 20);
	for (i = 0; i < s->cfg.n_shards; i++)
		s->shards[i].sync_step = sync_step;
	/* Another cluster size: the barrier starts over. */
	same = nw == s->cfg.n_workers;
	if ((rc = ck_take(in, same ? s->bar_seen : NULL, nw)) < 0 ||
	    (rc = ck_take(in, NULL, CK_PAD8(nw) - nw)) < 0)
		return rc;
	if (file_mode == PS_MODE_SYNC && (rc = load_sums(s, in, err, errlen)) < 0)
		return rc;
	if (!same)
		return 0;
	s->bar_step = bar_step;
	s->bar_arrived = s->bar_gone = 0;
	for (i = 0; i < nw; i++) {
		s->bar_seen[i] = s->bar_seen[i] > 2 ? 1 : s->bar_seen[i];
		s->bar_arrived += s->bar_seen[i] == 1;
		s->bar_gone += s->bar_seen[i] == 2;
	}
	return 0;
}

/*
 * Rows of every table. A row's age (when the file has them) is parked in its last-update
 * step until load_memory knows the clocks (mem_fixup); a table that evicts without ages in
 * the file gets age 0: its rows as fresh as the cut.
 */
static int load_rows(struct ps_server *s, struct ck_in *in, const uint8_t *hdr,
		     const uint64_t *rows, char *err, size_t errlen)
{
	uint32_t t, ns = s->cfg.n_shards;
	uint64_t i, key, age;
	int rc;

	for (t = 0; t < s->cfg.n_tables; t++) {
		const struct ps_table_config *c = &s->tcfg[t];
		size_t fl = (size_t)c->dim + ps_optim_state_floats(c->optim, c->dim);
		for (i = 0; i < rows[t]; i++) {
			struct ps_table *tb;
			uint32_t r;
			if ((rc = ck_take_u64(in, &key)) < 0)
				return rc;
			if (c->kind == PS_TABLE_DENSE) {
				tb = &s->shards[ps_dense_shard(c->id, ns)].tables[t];
				r = ps_table_find(tb, key);
			} else {
				tb = &s->shards[ps_key_shard(key, ns)].tables[t];
				if (s->cfg.n_servers > 1 && ps_key_server(key, s->cfg.n_servers) != s->cfg.server_id)
					r = UINT32_MAX;
				else if (ps_table_reserve(tb, 1) < 0)
					return -ENOMEM;
				else
					r = ps_table_insert(tb, key);
			}
			if (r == UINT32_MAX) {
				ps_errf(err, errlen, "table %u: key/row %llu repeated or not this "
					"server's", c->id, (unsigned long long)key);
				return -EBADMSG;
			}
			if ((rc = ck_take(in, ps_row_val(tb, r), fl * 4)) < 0)
				return rc;
			age = 0;
			if (ck_ages(hdr, t) && (rc = ck_take_u64(in, &age)) < 0)
				return rc;
			if (tb->upd_off)
				*ps_row_upd(tb, r) = age;
		}
	}
	return 0;
}

/*
 * Version 3: each table's clocks and admission counters. The same shard count takes the
 * clocks shard by shard; another one gives every shard the largest (rows keep their ages).
 */
static int load_memory(struct ps_server *s, struct ck_in *in, char *err, size_t errlen)
{
	uint32_t ns, i, t, cnt;
	uint64_t n, j, clock, key, age, max;
	uint8_t b[24];
	int rc;

	if ((rc = ck_take_u32(in, &ns)) < 0 || (rc = ck_take(in, NULL, 4)) < 0)
		return rc;
	for (t = 0; t < s->cfg.n_tables; t++) {
		for (i = 0, max = 0; i < ns; i++) {
			if ((rc = ck_take_u64(in, &clock)) < 0)
				return rc;
			if (ns == s->cfg.n_shards)
				s->shards[i].tables[t].clock = clock;
			max = clock > max ? clock : max;
		}
		for (i = 0; ns != s->cfg.n_shards && i < s->cfg.n_shards; i++)
			s->shards[i].tables[t].clock = max;
		if ((rc = ck_take_u64(in, &n)) < 0)
			return rc;
		for (j = 0; j < n; j++) {
			struct ps_table *p;
			uint32_t r;
			if ((rc = ck_take(in, b, 24)) < 0)
				return rc;
			key = tl_ld64(b);
			cnt = tl_ld32(b + 8);
			age = tl_ld64(b + 16);
			p = s->shards[ps_key_shard(key, s->cfg.n_shards)].tables[t].pend;
			if (!p)
				continue; /* the table no longer admits by count */
			if (ps_table_reserve(p, 1) < 0)
				return -ENOMEM;
			if ((r = ps_table_insert(p, key)) == UINT32_MAX) {
				ps_errf(err, errlen, "table %u: admission counter of key %llu twice",
					s->tcfg[t].id, (unsigned long long)key);
				return -EBADMSG;
			}
			ps_row_meta(p, r)->version = cnt;
			*ps_row_upd(p, r) = age;
		}
	}
	return 0;
}

/* Ages parked by the loads become steps of the loaded clocks (sync mode: the sync step). */
static void mem_fixup(struct ps_server *s)
{
	for (uint32_t i = 0; i < s->cfg.n_shards; i++)
		for (uint32_t t = 0; t < s->cfg.n_tables; t++) {
			struct ps_table *tb = &s->shards[i].tables[t];
			if (s->cfg.mode == PS_MODE_SYNC)
				tb->clock = s->shards[i].sync_step;
			for (struct ps_table *x = tb; x; x = x == tb ? tb->pend : NULL) {
				x->clock = tb->clock;
				for (uint32_t r = 0; x->upd_off && r < x->n_rows; r++) {
					uint64_t *u = ps_row_upd(x, r);
					*u = *u < x->clock ? x->clock - *u : 0;
				}
			}
		}
}

/*
 * One shard's log of table t from the file (nw workers' positions after it). An entry whose
 * key has no row here (evicted by the cut) becomes a hole: PS_GEO_HOLE, never served.
 */
static int load_geo_log(struct ps_server *s, struct ck_in *in, struct ps_shard *sh, uint32_t t,
			uint32_t nw, uint32_t *rows, char *err, size_t errlen)
{
	uint64_t base, max_pos, n, skip, key, pos;
	uint32_t j, w, flag, zero, nt = s->cfg.n_tables;
	int rc;

	if ((rc = ck_take_u64(in, &base)) < 0 || (rc = ck_take_u64(in, &max_pos)) < 0 ||
	    (rc = ck_take_u64(in, &n)) < 0)
		return rc;
	if (base > UINT64_MAX / 4 || max_pos > UINT64_MAX / 4 || n > UINT64_MAX / 4) {
		ps_errf(err, errlen, "table %u: GEO log of shard %u at position %llu, %llu entries: "
			"out of range", s->tcfg[t].id, sh->id, (unsigned long long)base,
			(unsigned long long)n);
		return -EBADMSG;
	}
	/* A log longer than this server keeps: its oldest entries go (who needed them resyncs). */
	skip = n > s->geo_log_max ? n - s->geo_log_max : 0;
	if ((rc = ck_take(in, NULL, 8 * skip)) < 0)
		return rc;
	for (j = 0; j < n - skip; j++) {
		if ((rc = ck_take_u64(in, &key)) < 0)
			return rc;
		rows[j] = ps_table_find(&sh->tables[t], key);
		if (rows[j] == UINT32_MAX)
			rows[j] = PS_GEO_HOLE;
	}
	if ((rc = ps_shard_geo_restore(sh, t, base + skip, max_pos, rows, (uint32_t)(n - skip))) < 0) {
		ps_errf(err, errlen, "table %u: GEO log of shard %u: %s", s->tcfg[t].id, sh->id,
			strerror(-rc));
		return rc;
	}
	for (w = 0; w < nw; w++) {
		struct ps_geo_worker *gw = &sh->geo[w * nt + t];
		if ((rc = ck_take_u64(in, &pos)) < 0 || (rc = ck_take_u32(in, &flag)) < 0 ||
		    (rc = ck_take_u32(in, &zero)) < 0)
			return rc;
		gw->seen = (struct ps_geo_pos){ pos, flag ? 0 : PS_GEO_NO_RESYNC };
		gw->pend = gw->seen;
		gw->pend_id = 0;
	}
	return 0;
}

/*
 * Version 5 GEO section (the last). Restored when cut over this server's shard and worker
 * counts (a log's rows are one shard's); otherwise skipped, and every worker resyncs.
 */
static int load_geo(struct ps_server *s, struct ck_in *in, char *err, size_t errlen)
{
	uint32_t ns, nw, i, t;
	uint32_t *rows;
	int rc = 0;

	if ((rc = ck_take_u32(in, &ns)) < 0 || (rc = ck_take_u32(in, &nw)) < 0)
		return rc;
	if (s->cfg.mode != PS_MODE_GEO || ns != s->cfg.n_shards || nw != s->cfg.n_workers) {
		for (i = 0; i < s->cfg.n_shards && s->cfg.mode == PS_MODE_GEO; i++)
			ps_shard_geo_resync_all(&s->shards[i]);
		return ck_take(in, NULL, in->body - ck_used(in)); /* the last section */
	}
	rows = malloc((size_t)s->geo_log_max * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (i = 0; i < ns && rc == 0; i++)
		for (t = 0; t < s->cfg.n_tables && rc == 0; t++)
			if (s->tcfg[t].kind == PS_TABLE_SPARSE)
				rc = load_geo_log(s, in, &s->shards[i], t, nw, rows, err, errlen);
	free(rows);
	return rc;
}

/* Back to empty tables after a refused load, so nothing of it stays. */
void ps_ckpt_unload(struct ps_server *s)
{
	uint32_t i, t;

	for (i = 0; i < s->cfg.n_shards; i++)
		for (t = 0; t < s->cfg.n_tables; t++) {
			struct ps_table *tb = &s->shards[i].tables[t];
			uint64_t first = tb->dense_first, n = tb->cfg.kind == PS_TABLE_DENSE ? tb->n_rows : 0;
			int node = tb->node;
			bool acc = tb->acc_off != 0;
			ps_table_fini(tb);
			/* Same sizes as at creation; cannot fail worse than creation did. */
			if (ps_table_init(tb, &s->tcfg[t], acc, first, n, node, s->cfg.n_shards) < 0)
				memset(tb, 0, sizeof(*tb));
			s->shards[i].n_touched[t] = 0;
		}
	for (i = 0; i < s->cfg.n_shards; i++) {
		struct ps_shard *sh = &s->shards[i];
		size_t nw = s->cfg.n_workers;
		sh->sync_step = 0;
		sh->step = 0;
		memset(sh->last_seq, 0, nw * sizeof(*sh->last_seq));
		memset(sh->inc, 0, nw * sizeof(*sh->inc));
		memset(sh->pstep1, 0, nw * sizeof(*sh->pstep1));
		memset(sh->pfirst, 0, nw * sizeof(*sh->pfirst));
		ps_shard_geo_reset(sh);
	}
	s->bar_step = 0;
	s->bar_arrived = s->bar_gone = 0;
	s->bar_applying = false;
	s->bar_t0 = s->bar_told = 0;
	memset(s->bar_seen, 0, s->cfg.n_workers);
	ps_barrier_publish(s);
}

/* Every section in file order, from the start of the body. */
static int load_all(struct ps_server *s, struct ck_in *in, const uint8_t *hdr,
		    const uint64_t *rows, uint64_t *gen, char *err, size_t errlen)
{
	uint32_t i, w;
	int rc;

	if ((rc = ck_take(in, NULL, CK_HDR + (uint64_t)s->cfg.n_tables * CK_TDESC)) < 0 ||
	    (rc = load_rows(s, in, hdr, rows, err, errlen)) < 0 ||
	    (rc = load_seqs(s, in, err, errlen)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 4 && (rc = load_fence(s, in)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 2 &&
	    (rc = load_durable(s, in, tl_ld32(hdr + 24), gen, err, errlen)) < 0)
		return rc;
	if (tl_ld32(hdr + 8) >= 3 && (rc = load_memory(s, in, err, errlen)) < 0)
		return rc;
	mem_fixup(s);
	if (tl_ld32(hdr + 8) >= 5 && tl_ld32(hdr + 24) == PS_MODE_GEO)
		rc = load_geo(s, in, err, errlen);
	else if (s->cfg.mode == PS_MODE_GEO)
		/* No GEO state in the file: which rows changed since a worker's last pull is
		 * unknown, so every worker gets every row once. */
		for (i = 0; i < s->cfg.n_shards; i++)
			ps_shard_geo_resync_all(&s->shards[i]);
	if (rc < 0)
		return rc;
	/* Pushes carry the step the barrier is at; the step-first sequences are of that step. */
	for (i = 0; i < s->cfg.n_shards; i++) {
		s->shards[i].step = s->bar_step;
		for (w = 0; w < s->cfg.n_workers; w++)
			if (s->shards[i].pstep1[w])
				s->shards[i].pstep1[w] = s->bar_step + 1;
	}
	ps_barrier_publish(s);
	if (ck_used(in) != in->body) {
		ps_errf(err, errlen, "checkpoint body is %llu bytes, %llu of them read",
			(unsigned long long)in->body, (unsigned long long)ck_used(in));
		return -EBADMSG;
	}
	return 0;
}

static bool holds_rows(const struct ps_server *s)
{
	for (uint32_t i = 0; i < s->cfg.n_shards; i++)
		for (uint32_t t = 0; t < s->cfg.n_tables; t++)
			if (s->tcfg[t].kind == PS_TABLE_SPARSE && s->shards[i].tables[t].n_rows)
				return true;
	return false;
}

int ps_ckpt_read(struct ps_server *s, const char *path, uint64_t *gen, char *err, size_t errlen)
{
	struct ck_in in = { .fd = -1, .crc = 0xffffffffu };
	uint8_t tr[CK_TRAILER], *hdr = NULL;
	uint64_t *rows = NULL;
	bool loading = false;
	struct stat st;
	int rc, rrc;

	if (holds_rows(s)) {
		ps_errf(err, errlen, "load into a server that already holds rows");
		return -EBUSY;
	}
	in.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (in.fd < 0 || fstat(in.fd, &st) < 0) {
		rc = -errno;
		ps_errf(err, errlen, "%s: %s", path, strerror(-rc));
		goto out;
	}
	if ((uint64_t)st.st_size < CK_HDR + CK_TRAILER) {
		rc = -EBADMSG;
		ps_errf(err, errlen, "%s: %llu bytes, too short for a checkpoint", path,
			(unsigned long long)st.st_size);
		goto out;
	}
	in.body = (uint64_t)st.st_size - CK_TRAILER;
	if ((rc = ck_pread(in.fd, in.body, tr, CK_TRAILER)) < 0) {
		ps_errf(err, errlen, "%s: read: %s", path, strerror(-rc));
		goto out;
	}
	if (tl_ld64(tr) != in.body) {
		rc = -EBADMSG;
		ps_errf(err, errlen, "%s: checksum or length mismatch: file damaged or truncated", path);
		goto out;
	}
	in.buf = malloc(CK_IO);
	rows = calloc(s->cfg.n_tables, sizeof(*rows));
	hdr = malloc(CK_HDR + (size_t)s->cfg.n_tables * CK_TDESC);
	if (!in.buf || !rows || !hdr) {
		rc = -ENOMEM;
		ps_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	*gen = 0;
	rc = check_layout(s, in.fd, in.body, hdr, rows, err, errlen);
	if (rc == 0) {
		loading = true;
		if (errlen > 0)
			err[0] = '\0';
		rc = load_all(s, &in, hdr, rows, gen, err, errlen);
		/* A section that ended early or does not parse says so, not the reader's errno. */
		if (rc < 0 && errlen > 0 && err[0] == '\0')
			ps_errf(err, errlen, "%s: a section is %s", path, rc == -ENOMEM ?
				"too large for memory" : "truncated or malformed");
	}
	/* The checksum of the whole body, whatever the load stopped at. */
	if ((rrc = ck_take(&in, NULL, in.body - ck_used(&in))) < 0) {
		rc = rrc;
		ps_errf(err, errlen, "%s: read: %s", path, strerror(-rc));
	} else if (in.crc != tl_ld32(tr + 8)) {
		rc = -EBADMSG;
		ps_errf(err, errlen, "%s: checksum or length mismatch: file damaged or truncated", path);
	}
	if (rc < 0 && loading)
		ps_ckpt_unload(s);
	else if (rc == 0)
		PS_LOG(DEBUG, "ps_load: checkpoint %s read: generation %llu, %llu bytes", path,
		       (unsigned long long)*gen, (unsigned long long)st.st_size);
out:
	if (in.fd >= 0)
		close(in.fd);
	free(in.buf);
	free(rows);
	free(hdr);
	return rc;
}

/* ---------------------------------------------------------------- save entry */

struct ps_save_job {
	struct ps_server *s;
	struct ps_handler *h;        /* the handler that started it */
	struct ps_snap **snaps;
	uint64_t gen;
	bool primary;
	int rc;                      /* of the snapshots' start */
	char path[4096];
};

int ps_save_start(struct ps_handler *h, const char *path, struct ps_save_job **out, char *err,
		  size_t errlen)
{
	struct ps_server *s = h->s;
	uint32_t ns = s->cfg.n_shards, i, idle = 0;
	struct ps_save_job *j;
	bool was_in_request = h->in_request;
	int rc;

	if (strlen(path) >= sizeof(j->path)) {
		ps_errf(err, errlen, "checkpoint path too long");
		return -ENAMETOOLONG;
	}
	/* One save at a time, from its start until its job is freed. acq_rel: partner, the
	 * release store in ps_save_free. */
	if (!atomic_compare_exchange_strong_explicit(&s->save_busy, &idle, 1, memory_order_acq_rel,
						     memory_order_relaxed)) {
		ps_errf(err, errlen, "a save is already running");
		return -EBUSY;
	}
	j = calloc(1, sizeof(*j));
	if (j)
		j->snaps = calloc(ns, sizeof(*j->snaps));
	if (!j || !j->snaps) {
		free(j);
		atomic_store_explicit(&s->save_busy, 0, memory_order_release);
		return -ENOMEM;
	}
	j->s = s;
	j->h = h;
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->primary = s->wal_dir && s->ckpt_path && strcmp(path, s->ckpt_path) == 0;
	h->in_request = true; /* a second saver must not park us halfway through ours */
	/*
	 * Every other handler parks between requests: the snapshots begin at one cut. The one
	 * other holder of the pause is a handler applying a sync step or a hello (save_busy
	 * keeps other saves out): wait for it.
	 */
	ps_server_pause_wait(h);
	/*
	 * A save to the log's own checkpoint starts the next log generation at this cut: every
	 * handler is parked between requests, so each record is on one side of it (handlers
	 * open their new segment at their next append).
	 */
	j->gen = atomic_load_explicit(&s->wal_gen, memory_order_relaxed);
	if (j->primary) {
		atomic_store_explicit(&s->wal_gen, ++j->gen, memory_order_relaxed);
		for (i = 0; i < s->cfg.n_lcores; i++)
			if (s->handlers[i])
				atomic_store_explicit(&s->handlers[i]->wal.bytes, 0, memory_order_relaxed);
	}
	for (i = 0, rc = 0; i < ns && rc == 0; i++) {
		struct ps_op *op = &h->ops[i];
		j->snaps[i] = calloc(1, sizeof(*j->snaps[i]));
		if (!j->snaps[i]) {
			rc = -ENOMEM;
			break;
		}
		memset(op, 0, sizeof(*op));
		op->kind = PS_OP_SNAP_BEGIN;
		op->snap = j->snaps[i];
		ps_handler_run_op(h, i, op);
		ps_handler_wait(h, op);
		rc = op->status;
		if (rc < 0) {
			ps_snap_free(j->snaps[i]);
			j->snaps[i] = NULL;
		}
	}
	ps_server_resume(h); /* copying goes on incrementally while training continues */
	h->in_request = was_in_request;
	j->rc = rc;
	*out = j;
	return 0;
}

bool ps_save_copied(struct ps_save_job *j)
{
	for (uint32_t i = 0; i < j->s->cfg.n_shards; i++)
		/* acquire: partner, the release store in ps_shard_snap_step. */
		if (j->snaps[i] && !atomic_load_explicit(&j->snaps[i]->ready, memory_order_acquire))
			return false;
	return true;
}

int ps_save_write(struct ps_save_job *j, uint64_t *rows_out, char *err, size_t errlen)
{
	int rc = j->rc, drop;

	if (rc < 0) {
		ps_errf(err, errlen, "snapshot: %s", strerror(-rc));
		return rc;
	}
	rc = ps_ckpt_write(j->s, j->snaps, j->gen, j->path, rows_out, err, errlen);
	if (rc < 0 || !j->primary)
		return rc;
	/*
	 * Renamed into place and fsynced: the older segments hold nothing it lacks. Where the
	 * log now starts goes to disk first, so a restore of an older checkpoint is refused
	 * even once they are gone; without it they stay (a later save drops them).
	 */
	if ((drop = ps_wal_floor_write(j->s, j->gen)) < 0) {
		PS_LOG(ERR, "ps_save: log floor file in %s: %s; the log before generation %llu is "
		       "kept", j->s->wal_dir, strerror(-drop), (unsigned long long)j->gen);
		return rc;
	}
	drop = ps_wal_drop_before(j->s, j->gen);
	if (drop < 0)
		PS_LOG(ERR, "ps_save: deleting log segments before generation %llu: %s",
		       (unsigned long long)j->gen, strerror(-drop));
	else if (drop > 0)
		PS_LOG(DEBUG, "ps_save: %d log segment%s before generation %llu deleted", drop,
		       drop == 1 ? "" : "s", (unsigned long long)j->gen);
	return rc;
}

void ps_save_free(struct ps_save_job *j)
{
	if (!j)
		return;
	for (uint32_t i = 0; j->snaps && i < j->s->cfg.n_shards; i++)
		ps_snap_free(j->snaps[i]);
	free(j->snaps);
	/* release: partner, the CAS in ps_save_start. */
	atomic_store_explicit(&j->s->save_busy, 0, memory_order_release);
	free(j);
}

int ps_save(struct ps_handler *h, const char *path, uint64_t *rows_out, char *err, size_t errlen)
{
	struct ps_save_job *j;
	bool was_in_request = h->in_request;
	int rc = ps_save_start(h, path, &j, err, errlen);

	if (rc < 0)
		return rc;
	/* Every begun snapshot is finished by its owner before its memory can go. */
	h->in_request = true;
	while (!ps_save_copied(j))
		ps_handler_poll(h);
	h->in_request = was_in_request;
	rc = ps_save_write(j, rows_out, err, errlen);
	ps_save_free(j);
	return rc;
}

int ps_load(struct ps_handler *h, const char *path, char *err, size_t errlen)
{
	uint64_t gen;

	if (h->slot != 0) {
		ps_errf(err, errlen, "load runs on lcore slot 0");
		return -EINVAL;
	}
	return ps_ckpt_read(h->s, path, &gen, err, errlen);
}

int ps_recover(struct ps_handler *h, const char *ckpt, struct ps_recover_stats *st, char *err,
	       size_t errlen)
{
	struct ps_server *s = h->s;
	int64_t max_gen = -1, min_gen = -1, floor = -1, start;
	uint64_t gen = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	if (h->slot != 0) {
		ps_errf(err, errlen, "recovery runs on lcore slot 0");
		return -EINVAL;
	}
	if (s->wal_dir && (rc = ps_wal_scan(s, &max_gen, &min_gen)) < 0) {
		ps_errf(err, errlen, "log directory %s: %s", s->wal_dir, strerror(-rc));
		return rc;
	}
	if (s->wal_dir && (rc = ps_wal_floor_read(s, &floor, err, errlen)) < 0)
		return rc;
	/* The log holds every record from this generation on (-1: no log at all). */
	start = floor >= 0 ? floor : min_gen;
	if (ckpt && access(ckpt, F_OK) == 0) {
		if ((rc = ps_ckpt_read(s, ckpt, &gen, err, errlen)) < 0)
			return rc;
		st->ckpt_loaded = true;
	} else if (ckpt && errno != ENOENT) {
		rc = -errno;
		ps_errf(err, errlen, "%s: %s", ckpt, strerror(-rc));
		return rc;
	} else if (start > 0) {
		/* The log was cut by a checkpoint, and that checkpoint is not there. */
		if (ckpt)
			ps_errf(err, errlen, "checkpoint %s is missing, but the log in %s starts after "
				"a checkpoint cut (generation %lld): refusing to rebuild a partial "
				"state", ckpt, s->wal_dir, (long long)start);
		else
			ps_errf(err, errlen, "the log in %s starts after a checkpoint cut (generation "
				"%lld): recover with that checkpoint (--restore), or remove the "
				"directory to start empty", s->wal_dir, (long long)start);
		return -ENOENT;
	}
	if (!s->wal_dir)
		return 0;
	if (st->ckpt_loaded && start > (int64_t)gen) {
		/* An older checkpoint than the log's: what was logged between is gone. */
		char gap[64];
		if (start - 1 == (int64_t)gen)
			snprintf(gap, sizeof(gap), "generation %llu", (unsigned long long)gen);
		else
			snprintf(gap, sizeof(gap), "generations %llu..%lld", (unsigned long long)gen,
				 (long long)start - 1);
		ps_errf(err, errlen, "checkpoint %s continues the log at generation %llu, but the "
			"log in %s starts at generation %lld: the pushes logged in %s were deleted "
			"when later checkpoints were saved. Restore the latest checkpoint, or remove "
			"the log directory to start from this one alone", ckpt, (unsigned long long)gen,
			s->wal_dir, (long long)start, gap);
		ps_ckpt_unload(s);
		st->ckpt_loaded = false;
		return -EINVAL;
	}
	return ps_wal_replay(h, gen, st, err, errlen);
}
