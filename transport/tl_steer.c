/*
 * tl_steer.c — flow-to-lcore steering for active opens: choose the local port so the
 * NIC's Toeplitz RSS hash of the replies lands on the queue (and so the lcore) that owns
 * the connection. Share-nothing needs this: the reply must arrive where the state lives.
 *
 * Call chain: tl_api connect -> tl_steer_pick_port -> tl_tcp_connect(t.lport = port).
 * Without RSS: rx lcore -> tl_steer_sw_owner -> ring to the owner lcore; the owner's
 * connect picks its port with tl_steer_sw_pick_port.
 *
 * The hash is the standard Toeplitz over the big-endian bytes of (src addr, dst addr,
 * src port, dst port) — the value rte_softrss computes with the unconverted key (the
 * unit test checks that). It is written out here rather than calling rte_softrss per
 * candidate because Toeplitz is linear over XOR: the hash of the fixed part is computed
 * once and each candidate port adds only its own 16 bits' worth, so scanning a whole
 * ephemeral range costs a few hundred thousand shifts, not 65536 full hashes.
 */
#include <errno.h>

#include "tl_tcp.h"

/* The 32-bit key window that input bit `bit` (0 = MSB of byte 0) contributes. */
static uint32_t key_window(const uint8_t key[40], uint32_t bit)
{
	uint32_t byte = bit / 8u, sh = bit % 8u;
	uint64_t w = 0;

	for (uint32_t i = 0; i < 5; i++)
		w = w << 8 | (byte + i < 40 ? key[byte + i] : 0u);
	return (uint32_t)(w >> (8u - sh));
}

static uint32_t toeplitz_word(const uint8_t key[40], uint32_t word, uint32_t bit0, uint32_t nbits)
{
	uint32_t h = 0;

	for (uint32_t i = 0; i < nbits; i++)
		if (word & (1u << (nbits - 1u - i)))
			h ^= key_window(key, bit0 + i);
	return h;
}

uint32_t tl_steer_hash(const uint8_t key[40], uint32_t saddr, uint32_t daddr, uint16_t sport,
		       uint16_t dport)
{
	return toeplitz_word(key, saddr, 0, 32) ^ toeplitz_word(key, daddr, 32, 32) ^
	       toeplitz_word(key, sport, 64, 16) ^ toeplitz_word(key, dport, 80, 16);
}

uint16_t tl_steer_queue(const uint8_t key[40], const uint16_t *reta, uint32_t reta_size,
			uint32_t saddr, uint32_t daddr, uint16_t sport, uint16_t dport)
{
	return reta[tl_steer_hash(key, saddr, daddr, sport, dport) % reta_size];
}

int tl_steer_pick_port(const uint8_t key[40], const uint16_t *reta, uint32_t reta_size, uint16_t want,
		       uint32_t laddr, uint32_t raddr, uint16_t rport, uint16_t lo, uint16_t hi,
		       uint16_t start, bool (*in_use)(void *arg, uint16_t lport), void *arg,
		       uint16_t *lport)
{
	uint32_t win[16], base, span, p;

	if (!key || !reta || reta_size == 0 || !lport || lo == 0 || hi < lo)
		return -EINVAL;
	/* Replies travel raddr:rport -> laddr:lport; that is the tuple the NIC hashes. */
	base = tl_steer_hash(key, raddr, laddr, rport, 0);
	for (uint32_t i = 0; i < 16; i++)
		win[i] = key_window(key, 80u + i);
	span = (uint32_t)hi - lo + 1u;
	if (start < lo || start > hi)
		start = lo;
	p = start;
	for (uint32_t n = 0; n < span; n++) {
		uint32_t h = base;
		for (uint32_t i = 0; i < 16; i++)
			if (p & (1u << (15u - i)))
				h ^= win[i];
		if (reta[h % reta_size] == want && (!in_use || !in_use(arg, (uint16_t)p))) {
			*lport = (uint16_t)p;
			return 0;
		}
		p = p == hi ? lo : p + 1u;
	}
	return -EADDRNOTAVAIL;
}

uint32_t tl_steer_sw_owner(uint32_t saddr, uint32_t daddr, uint16_t sport, uint16_t dport,
			   uint16_t lo, uint16_t hi, uint32_t n)
{
	uint64_t h;

	if (n <= 1)
		return 0;
	if (dport >= lo && dport <= hi)
		return (uint32_t)(dport - lo) % n;
	/* Passive side: spread by the whole tuple (64-bit multiply-xorshift mix). */
	h = ((uint64_t)saddr << 32 | daddr) ^ ((uint64_t)sport << 16 | dport) * 0x9e3779b97f4a7c15ull;
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return (uint32_t)(h % n);
}

int tl_steer_sw_pick_port(uint32_t idx, uint32_t n, uint16_t lo, uint16_t hi, uint16_t start,
			  bool (*in_use)(void *arg, uint16_t lport), void *arg, uint16_t *lport)
{
	uint32_t span, m, j0;

	if (n == 0 || idx >= n || lo == 0 || hi < lo || !lport)
		return -EINVAL;
	span = (uint32_t)hi - lo + 1u;
	if (idx >= span)
		return -EADDRNOTAVAIL;
	/* idx's slice is lo + idx + j n for j < m; scan it cyclically from start. */
	m = (span - idx + n - 1u) / n;
	j0 = start <= lo + idx ? 0 : ((uint32_t)start - lo - idx + n - 1u) / n;
	if (j0 >= m)
		j0 = 0;
	for (uint32_t k = 0; k < m; k++) {
		uint32_t p = lo + idx + ((j0 + k) % m) * n;
		if (!in_use || !in_use(arg, (uint16_t)p)) {
			*lport = (uint16_t)p;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}
