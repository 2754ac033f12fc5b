/*
 * test_wal.c — durability: the write-ahead log (ps_wal.c) and ps_recover. A server
 * "crashes" here by being destroyed without a final save (its log segments stay as a
 * killed process leaves them: complete records in the file) and a new server is built from
 * the files. Checked: nothing acknowledged after the last checkpoint is lost, replay over a
 * checkpoint that already holds some records applies them once, a torn last record is
 * dropped and counted, damaged or foreign logs are refused, segments roll and the ones a
 * checkpoint covers are deleted, a restarted worker resumes its sequence (PS_T_HELLO),
 * sync mode's barrier step and pending sums survive a crash in the middle of a step, a
 * barrier record the log refuses changes nothing (the step completes once, the replay is
 * exact), and a step a barrier timeout closed is closed again on replay.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

#define SEG (64u << 10)
#define NKEYS 40

static char dir[128], wal[PATH_MAX], ckpt[PATH_MAX];
static struct ps_table_config tabs[3];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ps_wal_test_%d", (int)getpid());
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	if (mkdir(dir, 0755) < 0)
		return -1;
	pt_wal_paths(dir, 0, wal, ckpt, sizeof(wal));
	tabs[0] = pt_table(1, 4, PS_OPT_ADAM);
	tabs[1] = pt_table(2, 2, PS_OPT_ADAGRAD);
	tabs[1].kind = PS_TABLE_DENSE;
	tabs[1].dense_rows = 50;
	tabs[2] = pt_table(3, 1, PS_OPT_SGD); /* a counter: each push of -1 adds exactly 1 */
	tabs[2].op.lr = 1.0f;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static struct pt_cluster *make(enum ps_mode mode, uint32_t workers, uint64_t seg)
{
	struct pt_cluster *c;

	assert_int_equal(pt_cluster_create_wal(1, 3, mode, workers, tabs, 3, dir, seg, &c), 0);
	return c;
}

/* A crashed server's replacement: recovered from the files; its clients resume sequences. */
static struct pt_cluster *restart(enum ps_mode mode, uint32_t workers, uint64_t seg,
				  struct ps_recover_stats *st)
{
	struct pt_cluster *c = make(mode, workers, seg);
	char err[256] = "";
	uint32_t w;
	int rc, done;

	rc = ps_recover(c->h[0], ckpt, st, err, sizeof(err));
	if (rc != 0)
		fail_msg("recover: %d %s", rc, err);
	for (w = 0; w < workers; w++) {
		done = 1;
		assert_int_equal(ps_client_hello(c->cl[w], pt_done, &done, c->msgs), 0);
		pt_deliver(c, w);
		assert_int_equal(done, 0);
	}
	return c;
}

/* `steps` rounds of one sparse and one dense push by worker w (2 log records each). */
static void fill(struct pt_cluster *c, uint32_t w, uint32_t steps, uint32_t seed)
{
	uint64_t keys[NKEYS];
	float g[NKEYS * 4], dg[100];
	uint32_t i, s;
	int st;

	for (i = 0; i < NKEYS; i++)
		keys[i] = i * 31 + 1 + (i % 3 == 0 ? 0 : w); /* some keys shared by the workers */
	for (s = 0; s < steps; s++) {
		for (i = 0; i < NKEYS * 4; i++)
			g[i] = (float)((i * 7 + s + seed) % 13) - 6.0f;
		for (i = 0; i < 100; i++)
			dg[i] = (float)((i + seed) % 5) - 2.0f;
		assert_int_equal(pt_push(c, w, 1, 4, keys, NKEYS, g), 0);
		st = 1;
		assert_int_equal(ps_client_dense_push(c->cl[w], 2, 2, 50, 0, 50, dg, pt_done, &st,
						      c->msgs), 0);
		pt_deliver(c, w);
		assert_int_equal(st, 0);
	}
}

struct state {
	float sp[2][NKEYS * 4], dn[100];
};

static void pull_all(struct pt_cluster *c, struct state *out)
{
	uint64_t keys[NKEYS];
	uint32_t i, w;
	int st = 1;

	for (w = 0; w < 2; w++) {
		for (i = 0; i < NKEYS; i++)
			keys[i] = i * 31 + 1 + (i % 3 == 0 ? 0 : w);
		assert_int_equal(pt_pull(c, 0, 1, 4, keys, NKEYS, out->sp[w]), 0);
	}
	assert_int_equal(ps_client_dense_pull(c->cl[0], 2, 2, 50, 0, 50, out->dn, pt_done, &st,
					      c->msgs), 0);
	pt_deliver(c, 0);
	assert_int_equal(st, 0);
}

static void count_push(struct pt_cluster *c, uint32_t w, uint32_t n)
{
	uint64_t key = 1000 + w;
	float g = -1.0f;

	while (n--)
		assert_int_equal(pt_push(c, w, 3, 1, &key, 1, &g), 0);
}

static float count_of(struct pt_cluster *c, uint32_t w)
{
	uint64_t key = 1000 + w;
	float v = -1;

	assert_int_equal(pt_pull(c, 0, 3, 1, &key, 1, &v), 0);
	return v;
}

static uint32_t count_files(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	uint32_t n = 0;

	assert_non_null(dd);
	while ((e = readdir(dd)) != NULL)
		n += strncmp(e->d_name, "wal-", 4) == 0;
	closedir(dd);
	return n;
}

/* ---- crash after a checkpoint: the log holds what came after it */

static void test_wal_crash_after_checkpoint_loses_nothing(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *a, *b;
	char err[256];
	uint64_t rows;

	(void)state;
	a = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_false(st.ckpt_loaded);
	assert_int_equal(st.records, 0);
	fill(a, 0, 3, 1);
	fill(a, 1, 2, 2);
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	fill(a, 0, 2, 3);
	fill(a, 1, 3, 4);
	pull_all(a, &ref);
	pt_cluster_destroy(a); /* killed: no final save */

	b = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_true(st.ckpt_loaded);
	assert_int_equal(st.records, 2 * (2 + 3)); /* the pushes after the checkpoint only */
	assert_int_equal(st.applied, st.records);
	assert_int_equal(st.torn, 0);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref)); /* values and Adam/Adagrad state, bit for bit */
	pt_cluster_destroy(b);
}

static void test_wal_replay_from_empty_without_checkpoint(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *a, *b;

	(void)state;
	a = restart(PS_MODE_ASYNC, 2, SEG, &st);
	fill(a, 0, 2, 5);
	fill(a, 1, 2, 6);
	pull_all(a, &ref);
	pt_cluster_destroy(a);
	b = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_false(st.ckpt_loaded);
	assert_int_equal(st.records, 8);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);
}

/* A save to another path does not cut the log: its records are replayed over it, once. */
static void test_wal_replay_idempotent_over_checkpoint(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *a, *b;
	char err[256], other[PATH_MAX + 8];
	uint64_t rows;

	(void)state;
	snprintf(other, sizeof(other), "%s/other.ckpt", dir);
	a = restart(PS_MODE_ASYNC, 2, SEG, &st);
	fill(a, 0, 3, 7);
	assert_int_equal(ps_save(a->h[0], other, &rows, err, sizeof(err)), 0);
	fill(a, 1, 2, 8);
	pull_all(a, &ref);
	pt_cluster_destroy(a);
	rename(other, ckpt);
	b = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_true(st.ckpt_loaded);
	assert_int_equal(st.records, 10);
	assert_int_equal(st.skipped, 6);  /* worker 0's, already in the checkpoint */
	assert_int_equal(st.applied, 4);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);
}

/* ---- damaged logs */

static uint8_t *seg_read(const char *name, size_t *len)
{
	char p[PATH_MAX + 64];
	FILE *f;
	uint8_t *b;

	snprintf(p, sizeof(p), "%s/%s", wal, name);
	f = fopen(p, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(*len);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void seg_write(const char *name, const uint8_t *b, size_t len)
{
	char p[PATH_MAX + 64];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", wal, name);
	f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
}

/* Offset of record i (0-based) of a segment of blen bytes, and its request length (0 past
 * the end of a full segment). */
static size_t rec_at(const uint8_t *b, size_t blen, uint32_t i, uint32_t *len)
{
	size_t off = 64;

	while (i-- && off + 16 <= blen)
		off += 16 + ((tl_ld32(b + off) + 7u) & ~7u);
	*len = off + 16 <= blen ? tl_ld32(b + off) : 0;
	return off;
}

static const char *SEG0 = "wal-0000000000000000-000-000000.log";

/* The counter table: 10 pushes logged, then the crash happens to the file. */
static void ten_pushes_then_crash(void)
{
	struct ps_recover_stats st;
	struct pt_cluster *a = restart(PS_MODE_ASYNC, 2, SEG, &st);

	count_push(a, 0, 10);
	assert_true(count_of(a, 0) == 10.0f);
	pt_cluster_destroy(a);
}

static void expect_count_after(uint64_t torn, float value)
{
	struct ps_recover_stats st;
	struct pt_cluster *b = restart(PS_MODE_ASYNC, 2, SEG, &st);

	assert_int_equal(st.torn, torn);
	assert_int_equal(st.records, (uint64_t)value);
	assert_true(count_of(b, 0) == value);
	pt_cluster_destroy(b);
}

static void test_wal_torn_tail_dropped_and_counted(void **state)
{
	uint8_t *b;
	size_t len, off;
	uint32_t rl;

	(void)state;
	/* The last record's payload cut short (as a power loss can leave it). */
	ten_pushes_then_crash();
	b = seg_read(SEG0, &len);
	off = rec_at(b, len, 9, &rl);
	memset(b + off + 16 + rl - 8, 0, 8);
	seg_write(SEG0, b, len);
	free(b);
	expect_count_after(1, 9);
	/* Killed in the middle of an append: the payload is there, its length not yet. */
	nftw(wal, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	ten_pushes_then_crash();
	b = seg_read(SEG0, &len);
	off = rec_at(b, len, 9, &rl);
	memset(b + off, 0, 4);
	seg_write(SEG0, b, len);
	free(b);
	expect_count_after(1, 9);
}

static void expect_refused(int rc, const char *words)
{
	struct ps_recover_stats st;
	struct pt_cluster *c = make(PS_MODE_ASYNC, 2, SEG);
	char err[512] = "";

	assert_int_equal(ps_recover(c->h[0], ckpt, &st, err, sizeof(err)), rc);
	if (!strstr(err, words))
		fail_msg("error \"%s\" does not say \"%s\"", err, words);
	pt_cluster_destroy(c);
}

static void test_wal_damaged_log_refused(void **state)
{
	uint8_t *b, *orig;
	size_t len, off;
	uint32_t rl;
	struct pt_cluster *a;
	char err[256];
	uint64_t rows;

	(void)state;
	ten_pushes_then_crash();
	orig = seg_read(SEG0, &len);
	b = malloc(len);
	memcpy(b, orig, len);
	off = rec_at(b, len, 3, &rl);              /* a record in the middle: one bit */
	b[off + 16 + rl / 2] ^= 0x04;
	seg_write(SEG0, b, len);
	expect_refused(-EBADMSG, "damaged");
	memcpy(b, orig, len);
	b[5] ^= 0x01;                              /* the segment header */
	seg_write(SEG0, b, len);
	expect_refused(-EBADMSG, "header");
	memcpy(b, orig, len);
	seg_write(SEG0, b, len);
	tabs[2].dim = 2;                           /* a server with another table layout */
	expect_refused(-EINVAL, "written by");
	tabs[2].dim = 1;
	free(b);
	free(orig);
	/* A log cut by a checkpoint that is gone: nothing partial is rebuilt. */
	nftw(wal, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	a = make(PS_MODE_ASYNC, 2, SEG);
	count_push(a, 0, 3);
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	count_push(a, 0, 3);
	pt_cluster_destroy(a);
	unlink(ckpt);
	expect_refused(-ENOENT, "missing");
}

/*
 * A power loss can leave later pages of a segment on disk and earlier ones not: from the
 * first damaged record on, nothing reads. In the last segment of its slot that is a torn
 * tail: dropped, counted, and cut off the file, so the recovery after the next crash (the
 * log has gone on in newer segments meanwhile) finds a clean end.
 */
static void test_wal_damaged_tail_torn_and_cut_off(void **state)
{
	struct ps_recover_stats st;
	struct pt_cluster *b;
	char p[PATH_MAX + 64];
	struct stat sb;
	uint8_t *d;
	size_t len, off[10];
	uint32_t rl[10], i;

	(void)state;
	ten_pushes_then_crash();
	d = seg_read(SEG0, &len);
	for (i = 0; i < 10; i++)
		off[i] = rec_at(d, len, i, &rl[i]);
	for (i = 7; i < 10; i++)                   /* records 7..9: pages of another moment */
		d[off[i] + 16 + rl[i] - 1] ^= 0x01;
	memset(d + off[6], 0, 8);                  /* the page with record 6's head: lost */
	seg_write(SEG0, d, len);
	free(d);
	b = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.records, 6);
	assert_true(count_of(b, 0) == 6.0f);
	snprintf(p, sizeof(p), "%s/%s", wal, SEG0);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal((size_t)sb.st_size, off[6]); /* cut where the damage began */
	count_push(b, 0, 2);                       /* the log goes on, in a newer segment */
	pt_cluster_destroy(b);                     /* and the server dies again */
	b = restart(PS_MODE_ASYNC, 2, SEG, &st);
	assert_int_equal(st.torn, 0);
	assert_int_equal(st.records, 8);
	assert_true(count_of(b, 0) == 8.0f);
	pt_cluster_destroy(b);
}

/* Damage at the end of a segment that later segments of its slot follow: refused. */
static void test_wal_damage_before_a_later_segment_refused(void **state)
{
	struct ps_recover_stats st;
	struct pt_cluster *a;
	uint8_t *d;
	size_t len, off, last = 0;
	uint32_t rl, i;

	(void)state;
	a = restart(PS_MODE_ASYNC, 2, 4096, &st);  /* about 50 count pushes per segment */
	count_push(a, 0, 80);
	pt_cluster_destroy(a);
	assert_true(count_files(wal) >= 2);
	d = seg_read(SEG0, &len);
	for (i = 0; (off = rec_at(d, len, i, &rl)) + 16 <= len && rl != 0; i++)
		last = off;
	assert_true(i > 10);
	d[last + 4] ^= 0x01;                       /* the first segment's last record */
	seg_write(SEG0, d, len);
	free(d);
	expect_refused(-EBADMSG, "wal-0000000000000000-000-000001.log of lcore slot 0 follows");
}

/*
 * A checkpoint older than the log: later checkpoints to the log's own path deleted what was
 * logged after it. Restoring it is refused naming the generations that are gone (also when
 * no segment is left at all), the latest checkpoint restores everything, and without the
 * log directory the old one is restored alone.
 */
static void test_wal_restore_of_older_checkpoint_refused(void **state)
{
	struct ps_recover_stats st;
	struct pt_cluster *a, *b;
	char err[256], old[PATH_MAX + 8], latest[PATH_MAX + 8];
	uint64_t rows;

	(void)state;
	snprintf(old, sizeof(old), "%s/old.ckpt", dir);
	snprintf(latest, sizeof(latest), "%s/latest.ckpt", dir);
	for (int pushes_after = 0; pushes_after < 2; pushes_after++) {
		nftw(wal, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		unlink(ckpt);
		a = restart(PS_MODE_ASYNC, 2, SEG, &st);
		count_push(a, 0, 3);
		assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0); /* gen 1 */
		assert_int_equal(link(ckpt, old), 0);
		count_push(a, 0, 3);
		assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0); /* gen 2 */
		count_push(a, 0, 3);
		assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0); /* gen 3 */
		if (pushes_after)
			count_push(a, 0, 3);
		else
			assert_int_equal(count_files(wal), 0); /* nothing logged since: no segment */
		pt_cluster_destroy(a);
		assert_int_equal(rename(ckpt, latest), 0);
		assert_int_equal(rename(old, ckpt), 0);
		expect_refused(-EINVAL, "generations 1..2 were deleted");
		assert_int_equal(rename(latest, ckpt), 0);
		b = restart(PS_MODE_ASYNC, 2, SEG, &st);
		assert_true(count_of(b, 0) == (pushes_after ? 12.0f : 9.0f));
		pt_cluster_destroy(b);
	}
}

/* ---- segments */

static void test_wal_segments_roll_and_checkpoint_deletes_covered(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *a, *b;
	char err[256];
	uint64_t rows;

	(void)state;
	a = restart(PS_MODE_ASYNC, 2, 4096, &st);  /* ~1.5 KB per fill step: rolls often */
	fill(a, 0, 6, 9);
	assert_true(count_files(wal) >= 3);
	assert_true(ps_server_wal_bytes(a->srv[0]) > 6 * 1400);
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	assert_int_equal(count_files(wal), 0);       /* all covered by the checkpoint */
	assert_int_equal(ps_server_wal_bytes(a->srv[0]), 0);
	fill(a, 1, 5, 10);
	assert_true(count_files(wal) >= 2);
	assert_int_equal(ps_handler_wal_sync(a->h[0]), 0);
	pull_all(a, &ref);
	pt_cluster_destroy(a);
	b = restart(PS_MODE_ASYNC, 2, 4096, &st);
	assert_int_equal(st.records, 10);
	assert_true(st.segments >= 2);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);
}

/* The sync thread of cfg.wal_bg_sync: ps_server_wal_sync_bg in a loop until told to stop. */
struct bg_syncer {
	struct ps_server *s;
	_Atomic int stop;
	uint64_t rounds;
	int rc;
};

static void *bg_sync_main(void *arg)
{
	struct bg_syncer *y = arg;

	/* At least one round, however late the thread is scheduled (a loaded machine may run
	 * the whole fill first); acquire: partner, the release store in the test. */
	do {
		int rc = ps_server_wal_sync_bg(y->s);
		if (rc != 0 && y->rc == 0)
			y->rc = rc;
		y->rounds++;
	} while (!atomic_load_explicit(&y->stop, memory_order_acquire));
	return NULL;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/*
 * With the log synced by another thread (the PS executables' way) while segments roll
 * under it: every record is replayed after a restart, and no file descriptor is left over
 * (each full segment's was synced once more and closed by whoever held it last).
 */
static void test_wal_background_sync_across_rolls(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct bg_syncer y = { 0 };
	struct pt_cluster *a, *b;
	pthread_t th;
	int fds;

	(void)state;
	pt_wal_bg_sync = true;
	fds = open_fds();
	a = restart(PS_MODE_ASYNC, 2, 4096, &st);
	y.s = a->srv[0];
	assert_int_equal(pthread_create(&th, NULL, bg_sync_main, &y), 0);
	fill(a, 0, 12, 9);
	assert_true(count_files(wal) >= 3);
	atomic_store_explicit(&y.stop, 1, memory_order_release);
	pthread_join(th, NULL);
	assert_int_equal(y.rc, 0);
	assert_true(y.rounds > 0);
	assert_int_equal(ps_server_wal_sync_bg(a->srv[0]), 0);
	pull_all(a, &ref);
	pt_cluster_destroy(a);
	assert_int_equal(open_fds(), fds);
	b = restart(PS_MODE_ASYNC, 2, 4096, &st);
	pt_wal_bg_sync = false;
	assert_int_equal(st.records, 24); /* a sparse and a dense push per step */
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);
}

/* ---- worker sequence resume */

static void test_wal_hello_resumes_sequence_after_worker_restart(void **state)
{
	struct ps_client_config cc = { .worker_id = 0, .n_servers = 1, .max_keys = 8192 };
	struct ps_recover_stats st;
	struct pt_cluster *a = restart(PS_MODE_ASYNC, 2, SEG, &st);
	int done = 1;

	(void)state;
	count_push(a, 0, 5);
	/* The worker restarts under its old id: numbering from 1 again, its push is taken for
	 * a resend of one already applied and acknowledged without being applied. */
	ps_client_destroy(a->cl[0]);
	assert_int_equal(ps_client_create(&cc, &a->cl[0]), 0);
	count_push(a, 0, 1);
	assert_int_equal(tl_ld32(a->rep_buf + TL_MSG_HDR_LEN + 8), 0); /* "duplicate" */
	assert_true(count_of(a, 0) == 5.0f);
	/* With the hello first it goes on after the last applied sequence. */
	ps_client_destroy(a->cl[0]);
	assert_int_equal(ps_client_create(&cc, &a->cl[0]), 0);
	assert_int_equal(ps_client_next_seq(a->cl[0]), 1);
	assert_int_equal(ps_client_hello(a->cl[0], pt_done, &done, a->msgs), 0);
	pt_deliver(a, 0);
	assert_int_equal(done, 0);
	assert_int_equal(ps_client_next_seq(a->cl[0]), 6);
	count_push(a, 0, 2);
	assert_true(count_of(a, 0) == 7.0f);
	/* A worker id the server does not have is refused by name. */
	ps_client_destroy(a->cl[1]);
	cc.worker_id = 9;
	assert_int_equal(ps_client_create(&cc, &a->cl[1]), 0);
	done = 1;
	assert_int_equal(ps_client_hello(a->cl[1], pt_done, &done, a->msgs), 0);
	pt_deliver(a, 1);
	assert_int_equal(done, -EINVAL);
	assert_int_equal(tl_ld32(a->rep_buf + TL_MSG_HDR_LEN + 4), PS_ERR_BAD_WORKER);
	assert_non_null(strstr((const char *)a->rep_buf + TL_MSG_HDR_LEN + 8, "worker 9"));
	pt_cluster_destroy(a);
}

/* ---- a push refused for a retry, and the ones pipelined behind it */

/* One connection: the server's push order, and the requests the client sent, not yet delivered. */
struct conn {
	struct pt_cluster *c;
	struct ps_push_order order;
	uint8_t q[4][256];
	uint32_t qlen[4], n;
};

static int conn_send(void *ctx, uint32_t dest, const uint8_t *msg, uint32_t len)
{
	struct conn *k = ctx;

	assert_int_equal(dest, 0);
	assert_true(k->n < 4 && len <= sizeof(k->q[0]));
	memcpy(k->q[k->n], msg, len);
	k->qlen[k->n++] = len;
	return 0;
}

/* The server takes the first max requests sent, in order; the client gets each reply. */
static void conn_deliver(struct conn *k, uint32_t max, uint16_t *flags, uint32_t *kinds)
{
	struct tl_iov iov[4], riov[4];
	struct tl_msg_view v, rv;
	uint32_t i, m = max < k->n ? max : k->n;

	for (i = 0; i < m; i++) {
		struct ps_reply rep = { .buf = k->c->rep_buf, .cap = PT_BUF };
		pt_view(k->q[i], 0, iov, 4, &v);
		ps_handle_ordered(k->c->h[0], &k->order, &v, &rep);
		pt_view(rep.buf, 0, riov, 4, &rv);
		flags[i] = rv.hdr.flags;
		kinds[i] = rv.hdr.type == PS_T_ERROR ? tl_ld32(rep.buf + TL_MSG_HDR_LEN + 4) : 0;
		assert_int_equal(ps_client_on_reply(k->c->cl[0], 0, &rv), 0);
	}
	for (i = m; i < k->n; i++) {
		memcpy(k->q[i - m], k->q[i], k->qlen[i]);
		k->qlen[i - m] = k->qlen[i];
	}
	k->n -= m;
}

/*
 * Two pushes pipelined on one connection; the log cannot take the first (its directory is
 * gone for a moment), so it is refused for a retry. The second, behind it, must not be
 * applied first: its sequence would make the first one's retry look like a duplicate, lost.
 * The push order refuses it for a retry too; the client sends both again, in order, after its
 * back-off, and each counts exactly once.
 */
static void test_wal_refused_push_retried_in_order_exactly_once(void **state)
{
	struct ps_recover_stats st;
	struct pt_cluster *c = restart(PS_MODE_ASYNC, 1, SEG, &st);
	struct conn k = { .c = c };
	struct ps_client_io io = { .send = conn_send, .poll = NULL, .ctx = &k, .msgs = c->msgs };
	struct ps_client_stats cs;
	char away[PATH_MAX + 8];
	uint64_t key = 1000, now = 1;
	uint32_t kinds[4];
	uint16_t flags[4];
	float g = -1.0f;
	int sa = 1, sb = 1;

	(void)state;
	ps_client_tick(c->cl[0], now, &io);
	assert_int_equal(ps_client_push(c->cl[0], 3, 1, &key, 1, &g, pt_done, &sa, c->msgs), 0);
	conn_send(&k, 0, c->msgs[0].buf, c->msgs[0].len);
	assert_int_equal(ps_client_push(c->cl[0], 3, 1, &key, 1, &g, pt_done, &sb, c->msgs), 0);
	conn_send(&k, 0, c->msgs[0].buf, c->msgs[0].len);
	snprintf(away, sizeof(away), "%s.away", wal);
	assert_int_equal(rename(wal, away), 0);
	conn_deliver(&k, 1, flags, kinds);         /* the first, while the log cannot take it */
	assert_true(flags[0] & PS_F_RETRY);
	assert_int_equal(kinds[0], PS_ERR_IO);
	assert_int_equal(rename(away, wal), 0);
	conn_deliver(&k, 1, flags, kinds);          /* the second: the log is back */
	assert_true(flags[0] & PS_F_RETRY);
	assert_int_equal(kinds[0], PS_ERR_ORDER);
	assert_int_equal(sa, 1);                    /* both still waiting, neither dropped */
	assert_int_equal(sb, 1);
	ps_client_tick(c->cl[0], now += 500, &io);  /* within the back-off: nothing sent */
	assert_int_equal(k.n, 0);
	ps_client_tick(c->cl[0], now += 1000, &io);
	assert_int_equal(k.n, 2);                   /* both again, oldest first */
	conn_deliver(&k, 2, flags, kinds);
	assert_int_equal(sa, 0);
	assert_int_equal(sb, 0);
	assert_true(count_of(c, 0) == 2.0f);
	ps_client_stats_get(c->cl[0], &cs);
	assert_int_equal(cs.retries, 2);
	assert_int_equal(k.order.seq, 0);
	pt_cluster_destroy(c);
}

/* ---- sync mode */

static void sync_push(struct pt_cluster *c, uint32_t w, uint32_t seed)
{
	fill(c, w, 1, seed);
}

static void barrier(struct pt_cluster *c, uint32_t w, uint64_t step, bool want_done)
{
	bool done = false;
	int st = 1;

	assert_int_equal(ps_client_barrier(c->cl[w], step, &done, pt_done, &st, c->msgs), 0);
	pt_deliver(c, w);
	assert_int_equal(st, 0);
	assert_int_equal(done, want_done);
}

/*
 * Step 1 is cut in the middle twice: a checkpoint after worker 0 pushed and reached the
 * barrier (pending sums and the barrier in the file), then a crash after worker 1 pushed
 * (its push only in the log). The recovered server finishes the step exactly as a server
 * that never stopped; so does one restored from the mid-step checkpoint alone.
 */
static void test_wal_sync_step_survives_crash_mid_step(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *r, *a, *b, *c;
	char err[256];
	uint64_t rows;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &r), 0);
	a = restart(PS_MODE_SYNC, 2, SEG, &st);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 1);
		sync_push(x, 1, 2);
		barrier(x, 0, 0, false);
		barrier(x, 1, 0, true);
		barrier(x, 0, 0, true); /* asking again: done, worker 0 moves to step 1 */
		sync_push(x, 0, 3);
		barrier(x, 0, 1, false);
		if (x == a)
			assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
		sync_push(x, 1, 4);
	}
	barrier(r, 1, 1, true);
	barrier(r, 0, 1, true);
	pull_all(r, &ref);
	pt_cluster_destroy(a); /* killed mid-step */

	b = restart(PS_MODE_SYNC, 2, SEG, &st);
	assert_int_equal(st.records, 2); /* worker 1's sparse and dense push */
	barrier(b, 1, 1, true);          /* worker 0's arrival came back from the checkpoint */
	barrier(b, 0, 1, true);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);

	/* The checkpoint alone (no log): pending sums and barrier of the cut restored. */
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &c), 0);
	assert_int_equal(ps_load(c->h[0], ckpt, err, sizeof(err)), 0);
	for (uint32_t w = 0; w < 2; w++) {
		int done = 1;
		assert_int_equal(ps_client_hello(c->cl[w], pt_done, &done, c->msgs), 0);
		pt_deliver(c, w);
	}
	sync_push(c, 1, 4);
	barrier(c, 1, 1, true);
	pull_all(c, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(c);
	pt_cluster_destroy(r);
}

/* ---- a log that refuses a barrier's records */

static char away[PATH_MAX + 8];

/* The log cannot roll to a new segment: its directory is gone (root ignores permissions). */
static void log_dir_away(void)
{
	snprintf(away, sizeof(away), "%s.away", wal);
	assert_int_equal(rename(wal, away), 0);
}

static void log_dir_back(void)
{
	assert_int_equal(rename(away, wal), 0);
}

/*
 * A barrier request the log refused: an error reply of kind PS_ERR_IO, "retry", flagged
 * PS_F_RETRY, so the client keeps the request to send it again after its back-off (these
 * tests never tick the client: they ask again themselves).
 */
static void barrier_refused(struct pt_cluster *c, uint32_t w, uint64_t step)
{
	bool done = false;

	assert_int_equal(pt_barrier(c, w, step, &done), 1); /* still waiting */
	assert_int_equal(c->rep_buf[3], PS_T_ERROR);
	assert_true(tl_ld16(c->rep_buf + 4) & PS_F_RETRY);
	assert_int_equal(tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 4), PS_ERR_IO);
	assert_non_null(strstr((const char *)c->rep_buf + TL_MSG_HDR_LEN + 8, "retry"));
}

/*
 * A push the log cannot take (its directory gone while a new segment is opened): refused for
 * a retry, nothing applied, and the client names the server's reason
 * (ps_client_retry_reason), which the glue logs while it keeps sending the push again.
 */
static void test_wal_refused_push_reason_for_the_caller(void **state)
{
	struct ps_recover_stats st;
	struct pt_cluster *a = restart(PS_MODE_ASYNC, 2, SEG, &st);
	uint64_t rows, key = 1000;
	float g = -1.0f;
	char err[256];

	(void)state;
	count_push(a, 0, 3);
	assert_string_equal(ps_client_retry_reason(a->cl[0]), "");
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	log_dir_away();
	assert_int_equal(pt_push(a, 0, 3, 1, &key, 1, &g), 1); /* still waiting: a retry */
	assert_true(tl_ld16(a->rep_buf + 4) & PS_F_RETRY);
	assert_non_null(strstr(ps_client_retry_reason(a->cl[0]), "write-ahead log"));
	assert_non_null(strstr(ps_client_retry_reason(a->cl[0]), "retry"));
	log_dir_back();
	assert_true(count_of(a, 0) == 3.0f); /* the refused push applied nothing */
	pt_cluster_destroy(a);
}

/* One more sync step on both clusters, both workers, then their states compared. */
static void step_both_and_compare(struct pt_cluster *r, struct pt_cluster *b, uint64_t step)
{
	struct state ref, got;

	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? b : r;
		sync_push(x, 0, 5);
		sync_push(x, 1, 6);
		assert_int_equal(pt_barrier_all(x, step), 0);
	}
	pull_all(r, &ref);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
}

static uint64_t epoch_of(struct ps_server *s)
{
	struct ps_barrier_stats bs;

	ps_server_barrier_stats(s, &bs, NULL, 0);
	return bs.epoch;
}

/*
 * The last arrival of step 0 cannot be logged: refused, and nothing of it counted (the
 * barrier still waits for that worker and takes its arrival when the log is back), so the
 * step completes once, and a crash later replays to the same state.
 */
static void test_wal_failed_last_arrival_leaves_barrier_usable(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *r, *a, *b;
	char err[256];
	uint64_t rows;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &r), 0);
	a = restart(PS_MODE_SYNC, 2, SEG, &st);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 1);
		sync_push(x, 1, 2);
		barrier(x, 0, 0, false);
	}
	/* A primary checkpoint starts a new generation: the next record needs a new segment. */
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	log_dir_away();
	barrier_refused(a, 1, 0);
	barrier(a, 0, 0, false); /* not counted: still waiting for worker 1 */
	log_dir_back();
	barrier(a, 1, 0, true);
	barrier(a, 0, 0, true);
	barrier(r, 1, 0, true);
	barrier(r, 0, 0, true);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 3);
		sync_push(x, 1, 4);
		assert_int_equal(pt_barrier_all(x, 1), 0);
	}
	pull_all(r, &ref);
	pull_all(a, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(a); /* killed */
	b = restart(PS_MODE_SYNC, 2, SEG, &st);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	step_both_and_compare(r, b, 2);
	pt_cluster_destroy(b);
	pt_cluster_destroy(r);
}

/*
 * A first (not last) arrival the log refuses is not counted either: counted in memory, it
 * would let the step complete without its record, and the replay would then mix the next
 * step's pushes into that step and refuse the next barrier records.
 */
static void test_wal_failed_arrival_not_counted_replay_exact(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *r, *a, *b;
	uint64_t rows, epoch;
	char err[256];

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &r), 0);
	a = restart(PS_MODE_SYNC, 2, SEG, &st);
	epoch = epoch_of(a->srv[0]);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 1);
		sync_push(x, 1, 2);
	}
	assert_int_equal(ps_save(a->h[0], ckpt, &rows, err, sizeof(err)), 0);
	log_dir_away();
	barrier_refused(a, 0, 0);
	log_dir_back();
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		barrier(x, 1, 0, false); /* worker 0 is not in yet */
		barrier(x, 0, 0, true);
		barrier(x, 1, 0, true);
		sync_push(x, 0, 3);
		sync_push(x, 1, 4);
		barrier(x, 0, 1, false);
	}
	pt_cluster_destroy(a); /* killed in the middle of step 1 */
	b = restart(PS_MODE_SYNC, 2, SEG, &st);
	assert_int_equal(epoch_of(b->srv[0]), epoch); /* the same state, back */
	/* New worker processes redo step 1: numbered as before, taken for the same pushes. */
	sync_push(b, 0, 3);
	assert_int_equal(tl_ld32(b->rep_buf + TL_MSG_HDR_LEN + 8), 0); /* "duplicate" */
	sync_push(b, 1, 4);
	barrier(b, 1, 1, true);  /* worker 0's arrival at step 1 came back from the log */
	barrier(b, 0, 1, true);
	barrier(r, 1, 1, true);
	barrier(r, 0, 1, true);
	pull_all(r, &ref);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	step_both_and_compare(r, b, 2);
	pt_cluster_destroy(b);
	pt_cluster_destroy(r);
}

/* Worker w pushes k keys of the counter table (dim 1): a record of 16 + align8(64 + 12k). */
static void pad_push(struct pt_cluster *c, uint32_t w, uint32_t k)
{
	uint64_t *keys = malloc(k * sizeof(*keys));
	float *g = malloc(k * sizeof(*g));

	for (uint32_t i = 0; i < k; i++) {
		keys[i] = 50000 + i;
		g[i] = -1.0f;
	}
	assert_int_equal(pt_push(c, w, 3, 1, keys, k, g), 0);
	free(keys);
	free(g);
}

/* Fills handler h's segment with worker w's pushes until what is left takes a barrier
 * arrival (72 bytes) but not then the step's record (64 more). */
static void pad_segment(struct pt_cluster *c, uint32_t w)
{
	const struct ps_wal *lw = &c->h[0]->wal;
	size_t left = lw->size - lw->off;

	while (left >= 136) {
		uint32_t k = left >= 400 ? (uint32_t)((left - 104 - 80) / 12) : 1;
		while (k > 1 && 16 + ((64 + 12 * (size_t)k + 7) & ~(size_t)7) > left - 72)
			k--;
		pad_push(c, w, k);
		assert_true(lw->size - lw->off < left);
		left = lw->size - lw->off;
	}
	assert_true(left >= 72);
}

/*
 * The step's own record (PS_T_WAL_STEP) cannot be logged: the step is left complete but not
 * applied (not "being applied" for ever, which would answer "not done" to everyone), the
 * worker is told to retry, and the next ask applies it.
 */
static void test_wal_failed_step_record_leaves_barrier_usable(void **state)
{
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *r, *a, *b;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &r), 0);
	a = restart(PS_MODE_SYNC, 2, SEG, &st);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 1);
		sync_push(x, 1, 2);
		barrier(x, 0, 0, false);
	}
	pad_segment(a, 1);
	log_dir_away();
	barrier_refused(a, 1, 0); /* its arrival fitted; the step's record did not */
	barrier_refused(a, 0, 0); /* asking again tries to apply it again */
	log_dir_back();
	barrier(a, 1, 0, true);
	barrier(a, 0, 0, true);
	barrier(r, 1, 0, true);
	barrier(r, 0, 0, true);
	pull_all(r, &ref);
	pull_all(a, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(a);
	b = restart(PS_MODE_SYNC, 2, SEG, &st);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	step_both_and_compare(r, b, 1);
	pt_cluster_destroy(b);
	pt_cluster_destroy(r);
}

/*
 * A step closed by a barrier timeout without worker 2 (policy continue) is in the log with
 * the workers it left out: the replay closes it at the same place, and worker 2 stays left
 * out after the restart until it says hello.
 */
static void test_wal_barrier_timeout_closure_replayed(void **state)
{
	struct ps_barrier_stats bs;
	struct ps_recover_stats st;
	struct state ref, got;
	struct pt_cluster *r, *a, *b;
	char err[256] = "";
	bool done;

	(void)state;
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 2, tabs, 3, &r), 0);
	pt_barrier_timeout_ms = 30;
	pt_barrier_policy = PS_BARRIER_CONTINUE;
	a = restart(PS_MODE_SYNC, 3, SEG, &st);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 1);
		sync_push(x, 1, 2);
		barrier(x, 0, 0, false);
		barrier(x, 1, 0, x == r);
	}
	usleep(50 * 1000);
	barrier(a, 0, 0, true); /* closes step 0 without worker 2 */
	barrier(a, 1, 0, true);
	barrier(r, 0, 0, true);
	for (int k = 0; k < 2; k++) {
		struct pt_cluster *x = k ? a : r;
		sync_push(x, 0, 3);
		sync_push(x, 1, 4);
		barrier(x, 0, 1, false);
	}
	pt_cluster_destroy(a);
	b = make(PS_MODE_SYNC, 3, SEG);
	pt_barrier_timeout_ms = 0;
	pt_barrier_policy = PS_BARRIER_FAIL;
	if (ps_recover(b->h[0], ckpt, &st, err, sizeof(err)) != 0)
		fail_msg("recover: %s", err);
	ps_server_barrier_stats(b->srv[0], &bs, NULL, 0);
	assert_int_equal(bs.step, 1);
	assert_int_equal(bs.gone, 1);
	assert_int_equal(bs.arrived, 1);
	assert_int_equal(pt_hello(b, 0), 0);
	assert_int_equal(pt_hello(b, 1), 0);
	assert_int_equal(pt_barrier(b, 1, 1, &done), 0);
	assert_true(done); /* worker 2 is still left out */
	barrier(b, 0, 1, true);
	barrier(r, 1, 1, true);
	barrier(r, 0, 1, true);
	pull_all(r, &ref);
	pull_all(b, &got);
	assert_memory_equal(&ref, &got, sizeof(ref));
	pt_cluster_destroy(b);
	pt_cluster_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wal_crash_after_checkpoint_loses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_replay_from_empty_without_checkpoint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_replay_idempotent_over_checkpoint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_torn_tail_dropped_and_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_damaged_log_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_damaged_tail_torn_and_cut_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_damage_before_a_later_segment_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wal_restore_of_older_checkpoint_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wal_background_sync_across_rolls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_segments_roll_and_checkpoint_deletes_covered,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_refused_push_retried_in_order_exactly_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_hello_resumes_sequence_after_worker_restart,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_sync_step_survives_crash_mid_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_refused_push_reason_for_the_caller, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wal_failed_last_arrival_leaves_barrier_usable,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_failed_arrival_not_counted_replay_exact,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_failed_step_record_leaves_barrier_usable,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_barrier_timeout_closure_replayed, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("wal", tests, NULL, NULL);
}
