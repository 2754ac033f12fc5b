/*
 * fz_conn.c — fuse over the transport: one packer (fz_pack.c) and one unpacker
 * (fz_unpack.c) per tl_conn, and the loop step that drives their timers.
 *
 * Call chain, sending:  app -> fz_conn_send -> fz_peer_send -> fz_conn_output -> tl_send
 *   (a fused frame or one message alone, zero copy) ... tl_poll -> done.
 * Receiving:  fz_net_poll -> tl_poll -> fz_tl_msg -> fz_unpack -> fz_conn_deliver ->
 *   ops->msg; a refused frame -> tl_send_error to the sender.
 * Loop step:  fz_net_poll -> tl_poll, then owed completions, fz_peer_poll per connection
 *   (timer and autocork flushes), flushes that met a full send queue.
 *
 * Why completions are deferred: the packer completes a fused message inside
 * fz_peer_send (its body is copied), while tl.h promises callbacks never run inside the
 * call that caused them. The glue keeps that one rule for upper layers by queueing such
 * completions and running them from the next fz_net_poll. The queue grows by doubling
 * until it covers the largest burst between two polls, then stays: no allocation per
 * message in steady state.
 *
 * The packer hands such a completion to ops.copied (fz_conn_copied), which queues it;
 * a message sent alone keeps its own done, which the transport calls.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuse/fz.h"
#include "fuse/fz_pvt.h"
#include "transport/tl.h"

DN_LOG_REGISTER(fz_logtype, "wharf.fz")

struct fz_owed {
	fz_done_fn done;
	void *arg;
	int status;
};

struct fz_net {
	struct tl *tl;
	struct fz_conn *conns;       /* every live connection of this net, doubly linked */
	struct fz_listener *lsns;
	struct fz_owed *owed;        /* completions to run from the next poll, in order */
	uint32_t n_owed, cap_owed;
	uint64_t now_us;             /* the clock as of the last poll (see fz_conn_send) */
};

struct fz_conn {
	struct fz_net *net;
	struct fz_conn *prev, *next;
	struct tl_conn *c;
	const struct fz_conn_ops *ops;
	void *ctx;
	struct fz_peer *peer;
	struct fz_rx *rx;
	bool up;                     /* connected (or accepted) and not closing */
	bool closing;                /* fz_conn_close or fz_net_destroy asked */
	bool flush_owed;             /* an explicit flush met a full queue: poll retries */
	uint32_t push_min;           /* a message alone above this is pushed (as frames are) */
	bool fuse;                   /* tensor_fuse on: frames may open */
	bool corked;                 /* fz_conn_cork until the next fz_conn_flush */
	uint64_t refusals_sent, refusals_dropped, deferred_done;
};

struct fz_listener {
	struct fz_net *net;
	struct fz_listener *next;
	struct tl_listener *l;       /* NULL once unlistened */
	struct fz_config cfg;
	const struct fz_conn_ops *ops;
	fz_accept_fn accepted;
	void *ctx;
};

static uint64_t fz_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- net ----------------------------------------------------------------------------- */

int fz_net_create(struct tl *tl, struct fz_net **out)
{
	struct fz_net *net;

	if (!tl || !out)
		return -EINVAL;
	net = calloc(1, sizeof(*net));
	if (!net)
		return -ENOMEM;
	net->tl = tl;
	net->now_us = fz_clock_us();
	*out = net;
	return 0;
}

/* Room for n more owed completions, made before a send so a send never half-fails. */
static int fz_owed_reserve(struct fz_net *net, uint32_t n)
{
	uint32_t cap = net->cap_owed ? net->cap_owed : 256;
	struct fz_owed *o;

	if (n <= net->cap_owed - net->n_owed)
		return 0;
	if (n > UINT32_MAX / 2 - net->n_owed)
		return -ENOMEM;
	while (cap - net->n_owed < n)
		cap *= 2;
	o = realloc(net->owed, (size_t)cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	net->owed = o;
	net->cap_owed = cap;
	return 0;
}

/* Runs the completions owed before this call; ones they cause wait for the next. */
static void fz_owed_run(struct fz_net *net)
{
	uint32_t i, n = net->n_owed;

	if (n == 0)
		return;
	/* Index, not pointer: a callback that sends may grow (move) the array. */
	for (i = 0; i < n; i++) {
		struct fz_owed o = net->owed[i];
		o.done(o.arg, o.status);
	}
	memmove(net->owed, net->owed + n, (net->n_owed - n) * sizeof(*net->owed));
	net->n_owed -= n;
}

static void fz_conn_free(struct fz_conn *fc)
{
	struct fz_net *net = fc->net;

	if (fc->prev)
		fc->prev->next = fc->next;
	else
		net->conns = fc->next;
	if (fc->next)
		fc->next->prev = fc->prev;
	/* tl completed every queued send before the final callback: no frame in flight. */
	fz_peer_destroy(fc->peer);
	fz_rx_destroy(fc->rx);
	free(fc);
}

void fz_net_destroy(struct fz_net *net)
{
	struct fz_conn *fc;

	if (!net)
		return;
	while (net->lsns) {
		struct fz_listener *l = net->lsns;
		net->lsns = l->next;
		fz_unlisten(l);
		free(l);
	}
	for (fc = net->conns; fc; fc = fc->next)
		fz_conn_close(fc);
	/* One round reaps them (their closed or connected callbacks free them). */
	if (net->conns)
		tl_poll(net->tl, 0);
	fz_owed_run(net);
	while (net->conns)  /* only if tl could not reap: free what is left quietly */
		fz_conn_free(net->conns);
	free(net->owed);
	free(net);
}

/* Timer and idle flushes, and explicit flushes owed; the clock is read once per round. */
static void fz_net_tick(struct fz_net *net)
{
	struct fz_conn *fc;

	net->now_us = fz_clock_us();
	for (fc = net->conns; fc; fc = fc->next) {
		if (!fc->up)
			continue;
		if (fc->flush_owed && fz_peer_flush(fc->peer, net->now_us) == 0)
			fc->flush_owed = false;
		(void)fz_peer_poll(fc->peer, net->now_us);
	}
}

int fz_net_poll(struct fz_net *net, int64_t timeout_us)
{
	uint64_t deadline = UINT64_MAX, now;
	struct fz_conn *fc;
	int rc;

	if (!net)
		return -EINVAL;
	fz_owed_run(net);
	fz_net_tick(net);
	for (fc = net->conns; fc; fc = fc->next) {
		uint64_t d = fz_peer_deadline(fc->peer);
		deadline = d < deadline ? d : deadline;
	}
	/* Wait no longer than the earliest open frame may be held. */
	if (deadline != UINT64_MAX) {
		now = net->now_us;
		if (deadline <= now)
			timeout_us = 0;
		else if (timeout_us < 0 || (uint64_t)timeout_us > deadline - now)
			timeout_us = (int64_t)(deadline - now);
	}
	rc = tl_poll(net->tl, timeout_us);
	fz_net_tick(net);
	fz_owed_run(net);
	return rc;
}

/* ---- the packer's output side -------------------------------------------------------- */

/* A message copied into a frame: its completion waits for the next poll. */
static void fz_conn_copied(void *arg, fz_done_fn done, void *done_arg)
{
	struct fz_conn *fc = arg;
	struct fz_net *net = fc->net;

	/* fz_conn_send reserved this slot before calling the packer. */
	net->owed[net->n_owed++] = (struct fz_owed){ done, done_arg, 0 };
	fc->deferred_done++;
}

static int fz_conn_output(void *arg, const struct fz_out *out)
{
	struct fz_conn *fc = arg;
	int rc;

	rc = tl_send(fc->c, &out->hdr, out->iov, out->iovcnt, out->done, out->done_arg);
	/*
	 * A message above the threshold is worth starting now: the peer copies it while the
	 * caller packs the next. So is a frame, unless the connection is corked: then the
	 * caller ends its batch with a flush and a poll, which start the frames together;
	 * pushed one by one, each would wake a sleeping peer (and the testbed switch) for a
	 * few KiB.
	 */
	if (rc == 0 && (out->hdr.type == FZ_TYPE_FRAME ? !fc->corked :
			out->hdr.body_len > fc->push_min))
		(void)tl_conn_push(fc->c);
	return rc;
}

static bool fz_conn_wire_busy(void *arg)
{
	struct fz_conn *fc = arg;

	return tl_conn_tx_pending(fc->c) > 0;
}

/*
 * The clock a send hands the packer. A frame this call opens is stamped with it, so it is
 * read afresh when one may open (fusion on, no frame open, the wire busy): since the last
 * poll the application may have computed, or tl_poll slept, for any time, and a frame
 * stamped before that would count it as held time and leave at once, on a timer it never
 * waited for. Otherwise the last poll's reading: a step of sends into an open frame, or
 * a lone message on an idle wire, costs no clock read.
 */
static uint64_t fz_conn_now(struct fz_conn *fc)
{
	struct fz_net *net = fc->net;

	if (fc->fuse && fz_peer_deadline(fc->peer) == UINT64_MAX && fz_conn_wire_busy(fc))
		net->now_us = fz_clock_us();
	return net->now_us;
}

int fz_conn_send(struct fz_conn *fc, const struct fz_msg *msg)
{
	uint32_t taken;

	return fz_conn_send_many(fc, msg, 1, &taken);
}

int fz_conn_send_many(struct fz_conn *fc, const struct fz_msg *msgs, uint32_t n,
		      uint32_t *taken)
{
	int rc;

	if (taken)
		*taken = 0;
	if (!fc || !taken || (n && !msgs))
		return -EINVAL;
	if (!fc->up)
		return -ENOTCONN;
	rc = fz_owed_reserve(fc->net, n);
	if (rc)
		return rc;
	return fz_peer_send_many(fc->peer, msgs, n, fz_conn_now(fc), taken);
}

int fz_conn_flush(struct fz_conn *fc)
{
	int rc;

	if (!fc)
		return -EINVAL;
	if (!fc->up)
		return -ENOTCONN;
	rc = fz_peer_flush(fc->peer, fc->net->now_us);
	fc->flush_owed = rc == -ENOBUFS;
	if (rc == 0)
		fc->corked = false;
	return rc;
}

void fz_conn_cork(struct fz_conn *fc)
{
	if (!fc || !fc->up || !fc->fuse)
		return;
	fc->corked = true;
	fz_peer_cork(fc->peer);
}

int fz_conn_close(struct fz_conn *fc)
{
	if (!fc || fc->closing)
		return -ENOTCONN;
	fc->closing = true;
	fc->up = false;
	return tl_close(fc->c);
}

void fz_conn_set_ctx(struct fz_conn *fc, void *ctx) { fc->ctx = ctx; }
void *fz_conn_ctx(const struct fz_conn *fc) { return fc->ctx; }
struct tl_conn *fz_conn_tl(const struct fz_conn *fc) { return fc->c; }

void fz_conn_stats_get(const struct fz_conn *fc, struct fz_conn_stats *out)
{
	out->tx = *fz_peer_stats(fc->peer);
	out->rx = *fz_rx_stats(fc->rx);
	out->refusals_sent = fc->refusals_sent;
	out->refusals_dropped = fc->refusals_dropped;
	out->deferred_done = fc->deferred_done;
}

void fz_conn_stats_add(struct fz_conn_stats *sum, const struct fz_conn_stats *st)
{
	uint32_t i;

	sum->tx.msgs += st->tx.msgs;
	sum->tx.msgs_fused += st->tx.msgs_fused;
	sum->tx.msgs_alone += st->tx.msgs_alone;
	sum->tx.alone_no_frame += st->tx.alone_no_frame;
	sum->tx.frames += st->tx.frames;
	sum->tx.frames_single += st->tx.frames_single;
	sum->tx.frames_saved += st->tx.frames_saved;
	sum->tx.bytes_saved += st->tx.bytes_saved;
	for (i = 0; i < FZ_HIST_BUCKETS; i++)
		sum->tx.subs_hist[i] += st->tx.subs_hist[i];
	for (i = 0; i < FZ_FLUSH_REASONS; i++)
		sum->tx.flush[i] += st->tx.flush[i];
	sum->rx.msgs += st->rx.msgs;
	sum->rx.frames += st->rx.frames;
	sum->rx.subs += st->rx.subs;
	sum->rx.refused += st->rx.refused;
	sum->refusals_sent += st->refusals_sent;
	sum->refusals_dropped += st->refusals_dropped;
	sum->deferred_done += st->deferred_done;
}

/* ---- transport callbacks ------------------------------------------------------------- */

static void fz_conn_deliver(void *arg, const struct tl_msg_view *m,
			    const struct tl_msg_view *carrier)
{
	struct fz_conn *fc = arg;

	/* Closed from an earlier sub-message's callback: deliver nothing more. */
	if (fc->up)
		fc->ops->msg(fc, m, carrier);
}

static void fz_tl_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct fz_conn *fc = tl_conn_ctx(c);
	struct fz_rx_error err;
	char text[TL_ERR_TEXT_MAX];
	int rc;

	if (!fc || !fc->up)
		return;
	rc = fz_unpack(fc->rx, m, fz_conn_deliver, fc, &err);
	if (rc == 0)
		return;
	/* Refused whole, nothing delivered: tell the sender, keep the connection. */
	if (fz_rx_error_text(&err, text, sizeof(text)) < 0)
		strcpy(text, "fuse: malformed fused frame");
	FZ_LOG(DEBUG, "refused a frame (req %" PRIu64 "): %s", (uint64_t)m->hdr.req_id, text);
	if (tl_send_error(c, m->hdr.req_id, rc, text) == 0)
		fc->refusals_sent++;
	else
		fc->refusals_dropped++;
}

static void fz_tl_connected(struct tl_conn *c, int status)
{
	struct fz_conn *fc = tl_conn_ctx(c);

	if (!fc)
		return;
	fc->up = status == 0 && !fc->closing;
	if (fc->ops->connected)
		fc->ops->connected(fc, status);
	if (status != 0)
		fz_conn_free(fc);
}

static void fz_tl_closed(struct tl_conn *c, int reason)
{
	struct fz_conn *fc = tl_conn_ctx(c);

	if (!fc)
		return;
	fc->up = false;
	if (fc->ops->closed)
		fc->ops->closed(fc, reason);
	fz_conn_free(fc);
}

static const struct tl_conn_ops fz_tl_ops = { fz_tl_connected, fz_tl_msg, fz_tl_closed };

/* ---- opening ------------------------------------------------------------------------- */

/* Frame bodies in the transport's own memory, so a fused frame leaves without a copy. */
static void *fz_conn_mem_alloc(void *arg, size_t size)
{
	return tl_buf_alloc(((struct fz_conn *)arg)->net->tl, size);
}

static void fz_conn_mem_free(void *arg, void *p)
{
	tl_buf_free(((struct fz_conn *)arg)->net->tl, p);
}

static int fz_conn_new(struct fz_net *net, const struct fz_config *cfg,
		       const struct fz_conn_ops *ops, void *ctx, struct fz_conn **out)
{
	struct fz_peer_ops pops = { .output = fz_conn_output, .wire_busy = fz_conn_wire_busy,
				    .mem_alloc = fz_conn_mem_alloc, .mem_free = fz_conn_mem_free,
				    .copied = fz_conn_copied };
	struct fz_conn *fc;
	int rc;

	if (!ops || !ops->msg)
		return -EINVAL;
	fc = calloc(1, sizeof(*fc));
	if (!fc)
		return -ENOMEM;
	pops.arg = fc;
	fc->net = net;
	fc->ops = ops;
	fc->ctx = ctx;
	fc->push_min = cfg->fuse_threshold_bytes;
	fc->fuse = cfg->tensor_fuse;
	rc = fz_peer_create(cfg, &pops, &fc->peer);
	if (rc == 0)
		rc = fz_rx_create(&fc->rx);
	if (rc) {
		fz_peer_destroy(fc->peer);
		free(fc);
		return rc;
	}
	fc->next = net->conns;
	if (net->conns)
		net->conns->prev = fc;
	net->conns = fc;
	*out = fc;
	return 0;
}

int fz_net_connect(struct fz_net *net, uint32_t ip, uint16_t port, const struct fz_config *cfg,
		   const struct fz_conn_ops *ops, void *ctx, struct fz_conn **out)
{
	struct fz_conn *fc;
	int rc;

	if (!net || !cfg || !out)
		return -EINVAL;
	rc = fz_conn_new(net, cfg, ops, ctx, &fc);
	if (rc)
		return rc;
	rc = tl_connect(net->tl, ip, port, &fz_tl_ops, fc, &fc->c);
	if (rc) {
		fz_conn_free(fc);
		return rc;
	}
	*out = fc;
	return 0;
}

static void fz_tl_accepted(struct tl_listener *tll, struct tl_conn *c)
{
	struct fz_listener *l = tl_listener_ctx(tll);
	struct fz_conn *fc;

	/* The context is the listener's until replaced: never let a callback read it. */
	tl_conn_set_ctx(c, NULL);
	if (fz_conn_new(l->net, &l->cfg, l->ops, l->ctx, &fc) != 0) {
		tl_close(c);
		return;
	}
	fc->c = c;
	fc->up = true;
	tl_conn_set_ctx(c, fc);
	if (l->accepted)
		l->accepted(fc, l->ctx);
}

int fz_net_listen(struct fz_net *net, uint32_t ip, uint16_t port, const struct fz_config *cfg,
		  const struct fz_conn_ops *ops, fz_accept_fn accepted, void *ctx,
		  struct fz_listener **out)
{
	struct fz_listener *l;
	int rc;

	if (!net || !cfg || !ops || !ops->msg || !out || fz_config_validate(cfg, NULL, 0))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->net = net;
	l->cfg = *cfg;
	l->ops = ops;
	l->accepted = accepted;
	l->ctx = ctx;
	rc = tl_listen(net->tl, ip, port, &fz_tl_ops, fz_tl_accepted, l, &l->l);
	if (rc) {
		free(l);
		return rc;
	}
	l->next = net->lsns;
	net->lsns = l;
	*out = l;
	return 0;
}

uint16_t fz_listener_port(const struct fz_listener *l)
{
	return l->l ? tl_listener_port(l->l) : 0;
}

/* The record stays on the net's list (freed by fz_net_destroy): unlisten is idempotent. */
void fz_unlisten(struct fz_listener *l)
{
	if (!l || !l->l)
		return;
	tl_unlisten(l->l);
	l->l = NULL;
}
