/*
 * xf_gen.c — wharf-xfer's deterministic message generator: sizes and bodies as pure
 * functions of (seed, message index), so a receiver in another process (or another
 * machine) checks every byte without the sender telling it anything.
 *
 * Call chain: xf_client (fills bodies to send) and the receive callbacks of both roles
 * (xf_gen_match_view on each arriving message) -> here.
 *
 * splitmix64 (a public, well-studied mixer) is used because each output word depends on
 * one counter value only: random access into a body costs one mix per 8 bytes.
 */
#include <math.h>
#include <string.h>

#include "apps/xfer/xf.h"

static inline uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t msg_key(uint64_t seed, uint64_t i)
{
	return mix64(seed ^ mix64(i ^ 0x5851f42d4c957f2dull));
}

/* Word w of message i: word 0 carries the index so a dump shows which message it is. */
static inline uint64_t body_word(uint64_t key, uint64_t i, uint64_t w)
{
	return w == 0 ? i : mix64(key + w);
}

static inline void st64(uint8_t *p, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static uint32_t size_from(uint64_t key, uint32_t min_size, uint32_t max_size, double log_span)
{
	double u = (double)(mix64(key ^ 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
	uint64_t s = min_size + (uint64_t)floor(exp(u * log_span)) - 1;

	return s > max_size ? max_size : (uint32_t)s;
}

void xf_gen_init(struct xf_gen *g, uint64_t seed, uint32_t min_size, uint32_t max_size)
{
	g->seed = seed;
	g->min_size = min_size;
	g->max_size = max_size;
	g->log_span = log((double)max_size - (double)min_size + 1.0);
}

uint32_t xf_gen_size(const struct xf_gen *g, uint64_t i)
{
	return size_from(msg_key(g->seed, i), g->min_size, g->max_size, g->log_span);
}

uint32_t xf_gen_size_only(uint64_t seed, uint64_t i, uint32_t min_size, uint32_t max_size)
{
	return size_from(msg_key(seed, i), min_size, max_size,
			 log((double)max_size - (double)min_size + 1.0));
}

void xf_gen_fill(const struct xf_gen *g, uint64_t i, uint8_t *buf, uint32_t len)
{
	uint64_t key = msg_key(g->seed, i), w;
	uint8_t tail[8];

	for (w = 0; (w + 1) * 8 <= len; w++)
		st64(buf + w * 8, body_word(key, i, w));
	if (w * 8 < len) {
		st64(tail, body_word(key, i, w));
		memcpy(buf + w * 8, tail, len - w * 8);
	}
}

bool xf_gen_match(const struct xf_gen *g, uint64_t i, uint64_t off, const uint8_t *p, uint32_t len)
{
	uint64_t key = msg_key(g->seed, i);
	uint8_t want[8];

	while (len > 0) {
		uint64_t w = off / 8;
		uint32_t at = (uint32_t)(off % 8), n = 8 - at < len ? 8 - at : len;

		st64(want, body_word(key, i, w));
		if (memcmp(want + at, p, n) != 0)
			return false;
		p += n;
		off += n;
		len -= n;
	}
	return true;
}

bool xf_gen_match_view(const struct xf_gen *g, uint64_t i, const struct tl_msg_view *m)
{
	uint64_t off = 0;

	if (m->hdr.body_len != xf_gen_size(g, i))
		return false;
	for (uint32_t k = 0; k < m->iovcnt; k++) {
		if (!xf_gen_match(g, i, off, m->iov[k].base, m->iov[k].len))
			return false;
		off += m->iov[k].len;
	}
	return off == m->hdr.body_len;
}

bool xf_check_seq(struct xf_check *ck, const struct tl_msg_view *m)
{
	const struct tl_msg_hdr *h = &m->hdr;
	struct xf_tally *t = &ck->t;

	t->received++;
	t->bytes += h->body_len;
	if (h->type != XF_TYPE || h->key_count == 0 || h->table_id >= h->key_count) {
		t->bad++;
		return false;
	}
	if (!ck->known) {
		ck->known = true;
		ck->next = h->table_id;
		ck->stride = h->key_count;
	}
	if (h->req_id < ck->next) {
		t->duplicated++;
		return false;
	}
	if (h->key_count != ck->stride || (h->req_id - ck->next) % ck->stride != 0) {
		t->bad++;
		return false;
	}
	t->missing += (h->req_id - ck->next) / ck->stride;
	ck->next = h->req_id + ck->stride;
	return true;
}
