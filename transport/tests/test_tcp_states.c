/*
 * test_tcp_states.c — TCP-lite state machine corners on a fake link: half close with
 * data still flowing, the FIN_WAIT_2 bound, a FIN that overtakes data, PAWS, a SYN-ACK
 * that acknowledges the wrong thing, RSTs aimed at SYN_SENT, listener teardown, port
 * and send-buffer limits. Every test ends with fl_fini reporting no leaks.
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
	return fl_test_setup(state, 7);
}

static int teardown(void **state)
{
	return fl_test_teardown(state);
}

static bool drop_all(void *arg, const struct fl_seg *g)
{
	(void)arg;
	(void)g;
	return true;
}

static bool both_closed(void *arg)
{
	struct fl_link *l = arg;

	return l->app[0].closed && l->app[1].closed;
}

static void test_tcp_half_close_peer_keeps_sending(void **state)
{
	struct fl_link *l = *state;
	uint8_t *big = malloc(150000);
	static uint8_t small[3000];

	assert_non_null(big);
	fl_fill_random(big, 150000, 3);
	fl_fill_random(small, sizeof(small), 4);
	assert_int_equal(fl_open_pair(l), 0);
	/* The client sends a little and closes its side at once. */
	l->app[1].src = small;
	l->app[1].src_len = sizeof(small);
	l->app[1].close_after_src = true;
	fl_app_pump(&l->app[1]);
	fl_run(l, 5 * MS);
	assert_int_equal(l->app[0].eof, 1);
	assert_int_equal(l->app[0].rx_len, sizeof(small));
	/* The server, in CLOSE_WAIT, still streams to the half-closed client. */
	l->app[0].src = big;
	l->app[0].src_len = 150000;
	l->app[0].close_after_src = true;
	fl_app_pump(&l->app[0]);
	assert_true(fl_run_until(l, 1000 * MS, both_closed, l));
	assert_int_equal(l->app[1].rx_len, 150000);
	assert_memory_equal(l->app[1].rx, big, 150000);
	assert_memory_equal(l->app[0].rx, small, sizeof(small));
	assert_int_equal(l->app[0].closed_reason, 0);
	assert_int_equal(l->app[1].closed_reason, 0);
	l->app[0].src = l->app[1].src = NULL;
	free(big);
}

static void test_tcp_fin_wait_2_bounded(void **state)
{
	struct fl_link *l = *state;

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	fl_run(l, 10 * MS);
	assert_int_equal(l->app[0].eof, 1); /* the server never closes its side */
	assert_int_equal(l->app[1].closed, 0);
	fl_run(l, 61000 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, -ETIMEDOUT);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
	/* The server's late FIN finds nobody and is answered with a RST. */
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	fl_run(l, 10 * MS);
	assert_int_equal(l->app[0].closed, 1);
	assert_int_equal(l->app[0].closed_reason, -ECONNRESET);
}

struct view {
	uint32_t rcv_nxt, snd_nxt;
	uint16_t sport, dport;
};

static void server_view(struct fl_link *l, struct view *v)
{
	struct fl_seg g;
	struct tl_tcp_tuple t;

	assert_true(fl_count(l, 0, 0, TL_TCP_ACK, 0, &g) > 0);
	v->rcv_nxt = g.ack;
	v->snd_nxt = g.seq + g.len + !!(g.flags & (TL_TCP_SYN | TL_TCP_FIN));
	tl_tcp_conn_tuple(l->app[0].conn, &t);
	v->sport = t.rport;
	v->dport = t.lport;
}

static void test_tcp_fin_overtaking_data_waits_for_it(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[128], data[20] = "abcdefghijklmnopqrs";
	struct view v;
	uint32_t n;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all;
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 10, v.snd_nxt, TL_TCP_ACK | TL_TCP_FIN, 1000,
		     NULL, 0, data + 10, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].eof, 0);
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, data, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 20);
	assert_memory_equal(l->app[0].rx, data, 20);
	assert_int_equal(l->app[0].eof, 1);
	{
		struct tl_tcp_conn_stats cs;
		tl_tcp_conn_get_stats(l->app[0].conn, &cs);
		assert_int_equal(cs.state, TL_TCP_CLOSE_WAIT);
	}
}

/*
 * A FIN fixes the end of the stream: bytes that claim to lie past it (a confused or
 * hostile peer) are refused, even when they sit in the out-of-order queue behind the
 * FIN, and the application sees end-of-stream after the last byte before the FIN.
 */
static void test_tcp_data_after_fin_never_delivered(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[128], data[40] = "abcdefghijklmnopqrstuvwxyz0123456789ABC";
	struct tl_tcp_conn_stats cs;
	struct view v;
	uint32_t n;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all;
	/* FIN after byte 20, out of order (bytes 0..9 missing)... */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 10, v.snd_nxt, TL_TCP_ACK | TL_TCP_FIN, 1000,
		     NULL, 0, data + 10, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	/* ...then bytes 20..39, past the FIN, also out of order... */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 20, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
		     data + 20, 20);
	fl_inject(l, 0, seg, n, 0);
	/* ...and the hole: 20 bytes and end-of-stream, nothing more. */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, data, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].eof, 1);
	assert_int_equal(l->app[0].rx_len, 20);
	assert_memory_equal(l->app[0].rx, data, 20);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_int_equal(cs.state, TL_TCP_CLOSE_WAIT);
	/* What node 0 acknowledges ends at the FIN. */
	{
		struct fl_seg g;
		assert_true(fl_count(l, 0, 0, TL_TCP_ACK, 0, &g) > 0);
		assert_int_equal(g.ack, v.rcv_nxt + 21);
	}
}

/*
 * A second FIN that claims an earlier end than the queued one (a confused or hostile peer):
 * the queued FIN stands, and the segment's bytes are queued as they are, never stretched to
 * the queued FIN's position (which would hand the application bytes from past the end of
 * the received packet).
 */
static void test_tcp_earlier_fin_behind_queued_fin(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[160], data[100];
	struct view v;
	uint32_t n;

	fl_fill_random(data, sizeof(data), 11);
	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all;
	/* A bare FIN at byte 100, out of order (bytes 0..99 missing)... */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 100, v.snd_nxt, TL_TCP_ACK | TL_TCP_FIN, 1000,
		     NULL, 0, NULL, 0);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	/* ...bytes 16..65 with a FIN after them, before the queued one... */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 16, v.snd_nxt, TL_TCP_ACK | TL_TCP_FIN, 1000,
		     NULL, 0, data + 16, 50);
	fl_inject(l, 0, seg, n, 0);
	/* ...then bytes 0..31: 66 bytes in order, no end of stream (66..99 are still owed). */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, data, 32);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 66);
	assert_memory_equal(l->app[0].rx, data, 66);
	assert_int_equal(l->app[0].eof, 0);
	/* The rest up to the queued FIN: the stream ends there. */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 66, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
		     data + 66, 34);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 100);
	assert_memory_equal(l->app[0].rx, data, 100);
	assert_int_equal(l->app[0].eof, 1);
}

static void test_tcp_paws_drops_old_timestamp(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100];
	uint8_t seg[128], opt[12] = { 1, 1, 8, 10 }, data[10] = "oldoldold";
	struct tl_tcp_stats st;
	struct fl_seg g;
	struct view v;
	uint32_t ts, ecr;

	assert_int_equal(fl_open_pair(l), 0);
	fl_run(l, 50 * MS);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	fl_run(l, 5 * MS);
	assert_true(fl_count(l, 0, 1, 0, 0, &g) > 0);
	assert_true(fl_seg_ts(&g, &ts, &ecr));
	assert_true(ts > 1000);
	server_view(l, &v);
	l->filter = drop_all;
	/* Same sequence space, but a timestamp from long before: an old duplicate. */
	opt[4] = (uint8_t)((ts - 1000) >> 24);
	opt[5] = (uint8_t)((ts - 1000) >> 16);
	opt[6] = (uint8_t)((ts - 1000) >> 8);
	opt[7] = (uint8_t)(ts - 1000);
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, opt,
				      12, data, 9), 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_window, 1);
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * A spoofed in-window segment whose ACK is refused (it acknowledges data never sent)
 * carries a TSval far ahead. Refused, it must not move TS.Recent either (Linux updates
 * it after ACK validation for this reason): else PAWS drops every genuine segment after.
 */
static void test_tcp_refused_ack_leaves_ts_recent_alone(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[3000];
	uint8_t seg[128], opt[12] = { 1, 1, 8, 10 }, data[10] = "spoofed!!";
	struct tl_tcp_stats st;
	struct fl_seg g;
	struct view v;
	uint32_t ts, ecr;

	assert_int_equal(fl_open_pair(l), 0);
	assert_true(fl_count(l, 0, 1, 0, 0, &g) > 0);
	assert_true(fl_seg_ts(&g, &ts, &ecr));
	server_view(l, &v);
	l->filter = drop_all;
	put_be32(opt + 4, ts + 0x40000000u);
	put_be32(opt + 8, ecr);
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt + 100000u, TL_TCP_ACK,
				      1000, opt, 12, data, 9), 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_bad_ack, 1);
	assert_int_equal(l->app[0].rx_len, 0);
	/* The genuine peer goes on: its segments are not PAWS-dropped. */
	l->filter = NULL;
	fl_fill_random(buf, sizeof(buf), 9);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	fl_run(l, 50 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
	assert_memory_equal(l->app[0].rx, buf, sizeof(buf));
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_window, 0);
}

static bool from_0(void *arg, const struct fl_seg *g)
{
	(void)arg;
	return g->from == 0;
}

static bool rto_fired_1(void *arg)
{
	struct fl_link *l = arg;
	struct tl_tcp_stats st;

	tl_tcp_stack_get_stats(l->stack[1], &st);
	return st.rto_fired > 0;
}

/*
 * The peer holds every byte sent but its ACKs are lost: an RTO pulls snd_nxt back. The
 * abort's RST must carry snd_max, the peer's RCV.NXT: at snd_nxt it lies below the
 * peer's window and an RFC 5961 receiver drops it without a word (a Linux reader
 * blocked in read() hangs).
 */
static void test_tcp_abort_rst_at_snd_max_after_rto(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[5 * 1448];
	struct tl_tcp_conn_stats cs;
	struct fl_seg g;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = from_0;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	assert_true(fl_run_until(l, 100 * MS, rto_fired_1, l));
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.snd_rewound > 0); /* snd_nxt below snd_max: the case under test */
	mark = l->nlog;
	tl_tcp_abort(l->app[1].conn);
	assert_int_equal(fl_count(l, mark, 1, TL_TCP_RST, 0, &g), 1);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].closed, 1);
	assert_int_equal(l->app[0].closed_reason, -ECONNRESET);
}

/*
 * Segments PAWS refuses are answered with an ACK (RFC 7323 5.3), but out of the same
 * per-connection budget as challenge ACKs: a flood of stale timestamps gets a bounded
 * number of ACKs, not one each.
 */
static void test_tcp_paws_rejects_answered_within_ack_budget(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[128], opt[12] = { 1, 1, 8, 10 }, data[10] = "oldoldold";
	struct fl_seg g;
	struct view v;
	uint32_t ts, ecr, mark, acks;

	assert_int_equal(fl_open_pair(l), 0);
	fl_run(l, 50 * MS);
	assert_true(fl_count(l, 0, 1, 0, 0, &g) > 0);
	assert_true(fl_seg_ts(&g, &ts, &ecr));
	server_view(l, &v);
	l->filter = drop_all;
	put_be32(opt + 4, ts - 1000);
	mark = l->nlog;
	for (int i = 0; i < 500; i++)
		fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK,
					      1000, opt, 12, data, 9), 0);
	acks = fl_count(l, mark, 0, TL_TCP_ACK, 0, NULL);
	assert_true(acks >= 1 && acks < 30);
	assert_int_equal(l->app[0].rx_len, 0);
}

/*
 * RFC 6928's initial window is min(10 MSS, max(2 MSS, 14600)): a jumbo MSS gets two
 * segments, not ten. The MSS is known only from the peer's SYN: a simultaneous open sizes
 * the window again once it has it, as the active open does on the SYN-ACK.
 */
static void test_tcp_initial_window_capped_and_sized_by_peer_mss(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn_stats cs;
	struct tl_tcp_cfg a, b;

	fl_fini(l);
	fl_cfg(&a);
	a.mss = 8960;
	a.rcv_buf = 1u << 20;
	assert_int_equal(fl_init(l, &a, NULL, 27), 0);
	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_int_equal(cs.cwnd, 2u * (8960u - 12u));
	assert_int_equal(fl_fini(l), 0);

	fl_cfg(&a);
	fl_cfg(&b);
	b.mss = 536; /* node 1 can take only small segments */
	assert_int_equal(fl_init(l, &a, &b, 27), 0);
	assert_int_equal(fl_connect(l, 0, 5000, 6000), 0);
	assert_int_equal(fl_connect(l, 1, 6000, 5000), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].connected, 1);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_int_equal(cs.cwnd, 10u * (536u - 12u));
}

/*
 * The receiver's application reads nothing: the sender's data fills the window exactly
 * and its FIN meets a zero window. A bare FIN at RCV.NXT takes no buffer space and is
 * taken (as Linux does), or the sender resends it until the retransmission limit and a
 * graceful close between two stacks ends in a RST.
 */
static void test_tcp_fin_into_zero_window_accepted(void **state)
{
	struct fl_link *l = *state;
	static uint8_t src[40 * 1448];
	struct tl_tcp_conn_stats cs;
	struct tl_tcp_cfg a;

	fl_fini(l);
	fl_cfg(&a);
	a.rcv_buf = sizeof(src); /* whole segments, no scaling: the window reaches 0 exactly */
	assert_int_equal(fl_init(l, &a, NULL, 28), 0);
	assert_int_equal(fl_open_pair(l), 0);
	l->app[0].auto_recved = false;
	l->app[1].src = src;
	l->app[1].src_len = sizeof(src);
	fl_app_pump(&l->app[1]);
	fl_run(l, 10 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(src));
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	fl_run(l, 30000 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(src));
	assert_int_equal(l->app[0].eof, 1);
	assert_int_equal(l->app[1].closed, 0);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_int_equal(cs.state, TL_TCP_FIN_WAIT_2);
	l->app[1].src = NULL;
}

/*
 * RFC 6191: when the old connection used timestamps, only a SYN whose timestamp proves
 * it later may end TIME_WAIT; one carrying none cannot prove anything and is dropped
 * (the sequence-number test is for connections that never had timestamps).
 */
static void test_tcp_time_wait_kept_against_syn_without_timestamp(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_tuple t;
	uint8_t seg[64];
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_tuple(l->app[1].conn, &t);
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, both_closed, l));
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
	l->filter = drop_all;
	mark = l->nlog;
	/* A sequence number far above the old one, but no timestamp. */
	fl_inject(l, 0, seg, fl_build(seg, t.lport, 80, 0x7fffffffu + l->log[0].seq, 0, TL_TCP_SYN,
				      1000, NULL, 0, NULL, 0), 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_SYN, 0, NULL), 0);
	assert_int_equal(l->app[0].accepted, 1);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
}

/*
 * FIN_WAIT_2's bound is for a peer that never sends its FIN, not for one still sending:
 * a half-closed connection whose peer keeps streaming (slowly) past the bound stays up,
 * each arriving segment pushing the bound out (Linux bounds only orphaned sockets).
 */
static void test_tcp_fin_wait_2_bound_refreshed_by_data(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100];

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	fl_run(l, 10 * MS);
	for (int i = 0; i < 90; i++) {
		assert_int_equal(l->app[1].closed, 0);
		assert_int_equal(tl_tcp_send(l->app[0].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
		fl_run(l, 1000 * MS);
	}
	assert_int_equal(l->app[1].closed, 0);
	assert_int_equal(l->app[1].rx_len, 90 * sizeof(buf));
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	fl_run(l, 10 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, 0);
}

static bool data_from_1(void *arg, const struct fl_seg *g)
{
	(void)arg;
	return g->from == 1 && g->len > 0;
}

/*
 * A graceful close whose sends the application has been told are over (the transport
 * completes them at the close): tl_tcp_conn_own_payload moves what is still queued into
 * copies of the core's own, completing the caller's buffers at once. The caller may then
 * reuse its memory: the peer still gets the original bytes, then the FIN.
 */
static void test_tcp_own_payload_sends_copies_after_close(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[20000], orig[20000];

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 31);
	memcpy(orig, buf, sizeof(buf));
	l->filter = data_from_1; /* sent, never acknowledged */
	l->app[1].src = buf;
	l->app[1].src_len = sizeof(buf);
	fl_app_pump(&l->app[1]);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].sends_done, 0);
	assert_int_equal(tl_tcp_conn_own_payload(l->app[1].conn), 0);
	assert_int_equal(l->app[1].sends_done, l->app[1].sends);
	assert_int_equal(l->app[1].sends_failed, l->app[1].sends);
	memset(buf, 0, sizeof(buf)); /* the application reuses its memory */
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	l->filter = NULL;
	fl_run(l, 100 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(orig));
	assert_memory_equal(l->app[0].rx, orig, sizeof(orig));
	assert_int_equal(l->app[0].eof, 1);
	l->app[1].src = NULL;
}

static void test_tcp_synack_with_wrong_ack_gets_rst(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_tuple t;
	uint8_t seg[64];
	struct fl_seg g, syn;
	uint32_t mark;

	l->filter = drop_all;
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, 0, &syn), 1);
	tl_tcp_conn_tuple(l->app[1].conn, &t);
	mark = l->nlog;
	fl_inject(l, 1, seg, fl_build(seg, 80, t.lport, 5000, syn.seq + 1000, TL_TCP_SYN | TL_TCP_ACK,
				      1000, NULL, 0, NULL, 0), 0);
	assert_int_equal(fl_count(l, mark, 1, TL_TCP_RST, 0, &g), 1);
	assert_int_equal(g.seq, syn.seq + 1000);
	assert_int_equal(l->app[1].connected, 0);
	assert_int_equal(l->app[1].closed, 0); /* still trying */
	/* A RST whose ACK does not match our SYN is ignored too. */
	fl_inject(l, 1, seg, fl_build(seg, 80, t.lport, 0, syn.seq + 7, TL_TCP_RST | TL_TCP_ACK, 0, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(l->app[1].closed, 0);
	/* The real handshake still completes. */
	l->filter = NULL;
	assert_int_equal(fl_listen(l, 0, 80), 0);
	fl_run(l, 100 * MS);
	assert_int_equal(l->app[1].connected, 1);
	assert_int_equal(l->app[0].accepted, 1);
}

static void test_tcp_unlisten_resets_embryonic(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_listener *lis;
	uint8_t seg[64];
	uint32_t mark;

	assert_int_equal(tl_tcp_listen(l->stack[0], 0, 80, 0, &fl_app_cbs, &l->app[0], &lis), 0);
	assert_int_equal(tl_tcp_listen(l->stack[0], 0, 80, 0, &fl_app_cbs, &l->app[0], &lis),
			 -EADDRINUSE);
	l->filter = drop_all;
	fl_inject(l, 0, seg, fl_build(seg, 3333, 80, 42, 0, TL_TCP_SYN, 1000, NULL, 0, NULL, 0), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
	mark = l->nlog;
	tl_tcp_unlisten(lis);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_RST, 0, NULL), 1);
	/* A SYN now finds no listener: RST. */
	mark = l->nlog;
	fl_inject(l, 0, seg, fl_build(seg, 3334, 80, 42, 0, TL_TCP_SYN, 1000, NULL, 0, NULL, 0), 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_RST | TL_TCP_ACK, 0, NULL), 1);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
}

static void test_tcp_ports_unique_and_in_use_refused(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_tuple t = { .laddr = l->addr[1], .raddr = l->addr[0], .rport = 80 };
	struct tl_tcp_conn *c[10];
	uint16_t seen[10];

	l->filter = drop_all;
	for (int i = 0; i < 10; i++) {
		struct tl_tcp_tuple got;
		assert_int_equal(tl_tcp_connect(l->stack[1], &t, &fl_app_cbs, &l->app[1], l->now, &c[i]), 0);
		tl_tcp_conn_tuple(c[i], &got);
		assert_true(got.lport >= 49152);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(seen[j], got.lport);
		seen[i] = got.lport;
	}
	t.lport = seen[3];
	assert_int_equal(tl_tcp_connect(l->stack[1], &t, &fl_app_cbs, &l->app[1], l->now, &c[0]),
			 -EADDRINUSE);
	t.raddr = 0;
	assert_int_equal(tl_tcp_connect(l->stack[1], &t, &fl_app_cbs, &l->app[1], l->now, &c[0]), -EINVAL);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 10);
}

static void test_tcp_send_limits_then_space_returns(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg cfg;
	static uint8_t buf[1000];
	int ok = 0, rc = 0;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.max_sbufs = 8;
	cfg.snd_buf = 6000;
	assert_int_equal(fl_init(l, &cfg, NULL, 8), 0);
	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 7000, NULL, NULL, l->now), -EINVAL);
	while ((rc = tl_tcp_send(l->app[1].conn, buf, 1000, NULL, NULL, l->now)) == 0)
		ok++;
	assert_int_equal(rc, -ENOBUFS);
	assert_int_equal(ok, 6); /* snd_buf, not the 8 descriptors, ran out first */
	assert_int_equal(tl_tcp_send_space(l->app[1].conn), 0);
	fl_run(l, 5 * MS);
	assert_int_equal(tl_tcp_send_space(l->app[1].conn), 6000);
	/* Descriptors: 8 one-byte sends fit, the ninth does not. */
	for (ok = 0; ok < 8; ok++)
		assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 1, NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 1, NULL, NULL, l->now), -ENOBUFS);
	fl_run(l, 5 * MS);
	assert_int_equal(l->app[0].rx_len, 6008);
	assert_int_equal(tl_tcp_sbufs_in_use(l->stack[1]), 0);
}

static void test_tcp_full_table_recycles_time_wait(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg cfg;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.max_conns = 3;
	cfg.time_wait_ns = 10000ull * MS; /* long enough to still be there */
	assert_int_equal(fl_init(l, &cfg, NULL, 9), 0);
	assert_int_equal(fl_listen(l, 0, 80), 0);
	for (int i = 0; i < 6; i++) {
		l->app[0].closed = l->app[1].closed = 0;
		assert_int_equal(fl_connect(l, 1, 0, 80), 0);
		fl_run(l, 1 * MS);
		assert_int_equal(l->app[1].connected, i + 1);
		/* The client closes first, so its table fills with TIME_WAIT. */
		assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
		fl_run(l, 1 * MS);
		assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
		assert_true(fl_run_until(l, 10 * MS, both_closed, l));
	}
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 3);
	assert_int_equal(l->app[0].accepted, 6);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_half_close_peer_keeps_sending),
		T(test_tcp_fin_wait_2_bounded),
		T(test_tcp_fin_overtaking_data_waits_for_it),
		T(test_tcp_data_after_fin_never_delivered),
		T(test_tcp_earlier_fin_behind_queued_fin),
		T(test_tcp_paws_drops_old_timestamp),
		T(test_tcp_refused_ack_leaves_ts_recent_alone),
		T(test_tcp_abort_rst_at_snd_max_after_rto),
		T(test_tcp_paws_rejects_answered_within_ack_budget),
		T(test_tcp_initial_window_capped_and_sized_by_peer_mss),
		T(test_tcp_fin_into_zero_window_accepted),
		T(test_tcp_time_wait_kept_against_syn_without_timestamp),
		T(test_tcp_fin_wait_2_bound_refreshed_by_data),
		T(test_tcp_own_payload_sends_copies_after_close),
		T(test_tcp_synack_with_wrong_ack_gets_rst),
		T(test_tcp_unlisten_resets_embryonic),
		T(test_tcp_ports_unique_and_in_use_refused),
		T(test_tcp_send_limits_then_space_returns),
		T(test_tcp_full_table_recycles_time_wait),
	};

	return cmocka_run_group_tests_name("tcp_states", tests, NULL, NULL);
}
