/*
 * fuzz_wal.c — libFuzzer harness for the PS's crash recovery: ps_recover reading a
 * checkpoint and write-ahead log segments that may be torn or damaged (a disk, a partial
 * copy, another server's files). Built by fuzz/run.sh with the ps_core sources.
 *
 * Each input drives one crash and one recovery:
 *   1. server A (sparse dim 4 + dense 16x3, 2 shards, a log with 16 KiB segments so rolls
 *      happen, async or sync) takes up to 24 valid pushes (worker, keys, gradients from the
 *      input, encoded by ps_client), optionally a checkpoint to its own path in the middle
 *      (which cuts the log), then is destroyed without a save: the crash;
 *   2. up to 6 damage operations on its files (truncate, flip a byte, append garbage,
 *      delete), chosen by the input;
 *   3. server B with the same configuration runs ps_recover.
 * Invariants beyond the sanitizers: with no damage, recovery succeeds, replays one record per
 * accepted push (when the log was not cut) and B holds exactly A's rows and bit-identical
 * values for every key pushed (the log replays in apply order on one lcore); with damage, recovery returns 0 or a negative errno with a message, never a
 * crash, leak or hang.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "ps_core/ps.h"

#define WF_SPARSE 1u
#define WF_DENSE 2u
#define WF_DIM 4u
#define WF_MAX_PUSH 24u
#define WF_MAX_KEYS 8u
#define WF_REPLY_CAP (256u << 10)
#define WF_MAX_FILES 64u

static char wf_dir[64];       /* one directory for the process, emptied after each input */
static char wf_ckpt[96];
static uint8_t *wf_reply;

static void wf_rmdir(void)
{
	DIR *d = opendir(wf_dir);
	struct dirent *e;
	char p[512];

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", wf_dir, e->d_name);
		unlink(p);
	}
	closedir(d);
}

static void wf_cleanup(void)
{
	wf_rmdir();
	rmdir(wf_dir);
}

static void wf_once(void)
{
	if (wf_reply != NULL)
		return;
	snprintf(wf_dir, sizeof(wf_dir), "/dev/shm/wharf-fuzz-wal-XXXXXX");
	FH_CHECK(mkdtemp(wf_dir) != NULL);
	snprintf(wf_ckpt, sizeof(wf_ckpt), "%s/ckpt", wf_dir);
	atexit(wf_cleanup);
	wf_reply = aligned_alloc(64, WF_REPLY_CAP);
	FH_CHECK(wf_reply != NULL);
}

/* Runs one encoded request through the handler (reply in wf_reply, its length in
 * *rep_len); returns ps_handle's status. */
static int wf_handle(struct ps_handler *h, const uint8_t *msg, uint32_t len, uint32_t *rep_len)
{
	struct ps_reply rep = {.buf = wf_reply, .cap = WF_REPLY_CAP};
	struct tl_iov iov;
	struct tl_msg_view v;
	int rc;

	FH_CHECK(tl_msg_hdr_decode(msg, UINT32_MAX, &v.hdr) == 0);
	iov.base = msg + TL_MSG_HDR_LEN;
	iov.len = len - TL_MSG_HDR_LEN;
	v.iov = &iov;
	v.iovcnt = iov.len > 0;
	rc = ps_handle(h, &v, &rep);
	*rep_len = rep.len;
	return rc;
}

/* Values of keys[0..n) in table WF_SPARSE as server h sees them, into out. */
static void wf_pull(struct ps_handler *h, struct ps_client *c, const uint64_t *keys, uint32_t n,
		    float *out)
{
	uint8_t buf[4096];
	struct ps_msgbuf mb = {.buf = buf, .cap = sizeof(buf)};
	uint32_t rep_len;

	FH_CHECK(ps_client_pull(c, WF_SPARSE, WF_DIM, keys, n, out, NULL, NULL, &mb) == 0);
	FH_CHECK(wf_handle(h, buf, mb.len, &rep_len) == 0);
	FH_CHECK(rep_len == TL_MSG_HDR_LEN + n * WF_DIM * 4u);
	memcpy(out, wf_reply + TL_MSG_HDR_LEN, (size_t)n * WF_DIM * 4u);
}

/* Sorts keys[0..n) and drops repeats; returns how many are left (at most 32 here). */
static int wf_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t wf_unique(uint64_t *keys, uint32_t n)
{
	uint32_t out = 0;

	qsort(keys, n, sizeof(*keys), wf_cmp_u64);
	for (uint32_t i = 0; i < n; i++)
		if (out == 0 || keys[out - 1] != keys[i])
			keys[out++] = keys[i];
	return out;
}

/* The files in the directory (log segments and the checkpoint), sorted by name. */
static int wf_cmp(const void *a, const void *b) { return strcmp(a, b); }

static uint32_t wf_files(char names[][80])
{
	DIR *d = opendir(wf_dir);
	struct dirent *e;
	uint32_t n = 0;

	FH_CHECK(d != NULL);
	while ((e = readdir(d)) != NULL && n < WF_MAX_FILES)
		if (e->d_name[0] != '.')
			snprintf(names[n++], 80, "%s", e->d_name);
	closedir(d);
	qsort(names, n, 80, wf_cmp);
	return n;
}

/* One damage operation on one file; returns true when the file changed. */
static bool wf_damage(struct fh_in *in, char names[][80], uint32_t n)
{
	uint8_t op = fh_u8(in), junk[64];
	uint32_t pos = fh_u32(in);
	char p[200];
	struct stat sb;
	int fd;
	bool changed = false;

	if (n == 0)
		return false;
	snprintf(p, sizeof(p), "%s/%s", wf_dir, names[op % n]);
	if (stat(p, &sb) != 0)
		return false;
	switch ((op >> 6) & 3u) {
	case 0: /* truncate */
		if (sb.st_size > 0 && truncate(p, (off_t)(pos % (uint64_t)sb.st_size)) == 0)
			changed = true;
		break;
	case 1: /* flip one byte */
		if (sb.st_size > 0 && (fd = open(p, O_RDWR)) >= 0) {
			off_t at = (off_t)(pos % (uint64_t)sb.st_size);
			uint8_t b = 0, x = fh_u8(in) | 1u;

			if (pread(fd, &b, 1, at) == 1) {
				b ^= x;
				changed = pwrite(fd, &b, 1, at) == 1;
			}
			close(fd);
		}
		break;
	case 2: /* append garbage */
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = fh_u8(in);
		if ((fd = open(p, O_WRONLY | O_APPEND)) >= 0) {
			changed = write(fd, junk, 1 + pos % sizeof(junk)) > 0;
			close(fd);
		}
		break;
	default: /* delete */
		changed = unlink(p) == 0;
		break;
	}
	return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fh_in in = {data, size};
	uint8_t sel = fh_u8(&in), n_push = fh_u8(&in) % (WF_MAX_PUSH + 1), cut_at = fh_u8(&in);
	struct ps_table_config t[2] = {
		{.id = WF_SPARSE, .kind = PS_TABLE_SPARSE, .dim = WF_DIM,
		 .optim = (enum ps_optim_kind)(sel & 3u),
		 .op = {.lr = 0.1f, .eps = 1e-6f, .beta1 = (sel & 3u) == PS_OPT_FTRL ? 1.0f : 0.9f,
			.beta2 = 0.999f, .l1 = 0.01f, .l2 = 0.1f, .init_accum = 0.1f},
		 .init = PS_INIT_UNIFORM, .init_a = -0.5f, .init_b = 0.5f, .seed = 7},
		{.id = WF_DENSE, .kind = PS_TABLE_DENSE, .dim = 3, .dense_rows = 16,
		 .op = {.lr = 0.1f}},
	};
	struct ps_server_config sc = {.n_servers = 1, .n_shards = 2, .n_lcores = 1, .n_workers = 2,
				      .mode = (sel & 4u) ? PS_MODE_SYNC : PS_MODE_ASYNC,
				      .max_keys = 64, .tables = t, .n_tables = 2,
				      .wal_segment_bytes = 16u << 10};
	struct ps_client_config cc = {.n_servers = 1};
	uint64_t keys[WF_MAX_PUSH * WF_MAX_KEYS];
	float before[WF_MAX_PUSH * WF_MAX_KEYS * WF_DIM], after[WF_MAX_PUSH * WF_MAX_KEYS * WF_DIM];
	uint8_t buf[4096];
	char names[WF_MAX_FILES][80], err[256];
	struct ps_table_stats sa = {0}, sb = {0};
	struct ps_recover_stats st;
	struct ps_server *s;
	struct ps_handler *h;
	struct ps_client *c[2];
	uint32_t n_keys = 0, n_files, damaged = 0, accepted = 0;
	int rc;

	if (size > 8192)
		return 0;
	wf_once();
	sc.wal_dir = wf_dir;
	sc.ckpt_path = wf_ckpt;
	FH_CHECK(ps_server_create(&sc, &s, err, sizeof(err)) == 0);
	FH_CHECK(ps_handler_create(s, 0, &h) == 0);
	memset(&st, 0, sizeof(st));
	FH_CHECK(ps_recover(h, wf_ckpt, &st, err, sizeof(err)) == 0); /* empty: nothing to do */
	for (uint32_t w = 0; w < 2; w++) {
		cc.worker_id = w;
		FH_CHECK(ps_client_create(&cc, &c[w]) == 0);
	}
	/* 1. pushes, maybe a cut, then the crash */
	for (uint32_t i = 0; i < n_push; i++) {
		uint8_t b = fh_u8(&in);
		uint32_t nk = 1 + b % WF_MAX_KEYS, w = (b >> 4) & 1u;
		uint64_t *k = &keys[n_keys];
		float g[WF_MAX_KEYS * WF_DIM];
		struct ps_msgbuf mb = {.buf = buf, .cap = sizeof(buf)};
		uint32_t rep_len;

		for (uint32_t j = 0; j < nk; j++)
			k[j] = fh_u8(&in) % 32u;
		for (uint32_t j = 0; j < nk * WF_DIM; j++)
			g[j] = (float)(int8_t)fh_u8(&in) / 16.0f;
		if (ps_client_push(c[w], WF_SPARSE, WF_DIM, k, nk, g, NULL, NULL, &mb) != 0)
			break;
		accepted += wf_handle(h, buf, mb.len, &rep_len) == 0;
		n_keys += nk;
		if (i == cut_at % (n_push + 1u) && (sel & 8u)) {
			uint64_t rows;

			FH_CHECK(ps_save(h, wf_ckpt, &rows, err, sizeof(err)) == 0);
		}
	}
	FH_CHECK(ps_server_table_stats(s, WF_SPARSE, &sa) == 0);
	n_keys = wf_unique(keys, n_keys); /* a pull takes at most max_keys */
	if (n_keys > 0)
		wf_pull(h, c[0], keys, n_keys, before);
	ps_handler_destroy(h);
	ps_server_destroy(s);
	/* 2. damage */
	n_files = wf_files(names);
	for (uint32_t i = 0, n_ops = (sel >> 4) % 7u; i < n_ops; i++)
		damaged += wf_damage(&in, names, n_files);
	/* 3. recovery into a fresh server */
	FH_CHECK(ps_server_create(&sc, &s, err, sizeof(err)) == 0);
	FH_CHECK(ps_handler_create(s, 0, &h) == 0);
	err[0] = '\0';
	memset(&st, 0, sizeof(st));
	rc = ps_recover(h, wf_ckpt, &st, err, sizeof(err));
	if (damaged == 0) {
		if (rc != 0)
			fprintf(stderr, "undamaged recovery refused: %d %s\n", rc, err);
		FH_CHECK(rc == 0);
		/* Without a cut every accepted push is a record of the log, replayed. */
		if (!(sel & 8u))
			FH_CHECK(st.records == accepted && st.torn == 0);
		FH_CHECK(ps_server_table_stats(s, WF_SPARSE, &sb) == 0);
		FH_CHECK(sb.rows == sa.rows);
		if (n_keys > 0) {
			wf_pull(h, c[0], keys, n_keys, after);
			FH_CHECK(memcmp(before, after, (size_t)n_keys * WF_DIM * 4u) == 0);
		}
	} else {
		FH_CHECK(rc <= 0);
		FH_CHECK(rc == 0 || err[0] != '\0');
	}
	ps_handler_destroy(h);
	ps_server_destroy(s);
	ps_client_destroy(c[0]);
	ps_client_destroy(c[1]);
	wf_rmdir();
	return 0;
}
