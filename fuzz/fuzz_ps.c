/*
 * fuzz_ps.c — libFuzzer harness for ps_core's request decoding and handling, ps_handle
 * (ps_core/ps.h), on arbitrary request messages against a small server: one sparse
 * table (id 1, dim 4) and one dense table (id 2, dim 3, 16 rows), 2 shards, 2 workers.
 *
 * Call chain exercised: (transport/fuse hand up a message, simulated) -> ps_handle ->
 * validation, shard ops, optimizers -> reply in caller storage.
 *
 * Input layout (fuzz/gen_seeds.c writes seeds in it):
 *   u8  server  bits 0..1 mode (async, sync, geo; 3 = async), bits 2..3 the sparse
 *               table's optimizer, bits 4..5 the dense table's, bit 7 the sparse table's
 *               memory policies (8 rows, admission at 2 pushes, eviction after 3 steps)
 *   then requests, each:
 *   u8  pieces  body pieces - 1 (low 2 bits), u8 cuts[3] where they are cut
 *   u16 len     message length (little-endian), then len bytes: the 32-byte header and
 *               the body. Magic and version are forced valid and body_len set to what
 *               follows, as transport guarantees both.
 * PS_T_SAVE requests are skipped: their body is a file path the server writes to.
 *
 * Client mode (server bit 6): the same records are replies from a hostile server to a
 * ps_client with one request of each kind outstanding, fed to ps_client_on_reply. When
 * bit 2 of a record's pieces byte is set, its req_id is replaced by the id of outstanding
 * request (header byte 16 mod 8), so the fuzzer reaches the reply decoders without having
 * to guess ids. Checked: on_reply returns 0, -ENOENT or -EBADMSG; every request completes
 * at most once; GEO rows have the table's dim.
 *
 * Invariants checked besides ASan/UBSan: every request gets a well-formed reply that
 * carries its req_id; a refused request (rc < 0) gets a PS_T_ERROR reply and changes no
 * table's row count ("nothing of a refused request is applied"), except the partial
 * refusals: -ERANGE, rows whose update would not be finite were left as they were, and
 * -EDQUOT, keys new to the full table got no row, while the push's other rows were applied
 * (new keys among them created, old ones evicted).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuzz/fuzz_util.h"
#include "ps_core/ps.h"

#define PS_FZ_REPLY_CAP (256u << 10)
#define PS_FZ_SPARSE 1u
#define PS_FZ_DENSE 2u

static uint8_t *ps_fz_reply_buf;

static struct ps_table_config ps_fz_table(uint32_t id, enum ps_table_kind kind, uint32_t dim,
					  enum ps_optim_kind o)
{
	struct ps_table_config t = {.id = id, .kind = kind, .dim = dim, .optim = o,
				    .dense_rows = kind == PS_TABLE_DENSE ? 16 : 0,
				    .op = {.lr = 0.1f, .eps = 1e-6f, .beta1 = 0.9f, .beta2 = 0.999f,
					   .l1 = 0.01f, .l2 = 0.1f, .init_accum = 0.1f},
				    .init = PS_INIT_UNIFORM, .init_a = -0.5f, .init_b = 0.5f,
				    .seed = 7};

	if (o == PS_OPT_FTRL)
		t.op.beta1 = 1.0f;
	return t;
}

static uint64_t ps_fz_rows(struct ps_server *s)
{
	struct ps_table_stats a = {0}, b = {0};

	FH_CHECK(ps_server_table_stats(s, PS_FZ_SPARSE, &a) == 0);
	FH_CHECK(ps_server_table_stats(s, PS_FZ_DENSE, &b) == 0);
	return a.rows + (b.rows << 32);
}

/* Checks the reply to request hdr q; rc is ps_handle's return. */
static void ps_fz_check_reply(const struct tl_msg_hdr *q, int rc, const struct ps_reply *rep)
{
	struct tl_msg_hdr r;

	FH_CHECK(rep->len >= TL_MSG_HDR_LEN && rep->len <= rep->cap);
	FH_CHECK(tl_msg_hdr_decode(rep->buf, PS_FZ_REPLY_CAP, &r) == 0);
	FH_CHECK(r.body_len == rep->len - TL_MSG_HDR_LEN);
	FH_CHECK(r.req_id == q->req_id);
	if (rc < 0) {
		FH_CHECK(r.type == PS_T_ERROR);
		FH_CHECK(r.body_len > 8 && (int32_t)tl_ld32(rep->buf + TL_MSG_HDR_LEN) == rc);
	} else {
		FH_CHECK(r.type == q->type + 1u);
	}
}

/* Runs one request record; returns -1 when the input is used up. */
static int ps_fz_request(struct fh_in *in, struct ps_server *s, struct ps_handler *h,
			 struct ps_reply *rep)
{
	uint8_t pieces = fh_u8(in), cuts[3], hb[TL_MSG_HDR_LEN] = {0};
	struct tl_msg_view v;
	struct fh_pieces ps;
	const uint8_t *p;
	uint64_t rows;
	size_t got, len;
	int rc;

	for (int i = 0; i < 3; i++)
		cuts[i] = fh_u8(in);
	len = fh_u16(in);
	if (in->n == 0)
		return -1;
	p = fh_take(in, len, &got);
	memcpy(hb, p, got < TL_MSG_HDR_LEN ? got : TL_MSG_HDR_LEN);
	tl_st16(hb, TL_MSG_MAGIC);
	hb[2] = TL_MSG_VERSION;
	if (hb[3] == 0)
		hb[3] = PS_T_PULL;
	if (hb[3] == PS_T_SAVE)
		return 0;
	len = got > TL_MSG_HDR_LEN ? got - TL_MSG_HDR_LEN : 0;
	tl_st32(hb + 8, (uint32_t)len);
	FH_CHECK(tl_msg_hdr_decode(hb, UINT32_MAX, &v.hdr) == 0);
	if (fh_pieces_make(&ps, p + TL_MSG_HDR_LEN * (len > 0), (uint32_t)len, (pieces & 3u) + 1u,
			   cuts) != 0)
		return -1;
	v.iov = ps.iov;
	v.iovcnt = ps.n;
	rows = ps_fz_rows(s);
	rep->len = 0;
	rc = ps_handle(h, &v, rep);
	ps_fz_check_reply(&v.hdr, rc, rep);
	if (rc < 0 && rc != -ERANGE && rc != -EDQUOT)
		FH_CHECK(ps_fz_rows(s) == rows);
	fh_pieces_free(&ps);
	return 0;
}

/* ---- client mode ---------------------------------------------------------------------- */

struct ps_fz_cl {
	uint64_t ids[8];
	uint32_t dones[8];
	float out[8][6 * 4];
	bool barrier_done;
	bool geo_more;
};

static void ps_fz_done(void *arg, int status)
{
	uint32_t *n = arg;

	(void)status;
	(*n)++;
	FH_CHECK(*n == 1);
}

static void ps_fz_geo_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	volatile float sink = 0;

	(void)arg;
	(void)key;
	FH_CHECK(dim == 4);
	for (uint32_t i = 0; i < dim; i++)
		sink += row[i];
	(void)sink;
}

static void ps_fz_resent(void *arg, const uint8_t *msg, uint32_t len)
{
	(void)arg;
	FH_CHECK(len >= TL_MSG_HDR_LEN && tl_ld16(msg) == TL_MSG_MAGIC);
}

/* Puts request kind k of the client in flight (its message is not sent anywhere). */
static int ps_fz_request_kind(struct ps_client *c, struct ps_fz_cl *st, uint32_t k,
			      struct ps_msgbuf *mb)
{
	static const uint64_t keys[6] = {1, 2, 3, 99, 1ull << 40, 7};
	float grads[6 * 4];
	float *out = st->out[k];
	uint32_t *d = &st->dones[k];

	for (uint32_t i = 0; i < 24; i++)
		grads[i] = 0.01f * (float)i - 0.1f;
	mb->len = 0;
	switch (k) {
	case 0: return ps_client_pull(c, 1, 4, keys, 6, out, ps_fz_done, d, mb);
	case 1: return ps_client_push(c, 1, 4, keys, 6, grads, ps_fz_done, d, mb);
	case 2: return ps_client_push_pull(c, 1, 4, keys, 3, grads, out, ps_fz_done, d, mb);
	case 3: return ps_client_dense_pull(c, 2, 3, 16, 2, 5, out, ps_fz_done, d, mb);
	case 4: return ps_client_dense_push(c, 2, 3, 16, 0, 4, grads, ps_fz_done, d, mb);
	case 5: return ps_client_barrier(c, 0, &st->barrier_done, ps_fz_done, d, mb);
	case 6: return ps_client_geo_pull(c, 1, 4, ps_fz_geo_row, NULL, &st->geo_more, ps_fz_done, d, mb);
	default: return ps_client_hello(c, ps_fz_done, d, mb);
	}
}

static void ps_fz_client(struct fh_in *in)
{
	struct ps_client_config cc = {.worker_id = 1, .n_servers = 1, .max_keys = 64};
	struct ps_msgbuf mb = {.buf = ps_fz_reply_buf, .cap = PS_FZ_REPLY_CAP};
	struct ps_fz_cl *st = calloc(1, sizeof(*st));
	struct ps_client *c;
	int n = 0;

	FH_CHECK(st != NULL && ps_client_create(&cc, &c) == 0);
	for (uint32_t k = 0; k < 8; k++)
		if (ps_fz_request_kind(c, st, k, &mb) == 0 && mb.len >= TL_MSG_HDR_LEN)
			st->ids[k] = tl_ld64(mb.buf + 16);
	while (n++ < 64 && in->n > 0) {
		uint8_t pieces = fh_u8(in), cuts[3], hb[TL_MSG_HDR_LEN] = {0};
		struct tl_msg_view v;
		struct fh_pieces ps;
		size_t got, len;
		const uint8_t *p;
		int rc;

		for (int i = 0; i < 3; i++)
			cuts[i] = fh_u8(in);
		len = fh_u16(in);
		p = fh_take(in, len, &got);
		memcpy(hb, p, got < TL_MSG_HDR_LEN ? got : TL_MSG_HDR_LEN);
		tl_st16(hb, TL_MSG_MAGIC);
		hb[2] = TL_MSG_VERSION;
		if (pieces & 4)
			tl_st64(hb + 16, st->ids[hb[16] % 8u]);
		len = got > TL_MSG_HDR_LEN ? got - TL_MSG_HDR_LEN : 0;
		tl_st32(hb + 8, (uint32_t)len);
		if (tl_msg_hdr_decode(hb, UINT32_MAX, &v.hdr) != 0)
			continue;
		if (fh_pieces_make(&ps, p + TL_MSG_HDR_LEN * (len > 0), (uint32_t)len,
				   (pieces & 3u) + 1u, cuts) != 0)
			break;
		v.iov = ps.iov;
		v.iovcnt = ps.n;
		rc = ps_client_on_reply(c, 0, &v);
		FH_CHECK(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
		fh_pieces_free(&ps);
	}
	(void)ps_client_resend(c, 0, ps_fz_resent, NULL);
	ps_client_destroy(c);
	free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fh_in in = {data, size};
	uint8_t sel = fh_u8(&in);
	enum ps_mode mode = (enum ps_mode)((sel & 3u) == 3u ? 0u : (sel & 3u));
	struct ps_table_config t[2] = {
		ps_fz_table(PS_FZ_SPARSE, PS_TABLE_SPARSE, 4, (enum ps_optim_kind)((sel >> 2) & 3u)),
		ps_fz_table(PS_FZ_DENSE, PS_TABLE_DENSE, 3, (enum ps_optim_kind)((sel >> 4) & 3u)),
	};
	struct ps_server_config sc = {.server_id = 0, .n_servers = 1, .n_shards = 2, .n_lcores = 1,
				      .n_workers = 2, .mode = mode, .max_keys = 64,
				      .tables = t, .n_tables = 2};

	struct ps_reply rep = {.cap = PS_FZ_REPLY_CAP};
	struct ps_server *s = NULL;
	struct ps_handler *h = NULL;
	char err[256];
	int n = 0;

	if (size > 65536)
		return 0;
	if (sel & 0x80) {
		t[0].max_rows = 8;
		t[0].admit_after = 2;
		t[0].evict_after = 3;
	}
	/* One reply buffer for the process: a fresh 256 KiB mmap per input cost most of
	 * the time. Nothing survives in it between inputs (each reply is checked at once). */
	if (ps_fz_reply_buf == NULL)
		ps_fz_reply_buf = aligned_alloc(64, PS_FZ_REPLY_CAP);
	rep.buf = ps_fz_reply_buf;
	FH_CHECK(rep.buf != NULL);
	if (sel & 0x40) {
		ps_fz_client(&in);
		return 0;
	}
	FH_CHECK(ps_server_create(&sc, &s, err, sizeof(err)) == 0);
	FH_CHECK(ps_handler_create(s, 0, &h) == 0);
	while (n++ < 64 && ps_fz_request(&in, s, h, &rep) == 0)
		;
	ps_handler_destroy(h);
	ps_server_destroy(s);
	return 0;
}
