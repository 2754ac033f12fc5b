/*
 * fuzz_frame.c — libFuzzer harness for transport's stream framer, tl_fr_push
 * (transport/tl_pvt.h, transport/tl_frame.c), fed arbitrary bytes in arbitrary chunkings.
 *
 * Call chain exercised: (backend rx, simulated) -> tl_fr_push -> sink msg/reject.
 *
 * Each chunk is its own malloc'd copy with a reference count, as a receive buffer or an
 * mbuf is: the harness drops its own reference right after the push and frees the chunk
 * when the count reaches zero, so a view the framer forgot to hold is a use-after-free
 * that ASan reports. Some delivered messages are held (tl_msg_hold) and read again only
 * at the end, after their chunks' other owners let go.
 *
 * Input layout:
 *   u8 seed      chunk-length stream seed
 *   u8 chunk     largest chunk: 1 + chunk * 4 bytes... (0xff: whole rest in one chunk)
 *   u8 flags     bit0 hold odd messages; bits 1..3 pool size - 1 (max held messages);
 *                bits 4..5 max_body (32, 4 KiB, 64 KiB, default); bits 6..7 max_segs
 *                (1, 2, 8, 64)
 *   u8 stop      sink returns -ECONNABORTED after this many messages (0: never)
 *   ... the stream
 * Checked: every message's views lie in live chunks and add up to body_len; after
 * tl_fr_fini and the releases no chunk reference and no message record is left.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuzz/fuzz_util.h"
#include "transport/tl_pvt.h"

#define FRAME_MAX_HELD 64u

struct frame_chunk {
	long *live;
	int refs;
	uint8_t data[];
};

struct frame_ctx {
	long live;                 /* chunks not yet freed */
	long holds;                /* framer-held references outstanding */
	bool hold_odd;
	uint32_t stop_after, msgs, rejects;
	uint32_t max_body;
	struct tl_msg *held[FRAME_MAX_HELD];
	uint32_t nheld;
};

static void chunk_put(struct frame_chunk *c)
{
	FH_CHECK(c->refs > 0);
	if (--c->refs == 0) {
		(*c->live)--;
		free(c);
	}
}

static void chunk_hold(void *ref)
{
	struct frame_chunk *c = ref;

	FH_CHECK(c->refs > 0);
	c->refs++;
}

static void chunk_release(void *ref)
{
	chunk_put(ref);
}

static const struct tl_chunk_ops frame_chunk_ops = {chunk_hold, chunk_release};

static int frame_msg(void *arg, const struct tl_msg_view *v)
{
	struct frame_ctx *cx = arg;

	FH_CHECK(v->hdr.magic == TL_MSG_MAGIC && v->hdr.version == TL_MSG_VERSION);
	FH_CHECK(v->hdr.body_len <= cx->max_body);
	(void)fh_touch_view(v);
	cx->msgs++;
	if (cx->hold_odd && (cx->msgs & 1) && cx->nheld < FRAME_MAX_HELD)
		cx->held[cx->nheld++] = tl_msg_hold(v);
	return cx->stop_after && cx->msgs >= cx->stop_after ? -ECONNABORTED : 0;
}

static int frame_reject(void *arg, const struct tl_msg_hdr *h, int err)
{
	struct frame_ctx *cx = arg;

	FH_CHECK(err == -EOPNOTSUPP || err == -EPROTONOSUPPORT);
	FH_CHECK(h->magic == TL_MSG_MAGIC && h->type != 0);
	cx->rejects++;
	return 0;
}

static const struct tl_fr_sink frame_sink = {frame_msg, frame_reject};

/* Pushes one chunk; returns tl_fr_push's result. */
static int frame_push(struct tl_framer *fr, struct frame_ctx *cx, const uint8_t *p, uint32_t n)
{
	struct frame_chunk *c = malloc(sizeof(*c) + n);
	int rc;

	if (c == NULL)
		return -ENOMEM;
	c->live = &cx->live;
	c->refs = 1;
	memcpy(c->data, p, n);
	cx->live++;
	rc = tl_fr_push(fr, c->data, n, c, &frame_sink, cx);
	chunk_put(c); /* the harness's own reference: the framer holds what it keeps */
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t bodies[4] = {32, 4096, 65536, TL_MSG_MAX_BODY_DEFAULT};
	static const uint32_t segs[4] = {1, 2, 8, 64};
	struct fh_in in = {data, size};
	uint64_t seed = fh_u8(&in);
	uint32_t chunk = fh_u8(&in), flags = fh_u8(&in), i;
	struct frame_ctx cx = {0};
	struct tl_fr_pool *pool;
	struct tl_framer fr;
	int rc = 0;

	cx.stop_after = fh_u8(&in);
	cx.hold_odd = flags & 1;
	cx.max_body = bodies[(flags >> 4) & 3];
	if (tl_fr_pool_create(&frame_chunk_ops, ((flags >> 1) & 7) + 1, &pool) != 0)
		return 0;
	tl_fr_init(&fr, pool, cx.max_body, segs[flags >> 6]);
	while (in.n > 0 && rc == 0) {
		uint32_t want = chunk == 0xff ? (uint32_t)in.n
					      : 1 + (uint32_t)(fh_rand(&seed) % (1 + chunk * 4u));
		size_t got;
		const uint8_t *p = fh_take(&in, want, &got);
		rc = frame_push(&fr, &cx, p, (uint32_t)got);
	}
	if (rc != 0 && rc != -ECONNABORTED && rc != -ENOMEM) {
		FH_CHECK(fr.dead == rc && fr.why != NULL);
		FH_CHECK(tl_fr_push(&fr, data, 1, NULL, &frame_sink, &cx) == rc);
	}
	tl_fr_fini(&fr);
	for (i = 0; i < cx.nheld; i++) {
		(void)fh_touch_view(tl_msg_view_of(cx.held[i]));
		tl_msg_release(cx.held[i]);
	}
	FH_CHECK(pool->in_use == 0);
	FH_CHECK(cx.live == 0);
	tl_fr_pool_destroy(pool);
	return 0;
}
