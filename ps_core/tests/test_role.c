/*
 * test_role.c — the fleet-like role API: TRAINING_ROLE and Paddle's variables make a
 * worker or a server; every malformed variable is refused with a message naming it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/ps.h"

static int clean(void **state)
{
	(void)state;
	unsetenv("TRAINING_ROLE");
	unsetenv("PADDLE_TRAINER_ID");
	unsetenv("PADDLE_TRAINERS_NUM");
	unsetenv("PADDLE_PSERVERS_IP_PORT_LIST");
	unsetenv("POD_IP");
	unsetenv("PADDLE_PORT");
	return 0;
}

static void test_role_worker_from_env(void **state)
{
	struct ps_role r;
	struct ps_client_config cc = { 0 };
	char err[200] = "";

	(void)state;
	setenv("TRAINING_ROLE", "TRAINER", 1);
	setenv("PADDLE_TRAINER_ID", "2", 1);
	setenv("PADDLE_TRAINERS_NUM", "4", 1);
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6000,10.0.0.2:6000", 1);
	assert_int_equal(ps_role_from_env(&r, err, sizeof(err)), 0);
	assert_true(ps_role_is_worker(&r));
	assert_false(ps_role_is_server(&r));
	assert_int_equal(r.id, 2);
	assert_int_equal(r.n_servers, 2);
	assert_int_equal(r.n_workers, 4);
	assert_int_equal(ps_role_client_config(&r, &cc), 0);
	assert_int_equal(cc.worker_id, 2);
	assert_int_equal(cc.n_servers, 2);
}

static void test_role_server_finds_itself_in_list(void **state)
{
	struct ps_role r;
	struct ps_server_config sc = { 0 };
	char err[200] = "";

	(void)state;
	setenv("TRAINING_ROLE", "PSERVER", 1);
	setenv("PADDLE_TRAINERS_NUM", "3", 1);
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6000,10.0.0.2:6000,10.0.0.2:6001", 1);
	setenv("POD_IP", "10.0.0.2", 1);
	setenv("PADDLE_PORT", "6001", 1);
	assert_int_equal(ps_role_from_env(&r, err, sizeof(err)), 0);
	assert_true(ps_role_is_server(&r));
	assert_int_equal(r.id, 2);
	assert_int_equal(ps_role_server_config(&r, &sc), 0);
	assert_int_equal(sc.server_id, 2);
	assert_int_equal(sc.n_servers, 3);
	assert_int_equal(sc.n_workers, 3);
	assert_int_equal(ps_role_client_config(&r, &(struct ps_client_config){ 0 }), -EINVAL);
}

static void expect_bad(const char *words)
{
	struct ps_role r;
	char err[200] = "";

	assert_int_equal(ps_role_from_env(&r, err, sizeof(err)), -EINVAL);
	if (!strstr(err, words))
		fail_msg("error \"%s\" does not name \"%s\"", err, words);
}

static void test_role_bad_env_refused_with_message(void **state)
{
	(void)state;
	expect_bad("TRAINING_ROLE");
	setenv("TRAINING_ROLE", "CHEF", 1);
	expect_bad("CHEF");
	setenv("TRAINING_ROLE", "TRAINER", 1);
	expect_bad("PADDLE_PSERVERS_IP_PORT_LIST");
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6000", 1);
	expect_bad("PADDLE_TRAINERS_NUM");
	setenv("PADDLE_TRAINERS_NUM", "two", 1);
	expect_bad("two");
	setenv("PADDLE_TRAINERS_NUM", "2", 1);
	setenv("PADDLE_TRAINER_ID", "-1", 1);
	expect_bad("PADDLE_TRAINER_ID");
	setenv("PADDLE_TRAINER_ID", "2", 1);
	expect_bad("PADDLE_TRAINERS_NUM=2");
	setenv("PADDLE_TRAINER_ID", "1", 1);
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6000,,x:1", 1);
	expect_bad("entry 1");
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1", 1);
	expect_bad("ip:port");
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:1,", 1);
	expect_bad("comma");
	setenv("PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:1", 1);
	setenv("TRAINING_ROLE", "PSERVER", 1);
	expect_bad("POD_IP");
	setenv("POD_IP", "10.0.0.9", 1);
	setenv("PADDLE_PORT", "1", 1);
	expect_bad("10.0.0.9:1 is not in");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_role_worker_from_env, clean, clean),
		cmocka_unit_test_setup_teardown(test_role_server_finds_itself_in_list, clean, clean),
		cmocka_unit_test_setup_teardown(test_role_bad_env_refused_with_message, clean, clean),
	};
	return cmocka_run_group_tests_name("ps_role", tests, NULL, NULL);
}
