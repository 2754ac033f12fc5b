/*
 * fz_pvt.h — fuse internals shared by the packer (fz_pack.c) and the unpacker
 * (fz_unpack.c): the sub-header bits and the varint writer. The layout itself is
 * documented once, in fz.h.
 */
#ifndef WHARF_FZ_PVT_H
#define WHARF_FZ_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include "dpdk_net/dn_log.h"
#include "fuse/fz.h"

/* fuse's log type, "wharf.fz" (fz_conn.c). */
extern int fz_logtype;
#define FZ_LOG(lvl, ...) WLOG(fz_logtype, lvl, __VA_ARGS__)

/* Bits of a sub-header's "present" byte, in the order their fields follow. */
#define FZ_P_FLAGS     0x01u
#define FZ_P_AUX       0x02u
#define FZ_P_TABLE_ID  0x04u
#define FZ_P_REQ_DELTA 0x08u
#define FZ_P_KEY_COUNT 0x10u
#define FZ_P_DIM       0x20u
#define FZ_P_RESERVED  0xc0u

/* type + present + body_len(5) + flags(3) + aux(3) + table_id(5) + req delta(10) +
 * key_count(5) + dim(5): the unpacker relies on no valid sub-header being longer. */
_Static_assert(FZ_SUB_HDR_MAX == 2 + 5 + 3 + 3 + 5 + 10 + 5 + 5, "sub-header bound");

static inline bool fz_type_is_fuse(uint8_t type)
{
	return type >= TL_TYPE_FUSE_MIN && type <= TL_TYPE_FUSE_MAX;
}

/* Zigzag maps a signed delta to small unsigned values for small magnitudes. */
static inline uint64_t fz_zigzag(uint64_t delta)
{
	return (delta << 1) ^ (uint64_t)-(int64_t)(delta >> 63);
}

static inline uint64_t fz_unzigzag(uint64_t z)
{
	return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1);
}

/* Writes v as minimal LEB128 at p; returns the bytes written (1..10). */
static inline uint32_t fz_varint_put(uint8_t *p, uint64_t v)
{
	uint32_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Encoded length of v as LEB128. */
static inline uint32_t fz_varint_len(uint64_t v)
{
	uint32_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* A sub-header's "present" byte: a bit for each non-zero field (delta zigzagged). */
static inline uint8_t fz_sub_present(const struct tl_msg_hdr *h, uint64_t delta)
{
	uint8_t present = 0;

	present |= h->flags ? FZ_P_FLAGS : 0;
	present |= h->aux ? FZ_P_AUX : 0;
	present |= h->table_id ? FZ_P_TABLE_ID : 0;
	present |= delta ? FZ_P_REQ_DELTA : 0;
	present |= h->key_count ? FZ_P_KEY_COUNT : 0;
	present |= h->dim ? FZ_P_DIM : 0;
	return present;
}

/* Bytes of a sub-header built in registers, little-endian: lo holds bytes 0..7. */
struct fz_word {
	uint64_t lo, hi;
};

/* Appends v as LEB128 to *w at byte *n; false if it would pass 16 bytes. */
static inline bool fz_varint_word(struct fz_word *w, uint32_t *n, uint64_t v)
{
	do {
		uint64_t b = v & 0x7f;

		v >>= 7;
		b |= v ? 0x80u : 0;
		if (*n < 8)
			w->lo |= b << (8 * *n);
		else if (*n < 16)
			w->hi |= b << (8 * (*n - 8));
		else
			return false;
		(*n)++;
	} while (v);
	return true;
}

/*
 * The sub-header of h (as fz_sub_hdr_put writes it) built in registers, and its length;
 * 0 when it is longer than 16 bytes. Stored from registers, a sub-header is not read
 * back byte by byte (which stalls on store forwarding).
 */
static inline uint32_t fz_sub_hdr_word(const struct tl_msg_hdr *h, uint64_t prev_req_id,
				       struct fz_word *w)
{
	uint64_t delta = fz_zigzag(h->req_id - prev_req_id);
	uint32_t n = 2;

	w->lo = (uint64_t)h->type | (uint64_t)fz_sub_present(h, delta) << 8;
	w->hi = 0;
	if (!fz_varint_word(w, &n, h->body_len) ||
	    (h->flags && !fz_varint_word(w, &n, h->flags)) ||
	    (h->aux && !fz_varint_word(w, &n, h->aux)) ||
	    (h->table_id && !fz_varint_word(w, &n, h->table_id)) ||
	    (delta && !fz_varint_word(w, &n, delta)) ||
	    (h->key_count && !fz_varint_word(w, &n, h->key_count)) ||
	    (h->dim && !fz_varint_word(w, &n, h->dim)))
		return 0;
	return n;
}

/*
 * Writes the sub-header of h at p, given the previous sub-message's req_id. Returns its
 * length (FZ_SUB_HDR_MIN..FZ_SUB_HDR_MAX). The caller has checked the type.
 */
uint32_t fz_sub_hdr_put(uint8_t *p, const struct tl_msg_hdr *h, uint64_t prev_req_id);

#endif /* WHARF_FZ_PVT_H */
