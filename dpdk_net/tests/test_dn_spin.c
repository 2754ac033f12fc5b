/*
 * test_dn_spin.c — the spin of a sleeping loop (dn_spin, dn.h): the window after work, and
 * the CPU given up while spinning to a thread that wants it.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dpdk_net/dn.h"

#define MS 1000000ull /* ticks (ns) in a millisecond */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_dn_spin_polls_for_the_window_after_work(void **state)
{
	struct dn_spin s;
	uint64_t t = 5 * MS;

	(void)state;
	dn_spin_init(&s, 50, 1000); /* 50 us, in ns */
	assert_false(dn_spin_more(&s, t)); /* no work yet: sleep at once */
	dn_spin_work(&s);
	/* The window opens at the first idle check after the work, however long it took. */
	assert_true(dn_spin_more(&s, t));
	assert_true(dn_spin_more(&s, t + 49999));
	assert_false(dn_spin_more(&s, t + 50000));
	assert_false(dn_spin_more(&s, t + 3 * MS));
	/* One window that ran out, counted once; none that work ended. */
	assert_int_equal(s.expired, 1);
	assert_int_equal(s.caught, 0);
	/* Work again (after the sleep: not caught by a spin), and a new window from the idle
	 * check after it: work that outlasted the window still gets the whole window. */
	dn_spin_work(&s);
	assert_int_equal(s.caught, 0);
	assert_true(dn_spin_more(&s, t + 4 * MS));
	assert_true(dn_spin_more(&s, t + 4 * MS + 49999));
	/* Work while that window is open: the spin caught it. */
	dn_spin_work(&s);
	assert_int_equal(s.caught, 1);
	assert_int_equal(s.expired, 1);
}

static void test_dn_spin_window_zero_never_spins(void **state)
{
	struct dn_spin s;

	(void)state;
	dn_spin_init(&s, 0, 1000);
	dn_spin_work(&s);
	assert_false(dn_spin_more(&s, 7 * MS));
}

/*
 * The window adapts: a sleep past the most halves it (down to DN_SPIN_MIN_US), a sleep an event
 * ended within the most doubles it (up to the most), so a gap the window missed is caught a
 * few exchanges later.
 */
static void test_dn_spin_window_adapts_to_the_gaps(void **state)
{
	struct dn_spin s;
	uint64_t t = 5 * MS;

	(void)state;
	dn_spin_init(&s, 200, 1000); /* at most 200 us, in ns */
	assert_int_equal(s.win, 200000);
	/* Idle: each sleep past the most (a 1 ms timeout) halves the window, to the least. */
	dn_spin_work(&s);
	assert_true(dn_spin_more(&s, t));
	assert_false(dn_spin_more(&s, t + 200000));
	for (int i = 1; i <= 6; i++)
		dn_spin_slept(&s, t + (uint64_t)i * MS, false);
	assert_int_equal(s.win, DN_SPIN_MIN_US * 1000);
	/* Traffic with 35 us gaps: missed at 10 us, then 20, caught once the window is 40. */
	for (int i = 0; i < 3; i++) {
		t += 10 * MS;
		dn_spin_work(&s);
		assert_true(dn_spin_more(&s, t));
		if (dn_spin_more(&s, t + 35000)) {
			assert_int_equal(i, 2);
			assert_int_equal(s.win, 40000);
			break;
		}
		dn_spin_slept(&s, t + 35000, true); /* the event that ended the sleep */
	}
	assert_int_equal(s.caught, 0);
	dn_spin_work(&s);
	assert_int_equal(s.caught, 1);
	/* A timeout within the most (a caller's short poll) changes nothing. */
	assert_true(dn_spin_more(&s, t + 40000));
	assert_false(dn_spin_more(&s, t + 80000));
	dn_spin_slept(&s, t + 100000, false);
	assert_int_equal(s.win, 40000);
	/* Growth stops at the most. */
	for (int i = 0; i < 8; i++)
		dn_spin_slept(&s, t + 100000, true);
	assert_int_equal(s.win, 200000);
}

static atomic_int token;
static int efd = -1;

/*
 * Sleeps until handed a token (an eventfd), then answers it at once: an application thread
 * the loop's completion woke, which needs the CPU the loop spins on. Token 0: stop.
 */
static void *answer(void *arg)
{
	uint64_t v;

	(void)arg;
	for (;;) {
		if (read(efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
			continue;
		int t = atomic_load_explicit(&token, memory_order_acquire);
		if (t == 0)
			return NULL;
		atomic_store_explicit(&token, t + 1, memory_order_release);
	}
}

static int pin_to(pthread_t th, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(th, sizeof(set), &set);
}

/* ns for ROUNDS tokens answered by a thread on the CPU the loop spins on (s: its spin). */
#define ROUNDS 100
static uint64_t rounds_ns(struct dn_spin *s)
{
	uint64_t t0 = now_ns(), t;

	for (int r = 0; r < ROUNDS; r++) {
		int mine = 2 * r + 1;
		uint64_t one = 1;
		atomic_store_explicit(&token, mine, memory_order_release);
		assert_int_equal(write(efd, &one, sizeof(one)), (int)sizeof(one));
		dn_spin_work(s);
		do {
			t = now_ns();
			assert_true(dn_spin_more(s, t)); /* the window (10 s) never ends here */
		} while (atomic_load_explicit(&token, memory_order_acquire) != mine + 1);
	}
	return now_ns() - t0;
}

/*
 * A thread waiting for the CPU the loop spins on (an application thread the loop's
 * completion woke) runs within microseconds. The answering thread is SCHED_IDLE, so nothing
 * but the spinner giving the CPU up lets it run before a scheduler tick: 100 tokens took
 * 0.5-0.8 ms yielding and 390-480 ms with a spin that never yields (a woken thread of normal
 * policy waited 6-35 us a token there, as the scheduler's preemption decided).
 */
static void test_dn_spin_gives_the_cpu_to_a_thread_that_wants_it(void **state)
{
	struct dn_spin s;
	pthread_t th;
	cpu_set_t was;
	uint64_t yielding, holding;
	int cpu = sched_getcpu();

	(void)state;
	assert_true(cpu >= 0);
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(was), &was), 0);
	assert_int_equal(pin_to(pthread_self(), cpu), 0);
	efd = eventfd(0, EFD_CLOEXEC);
	assert_true(efd >= 0);
	assert_int_equal(pthread_create(&th, NULL, answer, NULL), 0);
	assert_int_equal(pin_to(th, cpu), 0);
	assert_int_equal(pthread_setschedparam(th, SCHED_IDLE, &(struct sched_param){0}), 0);
	dn_spin_init(&s, 10 * 1000 * 1000, 1000); /* 10 s */
	yielding = rounds_ns(&s);
	s.yield = UINT64_MAX / 2; /* a spin that never yields */
	holding = rounds_ns(&s);
	atomic_store(&token, 0);
	assert_int_equal(write(efd, &(uint64_t){1}, sizeof(uint64_t)), (int)sizeof(uint64_t));
	pthread_join(th, NULL);
	close(efd);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(was), &was), 0);
	print_message("100 tokens: %.2f ms yielding, %.2f ms holding the CPU\n", yielding / 1e6,
		      holding / 1e6);
	assert_true(holding > 3 * yielding);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dn_spin_polls_for_the_window_after_work),
		cmocka_unit_test(test_dn_spin_window_zero_never_spins),
		cmocka_unit_test(test_dn_spin_window_adapts_to_the_gaps),
		cmocka_unit_test(test_dn_spin_gives_the_cpu_to_a_thread_that_wants_it),
	};

	return cmocka_run_group_tests_name("dpdk_net spin after work", tests, NULL, NULL);
}
