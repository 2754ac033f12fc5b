/*
 * tl_frame.c — message framing on an in-order byte stream, without copying bodies.
 *
 * Call chain:  backend rx (kernel read | TCP-lite in-order delivery) -> tl_conn_input
 *   -> tl_fr_push -> sink->msg (tl_api.c: ops->msg of the connection)
 *
 * A backend hands over stream bytes as chunks (pointer, length, reference). The
 * framer collects the 32-byte header (copied into hbuf only when it straddles two
 * chunks), checks it with tl_msg_hdr_decode against max_body before trusting a single
 * body byte, then describes the body as views straight into the chunks: one view when
 * the body lies in one chunk, several when it spans chunks or pieces of one; a run of
 * views in one chunk holds its reference once until the message is released. References
 * are taken lazily: the backend's
 * chunk lives until tl_fr_push returns, so a message delivered within the push that
 * brought its bytes (most small ones) takes none; its views are held only if the
 * receiver keeps it (tl_msg_hold) or it is still incomplete when the push returns (two
 * atomic refcount updates per small message saved). Bytes contiguous with the previous view in
 * the same chunk extend that view (the kernel backend appends reads into one buffer),
 * so a slow trickle does not multiply views.
 *
 * Refusals: bad magic or type 0 (-EBADMSG) and a body above the limit (-EMSGSIZE) end
 * the stream — nothing after them can be trusted. An unknown version or an unknown
 * transport type (2..15) is reported to sink->reject, its body skipped, and the stream
 * goes on. Records come from a pool that grows on first need up to its maximum and is
 * recycled after, so the steady path does not allocate.
 */
#include <stdlib.h>

#include "transport/tl_pvt.h"

int tl_fr_pool_create(const struct tl_chunk_ops *ops, uint32_t max_msgs, struct tl_fr_pool **out)
{
	struct tl_fr_pool *p;

	if (ops == NULL || ops->hold == NULL || ops->release == NULL || max_msgs == 0)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->ops = ops;
	p->max = max_msgs;
	*out = p;
	return 0;
}

/*
 * Whether view i holds its chunk's reference: only the first of a run of views in one
 * chunk does (an LRO chain's buffers come as pieces of one chunk, so a message held over
 * the chain takes one reference on it, not one per piece; the backend's hold touches
 * every buffer of the chain). Hold and release follow the same rule.
 */
static inline bool fr_holder(const struct tl_msg *m, uint32_t i)
{
	return i == 0 || m->ref[i] != m->ref[i - 1];
}

static void fr_release_segs(struct tl_fr_pool *p, struct tl_msg *m)
{
	for (uint32_t i = 0; i < m->nheld; i++)
		if (fr_holder(m, i))
			p->ops->release(m->ref[i]);
	m->view.iovcnt = 0;
	m->nheld = 0;
}

/* Takes the chunk references the message's views do not hold yet. */
static void fr_hold_refs(struct tl_msg *m)
{
	for (; m->nheld < m->view.iovcnt; m->nheld++)
		if (fr_holder(m, m->nheld))
			m->pool->ops->hold(m->ref[m->nheld]);
}

void tl_fr_pool_destroy(struct tl_fr_pool *p)
{
	struct tl_msg *m, *next;

	if (p == NULL)
		return;
	for (m = p->all; m != NULL; m = next) {
		next = m->all;
		fr_release_segs(p, m);
		free(m->seg);
		free(m->ref);
		free(m);
	}
	free(p);
}

static struct tl_msg *fr_get(struct tl_fr_pool *p)
{
	struct tl_msg *m = p->free;

	if (m != NULL) {
		p->free = m->next;
	} else {
		if (p->total >= p->max)
			return NULL;
		m = calloc(1, sizeof(*m));
		if (m == NULL)
			return NULL;
		m->pool = p;
		m->all = p->all;
		p->all = m;
		p->total++;
	}
	p->in_use++;
	m->next = NULL;
	m->view.iovcnt = 0;
	m->nheld = 0;
	m->view.iov = m->seg;
	m->users = 0;
	return m;
}

/* Drops one user; the last one releases the chunk refs and recycles the record. */
static void fr_put(struct tl_msg *m)
{
	struct tl_fr_pool *p = m->pool;

	if (--m->users > 0)
		return;
	fr_release_segs(p, m);
	m->next = p->free;
	p->free = m;
	p->in_use--;
}

struct tl_msg *tl_msg_hold(const struct tl_msg_view *v)
{
	struct tl_msg *m = tl_container_of(v, struct tl_msg, view);

	m->users++;
	fr_hold_refs(m);
	return m;
}

const struct tl_msg_view *tl_msg_view_of(const struct tl_msg *m)
{
	return &m->view;
}

void tl_msg_release(struct tl_msg *m)
{
	if (m != NULL)
		fr_put(m);
}

void tl_fr_init(struct tl_framer *f, struct tl_fr_pool *pool, uint32_t max_body, uint32_t max_segs)
{
	f->pool = pool;
	f->max_body = max_body;
	f->max_segs = max_segs;
	f->hlen = 0;
	f->remain = 0;
	f->skip = 0;
	f->cur = NULL;
	f->dead = 0;
	f->why = NULL;
}

void tl_fr_fini(struct tl_framer *f)
{
	if (f->cur != NULL) {
		f->cur->users = 1;
		fr_put(f->cur);
		f->cur = NULL;
	}
	f->hlen = 0;
	f->skip = 0;
	f->remain = 0;
}

static int fr_refuse(struct tl_framer *f, int err, const char *why)
{
	tl_fr_fini(f);
	f->dead = err;
	f->why = why;
	return err;
}

static int fr_deliver(struct tl_framer *f, const struct tl_fr_sink *sink, void *arg)
{
	struct tl_msg *m = f->cur;
	int rc;

	f->cur = NULL;
	m->view.iov = m->seg;
	m->users = 1;
	rc = sink->msg(arg, &m->view);
	fr_put(m);
	return rc;
}

/* Starts the message whose header was just decoded with result dec. */
static int fr_start(struct tl_framer *f, const struct tl_msg_hdr *h, int dec,
		    const struct tl_fr_sink *sink, void *arg)
{
	f->hlen = 0;
	if (dec == -EBADMSG)
		return fr_refuse(f, -EBADMSG, "malformed stream: bad magic or message type 0");
	if (dec == -EMSGSIZE)
		return fr_refuse(f, -EMSGSIZE, "message body above the configured limit");
	if (dec == -EPROTONOSUPPORT || h->type < TL_TYPE_FUSE_MIN) {
		if (dec == 0 && h->type == TL_TYPE_ERROR)
			goto accept;
		f->skip = h->body_len;
		return sink->reject(arg, h, dec == 0 ? -EOPNOTSUPP : dec);
	}
accept:
	f->cur = fr_get(f->pool);
	if (f->cur == NULL)
		return fr_refuse(f, -ENOBUFS, "no message record left (max_held_msgs)");
	f->cur->view.hdr = *h;
	f->remain = h->body_len;
	return f->remain == 0 ? fr_deliver(f, sink, arg) : 0;
}

static int fr_header(struct tl_framer *f, const uint8_t **pp, uint32_t *lenp,
		     const struct tl_fr_sink *sink, void *arg)
{
	const uint8_t *hp;
	struct tl_msg_hdr h;
	uint32_t n;

	if (f->hlen == 0 && *lenp >= TL_MSG_HDR_LEN) {
		/* The common case: the whole header lies in this chunk, decode in place. */
		hp = *pp;
		n = TL_MSG_HDR_LEN;
	} else {
		n = TL_MSG_HDR_LEN - f->hlen;
		if (n > *lenp)
			n = *lenp;
		memcpy(f->hbuf + f->hlen, *pp, n);
		f->hlen += n;
		hp = f->hbuf;
	}
	*pp += n;
	*lenp -= n;
	if (hp == f->hbuf && f->hlen < TL_MSG_HDR_LEN)
		return 0;
	return fr_start(f, &h, tl_msg_hdr_decode(hp, f->max_body, &h), sink, arg);
}

static int fr_grow(struct tl_msg *m, uint32_t max_segs)
{
	uint32_t cap = m->cap == 0 ? 8 : m->cap * 2;
	struct tl_iov *seg;
	void **ref;

	if (cap > max_segs)
		cap = max_segs;
	seg = realloc(m->seg, cap * sizeof(*seg));
	if (seg == NULL)
		return -ENOMEM;
	m->seg = seg;
	m->view.iov = seg;
	ref = realloc(m->ref, cap * sizeof(*ref));
	if (ref == NULL)
		return -ENOMEM;
	m->ref = ref;
	m->cap = cap;
	return 0;
}

static int fr_body(struct tl_framer *f, const uint8_t **pp, uint32_t *lenp, void *ref,
		   const struct tl_fr_sink *sink, void *arg)
{
	struct tl_msg *m = f->cur;
	uint32_t n = f->remain < *lenp ? f->remain : *lenp;
	uint32_t k = m->view.iovcnt;

	if (k > 0 && m->ref[k - 1] == ref && m->seg[k - 1].base + m->seg[k - 1].len == *pp) {
		m->seg[k - 1].len += n;
	} else {
		if (k == f->max_segs)
			return fr_refuse(f, -E2BIG, "message spans more pieces than max_msg_segs");
		if (k == m->cap && fr_grow(m, f->max_segs) != 0)
			return fr_refuse(f, -ENOBUFS, "out of memory for message views");
		m->seg[k].base = *pp;
		m->seg[k].len = n;
		m->ref[k] = ref;
		m->view.iovcnt = k + 1;
	}
	*pp += n;
	*lenp -= n;
	f->remain -= n;
	return f->remain == 0 ? fr_deliver(f, sink, arg) : 0;
}

#define TL_FR_AHEAD 1024u

int tl_fr_push(struct tl_framer *f, const uint8_t *p, uint32_t len, void *ref,
	       const struct tl_fr_sink *sink, void *arg)
{
	const uint8_t *end = p + len, *pf = p;
	int rc = 0;

	if (f->dead)
		return f->dead;
	while (len > 0) {
		/* Keep the next TL_FR_AHEAD bytes on their way: another core wrote them. */
		for (; pf < end && pf < p + TL_FR_AHEAD; pf += 64)
			__builtin_prefetch(pf);
		if (f->skip > 0) {
			uint32_t n = f->skip < len ? (uint32_t)f->skip : len;
			f->skip -= n;
			p += n;
			len -= n;
			continue;
		}
		if (f->cur != NULL)
			rc = fr_body(f, &p, &len, ref, sink, arg);
		else
			rc = fr_header(f, &p, &len, sink, arg);
		if (rc != 0)
			break;
	}
	if (f->cur != NULL) /* the rest comes in later chunks: keep this one's bytes */
		fr_hold_refs(f->cur);
	return rc;
}
