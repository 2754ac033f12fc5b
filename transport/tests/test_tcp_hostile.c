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

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tcp_zero_window_probes_give_up_when_unanswered),
		T(test_tcp_keepalive_detects_silent_peer),
	};

	return cmocka_run_group_tests_name("tcp_hostile", tests, NULL, NULL);
}
