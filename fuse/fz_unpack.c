/*
 * fz_unpack.c — the receiving half of fuse: validate a fused frame whole, then hand its
 * sub-messages up as views into the frame.
 *
 * Call chain: transport message reassembly -> fz_unpack -> deliver (ps_core's request
 * handler or client reply path). A non-fused message passes straight through.
 *
 * Two passes over the frame: the first parses and checks (so a frame that does not add
 * up is refused before any of it is applied) and, for the first FZ_RX_VIEWS sub-messages,
 * builds the very views the second hands up, so the second only delivers (past
 * FZ_RX_VIEWS it parses again, one sub-message at a time). The frame may arrive in pieces
 * (a chain of segments); a cursor walks them, and a sub-message that straddles pieces gets
 * a view of several iovs, still without a copy. The usual sub-message (every header field
 * one byte, header and body inside the current piece) takes a short path: one 8-byte
 * load for the header, one iov, no per-byte loop.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fz.h"
#include "fuse/fz_pvt.h"

#define FZ_RX_VIEWS 1024u  /* sub-messages per frame whose views the first pass keeps */

struct fz_rx {
	struct fz_rx_stats stats;
	struct tl_msg_view views[FZ_RX_VIEWS];
	/* The views' pieces: each body takes one per piece it touches, so a frame of at
	 * most FZ_RX_MAX_IOV pieces needs at most one per view plus one per boundary. */
	struct tl_iov iovs[FZ_RX_VIEWS + FZ_RX_MAX_IOV];
	struct tl_iov scratch[FZ_RX_MAX_IOV]; /* a sub-message past the views */
};

/* A read position in a body given as pieces. */
struct fz_cur {
	const struct tl_iov *iov;
	uint32_t i;     /* current piece */
	uint32_t o;     /* offset in it */
	uint32_t pos;   /* offset in the body */
	uint32_t end;   /* body_len */
};

int fz_rx_create(struct fz_rx **out)
{
	struct fz_rx *rx;

	if (!out)
		return -EINVAL;
	rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	*out = rx;
	return 0;
}

void fz_rx_destroy(struct fz_rx *rx)
{
	free(rx);
}

const struct fz_rx_stats *fz_rx_stats(const struct fz_rx *rx)
{
	return &rx->stats;
}

/* Copies the next n bytes (n <= end - pos) to dst without moving c. */
static void fz_cur_peek(const struct fz_cur *c, uint8_t *dst, uint32_t n)
{
	uint32_t i = c->i, o = c->o;

	while (n > 0) {
		uint32_t avail = c->iov[i].len - o;
		uint32_t take = avail < n ? avail : n;
		memcpy(dst, c->iov[i].base + o, take);
		dst += take;
		n -= take;
		i++;
		o = 0;
	}
}

/* Advances n bytes; the caller checked n <= end - pos. */
static inline void fz_cur_skip(struct fz_cur *c, uint32_t n)
{
	c->pos += n;
	while (n > 0) {
		uint32_t avail = c->iov[c->i].len - c->o;
		if (n < avail) {
			c->o += n;
			return;
		}
		n -= avail;
		c->i++;
		c->o = 0;
	}
}

/* Fills v with views of the next n bytes (n <= end - pos) without moving c. */
static uint32_t fz_cur_views(const struct fz_cur *c, uint32_t n, struct tl_iov *v)
{
	uint32_t i = c->i, o = c->o, cnt = 0;

	while (n > 0) {
		uint32_t avail = c->iov[i].len - o;
		if (avail > 0) {
			uint32_t take = avail < n ? avail : n;
			v[cnt].base = c->iov[i].base + o;
			v[cnt].len = take;
			cnt++;
			n -= take;
		}
		i++;
		o = 0;
	}
	return cnt;
}

/*
 * Reads a minimal LEB128 of at most max_bytes whose value is at most max from p[*n..lim),
 * advancing *n. Returns 0, 1 when lim came first, -1 when it is malformed.
 */
static inline int fz_varint_get(const uint8_t *p, uint32_t lim, uint32_t *n,
				uint32_t max_bytes, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	uint32_t k;
	uint8_t b = 0;

	/* Most fields are under 128: one byte, always within every field's range. */
	if (*n < lim && p[*n] < 0x80) {
		*out = p[(*n)++];
		return 0;
	}
	for (k = 0; k < max_bytes; k++) {
		if (*n >= lim)
			return 1;
		b = p[(*n)++];
		v |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80))
			break;
	}
	if (k == max_bytes)
		return -1;                  /* still continuing past the field's width */
	if (k > 0 && b == 0)
		return -1;                  /* non-minimal: a trailing zero group */
	if (k == 9 && b > 1)
		return -1;                  /* bits past 64 */
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

struct fz_field {
	uint8_t max_bytes;
	uint64_t max;
};

/* The optional fields in wire order (fz.h); entry k is bit k of "present". */
static const struct fz_field fz_fields[] = {
	{ 3, UINT16_MAX },  /* FZ_P_FLAGS */
	{ 3, UINT16_MAX },  /* FZ_P_AUX */
	{ 5, UINT32_MAX },  /* FZ_P_TABLE_ID */
	{ 10, UINT64_MAX }, /* FZ_P_REQ_DELTA */
	{ 5, UINT32_MAX },  /* FZ_P_KEY_COUNT */
	{ 5, UINT32_MAX },  /* FZ_P_DIM */
};
_Static_assert(FZ_P_DIM == 1u << 5 && FZ_P_FLAGS == 1u, "fz_fields is in bit order");

/* Field k (fz_fields order) of a short sub-header: the byte after the length and the
 * fields before it that are present, or 0 when absent. No branch, no memory. */
static inline uint32_t fz_short_field(uint64_t w, uint8_t present, unsigned k)
{
	unsigned at = 8 * (1 + (unsigned)__builtin_popcount(present & ((1u << k) - 1)));

	return (present >> k & 1) ? (uint32_t)(w >> at) & 0xff : 0;
}

/*
 * The usual sub-header, read without a loop per byte: every field present is one byte
 * (under 128), so the length and the fields are the 1 + popcount(present) bytes after
 * the first two. False when that does not hold, or anything is wrong: the general parser
 * below then decides (and names what is wrong).
 */
static inline bool fz_sub_hdr_get_short(const uint8_t *p, uint32_t avail, uint64_t prev_req,
					struct tl_msg_hdr *h, uint32_t *used)
{
	const uint64_t hi = 0x8080808080808080ull, lo = 0x0101010101010101ull;
	uint64_t w, keep, opt;
	uint32_t nf;
	uint8_t present;

	if (avail < 10 || p[0] == 0 || fz_type_is_fuse(p[0]) || (p[1] & FZ_P_RESERVED))
		return false;
	present = p[1];
	nf = 1 + (uint32_t)__builtin_popcount(present);      /* 1..7 bytes */
	keep = (1ull << (8 * nf)) - 1;
	w = tl_ld64(p + 2) & keep;
	if (w & hi)
		return false;                                 /* a field longer than a byte */
	opt = (w >> 8) | ~(keep >> 8);                        /* absent bytes read as 0xff */
	if ((opt - lo) & ~opt & hi)
		return false;                                 /* a field present but zero */
	*h = (struct tl_msg_hdr){ .magic = TL_MSG_MAGIC, .version = TL_MSG_VERSION, .type = p[0],
				  .flags = (uint16_t)fz_short_field(w, present, 0),
				  .aux = (uint16_t)fz_short_field(w, present, 1),
				  .body_len = (uint32_t)(w & 0xff),
				  .table_id = fz_short_field(w, present, 2),
				  .req_id = prev_req + fz_unzigzag(fz_short_field(w, present, 3)),
				  .key_count = fz_short_field(w, present, 4),
				  .dim = fz_short_field(w, present, 5) };
	*used = 2 + nf;
	return true;
}

/*
 * Parses the sub-header at p[0..avail) into h (absent fields zero); *used gets its length.
 * avail is what is left of the body, capped at FZ_SUB_HDR_MAX (no valid header is
 * longer). Returns NULL, or the reason it does not add up.
 */
static inline const char *fz_sub_hdr_get(const uint8_t *p, uint32_t avail, uint64_t *prev_req,
				  struct tl_msg_hdr *h, uint32_t *used)
{
	const char *overrun = avail < FZ_SUB_HDR_MAX ? "truncated sub-header"
						     : "malformed sub-header field";
	uint64_t v, f[6] = { 0, 0, 0, 0, 0, 0 };
	uint32_t n = 2;
	uint8_t present, bits;
	size_t k;
	int rc;

	if (fz_sub_hdr_get_short(p, avail, *prev_req, h, used))
		return NULL;
	if (avail < 2)
		return "truncated sub-header";
	if (p[0] == 0)
		return "sub-message of type 0";
	if (fz_type_is_fuse(p[0]))
		return "nested fused frame";
	present = p[1];
	if (present & FZ_P_RESERVED)
		return "reserved bits set in a sub-header";
	memset(h, 0, sizeof(*h));
	h->magic = TL_MSG_MAGIC;
	h->version = TL_MSG_VERSION;
	h->type = p[0];
	rc = fz_varint_get(p, avail, &n, 5, UINT32_MAX, &v);
	if (rc)
		return rc > 0 ? overrun : "malformed sub-message length";
	h->body_len = (uint32_t)v;
	/* Visit only the fields present; bit k of "present" is fz_fields[k], value f[k]. */
	for (bits = present; bits; bits &= (uint8_t)(bits - 1)) {
		k = (size_t)__builtin_ctz(bits);
		rc = fz_varint_get(p, avail, &n, fz_fields[k].max_bytes, fz_fields[k].max, &f[k]);
		if (rc)
			return rc > 0 ? overrun : "malformed sub-header field";
		if (f[k] == 0)
			return "sub-header field marked present but zero";
	}
	h->flags = (uint16_t)f[0];
	h->aux = (uint16_t)f[1];
	h->table_id = (uint32_t)f[2];
	h->req_id = *prev_req + fz_unzigzag(f[3]);
	h->key_count = (uint32_t)f[4];
	h->dim = (uint32_t)f[5];
	*used = n;
	return NULL;
}

/*
 * Parses one sub-header at c and checks that its body fits. Returns NULL, or the reason
 * it does not add up. On success c sits at the body and *prev_req is this req_id.
 */
static inline const char *fz_sub_parse(struct fz_cur *c, uint64_t *prev_req, struct tl_msg_hdr *h)
{
	uint8_t scratch[FZ_SUB_HDR_MAX];
	const uint8_t *p;
	uint32_t avail = c->end - c->pos, used = 0;
	const char *why;

	if (avail == 0)
		return "count larger than the sub-messages present";
	if (avail > FZ_SUB_HDR_MAX)
		avail = FZ_SUB_HDR_MAX;
	/* The common case: the header lies within one piece, read it in place. */
	if (c->iov[c->i].len - c->o >= avail) {
		p = c->iov[c->i].base + c->o;
	} else {
		fz_cur_peek(c, scratch, avail);
		p = scratch;
	}
	why = fz_sub_hdr_get(p, avail, prev_req, h, &used);
	if (why)
		return why;
	fz_cur_skip(c, used);
	if (h->body_len > c->end - c->pos)
		return "sub-message length past the end of the frame";
	*prev_req = h->req_id;
	return NULL;
}

/* Checks the frame header and that the pieces hold the body. NULL or the reason. */
static const char *fz_frame_precheck(const struct tl_msg_view *m)
{
	const struct tl_msg_hdr *h = &m->hdr;
	uint64_t sum = 0;
	uint32_t i;

	if (h->type != FZ_TYPE_FRAME)
		return "unknown fuse message type";
	if (h->body_len == 0)
		return "zero-length fused frame";
	if (h->key_count == 0)
		return "fused frame with a count of zero";
	if (h->key_count > h->body_len / FZ_SUB_HDR_MIN)
		return "count larger than the frame can hold";
	if (h->flags || h->aux || h->table_id || h->dim)
		return "reserved field set in a fused frame header";
	if (m->iovcnt && !m->iov)
		return "frame body missing";
	for (i = 0; i < m->iovcnt; i++) {
		if (m->iov[i].len && !m->iov[i].base)
			return "frame body missing";
		sum += m->iov[i].len;
	}
	if (sum < h->body_len)
		return "frame body shorter than its header says";
	return NULL;
}

static int fz_refuse(struct fz_rx *rx, struct fz_rx_error *err, const char *why,
		     uint32_t sub, uint32_t off)
{
	rx->stats.refused++;
	if (err) {
		err->reason = why;
		err->sub_index = sub;
		err->offset = off;
	}
	return -EBADMSG;
}

/*
 * The last short sub-header parsed (used 0: none yet), as its bytes: a step's tensors of
 * one shape repeat their sub-header byte for byte, and equal bytes parse to equal fields
 * and the same req_id step, so a repeat is taken with one compare.
 */
struct fz_rep {
	uint64_t word;                 /* its bytes, as read with the bytes after them */
	uint32_t shift;                /* 64 - 8 * used: drops those bytes from a compare */
	uint32_t used;
	uint64_t step;
	const struct tl_msg_hdr *src;  /* its fields, in the view it was parsed into, until */
	struct tl_msg_hdr hdr;         /* the first repeat copies them here */
};

/*
 * The short path of the first pass: the sub-message at c when its header is short
 * (fz_sub_hdr_get_short) and it lies, header and body, inside the current piece. Fills v
 * (one iov, at iov) and moves c past it. False, with nothing changed, for anything else:
 * the general path then parses it (and names what is wrong).
 */
static inline bool fz_sub_fast(struct fz_cur *c, uint64_t prev_req, struct tl_msg_view *v,
			       struct tl_iov *iov, struct fz_rep *rep)
{
	const struct tl_iov *piece = &c->iov[c->i];
	uint32_t left = c->end - c->pos, used, len;
	const uint8_t *p;
	uint64_t w;

	/* Within the frame, and within this piece (which may hold bytes past the frame). */
	if (left < 10 || piece->len - c->o < 10)
		return false;
	if (left > piece->len - c->o)
		left = piece->len - c->o;
	p = piece->base + c->o;
	w = tl_ld64(p);
	if (rep->used && ((w ^ rep->word) << rep->shift) == 0) {
		/* The same bytes as the sub-header before: the same fields, the same step. */
		if (rep->src) {
			/* Copied once per run of repeats, not read back from the view before
			 * it (which a repeat just wrote: a stall on store forwarding). */
			rep->hdr = *rep->src;
			rep->src = NULL;
		}
		v->hdr = rep->hdr;
		v->hdr.req_id = prev_req + rep->step;
		used = rep->used;
	} else {
		if (!fz_sub_hdr_get_short(p, left, prev_req, &v->hdr, &used))
			return false;
		if (used <= 8) {
			rep->word = w;
			rep->shift = 64 - 8 * used;
			rep->used = used;
			rep->src = &v->hdr;
			rep->step = v->hdr.req_id - prev_req;
		}
	}
	len = v->hdr.body_len;
	if (len > left - used)
		return false;
	iov->base = p + used;
	iov->len = len;
	v->iov = iov;
	v->iovcnt = len != 0;
	c->pos += used + len;
	c->o += used + len;
	if (c->o == piece->len) {   /* as fz_cur_skip leaves it: at the next piece */
		c->i++;
		c->o = 0;
	}
	return true;
}

int fz_unpack(struct fz_rx *rx, const struct tl_msg_view *msg, fz_deliver_fn deliver,
	      void *arg, struct fz_rx_error *err)
{
	struct tl_msg_view sub;
	struct fz_rep rep = { .used = 0 };
	struct fz_cur c, rest;
	const char *why;
	uint64_t prev, rest_prev;
	uint32_t k, count, nv, niov = 0;

	if (!rx || !msg || !deliver)
		return -EINVAL;
	if (!fz_type_is_fuse(msg->hdr.type)) {
		rx->stats.msgs++;
		deliver(arg, msg, msg);
		return 0;
	}
	if (msg->iovcnt > FZ_RX_MAX_IOV) {
		rx->stats.refused++;
		if (err)
			*err = (struct fz_rx_error){ "fused frame in too many pieces", 0, 0 };
		return -E2BIG;
	}
	why = fz_frame_precheck(msg);
	if (why)
		return fz_refuse(rx, err, why, 0, 0);
	count = msg->hdr.key_count;
	nv = count < FZ_RX_VIEWS ? count : FZ_RX_VIEWS;

	/* First pass: check everything; build the views of the first nv. */
	c = (struct fz_cur){ msg->iov, 0, 0, 0, msg->hdr.body_len };
	prev = msg->hdr.req_id;
	for (k = 0; k < nv; k++) {
		struct tl_msg_view *v = &rx->views[k];

		if (fz_sub_fast(&c, prev, v, &rx->iovs[niov], &rep)) {
			prev = v->hdr.req_id;
			niov += v->iovcnt;
			continue;
		}
		why = fz_sub_parse(&c, &prev, &v->hdr);
		if (why)
			return fz_refuse(rx, err, why, k, c.pos);
		v->iov = &rx->iovs[niov];
		v->iovcnt = fz_cur_views(&c, v->hdr.body_len, &rx->iovs[niov]);
		niov += v->iovcnt;
		fz_cur_skip(&c, v->hdr.body_len);
	}
	rest = c;
	rest_prev = prev;
	for (; k < count; k++) {
		why = fz_sub_parse(&c, &prev, &sub.hdr);
		if (why)
			return fz_refuse(rx, err, why, k, c.pos);
		fz_cur_skip(&c, sub.hdr.body_len);
	}
	if (c.pos != c.end)
		return fz_refuse(rx, err, "trailing bytes after the last sub-message", k, c.pos);

	/* Valid as a whole: the second pass cannot fail. */
	for (k = 0; k < nv; k++)
		deliver(arg, &rx->views[k], msg);
	/* Past the views (a frame of more than FZ_RX_VIEWS): parse again from there. */
	sub.iov = rx->scratch;
	for (; k < count; k++) {
		(void)fz_sub_parse(&rest, &rest_prev, &sub.hdr);
		sub.iovcnt = fz_cur_views(&rest, sub.hdr.body_len, rx->scratch);
		fz_cur_skip(&rest, sub.hdr.body_len);
		deliver(arg, &sub, msg);
	}
	rx->stats.frames++;
	rx->stats.subs += count;
	return 0;
}

int fz_rx_error_text(const struct fz_rx_error *err, char *buf, size_t cap)
{
	int n;

	if (!err || !buf || cap == 0)
		return -ENOSPC;
	n = snprintf(buf, cap, "fuse: %s (sub-message %u, offset %u)",
		     err->reason ? err->reason : "refused", err->sub_index, err->offset);
	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

int fz_rx_error_body(const struct fz_rx_error *err, int code, uint8_t *buf, size_t cap)
{
	int n;

	if (!err || !buf || cap < 4)
		return -ENOSPC;
	tl_st32(buf, (uint32_t)(code < 0 ? -code : code));
	n = fz_rx_error_text(err, (char *)buf + 4, cap - 4);
	return n < 0 ? n : 4 + n;
}
