/*
 * test_fz_config.c — cmocka group for fuse's configuration (fz_config.c): documented
 * defaults, parsing knobs from text, and refusing bad values without changing anything.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "fuse/fz.h"
#include "fz_test_wire.h"

static void test_fz_config_defaults_valid_and_off(void **state)
{
	struct fz_config c;
	char err[160];

	(void)state;
	fz_config_defaults(&c);
	assert_false(c.tensor_fuse);
	assert_int_equal(c.fuse_max_bytes, FZ_DEFAULT_MAX_BYTES);
	assert_int_equal(c.fuse_threshold_bytes, FZ_DEFAULT_THRESHOLD_BYTES);
	assert_int_equal(c.fuse_max_delay_us, FZ_DEFAULT_MAX_DELAY_US);
	assert_int_equal(c.fuse_max_msgs, FZ_DEFAULT_MAX_MSGS);
	assert_int_equal(fz_config_validate(&c, err, sizeof(err)), 0);
}

static void test_fz_config_set_accepts_good_values(void **state)
{
	struct fz_config c;

	(void)state;
	fz_config_defaults(&c);
	assert_int_equal(fz_config_set(&c, "tensor_fuse", "on", NULL, 0), 0);
	assert_true(c.tensor_fuse);
	assert_int_equal(fz_config_set(&c, "tensor_fuse", "False", NULL, 0), 0);
	assert_false(c.tensor_fuse);
	assert_int_equal(fz_config_set(&c, "tensor_fuse", "1", NULL, 0), 0);
	assert_true(c.tensor_fuse);
	assert_int_equal(fz_config_set(&c, "fuse_max_bytes", "9000", NULL, 0), 0);
	assert_int_equal(c.fuse_max_bytes, 9000);
	assert_int_equal(fz_config_set(&c, "fuse_threshold_bytes", "512", NULL, 0), 0);
	assert_int_equal(c.fuse_threshold_bytes, 512);
	assert_int_equal(fz_config_set(&c, "fuse_max_delay_us", "20", NULL, 0), 0);
	assert_int_equal(c.fuse_max_delay_us, 20);
	assert_int_equal(fz_config_set(&c, "fuse_max_msgs", "64", NULL, 0), 0);
	assert_int_equal(c.fuse_max_msgs, 64);
	assert_int_equal(fz_config_set(&c, "fuse_frames", "4", NULL, 0), 0);
	assert_int_equal(c.fuse_frames, 4);
	assert_int_equal(fz_config_validate(&c, NULL, 0), 0);
}

static void test_fz_config_set_refuses_bad_values_unchanged(void **state)
{
	static const struct { const char *key, *value; } bad[] = {
		{ "tensor_fuse", "maybe" }, { "tensor_fuse", "" }, { "tensor_fuse", NULL },
		{ "fuse_max_bytes", "" }, { "fuse_max_bytes", "-1" }, { "fuse_max_bytes", "+5" },
		{ "fuse_max_bytes", " 4096" }, { "fuse_max_bytes", "4096 " },
		{ "fuse_max_bytes", "4k" }, { "fuse_max_bytes", "99999999999999999999" },
		{ "fuse_max_bytes", "255" }, { "fuse_max_bytes", "16777217" },
		{ "fuse_threshold_bytes", "0" }, { "fuse_max_delay_us", "0" },
		{ "fuse_max_delay_us", "1000001" }, { "fuse_frames", "1" },
		{ "fuse_frames", "1025" }, { "fuse_frames", "0x10" },
		{ "fuse_max_msgs", "0" }, { "fuse_max_msgs", "65536" },
	};
	struct fz_config c, before;
	char err[200];
	size_t i;

	(void)state;
	fz_config_defaults(&c);
	before = c;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(fz_config_set(&c, bad[i].key, bad[i].value, err, sizeof(err)),
				 -EINVAL);
		assert_memory_equal(&c, &before, sizeof(c));
		/* The message names the knob, so a human can find the line. */
		assert_non_null(strstr(err, bad[i].key));
	}
}

static void test_fz_config_set_unknown_key_enoent(void **state)
{
	struct fz_config c, before;

	(void)state;
	fz_config_defaults(&c);
	before = c;
	assert_int_equal(fz_config_set(&c, "fuse_bogus", "1", NULL, 0), -ENOENT);
	assert_int_equal(fz_config_set(&c, "protocol", "grpc++", NULL, 0), -ENOENT);
	assert_memory_equal(&c, &before, sizeof(c));
}

static void test_fz_config_validate_threshold_above_frame(void **state)
{
	struct fz_config c;
	char err[160];

	(void)state;
	fz_config_defaults(&c);
	c.fuse_max_bytes = 1024;
	c.fuse_threshold_bytes = 1024;  /* plus a sub-header it cannot fit */
	assert_int_equal(fz_config_validate(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "fuse_threshold_bytes"));
	c.fuse_threshold_bytes = 1024 - FZ_SUB_HDR_MAX;
	assert_int_equal(fz_config_validate(&c, err, sizeof(err)), 0);
}

static void test_fz_config_peer_create_refuses_bad_config(void **state)
{
	struct fzt_wire w;
	struct fz_peer_ops ops;
	struct fz_peer *peer = NULL;
	struct fz_config c;

	(void)state;
	fzt_wire_init(&w);
	fzt_wire_ops(&w, &ops);
	fz_config_defaults(&c);
	c.fuse_max_delay_us = 0;
	assert_int_equal(fz_peer_create(&c, &ops, &peer), -EINVAL);
	assert_null(peer);
	fz_config_defaults(&c);
	ops.wire_busy = NULL;
	assert_int_equal(fz_peer_create(&c, &ops, &peer), -EINVAL);
	assert_null(peer);
	fz_peer_destroy(NULL);
	fz_rx_destroy(NULL);
	fzt_wire_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fz_config_defaults_valid_and_off),
		cmocka_unit_test(test_fz_config_set_accepts_good_values),
		cmocka_unit_test(test_fz_config_set_refuses_bad_values_unchanged),
		cmocka_unit_test(test_fz_config_set_unknown_key_enoent),
		cmocka_unit_test(test_fz_config_validate_threshold_above_frame),
		cmocka_unit_test(test_fz_config_peer_create_refuses_bad_config),
	};
	return cmocka_run_group_tests_name("fz_config", tests, NULL, NULL);
}
