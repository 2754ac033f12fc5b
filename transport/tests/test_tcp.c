/*
 * test_tcp.c — TCP-lite core on a fake link and a fake clock (no EAL): handshake and
 * options, data both ways, loss of each kind of segment, retransmission timeout and its
 * limit, simultaneous open and close, TIME_WAIT reuse, zero copy on both sides.
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
#include "tl_tcp_pvt.h" /* tl_cc_rtt_sample */

#define MS 1000000ull

static int setup(void **state)
{
	return fl_test_setup(state, 1);
}

static int teardown(void **state)
{
	return fl_test_teardown(state);
}

static bool has_opt(const struct fl_seg *g, uint8_t kind)
{
	return fl_seg_opt(g, kind) != NULL;
}

struct xfer {
	struct fl_link *l;
	size_t want[2]; /* bytes node i must have received */
};

static bool xfer_done(void *arg)
{
	struct xfer *x = arg;

	return x->l->app[0].rx_len >= x->want[0] && x->l->app[1].rx_len >= x->want[1];
}

/* Streams n01 bytes node 0 -> 1 and n10 bytes 1 -> 0 and checks both arrive intact. */
static void transfer(struct fl_link *l, size_t n01, size_t n10, uint64_t max_ns)
{
	uint8_t *a = malloc(n01 + 1), *b = malloc(n10 + 1);
	struct xfer x = { .l = l, .want = { n10, n01 } };

	assert_non_null(a);
	assert_non_null(b);
	fl_fill_random(a, n01, 7);
	fl_fill_random(b, n10, 8);
	l->app[0].src = a;
	l->app[0].src_len = n01;
	l->app[1].src = b;
	l->app[1].src_len = n10;
	fl_app_pump(&l->app[0]);
	fl_app_pump(&l->app[1]);
	assert_true(fl_run_until(l, max_ns, xfer_done, &x));
	assert_int_equal(l->app[1].rx_len, n01);
	assert_int_equal(l->app[0].rx_len, n10);
	assert_memory_equal(l->app[1].rx, a, n01);
	assert_memory_equal(l->app[0].rx, b, n10);
	/* Let the last ACKs land so every send buffer completes before teardown. */
	fl_run(l, 50 * MS);
	assert_int_equal(l->app[0].sends, l->app[0].sends_done);
	assert_int_equal(l->app[1].sends, l->app[1].sends_done);
	l->app[0].src = l->app[1].src = NULL;
	free(a);
	free(b);
}

static void test_tcp_handshake_negotiates_options(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn_stats cs;
	struct fl_seg g;

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, TL_TCP_ACK, &g), 1);
	assert_true(has_opt(&g, 2) && has_opt(&g, 3) && has_opt(&g, 8));
	assert_true((g.flags & (TL_TCP_ECE | TL_TCP_CWR)) == (TL_TCP_ECE | TL_TCP_CWR));
	assert_int_equal(fl_count(l, 0, 0, TL_TCP_SYN | TL_TCP_ACK, 0, &g), 1);
	assert_true(has_opt(&g, 2) && has_opt(&g, 3) && has_opt(&g, 8));
	assert_true(g.flags & TL_TCP_ECE);
	assert_false(g.flags & TL_TCP_CWR);
	assert_int_equal(g.ack, l->log[0].seq + 1);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_int_equal(cs.state, TL_TCP_ESTABLISHED);
	assert_true(cs.ts && cs.ws && cs.ecn);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_int_equal(cs.state, TL_TCP_ESTABLISHED);
	assert_true(cs.srtt_us > 0);
	assert_int_equal(l->nlog, 3);
}

static void test_tcp_handshake_without_options(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg cfg;
	struct tl_tcp_conn_stats cs;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.timestamps = cfg.wscale = cfg.ecn = false;
	assert_int_equal(fl_init(l, &cfg, NULL, 2), 0);
	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_false(cs.ts || cs.ws || cs.ecn);
	transfer(l, 100000, 30000, 2000 * MS);
}

static void test_tcp_timestamps_millisecond_clock(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_cfg cfg;
	struct tl_tcp_conn_stats cs;

	fl_fini(l);
	fl_cfg(&cfg);
	cfg.ts_tick_ns = 1000000;
	assert_int_equal(fl_init(l, &cfg, NULL, 5), 0);
	l->delay_ns = 3000000; /* 6 ms round trip: visible to a 1 ms clock */
	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_get_stats(l->app[1].conn, &cs);
	assert_true(cs.ts);
	assert_true(cs.srtt_us >= 5000 && cs.srtt_us <= 7000);
	transfer(l, 50000, 50000, 2000 * MS);
	assert_int_equal(fl_fini(l), 0);
	cfg.ts_tick_ns = 10; /* finer than the clock we promise to keep */
	assert_int_equal(fl_init(l, &cfg, NULL, 5), -EINVAL);
}

static void test_tcp_data_both_ways(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	transfer(l, 300000, 200000, 2000 * MS);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.retrans, 0);
	assert_int_equal(st.drop_malformed, 0);
}

static void test_tcp_delayed_ack_acks_every_second_segment(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[1448 * 10]; /* ten full segments: MSS 1460 less the timestamp option */
	uint32_t mark;
	struct fl_seg g;

	assert_int_equal(fl_open_pair(l), 0);
	mark = l->nlog;
	/* One segment alone: its ACK waits for the delayed-ACK timer. */
	uint64_t sent = l->now, due;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 100, NULL, NULL, l->now), 0);
	fl_run(l, 20000); /* 20 us: delivered, delack (200 us) not yet due */
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, NULL), 0);
	/*
	 * The next timer, as a sleeping loop reads it (dn_hooks.due): the wheel's tick (100 us)
	 * the delayed ACK's deadline rounds up to, when tl_tcp_timers sends it, not before.
	 */
	due = tl_tcp_next_timer(l->stack[0]);
	assert_int_equal(due % (100 * 1000), 0);
	assert_true(due >= sent + 200 * 1000 && due < sent + 320 * 1000);
	fl_run(l, due - 1 - l->now);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, NULL), 0);
	fl_run(l, 1);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, &g), 1);
	/* Ten full segments: about one ACK per two. */
	mark = l->nlog;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	fl_run(l, 2 * MS);
	assert_int_equal(fl_count(l, mark, 0, TL_TCP_ACK, 0, NULL), 5);
	assert_int_equal(l->app[0].rx_len, 100 + sizeof(buf));
}

/* ---- loss of each kind of segment -------------------------------------------- */

struct drop_first {
	int from;
	uint8_t all, none;
	uint32_t min_len;
	int remaining;
};

static bool drop_first_filter(void *arg, const struct fl_seg *g)
{
	struct drop_first *d = arg;

	if (d->remaining <= 0 || g->from != d->from || (g->flags & d->all) != d->all ||
	    (g->flags & d->none) || g->len < d->min_len)
		return false;
	d->remaining--;
	return true;
}

static void test_tcp_syn_lost_retransmitted(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 1, .all = TL_TCP_SYN, .none = TL_TCP_ACK, .remaining = 2 };

	l->filter = drop_first_filter;
	l->filter_arg = &d;
	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_SYN, 0, NULL), 3);
	transfer(l, 5000, 5000, 100 * MS);
}

static void test_tcp_synack_lost_retransmitted(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 0, .all = TL_TCP_SYN | TL_TCP_ACK, .remaining = 1 };

	l->filter = drop_first_filter;
	l->filter_arg = &d;
	assert_int_equal(fl_open_pair(l), 0);
	assert_true(fl_count(l, 0, 0, TL_TCP_SYN | TL_TCP_ACK, 0, NULL) >= 2);
	transfer(l, 5000, 5000, 100 * MS);
}

static void test_tcp_handshake_ack_lost_recovered_by_data(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 1, .all = TL_TCP_ACK, .none = TL_TCP_SYN, .remaining = 1 };
	static uint8_t msg[] = "hello";

	l->filter = drop_first_filter;
	l->filter_arg = &d;
	assert_int_equal(fl_listen(l, 0, 80), 0);
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].connected, 1);
	assert_int_equal(l->app[0].accepted, 0); /* the third segment of the handshake was lost */
	assert_int_equal(tl_tcp_send(l->app[1].conn, msg, 5, NULL, NULL, l->now), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].accepted, 1);
	assert_int_equal(l->app[0].rx_len, 5);
	assert_memory_equal(l->app[0].rx, msg, 5);
}

static void test_tcp_data_lost_rto_retransmits(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 1, .min_len = 1, .remaining = 1 };
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_first_filter;
	l->filter_arg = &d;
	transfer(l, 0, 1000, 100 * MS); /* one lone segment: only the RTO can repair it */
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 1);
	assert_int_equal(st.retrans, 1);
}

/*
 * SRTT follows a round trip of microseconds down. Kept in whole microseconds, srtt - srtt/8
 * + r/8 stopped falling at 7 us once the samples were under 8 us (their eighth was 0). The
 * samples go in directly: a transfer's last ACK may be a delayed one, whose sample is not.
 */
static void test_tcp_srtt_follows_a_microsecond_rtt(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn *c;
	struct tl_tcp_conn_stats cs;

	assert_int_equal(fl_open_pair(l), 0);
	c = l->app[1].conn;
	tl_cc_rtt_sample(c, 100000);
	for (int i = 0; i < 64; i++)
		tl_cc_rtt_sample(c, 2000);
	tl_tcp_conn_get_stats(c, &cs);
	assert_true(cs.srtt_us >= 1 && cs.srtt_us <= 3);
	assert_true(cs.rttvar_us <= 3);
	assert_int_equal(cs.rto_us, l->stack[1]->cfg.rto_min_ns / 1000u);
}

/*
 * The path's delay jumps far above the RTO (a peer descheduled, a queue building): the
 * timer fires although nothing was lost. The ACK that then arrives echoes the original's
 * timestamp, so Eifel detection (RFC 3522) undoes the timeout: the window comes back.
 */
static void test_tcp_spurious_rto_undone_by_eifel(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_stats st;
	struct tl_tcp_conn_stats before, after;

	assert_int_equal(fl_open_pair(l), 0);
	transfer(l, 0, 20000, 100 * MS); /* RTT samples of ~20 us: RTO at its 1 ms floor */
	tl_tcp_conn_get_stats(l->app[1].conn, &before);
	l->delay_ns = 3 * MS;            /* 6 ms round trip from now on */
	l->app[0].rx_len = 0;            /* a second transfer, checked on its own */
	l->app[1].src_off = 0;
	transfer(l, 0, 1000, 500 * MS);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	tl_tcp_conn_get_stats(l->app[1].conn, &after);
	assert_true(st.rto_fired >= 1);
	assert_int_equal(st.spurious_rto, 1);
	assert_true(after.cwnd >= before.cwnd);
}

struct rto_wait {
	struct fl_link *l;
	int node;
	uint64_t n;               /* until this many timeouts fired on node */
};

static bool rto_fired(void *arg)
{
	struct rto_wait *w = arg;
	struct tl_tcp_stats st;

	tl_tcp_stack_get_stats(w->l->stack[w->node], &st);
	return st.rto_fired >= w->n;
}

/* True when no segment `from` sent carries a sequence number below data it sent before
 * (probes aside): a pure ACK below what the peer already holds is unacceptable there. */
static bool acks_never_behind_sent(const struct fl_link *l, int from)
{
	bool any = false;
	uint32_t end = 0;

	for (uint32_t i = 0; i < l->nlog && i < FL_LOG_MAX; i++) {
		const struct fl_seg *g = &l->log[i];
		if (g->from != from || (g->flags & TL_TCP_SYN))
			continue;
		if (any && g->len == 0 && (int32_t)(g->seq - end) < 0)
			return false;
		if (g->len > 0 && (!any || (int32_t)(g->seq + g->len - end) > 0)) {
			end = g->seq + g->len;
			any = true;
		}
	}
	return true;
}

/*
 * The interop stall with 100 Linux connections over TAP: a short message (40 bytes) is
 * lost twice; while its RTO backs off, the app queues more. The next timeout used to resend
 * a full MSS from snd_una, past everything sent before, without moving snd_max. The
 * peer's ACK for the first retransmission then arrived late (TAP queues reorder):
 * snd_una caught up with the stale snd_max, so the RTO stopped, and the ACK for the
 * bigger retransmission was "above snd_max" and dropped as bad_ack, data and all, with
 * every one after it; our pure ACKs, sent at the stale snd_max, were below what the peer
 * held, so it dropped ours too. Neither side ever moved again.
 */
static void test_tcp_rto_after_queue_grew_then_late_ack_completes(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 0, .min_len = 1, .remaining = 2 };
	static uint8_t buf[3040];
	struct xfer x = { .l = l, .want = { 0, sizeof(buf) } };
	struct rto_wait w = { .l = l, .node = 0, .n = 1 };
	uint8_t seg[128], opt[12] = { 1, 1, 8, 10 };
	uint32_t tsval, tsecr, rto1_tsval, una;
	struct tl_tcp_stats st;
	struct fl_seg g;
	struct tl_tcp_tuple t;

	assert_int_equal(fl_open_pair(l), 0);
	fl_fill_random(buf, sizeof(buf), 21);
	l->filter = drop_first_filter;
	l->filter_arg = &d;
	l->app[0].src = buf;
	l->app[0].src_len = 40;
	fl_app_pump(&l->app[0]);
	assert_int_equal(fl_count(l, 0, 0, 0, 0, &g), 2); /* SYN-ACK, then the 40 bytes */
	una = g.seq;
	/* The first retransmission is lost too; then the app queues 3000 bytes more. */
	assert_true(fl_run_until(l, 100 * MS, rto_fired, &w));
	assert_int_equal(d.remaining, 0);
	fl_count(l, 0, 0, TL_TCP_PSH, 0, &g);
	assert_true(g.dropped && g.seq == una);
	assert_true(fl_seg_ts(&g, &rto1_tsval, &tsecr));
	l->app[0].src_len = sizeof(buf);
	fl_app_pump(&l->app[0]);
	w.n = 2;
	assert_true(fl_run_until(l, 100 * MS, rto_fired, &w));
	/* Second retransmission on the wire; the peer's ACK of the first one arrives now. */
	assert_true(fl_count(l, 0, 1, 0, 0, &g) > 0);
	assert_true(fl_seg_ts(&g, &tsval, &tsecr));
	opt[4] = (uint8_t)(tsval >> 24); opt[5] = (uint8_t)(tsval >> 16);
	opt[6] = (uint8_t)(tsval >> 8);  opt[7] = (uint8_t)tsval;
	opt[8] = (uint8_t)(rto1_tsval >> 24); opt[9] = (uint8_t)(rto1_tsval >> 16);
	opt[10] = (uint8_t)(rto1_tsval >> 8); opt[11] = (uint8_t)rto1_tsval;
	tl_tcp_conn_tuple(l->app[1].conn, &t);
	fl_inject(l, 0, seg, fl_build(seg, t.lport, t.rport, g.seq + g.len, una + 40u, TL_TCP_ACK,
				      g.wnd, opt, sizeof(opt), NULL, 0), 0);
	assert_true(fl_run_until(l, 1000 * MS, xfer_done, &x));
	assert_memory_equal(l->app[1].rx, buf, sizeof(buf));
	fl_run(l, 50 * MS);
	assert_int_equal(l->app[0].sends_done, l->app[0].sends);
	assert_int_equal(l->app[0].sends_failed, 0);
	tl_tcp_stack_get_stats(l->stack[0], &st);
	assert_int_equal(st.drop_bad_ack, 0);
	assert_true(acks_never_behind_sent(l, 0));
	l->app[0].src = NULL;
}

static void test_tcp_ack_lost_data_still_completes(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 0, .all = TL_TCP_ACK, .remaining = 3 };

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_first_filter;
	l->filter_arg = &d;
	transfer(l, 0, 50000, 200 * MS);
	assert_int_equal(d.remaining, 0);
}

static bool both_closed(void *arg)
{
	struct fl_link *l = arg;

	return l->app[0].closed && l->app[1].closed;
}

static void test_tcp_fin_lost_retransmitted(void **state)
{
	struct fl_link *l = *state;
	struct drop_first d = { .from = 1, .all = TL_TCP_FIN, .remaining = 1 };

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_first_filter;
	l->filter_arg = &d;
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].eof, 0);
	assert_true(fl_run_until(l, 100 * MS, both_closed, l) == false || l->app[0].eof == 1);
	assert_int_equal(l->app[0].eof, 1);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_FIN, 0, NULL), 2);
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	assert_true(fl_run_until(l, 100 * MS, both_closed, l));
	assert_int_equal(l->app[0].closed_reason, 0);
	assert_int_equal(l->app[1].closed_reason, 0);
	fl_run(l, 20 * MS); /* TIME_WAIT runs out */
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
}

static bool drop_all(void *arg, const struct fl_seg *g)
{
	(void)arg;
	(void)g;
	return true;
}

/*
 * More pieces than one segment can slice (TL_TCP_TX_SLICES), then close, all under cork:
 * the segment that runs out of slices must not carry the FIN meant for the last byte.
 */
static void test_tcp_fin_after_more_pieces_than_slices(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100];
	struct tl_tcp_conn *c;

	assert_int_equal(fl_open_pair(l), 0);
	c = l->app[1].conn;
	fl_fill_random(buf, sizeof(buf), 12);
	tl_tcp_cork(c, true, l->now);
	for (uint32_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(tl_tcp_send(c, buf + i, 1, NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_close(c, l->now), 0);
	tl_tcp_cork(c, false, l->now);
	fl_run(l, 20 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
	assert_memory_equal(l->app[0].rx, buf, sizeof(buf));
	assert_int_equal(l->app[0].eof, 1);
	tl_tcp_close(l->app[0].conn, l->now);
	fl_run(l, 50 * MS);
}

static void test_tcp_retrans_limit_resets_and_tells_app(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[3000];
	struct tl_tcp_stats st;

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_all;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	fl_run(l, 60000 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, -ETIMEDOUT);
	tl_tcp_stack_get_stats(l->stack[1], &st);
	assert_int_equal(st.rto_fired, 13); /* 12 retransmissions, then the limit */
	assert_int_equal(st.conns_timedout, 1);
	assert_int_equal(fl_count(l, 0, 1, TL_TCP_RST, 0, NULL), 1);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
}

static void test_tcp_rto_backs_off_exponentially(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[100];
	uint64_t t[5];
	uint32_t n = 0, mark;

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_all;
	mark = l->nlog;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), NULL, NULL, l->now), 0);
	while (n < 5 && l->now < 10000 * MS) {
		uint32_t before = l->nlog;
		fl_run(l, 100000);
		if (l->nlog != before)
			t[n++] = l->now;
	}
	assert_int_equal(n, 5);
	assert_int_equal(fl_count(l, mark, 1, 0, 0, NULL), 6); /* the original and 5 resends */
	for (uint32_t i = 2; i < 5; i++) {
		uint64_t a = t[i - 1] - t[i - 2], b = t[i] - t[i - 1];
		assert_true(b >= 2 * a - 200000 && b <= 2 * a + 200000);
	}
	l->filter = NULL;
	fl_run(l, 5000 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(buf));
}

static void test_tcp_connect_refused(void **state)
{
	struct fl_link *l = *state;

	assert_int_equal(fl_connect(l, 1, 0, 81), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, -ECONNREFUSED);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
}

static void test_tcp_accept_refused_resets_peer(void **state)
{
	struct fl_link *l = *state;

	l->app[0].refuse_accept = true;
	assert_int_equal(fl_listen(l, 0, 80), 0);
	assert_int_equal(fl_connect(l, 1, 0, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].closed, 1);
	assert_int_equal(l->app[1].closed_reason, -ECONNRESET);
	assert_int_equal(l->app[0].closed, 0); /* never attached to the app */
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
}

/* ---- open and close variants ---------------------------------------------------- */

static void test_tcp_simultaneous_open(void **state)
{
	struct fl_link *l = *state;

	/* Both connect to each other's port; the SYNs cross on the wire. */
	assert_int_equal(fl_connect(l, 0, 5000, 6000), 0);
	assert_int_equal(fl_connect(l, 1, 6000, 5000), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].connected, 1);
	assert_int_equal(l->app[1].connected, 1);
	assert_int_equal(fl_count(l, 0, -1, TL_TCP_SYN | TL_TCP_ACK, 0, NULL), 2);
	transfer(l, 20000, 20000, 100 * MS);
}

static void test_tcp_simultaneous_close(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_conn_stats cs;

	assert_int_equal(fl_open_pair(l), 0);
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	tl_tcp_conn_get_stats(l->app[0].conn, &cs);
	assert_int_equal(cs.state, TL_TCP_FIN_WAIT_1);
	assert_true(fl_run_until(l, 10 * MS, both_closed, l));
	assert_int_equal(l->app[0].closed_reason, 0);
	assert_int_equal(l->app[1].closed_reason, 0);
	assert_int_equal(l->app[0].eof, 1);
	assert_int_equal(l->app[1].eof, 1);
	/* Both went through CLOSING into TIME_WAIT, which expires on its own. */
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
	fl_run(l, 10 * MS);
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
}

static void test_tcp_time_wait_reuse_by_new_syn(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_tuple t;

	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_tuple(l->app[1].conn, &t);
	/* The server closes first, so the server holds TIME_WAIT. */
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, both_closed, l));
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 1);
	/* Same 4-tuple again, well within TIME_WAIT: the later timestamp proves it is new. */
	l->app[0].accepted = l->app[1].connected = 0;
	assert_int_equal(fl_connect(l, 1, t.lport, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].accepted, 1);
	assert_int_equal(l->app[1].connected, 1);
	free(l->app[0].rx);
	free(l->app[1].rx);
	l->app[0].rx = l->app[1].rx = NULL;
	l->app[0].rx_len = l->app[1].rx_len = l->app[0].rx_cap = l->app[1].rx_cap = 0;
	transfer(l, 10000, 10000, 100 * MS);
}

static void test_tcp_time_wait_reuse_by_own_connect(void **state)
{
	struct fl_link *l = *state;
	struct tl_tcp_tuple t;

	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_conn_tuple(l->app[1].conn, &t);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0); /* client: TIME_WAIT */
	fl_run(l, 1 * MS);
	assert_int_equal(tl_tcp_close(l->app[0].conn, l->now), 0);
	assert_true(fl_run_until(l, 10 * MS, both_closed, l));
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 1);
	l->app[0].accepted = l->app[1].connected = 0;
	assert_int_equal(fl_connect(l, 1, t.lport, 80), 0);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[1].connected, 1);
	assert_int_equal(l->app[0].accepted, 1);
}

static void test_tcp_abort_sends_rst(void **state)
{
	struct fl_link *l = *state;

	assert_int_equal(fl_open_pair(l), 0);
	tl_tcp_abort(l->app[1].conn);
	assert_int_equal(l->app[1].closed_reason, -ECONNABORTED);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].closed, 1);
	assert_int_equal(l->app[0].closed_reason, -ECONNRESET);
}

/* ---- zero copy ----------------------------------------------------------------- */

struct done_rec {
	int calls, status;
	uint64_t at;
};

static void rec_done(void *arg, int status)
{
	struct done_rec *d = arg;

	d->calls++;
	d->status = status;
}

static void test_tcp_send_buffer_held_until_acked_and_released(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[4000];
	struct done_rec d = { 0 };
	struct drop_first drop = { .from = 0, .all = TL_TCP_ACK, .remaining = 100 };

	assert_int_equal(fl_open_pair(l), 0);
	l->hold_sbufs = true;
	l->filter = drop_first_filter;
	l->filter_arg = &drop;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), rec_done, &d, l->now), 0);
	assert_int_equal(tl_tcp_sbufs_in_use(l->stack[1]), 1);
	fl_run(l, 1 * MS);
	assert_int_equal(l->app[0].rx_len, sizeof(buf)); /* delivered, but no ACK got back */
	assert_int_equal(d.calls, 0);
	l->filter = NULL;
	fl_run(l, 50 * MS);
	assert_int_equal(d.calls, 1);
	assert_int_equal(d.status, 0);
	assert_int_equal(tl_tcp_sbufs_in_use(l->stack[1]), 0);
}

static void test_tcp_send_buffer_completed_with_error_on_reset(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[4000];
	struct done_rec d = { 0 };

	assert_int_equal(fl_open_pair(l), 0);
	l->filter = drop_all;
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, sizeof(buf), rec_done, &d, l->now), 0);
	tl_tcp_abort(l->app[1].conn);
	assert_int_equal(d.calls, 1);
	assert_int_equal(d.status, -ECONNABORTED);
}

static void test_tcp_recv_packets_held_by_receiver(void **state)
{
	struct fl_link *l = *state;

	assert_int_equal(fl_open_pair(l), 0);
	l->app[0].hold_pkts = true;
	transfer(l, 0, 20000, 100 * MS);
	assert_true(l->app[0].nheld > 0);
	assert_true(l->holds >= l->app[0].nheld);
	fl_app_release_held(&l->app[0]);
}

static void test_tcp_cork_coalesces_small_sends(void **state)
{
	struct fl_link *l = *state;
	static uint8_t hdr[32], body[1000], tail[400];
	uint32_t mark;
	struct fl_seg g;

	assert_int_equal(fl_open_pair(l), 0);
	mark = l->nlog;
	tl_tcp_cork(l->app[1].conn, true, l->now);
	assert_int_equal(tl_tcp_send(l->app[1].conn, hdr, sizeof(hdr), NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, body, sizeof(body), NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, tail, sizeof(tail), NULL, NULL, l->now), 0);
	assert_int_equal(l->nlog, mark); /* nothing left while corked */
	tl_tcp_cork(l->app[1].conn, false, l->now);
	assert_int_equal(fl_count(l, mark, 1, 0, 0, &g), 1);
	assert_int_equal(g.len, 1432); /* one segment, three zero-copy slices */
	/* Uncorked, each send leaves at once. */
	mark = l->nlog;
	assert_int_equal(tl_tcp_send(l->app[1].conn, hdr, sizeof(hdr), NULL, NULL, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, body, sizeof(body), NULL, NULL, l->now), 0);
	assert_int_equal(fl_count(l, mark, 1, 0, 0, NULL), 2);
	fl_run(l, 5 * MS);
	assert_int_equal(l->app[0].rx_len, 2 * 32 + 2 * 1000 + 400);
	/* Idle: no timer left armed on either side. */
	assert_true(tl_tcp_next_timer(l->stack[0]) == UINT64_MAX);
	assert_true(tl_tcp_next_timer(l->stack[1]) == UINT64_MAX);
}

/* ---- many connections ------------------------------------------------------------ */

#define NCONN 40
#define PER_CONN 20000u

struct mc_slot {
	struct fl_link *l;
	int node;
	uint32_t id;          /* learnt from the first byte on the server side */
	uint32_t got, bad;
	int closed;
	bool eof;
};

struct mc {
	struct mc_slot cli[NCONN], srv[NCONN];
	uint32_t nsrv;
	uint8_t data[NCONN][PER_CONN];
};

static void mc_recv(void *arg, struct tl_tcp_conn *c, const uint8_t *data, uint32_t len, void *pkt)
{
	struct mc_slot *m = arg;

	(void)pkt;
	if (!data) {
		m->eof = true;
		tl_tcp_close(c, m->l->now);
		return;
	}
	for (uint32_t i = 0; i < len; i++, m->got++) {
		if (m->got == 0)
			m->id = data[i];
		if (data[i] != (uint8_t)(m->got == 0 ? m->id : m->id * 7u + m->got))
			m->bad++;
	}
	tl_tcp_recved(c, len, m->l->now);
}

static void mc_closed(void *arg, struct tl_tcp_conn *c, int reason)
{
	struct mc_slot *m = arg;

	(void)c;
	m->closed = reason == 0 ? 1 : -1;
}

static const struct tl_tcp_cbs mc_conn_cbs = { .recv = mc_recv, .closed = mc_closed };

static int mc_accept(void *arg, struct tl_tcp_conn *c)
{
	struct mc *m = arg;
	struct mc_slot *s = &m->srv[m->nsrv++];

	s->l = m->cli[0].l;
	tl_tcp_conn_set_cbs(c, &mc_conn_cbs, s);
	return 0;
}

static bool mc_done(void *arg)
{
	struct mc *m = arg;

	for (uint32_t i = 0; i < NCONN; i++)
		if (m->cli[i].closed == 0 || m->srv[i].closed == 0)
			return false;
	return m->nsrv == NCONN;
}

static void test_tcp_many_connections_interleaved(void **state)
{
	struct fl_link *l = *state;
	static const struct tl_tcp_cbs lcbs = { .accept = mc_accept };
	struct tl_tcp_listener *lis;
	struct mc *m = calloc(1, sizeof(*m));
	struct tl_tcp_conn *cc[NCONN];

	assert_non_null(m);
	l->loss_ppm = 10000;
	l->reorder_ppm = 10000;
	assert_int_equal(tl_tcp_listen(l->stack[0], l->addr[0], 80, NCONN, &lcbs, m, &lis), 0);
	for (uint32_t i = 0; i < NCONN; i++) {
		struct tl_tcp_tuple t = { .laddr = l->addr[1], .raddr = l->addr[0], .rport = 80 };
		m->cli[i].l = l;
		for (uint32_t j = 0; j < PER_CONN; j++)
			m->data[i][j] = (uint8_t)(j == 0 ? i : i * 7u + j);
		assert_int_equal(tl_tcp_connect(l->stack[1], &t, &mc_conn_cbs, &m->cli[i], l->now, &cc[i]), 0);
		/* Queued before the handshake completes: sent once it does. */
		assert_int_equal(tl_tcp_send(cc[i], m->data[i], PER_CONN, NULL, NULL, l->now), 0);
		assert_int_equal(tl_tcp_close(cc[i], l->now), 0);
	}
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), NCONN);
	assert_true(fl_run_until(l, 20000 * MS, mc_done, m));
	for (uint32_t i = 0; i < NCONN; i++) {
		assert_int_equal(m->srv[i].got, PER_CONN);
		assert_int_equal(m->srv[i].bad, 0);
		assert_true(m->srv[i].eof);
		assert_int_equal(m->srv[i].closed, 1);
		assert_int_equal(m->cli[i].closed, 1);
	}
	fl_run(l, 100 * MS); /* TIME_WAIT drains */
	assert_int_equal(tl_tcp_conn_count(l->stack[0]), 0);
	assert_int_equal(tl_tcp_conn_count(l->stack[1]), 0);
	free(m);
}

static void test_tcp_send_refuses_bad_calls(void **state)
{
	struct fl_link *l = *state;
	static uint8_t buf[16];
	struct tl_tcp_cfg cfg;

	assert_int_equal(fl_open_pair(l), 0);
	fl_cfg(&cfg);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 0, NULL, NULL, l->now), -EINVAL);
	assert_int_equal(tl_tcp_send(l->app[1].conn, NULL, 5, NULL, NULL, l->now), -EINVAL);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), 0);
	assert_int_equal(tl_tcp_send(l->app[1].conn, buf, 5, NULL, NULL, l->now), -ENOTCONN);
	assert_int_equal(tl_tcp_close(l->app[1].conn, l->now), -ENOTCONN);
	fl_run(l, 10 * MS);
	assert_int_equal(fl_fini(l), 0);
	cfg.mss = 10;
	assert_int_equal(fl_init(l, &cfg, NULL, 6), -EINVAL);
	fl_cfg(&cfg);
	cfg.rto_max_ns = cfg.rto_min_ns - 1;
	assert_int_equal(fl_init(l, &cfg, NULL, 6), -EINVAL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_handshake_negotiates_options),
		T(test_tcp_handshake_without_options),
		T(test_tcp_timestamps_millisecond_clock),
		T(test_tcp_data_both_ways),
		T(test_tcp_delayed_ack_acks_every_second_segment),
		T(test_tcp_syn_lost_retransmitted),
		T(test_tcp_synack_lost_retransmitted),
		T(test_tcp_handshake_ack_lost_recovered_by_data),
		T(test_tcp_data_lost_rto_retransmits),
		T(test_tcp_srtt_follows_a_microsecond_rtt),
		T(test_tcp_spurious_rto_undone_by_eifel),
		T(test_tcp_rto_after_queue_grew_then_late_ack_completes),
		T(test_tcp_ack_lost_data_still_completes),
		T(test_tcp_fin_lost_retransmitted),
		T(test_tcp_fin_after_more_pieces_than_slices),
		T(test_tcp_retrans_limit_resets_and_tells_app),
		T(test_tcp_rto_backs_off_exponentially),
		T(test_tcp_connect_refused),
		T(test_tcp_accept_refused_resets_peer),
		T(test_tcp_simultaneous_open),
		T(test_tcp_simultaneous_close),
		T(test_tcp_time_wait_reuse_by_new_syn),
		T(test_tcp_time_wait_reuse_by_own_connect),
		T(test_tcp_abort_sends_rst),
		T(test_tcp_send_buffer_held_until_acked_and_released),
		T(test_tcp_send_buffer_completed_with_error_on_reset),
		T(test_tcp_recv_packets_held_by_receiver),
		T(test_tcp_cork_coalesces_small_sends),
		T(test_tcp_many_connections_interleaved),
		T(test_tcp_send_refuses_bad_calls),
	};

	return cmocka_run_group_tests_name("tcp", tests, NULL, NULL);
}
