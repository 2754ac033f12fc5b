/*
 * test_ckpt.c — checkpoints: a save/load round trip restores values and optimizer state;
 * every kind of damaged or mismatched file is refused with a clear error and loads
 * nothing; a snapshot taken while another lcore keeps pushing is consistent (every row's
 * weight and Adagrad accumulator from the same moment, all shards from one cut).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_hash_crc.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

static char path[256];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/tmp/ps_ckpt_test_%d.ckpt", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	char tmp[300];

	(void)state;
	unlink(path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	return 0;
}

static struct ps_table_config tabs[2];

static void mk_tabs(uint32_t dim)
{
	tabs[0] = pt_table(1, dim, PS_OPT_ADAM);
	tabs[1] = pt_table(2, 2, PS_OPT_ADAGRAD);
	tabs[1].kind = PS_TABLE_DENSE;
	tabs[1].dense_rows = 50;
}

static void fill(struct pt_cluster *c, uint32_t steps)
{
	uint64_t keys[100];
	float g[100 * 4], dg[100];
	uint32_t i, s;
	int st;

	for (i = 0; i < 100; i++)
		keys[i] = i * 31 + 1;
	for (s = 0; s < steps; s++) {
		for (i = 0; i < 400; i++)
			g[i] = (float)((i * 7 + s) % 13) - 6.0f;
		for (i = 0; i < 100; i++)
			dg[i] = (float)(i % 5) - 2.0f;
		assert_int_equal(pt_push(c, 0, 1, 4, keys, 100, g), 0);
		st = 1;
		assert_int_equal(ps_client_dense_push(c->cl[0], 2, 2, 50, 0, 50, dg, pt_done, &st, c->msgs), 0);
		pt_deliver(c, 0);
		assert_int_equal(st, 0);
	}
}

static void pull_all(struct pt_cluster *c, float *sp, float *dn)
{
	uint64_t keys[100];
	uint32_t i;
	int st = 1;

	for (i = 0; i < 100; i++)
		keys[i] = i * 31 + 1;
	assert_int_equal(pt_pull(c, 0, 1, 4, keys, 100, sp), 0);
	assert_int_equal(ps_client_dense_pull(c->cl[0], 2, 2, 50, 0, 50, dn, pt_done, &st, c->msgs), 0);
	pt_deliver(c, 0);
	assert_int_equal(st, 0);
}

static void save_msg(struct pt_cluster *c)
{
	uint8_t *m = c->msgs[0].buf;
	struct tl_msg_hdr h = { .type = PS_T_SAVE, .body_len = (uint32_t)strlen(path), .req_id = 9 };
	struct tl_iov iov[8];
	struct tl_msg_view v;
	struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };

	tl_msg_hdr_encode(m, &h);
	memcpy(m + TL_MSG_HDR_LEN, path, h.body_len);
	pt_view(m, 3, iov, 8, &v);
	assert_int_equal(ps_handle(c->h[0], &v, &rep), 0);
	assert_int_equal(rep.buf[3], PS_T_SAVE_R);
	assert_int_equal(tl_ld64(rep.buf + TL_MSG_HDR_LEN), 100 + 50);
}

/* A data-plane PS_T_SAVE (allow_save_requests off) is refused and writes nothing. */
static void test_ckpt_save_request_refused_on_data_plane(void **state)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 1, .n_lcores = 1, .n_workers = 1,
				       .mode = PS_MODE_ASYNC, .tables = &t, .n_tables = 1 };
	static uint8_t m[TL_MSG_HDR_LEN + 256] __attribute__((aligned(8)));
	static uint8_t rb[4096] __attribute__((aligned(64)));
	struct tl_msg_hdr h = { .type = PS_T_SAVE, .body_len = (uint32_t)strlen(path), .req_id = 4 };
	struct ps_reply rep = { .buf = rb, .cap = sizeof(rb) };
	struct tl_iov iov = { m + TL_MSG_HDR_LEN, h.body_len };
	struct tl_msg_view v = { .iov = &iov, .iovcnt = 1 };
	struct ps_server *s;
	struct ps_handler *hd;

	(void)state;
	unlink(path);
	assert_int_equal(ps_server_create(&sc, &s, NULL, 0), 0);
	assert_int_equal(ps_handler_create(s, 0, &hd), 0);
	tl_msg_hdr_encode(m, &h);
	memcpy(m + TL_MSG_HDR_LEN, path, h.body_len);
	assert_int_equal(tl_msg_hdr_decode(m, TL_MSG_MAX_BODY_DEFAULT, &v.hdr), 0);
	assert_int_equal(ps_handle(hd, &v, &rep), -EPERM);
	assert_int_equal(rep.buf[3], PS_T_ERROR);
	assert_int_equal(access(path, F_OK), -1);
	ps_handler_destroy(hd);
	ps_server_destroy(s);
}

static void test_ckpt_round_trip_restores_values_and_state(void **state)
{
	struct pt_cluster *a, *b;
	float sa[400], da[100], sb[400], db[100];
	char err[256] = "";

	(void)state;
	if (access("/dev/shm", W_OK) == 0)
		snprintf(path, sizeof(path), "/dev/shm/ps_ckpt_test_%d.ckpt", (int)getpid());
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 3);
	save_msg(a); /* through the control message, as psctl would */
	assert_int_equal(access(path, F_OK), 0);
	mk_tabs(4);
	/* (a different shard count: test_ckpt_exactly_once_state_across_shard_counts) */
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	pull_all(a, sa, da);
	pull_all(b, sb, db);
	assert_memory_equal(sa, sb, sizeof(sa));
	assert_memory_equal(da, db, sizeof(da));
	/* optimizer state came back too: one more identical step keeps them identical (b's
	 * client says hello first: the restored sequences would take its pushes for resends) */
	int hello = 1;
	assert_int_equal(ps_client_hello(b->cl[0], pt_done, &hello, b->msgs), 0);
	pt_deliver(b, 0);
	assert_int_equal(hello, 0);
	fill(a, 1);
	fill(b, 1);
	pull_all(a, sa, da);
	pull_all(b, sb, db);
	assert_memory_equal(sa, sb, sizeof(sa));
	assert_memory_equal(da, db, sizeof(da));
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
}

/*
 * A sync checkpoint is cut inside a step: the step's acknowledged pushes are pending sums in
 * the file. Loaded into an async or GEO server (a job restarted in another mode) they are
 * applied at once, as the barrier would have: the model equals the sync server's after that
 * barrier. (The load used to skip from the sums to the end of the file, so the sections after
 * them were missing and it failed, with no text.)
 */
static void test_ckpt_sync_file_into_async_and_geo_server(void **state)
{
	static const enum ps_mode modes[] = { PS_MODE_ASYNC, PS_MODE_GEO };
	struct pt_cluster *a, *b;
	float sa[400], da[100], sb[400], db[100];
	char err[256] = "";

	(void)state;
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_SYNC, 1, tabs, 2, &a), 0);
	fill(a, 1);
	save_msg(a);
	assert_int_equal(pt_barrier_all(a, 0), 0);
	pull_all(a, sa, da);
	for (unsigned i = 0; i < 2; i++) {
		mk_tabs(4);
		assert_int_equal(pt_cluster_create(1, 3, modes[i], 1, tabs, 2, &b), 0);
		assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
		pull_all(b, sb, db);
		assert_memory_equal(sa, sb, sizeof(sa));
		assert_memory_equal(da, db, sizeof(da));
		pt_cluster_destroy(b);
	}
	pt_cluster_destroy(a);
}

static void test_ckpt_restores_exactly_once_state(void **state)
{
	struct pt_cluster *a, *b;
	uint64_t rows, k = 5;
	float g[4] = { 1, 1, 1, 1 }, v1[4], v2[4];
	char err[256];

	(void)state;
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 2); /* worker 0 used sequences 1..4 */
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	assert_int_equal(pt_pull(b, 0, 1, 4, &k, 1, v1), 0);
	/* b's client starts at sequence 1 again, like a worker resending after the restart:
	 * pushes 1..4 are in the checkpoint already, so they are acknowledged, not applied */
	assert_int_equal(pt_push(b, 0, 1, 4, &k, 1, g), 0);
	assert_int_equal(tl_ld32(b->rep_buf + TL_MSG_HDR_LEN + 8), 0);
	assert_int_equal(pt_pull(b, 0, 1, 4, &k, 1, v2), 0);
	assert_memory_equal(v1, v2, sizeof(v1));
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
}

/*
 * A checkpoint of one shard (as PS executables cut before they ran 16) restores its
 * exactly-once state into every shard of a server of more; one cut over another number of
 * shards is refused rather than loaded without it.
 */
static void test_ckpt_exactly_once_state_across_shard_counts(void **state)
{
	struct pt_cluster *a, *b, *c;
	uint64_t rows, k = 5;
	float g[4] = { 1, 1, 1, 1 }, v1[4], v2[4];
	char err[256];

	(void)state;
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 2); /* worker 0 used sequences 1..4 */
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_cluster_create(1, 16, PS_MODE_ASYNC, 1, tabs, 2, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	assert_int_equal(pt_pull(b, 0, 1, 4, &k, 1, v1), 0);
	assert_int_equal(pt_push(b, 0, 1, 4, &k, 1, g), 0); /* sequence 1 again: a resend */
	assert_int_equal(tl_ld32(b->rep_buf + TL_MSG_HDR_LEN + 8), 0);
	assert_int_equal(pt_pull(b, 0, 1, 4, &k, 1, v2), 0);
	assert_memory_equal(v1, v2, sizeof(v1));
	/* Cut over 3 shards, loaded into 16: refused, naming both counts. */
	pt_cluster_destroy(a);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 2);
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(pt_cluster_create(1, 16, PS_MODE_ASYNC, 1, tabs, 2, &c), 0);
	assert_int_equal(ps_load(c->h[0], path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "3 shards"));
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
	pt_cluster_destroy(c);
}

struct writer {
	struct ps_save_job *j;
	uint64_t rows;
	int rc;
	char err[256];
};

static void *write_main(void *arg)
{
	struct writer *w = arg;

	w->rc = ps_save_write(w->j, &w->rows, w->err, sizeof(w->err));
	return NULL;
}

/*
 * A save in steps: after the cut the saving handler goes on applying pushes (the copy is
 * copy-on-write), the file is written by another thread, and it holds the cut, not what
 * came after; a second save meanwhile is refused.
 */
static void test_ckpt_save_in_steps_serves_while_it_writes(void **state)
{
	struct pt_cluster *a, *b;
	struct writer w = { 0 };
	struct ps_save_job *j2;
	float sa[400], da[100], sb[400], db[100], s_after[400], d_after[100];
	char err[256] = "";
	pthread_t th;

	(void)state;
	if (access("/dev/shm", W_OK) == 0)
		snprintf(path, sizeof(path), "/dev/shm/ps_ckpt_test_%d.ckpt", (int)getpid());
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 3);
	pull_all(a, sa, da); /* the values at the cut */
	assert_int_equal(ps_save_start(a->h[0], path, &w.j, err, sizeof(err)), 0);
	assert_int_equal(ps_save_start(a->h[0], path, &j2, err, sizeof(err)), -EBUSY);
	fill(a, 2);          /* served while the save is under way */
	pull_all(a, s_after, d_after);
	assert_memory_not_equal(sa, s_after, sizeof(sa));
	while (!ps_save_copied(w.j))
		ps_handler_poll(a->h[0]);
	assert_int_equal(pthread_create(&th, NULL, write_main, &w), 0);
	fill(a, 1);          /* and while the file is written */
	pthread_join(th, NULL);
	assert_int_equal(w.rc, 0);
	assert_true(w.rows > 0);
	ps_save_free(w.j);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &b), 0);
	assert_int_equal(ps_load(b->h[0], path, err, sizeof(err)), 0);
	pull_all(b, sb, db);
	assert_memory_equal(sa, sb, sizeof(sa));
	assert_memory_equal(da, db, sizeof(da));
	pt_cluster_destroy(a);
	pt_cluster_destroy(b);
}

/* ---- damaged files */

static uint8_t *file;
static size_t flen;

static void read_file(void)
{
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	flen = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	file = malloc(flen);
	assert_int_equal(fread(file, 1, flen, f), flen);
	fclose(f);
}

static uint8_t *orig;

static void read_file_again(void)
{
	memcpy(file, orig, flen);
}

static void write_file(const uint8_t *b, size_t len, bool fix_crc)
{
	FILE *f = fopen(path, "wb");
	uint8_t *c = malloc(len + 1);

	memcpy(c, b, len);
	if (fix_crc && len >= 16) {
		tl_st64(c + len - 16, len - 16);
		tl_st32(c + len - 8, rte_hash_crc(c, (uint32_t)(len - 16), 0xffffffffu));
	}
	assert_non_null(f);
	assert_int_equal(fwrite(c, 1, len, f), len);
	fclose(f);
	free(c);
}

static void expect_refused(uint32_t dim, int rc, const char *words)
{
	struct pt_cluster *c;
	struct ps_table_stats st;
	char err[256] = "";

	mk_tabs(dim);
	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, tabs, 2, &c), 0);
	assert_int_equal(ps_load(c->h[0], path, err, sizeof(err)), rc);
	if (!strstr(err, words))
		fail_msg("error \"%s\" does not say \"%s\"", err, words);
	assert_int_equal(ps_server_table_stats(c->srv[0], 1, &st), 0);
	assert_int_equal(st.rows, 0); /* nothing loaded */
	pt_cluster_destroy(c);
}

static void test_ckpt_damaged_files_refused(void **state)
{
	struct pt_cluster *a;
	char err[256];
	uint64_t rows;

	(void)state;
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 2);
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(rows, 150);
	read_file();
	orig = malloc(flen);
	memcpy(orig, file, flen);
	/* header 32 + 2 table descriptors of 40; table 1 rows: key + (4 + 10 Adam) floats */
	assert_int_equal(tl_ld64(file + 32 + 24), 100);

	file[flen / 2] ^= 0x10;                       /* one flipped bit */
	write_file(file, flen, false);
	expect_refused(4, -EBADMSG, "checksum");
	file[flen / 2] ^= 0x10;
	write_file(file, flen - 100, false);          /* truncated */
	expect_refused(4, -EBADMSG, "checksum");
	write_file(file, 10, false);                  /* a stub */
	expect_refused(4, -EBADMSG, "too short");
	write_file(file, 0, false);                   /* empty */
	expect_refused(4, -EBADMSG, "too short");
	write_file(file, flen, false);                /* intact, but the table has another dim */
	expect_refused(8, -EINVAL, "does not match");
	file[0] = 'X';                                /* valid checksum, wrong magic */
	write_file(file, flen, true);
	expect_refused(4, -EBADMSG, "magic");
	file[0] = 'W';
	write_file(file, flen - 16 - 4, true);        /* valid checksum, rows cut short */
	expect_refused(4, -EBADMSG, "need");
	memcpy(file + 112 + 64, file + 112, 64);      /* valid checksum, a key twice */
	write_file(file, flen, true);
	expect_refused(4, -EBADMSG, "repeated");      /* rows loaded before it are dropped */
	read_file_again();
	unlink(path);                                 /* missing */
	expect_refused(4, -ENOENT, path);
	/* a server that already holds rows refuses to load */
	write_file(file, flen, false);
	assert_int_equal(ps_load(a->h[0], path, err, sizeof(err)), -EBUSY);
	free(file);
	free(orig);
	pt_cluster_destroy(a);
}

/* ---- a checkpoint past 4 GiB */

/*
 * The body of a checkpoint above 4 GiB, without writing 4 GiB: a real save whose
 * exactly-once section is rewritten to claim 2^29 + 1 workers (4 GiB and 8 bytes of zeros, as a hole
 * of a sparse file: the server of 1 worker skips a section cut for another cluster size),
 * trailer and CRC32C made over the whole body. The load streams 4 GiB + 8 bytes through
 * the length and CRC code (what a cast to 32 bits broke), keeps its memory to its buffer,
 * and restores every value. The file goes to tmpfs when there is one: a hole reads there
 * at memory speed, where a disk file system fills the page cache with 4 GiB of zeros.
 */
#define BIG_WORKERS ((1u << 29) + 1u)

static void test_ckpt_load_past_4gib_streams(void **state)
{
	static const uint8_t zeros[1u << 20];
	struct pt_cluster *a, *b;
	float sp[400], dn[100], sp2[400], dn2[100];
	uint64_t rows, seq_off, dur_off, body, hole = 8ull * BIG_WORKERS, left;
	uint32_t t, crc = 0xffffffffu;
	uint8_t hd[8], tr[16];
	struct rusage ru0, ru1;
	char err[256] = "";
	struct stat st;
	FILE *f;

	(void)state;
	if (access("/dev/shm", W_OK) == 0)
		snprintf(path, sizeof(path), "/dev/shm/ps_ckpt_test_%d.ckpt", (int)getpid());
	mk_tabs(4);
	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &a), 0);
	fill(a, 3);
	pull_all(a, sp, dn);
	assert_int_equal(ps_save(a->h[0], path, &rows, err, sizeof(err)), 0);
	pt_cluster_destroy(a);
	read_file();
	/* rows end where the exactly-once section starts: header 32, 2 descriptors of 40 */
	seq_off = 32 + 2 * 40;
	for (t = 0; t < 2; t++) {
		const uint8_t *d = file + 32 + 40 * t;
		seq_off += tl_ld64(d + 24) * (8 + 4ull * (tl_ld32(d + 8) + tl_ld32(d + 16)));
	}
	dur_off = seq_off + 8 + 8ull * tl_ld32(file + seq_off) * tl_ld32(file + seq_off + 4);
	body = seq_off + 8 + hole + (flen - 16 - dur_off);
	assert_true(body > (4ull << 30));
	tl_st32(hd, 1);
	tl_st32(hd + 4, BIG_WORKERS);
	crc = rte_hash_crc(file, (uint32_t)seq_off, crc);
	crc = rte_hash_crc(hd, 8, crc);
	for (left = hole; left > 0; left -= left < sizeof(zeros) ? left : sizeof(zeros))
		crc = rte_hash_crc(zeros, (uint32_t)(left < sizeof(zeros) ? left : sizeof(zeros)), crc);
	crc = rte_hash_crc(file + dur_off, (uint32_t)(flen - 16 - dur_off), crc);
	tl_st64(tr, body);
	tl_st32(tr + 8, crc);
	tl_st32(tr + 12, 0);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file, 1, seq_off, f), seq_off);
	assert_int_equal(fwrite(hd, 1, 8, f), 8);
	assert_int_equal(fseeko(f, (off_t)hole, SEEK_CUR), 0); /* the hole */
	assert_int_equal(fwrite(file + dur_off, 1, flen - 16 - dur_off, f), flen - 16 - dur_off);
	assert_int_equal(fwrite(tr, 1, 16, f), 16);
	assert_int_equal(fclose(f), 0);
	free(file);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, body + 16);
	print_message("checkpoint of %llu bytes, %llu of them on disk\n",
		      (unsigned long long)st.st_size, (unsigned long long)st.st_blocks * 512);

	assert_int_equal(pt_cluster_create(1, 3, PS_MODE_ASYNC, 1, tabs, 2, &b), 0);
	getrusage(RUSAGE_SELF, &ru0);
	if (ps_load(b->h[0], path, err, sizeof(err)) != 0)
		fail_msg("load of a %llu-byte checkpoint: %s", (unsigned long long)st.st_size, err);
	getrusage(RUSAGE_SELF, &ru1);
	print_message("peak RSS %ld kB before the load, %ld kB after\n", ru0.ru_maxrss,
		      ru1.ru_maxrss);
	assert_true(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024); /* kB: nowhere near the file */
	pull_all(b, sp2, dn2);
	assert_memory_equal(sp, sp2, sizeof(sp));
	assert_memory_equal(dn, dn2, sizeof(dn));
	pt_cluster_destroy(b);
	unlink(path);
	setup(state);
}

/* ---- snapshot during concurrent applies */

#define CK_KEYS 100000u
#define CK_SHARDS 4u

struct pusher {
	struct ps_server *s;
	struct ps_handler *h;
	_Atomic int stop, exited;
	_Atomic uint32_t done;  /* pushes fully applied */
	uint32_t pushes;
	uint8_t *req, *rep;
	uint32_t req_len;
};

static void *pusher_main(void *arg)
{
	struct pusher *p = arg;
	struct tl_iov iov[1] = { { p->req + TL_MSG_HDR_LEN, p->req_len - TL_MSG_HDR_LEN } };
	struct tl_msg_view v = { .iov = iov, .iovcnt = 1 };

	tl_msg_hdr_decode(p->req, UINT32_MAX, &v.hdr);
	/* Partner of the release store in the main thread: stop pushing. */
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		struct ps_reply rep = { .buf = p->rep, .cap = 1u << 20 };
		tl_st64(p->req + TL_MSG_HDR_LEN + 8, ++p->pushes); /* next sequence */
		assert_int_equal(ps_handle(p->h, &v, &rep), 0);
		/* Partner: the acquire load in the main thread's start-up wait. */
		atomic_store_explicit(&p->done, p->pushes, memory_order_release);
		ps_handler_poll(p->h);
	}
	atomic_store_explicit(&p->exited, 1, memory_order_release);
	/* Keep serving until the main thread no longer needs our shards. */
	while (atomic_load_explicit(&p->stop, memory_order_acquire) != 2)
		ps_handler_poll(p->h);
	return NULL;
}

static double adagrad_w(double w0, double a0, double lr, double eps, uint32_t n)
{
	double w = w0, a = a0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		a += 1.0;
		w -= lr / (sqrt(a) + eps);
	}
	return w;
}

static void test_ckpt_snapshot_during_concurrent_applies_consistent(void **state)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_ADAGRAD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = CK_SHARDS, .n_lcores = 2,
				       .n_workers = 1, .mode = PS_MODE_ASYNC, .max_keys = CK_KEYS,
				       .tables = &t, .n_tables = 1 };
	struct ps_server *s, *r;
	struct ps_handler *h0, *rh;
	struct pusher p = { 0 };
	pthread_t th;
	char err[256];
	uint64_t rows;
	uint32_t i, sh, n_by_shard[CK_SHARDS], j, distinct_n = 0, prev = UINT32_MAX;
	uint8_t *m;

	(void)state;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), 0);
	assert_int_equal(ps_handler_create(s, 0, &h0), 0);
	assert_int_equal(ps_handler_create(s, 1, &p.h), 0);
	/* one push of gradient 1.0 to every key */
	p.req_len = TL_MSG_HDR_LEN + PS_PUSH_HEAD + CK_KEYS * (8 + 8);
	p.req = m = malloc(p.req_len);
	p.rep = malloc(1u << 20);
	{
		struct tl_msg_hdr hd = { .type = PS_T_PUSH, .aux = PS_ELEM_F32, .table_id = 1,
					 .body_len = p.req_len - TL_MSG_HDR_LEN, .key_count = CK_KEYS, .dim = 2 };
		float one = 1.0f;
		tl_msg_hdr_encode(m, &hd);
		memset(m + TL_MSG_HDR_LEN, 0, PS_PUSH_HEAD); /* worker 0, incarnation 0 */
		for (i = 0; i < CK_KEYS; i++)
			tl_st64(m + TL_MSG_HDR_LEN + PS_PUSH_HEAD + 8 * i, i + 1);
		for (i = 0; i < CK_KEYS * 2; i++)
			memcpy(m + TL_MSG_HDR_LEN + PS_PUSH_HEAD + 8 * CK_KEYS + 4 * i, &one, 4);
	}
	assert_int_equal(pthread_create(&th, NULL, pusher_main, &p), 0);
	while (atomic_load_explicit(&p.done, memory_order_acquire) < 3)
		ps_handler_poll(h0);
	assert_int_equal(ps_save(h0, path, &rows, err, sizeof(err)), 0);
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	while (!atomic_load_explicit(&p.exited, memory_order_acquire))
		ps_handler_poll(h0);
	atomic_store_explicit(&p.stop, 2, memory_order_release);
	pthread_join(th, NULL);
	assert_int_equal(rows, CK_KEYS);

	/* Load it into a fresh server and inspect every row's (w, acc) pair. */
	sc.n_lcores = 1;
	assert_int_equal(ps_server_create(&sc, &r, err, sizeof(err)), 0);
	assert_int_equal(ps_handler_create(r, 0, &rh), 0);
	assert_int_equal(ps_load(rh, path, err, sizeof(err)), 0);
	for (sh = 0; sh < CK_SHARDS; sh++)
		n_by_shard[sh] = UINT32_MAX;
	for (sh = 0; sh < CK_SHARDS; sh++) {
		struct ps_table *tb = &r->shards[sh].tables[0];
		for (j = 0; j < tb->n_rows; j++) {
			float *w = ps_row_val(tb, j);
			double acc = w[2] - (double)t.op.init_accum;
			uint32_t n = (uint32_t)lround(acc);
			uint32_t home = ps_key_shard(ps_row_meta(tb, j)->key, CK_SHARDS);
			assert_true(fabs(acc - n) < 1e-2);
			/* the weight is the one that goes with this accumulator: no torn pair */
			assert_true(fabs(w[0] - adagrad_w(0, t.op.init_accum, t.op.lr, t.op.eps, n)) < 1e-4);
			assert_true(w[0] == w[1] && w[2] == w[3]);
			/* the whole home shard was copied at one moment */
			if (n_by_shard[home] == UINT32_MAX)
				n_by_shard[home] = n;
			assert_int_equal(n_by_shard[home], n);
		}
	}
	for (sh = 0; sh < CK_SHARDS; sh++) {
		if (n_by_shard[sh] < 3 || n_by_shard[sh] > p.pushes)
			fail_msg("shard %u snapshot at push %u, outside [3, %u]", sh, n_by_shard[sh], p.pushes);
		distinct_n += n_by_shard[sh] != prev;
		prev = n_by_shard[sh];
	}
	for (sh = 0, rows = 0; sh < CK_SHARDS; sh++)
		rows += s->shards[sh].cow_rows;
	print_message("pushes %u, rows copied on write during the save %llu\n", p.pushes,
		      (unsigned long long)rows);
	/* one cut for the whole server: no push is in some shards' copies and not others' */
	if (distinct_n != 1)
		fail_msg("shards snapshotted at %u different moments (pushes %u)", distinct_n, p.pushes);
	ps_handler_destroy(rh);
	ps_server_destroy(r);
	ps_handler_destroy(h0);
	ps_handler_destroy(p.h);
	ps_server_destroy(s);
	free(p.req);
	free(p.rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ckpt_save_request_refused_on_data_plane, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_round_trip_restores_values_and_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_sync_file_into_async_and_geo_server, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_restores_exactly_once_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_save_in_steps_serves_while_it_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_exactly_once_state_across_shard_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_damaged_files_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_snapshot_during_concurrent_applies_consistent,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_load_past_4gib_streams, setup, teardown),
	};
	return cmocka_run_group_tests_name("ps_ckpt", tests, NULL, NULL);
}
