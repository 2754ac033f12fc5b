/*
 * test_dn_obs.c — the telemetry registry of lcore contexts (dn_obs.c) in an in-memory EAL
 * with a net_ring port: a context being destroyed is not freed while a telemetry read holds
 * it, and the slots of unregistered contexts are taken again.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "dn_testlib.h"

static struct dt_env g_env;

static int setup(void **state)
{
	(void)state;
	return dt_port_up(&g_env);
}

static int teardown(void **state)
{
	(void)state;
	dt_port_down(&g_env);
	return 0;
}

/* The slot lc is listed in, or -1. */
static int slot_of(const struct dn_lcore *lc)
{
	int found = -1;

	for (unsigned i = 0; i < DN_MAX_LCORES && found < 0; i++) {
		if (dn_obs_get(i) == lc)
			found = (int)i;
		dn_obs_put();
	}
	return found;
}

struct unreg {
	struct dn_lcore *lc;
	atomic_int done;
};

static void *unregister_main(void *arg)
{
	struct unreg *u = arg;

	dn_obs_unregister(u->lc);
	atomic_store(&u->done, 1);
	return NULL;
}

/*
 * A telemetry read that holds a context (dn_obs_get) keeps dn_obs_unregister, and so
 * dn_lcore_destroy, from returning until it lets go; the slot reads empty meanwhile, to
 * every later read.
 */
static void test_dn_obs_unregister_waits_for_a_reader(void **state)
{
	struct unreg u = { .lc = g_env.lc };
	const struct dn_lcore *held;
	struct timespec pause = { .tv_nsec = 50 * 1000 * 1000 };
	pthread_t th;
	int slot;

	(void)state;
	assert_int_equal(dn_obs_register(g_env.lc), 0);
	slot = slot_of(g_env.lc);
	assert_true(slot >= 0);
	held = dn_obs_get((unsigned)slot);
	assert_ptr_equal(held, g_env.lc);
	atomic_init(&u.done, 0);
	assert_int_equal(pthread_create(&th, NULL, unregister_main, &u), 0);
	nanosleep(&pause, NULL);
	assert_int_equal(atomic_load(&u.done), 0); /* still waiting for this read */
	assert_int_equal(slot_of(g_env.lc), -1);     /* but no longer listed */
	assert_int_equal(dn_lcore_stats(held)->rx_pkts, 0); /* and still ours to read */
	dn_obs_put();
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&u.done), 1);
}

/*
 * A process that makes and destroys contexts over its life (lanes restarted, clients
 * reopened) keeps them listed: an unregistered context's slot is taken again. Every slot
 * taken, the next registration is refused.
 */
static void test_dn_obs_slots_are_reused(void **state)
{
	(void)state;
	for (unsigned k = 0; k < 3 * DN_MAX_LCORES; k++) {
		assert_int_equal(dn_obs_register(g_env.lc), 0);
		assert_true(slot_of(g_env.lc) >= 0);
		dn_obs_unregister(g_env.lc);
		assert_int_equal(slot_of(g_env.lc), -1);
	}
	for (unsigned k = 0; k < DN_MAX_LCORES; k++)
		assert_int_equal(dn_obs_register(g_env.lc), 0);
	assert_int_equal(dn_obs_register(g_env.lc), -ENOSPC);
	assert_null(dn_obs_get(DN_MAX_LCORES)); /* past the slots: none */
	dn_obs_put();
	dn_obs_unregister(g_env.lc); /* from every slot it held */
	assert_int_equal(slot_of(g_env.lc), -1);
	assert_int_equal(dn_obs_register(g_env.lc), 0);
	dn_obs_unregister(g_env.lc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dn_obs_unregister_waits_for_a_reader),
		cmocka_unit_test(test_dn_obs_slots_are_reused),
	};
	int rc;

	if (dt_eal_init() < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	rc = cmocka_run_group_tests_name("dpdk_net telemetry registry", tests, setup, teardown);
	dn_eal_fini();
	dt_eal_remove_runtime_dir();
	return rc;
}
