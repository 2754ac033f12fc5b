/*
 * test_tcp_sack.c — TCP-lite selective acknowledgments (RFC 2018, recovery after RFC 6675)
 * on a fake link: negotiation, the receiver's SACK blocks built from its out-of-order
 * queue, the sender resending several holes in one round trip where NewReno needs one
 * round trip per hole, recovery across sequence wraparound, and hostile SACK options.
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
#define SEG 1448u /* fl_cfg's MSS less the timestamp option */

static int setup(void **state)
{
	return fl_test_setup(state, 41);
}

static int teardown(void **state)
{
	return fl_test_teardown(state);
}

static bool has_opt(const struct fl_seg *g, uint8_t kind)
{
	return fl_seg_opt(g, kind) != NULL;
}

static void relink(struct fl_link *l, bool sack_a, bool sack_b, uint64_t seed)
{
	struct tl_tcp_cfg a, b;

	fl_fini(l);
	fl_cfg(&a);
	fl_cfg(&b);
	a.sack = sack_a;
	b.sack = sack_b;
	assert_int_equal(fl_init(l, &a, &b, seed), 0);
}

static bool got_all(void *arg)
{
	struct fl_link *l = arg;

	return l->app[0].rx_len >= l->app[1].src_len;
}

/* Streams n bytes node 1 -> node 0; checks them and returns how long it took. */
static uint64_t send_1_to_0(struct fl_link *l, uint8_t *buf, size_t n, uint64_t seed)
{
	uint64_t t0 = l->now, took;

	fl_fill_random(buf, n, seed);
	l->app[1].src = buf;
	l->app[1].src_len = n;
	l->app[1].src_off = 0;
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, 2000 * MS, got_all, l));
	took = l->now - t0;
	assert_int_equal(l->app[0].rx_len, n);
	assert_memory_equal(l->app[0].rx, buf, n);
	fl_run(l, 50 * MS);
	assert_int_equal(l->app[1].sends, l->app[1].sends_done);
	assert_int_equal(l->app[1].sends_failed, 0);
	l->app[1].src = NULL;
	return took;
}

static void test_tcp_sack_negotiated_only_when_both_offer(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn_stats cs;
	struct fl_seg g;

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, TL_TCP_ACK, &g), 1);
	assert_true(has_opt(&g, 4));
	assert_int_equal(fl_count(l, 0, 0, TL_TCP_SYN | TL_TCP_ACK, 0, &g), 1);
	assert_true(has_opt(&g, 4));
	assert_true(g.hdr_len <= 20 + 40);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_true(cs.sack);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.sack);

	/* The client does not offer: the SYN-ACK must not either, and neither side uses it. */
	relink(l, true, false, 42);
	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, TL_TCP_ACK, &g), 1);
	assert_false(has_opt(&g, 4));
	assert_int_equal(fl_count(l, 0, 0, TL_TCP_SYN | TL_TCP_ACK, 0, &g), 1);
	assert_false(has_opt(&g, 4));
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_false(cs.sack);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_false(cs.sack);

	/* The server declines: an offer is not enough. */
	relink(l, false, true, 43);
	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 0, TL_TCP_SYN | TL_TCP_ACK, 0, &g), 1);
	assert_false(has_opt(&g, 4));
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_false(cs.sack);
}

/*
 * Eight segments, the 2nd and 5th lost: the ACK for the 8th reports both islands the
 * receiver holds, the one holding the segment just arrived first (RFC 2018 4).
 */
static void test_tcp_sack_blocks_report_out_of_order_data(void **state)
{
	struct fl_link *l = *state;
	struct fl_drop_nth d = { .which = { 2, 5, 0, 0 } };
	static uint8_t buf[8 * SEG];
	uint32_t b[4][2], base, found = 0;
	struct tl_tcp_stats st;
	struct fl_seg g;

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, TL_TCP_ACK, &g), 1);
	base = g.seq + 1u;
	l->delay_ns = 500000; /* retransmissions land well after the first flight */
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	send_1_to_0(l, buf, sizeof(buf), 5);
	for (uint32_t i = 0; i < l->nlog; i++) {
		const struct fl_seg *a = &l->log[i];
		if (a->from != 0 || fl_seg_sack(a, b) != 2 || b[0][1] != base + 8 * SEG)
			continue;
		assert_int_equal(a->ack, base + SEG);
		assert_int_equal(b[0][0], base + 5 * SEG);
		assert_int_equal(b[1][0], base + 2 * SEG);
		assert_int_equal(b[1][1], base + 4 * SEG);
		found++;
	}
	assert_int_equal(found, 1);
	/* Both holes resent at once: the first on the third dupack, the second from the
	 * scoreboard on the next, no timeout. */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_int_equal(st.retrans, 2);
	assert_true(st.sack_rexmits >= 1);
	/* Nothing out of order any more: ACKs carry no blocks. */
	assert_true(fl_count(l, 0, 0, TL_TCP_ACK, 0, &g) > 0);
	assert_int_equal(fl_seg_sack(&g, b), 0);
}

/* Three holes in one window over a 2 ms round trip: NewReno repairs one per partial ACK,
 * a round trip each; SACK resends all three within the first. */
static void test_tcp_sack_repairs_several_losses_in_one_round_trip(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100 * SEG];
	struct fl_drop_nth d;
	struct tl_tcp_stats st;
	uint64_t t_sack, t_newreno;

	relink(l, false, false, 44);
	l->delay_ns = 1 * MS; /* before the handshake: its RTT sample sets the RTO */
	assert_int_equal(fl_open_pair(l), 0);
	d = (struct fl_drop_nth){ .which = { 30, 34, 38, 0 } };
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	t_newreno = send_1_to_0(l, buf, sizeof(buf), 6);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_int_equal(st.retrans, 3);
	assert_int_equal(st.sack_rexmits, 0);

	relink(l, true, true, 44);
	l->delay_ns = 1 * MS; /* before the handshake: its RTT sample sets the RTO */
	assert_int_equal(fl_open_pair(l), 0);
	d = (struct fl_drop_nth){ .which = { 30, 34, 38, 0 } };
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	t_sack = send_1_to_0(l, buf, sizeof(buf), 6);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_int_equal(st.retrans, 3);
	assert_int_equal(st.sack_rexmits, 3); /* the first hole too: the scoreboard shows it */
	/* At least the two round trips NewReno spends on the second and third hole. */
	assert_true(t_sack + 4 * MS <= t_newreno);
}

static bool both_done(void *arg)
{
	struct fl_link *l = arg;

	return l->app[0].rx_len >= l->app[1].src_len && l->app[1].rx_len >= l->app[0].src_len &&
	       l->app[1].eof;
}

/*
 * Data both ways, losses one way: node 0 holds out-of-order data, so its own data
 * segments carry SACK blocks. Those bytes come out of the payload (the MSS counts no
 * options but the timestamp's): no segment outgrows MSS + headers, and node 0's FIN,
 * queued behind its data, still lands after the last byte.
 */
static void test_tcp_sack_blocks_take_room_from_payload(void **state)
{
	struct fl_link *l = *state;
	static uint8_t a[200 * SEG + 7], b[200 * SEG];
	struct fl_drop_nth d = { .which = { 20, 25, 60, 90 } };
	uint32_t blk[4][2], with_sack = 0;

	l->delay_ns = 200000;
	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(a, sizeof(a), 9);
	fl_fill_random(b, sizeof(b), 10);
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	l->app[0].src = a;
	l->app[0].src_len = sizeof(a);
	l->app[0].close_after_src = true;
	l->app[1].src = b;
	l->app[1].src_len = sizeof(b);
	fl_app_pump(&l->app[0]);
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, 2000 * MS, both_done, l));
	assert_int_equal(l->app[1].rx_len, sizeof(a));
	assert_memory_equal(l->app[1].rx, a, sizeof(a));
	assert_int_equal(l->app[0].rx_len, sizeof(b));
	assert_memory_equal(l->app[0].rx, b, sizeof(b));
	assert_true(l->nlog <= FL_LOG_MAX);
	for (uint32_t i = 0; i < l->nlog; i++) {
		const struct fl_seg *g = &l->log[i];
		assert_true(g->hdr_len + g->len <= 20u + 1460u);
		if (g->from == 0 && g->len > 0 && fl_seg_sack(g, blk) > 0)
			with_sack++;
	}
	assert_true(with_sack > 0);
	l->app[0].src = l->app[1].src = NULL;
	tl_tcp_close(l->app[1].conn, l->now);
	fl_run(l, 50 * MS);
}

/*
 * Data both ways over a link with some delay, isolated losses one way: every loss is
 * repaired by fast retransmit, none waits for an RTO. Among them a loss of the first
 * segment sent after the previous recovery point (snd_max when recovery began): its
 * duplicate ACKs acknowledge exactly that point, and start a new recovery.
 */
static void test_tcp_isolated_losses_both_ways_fast_retransmitted(void **state)
{
	struct fl_link *l = *state;
	static uint8_t a[170 * SEG], b[170 * SEG];
	struct fl_drop_nth d = { .which = { 20, 50, 80, 110 } };
	struct tl_tcp_stats st;

	l->delay_ns = 100000;
	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(a, sizeof(a), 31);
	fl_fill_random(b, sizeof(b), 32);
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	l->app[0].src = a;
	l->app[0].src_len = sizeof(a);
	l->app[0].close_after_src = true;
	l->app[1].src = b;
	l->app[1].src_len = sizeof(b);
	fl_app_pump(&l->app[0]);
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, 5000 * MS, both_done, l));
	assert_memory_equal(l->app[1].rx, a, sizeof(a));
	assert_memory_equal(l->app[0].rx, b, sizeof(b));
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_int_equal(st.fast_retrans, 4);
	l->app[0].src = l->app[1].src = NULL;
	tl_tcp_close(l->app[1].conn, l->now);
	fl_run(l, 50 * MS);
}

struct drop_wrapped {
	uint32_t remaining;
};

/* Drops node 1's first two data segments that start just past the 2^32 wrap. */
static bool drop_wrapped_filter(void *arg, const struct fl_seg *g)
{
	struct drop_wrapped *d = arg;

	if (d->remaining > 0 && g->from == 1 && g->len > 0 && g->seq < 100000u &&
	    (g->seq / SEG) % 3u == 0) {
		d->remaining--;
		return true;
	}
	return false;
}

static void test_tcp_sack_recovery_across_wraparound(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[300000];
	struct drop_wrapped d = { .remaining = 2 };
	struct tl_tcp_stats st;

	l->iss_set[0] = l->iss_set[1] = true;
	l->iss[0] = 0xffffffffu - 30000u;
	l->iss[1] = 0xffffffffu - 20000u;
	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_wrapped_filter;
	l->filter_arg = &d;
	send_1_to_0(l, buf, sizeof(buf), 7);
	assert_int_equal(d.remaining, 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_true(st.fast_retrans >= 1);
	assert_int_equal(st.retrans, 2);
}

/* What node 0 last told node 1, to forge segments node 0 could have sent. */
struct view {
	uint32_t seq, ack;
	uint16_t wnd, sport, dport;
};

static void server_view(struct fl_link *l, struct view *v)
{
	struct tl_tcp_tuple t;
	struct fl_seg g;

	assert_true(fl_count(l, 0, 0, TL_TCP_ACK, TL_TCP_SYN, &g) > 0);
	v->seq = g.seq + g.len;
	v->ack = g.ack;
	v->wnd = g.wnd;
	tl_tcp_conn_tuple(l->app[0].conn, &t);
	v->sport = t.lport;
	v->dport = t.rport;
}

struct want {
	struct fl_link *l;
	size_t n;
};

static bool rx_done(void *arg)
{
	struct want *w = arg;

	return w->l->app[0].rx_len >= w->n;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Feeds node 1 an ACK from node 0 (as in v) carrying opt. */
static int forge(struct fl_link *l, const struct view *v, const uint8_t *opt, uint32_t optlen)
{
	uint8_t seg[128];

	return fl_inject(l, 1, seg, fl_build(seg, v->sport, v->dport, v->seq, v->ack, TL_TCP_ACK,
					     v->wnd, opt, optlen, NULL, 0), 0);
}

/* One SACK block [start, end) as an option (12 bytes). */
static uint32_t sack_opt(uint8_t *opt, uint32_t start, uint32_t end)
{
	opt[0] = opt[1] = 1;
	opt[2] = 5;
	opt[3] = 10;
	put32(opt + 4, start);
	put32(opt + 8, end);
	return 12;
}

static bool drop_data_from_1(void *arg, const struct fl_seg *g)
{
	(void)arg;
	return g->from == 1 && g->len > 0;
}

/*
 * The receiver gives up data it SACKed (its out-of-order queue was full): the partial
 * ACK stops at the start of that range. The sender must take it as a hole again and
 * resend it at once, not skip it as SACKed and wait for the RTO.
 */
static void test_tcp_sack_reneged_range_resent(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100 + 10 * SEG];
	struct want w = { .l = l, .n = 100 };
	uint8_t opt[12];
	uint32_t base, mark;
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 11);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 100, NULL, NULL, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, rx_done, &w));
	fl_run(l, 5 * MS);
	server_view(l, &v);
	base = v.ack;
	/* Ten segments that never arrive; the peer's answers are forged below, at once. */
	l->filter = drop_data_from_1;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf + 100, 10 * SEG, NULL, NULL, l->now), 0);
	sack_opt(opt, base + 3 * SEG, base + 5 * SEG);
	for (int i = 0; i < 3; i++)
		assert_int_equal(forge(l, &v, opt, 12), 0);
	/* Recovery: the hole below the SACKed range went first. */
	assert_true(fl_count(l, 0, 1, 0, 0, NULL) > 0);
	assert_int_equal(l->log[(l->nlog - 1) % FL_LOG_MAX].seq, base);
	/* Partial ACK up to the SACKed range, which the receiver no longer reports. */
	mark = l->nlog;
	v.ack = base + 3 * SEG;
	assert_int_equal(forge(l, &v, NULL, 0), 0);
	assert_int_equal(fl_count(l, mark, 1, 0, 0, NULL), 1);
	assert_int_equal(l->log[mark % FL_LOG_MAX].seq, base + 3 * SEG);
	assert_int_equal(l->log[mark % FL_LOG_MAX].len, SEG);
	/* The forged ACKs covered bytes node 0 never got: the stream cannot complete, and
	 * teardown checks that nothing leaked. */
}

/*
 * Malformed SACK options are dropped and counted; well-formed blocks that lie about
 * what was sent (past snd_max, below the ACK, reversed) are ignored: nothing is resent
 * for them and the stream completes intact.
 */
static void test_tcp_sack_bad_options_dropped_lying_blocks_ignored(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100 + 20 * SEG];
	struct want w = { .l = l, .n = 100 };
	uint8_t opt[40];
	struct tl_tcp_stats st;
	uint64_t before;
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 8);
	/* A first exchange, so node 0's last ACK carries a scaled window to copy. */
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 100, NULL, NULL, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, rx_done, &w));
	fl_run(l, 5 * MS);
	/* The rest crawls: the forged ACKs find it in flight. */
	l->delay_ns = 2 * MS;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf + 100, sizeof(buf) - 100, NULL, NULL,
				     l->now), 0);
	fl_run(l, 1 * MS);
	server_view(l, &v);

	/* Malformed: length not 2 + 8n, a length under 10, two SACK options. */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	before = st.drop_malformed;
	memcpy(opt, (uint8_t[]){ 1, 1, 5, 9, 0, 0, 0, 0, 0, 0, 0, 0 }, 12);
	assert_int_equal(forge(l, &v, opt, 12), -EBADMSG);
	memcpy(opt, (uint8_t[]){ 1, 1, 5, 2 }, 4);
	assert_int_equal(forge(l, &v, opt, 4), -EBADMSG);
	memset(opt, 0, sizeof(opt));
	opt[0] = opt[1] = opt[12] = opt[13] = 1;
	opt[2] = opt[14] = 5;
	opt[3] = opt[15] = 10;
	put32(opt + 4, v.ack + 10);
	put32(opt + 8, v.ack + 20);
	put32(opt + 16, v.ack + 30);
	put32(opt + 20, v.ack + 40);
	assert_int_equal(forge(l, &v, opt, 24), -EBADMSG);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.drop_malformed, before + 3);

	/*
	 * Well formed, but lying: past everything sent, below the ACK, end before start.
	 * Three of them are duplicate ACKs and start recovery; had a block been believed,
	 * recovery would resend "holes" from the scoreboard.
	 */
	memset(opt, 0, sizeof(opt));
	opt[0] = opt[1] = 1;
	opt[2] = 5;
	opt[3] = 26;
	put32(opt + 4, v.ack + 100 * SEG);
	put32(opt + 8, v.ack + 101 * SEG);
	put32(opt + 12, v.ack - 2 * SEG);
	put32(opt + 16, v.ack - SEG);
	put32(opt + 20, v.ack + 5 * SEG);
	put32(opt + 24, v.ack + 3 * SEG);
	for (int i = 0; i < 3; i++)
		assert_int_equal(forge(l, &v, opt, 28), 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.drop_malformed, before + 3);
	assert_int_equal(st.fast_retrans, 1);
	assert_int_equal(st.sack_rexmits, 0);

	w.n = sizeof(buf);
	assert_true(fl_run_until(l, 500 * MS, rx_done, &w));
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
	assert_memory_equal(l->app[0].rx, buf, sizeof(buf));
	fl_run(l, 50 * MS);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.sack_rexmits, 0);
}

/*
 * One duplicate ACK whose SACK block shows four segments held past the first: the loss
 * is plain without waiting for two more dupacks (an ACK coalescing several segments
 * arrives as one), so recovery starts now and resends the hole.
 */
static void test_tcp_sack_loss_detected_before_three_dupacks(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100 + 10 * SEG];
	struct want w = { .l = l, .n = 100 };
	struct tl_tcp_stats st;
	uint8_t opt[12];
	uint32_t base, mark;
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 13);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 100, NULL, NULL, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, rx_done, &w));
	fl_run(l, 5 * MS);
	server_view(l, &v);
	base = v.ack;
	l->filter = drop_data_from_1;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf + 100, 10 * SEG, NULL, NULL, l->now), 0);
	/* Two segments' worth SACKed is not yet a loss (it may be reordering)... */
	mark = l->nlog;
	sack_opt(opt, base + SEG, base + 3 * SEG);
	assert_int_equal(forge(l, &v, opt, 12), 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.fast_retrans, 0);
	assert_int_equal(fl_count(l, mark, 1, 0, 0, NULL), 0);
	/* ...four are: the hole at base goes again at once, on the second dupack. */
	sack_opt(opt, base + SEG, base + 5 * SEG);
	assert_int_equal(forge(l, &v, opt, 12), 0);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.fast_retrans, 1);
	assert_int_equal(st.dup_acks, 2);
	assert_true(fl_count(l, mark, 1, 0, 0, NULL) >= 1);
	assert_int_equal(l->log[mark % FL_LOG_MAX].seq, base);
	assert_int_equal(l->log[mark % FL_LOG_MAX].len, SEG);
	/* The forged ACKs stand for data node 0 never got: teardown checks for leaks. */
}

/*
 * The very first data segment of a connection is lost. Recovery may start as soon as
 * the duplicate ACKs come (RFC 6582: recover starts at ISS), not only after a first ACK
 * of data: no RTO, which before any data RTT sample waits rto_init.
 */
static void test_tcp_first_data_segment_lost_fast_retransmitted(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[20 * SEG];
	struct fl_drop_nth d = { .which = { 1, 0, 0, 0 } };
	struct tl_tcp_stats st;
	uint64_t took;

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = fl_drop_nth_filter;
	l->filter_arg = &d;
	took = send_1_to_0(l, buf, sizeof(buf), 21);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 0);
	assert_int_equal(st.fast_retrans, 1);
	assert_true(took < 2 * MS);
}

/*
 * The receiver sends data of its own: its ACKs for a hole ride on data segments, none a
 * duplicate ACK in RFC 5681's strict sense. Each brings new SACK information, which
 * RFC 6675 counts as a duplicate: the hole is resent at once, not after an RTO.
 */
static void test_tcp_sack_on_data_segments_drives_fast_retransmit(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100 + 10 * SEG];
	struct want w = { .l = l, .n = 100 };
	struct tl_tcp_stats st;
	uint8_t opt[12], seg[128], data[20] = "reply-reply-reply-r";
	uint32_t base, mark, resent;
	struct view v;

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 14);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 100, NULL, NULL, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, rx_done, &w));
	fl_run(l, 5 * MS);
	server_view(l, &v);
	base = v.ack;
	l->filter = drop_data_from_1;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf + 100, 10 * SEG, NULL, NULL, l->now), 0);
	mark = l->nlog;
	for (uint32_t i = 1; i <= 3; i++) {
		sack_opt(opt, base + SEG, base + (1 + i) * SEG);
		assert_int_equal(fl_inject(l, 1, seg, fl_build(seg, v.sport, v.dport, v.seq, v.ack,
							       TL_TCP_ACK | TL_TCP_PSH, v.wnd, opt, 12,
							       data, 20), 0), 0);
		v.seq += 20;
	}
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.fast_retrans, 1);
	assert_int_equal(st.rto_fired, 0);
	for (resent = 0; mark < l->nlog; mark++) {
		const struct fl_seg *g = &l->log[mark % FL_LOG_MAX];
		resent += g->from == 1 && g->seq == base && g->len == SEG;
	}
	assert_int_equal(resent, 1);
	assert_int_equal(l->app[1].rx_len, 60); /* and the data they carried arrived */
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_sack_negotiated_only_when_both_offer),
		T(test_tcp_sack_blocks_report_out_of_order_data),
		T(test_tcp_sack_repairs_several_losses_in_one_round_trip),
		T(test_tcp_sack_blocks_take_room_from_payload),
		T(test_tcp_sack_recovery_across_wraparound),
		T(test_tcp_sack_bad_options_dropped_lying_blocks_ignored),
		T(test_tcp_sack_reneged_range_resent),
		T(test_tcp_sack_loss_detected_before_three_dupacks),
		T(test_tcp_first_data_segment_lost_fast_retransmitted),
		T(test_tcp_isolated_losses_both_ways_fast_retransmitted),
		T(test_tcp_sack_on_data_segments_drives_fast_retransmit),
	};

	return cmocka_run_group_tests_name("tcp_sack", tests, NULL, NULL);
}
