/*
 * test_steer.c — RSS-aware source-port choice (tl_steer.c) checked against DPDK's own
 * software Toeplitz, rte_softrss (header-inline, no EAL needed): the hash agrees for
 * random tuples and keys, and every port tl_steer_pick_port returns really lands the
 * reply flow on the wanted queue under that key and redirection table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rte_thash.h>

#include "transport/tl_tcp.h"
#include "tcp_fakelink.h"

/* The symmetric key (0x6d5a repeated) wharf programs so both directions hash alike. */
static void sym_key(uint8_t key[40])
{
	for (int i = 0; i < 40; i += 2) {
		key[i] = 0x6d;
		key[i + 1] = 0x5a;
	}
}

static uint32_t softrss(const uint8_t key[40], uint32_t saddr, uint32_t daddr, uint16_t sport,
			uint16_t dport)
{
	struct rte_ipv4_tuple t = { .src_addr = saddr, .dst_addr = daddr };

	t.sport = sport;
	t.dport = dport;
	return rte_softrss((uint32_t *)&t, RTE_THASH_V4_L4_LEN, key);
}

static void test_steer_hash_matches_rte_softrss(void **state)
{
	uint8_t key[40];
	uint64_t x = 99;

	(void)state;
	for (int k = 0; k < 20; k++) {
		if (k == 0)
			sym_key(key);
		else
			fl_fill_random(key, sizeof(key), (uint64_t)k);
		for (int i = 0; i < 500; i++) {
			uint32_t sa, da;
			uint16_t sp, dp;
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			sa = (uint32_t)(x >> 32);
			da = (uint32_t)x;
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			sp = (uint16_t)(x >> 48);
			dp = (uint16_t)(x >> 16);
			assert_int_equal(tl_steer_hash(key, sa, da, sp, dp), softrss(key, sa, da, sp, dp));
		}
	}
}

static void test_steer_pick_port_lands_on_wanted_queue(void **state)
{
	uint8_t key[40];
	uint16_t reta[128];
	uint32_t laddr = 0x0a000001u, raddr = 0x0a000002u;

	(void)state;
	fl_fill_random(key, sizeof(key), 1234);
	for (uint32_t i = 0; i < 128; i++)
		reta[i] = (uint16_t)(i % 4u); /* 4 queues, round robin as wharf programs it */
	for (uint16_t q = 0; q < 4; q++) {
		uint16_t start = 49152;
		for (int n = 0; n < 50; n++) {
			uint16_t p;
			assert_int_equal(tl_steer_pick_port(key, reta, 128, q, laddr, raddr, 5000, 49152, 65535,
							    start, NULL, NULL, &p), 0);
			assert_true(p >= 49152);
			/* What the NIC computes for the reply: src = remote, dst = local. */
			assert_int_equal(reta[softrss(key, raddr, laddr, 5000, p) % 128], q);
			assert_int_equal(tl_steer_queue(key, reta, 128, raddr, laddr, 5000, p), q);
			start = (uint16_t)(p + 1);
		}
	}
}

static bool odd_in_use(void *arg, uint16_t p)
{
	(void)arg;
	return p & 1u;
}

static void test_steer_pick_port_skips_ports_in_use(void **state)
{
	uint8_t key[40];
	uint16_t reta[64], p;

	(void)state;
	sym_key(key);
	for (uint32_t i = 0; i < 64; i++)
		reta[i] = (uint16_t)(i & 1u);
	assert_int_equal(tl_steer_pick_port(key, reta, 64, 1, 0x0a000001u, 0x0a000002u, 80, 40000, 50000,
					    40000, odd_in_use, NULL, &p), 0);
	assert_int_equal(p & 1u, 0);
	assert_int_equal(tl_steer_queue(key, reta, 64, 0x0a000002u, 0x0a000001u, 80, p), 1);
}

static void test_steer_pick_port_fails_when_no_port_fits(void **state)
{
	uint8_t key[40];
	uint16_t reta[8] = { 0 }, p = 0;

	(void)state;
	sym_key(key);
	/* Queue 3 is in no entry of the table: nothing can land there. */
	assert_int_equal(tl_steer_pick_port(key, reta, 8, 3, 1, 2, 80, 1000, 1100, 1000, NULL, NULL, &p),
			 -EADDRNOTAVAIL);
	assert_int_equal(tl_steer_pick_port(key, reta, 0, 0, 1, 2, 80, 1000, 1100, 1000, NULL, NULL, &p),
			 -EINVAL);
	assert_int_equal(tl_steer_pick_port(key, reta, 8, 0, 1, 2, 80, 1100, 1000, 1000, NULL, NULL, &p),
			 -EINVAL);
}

static void test_steer_sw_owner_follows_port_slices(void **state)
{
	uint32_t count[4] = { 0 };
	uint64_t x = 3;

	(void)state;
	for (uint32_t idx = 0; idx < 4; idx++) {
		uint16_t start = 49152;
		for (int k = 0; k < 200; k++) {
			uint16_t p;
			assert_int_equal(tl_steer_sw_pick_port(idx, 4, 49152, 65535, start, NULL, NULL, &p), 0);
			assert_true(p >= start || k > 0);
			/* The reply (peer -> us, to port p) is handed to the lcore that opened it. */
			assert_int_equal(tl_steer_sw_owner(0x0a000002u, 0x0a000001u, 80, p, 49152, 65535, 4),
					 idx);
			start = (uint16_t)(p + 1u);
		}
	}
	/* Passive opens (port 80, outside the range) spread over all lcores. */
	for (int i = 0; i < 8000; i++) {
		uint32_t o;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		o = tl_steer_sw_owner((uint32_t)(x >> 32), 0x0a000001u, (uint16_t)(x >> 8), 80, 49152,
				      65535, 4);
		assert_true(o < 4);
		count[o]++;
	}
	for (int i = 0; i < 4; i++)
		assert_true(count[i] > 1600 && count[i] < 2400);
	assert_int_equal(tl_steer_sw_owner(1, 2, 3, 4, 49152, 65535, 1), 0);
}

static bool low_half_in_use(void *arg, uint16_t p)
{
	(void)arg;
	return p < 60000;
}

static void test_steer_sw_pick_port_wraps_and_fails_cleanly(void **state)
{
	uint16_t p = 0;

	(void)state;
	/* Starting past the last port of the slice wraps to its first. */
	assert_int_equal(tl_steer_sw_pick_port(0, 3, 100, 110, 110, NULL, NULL, &p), 0);
	assert_int_equal(p, 100); /* slice 0: 100 103 106 109 */
	assert_int_equal(tl_steer_sw_pick_port(1, 3, 100, 110, 110, NULL, NULL, &p), 0);
	assert_int_equal(p, 110); /* slice 1: 101 104 107 110 */
	assert_int_equal(tl_steer_sw_pick_port(2, 3, 100, 110, 104, NULL, NULL, &p), 0);
	assert_int_equal(p, 105);
	assert_int_equal(tl_steer_sw_pick_port(0, 2, 49152, 65535, 49152, low_half_in_use, NULL, &p), 0);
	assert_true(p >= 60000 && (p - 49152) % 2 == 0);
	assert_int_equal(tl_steer_sw_pick_port(0, 2, 100, 101, 100, low_half_in_use, NULL, &p),
			 -EADDRNOTAVAIL);
	assert_int_equal(tl_steer_sw_pick_port(5, 8, 100, 102, 100, NULL, NULL, &p), -EADDRNOTAVAIL);
	assert_int_equal(tl_steer_sw_pick_port(4, 4, 100, 200, 100, NULL, NULL, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steer_hash_matches_rte_softrss),
		cmocka_unit_test(test_steer_pick_port_lands_on_wanted_queue),
		cmocka_unit_test(test_steer_pick_port_skips_ports_in_use),
		cmocka_unit_test(test_steer_pick_port_fails_when_no_port_fits),
		cmocka_unit_test(test_steer_sw_owner_follows_port_slices),
		cmocka_unit_test(test_steer_sw_pick_port_wraps_and_fails_cleanly),
	};

	return cmocka_run_group_tests_name("steer", tests, NULL, NULL);
}
