/*
 * test_client.c — the worker-side client on its own: routing of keys to servers,
 * completion only after every server answered, back-pressure (-EAGAIN, -ENOBUFS) that
 * records nothing, and replies that do not add up refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/tests/pt_util.h"

#define NS 3

static uint8_t bufs[NS][1 << 16];

static struct ps_client *mk(uint32_t inflight, struct ps_msgbuf *m)
{
	struct ps_client_config cc = { .worker_id = 1, .n_servers = NS, .max_inflight = inflight };
	struct ps_client *c;
	uint32_t i;

	assert_int_equal(ps_client_create(&cc, &c), 0);
	for (i = 0; i < NS; i++)
		m[i] = (struct ps_msgbuf){ .buf = bufs[i], .cap = sizeof(bufs[i]) };
	return c;
}

static void test_client_routes_each_key_to_its_server(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(4, m);
	uint64_t keys[100];
	float g[200];
	uint32_t i, s, total = 0;
	int st;

	(void)state;
	for (i = 0; i < 100; i++)
		keys[i] = i * 977;
	memset(g, 0, sizeof(g));
	assert_int_equal(ps_client_push(c, 5, 2, keys, 100, g, pt_done, &st, m), 0);
	for (s = 0; s < NS; s++) {
		struct tl_msg_hdr h;
		assert_int_equal(tl_msg_hdr_decode(m[s].buf, UINT32_MAX, &h), 0);
		assert_int_equal(h.type, PS_T_PUSH);
		assert_int_equal(h.table_id, 5);
		assert_int_equal(tl_ld32(m[s].buf + TL_MSG_HDR_LEN), 1);   /* worker */
		assert_int_equal(tl_ld64(m[s].buf + TL_MSG_HDR_LEN + 8), 1); /* first sequence */
		for (i = 0; i < h.key_count; i++)
			assert_int_equal(ps_key_server(tl_ld64(m[s].buf + TL_MSG_HDR_LEN + PS_PUSH_HEAD +
							       8 * i), NS), s);
		total += h.key_count;
	}
	assert_int_equal(total, 100);
	ps_client_destroy(c);
}

static int calls;
static void count_done(void *arg, int status)
{
	*(int *)arg = status;
	calls++;
}

static void reply_pull(struct ps_client *c, struct ps_msgbuf *m, uint32_t s, uint32_t bad_count)
{
	static uint8_t rep[1 << 16];
	struct tl_msg_hdr h;
	struct tl_iov iov[2];
	struct tl_msg_view v;

	tl_msg_hdr_decode(m[s].buf, UINT32_MAX, &h);
	h.type = PS_T_PULL_R;
	h.key_count += bad_count;
	h.body_len = h.key_count * h.dim * 4;
	tl_msg_hdr_encode(rep, &h);
	memset(rep + TL_MSG_HDR_LEN, 0, h.body_len);
	pt_view(rep, 6, iov, 2, &v);
	ps_client_on_reply(c, s, &v);
}

static void test_client_done_after_every_server_answered(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(4, m);
	uint64_t keys[30];
	float out[60];
	uint32_t i;
	int st = 1;

	(void)state;
	for (i = 0; i < 30; i++)
		keys[i] = i;
	calls = 0;
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, count_done, &st, m), 0);
	reply_pull(c, m, 0, 0);
	reply_pull(c, m, 2, 0);
	assert_int_equal(calls, 0);
	reply_pull(c, m, 0, 0); /* a repeated reply changes nothing */
	assert_int_equal(calls, 0);
	reply_pull(c, m, 1, 0);
	assert_int_equal(calls, 1);
	assert_int_equal(st, 0);
	assert_int_equal(ps_client_inflight(c), 0);
	/* zero keys: done at once */
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 0, out, count_done, &st, m), 0);
	assert_int_equal(calls, 2);
	ps_client_destroy(c);
}

static void test_client_reply_that_does_not_add_up_refused(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(4, m);
	uint64_t keys[30];
	float out[60];
	uint32_t i;
	int st = 1;

	(void)state;
	for (i = 0; i < 30; i++)
		keys[i] = i;
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &st, m), 0);
	reply_pull(c, m, 0, 1);
	reply_pull(c, m, 1, 0);
	reply_pull(c, m, 2, 0);
	assert_int_equal(st, -EBADMSG);
	ps_client_destroy(c);
}

static void resend_count(void *arg, const uint8_t *msg, uint32_t len)
{
	(void)msg;
	(void)len;
	(*(int *)arg)++;
}

/* A lost connection: what will not be resent completes with the error and frees its slot;
 * a push stays for ps_client_resend. */
static void test_client_forget_dest_frees_all_but_pushes(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(4, m);
	uint64_t keys[30];
	float out[60], g[60];
	bool all = false;
	uint32_t i;
	int st_pull = 1, st_bar = 1, st_push = 1, resent = 0;

	(void)state;
	for (i = 0; i < 30; i++)
		keys[i] = i;
	memset(g, 0, sizeof(g));
	calls = 0;
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, count_done, &st_pull, m), 0);
	reply_pull(c, m, 0, 0);
	reply_pull(c, m, 2, 0);
	assert_int_equal(ps_client_barrier(c, 0, &all, count_done, &st_bar, m), 0);
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, count_done, &st_push, m), 0);
	assert_int_equal(ps_client_inflight(c), 3);
	/* Server 1 is gone: its pull part and the barrier's server-1 part are forgotten. */
	assert_int_equal(ps_client_forget_dest(c, 1, -ECONNRESET), 2);
	assert_int_equal(calls, 1);              /* the pull: every other server had answered */
	assert_int_equal(st_pull, -ECONNRESET);
	assert_int_equal(st_bar, 1);             /* still waiting for servers 0 and 2 */
	assert_int_equal(ps_client_forget_dest(c, 0, -ECONNRESET), 1);
	assert_int_equal(ps_client_forget_dest(c, 2, -ECONNRESET), 1);
	assert_int_equal(calls, 2);
	assert_int_equal(st_bar, -ECONNRESET);
	assert_int_equal(ps_client_inflight(c), 1); /* the push */
	assert_int_equal(st_push, 1);
	assert_int_equal(ps_client_resend(c, 1, resend_count, &resent), 1);
	assert_int_equal(resent, 1);
	assert_int_equal(ps_client_forget_dest(c, NS + 5, -ECONNRESET), 0);
	ps_client_destroy(c);
}

/* A reply to the request encoded in m[s]: type, flags and body as given. */
static void reply_raw(struct ps_client *c, struct ps_msgbuf *m, uint32_t s, uint8_t type,
		      uint16_t flags, const uint8_t *body, uint32_t len)
{
	static uint8_t rep[1024];
	struct tl_msg_hdr h;
	struct tl_iov iov[2];
	struct tl_msg_view v;

	tl_msg_hdr_decode(m[s].buf, UINT32_MAX, &h);
	h.type = type;
	h.flags = flags;
	h.body_len = len;
	tl_msg_hdr_encode(rep, &h);
	memcpy(rep + TL_MSG_HDR_LEN, body, len);
	pt_view(rep, 5, iov, 2, &v);
	assert_int_equal(ps_client_on_reply(c, s, &v), 0);
}

/* PS_T_ERROR: i32 -errno, u32 kind, text. */
static void reply_error(struct ps_client *c, struct ps_msgbuf *m, uint32_t s, int rc,
			uint32_t kind, uint16_t flags, const char *text)
{
	uint8_t b[256];

	tl_st32(b, (uint32_t)rc);
	tl_st32(b + 4, kind);
	memcpy(b + 8, text, strlen(text));
	reply_raw(c, m, s, PS_T_ERROR, flags, b, 8 + (uint32_t)strlen(text));
}

static void reply_ack(struct ps_client *c, struct ps_msgbuf *m, uint32_t s)
{
	uint8_t b[16] = { 0 };

	reply_raw(c, m, s, PS_T_PUSH_R, 0, b, 16);
}

/* Sent again by ps_client_tick: kept per destination, the last one's bytes. */
struct sent {
	uint32_t n[NS];
	uint8_t last[NS][4096];
	uint32_t len[NS];
};

static int sent_send(void *ctx, uint32_t dest, const uint8_t *msg, uint32_t len)
{
	struct sent *t = ctx;

	assert_true(dest < NS && len <= sizeof(t->last[0]));
	t->n[dest]++;
	memcpy(t->last[dest], msg, len);
	t->len[dest] = len;
	return 0;
}

/*
 * A refusal with PS_F_RETRY (the server applied nothing: its log could not take the push)
 * keeps the push: the same bytes go out again after the back-off (1 ms, then 2 ms), and it
 * completes once acknowledged. A refusal without it is final: the call fails with the
 * server's -errno and ps_client_error gives the server's text, from PS_T_ERROR and from the
 * transport's TL_TYPE_ERROR alike; the refused push is not sent again after a reconnect.
 */
static void test_client_retry_refusal_sends_push_again_final_one_fails_with_text(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(4, m);
	struct sent t = { 0 };
	struct ps_client_io io = { .send = sent_send, .ctx = &t, .msgs = m };
	struct ps_client_stats st;
	uint8_t orig[4096], b[128];
	uint32_t olen, i;
	uint64_t keys[30];
	float g[60] = { 0 }, out[60];
	int sp = 1, sq = 1, sr = 1, resent = 0;

	(void)state;
	for (i = 0; i < 30; i++)
		keys[i] = i;
	ps_client_tick(c, 1, &io);
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sp, m), 0);
	olen = m[1].len;
	memcpy(orig, m[1].buf, olen);
	reply_ack(c, m, 0);
	reply_ack(c, m, 2);
	reply_error(c, m, 1, -EIO, PS_ERR_IO, PS_F_RETRY, "write-ahead log cannot take the push");
	assert_int_equal(sp, 1);
	assert_int_equal(ps_client_inflight(c), 1);
	assert_int_equal(ps_client_tick(c, 900, &io), 0);
	assert_int_equal(t.n[1], 0);                      /* within the back-off */
	ps_client_tick(c, 1100, &io);
	assert_int_equal(t.n[1], 1);
	assert_int_equal(t.len[1], olen);
	assert_memory_equal(t.last[1], orig, olen);       /* the same bytes: same sequence */
	reply_error(c, m, 1, -EIO, PS_ERR_IO, PS_F_RETRY, "write-ahead log cannot take the push");
	ps_client_tick(c, 2500, &io);
	assert_int_equal(t.n[1], 1);                      /* the back-off doubled */
	ps_client_tick(c, 3200, &io);
	assert_int_equal(t.n[1], 2);
	reply_ack(c, m, 1);
	assert_int_equal(sp, 0);
	assert_int_equal(ps_client_inflight(c), 0);
	ps_client_stats_get(c, &st);
	assert_int_equal(st.retries, 2);

	/* Final: the server's words reach the caller. */
	assert_int_equal(ps_client_pull(c, 9, 2, keys, 30, out, pt_done, &sq, m), 0);
	reply_error(c, m, 0, -ENOENT, PS_ERR_UNKNOWN_TABLE, 0,
		    "table 9: no sparse table of that id on this server");
	reply_pull(c, m, 1, 0);
	reply_pull(c, m, 2, 0);
	assert_int_equal(sq, -ENOENT);
	assert_string_equal(ps_client_error(c),
			    "server 0: table 9: no sparse table of that id on this server");
	/* EAGAIN only ever comes with PS_F_RETRY: a final one is a protocol error, never the
	 * call's status (wharf_wait_timeout's "not complete yet"). */
	sq = 1;
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sq, m), 0);
	reply_error(c, m, 0, -EAGAIN, PS_ERR_ORDER, 0, "busy");
	reply_pull(c, m, 1, 0);
	reply_pull(c, m, 2, 0);
	assert_int_equal(sq, -EPROTO);
	assert_string_equal(ps_client_error(c), "server 0: a final refusal with EAGAIN, which is "
			    "only sent as one to retry: busy");
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sr, m), 0);
	tl_st32(b, EPERM);
	memcpy(b + 4, "data requests go to the data endpoint", 37);
	reply_raw(c, m, 2, TL_TYPE_ERROR, 0, b, 4 + 37);
	reply_ack(c, m, 0);
	assert_int_equal(ps_client_resend(c, 2, resend_count, &resent), 0);
	reply_ack(c, m, 1);
	assert_int_equal(sr, -EPERM);
	assert_string_equal(ps_client_error(c), "server 2: data requests go to the data endpoint");
	assert_int_equal(ps_client_tick(c, 10000000, &io), 0);
	assert_int_equal(t.n[0] + t.n[1] + t.n[2], 2);    /* nothing else went out again */
	ps_client_destroy(c);
}

/* A resend's bytes into m[d], as if encoded there (the replies below answer them). */
struct resend_into {
	struct ps_msgbuf *m;
	uint32_t d;
};

static void resend_keep(void *arg, const uint8_t *msg, uint32_t len)
{
	struct resend_into *ri = arg;

	memcpy(ri->m[ri->d].buf, msg, len);
	ri->m[ri->d].len = len;
}

static void count_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	(void)key;
	(void)row;
	(void)dim;
	(*(int *)arg)++;
}

/*
 * Connections lost and made again many more times than the client has slots: whatever was in
 * flight that will not be resent (a pull, a barrier, a hello, a GEO pull) ends with
 * -ECONNRESET at ps_client_resend, as the trainers' reconnect calls it (with or without
 * ps_client_forget_dest first), so its slot is free again; the push waiting meanwhile is
 * sent again every time and completes once.
 */
static void test_client_reconnects_leave_no_slot_behind(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(5, m);
	uint64_t keys[30];
	float g[60] = { 0 }, out[60];
	bool all, more;
	int sp = 1, s[4], rows = 0, resent = 0;
	uint32_t i, r, d;

	(void)state;
	for (i = 0; i < 30; i++)
		keys[i] = i;
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sp, m), 0);
	for (r = 0; r < 20; r++) {
		for (i = 0; i < 4; i++)
			s[i] = 1;
		assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &s[0], m), 0);
		assert_int_equal(ps_client_barrier(c, ps_client_step(c), &all, pt_done, &s[1], m), 0);
		assert_int_equal(ps_client_hello(c, pt_done, &s[2], m), 0);
		assert_int_equal(ps_client_geo_pull(c, 1, 2, count_row, &rows, &more, pt_done, &s[3],
						    m), 0);
		assert_int_equal(ps_client_inflight(c), 5);
		if (r % 2)
			ps_client_forget_dest(c, 1, -ECONNRESET);
		for (d = 0; d < NS; d++)
			ps_client_resend(c, d, resend_count, &resent);
		for (i = 0; i < 4; i++)
			assert_int_equal(s[i], -ECONNRESET);
		assert_int_equal(ps_client_inflight(c), 1);   /* the push, waiting */
	}
	assert_int_equal(resent, 20 * NS);                /* each of its parts, every time */
	for (d = 0; d < NS; d++) {
		struct resend_into ri = { m, d };
		assert_int_equal(ps_client_resend(c, d, resend_keep, &ri), 1);
		reply_ack(c, m, d);
	}
	assert_int_equal(sp, 0);
	assert_int_equal(ps_client_inflight(c), 0);
	ps_client_destroy(c);
}

/* The caller's encode buffers when the client keeps requests by reference: counted. */
#define KB_N 16
struct kbuf {
	uint8_t data[4096];
	int keeps;
	int holds, releases; /* every hold and release the client made on it */
	bool used;
};
static struct kbuf kb[KB_N];

static struct kbuf *kb_of(const uint8_t *p)
{
	for (int i = 0; i < KB_N; i++)
		if (p == kb[i].data)
			return &kb[i];
	fail_msg("not a buffer of the test");
	return NULL;
}

static uint8_t *kb_fresh(void)
{
	for (int i = 0; i < KB_N; i++)
		if (!kb[i].used && kb[i].keeps == 0) {
			kb[i].used = true;
			memset(kb[i].data, 0x5a, sizeof(kb[i].data));
			return kb[i].data;
		}
	fail_msg("out of test buffers");
	return NULL;
}

static int kb_writable(void *ctx, struct ps_msgbuf *m)
{
	(void)ctx;
	if (kb_of(m->buf)->keeps > 0)
		m->buf = kb_fresh();
	return 0;
}
static void kb_hold(void *ctx, uint8_t *buf)
{
	struct kbuf *b = kb_of(buf);

	(void)ctx;
	b->keeps++;
	b->holds++;
}

static void kb_release(void *ctx, uint8_t *buf)
{
	struct kbuf *b = kb_of(buf);

	(void)ctx;
	if (b->keeps <= 0)
		fail_msg("buffer %d released without being held", (int)(b - kb));
	b->keeps--;
	b->releases++;
}
static const struct ps_client_keep kb_keep = { kb_writable, kb_hold, kb_release, NULL };

/* What the glue does when it sends m[d]: the buffer goes out, a fresh one takes its place. */
static uint8_t *kb_send(struct ps_msgbuf *m, uint32_t d)
{
	uint8_t *sent = m[d].buf;

	kb_of(sent)->used = false; /* the transport is done with it at once here */
	m[d].buf = kb_fresh();
	m[d].len = 0;
	return sent;
}

/* Kept by reference from here on: every buffer fresh, m[] given one each, keys[30] numbered. */
static void kb_begin(struct ps_client *c, struct ps_msgbuf *m, uint64_t *keys)
{
	uint32_t i, s;

	memset(kb, 0, sizeof(kb));
	for (s = 0; s < NS; s++)
		m[s] = (struct ps_msgbuf){ .buf = kb_fresh(), .cap = sizeof(kb[0].data) };
	ps_client_keep_by_ref(c, &kb_keep);
	for (i = 0; i < 30; i++)
		keys[i] = i * 977;
}

static void resend_ptr(void *arg, const uint8_t *msg, uint32_t len)
{
	(void)len;
	*(const uint8_t **)arg = msg;
}

/*
 * Kept by reference: the client holds the buffer a request was encoded in (no copy) until
 * its destination answers or it is let go; a resend hands back that very buffer; a request
 * encoded and never sent is not overwritten by the next one (writable puts a fresh buffer in
 * its place); ps_client_unkeep gives back everything still held.
 */
static void test_client_keeps_requests_by_reference(void **state)
{
	struct ps_msgbuf m[NS], one[NS];
	struct ps_client *c = mk(8, m);
	uint8_t *held[NS], snap[NS][512], *unsent[NS], *again = NULL;
	uint64_t keys[30];
	float g[60] = { 0 }, out[60];
	int sp = 1, sq = 1, sr = 1;
	uint32_t i, s;

	(void)state;
	kb_begin(c, m, keys);
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sp, m), 0);
	for (s = 0; s < NS; s++) {
		assert_int_equal(kb_of(m[s].buf)->keeps, 1);
		memcpy(snap[s], m[s].buf, sizeof(snap[s]));
		held[s] = kb_send(m, s);
	}
	/* A pull encoded and not sent (its connection is down): the next request goes elsewhere. */
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sq, m), 0);
	for (s = 0; s < NS; s++)
		unsent[s] = m[s].buf;
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sr, m), 0);
	for (s = 0; s < NS; s++) {
		assert_ptr_not_equal(m[s].buf, unsent[s]);
		/* each buffer still holds its own request (the header's request id differs) */
		assert_int_equal(unsent[s][3], PS_T_PULL);
		assert_true(tl_ld64(unsent[s] + 16) != tl_ld64(m[s].buf + 16));
		assert_memory_equal(held[s], snap[s], sizeof(snap[s]));
		kb_send(m, s);
	}
	/* Server 1 lost: its pulls let go (their buffers back), the push resent as it is. */
	assert_int_equal(ps_client_forget_dest(c, 1, -ECONNRESET), 2);
	assert_int_equal(kb_of(unsent[1])->keeps, 0);
	assert_int_equal(ps_client_resend(c, 1, resend_ptr, &again), 1);
	assert_ptr_equal(again, held[1]);
	for (s = 0; s < NS; s++) {
		one[s].buf = held[s];
		reply_ack(c, one, s);
		assert_int_equal(kb_of(held[s])->keeps, 0);
	}
	assert_int_equal(sp, 0);
	/* What is still held (the pulls to servers 0 and 2) comes back at ps_client_unkeep. */
	ps_client_unkeep(c);
	for (i = 0; i < KB_N; i++)
		assert_int_equal(kb[i].keeps, 0);
	ps_client_destroy(c);
}

/* Every buffer the client held went back exactly once; returns the releases counted. */
static int kb_all_released_once(void)
{
	int total = 0;

	for (int i = 0; i < KB_N; i++) {
		assert_int_equal(kb[i].keeps, 0);
		assert_int_equal(kb[i].releases, kb[i].holds);
		total += kb[i].releases;
	}
	return total;
}

/*
 * Requests left in a client kept by reference: pushes two servers never acknowledged, one
 * refused for a retry, a pull one server answered, a pull encoded and never sent.
 * Returns the buffers held.
 */
static int kb_leave_requests(struct ps_client *c, struct ps_msgbuf *m)
{
	struct ps_msgbuf sent[NS];
	uint64_t keys[30];
	float g[60] = { 0 };
	static float out[60]; /* the pulls' destination: they never end here */
	static int sp, sq, sr;
	int held = 0;
	uint32_t i, s;

	kb_begin(c, m, keys);
	sp = sq = sr = 1;
	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sp, m), 0);
	for (s = 0; s < NS; s++)
		sent[s].buf = kb_send(m, s);
	reply_ack(c, sent, 0);
	reply_error(c, sent, 1, -EIO, PS_ERR_IO, PS_F_RETRY, "write-ahead log cannot take the push");
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sq, m), 0);
	for (s = 0; s < NS; s++)
		sent[s].buf = kb_send(m, s);
	reply_pull(c, sent, 2, 0);
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sr, m), 0);
	assert_int_equal(ps_client_inflight(c), 3);
	for (i = 0; i < KB_N; i++)
		held += kb[i].keeps;
	assert_int_equal(held, 2 + 2 + NS); /* push: 1 and 2; pull: 0 and 1; the unsent pull */
	return held;
}

/*
 * ps_client_destroy gives back every buffer still held by reference, each once: a caller
 * that never called ps_client_unkeep leaks none of them.
 */
static void test_client_destroy_releases_held_buffers_once(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(8, m);
	int acked, held;

	(void)state;
	held = kb_leave_requests(c, m);
	acked = 0;
	for (int i = 0; i < KB_N; i++)
		acked += kb[i].releases;
	ps_client_destroy(c);
	assert_int_equal(kb_all_released_once(), acked + held);
}

/* ps_client_unkeep then ps_client_destroy: the buffers go back at the unkeep, not again. */
static void test_client_destroy_after_unkeep_releases_nothing_twice(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(8, m);
	int after_unkeep;

	(void)state;
	kb_leave_requests(c, m);
	ps_client_unkeep(c);
	after_unkeep = kb_all_released_once();
	ps_client_destroy(c);
	assert_int_equal(kb_all_released_once(), after_unkeep);
}

/*
 * The request timeout, on the client's clock: a request unanswered for request_timeout_us
 * of polling stalls its destinations (for the glue to reconnect); a pull ends with
 * -ETIMEDOUT, a push waits for the resend. Time away from the poll loop (one tick after a
 * long gap) counts at most 100 ms.
 */
static void test_client_request_timeout(void **state)
{
	struct ps_client_config cc = { .worker_id = 1, .n_servers = NS, .max_inflight = 4,
				       .request_timeout_us = 200000 };
	struct ps_msgbuf m[NS];
	struct ps_client *c;
	struct sent t = { 0 };
	struct ps_client_io io = { .send = sent_send, .ctx = &t, .msgs = m };
	uint64_t keys[30], now = 1;
	float g[60] = { 0 }, out[60];
	int sq = 1, sp = 1, resent = 0;
	uint32_t i, d;

	(void)state;
	assert_int_equal(ps_client_create(&cc, &c), 0);
	for (i = 0; i < NS; i++)
		m[i] = (struct ps_msgbuf){ .buf = bufs[i], .cap = sizeof(bufs[i]) };
	for (i = 0; i < 30; i++)
		keys[i] = i;
	ps_client_tick(c, now, &io);
	assert_int_equal(ps_client_pull(c, 1, 2, keys, 30, out, pt_done, &sq, m), 0);
	reply_pull(c, m, 0, 0);
	assert_int_equal(ps_client_tick(c, now += 10000000, &io), 0); /* 10 s away: 100 ms */
	assert_int_equal(ps_client_tick(c, now += 90000, &io), 0);
	assert_int_equal(sq, 1);
	assert_int_equal(ps_client_tick(c, now += 20000, &io), 2);   /* servers 1 and 2 */
	assert_int_equal(sq, -ETIMEDOUT);
	assert_non_null(strstr(ps_client_error(c), "no answer in 200 ms"));
	assert_false(ps_client_dest_stalled(c, 0));
	assert_true(ps_client_dest_stalled(c, 1));
	assert_true(ps_client_dest_stalled(c, 2));
	assert_int_equal(ps_client_inflight(c), 0);
	for (d = 0; d < NS; d++)
		ps_client_resend(c, d, resend_count, &resent);
	assert_false(ps_client_dest_stalled(c, 1));

	assert_int_equal(ps_client_push(c, 1, 2, keys, 30, g, pt_done, &sp, m), 0);
	reply_ack(c, m, 0);
	reply_ack(c, m, 2);
	assert_int_equal(ps_client_tick(c, now += 250000, &io), 0);  /* 100 ms of it count */
	assert_int_equal(ps_client_tick(c, now += 90000, &io), 0);
	assert_int_equal(ps_client_tick(c, now += 20000, &io), 1);
	assert_true(ps_client_dest_stalled(c, 1));
	assert_int_equal(sp, 1);                                      /* never given up */
	assert_int_equal(ps_client_tick(c, now += 10000000, &io), 0); /* stalled once */
	assert_int_equal(ps_client_resend(c, 1, resend_count, &resent), 1);
	assert_false(ps_client_dest_stalled(c, 1));
	reply_ack(c, m, 1);
	assert_int_equal(sp, 0);
	ps_client_destroy(c);
}

static void test_client_backpressure_records_nothing(void **state)
{
	struct ps_msgbuf m[NS];
	struct ps_client *c = mk(2, m);
	uint64_t keys[300];
	float g[300 * 4] = { 0 };
	uint32_t i;
	int st;

	(void)state;
	for (i = 0; i < 300; i++)
		keys[i] = i;
	m[1].cap = 100; /* too small for server 1's part */
	assert_int_equal(ps_client_push(c, 1, 4, keys, 300, g, pt_done, &st, m), -ENOBUFS);
	assert_int_equal(ps_client_inflight(c), 0);
	m[1].cap = sizeof(bufs[1]);
	assert_int_equal(ps_client_push(c, 1, 4, keys, 300, g, pt_done, &st, m), 0);
	assert_int_equal(tl_ld64(m[0].buf + TL_MSG_HDR_LEN + 8), 1); /* the refused one took no sequence */
	assert_int_equal(ps_client_push(c, 1, 4, keys, 300, g, pt_done, &st, m), 0);
	assert_int_equal(ps_client_push(c, 1, 4, keys, 300, g, pt_done, &st, m), -EAGAIN);
	assert_int_equal(ps_client_inflight(c), 2);
	assert_int_equal(ps_client_pull(c, 1, 0, keys, 3, (float *)g, pt_done, &st, m), -EINVAL);
	ps_client_destroy(c);
}

/* ---- blocking calls over an in-process "transport": send queues, poll delivers one */

struct fake_net {
	struct pt_cluster *c;
	uint32_t worker, queued[PT_MAX_SERVERS], polls, give_up_after;
	uint8_t *q[PT_MAX_SERVERS];
	uint32_t qlen[PT_MAX_SERVERS];
};

static int net_send(void *ctx, uint32_t server, const uint8_t *msg, uint32_t len)
{
	struct fake_net *n = ctx;

	n->q[server] = realloc(n->q[server], len);
	memcpy(n->q[server], msg, len);
	n->qlen[server] = len;
	n->queued[server] = 1;
	return 0;
}

static int net_poll(void *ctx)
{
	struct fake_net *n = ctx;
	uint32_t s;

	if (++n->polls > n->give_up_after)
		return -1;
	for (s = 0; s < n->c->n_servers; s++)
		if (n->queued[s]) {
			n->queued[s] = 0;
			memcpy(n->c->msgs[s].buf, n->q[s], n->qlen[s]);
			n->c->msgs[s].len = n->qlen[s];
			pt_deliver(n->c, n->worker); /* one server per poll: replies trickle in */
			return 0;
		}
	return 0;
}

static void test_client_blocking_calls_wait_for_every_reply(void **state)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_SGD);
	struct pt_cluster *c;
	struct ps_msgbuf m[PT_MAX_SERVERS];
	struct fake_net n = { .give_up_after = 1000 };
	struct ps_client_io io = { .send = net_send, .poll = net_poll, .ctx = &n, .msgs = m };
	uint64_t keys[50];
	float g[100], out[100];
	uint32_t i;

	(void)state;
	t.op.lr = 1.0f;
	assert_int_equal(pt_cluster_create(3, 2, PS_MODE_SYNC, 2, &t, 1, &c), 0);
	n.c = c;
	for (i = 0; i < 3; i++)
		m[i] = (struct ps_msgbuf){ .buf = bufs[i], .cap = sizeof(bufs[i]) };
	for (i = 0; i < 50; i++)
		keys[i] = i * 3;
	for (i = 0; i < 100; i++)
		g[i] = 1.0f;
	n.worker = 0;
	assert_int_equal(ps_client_push_wait(c->cl[0], &io, 1, 2, keys, 50, g), 0);
	n.worker = 1;
	assert_int_equal(ps_client_push_wait(c->cl[1], &io, 1, 2, keys, 50, g), 0);
	assert_int_equal(ps_client_barrier_wait(c->cl[1], &io, 0), -ETIMEDOUT); /* worker 0 missing */
	n.polls = 0;
	n.worker = 0;
	assert_int_equal(ps_client_barrier_wait(c->cl[0], &io, 0), 0);
	n.worker = 1;
	n.polls = 0;
	assert_int_equal(ps_client_barrier_wait(c->cl[1], &io, 0), 0);
	assert_int_equal(ps_client_pull_wait(c->cl[1], &io, 1, 2, keys, 50, out), 0);
	for (i = 0; i < 100; i++)
		assert_true(out[i] == -2.0f); /* summed over both workers, applied once */
	/* giving up mid-request: the late reply later finds no callback to run */
	uint32_t before = ps_client_inflight(c->cl[1]); /* the abandoned barrier may linger */
	n.give_up_after = n.polls + 1;
	assert_int_equal(ps_client_pull_wait(c->cl[1], &io, 1, 2, keys, 50, out), -ETIMEDOUT);
	n.give_up_after = 1000;
	for (i = 0; i < 3; i++)
		net_poll(&n);
	assert_int_equal(ps_client_inflight(c->cl[1]), before);
	for (i = 0; i < PT_MAX_SERVERS; i++)
		free(n.q[i]);
	pt_cluster_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_routes_each_key_to_its_server),
		cmocka_unit_test(test_client_done_after_every_server_answered),
		cmocka_unit_test(test_client_reply_that_does_not_add_up_refused),
		cmocka_unit_test(test_client_backpressure_records_nothing),
		cmocka_unit_test(test_client_forget_dest_frees_all_but_pushes),
		cmocka_unit_test(test_client_retry_refusal_sends_push_again_final_one_fails_with_text),
		cmocka_unit_test(test_client_reconnects_leave_no_slot_behind),
		cmocka_unit_test(test_client_keeps_requests_by_reference),
		cmocka_unit_test(test_client_destroy_releases_held_buffers_once),
		cmocka_unit_test(test_client_destroy_after_unkeep_releases_nothing_twice),
		cmocka_unit_test(test_client_request_timeout),
		cmocka_unit_test(test_client_blocking_calls_wait_for_every_reply),
	};
	return cmocka_run_group_tests_name("ps_client", tests, NULL, NULL);
}
