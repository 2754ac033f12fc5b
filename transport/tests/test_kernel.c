/*
 * test_kernel.c — cmocka tests of the transport API over the kernel backend
 * (protocol=kernel), on real sockets over 127.0.0.1.
 *
 * One instance holds both ends (a listener whose accepted connections echo, and a
 * client connection), driven by tl_poll in one thread; raw sockets play a misbehaving
 * peer. Every wait is bounded by a deadline; teardown destroys the instance and checks
 * that nothing is left held.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "dpdk_net/dn.h"
#include "transport/tl_pvt.h"
#include "transport/tl_tcp.h"

#define LO 0x7f000001u

struct kfx {
	struct tl *tl;
	struct tl_listener *l;
	uint16_t port;
	int echo;                 /* server echoes each message back (zero copy) */
	int echo_copy;            /* ... by tl_send_copy when it fits, holding nothing */
	int srv_hold;             /* server keeps messages instead */
	int srv_close_on_msg;     /* server closes the connection from its msg callback */
	int srv_pause_at;         /* server pauses reading at this many messages (0: never) */
	struct tl_msg *held[8];
	int nheld;
	struct tl_conn *srv, *cli;
	int accepted, srv_closed, srv_reason, srv_msgs;
	int cli_connected, cli_status, cli_closed, cli_reason;
	uint64_t cli_msgs, cli_next_req, cli_bad;
	int done_ok, done_err, last_done_err;
	const char *srv_why;
	uint8_t *pat;             /* source of every body sent */
};

static uint8_t patb(uint64_t req, uint32_t i) { return (uint8_t)(req * 13u + i * 5u + (i >> 9)); }

static int view_ok(const struct tl_msg_view *v)
{
	uint32_t i, j, off = 0;

	for (i = 0; i < v->iovcnt; i++)
		for (j = 0; j < v->iov[i].len; j++, off++)
			if (v->iov[i].base[j] != patb(v->hdr.req_id, off))
				return 0;
	return off == v->hdr.body_len;
}

static void echo_done(void *arg, int status)
{
	(void)status;
	tl_msg_release(arg);
}

static void srv_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct kfx *fx = tl_conn_ctx(c);
	struct tl_msg *h;

	fx->srv_msgs++;
	if (fx->srv_pause_at && fx->srv_msgs == fx->srv_pause_at)
		assert_int_equal(tl_conn_rx_pause(c, true), 0);
	if (fx->srv_close_on_msg) {
		assert_int_equal(tl_close(c), 0);
		return;
	}
	if (fx->srv_hold && fx->nheld < 8) {
		fx->held[fx->nheld++] = tl_msg_hold(m);
		return;
	}
	if (!fx->echo)
		return;
	if (fx->echo_copy && m->hdr.body_len <= TL_SEND_COPY_MAX) {
		assert_int_equal(tl_send_copy(c, &m->hdr, m->iov, m->iovcnt), 0);
		return;
	}
	/* Zero-copy echo: keep the received bytes and send them from where they lie. */
	h = tl_msg_hold(m);
	if (tl_send(c, &m->hdr, m->iov, m->iovcnt, echo_done, h) != 0)
		tl_msg_release(h);
}

static void srv_closed(struct tl_conn *c, int reason)
{
	struct kfx *fx = tl_conn_ctx(c);

	fx->srv_closed++;
	fx->srv_reason = reason;
	fx->srv_why = tl_conn_why(c);
	if (fx->srv == c)
		fx->srv = NULL;
}

static const struct tl_conn_ops srv_ops = { NULL, srv_msg, srv_closed };

static void srv_accepted(struct tl_listener *l, struct tl_conn *c)
{
	struct kfx *fx = tl_listener_ctx(l);

	fx->accepted++;
	fx->srv = c;
}

static void cli_connected(struct tl_conn *c, int status)
{
	struct kfx *fx = tl_conn_ctx(c);

	fx->cli_connected++;
	fx->cli_status = status;
	if (status != 0)
		fx->cli = NULL;
}

static void cli_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct kfx *fx = tl_conn_ctx(c);

	if (m->hdr.req_id != fx->cli_next_req || !view_ok(m))
		fx->cli_bad++;
	fx->cli_next_req = m->hdr.req_id + 1;
	fx->cli_msgs++;
}

static void cli_closed(struct tl_conn *c, int reason)
{
	struct kfx *fx = tl_conn_ctx(c);

	fx->cli_closed++;
	fx->cli_reason = reason;
	fx->cli = NULL;
}

static const struct tl_conn_ops cli_ops = { cli_connected, cli_msg, cli_closed };

static void send_done(void *arg, int status)
{
	struct kfx *fx = arg;

	if (status == 0) {
		fx->done_ok++;
	} else {
		fx->done_err++;
		fx->last_done_err = status;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Polls until *flag reaches at least want, for at most 10 s. */
#define POLL_UNTIL(fx, cond)                                                     \
	do {                                                                     \
		double dl_ = now_s() + 10.0;                                     \
		while (!(cond) && now_s() < dl_)                                 \
			assert_true(tl_poll((fx)->tl, 2000) >= 0);               \
		assert_true(cond);                                               \
	} while (0)

static int setup_cfg(void **state, const struct tl_config *cfg)
{
	struct kfx *fx = calloc(1, sizeof(*fx));
	uint32_t i;

	assert_non_null(fx);
	assert_int_equal(tl_create(cfg, &fx->tl), 0);
	assert_int_equal(tl_listen(fx->tl, LO, 0, &srv_ops, srv_accepted, fx, &fx->l), 0);
	fx->port = tl_listener_port(fx->l);
	assert_true(fx->port != 0);
	fx->echo = 1;
	fx->pat = malloc(16u << 20);
	assert_non_null(fx->pat);
	(void)i;
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	struct tl_config cfg;

	tl_config_default(&cfg);
	return setup_cfg(state, &cfg);
}

static int setup_small(void **state)
{
	struct tl_config cfg;

	tl_config_default(&cfg);
	cfg.max_body = 1000;
	cfg.tx_max_msgs = 4;
	cfg.tx_max_bytes = 4096;
	cfg.max_conns = 2;
	return setup_cfg(state, &cfg);
}

static int setup_tiny_rx(void **state)
{
	struct tl_config cfg;

	tl_config_default(&cfg);
	cfg.rx_buf_size = 4096;
	cfg.rx_max_bufs = 4;
	return setup_cfg(state, &cfg);
}

static int teardown(void **state)
{
	struct kfx *fx = *state;
	int i;

	for (i = 0; i < fx->nheld; i++)
		tl_msg_release(fx->held[i]);
	assert_int_equal(fx->tl->msgs->in_use, 0);
	tl_destroy(fx->tl);
	free(fx->pat);
	free(fx);
	return 0;
}

static void connect_pair(struct kfx *fx)
{
	assert_int_equal(tl_connect(fx->tl, LO, fx->port, &cli_ops, fx, &fx->cli), 0);
	POLL_UNTIL(fx, fx->cli_connected == 1 && fx->accepted == 1);
	assert_int_equal(fx->cli_status, 0);
}

/* Queues message req with a body of len pattern bytes (built in fx->pat at off). */
static int send_req(struct kfx *fx, uint64_t req, uint32_t len, uint32_t off)
{
	struct tl_msg_hdr h = { .type = 40, .req_id = req };
	struct tl_iov v[2];
	uint32_t i, half = len / 2;

	for (i = 0; i < len; i++)
		fx->pat[off + i] = patb(req, i);
	/* Two pieces: exercises the gather of caller iov into one sendmsg. */
	v[0].base = fx->pat + off;
	v[0].len = half;
	v[1].base = fx->pat + off + half;
	v[1].len = len - half;
	return tl_send(fx->cli, &h, v, 2, send_done, fx);
}

static void test_kernel_echo_many_messages(void **state)
{
	struct kfx *fx = *state;
	const uint32_t n = 3000, win = 32, slot = 8192;
	uint32_t sent = 0;
	unsigned seed = 42;
	double dl = now_s() + 20.0;

	connect_pair(fx);
	while (fx->cli_msgs < n && now_s() < dl) {
		/* Window of win messages; slot (req % 2win) is free once its echo is back. */
		while (sent < n && sent - fx->cli_msgs < win) {
			uint32_t len = (uint32_t)rand_r(&seed) % 4000;
			assert_int_equal(send_req(fx, sent, len, (sent % (2 * win)) * slot), 0);
			sent++;
		}
		assert_true(tl_poll(fx->tl, 2000) >= 0);
	}
	assert_int_equal(fx->cli_msgs, n);
	assert_int_equal(fx->cli_bad, 0);
	POLL_UNTIL(fx, fx->done_ok == (int)n);
	assert_int_equal(fx->done_err, 0);
}

static void test_kernel_large_messages(void **state)
{
	struct kfx *fx = *state;
	uint32_t i;

	connect_pair(fx);
	for (i = 0; i < 3; i++) {
		assert_int_equal(send_req(fx, i, (5u << 20) + i * 12345, 0), 0);
		POLL_UNTIL(fx, fx->cli_msgs == i + 1);
	}
	assert_int_equal(fx->cli_bad, 0);
	assert_int_equal(fx->srv_msgs, 3);
	POLL_UNTIL(fx, fx->done_ok == 3);
}

static void test_kernel_connection_refused(void **state)
{
	struct kfx *fx = *state;
	uint16_t port = fx->port;

	tl_unlisten(fx->l);
	fx->l = NULL;
	assert_int_equal(tl_poll(fx->tl, 0) >= 0, 1); /* frees the listener */
	assert_int_equal(tl_connect(fx->tl, LO, port, &cli_ops, fx, &fx->cli), 0);
	POLL_UNTIL(fx, fx->cli_connected == 1);
	assert_int_equal(fx->cli_status, -ECONNREFUSED);
	assert_int_equal(fx->cli_closed, 0);
	assert_null(fx->cli);
}

static void test_kernel_peer_close(void **state)
{
	struct kfx *fx = *state;

	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 100, 0), 0);
	POLL_UNTIL(fx, fx->cli_msgs == 1);
	assert_int_equal(tl_close(fx->cli), 0);
	assert_int_equal(tl_close(fx->cli), -ENOTCONN);
	assert_int_equal(fx->cli_closed, 0); /* callbacks only from tl_poll */
	POLL_UNTIL(fx, fx->srv_closed == 1 && fx->cli_closed == 1);
	assert_int_equal(fx->cli_reason, -ECONNABORTED);
	assert_int_equal(fx->srv_reason, 0);
	assert_non_null(strstr(fx->srv_why, "peer closed"));
}

static void test_kernel_close_cancels_pending_sends(void **state)
{
	struct kfx *fx = *state;

	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 100, 0), 0);
	assert_int_equal(send_req(fx, 1, 100, 200), 0);
	assert_int_equal(tl_close(fx->cli), 0);
	assert_int_equal(send_req(fx, 2, 100, 400), -ENOTCONN);
	POLL_UNTIL(fx, fx->cli_closed == 1);
	assert_int_equal(fx->done_err, 2);
	assert_int_equal(fx->last_done_err, -ECANCELED);
	assert_int_equal(fx->done_ok, 0);
}

/* A raw client socket connected to the listener, with the server side accepted. */
static int raw_connect(struct kfx *fx)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(fx->port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(LO);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Reads exactly n bytes from fd while polling the instance; returns bytes read. */
static size_t raw_read(struct kfx *fx, int fd, uint8_t *buf, size_t n)
{
	double dl = now_s() + 10.0;
	size_t got = 0;

	while (got < n && now_s() < dl) {
		ssize_t r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0)
			break;
		else if (errno != EAGAIN)
			break;
		assert_true(tl_poll(fx->tl, 1000) >= 0);
	}
	return got;
}

static void raw_hdr(uint8_t *out, uint8_t version, uint8_t type, uint64_t req, uint32_t body)
{
	struct tl_msg_hdr h = { .type = type, .req_id = req, .body_len = body };

	tl_msg_hdr_encode(out, &h);
	out[2] = version;
}

static void test_kernel_malformed_stream_refused(void **state)
{
	struct kfx *fx = *state;
	uint8_t junk[64];
	int fd = raw_connect(fx);

	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(send(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	POLL_UNTIL(fx, fx->srv_closed == 1);
	assert_int_equal(fx->srv_reason, -EBADMSG);
	assert_non_null(strstr(fx->srv_why, "malformed"));
	assert_int_equal(raw_read(fx, fd, junk, 1), 0); /* the peer sees the stream end */
	close(fd);
}

/* tl_close ends the stream (the peer reads end-of-file); tl_abort resets it (ECONNRESET). */
static void test_kernel_abort_resets_close_ends_stream(void **state)
{
	struct kfx *fx = *state;
	uint8_t b[8];
	int fd = raw_connect(fx);
	ssize_t r;

	POLL_UNTIL(fx, fx->srv != NULL);
	assert_int_equal(tl_abort(fx->srv), 0);
	assert_int_equal(tl_abort(fx->srv), -ENOTCONN);
	POLL_UNTIL(fx, fx->srv_closed == 1);
	assert_int_equal(fx->srv_reason, -ECONNABORTED);
	for (double dl = now_s() + 5.0; (r = recv(fd, b, sizeof(b), MSG_DONTWAIT)) < 0 &&
	     errno == EAGAIN && now_s() < dl;)
		assert_true(tl_poll(fx->tl, 1000) >= 0);
	assert_int_equal(r, -1);
	assert_int_equal(errno, ECONNRESET);
	close(fd);

	fd = raw_connect(fx);
	POLL_UNTIL(fx, fx->srv != NULL);
	assert_int_equal(tl_close(fx->srv), 0);
	POLL_UNTIL(fx, fx->srv_closed == 2);
	assert_int_equal(raw_read(fx, fd, b, 1), 0);
	assert_int_equal(recv(fd, b, sizeof(b), MSG_DONTWAIT), 0);
	close(fd);
}

static void test_kernel_unknown_version_error_reply(void **state)
{
	struct kfx *fx = *state;
	uint8_t out[TL_MSG_HDR_LEN * 2 + 20 + 5], in[512];
	struct tl_msg_hdr h;
	int fd = raw_connect(fx);
	size_t got;

	raw_hdr(out, TL_MSG_VERSION + 1, 40, 77, 20);
	memset(out + TL_MSG_HDR_LEN, 1, 20);
	raw_hdr(out + TL_MSG_HDR_LEN + 20, TL_MSG_VERSION, 40, 78, 5);
	memcpy(out + 2 * TL_MSG_HDR_LEN + 20, "hello", 5);
	assert_int_equal(send(fd, out, sizeof(out), 0), (ssize_t)sizeof(out));
	got = raw_read(fx, fd, in, TL_MSG_HDR_LEN + 4);
	assert_int_equal(got, TL_MSG_HDR_LEN + 4);
	assert_int_equal(tl_msg_hdr_decode(in, 1u << 20, &h), 0);
	assert_int_equal(h.type, TL_TYPE_ERROR);
	assert_int_equal(h.req_id, 77);
	assert_int_equal(tl_ld32(in + TL_MSG_HDR_LEN), EPROTONOSUPPORT);
	got = raw_read(fx, fd, in, h.body_len - 4);
	assert_int_equal(got, h.body_len - 4);
	/* The connection survived: the next message is echoed. */
	got = raw_read(fx, fd, in, TL_MSG_HDR_LEN + 5);
	assert_int_equal(got, TL_MSG_HDR_LEN + 5);
	assert_int_equal(tl_msg_hdr_decode(in, 1u << 20, &h), 0);
	assert_int_equal(h.req_id, 78);
	assert_memory_equal(in + TL_MSG_HDR_LEN, "hello", 5);
	assert_int_equal(fx->srv_closed, 0);
	close(fd);
}

static void test_kernel_body_limit_refused(void **state)
{
	struct kfx *fx = *state;
	uint8_t out[TL_MSG_HDR_LEN];
	int fd = raw_connect(fx);

	raw_hdr(out, TL_MSG_VERSION, 40, 1, 1001);
	assert_int_equal(send(fd, out, sizeof(out), 0), (ssize_t)sizeof(out));
	POLL_UNTIL(fx, fx->srv_closed == 1);
	assert_int_equal(fx->srv_reason, -EMSGSIZE);
	close(fd);
}

static void test_kernel_eof_inside_message(void **state)
{
	struct kfx *fx = *state;
	uint8_t out[TL_MSG_HDR_LEN + 10];
	int fd = raw_connect(fx);

	raw_hdr(out, TL_MSG_VERSION, 40, 1, 100);
	memset(out + TL_MSG_HDR_LEN, 0, 10);
	assert_int_equal(send(fd, out, sizeof(out), 0), (ssize_t)sizeof(out));
	POLL_UNTIL(fx, fx->accepted == 1);
	close(fd);
	POLL_UNTIL(fx, fx->srv_closed == 1);
	assert_int_equal(fx->srv_reason, -EPROTO);
	assert_int_equal(fx->srv_msgs, 0);
}

static void test_kernel_rx_buffers_exhausted(void **state)
{
	struct kfx *fx = *state;
	uint32_t len = TL_MSG_HDR_LEN + (64u << 10);
	uint8_t *out = calloc(1, len);
	int fd = raw_connect(fx);
	size_t off = 0;
	double dl = now_s() + 10.0;

	assert_non_null(out);
	raw_hdr(out, TL_MSG_VERSION, 40, 1, 64u << 10);
	/* 64 KiB cannot fit in 4 buffers of 4 KiB: refused, not grown past the limit. */
	while (off < len && fx->srv_closed == 0 && now_s() < dl) {
		ssize_t n = send(fd, out + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			off += (size_t)n;
		assert_true(tl_poll(fx->tl, 1000) >= 0);
	}
	POLL_UNTIL(fx, fx->srv_closed == 1);
	assert_int_equal(fx->srv_reason, -ENOBUFS);
	assert_non_null(strstr(fx->srv_why, "rx_max_bufs"));
	close(fd);
	free(out);
}

static void test_kernel_close_from_callback_stops_delivery(void **state)
{
	struct kfx *fx = *state;

	fx->srv_close_on_msg = 1;
	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 10, 0), 0);
	assert_int_equal(send_req(fx, 1, 10, 100), 0);
	POLL_UNTIL(fx, fx->cli_closed == 1 && fx->srv_closed == 1);
	assert_int_equal(fx->srv_msgs, 1);
	assert_int_equal(fx->srv_reason, -ECONNABORTED);
	assert_true(fx->cli_reason == 0 || fx->cli_reason == -ECONNRESET);
}

static void test_kernel_send_limits(void **state)
{
	struct kfx *fx = *state;
	int i;

	connect_pair(fx);
	assert_int_equal(send_req(fx, 0, 1001, 0), -EMSGSIZE);
	for (i = 0; i < 4; i++)
		assert_int_equal(send_req(fx, (uint64_t)i, 10, (uint32_t)i * 16), 0);
	assert_int_equal(send_req(fx, 4, 10, 64), -ENOBUFS);
	POLL_UNTIL(fx, fx->done_ok == 4);
	/* Bytes cap: 4096 queued bytes at most. */
	for (i = 0; i < 4; i++)
		if (send_req(fx, (uint64_t)(4 + i), 1000, 1000u * (uint32_t)i) != 0)
			break;
	assert_int_equal(i, 3);
	POLL_UNTIL(fx, fx->cli_msgs == 7);
	assert_int_equal(fx->cli_bad, 0);
}

static void test_kernel_tx_pending_counts_until_done(void **state)
{
	struct kfx *fx = *state;

	connect_pair(fx);
	assert_int_equal(tl_conn_tx_pending(fx->cli), 0);
	assert_int_equal(send_req(fx, 0, 100, 0), 0);
	assert_int_equal(send_req(fx, 1, 7, 200), 0);
	/* Queued, not yet written: headers and bodies both count. */
	assert_int_equal(tl_conn_tx_pending(fx->cli), 2 * TL_MSG_HDR_LEN + 107);
	POLL_UNTIL(fx, fx->done_ok == 2);
	assert_int_equal(tl_conn_tx_pending(fx->cli), 0);
	/* A refused send leaves the count alone. */
	assert_int_equal(send_req(fx, 2, 1001, 0), -EMSGSIZE);
	assert_int_equal(tl_conn_tx_pending(fx->cli), 0);
	POLL_UNTIL(fx, fx->cli_msgs == 2);
}

/*
 * tl_send_copy: the body is the caller's again on return (scribbled over here before the
 * first poll), nothing completes, and above TL_SEND_COPY_MAX it refuses. The server
 * echoes by copy too, from a view it does not hold: sizes 0..TL_SEND_COPY_MAX.
 */
static void test_kernel_send_copy(void **state)
{
	struct kfx *fx = *state;
	struct tl_msg_hdr h = { .type = 40 };
	uint8_t body[TL_SEND_COPY_MAX + 1];
	struct tl_iov v[2];
	uint32_t len, i, half;

	fx->echo_copy = 1;
	connect_pair(fx);
	for (len = 0; len <= TL_SEND_COPY_MAX; len++) {
		for (i = 0; i < len; i++)
			body[i] = patb(len, i);
		half = len / 3;
		v[0] = (struct tl_iov){ body, half };
		v[1] = (struct tl_iov){ body + half, len - half };
		h.req_id = len;
		assert_int_equal(tl_send_copy(fx->cli, &h, v, 2), 0);
		assert_int_equal(tl_conn_tx_pending(fx->cli), TL_MSG_HDR_LEN + len);
		memset(body, 0xa5, sizeof(body));
		POLL_UNTIL(fx, fx->cli_msgs == len + 1);
	}
	assert_int_equal(fx->cli_bad, 0);
	assert_int_equal(fx->done_ok + fx->done_err, 0);
	assert_int_equal(fx->nheld, 0);
	v[0] = (struct tl_iov){ body, TL_SEND_COPY_MAX + 1 };
	assert_int_equal(tl_send_copy(fx->cli, &h, v, 1), -EMSGSIZE);
	assert_int_equal(tl_conn_tx_pending(fx->cli), 0);
}

/*
 * tl_conn_push: the queued bytes reach the peer (a plain socket, read without polling
 * the instance) before any tl_poll, and their completion waits for the next tl_poll, which
 * then does not sleep.
 */
static void test_kernel_push_writes_before_poll(void **state)
{
	struct kfx *fx = *state;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 5 };
	socklen_t sl = sizeof(sa);
	uint8_t buf[TL_MSG_HDR_LEN + 5000];
	size_t got = 0;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	uint32_t i;

	assert_true(lfd >= 0);
	sa.sin_addr.s_addr = htonl(LO);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	assert_int_equal(tl_connect(fx->tl, LO, ntohs(sa.sin_port), &cli_ops, fx, &fx->cli), 0);
	POLL_UNTIL(fx, fx->cli_connected == 1);
	fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(tl_conn_push(fx->cli), 0);  /* nothing queued: nothing to do */
	assert_int_equal(send_req(fx, 7, 5000, 0), 0);
	assert_int_equal(tl_conn_push(fx->cli), 0);
	while (got < sizeof(buf)) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	assert_int_equal(got, sizeof(buf));
	assert_int_equal(tl_ld64(buf + 16), 7);              /* req_id */
	for (i = 0; i < 5000; i++)
		assert_int_equal(buf[TL_MSG_HDR_LEN + i], patb(7, i));
	assert_int_equal(fx->done_ok, 0);                     /* not inside the call */
	assert_int_equal(tl_conn_tx_pending(fx->cli), sizeof(buf));
	assert_true(tl_poll(fx->tl, 0) >= 0);
	assert_int_equal(fx->done_ok, 1);
	assert_int_equal(tl_conn_tx_pending(fx->cli), 0);
	/*
	 * A poll whose start runs a pushed send's completion does not sleep: what the
	 * completion gave back (a server's reply buffer) is the caller's at once. Nothing else
	 * happens on the instance, so a poll that slept would take its whole 10 s.
	 */
	assert_int_equal(send_req(fx, 8, 100, 0), 0);
	assert_int_equal(tl_conn_push(fx->cli), 0);
	for (got = 0; got < TL_MSG_HDR_LEN + 100;) {
		ssize_t r = recv(fd, buf + got, TL_MSG_HDR_LEN + 100 - got, 0);
		assert_true(r > 0);
		got += (size_t)r;
	}
	{
		double t0 = now_s();
		assert_true(tl_poll(fx->tl, 10000000) >= 0);
		assert_int_equal(fx->done_ok, 2);
		assert_true(now_s() - t0 < 5.0);
	}
	assert_int_equal(tl_close(fx->cli), 0);
	assert_int_equal(tl_conn_push(fx->cli), -ENOTCONN);
	POLL_UNTIL(fx, fx->cli_closed == 1);
	close(fd);
	close(lfd);
}

static void test_kernel_max_conns_refused(void **state)
{
	struct kfx *fx = *state;
	struct tl_conn *c;
	struct tl_stats st;
	uint8_t b;
	int fd;

	connect_pair(fx); /* two of two: the client and its accepted peer */
	assert_int_equal(tl_connect(fx->tl, LO, fx->port, &cli_ops, fx, &c), -EMFILE);
	fd = raw_connect(fx);
	assert_int_equal(raw_read(fx, fd, &b, 1), 0);
	tl_stats_get(fx->tl, &st);
	assert_int_equal(st.refused_conns, 1);
	close(fd);
}

static void test_kernel_hold_past_callback(void **state)
{
	struct kfx *fx = *state;
	uint32_t i;

	fx->srv_hold = 1;
	connect_pair(fx);
	for (i = 0; i < 3; i++)
		assert_int_equal(send_req(fx, i, 70000 + i, i * 100000), 0);
	POLL_UNTIL(fx, fx->nheld == 3);
	/* Long after their callbacks, held bodies are intact and readable. */
	memset(fx->pat, 0, 400000);
	for (i = 0; i < 3; i++)
		assert_true(view_ok(tl_msg_view_of(fx->held[i])));
	assert_int_equal(fx->tl->msgs->in_use, 3);
	for (i = 0; i < 3; i++)
		tl_msg_release(fx->held[i]);
	fx->nheld = 0;
	assert_int_equal(fx->tl->msgs->in_use, 0);
}

/* Polls for about ms milliseconds. */
static void poll_for(struct kfx *fx, double ms)
{
	double end = now_s() + ms / 1e3;

	while (now_s() < end)
		assert_true(tl_poll(fx->tl, 1000) >= 0);
}

/*
 * tl_conn_rx_pause: a paused receiver gets nothing while the sender's 4 MiB back up (its
 * sends stay pending), and every message once it resumes. Paused from its own callback, it
 * gets at most the rest of the read in progress.
 */
static void test_kernel_rx_pause_backs_up_the_sender(void **state)
{
	struct kfx *fx = *state;
	const uint32_t n = 64, len = 64u << 10;
	uint32_t i;
	int got;

	fx->echo = 0;
	connect_pair(fx);
	assert_int_equal(tl_conn_rx_pause(fx->srv, true), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(send_req(fx, i, len, i * len), 0);
	poll_for(fx, 300);
	assert_int_equal(fx->srv_msgs, 0);
	assert_true(tl_conn_tx_pending(fx->cli) > 0); /* TCP's window shut on the sender */
	assert_int_equal(tl_conn_rx_pause(fx->srv, false), 0);
	POLL_UNTIL(fx, fx->srv_msgs == (int)n && fx->done_ok == (int)n);

	fx->srv_msgs = 0;
	fx->srv_pause_at = 10;
	for (i = 0; i < n; i++)
		assert_int_equal(send_req(fx, n + i, len, i * len), 0);
	POLL_UNTIL(fx, fx->srv_msgs >= 10);
	poll_for(fx, 300);
	got = fx->srv_msgs;
	assert_true(got <= 10 + 1); /* the rest of one 64 KiB read at most */
	poll_for(fx, 200);
	assert_int_equal(fx->srv_msgs, got);
	assert_int_equal(tl_conn_rx_pause(fx->srv, false), 0);
	POLL_UNTIL(fx, fx->srv_msgs == (int)n && fx->done_ok == 2 * (int)n);
	assert_int_equal(fx->cli_bad, 0);
}

/*
 * A poll with a timeout returns by it although the spin after work is longer: the spin
 * counts against the timeout (here a 100 ms window against a 2 ms timeout).
 */
static void test_kernel_spin_within_timeout(void **state)
{
	struct tl_config cfg;
	struct kfx *fx;
	double t0, worst = 0;

	(void)state;
	tl_config_default(&cfg);
	assert_int_equal(setenv("WHARF_IDLE_SPIN_US", "100000", 1), 0);
	assert_int_equal(setup_cfg((void **)&fx, &cfg), 0);
	assert_int_equal(unsetenv("WHARF_IDLE_SPIN_US"), 0);
	connect_pair(fx);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(send_req(fx, (uint64_t)i, 64, 0), 0);
		POLL_UNTIL(fx, fx->cli_msgs == (uint64_t)i + 1 && fx->done_ok == i + 1);
		/* Work just done: the window is open, and nothing more comes. */
		t0 = now_s();
		assert_true(tl_poll(fx->tl, 2000) >= 0);
		if (now_s() - t0 > worst)
			worst = now_s() - t0;
	}
	/* 2 ms asked; 100 ms is what a spin that ignored it took. Generous for a loaded host. */
	assert_true(worst < 0.05);
	teardown((void **)&fx);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * A poll shorter than DN_DUE_NEAR_US (a fused frame's hold) ends on time when nothing comes:
 * 300 us asked, timed exactly with the thread's own slack, where a sleep rounded up to 1 ms
 * with the 4 ms slack of idle sleeps took 1-5 ms. With no spin after work, every poll sleeps.
 * (The median of 21, so one slow wake-up on a loaded host decides nothing.)
 */
static void test_kernel_short_poll_ends_on_time(void **state)
{
	struct tl_config cfg;
	struct kfx *fx;
	double took[21];

	(void)state;
	tl_config_default(&cfg);
	assert_int_equal(setenv("WHARF_IDLE_SPIN_US", "0", 1), 0);
	assert_int_equal(setup_cfg((void **)&fx, &cfg), 0);
	assert_int_equal(unsetenv("WHARF_IDLE_SPIN_US"), 0);
	for (int i = 0; i < 21; i++) {
		double t0 = now_s();
		assert_int_equal(tl_poll(fx->tl, 300), 0);
		took[i] = (now_s() - t0) * 1e6;
	}
	qsort(took, 21, sizeof(took[0]), cmp_double);
	print_message("tl_poll(300 us) idle: median %.0f us\n", took[10]);
	assert_true(took[10] >= 290 && took[10] < 700);
	teardown((void **)&fx);
}

static void test_kernel_config_checked(void **state)
{
	struct tl_config cfg;
	struct tl *tl = NULL;
	const char *why = NULL;
	enum tl_protocol p;

	(void)state;
	tl_config_default(&cfg);
	assert_int_equal(tl_config_check(&cfg, &why), 0);
	cfg.max_body = 0;
	assert_int_equal(tl_config_check(&cfg, &why), -EINVAL);
	assert_non_null(strstr(why, "max_body"));
	assert_int_equal(tl_create(&cfg, &tl), -EINVAL);
	/* Not TL_PROTO_DPDK here: once its backend is registered that would start EAL. */
	tl_config_default(&cfg);
	cfg.protocol = (enum tl_protocol)99;
	assert_int_equal(tl_config_check(&cfg, &why), -EINVAL);
	assert_non_null(strstr(why, "protocol"));
	assert_int_equal(tl_create(&cfg, &tl), -EINVAL);
	assert_null(tl);
	/* The variables the layers read: a value out of range or not a number is refused. */
	tl_config_default(&cfg);
	for (unsigned i = 0; i < tl_env_n_knobs; i++) {
		const struct tl_env_knob *k = &tl_env_knobs[i];
		const char *was = getenv(k->name);
		char *saved = was != NULL ? strdup(was) : NULL, hi1[24];
		snprintf(hi1, sizeof(hi1), "%u", k->hi + 1);
		const char *bad[] = { "on", "-1", "1x", " 1", hi1 };
		for (unsigned j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			assert_int_equal(setenv(k->name, bad[j], 1), 0);
			assert_int_equal(tl_config_check(&cfg, &why), -EINVAL);
			assert_non_null(strstr(why, k->name));
			assert_int_equal(tl_create(&cfg, &tl), -EINVAL);
		}
		if (k->lo > 0) {
			snprintf(hi1, sizeof(hi1), "%u", k->lo - 1);
			assert_int_equal(setenv(k->name, hi1, 1), 0);
			assert_int_equal(tl_config_check(&cfg, &why), -EINVAL);
		}
		snprintf(hi1, sizeof(hi1), "%u", k->hi);
		assert_int_equal(setenv(k->name, hi1, 1), 0);
		assert_int_equal(tl_config_check(&cfg, &why), 0);
		assert_int_equal(setenv(k->name, "", 1), 0); /* empty: the default */
		assert_int_equal(tl_config_check(&cfg, &why), 0);
		assert_int_equal(saved != NULL ? setenv(k->name, saved, 1) : unsetenv(k->name), 0);
		free(saved);
	}
	assert_null(tl);
	assert_int_equal(tl_protocol_parse("kernel", &p), 0);
	assert_int_equal(p, TL_PROTO_KERNEL);
	assert_int_equal(tl_protocol_parse("udp", &p), -EINVAL);
	tl_destroy(NULL);
}

struct round_end_ctx {
	struct kfx *fx;
	int calls, send_at; /* send_at: the call that sends (1-based; 0 none) */
};

static void round_end_send(void *arg)
{
	struct round_end_ctx *r = arg;
	struct kfx *fx = r->fx;
	struct tl_msg_hdr h = { .type = 40, .req_id = 0 };
	struct tl_iov v;

	if (++r->calls != r->send_at)
		return;
	for (uint32_t i = 0; i < 64; i++)
		fx->pat[i] = patb(0, i);
	v.base = fx->pat;
	v.len = 64;
	assert_int_equal(tl_send(fx->srv, &h, &v, 1, send_done, fx), 0);
}

/*
 * tl_on_round_end: the hook runs once per tl_poll, and what it sends leaves in that poll's
 * flush: the peer (another instance) receives it with the sender never polled again.
 */
static void test_kernel_round_end_sends_leave_in_the_round(void **state)
{
	struct kfx *fx = *state;
	struct round_end_ctx r = { .fx = fx };
	struct tl_config cfg;
	struct tl *tl2;
	double dl;

	tl_config_default(&cfg);
	assert_int_equal(tl_create(&cfg, &tl2), 0);
	assert_int_equal(tl_connect(tl2, LO, fx->port, &cli_ops, fx, &fx->cli), 0);
	dl = now_s() + 10.0;
	while (!(fx->cli_connected == 1 && fx->accepted == 1) && now_s() < dl) {
		assert_true(tl_poll(fx->tl, 1000) >= 0);
		assert_true(tl_poll(tl2, 1000) >= 0);
	}
	assert_int_equal(fx->cli_status, 0);
	assert_non_null(fx->srv);
	tl_on_round_end(fx->tl, round_end_send, &r);
	for (int i = 0; i < 3; i++)
		assert_true(tl_poll(fx->tl, 0) >= 0);
	assert_int_equal(r.calls, 3);
	r.send_at = 4;
	assert_true(tl_poll(fx->tl, 0) >= 0);
	dl = now_s() + 2.0;
	while (fx->cli_msgs == 0 && now_s() < dl)
		assert_true(tl_poll(tl2, 1000) >= 0);
	assert_int_equal(fx->cli_msgs, 1);
	assert_int_equal(fx->cli_bad, 0);
	tl_on_round_end(fx->tl, NULL, NULL);
	assert_true(tl_poll(fx->tl, 0) >= 0);
	assert_int_equal(r.calls, 4);
	tl_destroy(tl2);
	POLL_UNTIL(fx, fx->srv_closed == 1);
}

/* The local port of this process's TCP socket connected to LO:port (0: none). */
static uint16_t local_port_to(uint16_t port)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_in a, b;
		socklen_t la = sizeof(a), lb = sizeof(b);
		if (getpeername(fd, (struct sockaddr *)&a, &la) == 0 && a.sin_family == AF_INET &&
		    ntohs(a.sin_port) == port && getsockname(fd, (struct sockaddr *)&b, &lb) == 0)
			return ntohs(b.sin_port);
	}
	return 0;
}

/*
 * tl_peer_rss on kernel TCP: each connection to an aimed-at ip:port is bound to a source
 * port the peer's RSS (dn's key, a 128-entry table round robin over 4 queues) puts on the
 * queue asked for; DPDK's own Toeplitz (through tl_steer_hash, checked against rte_softrss in
 * test_steer) says where.
 */
static void test_kernel_peer_rss_aims_the_source_port(void **state)
{
	struct kfx *fx = *state;
	uint8_t key[40];

	dn_rss_key_fill(key, sizeof(key));
	for (uint16_t q = 0; q < 4; q++) {
		uint16_t lp;

		assert_int_equal(tl_peer_rss(fx->tl, LO, fx->port, 128, 4, q), 0);
		fx->cli_connected = fx->accepted = 0;
		assert_int_equal(tl_connect(fx->tl, LO, fx->port, &cli_ops, fx, &fx->cli), 0);
		POLL_UNTIL(fx, fx->cli_connected == 1 && fx->accepted == 1);
		assert_int_equal(fx->cli_status, 0);
		lp = local_port_to(fx->port);
		assert_true(lp != 0);
		assert_int_equal(tl_steer_hash(key, LO, LO, lp, fx->port) % 128 % 4, q);
		assert_int_equal(tl_close(fx->cli), 0);
		POLL_UNTIL(fx, fx->srv_closed == q + 1);
		POLL_UNTIL(fx, local_port_to(fx->port) == 0);
	}
}

/* tl_peer_rss's table: refused arguments, replace, forget, full; kernel TCP has no RSS side. */
static void test_kernel_peer_rss_table(void **state)
{
	struct kfx *fx = *state;
	const struct tl_peer_rss *e;
	uint32_t r;
	uint16_t nq, q;

	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 128, 2, 2), -EINVAL); /* queue >= queues */
	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 128, 0, 0), -EINVAL);
	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 65537, 2, 0), -EINVAL);
	assert_null(tl_peer_rss_find(fx->tl, 1, 80));
	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 128, 2, 1), 0);
	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 512, 4, 3), 0); /* replaces */
	e = tl_peer_rss_find(fx->tl, 1, 80);
	assert_non_null(e);
	assert_int_equal(e->reta_size, 512);
	assert_int_equal(e->queues, 4);
	assert_int_equal(e->queue, 3);
	assert_null(tl_peer_rss_find(fx->tl, 1, 81));
	for (uint32_t i = 1; i < TL_PEER_RSS_MAX; i++)
		assert_int_equal(tl_peer_rss(fx->tl, 2, (uint16_t)i, 128, 2, 0), 0);
	assert_int_equal(tl_peer_rss(fx->tl, 3, 1, 128, 2, 0), -ENOSPC);
	assert_int_equal(tl_peer_rss(fx->tl, 1, 80, 0, 0, 0), 0); /* forgets */
	assert_null(tl_peer_rss_find(fx->tl, 1, 80));
	assert_non_null(tl_peer_rss_find(fx->tl, 2, TL_PEER_RSS_MAX - 1));
	assert_int_equal(tl_peer_rss(fx->tl, 3, 1, 128, 2, 1), 0);
	assert_int_equal(tl_rss_layout(fx->tl, &r, &nq, &q), -ENOTSUP);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define TS(f) cmocka_unit_test_setup_teardown(f, setup_small, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_kernel_echo_many_messages),
		T(test_kernel_peer_rss_table),
		T(test_kernel_peer_rss_aims_the_source_port),
		T(test_kernel_round_end_sends_leave_in_the_round),
		T(test_kernel_large_messages),
		T(test_kernel_connection_refused),
		T(test_kernel_peer_close),
		T(test_kernel_close_cancels_pending_sends),
		T(test_kernel_malformed_stream_refused),
		T(test_kernel_abort_resets_close_ends_stream),
		T(test_kernel_unknown_version_error_reply),
		TS(test_kernel_body_limit_refused),
		T(test_kernel_eof_inside_message),
		cmocka_unit_test_setup_teardown(test_kernel_rx_buffers_exhausted, setup_tiny_rx, teardown),
		T(test_kernel_close_from_callback_stops_delivery),
		TS(test_kernel_send_limits),
		TS(test_kernel_tx_pending_counts_until_done),
		T(test_kernel_send_copy),
		T(test_kernel_push_writes_before_poll),
		TS(test_kernel_max_conns_refused),
		T(test_kernel_hold_past_callback),
		T(test_kernel_rx_pause_backs_up_the_sender),
		cmocka_unit_test(test_kernel_config_checked),
		cmocka_unit_test(test_kernel_spin_within_timeout),
		cmocka_unit_test(test_kernel_short_poll_ends_on_time),
	};

	return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
