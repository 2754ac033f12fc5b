/*
 * test_tcp_hostile.c — TCP-lite against peers that hold on to resources on a fake link:
 * a zero window whose owner vanishes (probes give up), a peer that dies silently
 * (keepalive), out-of-order data that pins packets. Every test ends with fl_fini
 * reporting no leaked packet, frame or send buffer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tcp_fakelink.h"

#define MS 1000000ull

static int setup(void **state)
{
	return fl_test_setup(state, 23);
}

static int teardown(void **state)
{
	return fl_test_teardown(state);
}

static bool from_0(void *arg, const struct fl_seg *g)
{
	(void)arg;
	return g->from == 0;
}

/* The receiver's window is (as good as) closed: less than a segment left. */
static bool window_closed(void *arg)
{
	struct fl_link *l = arg;
	struct fl_seg g;

	return fl_count(l, 0, 0, TL_TCP_ACK, 0, &g) && g.wnd < 1460u;
}

/*
 * The receiver's window closes and stays closed. While it answers the probes the sender
 * waits as long as it takes (RFC 9293 3.8.6.1); once the receiver vanishes, the probes
 * go unanswered and count toward the retransmission limit: the connection ends with
 * -ETIMEDOUT instead of holding its send queue forever.
 */
static void test_tcp_zero_window_probes_give_up_when_unanswered(void **state)
{
	struct fl_link *l = *state;
	static uint8_t src[200000];
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	l->app[0].auto_recved = false;
	l->app[1].src = src;
	l->app[1].src_len = sizeof(src);
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, 100 * MS, window_closed, l));
	fl_run(l, 60000 * MS);
	assert_int_equal(l->app[1].closed, 0); /* answered: wait */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_true(st.probes > 12);
	l->filter = from_0;
	fl_run(l, 60000 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, -ETIMEDOUT);
	l->app[1].src = NULL;
}

static bool from_1(void *arg, const struct fl_seg *g)
{
	(void)arg;
	return g->from == 1;
}

/*
 * Keepalive (a knob, off by default): a quiet connection whose peer is alive stays up,
 * its probes answered; once the peer's host dies silently, keepalive_probes unanswered
 * probes end the connection with -ETIMEDOUT (a PS notices the worker is gone).
 */
static void test_tcp_keepalive_detects_silent_peer(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg a, b;
	struct tl_tcp_stats st;

	fl_fini(l);
	fl_cfg(&a);
	fl_cfg(&b);
	a.keepalive_ns = 100 * MS;
	a.keepalive_intvl_ns = 600 * MS;
	a.keepalive_probes = 3;
	assert_int_equal(fl_init(l, &a, &b, 24), 0);
	assert_int_equal(fl_open_pair(l), 0);
	fl_run(l, 2000 * MS);
	assert_int_equal(l->app[0].closed, 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_true(st.probes >= 3);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.probes, 0); /* off by default */
	l->filter = from_1;
	fl_run(l, 100 * MS + 4 * 600 * MS + 10 * MS);
	assert_int_equal(l->app[0].closed, 1);
	assert_int_equal(l->app[0].closed_reason, -ETIMEDOUT);
	/* Had the peer only lost its way back, the RST tells it. */
	assert_int_equal(l->app[1].closed_reason, -ECONNRESET);
}

/* Node 0's view of one of its connections, from the last segment it sent on it. */
struct view {
	uint32_t rcv_nxt, snd_nxt;
	uint16_t sport, dport; /* as node 1 sends: its port, then node 0's */
};

static void conn_view(struct fl_link *l, struct tl_tcp_conn *c, struct view *v)
{
	struct tl_tcp_tuple t;

	tl_tcp_conn_tuple(c, &t);
	for (uint32_t i = l->nlog; i-- > 0;) {
		const struct fl_seg *g = &l->log[i % FL_LOG_MAX];
		if (g->from == 0 && (g->flags & TL_TCP_ACK) &&
		    (uint16_t)(g->hdr[0] << 8 | g->hdr[1]) == t.lport &&
		    (uint16_t)(g->hdr[2] << 8 | g->hdr[3]) == t.rport) {
			v->rcv_nxt = g->ack;
			v->snd_nxt = g->seq + g->len + !!(g->flags & (TL_TCP_SYN | TL_TCP_FIN));
			v->sport = t.rport;
			v->dport = t.lport;
			return;
		}
	}
	fail();
}

static bool drop_all(void *arg, const struct fl_seg *g)
{
	(void)arg;
	(void)g;
	return true;
}

static uint64_t pkts_held(const struct fl_link *l)
{
	return l->holds - l->releases;
}

/*
 * Peers that send one-byte segments past a hole, each pinning a whole packet buffer: the
 * out-of-order queue is bounded by bytes, each held packet counted as at least an MSS
 * (a one-byte segment pins a buffer all the same), per connection by the receive buffer
 * and per stack by cfg.ooo_mem, pruned from the top (the furthest from the hole) when
 * full. Filling the hole still drains what was kept, in order.
 */
static void test_tcp_ooo_queue_bounded_by_bytes(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn *conns[4];
	struct tl_tcp_cfg a;
	struct view v;
	uint8_t seg[64], byte = 'x';
	uint64_t per_conn;

	fl_fini(l);
	fl_cfg(&a);
	a.rcv_buf = 32u * 1460u;
	a.ooo_max = 256;
	a.ooo_mem = 48u * 1460u;
	assert_int_equal(fl_init(l, &a, NULL, 25), 0);
	assert_int_equal(fl_listen(l, 0, 80), 0);
	for (int k = 0; k < 4; k++) {
		assert_int_equal(fl_connect(l, 1, 0, 80), 0);
		fl_run(l, 2 * MS);
		assert_int_equal(l->app[0].accepted, k + 1);
		conns[k] = l->app[0].conn;
	}
	l->filter = drop_all;
	/* One connection: bounded by its receive buffer, not by ooo_max entries. */
	conn_view(l, conns[0], &v);
	for (uint32_t i = 0; i < 200; i++)
		fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 1 + 2 * i, v.snd_nxt,
					      TL_TCP_ACK, 1000, NULL, 0, &byte, 1), 0);
	per_conn = pkts_held(l);
	assert_true(per_conn >= 8 && per_conn <= 32);
	/* More connections: the stack's bound holds for all of them together. */
	for (int k = 1; k < 4; k++) {
		conn_view(l, conns[k], &v);
		for (uint32_t i = 0; i < 200; i++)
			fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 1 + 2 * i,
						      v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, &byte, 1), 0);
	}
	assert_true(pkts_held(l) <= 48);
	/* The hole fills on the first connection: what it kept is delivered. */
	conn_view(l, conns[0], &v);
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000,
				      NULL, 0, &byte, 1), 0);
	assert_true(pkts_held(l) < 48);
}

/*
 * Without timestamps RTT samples come from timing one segment (Karn). The receiver closes
 * its window while the timed segment is in flight: the sender pulls snd_nxt back and
 * will send that segment again, so its timing is void. The ACK after the stall must not
 * be taken as a sample, or the RTT (and the RTO) take in the whole stall.
 */
static void test_tcp_zero_window_stall_not_sampled_as_rtt(void **state)
{
	struct fl_link *l = *state;
	static uint8_t src[3 * 1460];
	struct tl_tcp_conn_stats cs;
	struct tl_tcp_cfg a;
	uint8_t seg[64];
	struct view v;

	fl_fini(l);
	fl_cfg(&a);
	a.timestamps = false;
	assert_int_equal(fl_init(l, &a, NULL, 26), 0);
	assert_int_equal(fl_open_pair(l), 0);
	fl_run(l, 5 * MS);
	conn_view(l, l->app[0].conn, &v);
	l->filter = from_0;
	assert_int_equal(tl_tcp_send(l->app[1].conn, src, sizeof(src), NULL, NULL, l->now), 0);
	/* The receiver shrinks its window to zero before acknowledging anything. */
	fl_inject(l, 1, seg, fl_build(seg, v.dport, v.sport, v.snd_nxt, v.rcv_nxt, TL_TCP_ACK, 0,
				      NULL, 0, NULL, 0), 0);
	fl_run(l, 500 * MS);
	l->filter = NULL;
	fl_run(l, 3000 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(src));
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.srtt_us < 10000);
}

/*
 * A zero-window probe is an old sequence number, an "unacceptable" segment, but the
 * probing sender needs the answer to learn when the window opens: the replies are not
 * held to the two a second that unacceptable pure ACKs get.
 */
static void test_tcp_zero_window_probes_each_answered(void **state)
{
	struct fl_link *l = *state;
	static uint8_t src[40 * 1448];
	struct tl_tcp_stats st0, st1;
	struct tl_tcp_cfg a;
	uint32_t mark, replies;

	fl_fini(l);
	fl_cfg(&a);
	a.rcv_buf = sizeof(src); /* whole segments, no scaling: the window reaches 0 exactly */
	assert_int_equal(fl_init(l, &a, NULL, 29), 0);
	assert_int_equal(fl_open_pair(l), 0);
	l->app[0].auto_recved = false;
	l->app[1].src = src;
	l->app[1].src_len = sizeof(src) + 1000;
	fl_app_pump(&l->app[1]);
	fl_run(l, 5 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(src));
	mark = l->nlog;
	tl_tcp_stack_get_stats(l->stack[1], &st0);
	fl_run(l, 300 * MS);
	tl_tcp_stack_get_stats(l->stack[1], &st1);
	replies = fl_count(l, mark, 0, TL_TCP_ACK, 0, NULL);
	assert_true(st1.probes - st0.probes >= 5);
	assert_int_equal(replies, st1.probes - st0.probes);
	l->app[1].src = NULL;
}

/*
 * SYN cookies (RFC 4987): spoofed SYNs fill the listener's backlog; a legitimate client's
 * SYN then gets a cookie SYN-ACK instead of being dropped, and its ACK makes the
 * connection at once, with the options its SYN offered (carried in the TSval's low
 * bits). An ACK with a wrong cookie makes nothing.
 */
static void test_tcp_syn_cookies_open_connection_when_backlog_full(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[50000];
	struct tl_tcp_conn_stats cs;
	struct tl_tcp_listener *lis;
	struct tl_tcp_stats st;
	uint8_t seg[64];

	assert_int_equal(tl_tcp_listen(l->stack[0], 0, 80, 2, &fl_app_cbs, &l->app[0], &lis), 0);
	l->filter = drop_all;
	for (uint16_t p = 0; p < 5; p++)
		fl_inject(l, 0, seg, fl_build(seg, (uint16_t)(3000 + p), 80, 777u * p, 0, TL_TCP_SYN,
					      1000, NULL, 0, NULL, 0), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 2);
	/* A forged ACK for a made-up cookie: no connection, a RST. */
	fl_inject(l, 0, seg, fl_build(seg, 3004, 80, 4u * 777u + 1u, 0x12345678u, TL_TCP_ACK, 1000, NULL, 0,
				      NULL, 0), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 2);
	l->filter = NULL;
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].connected, 1);
	assert_int_equal(l->app[0].accepted, 1);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_true(cs.ts && cs.ws && cs.sack && cs.ecn);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.syncookies_sent, 4);
	assert_int_equal(st.syncookies_ok, 1);
	assert_int_equal(st.syncookies_bad, 1);
	fl_fill_random(buf, sizeof(buf), 30);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[0].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	fl_run(l, 50 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
	assert_int_equal(l->app[1].rx_len, sizeof(buf));
	assert_memory_equal(l->app[0].rx, buf, sizeof(buf));
	/* The spoofed SYNs' embryos give up without a RST to their (spoofed) sources. */
	tl_tcp_stack_get_stats(l->stack[0], &st);
	fl_run(l, 60000 * MS);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
	{
		struct tl_tcp_stats st2;
		tl_tcp_stack_get_stats(l->stack[0], &st2);
		assert_int_equal(st2.rst_out, st.rst_out);
	}
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_zero_window_probes_give_up_when_unanswered),
		T(test_tcp_keepalive_detects_silent_peer),
		T(test_tcp_ooo_queue_bounded_by_bytes),
		T(test_tcp_zero_window_stall_not_sampled_as_rtt),
		T(test_tcp_zero_window_probes_each_answered),
		T(test_tcp_syn_cookies_open_connection_when_backlog_full),
	};

	return cmocka_run_group_tests_name("tcp_hostile", tests, NULL, NULL);
}
