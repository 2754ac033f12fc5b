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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steer_hash_matches_rte_softrss),
		cmocka_unit_test(test_steer_pick_port_lands_on_wanted_queue),
		cmocka_unit_test(test_steer_pick_port_skips_ports_in_use),
		cmocka_unit_test(test_steer_pick_port_fails_when_no_port_fits),
	};

	return cmocka_run_group_tests_name("steer", tests, NULL, NULL);
}
