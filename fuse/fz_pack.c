/*
 * fz_pack.c — the sending half of fuse: a per-peer packer.
 *
 * Call chain: ps_core (client or server reply path) -> fz_peer_send -> [copy into the open
 * fused frame] -> ops.output (transport glue: TCP-lite or kernel socket send, zero copy)
 * -> ... -> transport calls the frame's done when acked -> fz_frame_done recycles it.
 * fz_peer_poll runs from the lcore loop's timer step; fz_peer_flush at the end of a step.
 *
 * Policy, in one place (fz_peer_send):
 *   - tensor_fuse off, or body above fuse_threshold_bytes: the message goes alone, by
 *     reference, after the open frame (if any) so order holds.
 *   - small message, wire idle and no frame open: alone at once (autocorking: never hold
 *     a lone message back on an idle connection), unless the caller corked the peer
 *     (fz_peer_cork: it knows more sends follow and flushes them itself).
 *   - otherwise it is copied into the open frame; the frame goes out when the next
 *     message would not fit or it holds fuse_max_msgs, on fz_peer_flush, when fuse_max_delay_us has passed since it
 *     opened, or as soon as the wire is seen idle. A frame that closes holding one
 *     message leaves as that message (its own header, no sub-header): never more bytes
 *     on the wire, or more work at the peer, than without fusion.
 * Frame buffers are allocated once in fz_peer_create and recycled; when all are in
 * flight a small message simply goes alone (never blocks, never allocates).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fz.h"
#include "fuse/fz_pvt.h"

_Static_assert(FZ_SUB_HDR_MAX <= TL_LW_ROOM, "a sub-header is written at the line writer's cursor");

struct fz_frame {
	struct fz_peer *peer;
	uint8_t *buf;             /* fuse_max_bytes of packer storage */
	struct tl_iov iov;        /* the body as handed to output */
	uint32_t len;             /* body bytes written */
	uint32_t count;           /* sub-messages */
	uint32_t sub_hdr_bytes;   /* of len, bytes spent on sub-headers */
	uint64_t prev_req_id;     /* last sub-message's req_id, for the delta chain */
	uint64_t opened_us;
	struct tl_msg_hdr first;  /* the first sub-message's header: its req_id is the frame's;
				   * a frame of one leaves as that message (body after
				   * sub_hdr_bytes) */
};

/*
 * The last sub-header written: what it was made of (the header's bytes but its req_id,
 * and the req_id step) and, from its first repeat on, its bytes as built in registers
 * (len 0: not built yet; FZ_REP_LONG: longer than 16 bytes). A step's tensors of one
 * shape repeat it byte for byte, and a repeat is stored whole.
 */
#define FZ_REP_LONG UINT32_MAX
struct fz_sub_rep {
	uint64_t key[3];
	uint64_t delta;
	struct fz_word word;
	uint32_t len;
	bool valid;
};

struct fz_peer {
	struct fz_config cfg;
	struct fz_peer_ops ops;
	struct fz_frame *open;    /* accumulating, not yet handed to output; NULL if none */
	struct tl_lw lw;          /* the open frame's writer (tl_wire.h: streamed lines) */
	uint32_t cap;             /* body bytes the next frame may hold (the ramp, below) */
	struct fz_frame **free;   /* stack of idle frames */
	uint32_t n_free;
	uint32_t in_flight;
	bool corked;              /* fz_peer_cork: fuse as if the wire were busy until a flush */
	struct fz_tx_stats stats;
	struct fz_sub_rep rep;    /* the last sub-header written, for repeats */
	uint8_t *mem;             /* all frame bodies, one allocation */
	struct fz_frame frames[];
};

uint32_t fz_sub_hdr_put(uint8_t *p, const struct tl_msg_hdr *h, uint64_t prev_req_id)
{
	uint64_t delta = fz_zigzag(h->req_id - prev_req_id);
	uint32_t n = 2;

	p[0] = h->type;
	p[1] = fz_sub_present(h, delta);
	n += fz_varint_put(p + n, h->body_len);
	if (h->flags)
		n += fz_varint_put(p + n, h->flags);
	if (h->aux)
		n += fz_varint_put(p + n, h->aux);
	if (h->table_id)
		n += fz_varint_put(p + n, h->table_id);
	if (delta)
		n += fz_varint_put(p + n, delta);
	if (h->key_count)
		n += fz_varint_put(p + n, h->key_count);
	if (h->dim)
		n += fz_varint_put(p + n, h->dim);
	return n;
}

/* A header's bytes but its req_id (16..23), as three words. */
static inline void fz_hdr_key(const struct tl_msg_hdr *h, uint64_t key[3])
{
	const uint8_t *b = (const uint8_t *)h;

	key[0] = tl_ld64(b);
	key[1] = tl_ld64(b + 8);
	key[2] = tl_ld64(b + 24);
}

/*
 * fz_sub_hdr_put, with no encoding when h repeats the last sub-header (the same fields,
 * the same req_id step): two 8-byte stores of the bytes built at its first repeat (the
 * bytes past its length are written over by what follows).
 */
static inline uint32_t fz_sub_hdr_put_rep(struct fz_sub_rep *r, uint8_t *p,
					  const struct tl_msg_hdr *h, uint64_t prev_req_id)
{
	uint64_t delta = h->req_id - prev_req_id, key[3];

	fz_hdr_key(h, key);
	if (!r->valid || key[0] != r->key[0] || key[1] != r->key[1] || key[2] != r->key[2] ||
	    delta != r->delta) {
		*r = (struct fz_sub_rep){ .key = { key[0], key[1], key[2] }, .delta = delta,
					  .valid = true };
		return fz_sub_hdr_put(p, h, prev_req_id);
	}
	if (r->len == 0) {
		r->len = fz_sub_hdr_word(h, prev_req_id, &r->word);
		if (r->len == 0)
			r->len = FZ_REP_LONG;
	}
	if (r->len == FZ_REP_LONG)
		return fz_sub_hdr_put(p, h, prev_req_id);
	tl_st64(p, r->word.lo);
	tl_st64(p + 8, r->word.hi);
	return r->len;
}

/*
 * The ramp: the first frame of a burst holds FZ_RAMP_START bytes and each frame that
 * leaves full lets the next hold twice as much, up to fuse_max_bytes. A frame goes to
 * the wire (ops.output, which pushes) as soon as it is closed, so the peer copies and
 * unpacks the first small frames while the rest of the burst is packed, rather than
 * waiting for one large frame; a long burst still moves in frames of fuse_max_bytes.
 * Any other flush (explicit, timer, idle: the burst ended) starts the ramp again.
 */
static uint32_t fz_ramp_start(const struct fz_config *cfg)
{
	return cfg->fuse_max_bytes < FZ_RAMP_START ? cfg->fuse_max_bytes : FZ_RAMP_START;
}

static void fz_mem_free(struct fz_peer *peer)
{
	if (peer->mem && peer->ops.mem_free)
		peer->ops.mem_free(peer->ops.arg, peer->mem);
	else
		free(peer->mem);
}

int fz_peer_create(const struct fz_config *cfg, const struct fz_peer_ops *ops,
		   struct fz_peer **out)
{
	struct fz_peer *peer;
	size_t size;
	uint32_t i;

	if (!cfg || !ops || !ops->output || !ops->wire_busy || !out ||
	    !ops->mem_alloc != !ops->mem_free)
		return -EINVAL;
	if (fz_config_validate(cfg, NULL, 0) != 0)
		return -EINVAL;
	peer = calloc(1, sizeof(*peer) + cfg->fuse_frames * sizeof(peer->frames[0]));
	if (!peer)
		return -ENOMEM;
	peer->free = calloc(cfg->fuse_frames, sizeof(peer->free[0]));
	peer->cfg = *cfg;
	peer->ops = *ops;
	peer->cap = fz_ramp_start(cfg);
	/* One block, cache-line aligned, so every frame body starts on a line. */
	size = (size_t)cfg->fuse_frames * ((cfg->fuse_max_bytes + 63u) & ~63u);
	peer->mem = ops->mem_alloc ? ops->mem_alloc(ops->arg, size) : aligned_alloc(64, size);
	if (!peer->free || !peer->mem) {
		fz_peer_destroy(peer);
		return -ENOMEM;
	}
	if ((uintptr_t)peer->mem & 63u) {   /* the line writer streams whole, aligned lines */
		fz_peer_destroy(peer);
		return -EINVAL;
	}
	for (i = 0; i < cfg->fuse_frames; i++) {
		struct fz_frame *f = &peer->frames[i];
		f->peer = peer;
		f->buf = peer->mem + (size_t)i * ((cfg->fuse_max_bytes + 63u) & ~63u);
		peer->free[peer->n_free++] = f;
	}
	*out = peer;
	return 0;
}

void fz_peer_destroy(struct fz_peer *peer)
{
	if (!peer)
		return;
	fz_mem_free(peer);
	free(peer->free);
	free(peer);
}

/* Output finished with a frame (acked, or the connection gave up): recycle it. */
static void fz_frame_done(void *arg, int status)
{
	struct fz_frame *f = arg;
	struct fz_peer *peer = f->peer;

	/* The sub-messages' owners were completed when copied; a failed frame's loss is
	 * the transport's to report (it closes the connection). */
	(void)status;
	peer->in_flight--;
	peer->free[peer->n_free++] = f;
}

static uint32_t fz_hist_bucket(uint32_t n)
{
	uint32_t b = 0;

	while (n > 1 && b < FZ_HIST_BUCKETS - 1) {
		n >>= 1;
		b++;
	}
	return b;
}

/* Hands the open frame to output. On failure the frame stays open, nothing counted. */
static int fz_flush_open(struct fz_peer *peer, enum fz_flush_reason why)
{
	struct fz_frame *f = peer->open;
	uint32_t count, hdr_bytes;
	struct fz_out out;
	int rc;

	if (!f)
		return 0;
	tl_lw_finish(&peer->lw);
	count = f->count;
	hdr_bytes = f->sub_hdr_bytes;
	memset(&out, 0, sizeof(out));
	if (count == 1) {
		/* A frame of one would only add its sub-header: send the message itself,
		 * its body where the frame holds it. */
		out.hdr = f->first;
		f->iov.base = f->buf + hdr_bytes;
		f->iov.len = f->len - hdr_bytes;
	} else {
		out.hdr.type = FZ_TYPE_FRAME;
		out.hdr.body_len = f->len;
		out.hdr.req_id = f->first.req_id;
		out.hdr.key_count = count;
		f->iov.base = f->buf;
		f->iov.len = f->len;
	}
	out.hdr.magic = TL_MSG_MAGIC;
	out.hdr.version = TL_MSG_VERSION;
	out.iov = &f->iov;
	out.iovcnt = f->iov.len > 0;
	out.done = fz_frame_done;
	out.done_arg = f;
	/* Commit before the call: an output side that finishes synchronously calls
	 * fz_frame_done from inside output, which must find the frame in flight. */
	peer->open = NULL;
	peer->in_flight++;
	rc = peer->ops.output(peer->ops.arg, &out);
	if (rc != 0) {
		peer->in_flight--;
		peer->open = f;
		return rc;
	}
	if (count == 1) {
		peer->stats.frames_single++;
	} else {
		peer->stats.frames++;
		peer->stats.frames_saved += count - 1;
		peer->stats.bytes_saved += (int64_t)TL_MSG_HDR_LEN * (count - 1) - hdr_bytes;
		peer->stats.subs_hist[fz_hist_bucket(count)]++;
	}
	peer->stats.flush[why]++;
	if (why != FZ_FLUSH_FULL)
		peer->cap = fz_ramp_start(&peer->cfg);
	else  /* cap <= FZ_MAX_MAX_BYTES (16 MiB): doubling cannot wrap */
		peer->cap = peer->cap * 2 < peer->cfg.fuse_max_bytes ? peer->cap * 2
								     : peer->cfg.fuse_max_bytes;
	return 0;
}

static int fz_send_alone(struct fz_peer *peer, const struct fz_msg *msg)
{
	struct fz_out out;
	int rc;

	out.hdr = msg->hdr;
	out.hdr.magic = TL_MSG_MAGIC;
	out.hdr.version = TL_MSG_VERSION;
	out.iov = msg->iov;
	out.iovcnt = msg->iovcnt;
	out.done = msg->done;
	out.done_arg = msg->done_arg;
	rc = peer->ops.output(peer->ops.arg, &out);
	if (rc != 0)
		return rc;
	peer->stats.msgs++;
	peer->stats.msgs_alone++;
	return 0;
}

/* Opens a frame for msg, its first sub-message (appended next). */
static void fz_frame_open(struct fz_peer *peer, const struct fz_msg *msg, uint64_t now_us)
{
	struct fz_frame *f = peer->free[--peer->n_free];

	f->len = 0;
	f->count = 0;
	f->sub_hdr_bytes = 0;
	f->first = msg->hdr;
	f->prev_req_id = msg->hdr.req_id;
	f->opened_us = now_us;
	peer->open = f;
	tl_lw_open(&peer->lw, f->buf);
}

/*
 * Appends msg to the open frame: its sub-header (sub_hdr_len bytes, already at the
 * writer's cursor), then its body. The caller checked that both fit.
 */
static void fz_frame_append(struct fz_peer *peer, struct fz_frame *f, const struct fz_msg *msg,
			    uint32_t sub_hdr_len)
{
	tl_lw_commit(&peer->lw, sub_hdr_len);
	for (uint32_t i = 0; i < msg->iovcnt; i++)
		tl_lw_put(&peer->lw, msg->iov[i].base, msg->iov[i].len);
	f->len += sub_hdr_len + msg->hdr.body_len;
	f->sub_hdr_bytes += sub_hdr_len;
	f->count++;
	f->prev_req_id = msg->hdr.req_id;
}

/* The wire as fusion sees it: busy, or corked by the caller until its next flush. */
static bool fz_busy(const struct fz_peer *peer)
{
	return peer->corked || peer->ops.wire_busy(peer->ops.arg);
}

static int fz_msg_check(const struct fz_msg *msg)
{
	uint64_t sum = 0;
	uint32_t i;

	if (msg->hdr.type == 0 || fz_type_is_fuse(msg->hdr.type))
		return -EINVAL;
	if (msg->iovcnt && !msg->iov)
		return -EINVAL;
	for (i = 0; i < msg->iovcnt; i++) {
		if (msg->iov[i].len && !msg->iov[i].base)
			return -EINVAL;
		sum += msg->iov[i].len;
	}
	return sum == msg->hdr.body_len ? 0 : -EINVAL;
}

/* One message of fz_peer_send_many; busy is the wire's state as last read. */
static int fz_peer_send_one(struct fz_peer *peer, const struct fz_msg *msg, uint64_t now_us,
			    bool busy)
{
	uint32_t sub_hdr_len;
	struct fz_frame *f;
	int rc;

	if (fz_msg_check(msg) != 0)
		return -EINVAL;
	if (!peer->cfg.tensor_fuse || msg->hdr.body_len > peer->cfg.fuse_threshold_bytes) {
		rc = fz_flush_open(peer, FZ_FLUSH_LARGE);
		return rc ? rc : fz_send_alone(peer, msg);
	}
	f = peer->open;
	if (f) {
		/* Written at the writer's cursor: room for TL_LW_ROOM >= FZ_SUB_HDR_MAX. */
		sub_hdr_len = fz_sub_hdr_put_rep(&peer->rep, tl_lw_cursor(&peer->lw), &msg->hdr,
						 f->prev_req_id);
		if (f->len + sub_hdr_len + msg->hdr.body_len > peer->cap ||
		    f->count == peer->cfg.fuse_max_msgs) {
			rc = fz_flush_open(peer, FZ_FLUSH_FULL);
			if (rc)
				return rc;
			busy = fz_busy(peer);  /* the frame just went out */
			f = NULL;
		}
	}
	if (!f) {
		if (!busy || peer->n_free == 0) {
			rc = fz_send_alone(peer, msg);
			peer->stats.alone_no_frame += rc == 0 && busy;
			return rc;
		}
		fz_frame_open(peer, msg, now_us);
		f = peer->open;
		sub_hdr_len = fz_sub_hdr_put_rep(&peer->rep, tl_lw_cursor(&peer->lw), &msg->hdr,
						 f->prev_req_id);
	}
	fz_frame_append(peer, f, msg, sub_hdr_len);
	peer->stats.msgs++;
	peer->stats.msgs_fused++;
	if (msg->done && peer->ops.copied)
		peer->ops.copied(peer->ops.arg, msg->done, msg->done_arg);
	else if (msg->done)
		msg->done(msg->done_arg, 0);
	/* The message is accepted; a flush that fails here is retried by fz_peer_poll. */
	if (now_us - f->opened_us >= peer->cfg.fuse_max_delay_us)
		(void)fz_flush_open(peer, FZ_FLUSH_TIMER);
	return 0;
}

/* Messages and frames handed to output so far. */
static uint64_t fz_outputs(const struct fz_peer *peer)
{
	return peer->stats.frames + peer->stats.frames_single + peer->stats.msgs_alone;
}

int fz_peer_send_many(struct fz_peer *peer, const struct fz_msg *msgs, uint32_t n,
		      uint64_t now_us, uint32_t *taken)
{
	uint32_t k;
	uint64_t outs;
	bool busy;
	int rc = 0;

	if (taken)
		*taken = 0;
	if (!peer || !taken || (n && !msgs))
		return -EINVAL;
	/*
	 * The wire's state is asked again only after something went to output: within one
	 * call nothing completes (completions arrive in the caller's poll), so otherwise it
	 * cannot have changed.
	 */
	busy = fz_busy(peer);
	outs = fz_outputs(peer);
	for (k = 0; k < n; k++) {
		rc = fz_peer_send_one(peer, &msgs[k], now_us, busy);
		if (rc)
			break;
		if (fz_outputs(peer) != outs) {
			busy = fz_busy(peer);
			outs = fz_outputs(peer);
		}
	}
	*taken = k;
	/* Autocorking: with the wire idle nothing is held back. */
	if (rc == 0 && peer->open && !busy)
		(void)fz_flush_open(peer, FZ_FLUSH_IDLE);
	return rc;
}

int fz_peer_send(struct fz_peer *peer, const struct fz_msg *msg, uint64_t now_us)
{
	uint32_t taken;

	return fz_peer_send_many(peer, msg, 1, now_us, &taken);
}

int fz_peer_flush(struct fz_peer *peer, uint64_t now_us)
{
	int rc;

	(void)now_us;
	if (!peer)
		return -EINVAL;
	rc = fz_flush_open(peer, FZ_FLUSH_EXPLICIT);
	if (rc == 0)
		peer->corked = false;
	return rc;
}

void fz_peer_cork(struct fz_peer *peer)
{
	if (peer)
		peer->corked = true;
}

int fz_peer_poll(struct fz_peer *peer, uint64_t now_us)
{
	if (!peer)
		return -EINVAL;
	if (!peer->open)
		return 0;
	if (now_us >= peer->open->opened_us + peer->cfg.fuse_max_delay_us)
		return fz_flush_open(peer, FZ_FLUSH_TIMER);
	if (!fz_busy(peer))
		return fz_flush_open(peer, FZ_FLUSH_IDLE);
	return 0;
}

uint64_t fz_peer_deadline(const struct fz_peer *peer)
{
	if (!peer || !peer->open)
		return UINT64_MAX;
	return peer->open->opened_us + peer->cfg.fuse_max_delay_us;
}

uint32_t fz_peer_in_flight(const struct fz_peer *peer)
{
	return peer ? peer->in_flight : 0;
}

const struct fz_tx_stats *fz_peer_stats(const struct fz_peer *peer)
{
	return &peer->stats;
}
