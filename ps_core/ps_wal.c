/*
 * ps_wal.c — the server's write-ahead log: what makes an acknowledged push survive a server
 * killed between two checkpoints. ps_handle (ps_handle.c) appends every accepted push-type
 * request here after validation and before it produces the reply; ps_save (ps_ckpt.c)
 * starts a new generation of segments at its cut and deletes the covered ones once its file
 * is renamed into place; ps_recover replays what the checkpoint does not hold, through
 * ps_handle_replay, i.e. the same apply path as live traffic.
 *
 * Why a mapped file per handler: a memcpy into MAP_SHARED pages is in the page cache the
 * moment it is done, so it survives the process (SIGKILL, a crash) with no syscall per
 * request and no lock (one handler = one thread = one segment). Surviving the machine needs
 * msync: ps_handler_wal_sync, called by the lcore loop on a timer, and a checkpoint (which
 * fsyncs its own file) bound what a power loss can take. Segments are preallocated
 * (posix_fallocate), so a full disk shows up as a refused roll, never as SIGBUS on a page.
 *
 * Segment file <wal_dir>/wal-<gen:16 hex>-<slot:3>-<part:6>.log:
 *   header  64 bytes: "WHFWAL01", u32 version 2, u32 slot, u64 gen, u32 part, u32 server_id,
 *           u32 n_servers, u32 mode, u32 n_tables, u32 layout CRC, u64 the server state's
 *           epoch, u32 CRC32C of bytes 0..55, zeros. (Version 1 segments, whose pushes had
 *           no incarnation or step, are refused.)
 *   records at 8-byte aligned offsets: u32 len (bytes of the request: 32-byte header +
 *           body; 0 = no more records), u32 CRC32C (seeded with len) of the next 8 + len
 *           bytes, u64 order (server-wide, the replay order across slots), the request,
 *           zero padding to 8. len is stored last, so a record cut short by SIGKILL reads
 *           as the end of the segment; the bytes after it are zeros or that torn record.
 *
 * Floor file <wal_dir>/wal.floor, 32 bytes: "WHFWALFL", u32 version 1, u32 0, u64 gen,
 *   u32 CRC32C of bytes 0..23, u32 0. The log holds every record of generations >= gen: a
 *   save to cfg.ckpt_path writes it (renamed into place, fsynced) before it deletes the
 *   segments below its cut, so a restore can tell a checkpoint the log continues from an
 *   older one whose later records are gone, even when no segment is left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_hash_crc.h>

#include "ps_core/ps_pvt.h"

#define WAL_MAGIC "WHFWAL01"
#define WAL_VERSION 2u
#define WAL_SEG_HDR 64u
#define WAL_REC 16u
#define WAL_ALIGN8(x) (((x) + 7u) & ~(size_t)7u)
#define WAL_NAME_LEN 48
#define WAL_FLOOR "wal.floor"
#define WAL_FLOOR_MAGIC "WHFWALFL"
#define WAL_FLOOR_LEN 32u
/*
 * Prefault step: a first write to each page of a fresh segment is a page fault (allocate,
 * zero, map), about 18 of them for a 72 KB push — on a paravirtualised guest they doubled
 * the push time. One MADV_POPULATE_WRITE per 2 MiB ahead of the writer does the same work
 * in one kernel entry: a syscall per 2 MiB of log, not per request.
 */
#define WAL_PREFAULT (2u << 20)

struct wal_file {
	uint64_t gen;
	uint32_t slot, part;
	char name[WAL_NAME_LEN];
};

static void wal_name(char *buf, size_t len, uint64_t gen, uint32_t slot, uint32_t part)
{
	snprintf(buf, len, "wal-%016" PRIx64 "-%03u-%06u.log", gen, slot, part);
}

static void seg_header(const struct ps_server *s, uint32_t slot, uint64_t gen, uint32_t part,
		       uint8_t *m)
{
	memset(m, 0, WAL_SEG_HDR);
	memcpy(m, WAL_MAGIC, 8);
	tl_st32(m + 8, WAL_VERSION);
	tl_st32(m + 12, slot);
	tl_st64(m + 16, gen);
	tl_st32(m + 24, part);
	tl_st32(m + 28, s->cfg.server_id);
	tl_st32(m + 32, s->cfg.n_servers);
	tl_st32(m + 36, s->cfg.mode);
	tl_st32(m + 40, s->cfg.n_tables);
	tl_st32(m + 44, s->layout_crc);
	tl_st64(m + 48, s->epoch);
	tl_st32(m + 56, rte_hash_crc(m, 56, 0xffffffffu));
}

void ps_wal_close(struct ps_wal *w)
{
	int fd;

	if (w->map)
		munmap(w->map, w->size);
	if (w->fd >= 0)
		close(w->fd);
	w->map = NULL;
	w->fd = -1;
	/* The sync thread has stopped (handler teardown): its fds are ours to close. */
	if ((fd = atomic_exchange_explicit(&w->sync_fd, -1, memory_order_acq_rel)) >= 0)
		close(fd);
	if ((fd = atomic_exchange_explicit(&w->retired_fd, -1, memory_order_acq_rel)) >= 0)
		close(fd);
}

/*
 * wal_bg_sync: the new segment's fd goes to the sync thread; the full one (the sync thread
 * did not hold it) waits for its last sync there. Two rolls within one sync period leave
 * an older full segment: synced here, the one stall of this mode (128 MiB of log in that
 * period).
 */
static void wal_bg_handoff(struct ps_wal *w, int fd)
{
	int mine = dup(fd), old, older;

	/* acq_rel: partners, the exchanges and CAS in wal_bg_sync_one. */
	old = atomic_exchange_explicit(&w->sync_fd, mine, memory_order_acq_rel);
	if (old < 0)
		return; /* none, or the sync thread holds it and finishes it */
	older = atomic_exchange_explicit(&w->retired_fd, old, memory_order_acq_rel);
	if (older >= 0) {
		(void)fdatasync(older);
		close(older);
	}
}

static int wal_bg_sync_one(struct ps_wal *w)
{
	int fd, rc = 0, none = -1;

	fd = atomic_exchange_explicit(&w->retired_fd, -1, memory_order_acq_rel);
	if (fd >= 0) {
		if (fdatasync(fd) < 0)
			rc = -errno;
		close(fd);
	}
	fd = atomic_exchange_explicit(&w->sync_fd, -1, memory_order_acq_rel);
	if (fd < 0)
		return rc;
	if (fdatasync(fd) < 0 && rc == 0)
		rc = -errno;
	if (!atomic_compare_exchange_strong_explicit(&w->sync_fd, &none, fd, memory_order_acq_rel,
						     memory_order_acquire)) {
		/* The handler rolled meanwhile: this file is complete; its tail, then done. */
		if (fdatasync(fd) < 0 && rc == 0)
			rc = -errno;
		close(fd);
	}
	return rc;
}

int ps_server_wal_sync_bg(struct ps_server *s)
{
	int rc = 0, r;

	for (uint32_t i = 0; i < s->cfg.n_lcores; i++)
		if (s->handlers[i] && (r = wal_bg_sync_one(&s->handlers[i]->wal)) < 0 && rc == 0)
			rc = r;
	return rc;
}

int ps_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * A new segment for h: at a new generation (after a primary checkpoint cut) or when the
 * current one cannot take `need` more bytes. Rare: the only syscalls the log makes while
 * serving, apart from ps_handler_wal_sync.
 */
static int wal_roll(struct ps_handler *h, size_t need)
{
	struct ps_server *s = h->s;
	struct ps_wal *w = &h->wal;
	uint64_t gen = atomic_load_explicit(&s->wal_gen, memory_order_relaxed);
	uint32_t part = w->map && w->gen == gen ? w->part + 1 : 0;
	size_t size = s->wal_seg;
	char path[PATH_MAX], name[WAL_NAME_LEN];
	uint8_t *m;
	int fd, rc;

	if (size < WAL_SEG_HDR + need)
		size = (WAL_SEG_HDR + need + 4095) & ~(size_t)4095;
	wal_name(name, sizeof(name), gen, h->slot, part);
	snprintf(path, sizeof(path), "%s/%s", s->wal_dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = posix_fallocate(fd, 0, (off_t)size);
	if (rc != 0)
		goto out_unlink;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = errno;
		goto out_unlink;
	}
	seg_header(s, h->slot, gen, part, m);
	/* The file's existence and header must outlive a power loss before records go in. */
	if (msync(m, WAL_SEG_HDR, MS_SYNC) < 0 || ps_fsync_dir(s->wal_dir) < 0) {
		rc = errno ? errno : EIO;
		munmap(m, size);
		goto out_unlink;
	}
	/* A full segment of this generation: what the timer has not synced yet, now (with
	 * the sync thread: there, as the new segment's fd goes to it). */
	if (s->cfg.wal_bg_sync)
		wal_bg_handoff(w, fd);
	else if (w->map && w->gen == gen && w->synced > 0)
		ps_handler_wal_sync(h);
	if (w->map)
		munmap(w->map, w->size);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = fd;
	w->map = m;
	w->size = size;
	w->off = WAL_SEG_HDR;
	w->synced = 0;
	w->populated = 0;
	w->gen = gen;
	w->part = part;
	PS_LOG(DEBUG, "ps_wal: lcore slot %u: log segment %s opened, %zu bytes", h->slot, path, size);
	return 0;
out_unlink:
	close(fd);
	unlink(path);
	return -rc;
}

/* Maps writable the pages up to `upto` plus one prefault step (best effort: on a kernel
 * without MADV_POPULATE_WRITE the writes fault the pages in themselves). */
static void wal_prefault(struct ps_wal *w, size_t upto)
{
	size_t from = w->populated & ~(size_t)4095, to = (upto + WAL_PREFAULT + 4095) & ~(size_t)4095;

	if (to > w->size)
		to = w->size;
	if (to <= from)
		return;
#ifdef MADV_POPULATE_WRITE
	(void)madvise(w->map + from, to - from, MADV_POPULATE_WRITE);
#endif
	w->populated = to;
}

int ps_wal_append(struct ps_handler *h, const struct tl_msg_view *v, uint8_t type)
{
	struct ps_server *s = h->s;
	struct ps_wal *w = &h->wal;
	uint32_t len = TL_MSG_HDR_LEN + v->hdr.body_len, crc;
	size_t need = WAL_REC + WAL_ALIGN8((size_t)len);
	struct tl_msg_hdr hd = v->hdr;
	uint64_t order;
	uint8_t *r;
	int rc;

	if (PS_LIKELY(s->wal_dir == NULL) || h->replaying)
		return 0;
	if (PS_UNLIKELY(w->map == NULL || w->off + need > w->size ||
			w->gen != atomic_load_explicit(&s->wal_gen, memory_order_relaxed)) &&
	    (rc = wal_roll(h, need)) < 0)
		return rc;
	if (PS_UNLIKELY(w->off + need > w->populated))
		wal_prefault(w, w->off + need);
	r = w->map + w->off;
	hd.type = type;
	tl_msg_hdr_encode(r + WAL_REC, &hd);
	if (tl_view_copy(v, 0, r + WAL_REC + TL_MSG_HDR_LEN, v->hdr.body_len) < 0)
		return -EBADMSG;
	order = atomic_fetch_add_explicit(&s->wal_order, 1, memory_order_relaxed);
	tl_st64(r + 8, order);
	crc = rte_hash_crc(r + 8, 8 + len, len);
	tl_st32(r + 4, crc);
	/*
	 * len goes in last: a process killed in the middle leaves len 0, which reads as the
	 * end. Only the compiler can reorder our own stores as a later reader of the page
	 * cache sees them, hence a signal fence (no other thread reads the segment).
	 */
	atomic_signal_fence(memory_order_release);
	tl_st32(r, len);
	w->off += need;
	atomic_store_explicit(&w->bytes, atomic_load_explicit(&w->bytes, memory_order_relaxed) + need,
			      memory_order_relaxed);
	return 0;
}

int ps_handler_wal_sync(struct ps_handler *h)
{
	struct ps_wal *w = &h->wal;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), from;

	if (w->map == NULL || w->off == w->synced)
		return 0;
	from = w->synced & ~(page - 1);
	if (msync(w->map + from, w->off - from, MS_SYNC) < 0)
		return -errno;
	w->synced = w->off;
	return 0;
}

uint64_t ps_server_wal_bytes(struct ps_server *s)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < s->cfg.n_lcores; i++)
		if (s->handlers[i])
			n += atomic_load_explicit(&s->handlers[i]->wal.bytes, memory_order_relaxed);
	return n;
}

/* ---------------------------------------------------------------- directory */

static int cmp_file(const void *a, const void *b)
{
	const struct wal_file *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	if (x->gen != y->gen)
		return x->gen < y->gen ? -1 : 1;
	return x->part < y->part ? -1 : x->part > y->part;
}

/* Every segment file of the directory, sorted by (slot, gen, part). */
static int wal_list(const struct ps_server *s, struct wal_file **out, uint32_t *n_out)
{
	struct wal_file *f = NULL, *p;
	uint32_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d = opendir(s->wal_dir);

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		struct wal_file w;
		size_t len = strlen(e->d_name);
		int used = 0;
		if (sscanf(e->d_name, "wal-%16" SCNx64 "-%3u-%6u.log%n", &w.gen, &w.slot, &w.part,
			   &used) != 3 || used == 0 || e->d_name[used] != '\0' || len >= WAL_NAME_LEN)
			continue;
		memcpy(w.name, e->d_name, len + 1); /* length checked just above */
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			p = realloc(f, cap * sizeof(*f));
			if (!p) {
				free(f);
				closedir(d);
				return -ENOMEM;
			}
			f = p;
		}
		f[n++] = w;
	}
	closedir(d);
	if (n)
		qsort(f, n, sizeof(*f), cmp_file);
	*out = f;
	*n_out = n;
	return 0;
}

int ps_wal_scan(struct ps_server *s, int64_t *max_gen, int64_t *min_gen)
{
	struct wal_file *f = NULL;
	uint32_t n = 0, i;
	int rc = wal_list(s, &f, &n);

	*max_gen = -1;
	*min_gen = -1;
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		if ((int64_t)f[i].gen > *max_gen)
			*max_gen = (int64_t)f[i].gen;
		if (*min_gen < 0 || (int64_t)f[i].gen < *min_gen)
			*min_gen = (int64_t)f[i].gen;
	}
	free(f);
	return 0;
}

int ps_wal_drop_before(struct ps_server *s, uint64_t gen)
{
	struct wal_file *f = NULL;
	uint32_t n = 0, i;
	char path[PATH_MAX];
	int rc = wal_list(s, &f, &n), dropped = 0;

	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		if (f[i].gen >= gen)
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->wal_dir, f[i].name);
		if (unlink(path) == 0)
			dropped++;
		else if (rc == 0)
			rc = -errno;
	}
	free(f);
	return rc < 0 ? rc : dropped;
}

int ps_wal_floor_write(struct ps_server *s, uint64_t gen)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	uint8_t b[WAL_FLOOR_LEN] = { 0 };
	ssize_t w;
	int fd, rc = 0;

	memcpy(b, WAL_FLOOR_MAGIC, 8);
	tl_st32(b + 8, 1);
	tl_st64(b + 16, gen);
	tl_st32(b + 24, rte_hash_crc(b, 24, 0xffffffffu));
	snprintf(path, sizeof(path), "%s/%s", s->wal_dir, WAL_FLOOR);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	w = write(fd, b, sizeof(b));
	if (w != (ssize_t)sizeof(b) || fsync(fd) < 0)
		rc = w < 0 || w == (ssize_t)sizeof(b) ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc == 0)
		rc = ps_fsync_dir(s->wal_dir);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int ps_wal_floor_read(struct ps_server *s, int64_t *gen, char *err, size_t errlen)
{
	char path[PATH_MAX];
	uint8_t b[WAL_FLOOR_LEN + 1];
	ssize_t n;
	int fd, rc;

	*gen = -1;
	snprintf(path, sizeof(path), "%s/%s", s->wal_dir, WAL_FLOOR);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		rc = -errno;
		ps_errf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	n = read(fd, b, sizeof(b));
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0) {
		ps_errf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (n != WAL_FLOOR_LEN || memcmp(b, WAL_FLOOR_MAGIC, 8) != 0 || tl_ld32(b + 8) != 1 ||
	    tl_ld32(b + 24) != rte_hash_crc(b, 24, 0xffffffffu) || tl_ld64(b + 16) > INT64_MAX) {
		ps_errf(err, errlen, "%s: damaged (%zd bytes; magic, version or CRC wrong): it says "
			"where the log starts; remove the log directory to start over", path, n);
		return -EBADMSG;
	}
	*gen = (int64_t)tl_ld64(b + 16);
	return 0;
}

/* ---------------------------------------------------------------- replay */

/* One lcore slot's segments in (gen, part) order, read one record at a time. */
struct wal_stream {
	const struct wal_file *f;
	uint32_t nf, cur;
	uint8_t *map;
	size_t size, off;
	bool have;               /* a record is ready at off */
	uint64_t order;
	uint32_t len;
};

struct wal_replay {
	struct ps_handler *h;
	struct ps_recover_stats *st;
	char *err;
	size_t errlen;
	uint64_t max_order;
	bool any;
};

static void stream_unmap(struct wal_stream *w)
{
	if (w->map)
		munmap(w->map, w->size);
	w->map = NULL;
}

static int stream_open(struct wal_replay *rp, struct wal_stream *w)
{
	const struct wal_file *f = &w->f[w->cur];
	struct ps_server *s = rp->h->s;
	char path[PATH_MAX];
	struct stat sb;
	uint8_t *m;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", s->wal_dir, f->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		int rc = -errno;
		ps_errf(rp->err, rp->errlen, "log segment %s: %s", path, strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if ((size_t)sb.st_size < WAL_SEG_HDR) {
		close(fd);
		ps_errf(rp->err, rp->errlen, "log segment %s: %lld bytes, shorter than its header",
			path, (long long)sb.st_size);
		return -EBADMSG;
	}
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	w->map = m;
	w->size = (size_t)sb.st_size;
	w->off = WAL_SEG_HDR;
	rp->st->segments++;
	if (memcmp(m, WAL_MAGIC, 8) == 0 && tl_ld32(m + 8) != WAL_VERSION) {
		ps_errf(rp->err, rp->errlen, "log segment %s: format version %u, this server reads "
			"version %u (pushes with incarnation and step): remove the log directory to "
			"start from the checkpoint", path, tl_ld32(m + 8), WAL_VERSION);
		return -EINVAL;
	}
	if (memcmp(m, WAL_MAGIC, 8) != 0 || tl_ld32(m + 56) != rte_hash_crc(m, 56, 0xffffffffu) ||
	    tl_ld32(m + 12) != f->slot ||
	    tl_ld64(m + 16) != f->gen || tl_ld32(m + 24) != f->part) {
		ps_errf(rp->err, rp->errlen, "log segment %s: damaged header (magic, version, CRC or "
			"name mismatch)", path);
		return -EBADMSG;
	}
	if (tl_ld32(m + 28) != s->cfg.server_id || tl_ld32(m + 32) != s->cfg.n_servers ||
	    tl_ld32(m + 36) != s->cfg.mode || tl_ld32(m + 40) != s->cfg.n_tables ||
	    tl_ld32(m + 44) != s->layout_crc) {
		ps_errf(rp->err, rp->errlen, "log segment %s was written by server %u/%u, mode %u, "
			"%u tables (layout %08x); this is server %u/%u, mode %u, %u tables (layout "
			"%08x)", path, tl_ld32(m + 28), tl_ld32(m + 32), tl_ld32(m + 36),
			tl_ld32(m + 40), tl_ld32(m + 44), s->cfg.server_id, s->cfg.n_servers,
			s->cfg.mode, s->cfg.n_tables, s->layout_crc);
		return -EINVAL;
	}
	/* One state from start to end: the checkpoint's epoch, or the first segment's. */
	if (s->epoch_restored && tl_ld64(m + 48) != s->epoch) {
		ps_errf(rp->err, rp->errlen, "log segment %s belongs to server state %016llx, the "
			"checkpoint or the segments before it to %016llx", path,
			(unsigned long long)tl_ld64(m + 48), (unsigned long long)s->epoch);
		return -EINVAL;
	}
	s->epoch = tl_ld64(m + 48);
	s->epoch_restored = true;
	PS_LOG(DEBUG, "ps_recover: replaying log segment %s, %zu bytes", path, w->size);
	return 0;
}

/* Offset just past the last non-zero byte in [from, size), or from when all are zero. */
static size_t last_nonzero(const uint8_t *m, size_t from, size_t size)
{
	while (size > from && m[size - 1] == 0)
		size--;
	return size;
}

/* Offset of the first record with a valid CRC at an 8-aligned offset in (from, end), or 0. */
static size_t valid_record_after(const struct wal_stream *w, size_t from, size_t end)
{
	size_t o;

	for (o = from + 8; o + WAL_REC <= end; o += 8) {
		uint32_t len = tl_ld32(w->map + o);
		if (len >= TL_MSG_HDR_LEN && o + WAL_REC + len <= w->size &&
		    tl_ld32(w->map + o + 4) == rte_hash_crc(w->map + o + 8, 8 + len, len))
			return o;
	}
	return 0;
}

/*
 * The record at off does not read (len 0, cut short, or bad CRC). Zeros to the end of the
 * file: the clean end. Otherwise, in the last segment of its lcore slot with no valid record
 * anywhere after it, it is a torn tail: the record a killed process was writing, or pages a
 * power loss did not write (the kernel writes a file's dirty pages back in no set order, so
 * a later page may be on disk and an earlier one not). It is dropped, counted, and cut off
 * the file (returns 1), so that the next recovery, which will find segments after this one,
 * reads a clean end. Damage followed by a valid record or by a later segment of the slot is
 * damage to a log that went on: refused.
 */
static int stream_tail(struct wal_replay *rp, struct wal_stream *w, bool zero_len)
{
	size_t end = last_nonzero(w->map, w->off + 4, w->size), o;
	bool last = w->cur + 1 == w->nf;

	if (zero_len && end == w->off + 4)
		return 0; /* the clean end */
	o = valid_record_after(w, w->off, end);
	if (last && o == 0) {
		rp->st->torn++;
		PS_LOG(WARNING, "ps_recover: log segment %s: torn tail at offset %zu (%zu bytes) "
		       "dropped and cut off", w->f[w->cur].name, w->off, end - w->off);
		return 1;
	}
	if (o != 0)
		ps_errf(rp->err, rp->errlen, "log segment %s: record at offset %zu is damaged (%s) "
			"and a valid record follows it at offset %zu", w->f[w->cur].name, w->off,
			zero_len ? "zero length" : "bad length or CRC32C", o);
	else
		ps_errf(rp->err, rp->errlen, "log segment %s: record at offset %zu is damaged (%s) "
			"and segment %s of lcore slot %u follows it", w->f[w->cur].name, w->off,
			zero_len ? "zero length" : "bad length or CRC32C", w->f[w->cur + 1].name,
			w->f[w->cur].slot);
	return -EBADMSG;
}

/* Cuts the torn tail at off off segment w->f[w->cur] (unmapped), durably. */
static int stream_cut(struct wal_replay *rp, struct wal_stream *w, size_t off)
{
	char path[PATH_MAX];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", rp->h->s->wal_dir, w->f[w->cur].name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)off) < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		ps_errf(rp->err, rp->errlen, "log segment %s: cannot cut its torn tail off at %zu: %s",
			path, off, strerror(-rc));
	return rc;
}

/* Moves w to its next readable record (w->have), across its files. */
static int stream_next(struct wal_replay *rp, struct wal_stream *w)
{
	bool torn;
	int rc;

	w->have = false;
	for (;;) {
		torn = false;
		if (w->map == NULL) {
			if (w->cur >= w->nf)
				return 0;
			if ((rc = stream_open(rp, w)) < 0)
				return rc;
		}
		if (w->off + WAL_REC <= w->size) {
			uint32_t len = tl_ld32(w->map + w->off);
			bool fits = len >= TL_MSG_HDR_LEN && w->off + WAL_REC + len <= w->size;
			if (fits && tl_ld32(w->map + w->off + 4) ==
			    rte_hash_crc(w->map + w->off + 8, 8 + len, len)) {
				uint64_t order = tl_ld64(w->map + w->off + 8);
				if (w->off > WAL_SEG_HDR && order <= w->order) {
					ps_errf(rp->err, rp->errlen, "log segment %s: record order "
						"goes backwards at offset %zu", w->f[w->cur].name, w->off);
					return -EBADMSG;
				}
				w->order = order;
				w->len = len;
				w->have = true;
				return 0;
			}
			if ((rc = stream_tail(rp, w, len == 0)) < 0)
				return rc;
			torn = rc == 1;
		}
		stream_unmap(w);
		if (torn && (rc = stream_cut(rp, w, w->off)) < 0)
			return rc;
		w->cur++;
	}
}

static int replay_one(struct wal_replay *rp, struct wal_stream *w, uint8_t *rep_buf, uint32_t cap)
{
	const uint8_t *p = w->map + w->off + WAL_REC;
	struct ps_reply rep = { rep_buf, cap, 0 };
	struct tl_msg_view v;
	struct tl_iov iov;
	int rc;

	if (tl_msg_hdr_decode(p, UINT32_MAX, &v.hdr) != 0 ||
	    v.hdr.body_len != w->len - TL_MSG_HDR_LEN) {
		ps_errf(rp->err, rp->errlen, "log segment %s: record at offset %zu holds no valid "
			"request header", w->f[w->cur].name, w->off);
		return -EBADMSG;
	}
	iov.base = p + TL_MSG_HDR_LEN;
	iov.len = v.hdr.body_len;
	v.iov = &iov;
	v.iovcnt = iov.len > 0;
	rc = ps_handle_replay(rp->h, &v, &rep);
	/*
	 * -ERANGE: rows whose update was not finite stayed as they were then, and do again;
	 * -EDQUOT: keys a full table refused then are refused again (the table is the same). A
	 * push or hello refused as fenced or of another step was refused so when it was
	 * logged (the log is in the order of the fence and step changes): again, skipped.
	 */
	if (rc < 0 && rep.len >= TL_MSG_HDR_LEN + 8 && rep_buf[3] == PS_T_ERROR &&
	    (tl_ld32(rep_buf + TL_MSG_HDR_LEN + 4) == PS_ERR_FENCED ||
	     tl_ld32(rep_buf + TL_MSG_HDR_LEN + 4) == PS_ERR_WRONG_STEP)) {
		rp->st->records++;
		rp->st->skipped++;
		goto out_next;
	}
	if (rc < 0 && rc != -ERANGE && rc != -EDQUOT) {
		ps_errf(rp->err, rp->errlen, "log segment %s: record at offset %zu (type %u) refused "
			"on replay: %.*s", w->f[w->cur].name, w->off, v.hdr.type,
			rep.len > TL_MSG_HDR_LEN + 8 ? (int)(rep.len - TL_MSG_HDR_LEN - 8) : 0,
			(const char *)rep_buf + TL_MSG_HDR_LEN + 8);
		return rc;
	}
	rp->st->records++;
	if (rc == -ERANGE || rc == -EDQUOT || v.hdr.type == PS_T_BARRIER ||
	    v.hdr.type == PS_T_HELLO || v.hdr.type == PS_T_WAL_STEP ||
	    tl_ld32(rep_buf + TL_MSG_HDR_LEN + 8) == 1)
		rp->st->applied++;
	else
		rp->st->skipped++;
out_next:
	if (!rp->any || w->order > rp->max_order)
		rp->max_order = w->order;
	rp->any = true;
	w->off += WAL_REC + WAL_ALIGN8((size_t)w->len);
	return 0;
}

/* k-way merge of the slots' streams by order number. */
static int replay_merge(struct wal_replay *rp, struct wal_stream *ws, uint32_t ns)
{
	uint32_t cap = 4096, i;
	uint8_t *rep = aligned_alloc(64, cap);
	int rc = 0;

	if (!rep)
		return -ENOMEM;
	for (i = 0; i < ns && rc == 0; i++)
		rc = stream_next(rp, &ws[i]);
	while (rc == 0) {
		struct wal_stream *best = NULL;
		for (i = 0; i < ns; i++)
			if (ws[i].have && (!best || ws[i].order < best->order))
				best = &ws[i];
		if (!best)
			break;
		rc = replay_one(rp, best, rep, cap);
		if (rc == 0)
			rc = stream_next(rp, best);
	}
	free(rep);
	return rc;
}

int ps_wal_replay(struct ps_handler *h, uint64_t gen, struct ps_recover_stats *st, char *err,
		  size_t errlen)
{
	struct ps_server *s = h->s;
	struct wal_replay rp = { h, st, err, errlen, 0, false };
	struct wal_file *f = NULL;
	struct wal_stream *ws = NULL;
	uint32_t n = 0, i, first, ns = 0;
	uint64_t max_gen = gen;
	int rc = wal_list(s, &f, &n);

	if (rc < 0) {
		ps_errf(err, errlen, "log directory %s: %s", s->wal_dir, strerror(-rc));
		return rc;
	}
	ws = calloc(n ? n : 1, sizeof(*ws));
	if (!ws) {
		free(f);
		return -ENOMEM;
	}
	/* Group by slot; leave out what the checkpoint covers. */
	for (i = 0; i < n; i = first) {
		struct wal_stream *w = &ws[ns];
		for (first = i; first < n && f[first].slot == f[i].slot; first++) {
			if (f[first].gen + 1 > max_gen)
				max_gen = f[first].gen + 1;
			if (f[first].gen < gen) {
				st->covered++;
				continue;
			}
			if (w->nf == 0)
				w->f = &f[first];
			w->nf++;
		}
		if (w->nf)
			ns++;
	}
	h->replaying = true;
	rc = replay_merge(&rp, ws, ns);
	h->replaying = false;
	ps_barrier_publish(s);
	for (i = 0; i < ns; i++)
		stream_unmap(&ws[i]);
	free(ws);
	free(f);
	if (rc < 0)
		return rc;
	atomic_store_explicit(&s->wal_gen, max_gen, memory_order_relaxed);
	if (rp.any)
		atomic_store_explicit(&s->wal_order, rp.max_order + 1, memory_order_relaxed);
	return 0;
}
