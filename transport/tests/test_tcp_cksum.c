/*
 * test_tcp_cksum.c — TCP-lite's software checksum (tl_out.c) against DPDK's own,
 * rte_ipv4_udptcp_cksum (header-inline, no EAL): same value for random segments of
 * every length, however the payload is split into slices (odd splits included), and
 * a segment carrying its checksum verifies while a one-bit flip does not.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rte_byteorder.h>
#include <rte_ip.h>

#include "transport/tl_tcp.h"
#include "tcp_fakelink.h"

/* An IPv4 header and TCP segment laid out as on the wire, for rte_ipv4_udptcp_cksum. */
struct pkt {
	struct rte_ipv4_hdr ip;
	uint8_t tcp[2048];
};

static uint16_t dpdk_cksum(struct pkt *p, uint32_t saddr, uint32_t daddr, uint32_t tcp_len)
{
	memset(&p->ip, 0, sizeof(p->ip));
	p->ip.version_ihl = 0x45;
	p->ip.total_length = rte_cpu_to_be_16((uint16_t)(20 + tcp_len));
	p->ip.next_proto_id = 6;
	p->ip.src_addr = rte_cpu_to_be_32(saddr);
	p->ip.dst_addr = rte_cpu_to_be_32(daddr);
	return rte_be_to_cpu_16(rte_ipv4_udptcp_cksum(&p->ip, p->tcp));
}

static void test_tcp_cksum_matches_dpdk(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	uint64_t seed = 5;

	(void)state;
	assert_non_null(p);
	for (uint32_t len = 20; len < 1600; len += 7) {
		uint32_t saddr = 0x0a000001u + len, daddr = 0xc0a80101u ^ (len << 8);
		struct tl_tcp_slice whole = { .base = p->tcp, .len = len };
		uint16_t want;

		fl_fill_random(p->tcp, len, seed++);
		p->tcp[16] = p->tcp[17] = 0;
		want = dpdk_cksum(p, saddr, daddr, len);
		assert_int_equal(tl_tcp_cksum(saddr, daddr, len, &whole, 1), want);
	}
	free(p);
}

static void test_tcp_cksum_split_slices_same_value(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	struct tl_tcp_tx tx;

	(void)state;
	assert_non_null(p);
	for (uint32_t plen = 1; plen < 1400; plen += 97) {
		uint32_t off = 0, n = 0;
		uint16_t want;

		fl_fill_random(p->tcp, 32 + plen, plen);
		memset(&tx, 0, sizeof(tx));
		tx.saddr = 0x0a000001u;
		tx.daddr = 0x0a000002u;
		tx.hdr_len = 32;
		memcpy(tx.hdr, p->tcp, 32);
		/* Slices of odd sizes: 1, 3, 5 ... bytes, then the rest. */
		while (off < plen && n < TL_TCP_TX_SLICES) {
			uint32_t sl = n + 1 < TL_TCP_TX_SLICES ? 2 * n + 1 : plen - off;
			if (sl > plen - off)
				sl = plen - off;
			tx.slice[n].base = p->tcp + 32 + off;
			tx.slice[n].len = sl;
			off += sl;
			n++;
		}
		tx.nslices = (uint16_t)n;
		tx.payload_len = plen;
		tl_tcp_tx_cksum(&tx);
		p->tcp[16] = p->tcp[17] = 0;
		want = dpdk_cksum(p, tx.saddr, tx.daddr, 32 + plen);
		assert_int_equal((uint16_t)(tx.hdr[16] << 8 | tx.hdr[17]), want);
	}
	free(p);
}

static void test_tcp_cksum_verifies_and_catches_bit_flip(void **state)
{
	struct pkt *p = calloc(1, sizeof(*p));
	struct tl_tcp_rx rx = {0};
	uint16_t ck;

	(void)state;
	assert_non_null(p);
	fl_fill_random(p->tcp, 777, 9);
	p->tcp[16] = p->tcp[17] = 0;
	ck = dpdk_cksum(p, 1, 2, 777);
	p->tcp[16] = (uint8_t)(ck >> 8);
	p->tcp[17] = (uint8_t)ck;
	rx = (struct tl_tcp_rx){ .saddr = 1, .daddr = 2, .tcp = p->tcp, .tcp_len = 777 };
	assert_true(tl_tcp_rx_cksum_ok(&rx));
	p->tcp[400] ^= 0x10;
	assert_false(tl_tcp_rx_cksum_ok(&rx));
	p->tcp[400] ^= 0x10;
	rx.daddr = 3; /* the pseudo header counts too */
	assert_false(tl_tcp_rx_cksum_ok(&rx));
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp_cksum_matches_dpdk),
		cmocka_unit_test(test_tcp_cksum_split_slices_same_value),
		cmocka_unit_test(test_tcp_cksum_verifies_and_catches_bit_flip),
	};

	return cmocka_run_group_tests_name("tcp_cksum", tests, NULL, NULL);
}
