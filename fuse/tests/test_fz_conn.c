/*
 * test_fz_conn.c — cmocka group for the transport glue (fz_conn.c), over the kernel
 * backend on real sockets on 127.0.0.1: one tl instance holds a fused listener and a
 * fused client connection, driven by fz_net_poll in one thread.
 *
 * Shown here: a random mixed stream (small messages fused, large ones alone and zero
 * copy) arrives complete and in order; a malformed fused frame is refused whole with an
 * error reply while the connection lives on; a lone message on an idle connection is not
 * held back; a fused message's completion runs from the next poll, never inside the send;
 * an open frame leaves by itself (timer or idle wire) without an explicit flush, its
 * hold counted from when it opened.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "fuse/fz.h"
#include "transport/tl.h"

#define LO 0x7f000001u
#define FXT_TYPE 40u
#define FXT_PAT (1u << 17)

struct fxt {
	struct tl *tl;
	struct fz_net *net;
	struct fz_listener *l;
	struct fz_conn *srv, *cli;
	struct fz_config cfg;
	uint8_t *pat;                 /* every body sent is a window of this */
	int accepted, cli_up, cli_closed, srv_closed;
	/* server side */
	uint64_t srv_next, srv_got, srv_bad;
	/* client side */
	uint64_t cli_errors, cli_err_req;
	uint32_t cli_err_code;
	char cli_err_text[128];
	uint64_t done_ok, done_bad;
	int in_send;                  /* set around fz_conn_send: done must not see it */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define POLL_UNTIL(fx, cond)                                                     \
	do {                                                                     \
		double dl_ = now_s() + 10.0;                                     \
		while (!(cond) && now_s() < dl_)                                 \
			assert_true(fz_net_poll((fx)->net, 2000) >= 0);          \
		assert_true(cond);                                               \
	} while (0)

static const uint8_t *body_of(const struct fxt *fx, uint64_t req)
{
	return fx->pat + (req * 37u) % 251u;
}

static int body_ok(const struct fxt *fx, const struct tl_msg_view *m)
{
	const uint8_t *want = body_of(fx, m->hdr.req_id);
	uint32_t i, off = 0;

	for (i = 0; i < m->iovcnt; i++) {
		if (memcmp(m->iov[i].base, want + off, m->iov[i].len) != 0)
			return 0;
		off += m->iov[i].len;
	}
	return off == m->hdr.body_len && m->hdr.table_id == m->hdr.body_len;
}

static void srv_msg(struct fz_conn *fc, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier)
{
	struct fxt *fx = fz_conn_ctx(fc);

	(void)carrier;
	if (m->hdr.type != FXT_TYPE || m->hdr.req_id != fx->srv_next || !body_ok(fx, m))
		fx->srv_bad++;
	fx->srv_next = m->hdr.req_id + 1;
	fx->srv_got++;
}

static void srv_closed(struct fz_conn *fc, int reason)
{
	struct fxt *fx = fz_conn_ctx(fc);

	(void)reason;
	fx->srv_closed++;
	fx->srv = NULL;
}

static const struct fz_conn_ops srv_ops = { NULL, srv_msg, srv_closed };

static void srv_accepted(struct fz_conn *fc, void *ctx)
{
	struct fxt *fx = ctx;

	fx->accepted++;
	fx->srv = fc;
}

static void cli_connected(struct fz_conn *fc, int status)
{
	struct fxt *fx = fz_conn_ctx(fc);

	fx->cli_up = status == 0 ? 1 : -1;
	if (status != 0)
		fx->cli = NULL;
}

static void cli_msg(struct fz_conn *fc, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier)
{
	struct fxt *fx = fz_conn_ctx(fc);
	uint8_t b[4 + 120];
	uint32_t n = m->hdr.body_len < sizeof(b) ? m->hdr.body_len : sizeof(b);

	(void)carrier;
	if (m->hdr.type != 1u || n < 4 || tl_view_copy(m, 0, b, n) != 0)
		return;
	fx->cli_errors++;
	fx->cli_err_req = m->hdr.req_id;
	fx->cli_err_code = tl_ld32(b);
	memcpy(fx->cli_err_text, b + 4, n - 4);
	fx->cli_err_text[n - 4] = '\0';
}

static void cli_closed(struct fz_conn *fc, int reason)
{
	struct fxt *fx = fz_conn_ctx(fc);

	(void)reason;
	fx->cli_closed++;
	fx->cli = NULL;
}

static const struct fz_conn_ops cli_ops = { cli_connected, cli_msg, cli_closed };

static void send_done(void *arg, int status)
{
	struct fxt *fx = arg;

	if (status == 0 && !fx->in_send)
		fx->done_ok++;
	else
		fx->done_bad++;
}

static int setup(void **state)
{
	struct fxt *fx = calloc(1, sizeof(*fx));
	struct tl_config tc;
	uint32_t i;

	assert_non_null(fx);
	tl_config_default(&tc);
	tc.max_msg_segs = FZ_RX_MAX_IOV;
	assert_int_equal(tl_create(&tc, &fx->tl), 0);
	assert_int_equal(fz_net_create(fx->tl, &fx->net), 0);
	fz_config_defaults(&fx->cfg);
	fx->cfg.tensor_fuse = true;
	fx->cfg.fuse_max_bytes = 16384;
	fx->cfg.fuse_threshold_bytes = 2048;
	fx->cfg.fuse_max_delay_us = 2000;
	fx->pat = malloc(FXT_PAT + 256);
	assert_non_null(fx->pat);
	for (i = 0; i < FXT_PAT + 256; i++)
		fx->pat[i] = (uint8_t)(i * 131u + (i >> 8) * 7u + 3u);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fxt *fx = *state;

	fz_net_destroy(fx->net);
	tl_destroy(fx->tl);
	free(fx->pat);
	free(fx);
	return 0;
}

/* Listens with the server's cfg and connects the client with the fixture's cfg. */
static void connect_pair(struct fxt *fx)
{
	assert_int_equal(fz_net_listen(fx->net, LO, 0, &fx->cfg, &srv_ops, srv_accepted, fx,
				       &fx->l), 0);
	assert_int_equal(fz_net_connect(fx->net, LO, fz_listener_port(fx->l), &fx->cfg, &cli_ops,
					fx, &fx->cli), 0);
	POLL_UNTIL(fx, fx->cli_up == 1 && fx->accepted == 1);
	fz_conn_set_ctx(fx->srv, fx);
}

/* The message send_req sends, its body lent in two pieces v[0..1]. */
static struct fz_msg req_msg(struct fxt *fx, uint64_t req, uint32_t len, struct tl_iov *v)
{
	struct fz_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = FXT_TYPE;
	m.hdr.req_id = req;
	m.hdr.body_len = len;
	m.hdr.table_id = len;
	m.hdr.key_count = 1;
	v[0].base = body_of(fx, req);
	v[0].len = len / 3;
	v[1].base = v[0].base + v[0].len;
	v[1].len = len - v[0].len;
	m.iov = v;
	m.iovcnt = 2;
	m.done = send_done;
	m.done_arg = fx;
	return m;
}

/* n messages from req on in one fz_conn_send_many call, polling while the queue is full. */
static void send_reqs_many(struct fxt *fx, uint64_t req, const uint32_t *lens, uint32_t n)
{
	struct fz_msg ms[200];
	struct tl_iov v[200][2];
	uint32_t i, at = 0, taken;
	int rc;

	assert_true(n <= 200);
	for (i = 0; i < n; i++)
		ms[i] = req_msg(fx, req + i, lens[i], v[i]);
	for (;;) {
		fx->in_send = 1;
		rc = fz_conn_send_many(fx->cli, ms + at, n - at, &taken);
		fx->in_send = 0;
		at += taken;
		if (rc != -ENOBUFS)
			break;
		assert_true(fz_net_poll(fx->net, 1000) >= 0);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(at, n);
}

static int send_req(struct fxt *fx, uint64_t req, uint32_t len)
{
	struct tl_iov v[2];
	/* Two pieces: fusion gathers them, the alone path passes both down. */
	struct fz_msg m = req_msg(fx, req, len, v);
	int rc;

	fx->in_send = 1;
	rc = fz_conn_send(fx->cli, &m);
	fx->in_send = 0;
	return rc;
}

static void test_fz_conn_mixed_stream_round_trip(void **state)
{
	struct fxt *fx = *state;
	struct fz_conn_stats cs, ss;
	unsigned seed = 4242;
	uint64_t req = 0;
	uint32_t step, i;

	connect_pair(fx);
	for (step = 0; step < 40; step++) {
		uint32_t lens[200];

		for (i = 0; i < 200; i++) {
			uint32_t r = (uint32_t)rand_r(&seed);
			/* 1 in 25 large (alone, zero copy), the rest 1 B..threshold. */
			lens[i] = r % 25 == 0 ? 2049 + (r >> 8) % (FXT_PAT - 2049)
					      : 1 + (r >> 8) % fx->cfg.fuse_threshold_bytes;
		}
		/* Odd steps hand all 200 down in one fz_conn_send_many call. */
		if (step % 2) {
			send_reqs_many(fx, req, lens, 200);
			req += 200;
		}
		for (i = 0; i < 200 && step % 2 == 0; i++) {
			int rc;
			while ((rc = send_req(fx, req, lens[i])) == -ENOBUFS)
				assert_true(fz_net_poll(fx->net, 1000) >= 0);
			assert_int_equal(rc, 0);
			req++;
		}
		/* A full send queue leaves the frame open; the poll retries the flush. */
		int rc = fz_conn_flush(fx->cli);
		assert_true(rc == 0 || rc == -ENOBUFS);
		assert_true(fz_net_poll(fx->net, 0) >= 0);
	}
	POLL_UNTIL(fx, fx->srv_got == req && fx->done_ok == req);
	assert_int_equal(fx->srv_bad, 0);
	assert_int_equal(fx->done_bad, 0);
	fz_conn_stats_get(fx->cli, &cs);
	fz_conn_stats_get(fx->srv, &ss);
	assert_int_equal(cs.tx.msgs, req);
	/* Fusion happened, and what was fused arrived as sub-messages of frames. */
	assert_true(cs.tx.frames > 0 && cs.tx.msgs_fused > cs.tx.frames);
	assert_true(cs.tx.msgs_alone > 0);
	assert_int_equal(cs.deferred_done, cs.tx.msgs_fused);
	assert_int_equal(ss.rx.frames, cs.tx.frames);
	/* A frame of one left as its message. */
	assert_int_equal(ss.rx.subs, cs.tx.msgs_fused - cs.tx.frames_single);
	assert_int_equal(ss.rx.msgs, cs.tx.msgs_alone + cs.tx.frames_single);
	assert_int_equal(ss.rx.refused, 0);
}

/* Sends a hand-made fused frame straight on the transport, below the packer. */
static void send_raw_frame(struct fxt *fx, uint64_t req, uint32_t count, const uint8_t *body,
			   uint32_t len)
{
	struct tl_msg_hdr h = { .type = FZ_TYPE_FRAME, .req_id = req, .key_count = count };
	struct tl_iov v = { body, len };

	assert_int_equal(tl_send(fz_conn_tl(fx->cli), &h, &v, len > 0, NULL, NULL), 0);
}

static void test_fz_conn_malformed_frame_refused_with_error(void **state)
{
	struct fxt *fx = *state;
	/* Sub-message 1 claims 9 body bytes, 2 are there: sub-length past the end. */
	static const uint8_t past_end[] = { FXT_TYPE, 0, 1, 0xaa, FXT_TYPE, 0, 9, 1, 2 };
	/* A fused frame inside a fused frame. */
	static const uint8_t nested[] = { FZ_TYPE_FRAME, 0, 0 };
	struct fz_conn_stats ss;

	connect_pair(fx);
	send_raw_frame(fx, 700, 2, past_end, sizeof(past_end));
	POLL_UNTIL(fx, fx->cli_errors == 1);
	assert_int_equal(fx->cli_err_req, 700);
	assert_int_equal(fx->cli_err_code, EBADMSG);
	assert_true(strncmp(fx->cli_err_text, "fuse: ", 6) == 0);
	send_raw_frame(fx, 701, 1, nested, sizeof(nested));
	send_raw_frame(fx, 702, 1, NULL, 0);   /* zero-length frame */
	POLL_UNTIL(fx, fx->cli_errors == 3);
	assert_int_equal(fx->cli_err_req, 702);
	/* Nothing of the refused frames was delivered; the connection still carries data. */
	assert_int_equal(fx->srv_got, 0);
	assert_int_equal(send_req(fx, 0, 10), 0);
	assert_int_equal(send_req(fx, 1, 5000), 0);
	POLL_UNTIL(fx, fx->srv_got == 2);
	assert_int_equal(fx->srv_bad, 0);
	assert_int_equal(fx->cli_closed + fx->srv_closed, 0);
	fz_conn_stats_get(fx->srv, &ss);
	assert_int_equal(ss.rx.refused, 3);
	assert_int_equal(ss.refusals_sent, 3);
}

static void test_fz_conn_lone_message_not_delayed(void **state)
{
	struct fxt *fx = *state;
	struct fz_conn_stats cs;

	/* The longest hold allowed (1 s): a lone message fusion kept would wait for it. */
	fx->cfg.fuse_max_delay_us = FZ_MAX_MAX_DELAY_US;
	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 64), 0);
	/* On an idle wire it went to the transport within the send: nothing held for later. */
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.msgs_alone, 1);
	assert_int_equal(cs.tx.msgs_fused, 0);
	POLL_UNTIL(fx, fx->srv_got == 1);
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.frames + cs.tx.frames_single, 0);
	assert_int_equal(fx->srv_bad, 0);
}

static void test_fz_conn_open_frame_leaves_without_flush(void **state)
{
	struct fxt *fx = *state;
	struct fz_conn_stats cs;

	connect_pair(fx);
	/* The first goes alone and keeps the wire busy; the next two wait in a frame. */
	assert_int_equal(send_req(fx, 0, 64), 0);
	assert_int_equal(send_req(fx, 1, 64), 0);
	assert_int_equal(send_req(fx, 2, 64), 0);
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.msgs_fused, 2);
	assert_int_equal(cs.tx.frames, 0);
	POLL_UNTIL(fx, fx->srv_got == 3);
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.frames, 1);
	assert_int_equal(cs.tx.flush[FZ_FLUSH_TIMER] + cs.tx.flush[FZ_FLUSH_IDLE], 1);
	assert_int_equal(fx->srv_bad, 0);
}

/*
 * A frame's hold counts from when it opened, not from the last poll: an application that
 * computed for longer than fuse_max_delay_us since then, and now sends, must not see its
 * frame leave at once on a timer that counted the computing.
 */
static void test_fz_conn_frame_held_from_its_opening(void **state)
{
	struct fxt *fx = *state;
	struct timespec nap = { 0, 150 * 1000000 };  /* three times the delay below */
	struct fz_conn_stats cs;

	fx->cfg.fuse_max_delay_us = 50000;
	connect_pair(fx);
	assert_int_equal(nanosleep(&nap, NULL), 0);
	/* The first goes alone and keeps the wire busy; the second opens a frame. */
	assert_int_equal(send_req(fx, 0, 64), 0);
	assert_int_equal(send_req(fx, 1, 64), 0);
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.msgs_fused, 1);
	/* The poll writes the first; the frame leaves because the wire went idle. */
	POLL_UNTIL(fx, fx->srv_got == 2);
	fz_conn_stats_get(fx->cli, &cs);
	assert_int_equal(cs.tx.flush[FZ_FLUSH_TIMER], 0);
	assert_int_equal(cs.tx.flush[FZ_FLUSH_IDLE], 1);
	assert_int_equal(fx->srv_bad, 0);
}

/* Every counter is summed: one left out would stay at zero in the sum. */
static void test_fz_conn_stats_add_sums_every_counter(void **state)
{
	struct fz_conn_stats one, sum;

	(void)state;
	memset(&one, 0x01, sizeof(one));
	memset(&sum, 0, sizeof(sum));
	fz_conn_stats_add(&sum, &one);
	assert_memory_equal(&sum, &one, sizeof(one));
}

static void test_fz_conn_fused_done_runs_from_poll(void **state)
{
	struct fxt *fx = *state;

	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 64), 0);
	assert_int_equal(send_req(fx, 1, 64), 0);   /* fused: its body is already copied */
	assert_int_equal(fx->done_ok + fx->done_bad, 0);
	assert_true(fz_net_poll(fx->net, 0) >= 0);
	POLL_UNTIL(fx, fx->done_ok == 2);
	assert_int_equal(fx->done_bad, 0);
	POLL_UNTIL(fx, fx->srv_got == 2);
}

static void test_fz_conn_send_refused_when_closing(void **state)
{
	struct fxt *fx = *state;

	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 64), 0);
	assert_int_equal(send_req(fx, 1, 64), 0);   /* held in an open frame */
	assert_int_equal(fz_conn_close(fx->cli), 0);
	assert_int_equal(fz_conn_close(fx->cli), -ENOTCONN);
	assert_int_equal(send_req(fx, 2, 64), -ENOTCONN);
	assert_int_equal(fz_conn_flush(fx->cli), -ENOTCONN);
	POLL_UNTIL(fx, fx->cli_closed == 1 && fx->srv_closed == 1);
	/* Every accepted send completed exactly once: alone one cancelled, fused one copied. */
	assert_int_equal(fx->done_ok + fx->done_bad, 2);
}

static void test_fz_conn_bad_arguments_refused(void **state)
{
	struct fxt *fx = *state;
	struct fz_config bad = fx->cfg;
	struct fz_conn *fc = NULL;
	struct fz_listener *l = NULL;
	struct fz_msg m;

	bad.fuse_max_bytes = 1;
	assert_int_equal(fz_net_connect(fx->net, LO, 1, &bad, &cli_ops, fx, &fc), -EINVAL);
	assert_int_equal(fz_net_listen(fx->net, LO, 0, &bad, &srv_ops, NULL, fx, &l), -EINVAL);
	assert_null(fc);
	assert_null(l);
	connect_pair(fx);
	memset(&m, 0, sizeof(m));
	m.hdr.type = FZ_TYPE_FRAME;   /* fuse's own type is not the caller's to send */
	assert_int_equal(fz_conn_send(fx->cli, &m), -EINVAL);
	uint32_t taken = 7;
	assert_int_equal(fz_conn_send_many(fx->cli, &m, 1, &taken), -EINVAL);
	assert_int_equal(taken, 0);
	assert_int_equal(fz_conn_send_many(fx->cli, NULL, 1, &taken), -EINVAL);
	assert_int_equal(fz_conn_send_many(fx->cli, &m, 1, NULL), -EINVAL);
	assert_int_equal(fz_conn_send_many(NULL, &m, 1, &taken), -EINVAL);
	assert_int_equal(fz_net_create(NULL, &fx->net), -EINVAL);
	fz_net_destroy(NULL);
	fz_unlisten(NULL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_fz_conn_mixed_stream_round_trip),
		T(test_fz_conn_malformed_frame_refused_with_error),
		T(test_fz_conn_lone_message_not_delayed),
		T(test_fz_conn_open_frame_leaves_without_flush),
		T(test_fz_conn_frame_held_from_its_opening),
		T(test_fz_conn_fused_done_runs_from_poll),
		T(test_fz_conn_send_refused_when_closing),
		T(test_fz_conn_bad_arguments_refused),
		cmocka_unit_test(test_fz_conn_stats_add_sums_every_counter),
	};

	return cmocka_run_group_tests_name("fz_conn", tests, NULL, NULL);
}
