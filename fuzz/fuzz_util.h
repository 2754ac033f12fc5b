/*
 * fuzz_util.h — helpers shared by the libFuzzer harnesses in fuzz/ (header only, so each
 * harness is one translation unit plus the layer sources it exercises; fuzz/run.sh builds
 * them). Not part of any layer: nothing in the product includes this.
 *
 * What is here: an input cursor that hands out bytes and small numbers without ever
 * reading past the input (a short input reads as zeros), a splitter that cuts a byte
 * range into separately allocated pieces of exactly their length (so AddressSanitizer
 * catches a read one byte past any piece, which a view into the fuzzer's own buffer
 * would hide), and FH_CHECK, which turns a broken invariant into a crash libFuzzer
 * records (abort), with the condition printed.
 */
#ifndef WHARF_FUZZ_UTIL_H
#define WHARF_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tl_wire.h"

#define FH_CHECK(cond)                                                                      \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
				#cond);                                                     \
			abort();                                                            \
		}                                                                           \
	} while (0)

/* Reads the fuzzer's input front to back; past the end everything reads as zero. */
struct fh_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fh_u8(struct fh_in *in)
{
	uint8_t v;

	if (in->n == 0)
		return 0;
	v = in->p[0];
	in->p++;
	in->n--;
	return v;
}

static inline uint16_t fh_u16(struct fh_in *in)
{
	uint16_t lo = fh_u8(in);

	return (uint16_t)(lo | fh_u8(in) << 8);
}

static inline uint32_t fh_u32(struct fh_in *in)
{
	uint32_t lo = fh_u16(in);

	return lo | (uint32_t)fh_u16(in) << 16;
}

/* Takes up to want bytes; *got says how many there were. */
static inline const uint8_t *fh_take(struct fh_in *in, size_t want, size_t *got)
{
	const uint8_t *p = in->p;

	*got = want < in->n ? want : in->n;
	in->p += *got;
	in->n -= *got;
	return p;
}

#define FH_MAX_PIECES 8u

/*
 * A byte range cut into npieces separately malloc'd pieces (exact sizes, so ASan sees
 * any overrun). cuts[] (npieces - 1 bytes of the input) choose the cut points as
 * fractions of the length; empty pieces are skipped, as a transport never hands up one.
 */
struct fh_pieces {
	struct tl_iov iov[FH_MAX_PIECES];
	uint8_t *mem[FH_MAX_PIECES];
	uint32_t n;
};

static inline int fh_pieces_make(struct fh_pieces *ps, const uint8_t *p, uint32_t len,
				 uint32_t npieces, const uint8_t *cuts)
{
	uint32_t cut[FH_MAX_PIECES + 1], i, j, tmp;

	memset(ps, 0, sizeof(*ps));
	if (npieces < 1)
		npieces = 1;
	if (npieces > FH_MAX_PIECES)
		npieces = FH_MAX_PIECES;
	cut[0] = 0;
	for (i = 1; i < npieces; i++)
		cut[i] = (uint32_t)(((uint64_t)len * cuts[i - 1]) / 255u);
	cut[npieces] = len;
	for (i = 1; i < npieces; i++) /* insertion sort: cuts are few */
		for (j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
			tmp = cut[j];
			cut[j] = cut[j - 1];
			cut[j - 1] = tmp;
		}
	for (i = 0; i < npieces; i++) {
		uint32_t n = cut[i + 1] - cut[i];
		if (n == 0)
			continue;
		ps->mem[ps->n] = malloc(n);
		if (ps->mem[ps->n] == NULL)
			return -1;
		memcpy(ps->mem[ps->n], p + cut[i], n);
		ps->iov[ps->n].base = ps->mem[ps->n];
		ps->iov[ps->n].len = n;
		ps->n++;
	}
	return 0;
}

static inline void fh_pieces_free(struct fh_pieces *ps)
{
	uint32_t i;

	for (i = 0; i < FH_MAX_PIECES; i++)
		free(ps->mem[i]);
	memset(ps, 0, sizeof(*ps));
}

/* True when [p, p+len) lies inside one of the pieces. */
static inline int fh_pieces_contain(const struct fh_pieces *ps, const uint8_t *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < ps->n; i++)
		if (p >= ps->iov[i].base && p + len <= ps->iov[i].base + ps->iov[i].len)
			return 1;
	return 0;
}

/* Reads every byte of a view (ASan checks each read) and returns their sum. */
static inline uint32_t fh_touch_view(const struct tl_msg_view *v)
{
	uint32_t i, j, sum = 0, total = 0;

	for (i = 0; i < v->iovcnt; i++) {
		for (j = 0; j < v->iov[i].len; j++)
			sum += v->iov[i].base[j];
		total += v->iov[i].len;
	}
	FH_CHECK(total == v->hdr.body_len);
	return sum;
}

/* splitmix64: a deterministic stream from a seed taken out of the input. */
static inline uint64_t fh_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif /* WHARF_FUZZ_UTIL_H */
