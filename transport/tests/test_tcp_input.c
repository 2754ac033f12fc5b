/*
 * test_tcp_input.c — TCP-lite receive-side behaviour and hostile input on a fake link:
 * fast retransmit across sequence wraparound, zero (or too small) windows and probes,
 * reordering, duplicates and overlaps, RST in and out of window, challenge ACKs, malformed
 * headers, segments far outside the window, the SYN backlog bound, ECN/DCTCP, and a
 * long transfer over a lossy, reordering, duplicating, corrupting link.
 * Every test ends with fl_fini reporting no leaked packet, frame or send buffer.
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
	return fl_test_setup(state, 11);
}

static int teardown(void **state)
{
	return fl_test_teardown(state);
}

struct xfer {
	struct fl_link *l;
	size_t want[2];
};

static bool xfer_done(void *arg)
{
	struct xfer *x = arg;

	return x->l->app[0].rx_len >= x->want[0] && x->l->app[1].rx_len >= x->want[1];
}

static void transfer(struct fl_link *l, size_t n01, size_t n10, uint64_t max_ns, uint64_t seed)
{
	uint8_t *a = malloc(n01 + 1), *b = malloc(n10 + 1);
	struct xfer x = { .l = l, .want = { n10, n01 } };

	assert_non_null(a);
	assert_non_null(b);
	fl_fill_random(a, n01, seed);
	fl_fill_random(b, n10, seed + 1);
	l->app[0].src = a;
	l->app[0].src_len = n01;
	l->app[0].src_off = 0;
	l->app[1].src = b;
	l->app[1].src_len = n10;
	l->app[1].src_off = 0;
	fl_app_pump(&l->app[0]);
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, max_ns, xfer_done, &x));
	assert_int_equal(l->app[1].rx_len, n01);
	assert_int_equal(l->app[0].rx_len, n10);
	assert_memory_equal(l->app[1].rx, a, n01);
	assert_memory_equal(l->app[0].rx, b, n10);
	fl_run(l, 200 * MS);
	assert_int_equal(l->app[0].sends, l->app[0].sends_done);
	assert_int_equal(l->app[1].sends, l->app[1].sends_done);
	assert_int_equal(l->app[0].sends_failed + l->app[1].sends_failed, 0);
	l->app[0].src = l->app[1].src = NULL;
	free(a);
	free(b);
}

/* The receiver's (node 0's) view of the connection, from what it last sent. */
struct view {
	uint32_t rcv_nxt, snd_nxt;
	uint16_t sport, dport; /* as node 1 would send: its port, then 80 */
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

static bool drop_all(void *arg, const struct fl_seg *g)
{
	(void)arg;
	(void)g;
	return true;
}

/* ---- loss recovery across wraparound ------------------------------------------ */

struct drop_wrapped {
	int from;
	int remaining;
};

/* Drops the first data segment that starts just past the 2^32 wrap. */
static bool drop_wrapped_filter(void *arg, const struct fl_seg *g)
{
	struct drop_wrapped *d = arg;

	if (d->remaining > 0 && g->from == d->from && g->len > 0 && g->seq < 100000u) {
		d->remaining--;
		return true;
	}
	return false;
}

static void test_tcp_fast_retransmit_across_wraparound(void **state)
{
	struct fl_link *l = *state;
	struct drop_wrapped d = { .from = 1, .remaining = 1 };
	struct tl_tcp_stats st;

	l->iss_set[0] = l->iss_set[1] = true;
	l->iss[0] = 0xffffffffu - 30000u;
	l->iss[1] = 0xffffffffu - 20000u;
	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_wrapped_filter;
	l->filter_arg = &d;
	transfer(l, 200000, 300000, 2000 * MS, 21);
	assert_int_equal(d.remaining, 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_true(st.fast_retrans >= 1);
	assert_int_equal(st.rto_fired, 0);
	assert_true(st.dup_acks >= 3);
}

static void test_tcp_rto_across_wraparound(void **state)
{
	struct fl_link *l = *state;
	struct drop_wrapped d = { .from = 1, .remaining = 1 };
	struct tl_tcp_stats st;

	l->iss_set[1] = true;
	l->iss[1] = 0xffffffffu - 1000u;
	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_wrapped_filter;
	l->filter_arg = &d;
	transfer(l, 0, 1500, 500 * MS, 22); /* tail loss: too few segments for dupacks */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 1);
}

static void test_tcp_newreno_partial_acks_repair_several_losses(void **state)
{
	struct fl_link *l = *state;
	struct fl_drop_nth d = { .which = { 30, 34, 38, 0 } };
	struct tl_tcp_cfg cfg;
	struct tl_tcp_stats st;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.sack = false; /* NewReno alone (test_tcp_sack.c has the same losses with SACK) */
	assert_int_equal(fl_init(l, &cfg, NULL, 11), 0);
	assert_int_equal(fl_open_pair(l), 0);
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	transfer(l, 0, 200000, 2000 * MS, 31);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	/* One fast retransmit enters recovery, each partial ACK repairs the next hole. */
	assert_int_equal(st.fast_retrans, 3);
	assert_int_equal(st.rto_fired, 0);
}

/* ---- flow control ------------------------------------------------------------- */

static bool zero_window_seen(void *arg)
{
	struct fl_link *l = arg;
	struct fl_seg g;

	return fl_count(l, 0, 0, TL_TCP_ACK, 0, &g) && g.wnd == 0;
}

static void test_tcp_zero_window_probes_until_reopened(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t *src = malloc(300000);
	size_t got;

	assert_non_null(src);
	fl_fill_random(src, 300000, 5);
	assert_int_equal(fl_open_pair(l), 0);
	l->app[0].auto_recved = false; /* the server reads nothing: its window fills */
	l->app[1].src = src;
	l->app[1].src_len = 300000;
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, 100 * MS, zero_window_seen, l));
	got = l->app[0].rx_len;
	assert_true(got >= 60000 && got <= 65536);
	fl_run(l, 200 * MS);
	assert_int_equal(l->app[0].rx_len, got); /* nothing past the closed window */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_true(st.probes >= 3);
	/* Probes back off: far fewer than one per RTO floor over 200 ms. */
	assert_true(st.probes < 20);
	/* The reader catches up: the window reopens and the rest flows. */
	l->app[0].auto_recved = true;
	tl_tcp_recved(l->app[0].conn, (uint32_t)got, l->now);
	fl_run(l, 500 * MS);
	assert_int_equal(l->app[0].rx_len, 300000);
	assert_memory_equal(l->app[0].rx, src, 300000);
	fl_run(l, 50 * MS);
	l->app[1].src = NULL;
	free(src);
}

struct drop_acks_from_0 {
	bool on;
	uint32_t dropped;
};

static bool drop_acks_from_0_filter(void *arg, const struct fl_seg *g)
{
	struct drop_acks_from_0 *d = arg;

	if (!d->on || g->from != 0 || g->len != 0)
		return false;
	d->dropped++;
	return true;
}

/*
 * The reader stalls with less than a segment of window left: the sender holds its data
 * (silly window avoidance) with nothing in flight, so no ACK will come and no RTO runs.
 * The reader then catches up, and its window update is lost. Only a probe from the
 * sender (the persist timer, armed for a window too small to use as for a zero one)
 * learns that the window is open again.
 */
static void test_tcp_small_window_lost_update_recovered_by_probe(void **state)
{
	struct fl_link *l = *state;
	struct drop_acks_from_0 d = { 0 };
	struct tl_tcp_conn_stats cs;
	uint8_t *src = malloc(200000);
	size_t got;

	assert_non_null(src);
	fl_fill_random(src, 200000, 6);
	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_acks_from_0_filter;
	l->filter_arg = &d;
	l->app[0].auto_recved = false;
	l->app[1].src = src;
	l->app[1].src_len = 200000;
	fl_app_pump(&l->app[1]);
	fl_run(l, 20 * MS);
	got = l->app[0].rx_len;
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.snd_wnd > 0 && cs.snd_wnd < 1448u); /* open, but too small to use */
	assert_true(got > 60000 && got < 65536);
	d.on = true;            /* the window update below is lost */
	l->app[0].auto_recved = true;
	tl_tcp_recved(l->app[0].conn, (uint32_t)got, l->now);
	assert_true(d.dropped >= 1);
	d.on = false;
	fl_run(l, 1000 * MS);
	assert_int_equal(l->app[0].rx_len, 200000);
	assert_memory_equal(l->app[0].rx, src, 200000);
	fl_run(l, 50 * MS);
	l->app[1].src = NULL;
	free(src);
}

static void test_tcp_window_scaled_beyond_64k(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg cfg;
	struct tl_tcp_conn_stats cs;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.rcv_buf = 1u << 20;
	cfg.snd_buf = 2u << 20;
	assert_int_equal(fl_init(l, &cfg, NULL, 3), 0);
	l->delay_ns = 50000;
	assert_int_equal(fl_open_pair(l), 0);
	transfer(l, 0, 3u << 20, 2000 * MS, 23);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.snd_wnd > 65535u);
	assert_true(cs.cwnd > 65535u);
}

/* ---- reordering, duplicates, overlaps -------------------------------------------- */

static void test_tcp_reordering_delivered_in_order(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	l->reorder_ppm = 150000;
	transfer(l, 400000, 100000, 5000 * MS, 24);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_true(st.ooo_queued > 0);
}

static void test_tcp_duplicates_trimmed(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	l->dup_ppm = 200000;
	transfer(l, 400000, 100000, 5000 * MS, 25);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_true(st.dup_segs > 0);
}

static void test_tcp_overlapping_segments_trimmed(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[128], data[40];
	struct view v;
	uint32_t n;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all; /* node 1 never sent these: keep its replies off the wire */
	for (uint32_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)('A' + i);
	/* Out of order [20,30), then [15,25) overlapping it, then [0,18), then [10,40). */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 20, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
		     data + 20, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 15, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
		     data + 15, 10);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 0);
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, data, 18);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 30);
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt + 10, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
		     data + 10, 30);
	assert_int_equal(fl_inject(l, 0, seg, n, 0), 0);
	assert_int_equal(l->app[0].rx_len, 40);
	assert_memory_equal(l->app[0].rx, data, 40);
	/* A whole duplicate changes nothing. */
	n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0, data, 18);
	fl_inject(l, 0, seg, n, 0);
	assert_int_equal(l->app[0].rx_len, 40);
}

/* ---- RST and SYN handling (RFC 5961) -------------------------------------------- */

static void test_tcp_rst_exact_seq_resets(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[64];
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	assert_int_equal(fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, 0, TL_TCP_RST,
						      0, NULL, 0, NULL, 0), 0), 0);
	assert_int_equal(l->app[0].closed, 1);
	assert_int_equal(l->app[0].closed_reason, -ECONNRESET);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
}

static void test_tcp_rst_in_window_gets_challenge_ack(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[64];
	struct fl_seg g;
	struct view v;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	mark = l->nlog;
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 1000, 0, TL_TCP_RST, 0, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(l->app[0].closed, 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, TL_TCP_RST, &g), 1);
	assert_int_equal(g.ack, v.rcv_nxt);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.challenge_acks, 1);
	fl_run(l, 1 * MS); /* the real peer sees the challenge ACK and carries on */
	transfer(l, 10000, 10000, 100 * MS, 26);
}

static void test_tcp_rst_out_of_window_ignored(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[64];
	struct view v;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	mark = l->nlog;
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 0x40000000u, 0, TL_TCP_RST, 0,
				      NULL, 0, NULL, 0), 0);
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt - 5000u, 0, TL_TCP_RST, 0, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(l->app[0].closed, 0);
	assert_int_equal(l->nlog, mark); /* a RST is never answered */
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.challenge_acks, 0);
	assert_int_equal(st.drop_window + st.dup_segs, 2);
	transfer(l, 10000, 10000, 100 * MS, 27);
}

static void test_tcp_syn_in_established_gets_challenge_ack(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[64];
	struct view v;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	mark = l->nlog;
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 10, 0, TL_TCP_SYN, 1000, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(l->app[0].closed, 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, TL_TCP_SYN | TL_TCP_RST, NULL), 1);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.challenge_acks, 1);
	fl_run(l, 1 * MS);
	transfer(l, 5000, 5000, 100 * MS, 28);
}

static void test_tcp_ack_of_unsent_data_challenged(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[64], data[10] = "0123456789";
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all;
	/* Data that acknowledges bytes never sent is not accepted (RFC 5961 5.2). */
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt + 100000, TL_TCP_ACK,
				      1000, NULL, 0, data, 10), 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_bad_ack, 1);
	assert_int_equal(st.challenge_acks, 1);
	assert_int_equal(l->app[0].rx_len, 0);
}

/* Node 0's view of one of its connections, from the last segment it sent on it. */
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

static uint64_t challenge_acks(struct fl_link *l)
{
	struct tl_tcp_stats st;

	tl_tcp_stack_get_stats(l->stack[0], &st);
	return st.challenge_acks;
}

/*
 * Challenge ACKs come out of a budget per connection and second, of a random size: a
 * blind attacker flooding one connection with in-window RSTs gets a bounded number of
 * ACKs out of it, and neither starves another connection's challenge ACKs nor learns,
 * by counting those on a connection of its own, that its RSTs hit (CVE-2016-5696).
 */
static void test_tcp_challenge_acks_budgeted_per_connection(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn *a, *b;
	struct view va, vb;
	uint8_t seg[64];
	uint64_t n;

	assert_int_equal(fl_open_pair(l), 0);
	a = l->app[0].conn;
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	fl_run(l, 5 * MS);
	assert_int_equal(l->app[0].accepted, 2);
	b = l->app[0].conn;
	assert_true(a != b);
	conn_view(l, a, &va);
	conn_view(l, b, &vb);
	l->filter = drop_all;
	for (int i = 0; i < 1500; i++)
		fl_inject(l, 0, seg, fl_build(seg, va.sport, va.dport, va.rcv_nxt + 1 + (uint32_t)i, 0,
					      TL_TCP_RST, 0, NULL, 0, NULL, 0), 0);
	n = challenge_acks(l);
	assert_true(n >= 10 && n < 30);
	/* The other connection still gets its challenge ACK. */
	fl_inject(l, 0, seg, fl_build(seg, vb.sport, vb.dport, vb.rcv_nxt + 1, 0, TL_TCP_RST, 0, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(challenge_acks(l), n + 1);
	/* A second later the flooded one has a budget again. */
	fl_run(l, 1000 * MS);
	fl_inject(l, 0, seg, fl_build(seg, va.sport, va.dport, va.rcv_nxt + 1, 0, TL_TCP_RST, 0, NULL,
				      0, NULL, 0), 0);
	assert_int_equal(challenge_acks(l), n + 2);
	assert_int_equal(l->app[0].closed, 0);
}

/* ---- malformed input ------------------------------------------------------------ */

static void test_tcp_malformed_segments_dropped_and_counted(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[128];
	struct view v;
	uint32_t n, bad = 0;
	static const uint8_t opt_past[] = { 1, 1, 2, 8 };        /* MSS claiming 8 bytes */
	static const uint8_t opt_nolen[] = { 1, 1, 1, 8 };       /* kind with no length byte */
	static const uint8_t opt_zero[] = { 3, 0, 1, 1 };        /* length 0 would loop */
	static const uint8_t opt_badlen[] = { 2, 3, 0, 1 };      /* MSS with length 3 */

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
#define BAD(expr) do { expr; assert_int_equal(fl_inject(l, 0, seg, n, 0), -EBADMSG); bad++; } while (0)
	BAD(n = 12);                                               /* shorter than a header */
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, NULL, 0, NULL, 0);
	    seg[12] = 4u << 4);                                    /* data offset below 5 */
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, NULL, 0, NULL, 0);
	    seg[12] = 15u << 4);                                   /* data offset past the end */
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, opt_past, 4, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, opt_nolen, 4, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, opt_zero, 4, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, opt_badlen, 4, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, 0, TL_TCP_SYN | TL_TCP_FIN, 100, NULL, 0, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, 0, TL_TCP_SYN | TL_TCP_RST, 100, NULL, 0, NULL, 0));
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, 0, 0, 100, NULL, 0, NULL, 0)); /* no flags */
	BAD(n = fl_build(seg, v.sport, v.dport, v.rcv_nxt, 0, TL_TCP_FIN | TL_TCP_PSH | TL_TCP_URG, 100,
			 NULL, 0, NULL, 0));                       /* "xmas" without ACK */
	BAD(n = fl_build(seg, 0, v.dport, v.rcv_nxt, v.snd_nxt, TL_TCP_ACK, 100, NULL, 0, NULL, 0));
#undef BAD
	{
		/* A SYN from the listener's own address and port. */
		struct tl_tcp_rx rx = { .saddr = l->addr[0], .daddr = l->addr[0], .tcp = seg, .pkt = seg };
		rx.tcp_len = fl_build(seg, 80, 80, 1, 0, TL_TCP_SYN, 100, NULL, 0, NULL, 0);
		assert_int_equal(tl_tcp_input(l->stack[0], &rx, l->now), -EBADMSG);
		bad++;
	}
	assert_int_equal(tl_tcp_input(l->stack[0], NULL, l->now), -EBADMSG);
	bad++;
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_malformed, bad);
	assert_int_equal(l->app[0].closed, 0);
	transfer(l, 10000, 10000, 100 * MS, 29);
}

static void test_tcp_segment_far_outside_window_dropped(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[128], data[20] = { 0 };
	struct view v;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all;
	mark = l->nlog;
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt + 0x20000000u, v.snd_nxt,
				      TL_TCP_ACK, 100, NULL, 0, data, 20), 0);
	fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt - 0x20000000u, v.snd_nxt,
				      TL_TCP_ACK, 100, NULL, 0, data, 20), 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_window, 1);
	assert_int_equal(st.dup_segs, 1);
	assert_int_equal(l->app[0].rx_len, 0);
	/* Each is answered with a plain ACK stating where we really are. */
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, TL_TCP_RST, NULL), 2);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
}

static void test_tcp_segment_for_no_connection_gets_rst(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	uint8_t seg[64];
	struct fl_seg g;

	l->filter = drop_all;
	fl_inject(l, 0, seg, fl_build(seg, 4000, 90, 1234, 5678, TL_TCP_ACK, 100, NULL, 0, NULL, 0), 0);
	assert_int_equal(fl_count(l, 0, 0, TL_TCP_RST, 0, &g), 1);
	assert_int_equal(g.seq, 5678);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_no_conn, 1);
}

static void test_tcp_syn_backlog_bounded(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_listener *lis;
	struct tl_tcp_stats st;
	uint8_t seg[64];

	assert_int_equal(tl_tcp_listen(l->stack[0], 0, 80, 4, &fl_app_cbs, &l->app[0], &lis), 0);
	l->filter = drop_all; /* SYN-ACKs go nowhere: a SYN flood from spoofed ports */
	for (uint16_t p = 0; p < 10; p++)
		fl_inject(l, 0, seg, fl_build(seg, (uint16_t)(3000 + p), 80, 777u * p, 0, TL_TCP_SYN, 1000,
					      NULL, 0, NULL, 0), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 4);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_backlog, 6);
	/* Embryonic connections give up after the retransmission limit. */
	fl_run(l, 60000 * MS);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
	assert_int_equal(l->app[0].accepted, 0);
	/* And the listener works again. */
	l->filter = NULL;
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].accepted, 1);
}

/* ---- congestion signals ----------------------------------------------------------- */

static void test_tcp_ecn_ce_marks_cut_cwnd_dctcp(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn_stats cs;
	struct tl_tcp_stats st;
	struct tl_tcp_cfg cfg;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.rcv_buf = 1u << 20;
	cfg.snd_buf = 1u << 20;
	assert_int_equal(fl_init(l, &cfg, NULL, 4), 0);
	l->ns_per_kb = 800;          /* ~10 Gbit/s */
	l->ce_queue_bytes = 30000;   /* switch marks above ~20 segments queued */
	assert_int_equal(fl_open_pair(l), 0);
	transfer(l, 0, 4u << 20, 5000 * MS, 30);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_true(st.ce_marks > 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.retrans, 0); /* marks, not losses, held the queue */
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.ecn);
	assert_true(cs.dctcp_alpha < 1024);
	assert_true(cs.cwnd < 200000); /* bounded near BDP + marking threshold, not the window */
	assert_true(fl_count(l, 0, 1, TL_TCP_CWR, TL_TCP_SYN, NULL) > 0);
}

static void test_tcp_random_lossy_link_transfer_intact(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;

	for (uint64_t seed = 1; seed <= 3; seed++) {
		struct tl_tcp_cfg cfg;
		fl_fini(l);
		fl_cfg(&cfg);
		assert_int_equal(fl_init(l, &cfg, NULL, seed * 977), 0);
		l->ns_per_kb = 8000;  /* 1 Gbit/s */
		l->hold_sbufs = seed == 2; /* payload referenced in flight, as mbufs would */
		if (seed == 3) /* many small buffers: segments built from several slices */
			l->app[0].chunk = l->app[1].chunk = FL_CHUNK_RANDOM;
		assert_int_equal(fl_open_pair(l), 0);
		l->loss_ppm = 20000;
		l->reorder_ppm = 20000;
		l->dup_ppm = 20000;
		l->corrupt_ppm = 10000;
		transfer(l, 1u << 20, 512u << 10, 60000 * MS, seed * 31);
		tl_tcp_stack_get_stats(l->stack[1], &st);
		assert_true(st.retrans > 0);
		assert_true(l->frames_corrupt > 0);
		assert_true(l->frames_dropped > 0);
	}
}

/*
 * A frame held in several buffers (an LRO frame of the virtio pair) is handed over a buffer
 * at a time with rx.more: the data arrives intact and in order, and the frame gets one ACK
 * covering all of it, not one per two pieces.
 */
static void test_tcp_frame_in_pieces_acked_once(void **state)
{
	struct fl_link *l = *state;
	uint8_t seg[4096], data[4000];
	struct fl_seg g;
	struct view v;
	uint32_t mark;

	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	fl_fill_random(data, sizeof(data), 5);
	mark = l->nlog;
	assert_int_equal(fl_inject_pieces(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt,
							     v.snd_nxt, TL_TCP_ACK, 1000, NULL, 0,
							     data, sizeof(data)), 8), 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, &g), 1);
	assert_int_equal(g.ack, v.rcv_nxt + sizeof(data));
	assert_int_equal(l->app[0].rx_len, sizeof(data));
	assert_memory_equal(l->app[0].rx, data, sizeof(data));
	fl_run(l, 100 * MS); /* (a window update may follow as the application reads) */
	assert_int_equal(l->holds, l->releases);
}

/*
 * LRO frames (one piece per buffer of the chain) parked out of order: C (40 buffers) past a
 * hole, then B (48) between the hole and C, then the hole. The stream comes out exact, B and
 * C are reported as one SACK block, and a chain is held once while its pieces wait, not
 * once per piece: each buffer's count is updated three times (the link's reference, the
 * queue's hold and its release) and reaches zero exactly once.
 */
static void test_tcp_chained_frames_out_of_order_held_once(void **state)
{
	enum { HOLE = 1000, KB = 48, KC = 40, PIECE = 700 };
	static uint8_t seg[TL_TCP_HDR_MAX + KB * PIECE], data[HOLE + (KB + KC) * PIECE];
	struct fl_link *l = *state;
	uint32_t blocks[4][2], b, c, mark;
	struct tl_tcp_cfg cfg;
	struct fl_seg g;
	struct view v;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.rcv_buf = 256u << 10; /* both chains wait, each piece charged a whole MSS */
	cfg.ooo_max = 128;
	assert_int_equal(fl_init(l, &cfg, NULL, 11), 0);
	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, &v);
	l->filter = drop_all; /* node 1 never sent these: keep its replies off the wire */
	fl_fill_random(data, sizeof(data), 77);
	b = v.rcv_nxt + HOLE;
	c = b + KB * PIECE;
	assert_int_equal(fl_inject_chain(l, 0, seg, fl_build(seg, v.sport, v.dport, c, v.snd_nxt,
							   TL_TCP_ACK, 1000, NULL, 0,
							   data + HOLE + KB * PIECE, KC * PIECE),
					 KC), 0);
	mark = l->nlog;
	assert_int_equal(fl_inject_chain(l, 0, seg, fl_build(seg, v.sport, v.dport, b, v.snd_nxt,
							   TL_TCP_ACK, 1000, NULL, 0, data + HOLE,
							   KB * PIECE),
					 KB), 0);
	assert_int_equal(l->app[0].rx_len, 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, &g), 1);
	assert_int_equal(g.ack, v.rcv_nxt);
	assert_int_equal(fl_seg_sack(&g, blocks), 1);
	assert_int_equal(blocks[0][0], b);
	assert_int_equal(blocks[0][1], c + KC * PIECE);
	assert_int_equal(fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt,
						   TL_TCP_ACK, 1000, NULL, 0, data, HOLE), 0), 0);
	assert_int_equal(l->app[0].rx_len, sizeof(data));
	assert_memory_equal(l->app[0].rx, data, sizeof(data));
	assert_int_equal(l->bufs_freed, KB + KC);
	assert_int_equal(l->buf_underflows, 0);
	assert_int_equal(l->buf_ref_updates, 3u * (KB + KC));
	assert_int_equal(l->holds, l->releases);
}

/* A fresh pair whose node 0 takes a 4 MiB window into an out-of-order queue of ooo_max
 * entries, for segments injected as node 1's (whose replies are kept off the wire). */
static void sack_link(struct fl_link *l, uint32_t ooo_max, uint64_t seed, struct view *v)
{
	struct tl_tcp_cfg cfg;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.rcv_buf = 4u << 20;
	cfg.ooo_max = ooo_max;
	assert_int_equal(fl_init(l, &cfg, NULL, seed), 0);
	assert_int_equal(fl_open_pair(l), 0);
	server_view(l, v);
	l->filter = drop_all;
}

/* Injects len (at most 1000) bytes at seq above the hole at v->rcv_nxt as node 1's segment;
 * returns the SACK blocks (into blocks) of the one ACK node 0 answered with. */
static uint32_t inject_sacked(struct fl_link *l, const struct view *v, uint32_t seq,
			      const uint8_t *p, uint32_t len, uint32_t blocks[4][2])
{
	static uint8_t seg[TL_TCP_HDR_MAX + 1000];
	uint32_t mark = l->nlog;
	struct fl_seg g;

	assert_true(len <= 1000);
	assert_int_equal(fl_inject(l, 0, seg, fl_build(seg, v->sport, v->dport, seq, v->snd_nxt,
							   TL_TCP_ACK, 1000, NULL, 0, p, len), 0), 0);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, &g), 1);
	assert_int_equal(g.ack, v->rcv_nxt);
	return fl_seg_sack(&g, blocks);
}

static void block_is(const uint32_t blk[2], uint32_t start, uint32_t end)
{
	assert_int_equal(blk[0], start);
	assert_int_equal(blk[1], end);
}

/*
 * A window's worth of segments queued above one hole, in order and then in swapped pairs:
 * every one is answered with an ACK whose SACK blocks match the queue (the newest
 * segment's range first, then the highest others), while the queue changes at its tail,
 * in the middle and at its head, and the blocks are not rebuilt by walking the whole queue
 * for each segment: the walks stay a handful, however long the queue.
 */
static void test_tcp_sack_blocks_kept_not_walked_per_segment(void **state)
{
	enum { N = 2000, LEN = 1000 };
	static uint8_t seg[TL_TCP_HDR_MAX + LEN], data[(N + 4) * LEN];
	struct fl_link *l = *state;
	uint32_t blocks[4][2], b, mark;
	struct tl_tcp_stats st0, st;
	struct fl_seg g;
	struct view v;

	sack_link(l, (4u << 20) / 1400u + 1u, 12, &v); /* the DPDK backend's queue size */
	fl_fill_random(data, sizeof(data), 78);
	tl_tcp_stack_get_stats(l->stack[0], &st0);
#define PUT(k) inject_sacked(l, &v, b + (k) * LEN, data + LEN + (k) * LEN, LEN, blocks)
	b = v.rcv_nxt + LEN; /* a hole of LEN, then segments 0 .. N-1 */
	for (uint32_t k = 0; k < N / 2; k++) { /* in order: each joins the tail */
		assert_int_equal(PUT(k), 1);
		block_is(blocks[0], b, b + (k + 1) * LEN);
	}
	for (uint32_t k = N / 2; k < N; k += 2) { /* pairs swapped: k + 1 opens a range, k fills */
		assert_int_equal(PUT(k + 1), 2);
		block_is(blocks[0], b + (k + 1) * LEN, b + (k + 2) * LEN);
		block_is(blocks[1], b, b + k * LEN);
		assert_int_equal(PUT(k), 1);
		block_is(blocks[0], b, b + (k + 2) * LEN);
	}
	/* A second hole (segment N), then N + 1 past it: that range first, then the one below. */
	assert_int_equal(PUT(N + 1), 2);
	block_is(blocks[0], b + (N + 1) * LEN, b + (N + 2) * LEN);
	block_is(blocks[1], b, b + N * LEN);
	/* A repeat inside the low range changes nothing; the newest range stays first. */
	assert_int_equal(PUT(7), 2);
	block_is(blocks[0], b + (N + 1) * LEN, b + (N + 2) * LEN);
	/* The second hole filled: one range. */
	assert_int_equal(PUT(N), 1);
	block_is(blocks[0], b, b + (N + 2) * LEN);
#undef PUT
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_true(st.sack_walks - st0.sack_walks <= 4);
	/* The first hole filled: everything delivered in order, no blocks left. */
	mark = l->nlog;
	assert_int_equal(fl_inject(l, 0, seg, fl_build(seg, v.sport, v.dport, v.rcv_nxt, v.snd_nxt,
						   TL_TCP_ACK, 1000, NULL, 0, data, LEN), 0), 0);
	assert_int_equal(l->app[0].rx_len, (N + 3) * LEN);
	assert_memory_equal(l->app[0].rx, data, (N + 3) * LEN);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, &g), 1);
	assert_int_equal(fl_seg_sack(&g, blocks), 0);
	assert_int_equal(l->holds, l->releases);
}

/*
 * SACK blocks against a model of what the queue holds: segments of random length and
 * place, overlapping and in random order, parked above a hole that is never filled. After
 * each one the ACK's blocks must be the range holding the newest segment (unless it was
 * refused as held in full already), then the highest others, three in all with
 * timestamps: the ranges computed here from a map of the bytes received.
 */
static void test_tcp_sack_blocks_match_a_model_of_the_queue(void **state)
{
	enum { HOLE = 500, SPAN = 60000, SEGS = 400 };
	static uint8_t data[HOLE + SPAN], have[SPAN];
	static uint32_t rs[SPAN / 2][2];
	struct fl_link *l = *state;
	uint32_t blocks[4][2], want[4][2], recent = UINT32_MAX, base, nw, nb, nr, i, r;
	struct tl_tcp_stats st0, st;
	struct view v;

	sack_link(l, 2 * SEGS, 13, &v); /* nothing dropped for room: the model has no drops */
	fl_fill_random(data, sizeof(data), 79);
	memset(have, 0, sizeof(have));
	base = v.rcv_nxt + HOLE;
	for (uint32_t k = 0; k < SEGS; k++) {
		/* Mostly short segments anywhere in the span, some far apart (many ranges). */
		uint32_t len = 1 + (uint32_t)(fl_rand(l) % (k % 3 ? 300u : 1000u));
		uint32_t off = (uint32_t)(fl_rand(l) % (SPAN - len));

		tl_tcp_stack_get_stats(l->stack[0], &st0);
		nb = inject_sacked(l, &v, base + off, data + HOLE + off, len, blocks);
		tl_tcp_stack_get_stats(l->stack[0], &st);
		if (st.dup_segs == st0.dup_segs)
			recent = off; /* queued: its range goes first */
		memset(have + off, 1, len);
		/* The model's ranges, ascending; the one holding recent, and the three highest. */
		for (i = 0, nr = 0; i < SPAN;) {
			if (!have[i]) {
				i++;
				continue;
			}
			for (r = i; r < SPAN && have[r]; r++)
				;
			rs[nr][0] = base + i;
			rs[nr++][1] = base + r;
			i = r;
		}
		nw = 0;
		for (i = 0; i < nr; i++)
			if (recent != UINT32_MAX && base + recent >= rs[i][0] && base + recent < rs[i][1]) {
				want[nw][0] = rs[i][0];
				want[nw++][1] = rs[i][1];
			}
		for (i = nr; i > 0 && nw < 3; i--)
			if (nw == 0 || rs[i - 1][0] != want[0][0]) {
				want[nw][0] = rs[i - 1][0];
				want[nw++][1] = rs[i - 1][1];
			}
		assert_int_equal(nb, nw);
		for (i = 0; i < nw; i++)
			block_is(blocks[i], want[i][0], want[i][1]);
	}
	assert_int_equal(l->app[0].rx_len, 0);
}

static bool got_all(void *arg)
{
	const struct fl_link *l = arg;

	return l->app[0].rx_len == l->app[1].src_len;
}

/*
 * With tso_max set, new data leaves in segments above the MSS (up to tso_max), each
 * telling the device to cut at the MSS; the stream arrives intact (the fake link, like
 * the virtio pair, carries a segment whole). A lossy run repairs with MSS-sized resends.
 */
static void test_tcp_tso_segments_above_mss(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg a, b;
	static uint8_t src[300000];
	uint32_t big = 0, mss = 0;

	fl_fini(l);
	fl_cfg(&a);
	b = a;
	b.tso_max = 64000;
	for (int lossy = 0; lossy < 2; lossy++) {
		assert_int_equal(fl_init(l, &a, &b, 21 + (uint64_t)lossy), 0);
		l->loss_ppm = lossy ? 20000 : 0;
		assert_int_equal(fl_open_pair(l), 0);
		fl_fill_random(src, sizeof(src), 9);
		l->app[0].auto_recved = true;
		l->app[1].src = src;
		l->app[1].src_len = sizeof(src);
		l->app[1].src_off = 0;
		fl_app_pump(&l->app[1]);
		assert_true(fl_run_until(l, 5000 * MS, got_all, l));
		assert_memory_equal(l->app[0].rx, src, sizeof(src));
		for (uint32_t i = l->nlog > FL_LOG_MAX ? l->nlog - FL_LOG_MAX : 0; i < l->nlog; i++) {
			const struct fl_seg *g = &l->log[i % FL_LOG_MAX];
			if (g->from != 1 || g->len == 0)
				continue;
			if (g->tso_segsz) {
				mss = g->tso_segsz;
				assert_true(g->len > mss);
				assert_true(g->len <= 64000);
				big++;
			}
		}
		assert_true(big > 0);
		l->app[1].src = NULL;
		if (!lossy)
			fl_fini(l);
	}
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_fast_retransmit_across_wraparound),
		T(test_tcp_rto_across_wraparound),
		T(test_tcp_newreno_partial_acks_repair_several_losses),
		T(test_tcp_zero_window_probes_until_reopened),
		T(test_tcp_small_window_lost_update_recovered_by_probe),
		T(test_tcp_window_scaled_beyond_64k),
		T(test_tcp_reordering_delivered_in_order),
		T(test_tcp_duplicates_trimmed),
		T(test_tcp_overlapping_segments_trimmed),
		T(test_tcp_rst_exact_seq_resets),
		T(test_tcp_rst_in_window_gets_challenge_ack),
		T(test_tcp_rst_out_of_window_ignored),
		T(test_tcp_syn_in_established_gets_challenge_ack),
		T(test_tcp_ack_of_unsent_data_challenged),
		T(test_tcp_challenge_acks_budgeted_per_connection),
		T(test_tcp_malformed_segments_dropped_and_counted),
		T(test_tcp_segment_far_outside_window_dropped),
		T(test_tcp_segment_for_no_connection_gets_rst),
		T(test_tcp_syn_backlog_bounded),
		T(test_tcp_ecn_ce_marks_cut_cwnd_dctcp),
		T(test_tcp_random_lossy_link_transfer_intact),
		T(test_tcp_frame_in_pieces_acked_once),
		T(test_tcp_chained_frames_out_of_order_held_once),
		T(test_tcp_sack_blocks_kept_not_walked_per_segment),
		T(test_tcp_sack_blocks_match_a_model_of_the_queue),
		T(test_tcp_tso_segments_above_mss),
	};

	return cmocka_run_group_tests_name("tcp_input", tests, NULL, NULL);
}
