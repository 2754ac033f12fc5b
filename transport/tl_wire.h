/*
 * tl_wire.h — the message header every wharf stream carries, and the view type through
 * which a received message's body is read without copying it.
 *
 * This is the contract between the layers: transport frames the byte stream into
 * messages by this header, fuse packs several into one, ps_core gives the per-type
 * fields their meaning. It has no DPDK dependency so every layer's tests can use it.
 *
 * On the wire (little-endian, 32 bytes, no padding, no pointers):
 *   off  0 u16 magic       TL_MSG_MAGIC
 *   off  2 u8  version     TL_MSG_VERSION
 *   off  3 u8  type        see the TL_TYPE_* ranges below
 *   off  4 u16 flags       per type
 *   off  6 u16 aux         per type (ps_core: element type)
 *   off  8 u32 body_len    bytes that follow the header
 *   off 12 u32 table_id    per type
 *   off 16 u64 req_id      request id; a reply carries its request's id
 *   off 24 u32 key_count   per type
 *   off 28 u32 dim         per type
 */
#ifndef WHARF_TL_WIRE_H
#define WHARF_TL_WIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define TL_MSG_MAGIC    0x4657u /* "WF" as it reads in a hex dump: 57 46 */
#define TL_MSG_VERSION  1u
#define TL_MSG_HDR_LEN  32u

/* Default ceiling on one message body; a stream may configure a lower one. */
#define TL_MSG_MAX_BODY_DEFAULT (64u << 20)

/*
 * Type ranges, so no two layers ever pick the same number:
 *   0            never valid
 *   1..15        transport (TL_TYPE_ERROR, keepalives)
 *   16..31       fuse (FZ_TYPE_*)
 *   32..255      ps_core requests and replies (PS_TYPE_*)
 */
#define TL_TYPE_ERROR     1u  /* body: u32 errno-style code, then UTF-8 text */
#define TL_TYPE_FUSE_MIN  16u
#define TL_TYPE_FUSE_MAX  31u
#define TL_TYPE_PS_MIN    32u

struct tl_msg_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint16_t aux;
	uint32_t body_len;
	uint32_t table_id;
	uint64_t req_id;
	uint32_t key_count;
	uint32_t dim;
};

_Static_assert(sizeof(struct tl_msg_hdr) == TL_MSG_HDR_LEN, "wire header is 32 bytes");

static inline uint16_t tl_ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tl_ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tl_ld64(const uint8_t *p)
{
	return (uint64_t)tl_ld32(p) | (uint64_t)tl_ld32(p + 4) << 32;
}
static inline void tl_st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tl_st32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void tl_st64(uint8_t *p, uint64_t v) { tl_st32(p, (uint32_t)v); tl_st32(p + 4, (uint32_t)(v >> 32)); }

/*
 * Asks for cache lines in writable state ahead of the stores (PREFETCHW). Buffers that
 * are filled again and again (the send arena, fused frames) were last read by the peer's
 * core: vhost copies them out in place. Without this each line's ownership comes back
 * one store at a time; on this host's CPU (its two cores in different L3 complexes)
 * that was most of the cost of packing a small message. Writers call tl_prefetch_w_open
 * on a fresh buffer and tl_prefetch_w_ahead before each small append.
 */
#define TL_PREFETCH_AHEAD 1024u

static inline void tl_prefetch_w(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const volatile char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* The first TL_PREFETCH_AHEAD bytes of a buffer about to be filled from its start. */
static inline void tl_prefetch_w_open(const uint8_t *p, const uint8_t *end)
{
	for (uint32_t o = 0; o < TL_PREFETCH_AHEAD && p + o < end; o += 64)
		tl_prefetch_w(p + o);
}

/* The next line past what tl_prefetch_w_open and earlier calls covered (p: write cursor). */
static inline void tl_prefetch_w_ahead(const uint8_t *p, const uint8_t *end)
{
	if (p + TL_PREFETCH_AHEAD + 64 <= end) {
		tl_prefetch_w(p + TL_PREFETCH_AHEAD);
		tl_prefetch_w(p + TL_PREFETCH_AHEAD + 64);
	}
}

/*
 * A line writer: appends to a buffer the peer's core reads next (a fused frame) without
 * fetching the lines it overwrites. Whole 64-byte lines leave with non-temporal stores,
 * which take a line without reading it or waiting for the other core to give it up.
 * Appending small pieces with memcpy, each store first takes its recycled line back from
 * the peer's core, here in another L3 complex: writing a 70 KB step 71 B at a time took
 * 24.9 us with memcpy and 8.6 us with this writer (wharf-pktgen --step --piece 71, with
 * and without --plain: write_us_per_step). One large memcpy does not pay it (glibc copies
 * large blocks with rep movsb, which also writes whole lines): 4.7 us.
 *
 * Bytes are first copied into `ring` (this core's L1), at their offset in the buffer
 * modulo TL_LW_RING. A line is streamed out only once TL_LW_LAG more bytes were written
 * after it: reading it back at once would find it still in the store buffer, written in
 * pieces, and wait for the pieces to retire (streamed at once, the loads of those lines
 * took 43% of the packer's samples; with the lag its profile is flat).
 *
 * tl_lw_open on a 64-aligned destination; tl_lw_put (or write at most TL_LW_ROOM bytes at
 * tl_lw_cursor, then tl_lw_commit) any number of times; tl_lw_finish before anything else
 * reads the buffer or hands it to a device: it stores what is held and fences the streamed
 * lines. Putting more after tl_lw_finish is allowed (the fence orders it). Without SSE2 the
 * lines are plain copies.
 */
#define TL_LW_RING 1024u
#define TL_LW_LAG  256u
#define TL_LW_ROOM 256u   /* contiguous room at the cursor (ring + overflow) */

struct tl_lw {
	uint8_t *base;        /* the destination */
	uint32_t len;         /* bytes appended */
	uint32_t done;        /* bytes stored to base: whole lines, len - done < TL_LW_LAG + 64
			       * between calls */
	uint8_t ring[TL_LW_RING + TL_LW_ROOM];
};
_Static_assert(TL_LW_LAG + 64 + TL_LW_ROOM <= TL_LW_RING, "a put never laps the unsent lines");

static inline void tl_stream_line(uint8_t *dst, const uint8_t *src)
{
#if defined(__SSE2__)
	__m128i a = _mm_loadu_si128((const __m128i *)src);
	__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
	__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
	__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

	_mm_stream_si128((__m128i *)dst, a);
	_mm_stream_si128((__m128i *)(dst + 16), b);
	_mm_stream_si128((__m128i *)(dst + 32), c);
	_mm_stream_si128((__m128i *)(dst + 48), d);
#else
	memcpy(dst, src, 64);
#endif
}

static inline void tl_lw_open(struct tl_lw *w, uint8_t *dst)
{
	w->base = dst;
	w->len = 0;
	w->done = 0;
}

static inline uint8_t *tl_lw_cursor(struct tl_lw *w)
{
	return w->ring + w->len % TL_LW_RING;
}

/* Streams the held whole lines up to `upto` (a multiple of 64, <= len). */
static inline void tl_lw_drain(struct tl_lw *w, uint32_t upto)
{
	for (; w->done < upto; w->done += 64)
		tl_stream_line(w->base + w->done, w->ring + w->done % TL_LW_RING);
}

/* The n (<= TL_LW_ROOM) bytes written at the cursor are appended. */
static inline void tl_lw_commit(struct tl_lw *w, uint32_t n)
{
	uint32_t at = w->len % TL_LW_RING;

	if (at + n > TL_LW_RING)  /* ran into the overflow: it belongs at the ring's start */
		memcpy(w->ring, w->ring + TL_LW_RING, at + n - TL_LW_RING);
	w->len += n;
	if (w->len - w->done >= TL_LW_LAG + 64)
		tl_lw_drain(w, (w->len - TL_LW_LAG) & ~63u);
}

static inline void tl_lw_put(struct tl_lw *w, const void *src, size_t n)
{
	const uint8_t *s = src;
	uint32_t k;

	if (n <= TL_LW_ROOM) {
		memcpy(tl_lw_cursor(w), s, n);
		tl_lw_commit(w, (uint32_t)n);
		return;
	}
	/* Large: reach a line boundary, store everything held, then stream whole lines
	 * straight from the source and hold the rest. */
	k = (64 - w->len % 64) % 64;
	memcpy(tl_lw_cursor(w), s, k);
	tl_lw_commit(w, k);
	s += k;
	n -= k;
	tl_lw_drain(w, w->len);
	for (; n >= 64; n -= 64, s += 64, w->len += 64)
		tl_stream_line(w->base + w->len, s);
	w->done = w->len;
	memcpy(tl_lw_cursor(w), s, n);
	tl_lw_commit(w, (uint32_t)n);
}

static inline void tl_lw_finish(struct tl_lw *w)
{
	uint32_t whole = w->len & ~63u;

	tl_lw_drain(w, whole);
	memcpy(w->base + whole, w->ring + whole % TL_LW_RING, w->len - whole);
#if defined(__SSE2__)
	_mm_sfence();
#endif
}

/*
 * The struct is laid out as the wire is (offsets checked below), so on a little-endian
 * host a header is one 32-byte copy each way. Field-by-field byte stores let the compiler
 * assemble the header in vector registers from partial stack stores, which stalled on
 * store forwarding in the per-message send path.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TL_WIRE_HOST_ORDER 1
_Static_assert(offsetof(struct tl_msg_hdr, type) == 3 && offsetof(struct tl_msg_hdr, aux) == 6 &&
	       offsetof(struct tl_msg_hdr, body_len) == 8 && offsetof(struct tl_msg_hdr, req_id) == 16 &&
	       offsetof(struct tl_msg_hdr, dim) == 28, "struct tl_msg_hdr is the wire layout");
#else
#define TL_WIRE_HOST_ORDER 0
#endif

static inline void tl_msg_hdr_encode(uint8_t out[TL_MSG_HDR_LEN], const struct tl_msg_hdr *h)
{
	if (TL_WIRE_HOST_ORDER) {
		memcpy(out, h, TL_MSG_HDR_LEN);
		tl_st16(out + 0, TL_MSG_MAGIC);
		out[2] = TL_MSG_VERSION;
		return;
	}
	tl_st16(out + 0, TL_MSG_MAGIC);
	out[2] = TL_MSG_VERSION;
	out[3] = h->type;
	tl_st16(out + 4, h->flags);
	tl_st16(out + 6, h->aux);
	tl_st32(out + 8, h->body_len);
	tl_st32(out + 12, h->table_id);
	tl_st64(out + 16, h->req_id);
	tl_st32(out + 24, h->key_count);
	tl_st32(out + 28, h->dim);
}

/*
 * Decodes and checks a header. Returns 0, or:
 *   -EBADMSG   bad magic or type 0 (the stream cannot be trusted past this point)
 *   -EPROTONOSUPPORT  unknown version (header still filled: the caller may answer it)
 *   -EMSGSIZE  body_len above max_body (header still filled)
 */
static inline int tl_msg_hdr_decode(const uint8_t in[TL_MSG_HDR_LEN], uint32_t max_body,
				    struct tl_msg_hdr *h)
{
	if (TL_WIRE_HOST_ORDER) {
		memcpy(h, in, TL_MSG_HDR_LEN);
	} else {
		h->magic = tl_ld16(in + 0);
		h->version = in[2];
		h->type = in[3];
		h->flags = tl_ld16(in + 4);
		h->aux = tl_ld16(in + 6);
		h->body_len = tl_ld32(in + 8);
		h->table_id = tl_ld32(in + 12);
		h->req_id = tl_ld64(in + 16);
		h->key_count = tl_ld32(in + 24);
		h->dim = tl_ld32(in + 28);
	}
	if (h->magic != TL_MSG_MAGIC || h->type == 0)
		return -EBADMSG;
	if (h->version != TL_MSG_VERSION)
		return -EPROTONOSUPPORT;
	if (h->body_len > max_body)
		return -EMSGSIZE;
	return 0;
}

/* One contiguous piece of a received body (a view into a packet or a fused frame). */
struct tl_iov {
	const uint8_t *base;
	uint32_t len;
};

/* Copies the pieces one after another to dst; returns the end of what it wrote. */
static inline uint8_t *tl_iov_gather(uint8_t *dst, const struct tl_iov *iov, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		memcpy(dst, iov[i].base, iov[i].len);
		dst += iov[i].len;
	}
	return dst;
}

/*
 * A received message: its decoded header and its body as a list of views. The views
 * stay valid until the callback that handed the message up returns, unless the
 * receiver took a reference through the transport's API.
 */
struct tl_msg_view {
	struct tl_msg_hdr hdr;
	const struct tl_iov *iov;
	uint32_t iovcnt;
};

/* Copies body bytes [off, off+len) into dst. Returns 0 or -ERANGE past the body's end. */
static inline int tl_view_copy(const struct tl_msg_view *v, uint32_t off, void *dst, uint32_t len)
{
	uint8_t *d = dst;
	uint32_t i;

	if ((uint64_t)off + len > v->hdr.body_len)
		return -ERANGE;
	for (i = 0; i < v->iovcnt && len > 0; i++) {
		uint32_t seg = v->iov[i].len;
		if (off >= seg) {
			off -= seg;
			continue;
		}
		uint32_t n = seg - off < len ? seg - off : len;
		memcpy(d, v->iov[i].base + off, n);
		d += n;
		len -= n;
		off = 0;
	}
	return len == 0 ? 0 : -ERANGE;
}

/*
 * Returns a pointer to body bytes [off, off+len) when they sit in one piece (the common
 * case: zero copy), else copies them into scratch and returns scratch. NULL past the end.
 * It walks the pieces from the first: for one read; a loop over a body uses a cursor.
 */
static inline const uint8_t *tl_view_get(const struct tl_msg_view *v, uint32_t off, uint32_t len,
					 void *scratch)
{
	uint32_t i, o = off;

	if ((uint64_t)off + len > v->hdr.body_len)
		return NULL;
	for (i = 0; i < v->iovcnt; i++) {
		if (o < v->iov[i].len) {
			if (v->iov[i].len - o >= len)
				return v->iov[i].base + o;
			break;
		}
		o -= v->iov[i].len;
	}
	return tl_view_copy(v, off, scratch, len) == 0 ? scratch : NULL;
}

/*
 * A cursor over a received body: it remembers the piece it stands in, so reads at offsets
 * near the last one (a walk over keys or rows, forward or a little back) find their bytes
 * without rescanning the pieces from the first. Caller storage, no allocation; valid as
 * long as the view it was set on.
 */
struct tl_view_cur {
	const struct tl_msg_view *v;
	uint32_t i;     /* the piece the cursor stands in */
	uint32_t start; /* body offset of piece i's first byte */
};

static inline void tl_cur_init(struct tl_view_cur *c, const struct tl_msg_view *v)
{
	c->v = v;
	c->i = 0;
	c->start = 0;
}

/*
 * Moves to the piece holding body offset off. False when the pieces end before it (a view
 * whose pieces add up to less than its body_len): then nothing is read.
 */
static inline bool tl_cur_seek(struct tl_view_cur *c, uint32_t off)
{
	const struct tl_iov *iov = c->v->iov;

	while (off < c->start)
		c->start -= iov[--c->i].len;
	while (c->i < c->v->iovcnt && off - c->start >= iov[c->i].len)
		c->start += iov[c->i++].len;
	return c->i < c->v->iovcnt;
}

/*
 * Body bytes from off to the end of the piece holding off: a pointer, with their count in
 * *avail. NULL (and *avail 0) at or past the body's end.
 */
static inline const uint8_t *tl_cur_span(struct tl_view_cur *c, uint32_t off, uint32_t *avail)
{
	if (off >= c->v->hdr.body_len || !tl_cur_seek(c, off)) {
		*avail = 0;
		return NULL;
	}
	*avail = c->v->iov[c->i].len - (off - c->start);
	return c->v->iov[c->i].base + (off - c->start);
}

/* As tl_view_get, from where the cursor stands: zero copy unless [off, off+len) straddles. */
static inline const uint8_t *tl_cur_get(struct tl_view_cur *c, uint32_t off, uint32_t len,
					void *scratch)
{
	uint8_t *d = scratch;
	const uint8_t *p;
	uint32_t avail;

	if ((uint64_t)off + len > c->v->hdr.body_len)
		return NULL;
	if (len == 0)
		return scratch;
	p = tl_cur_span(c, off, &avail);
	if (avail >= len)
		return p;
	for (;;) {
		uint32_t n = avail < len ? avail : len;
		if (p == NULL)
			return NULL;
		memcpy(d, p, n);
		d += n;
		len -= n;
		off += n;
		if (len == 0)
			return scratch;
		p = tl_cur_span(c, off, &avail);
	}
}

#endif /* WHARF_TL_WIRE_H */
