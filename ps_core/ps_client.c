/*
 * ps_client.c — the worker side. ps_client_pull/push/... route keys to servers
 * (h1(key) mod servers; dense rows by range), encode one request per server into the
 * caller's buffers and record the request in a slot; the network side sends the buffers
 * and hands each reply to ps_client_on_reply, which scatters values into the caller's
 * output straight from the reply's views and runs the completion callback when every
 * server has answered. Pushes carry (worker id, sequence) and keep an encoded copy per
 * server until acknowledged (a copy, or with ps_client_keep_by_ref the caller's encode buffer
 * itself, held by reference): ps_client_resend replays them after a reconnect, and the
 * server's per-worker sequence makes a replay that was already applied a no-op.
 * ps_client_hello, before the first push, says which process this is (its incarnation: the
 * servers refuse an older process of the same worker id from then on), continues the
 * numbering after what the servers already applied from this worker id (a worker restarted
 * under its old id), and gives the client the servers' sync step, which every push carries.
 * A GEO pull acknowledges the reply id each server gave the last one of that table (kept
 * per table and destination), so a server moves the worker's position only once its rows
 * arrived.
 *
 * Shard-aware: a server running several lcores announces them (lanes), the glue opens one
 * connection per lane, and every key goes to the lane owning its shard, so no request's
 * keys cross lcores on the server. Messages, replies and resends are per destination
 * (server, lane); with one lane per server a destination is a server.
 *
 * Every request keeps its encoded bytes per destination until answered: a refusal with
 * PS_F_RETRY sends the same bytes again after a back-off (ps_client_tick), so a push is
 * never dropped while a server asks for it again, and a server's other refusals end the
 * request with the server's text (ps_client_error). ps_client_tick also ends waits past
 * request_timeout_us, and a lost destination lets go of everything but its pushes
 * (ps_client_forget_dest, and again at ps_client_resend), so no slot outlives its
 * connection.
 *
 * Single-threaded: one client per worker thread. The request id is (generation << 16 |
 * slot), so a reply finds its slot in O(1) and a stale reply finds nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

#define SLOT_BITS 16u
#define RETRY_MIN_US 1000u        /* back-off after a first PS_F_RETRY refusal */
#define RETRY_MAX_US 1000000u     /* ... doubling up to this */
#define TICK_GAP_US 100000u       /* most the clock advances per ps_client_tick */
#define ERR_LEN 200u

/* answered[] per destination */
enum { ANS_WAIT = 0, ANS_DONE = 1, ANS_NOT_ASKED = 2, ANS_RETRY = 3 /* refused: send again */ };
/* dflags[] per destination */
#define DF_LOST    1u  /* connection lost: no retry until ps_client_resend */
#define DF_STALLED 2u  /* a request timed out on it */

struct cl_slot {
	uint64_t req_id;         /* 0 = free */
	uint8_t kind;            /* request type */
	uint32_t waiting;        /* servers still to answer */
	int status;
	ps_done_fn *done;
	void *arg;
	float *out;
	uint32_t dim, n;
	uint64_t seq, dense_first;
	uint32_t *pos;           /* caller positions grouped by destination */
	uint32_t pos_cap;
	uint32_t *srv_off;       /* n_dst + 1: destination d's keys are pos[srv_off[d]..];
				  * dense: first row of d's part, relative to the request */
	uint32_t *dcnt;          /* dense: rows of destination d's part */
	uint8_t *answered;       /* per destination: ANS_* */
	uint8_t **msg;           /* per destination: encoded request kept until answered */
	uint32_t *msg_len, *msg_cap;
	uint64_t sent_at;        /* client clock when last sent */
	bool *bar_done;
	uint64_t bar_step;       /* barrier: its step */
	bool bar_all;            /* barrier: every server said done so far */
	bool *more;              /* GEO: a server said PS_F_MORE */
	ps_geo_row_fn *row_fn;
	void *row_arg;
	char err[192];           /* why it failed: the first error reply's text, "server S: ..." */
	uint32_t geo_tab;        /* GEO: index into the client's geo_acks */
};

/* GEO: per table, the id of the last reply taken from each destination (0: none yet). */
struct cl_geo_ack {
	uint32_t table;
	uint64_t *id;            /* n_dst */
};

struct ps_client {
	struct ps_client_config cfg;
	const struct ps_client_keep *keep; /* NULL: requests kept as copies */
	struct cl_slot *slots;
	uint32_t n_slots, inflight;
	uint64_t gen, next_seq;
	uint64_t step;           /* sync: the step pushes carry (hello, then completed barriers) */
	/* per server: the state epoch first met there, and another one a later hello saw */
	uint64_t *epoch, *epoch_new;
	/* the hello round in flight: largest last sequence, smallest step-first sequence
	 * (0 none), smallest and largest step and their servers */
	uint64_t h_last, h_first, h_step_lo, h_step_hi;
	uint32_t h_srv_lo, h_srv_hi;
	char err[512];           /* ps_client_error */
	char retry_why[ERR_LEN + 32]; /* ps_client_retry_reason: "destination N: " + text */
	const char *done_err;    /* during a done callback: its slot's err */
	float *row;              /* PS_MAX_DIM: a GEO row, aligned */
	/* Layout: server s's destinations are dbase[s] .. dbase[s] + lanes[s] - 1. */
	uint32_t n_dst;
	uint32_t *dbase;         /* n_servers + 1 */
	uint32_t *lanes, *shards;
	uint32_t *kdst;          /* a request's destination per key (scratch) */
	uint32_t kdst_cap;
	struct cl_geo_ack *geo_acks;
	uint32_t n_geo_acks;
	/* Timers (ps_client_tick): the clock, retries per destination, timeouts. */
	uint64_t clock, last_now, next_check;
	uint64_t *retry_at;      /* per destination: clock of the next retry, 0 none due */
	uint64_t *backoff;       /* per destination: the last back-off, 0 after an answer */
	uint8_t *dflags;         /* per destination: DF_* */
	uint32_t held;           /* (slot, destination) pairs in ANS_RETRY */
	struct ps_client_stats st;
};

static void drop_held(struct ps_client *c);
static void msg_drop(struct ps_client *c, struct cl_slot *s, uint32_t dest);

static void slot_arrays_free(struct cl_slot *s, uint32_t nd)
{
	for (uint32_t j = 0; s->msg && s->msg_cap && j < nd; j++)
		if (s->msg_cap[j]) /* a copy of its own; a held buffer is the caller's */
			free(s->msg[j]);
	free(s->srv_off);
	free(s->dcnt);
	free(s->answered);
	free(s->msg);
	free(s->msg_len);
	free(s->msg_cap);
}

/* Per-destination arrays of one slot; 0 or -ENOMEM (then nothing of s changed). */
static int slot_arrays(struct cl_slot *s, uint32_t nd)
{
	struct cl_slot t = { 0 };

	t.srv_off = calloc(nd + 1, sizeof(*t.srv_off));
	t.dcnt = calloc(nd, sizeof(*t.dcnt));
	t.answered = calloc(nd, 1);
	t.msg = calloc(nd, sizeof(*t.msg));
	t.msg_len = calloc(nd, sizeof(*t.msg_len));
	t.msg_cap = calloc(nd, sizeof(*t.msg_cap));
	if (!t.srv_off || !t.dcnt || !t.answered || !t.msg || !t.msg_len || !t.msg_cap) {
		slot_arrays_free(&t, 0); /* no kept message yet: the arrays alone */
		return -ENOMEM;
	}
	s->srv_off = t.srv_off;
	s->dcnt = t.dcnt;
	s->answered = t.answered;
	s->msg = t.msg;
	s->msg_len = t.msg_len;
	s->msg_cap = t.msg_cap;
	return 0;
}

/* The client's per-destination timer arrays for nd destinations; 0 or -ENOMEM (c unchanged). */
static int dest_arrays(struct ps_client *c, uint32_t nd)
{
	uint64_t *ra = calloc(nd, sizeof(*ra)), *bo = calloc(nd, sizeof(*bo));
	uint8_t *fl = calloc(nd, 1);

	if (!ra || !bo || !fl) {
		free(ra);
		free(bo);
		free(fl);
		return -ENOMEM;
	}
	free(c->retry_at);
	free(c->backoff);
	free(c->dflags);
	c->retry_at = ra;
	c->backoff = bo;
	c->dflags = fl;
	return 0;
}

int ps_client_create(const struct ps_client_config *cfg, struct ps_client **out)
{
	struct ps_client *c;
	uint32_t i, ns = cfg->n_servers;

	if (ns == 0 || ns > 4096 || cfg->max_inflight >= (1u << SLOT_BITS))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->n_slots = cfg->max_inflight ? cfg->max_inflight : 64;
	if (!c->cfg.max_keys)
		c->cfg.max_keys = 65536;
	c->gen = 1;
	c->next_seq = 1;
	c->done_err = "";
	c->n_dst = ns;
	c->slots = calloc(c->n_slots, sizeof(*c->slots));
	c->row = malloc(PS_MAX_DIM * sizeof(float));
	c->dbase = calloc(ns + 1, sizeof(*c->dbase));
	c->lanes = calloc(ns, sizeof(*c->lanes));
	c->shards = calloc(ns, sizeof(*c->shards));
	c->epoch = calloc(ns, sizeof(*c->epoch));
	c->epoch_new = calloc(ns, sizeof(*c->epoch_new));
	if (!c->slots || !c->row || !c->dbase || !c->lanes || !c->shards || !c->epoch ||
	    !c->epoch_new || dest_arrays(c, ns) < 0)
		goto out_destroy;
	for (i = 0; i <= ns; i++)
		c->dbase[i] = i;
	for (i = 0; i < ns; i++)
		c->lanes[i] = c->shards[i] = 1;
	for (i = 0; i < c->n_slots; i++)
		if (slot_arrays(&c->slots[i], ns) < 0)
			goto out_destroy;
	*out = c;
	return 0;
out_destroy:
	ps_client_destroy(c);
	return -ENOMEM;
}

static void geo_acks_free(struct ps_client *c)
{
	for (uint32_t i = 0; i < c->n_geo_acks; i++)
		free(c->geo_acks[i].id);
	free(c->geo_acks);
	c->geo_acks = NULL;
	c->n_geo_acks = 0;
}

void ps_client_destroy(struct ps_client *c)
{
	uint32_t i;

	if (!c)
		return;
	/* Buffers held by reference go back to their owner; after ps_client_unkeep none are. */
	if (c->slots)
		drop_held(c);
	for (i = 0; c->slots && i < c->n_slots; i++) {
		slot_arrays_free(&c->slots[i], c->n_dst);
		free(c->slots[i].pos);
	}
	free(c->slots);
	free(c->row);
	free(c->dbase);
	free(c->lanes);
	free(c->shards);
	free(c->epoch);
	free(c->epoch_new);
	free(c->kdst);
	geo_acks_free(c);
	free(c->retry_at);
	free(c->backoff);
	free(c->dflags);
	free(c);
}

int ps_client_set_lanes(struct ps_client *c, const uint32_t *lanes, const uint32_t *shards)
{
	uint32_t ns = c->cfg.n_servers, nd = 0, i, done;
	struct cl_slot *fresh;

	if (c->inflight)
		return -EBUSY;
	for (i = 0; i < ns; i++) {
		if (lanes[i] == 0 || lanes[i] > 256 || shards[i] < lanes[i])
			return -EINVAL;
		nd += lanes[i];
	}
	/* New arrays for every slot first: a failure leaves the old layout whole. */
	fresh = calloc(c->n_slots, sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	for (done = 0; done < c->n_slots; done++)
		if (slot_arrays(&fresh[done], nd) < 0)
			break;
	if (done < c->n_slots || dest_arrays(c, nd) < 0) {
		for (i = 0; i < done; i++)
			slot_arrays_free(&fresh[i], nd);
		free(fresh);
		return -ENOMEM;
	}
	drop_held(c); /* none in flight: at most requests encoded and never sent */
	for (i = 0; i < c->n_slots; i++) {
		slot_arrays_free(&c->slots[i], c->n_dst);
		fresh[i].pos = c->slots[i].pos;
		fresh[i].pos_cap = c->slots[i].pos_cap;
	}
	free(c->slots);
	c->slots = fresh;
	c->n_dst = nd;
	/* Acknowledgements were per old destination: the next GEO pulls acknowledge nothing,
	 * and the servers serve again from the positions they committed. */
	geo_acks_free(c);
	for (i = 0, nd = 0; i < ns; i++) {
		c->dbase[i] = nd;
		c->lanes[i] = lanes[i];
		c->shards[i] = shards[i];
		nd += lanes[i];
	}
	c->dbase[ns] = nd;
	return 0;
}

uint32_t ps_client_dests(const struct ps_client *c) { return c->n_dst; }
uint32_t ps_client_lanes(const struct ps_client *c, uint32_t server)
{
	return server < c->cfg.n_servers ? c->lanes[server] : 0;
}
uint32_t ps_client_dest(const struct ps_client *c, uint32_t server, uint32_t lane)
{
	return c->dbase[server] + lane;
}

uint32_t ps_client_inflight(const struct ps_client *c) { return c->inflight; }
uint32_t ps_client_servers(const struct ps_client *c) { return c->cfg.n_servers; }
void ps_client_stats_get(const struct ps_client *c, struct ps_client_stats *out) { *out = c->st; }
bool ps_client_dest_stalled(const struct ps_client *c, uint32_t dest)
{
	return dest < c->n_dst && (c->dflags[dest] & DF_STALLED);
}

static inline bool kind_is_push(uint8_t kind)
{
	return kind == PS_T_PUSH || kind == PS_T_PUSH_PULL || kind == PS_T_DENSE_PUSH;
}

/* The server a destination belongs to (error texts). */
static uint32_t dest_server(const struct ps_client *c, uint32_t dest)
{
	uint32_t s = 0;

	while (s + 1 < c->cfg.n_servers && c->dbase[s + 1] <= dest)
		s++;
	return s;
}

void ps_client_detach(struct ps_client *c, void *arg)
{
	uint32_t i;

	for (i = 0; i < c->n_slots; i++)
		if (c->slots[i].req_id && c->slots[i].arg == arg) {
			c->slots[i].done = NULL;
			c->slots[i].arg = NULL;
			c->slots[i].bar_done = NULL;
			c->slots[i].more = NULL;
			c->slots[i].out = NULL;
			c->slots[i].row_fn = NULL; /* rows nobody takes are not acknowledged */
		}
}

static struct cl_slot *slot_get(struct ps_client *c, uint32_t n)
{
	uint32_t i;

	if (n > c->cfg.max_keys || c->inflight == c->n_slots)
		return NULL;
	if (c->kdst_cap < n) {
		uint32_t *p = realloc(c->kdst, (size_t)n * sizeof(*p));
		if (!p)
			return NULL;
		c->kdst = p;
		c->kdst_cap = n;
	}
	for (i = 0; i < c->n_slots; i++) {
		struct cl_slot *s = &c->slots[i];
		if (s->req_id)
			continue;
		if (s->pos_cap < n) {
			uint32_t *p = realloc(s->pos, (size_t)n * sizeof(*p));
			if (!p)
				return NULL;
			s->pos = p;
			s->pos_cap = n;
		}
		return s;
	}
	return NULL;
}

/* Makes the slot live: called last, when nothing can fail any more. */
static void slot_commit(struct ps_client *c, struct cl_slot *s, uint8_t kind, ps_done_fn *done,
			void *arg)
{
	uint32_t i, waiting = 0;

	for (i = 0; i < c->n_dst; i++)
		waiting += s->answered[i] == 0;
	s->req_id = c->gen++ << SLOT_BITS | (uint64_t)(s - c->slots);
	s->kind = kind;
	s->waiting = waiting;
	s->status = 0;
	s->err[0] = '\0';
	s->done = done;
	s->arg = arg;
	s->sent_at = c->clock;
	c->inflight++;
}

static void hello_finish(struct ps_client *c, struct cl_slot *s);

static void slot_finish(struct ps_client *c, struct cl_slot *s)
{
	ps_done_fn *done = s->done;
	void *arg = s->arg;
	int status;

	if (s->kind == PS_T_HELLO)
		hello_finish(c, s);
	else if (s->kind == PS_T_BARRIER && s->status == 0 && s->bar_all &&
		 s->bar_step + 1 > c->step)
		c->step = s->bar_step + 1; /* the step completed everywhere: the next one */
	status = s->status;
	s->req_id = 0;
	c->inflight--;
	if (s->kind == PS_T_HELLO && status < 0 && s->err[0] == '\0')
		snprintf(s->err, sizeof(s->err), "%.*s", (int)sizeof(s->err) - 1, c->err);
	c->done_err = s->err;
	if (status < 0 && s->err[0] == '\0')
		snprintf(s->err, sizeof(s->err), "%s", strerror(-status));
	if (status < 0) /* ps_client_error: the last failed request's reason */
		snprintf(c->err, sizeof(c->err), "%s", s->err);
	if (done)
		done(arg, status);
	c->done_err = "";
}

/* The first failure of a request sets its status and its reason. */
static void slot_fail(struct ps_client *c, struct cl_slot *s, uint32_t dest, int status,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void slot_fail(struct ps_client *c, struct cl_slot *s, uint32_t dest, int status,
		      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->status != 0)
		return;
	s->status = status;
	n = snprintf(s->err, sizeof(s->err), "server %u: ", dest_server(c, dest));
	if (n < 0 || (size_t)n >= sizeof(s->err))
		return;
	va_start(ap, fmt);
	vsnprintf(s->err + n, sizeof(s->err) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Moves s's state for dest, keeping the count of refusals waiting to be sent again. */
static void set_answered(struct ps_client *c, struct cl_slot *s, uint32_t dest, uint8_t v)
{
	c->held -= s->answered[dest] == ANS_RETRY;
	c->held += v == ANS_RETRY;
	s->answered[dest] = v;
}

/* dest will not answer s: counted as answered with status; s ends if nothing else waits. */
static void slot_let_go(struct ps_client *c, struct cl_slot *s, uint32_t dest, int status,
			const char *why)
{
	slot_fail(c, s, dest, status, "%s", why);
	set_answered(c, s, dest, ANS_DONE);
	msg_drop(c, s, dest);
	if (--s->waiting == 0)
		slot_finish(c, s);
}

/* The destination of a key: its server, and there the lane owning its shard. */
static inline uint32_t key_dest(const struct ps_client *c, uint64_t key)
{
	uint32_t srv = ps_key_server(key, c->cfg.n_servers), l = c->lanes[srv];

	return c->dbase[srv] + (l > 1 ? ps_shard_owner(ps_key_shard(key, c->shards[srv]), l) : 0);
}

/* Groups key positions by destination into s->pos / s->srv_off (counting sort). */
static void route_keys(struct ps_client *c, struct cl_slot *s, const uint64_t *keys, uint32_t n)
{
	uint32_t nd = c->n_dst, i, *off = s->srv_off, *kd = c->kdst;

	if (nd == 1) { /* one PS on one lane: every key goes there, in order */
		for (i = 0; i < n; i++)
			s->pos[i] = i;
		off[0] = 0;
		off[1] = n;
		return;
	}
	memset(off, 0, (nd + 1) * sizeof(*off));
	for (i = 0; i < n; i++) {
		kd[i] = key_dest(c, keys[i]);
		off[kd[i] + 1]++;
	}
	for (i = 1; i <= nd; i++)
		off[i] += off[i - 1];
	for (i = 0; i < n; i++)
		s->pos[off[kd[i]]++] = i;
	memmove(off + 1, off, nd * sizeof(*off));
	off[0] = 0;
}

static void put_hdr(uint8_t *b, uint8_t type, uint32_t table, uint64_t req_id, uint32_t body,
		    uint32_t n, uint32_t dim)
{
	struct tl_msg_hdr h = { .type = type, .aux = PS_ELEM_F32, .body_len = body,
				.table_id = table, .req_id = req_id, .key_count = n, .dim = dim };
	tl_msg_hdr_encode(b, &h);
}

/* The request kept for dest is let go: a held buffer goes back to the caller. */
static void msg_drop(struct ps_client *c, struct cl_slot *s, uint32_t dest)
{
	if (s->msg_len[dest] && s->msg_cap[dest] == 0 && s->msg[dest]) {
		c->keep->release(c->keep->ctx, s->msg[dest]);
		s->msg[dest] = NULL;
	}
	s->msg_len[dest] = 0;
}

/*
 * The request just encoded in m, kept to be sent again: the buffer itself, held, when the
 * caller lends it (ps_client_keep_by_ref), else a copy.
 */
static int keep_msg(struct ps_client *c, struct cl_slot *s, uint32_t srv, uint8_t *m, uint32_t len)
{
	if (c->keep) {
		if (s->msg_cap[srv]) { /* a copy from before keeping began */
			free(s->msg[srv]);
			s->msg_cap[srv] = 0;
		}
		c->keep->hold(c->keep->ctx, m);
		s->msg[srv] = m;
		s->msg_len[srv] = len;
		return 0;
	}
	if (s->msg_cap[srv] < len) {
		uint8_t *p = realloc(s->msg[srv], len);
		if (!p)
			return -ENOMEM;
		s->msg[srv] = p;
		s->msg_cap[srv] = len;
	}
	memcpy(s->msg[srv], m, len);
	s->msg_len[srv] = len;
	return 0;
}

/* m is about to be encoded into: not a buffer the client holds (ps_client_keep.writable). */
static int writable(struct ps_client *c, struct ps_msgbuf *m)
{
	return c->keep ? c->keep->writable(c->keep->ctx, m) : 0;
}

/* A push's head (PS_PUSH_HEAD bytes) at p; returns what follows it. */
static uint8_t *push_head(const struct ps_client *c, uint8_t *p)
{
	tl_st32(p, c->cfg.worker_id);
	tl_st32(p + 4, 0);
	tl_st64(p + 8, c->next_seq);
	tl_st64(p + 16, c->cfg.incarnation);
	tl_st64(p + 24, c->step);
	return p + PS_PUSH_HEAD;
}

/* Sparse pull/push/push-pull: checks every buffer first, then encodes. */
static int sparse_req(struct ps_client *c, uint8_t type, uint32_t table, uint32_t dim,
		      const uint64_t *keys, uint32_t n, const float *grads, float *out,
		      ps_done_fn *done, void *arg, struct ps_msgbuf *msgs)
{
	bool push = type != PS_T_PULL;
	uint32_t ns = c->n_dst, srv, i;
	uint64_t rid;
	struct cl_slot *s;
	int rc;

	if (dim == 0 || dim > PS_MAX_DIM || (push && !grads) || (type != PS_T_PUSH && !out && n))
		return -EINVAL;
	s = slot_get(c, n);
	if (!s)
		return n > c->cfg.max_keys ? -E2BIG : -EAGAIN;
	route_keys(c, s, keys, n);
	for (srv = 0; srv < ns; srv++) {
		uint32_t k = s->srv_off[srv + 1] - s->srv_off[srv];
		uint64_t need = TL_MSG_HDR_LEN + (push ? PS_PUSH_HEAD + k * (8 + 4ull * dim) : 8ull * k);
		if (k && need > msgs[srv].cap)
			return -ENOBUFS;
		if (k && (rc = writable(c, &msgs[srv])) < 0)
			return rc;
	}
	rid = c->gen << SLOT_BITS | (uint64_t)(s - c->slots);
	for (srv = 0; srv < ns; srv++) {
		uint32_t a = s->srv_off[srv], k = s->srv_off[srv + 1] - a;
		uint8_t *b = msgs[srv].buf, *p;
		msgs[srv].len = 0;
		s->answered[srv] = k ? 0 : 2;
		msg_drop(c, s, srv);
		if (!k)
			continue;
		p = b + TL_MSG_HDR_LEN;
		if (push)
			p = push_head(c, p);
		for (i = 0; i < k; i++, p += 8)
			tl_st64(p, keys[s->pos[a + i]]);
		for (i = 0; push && i < k; i++, p += 4 * dim)
			memcpy(p, grads + (size_t)s->pos[a + i] * dim, 4 * dim);
		put_hdr(b, type, table, rid, (uint32_t)(p - b - TL_MSG_HDR_LEN), k, dim);
		msgs[srv].len = (uint32_t)(p - b);
		if (keep_msg(c, s, srv, b, msgs[srv].len) < 0)
			return -ENOMEM;
	}
	s->out = out;
	s->dim = dim;
	s->n = n;
	s->seq = push ? c->next_seq++ : 0;
	slot_commit(c, s, type, done, arg);
	if (s->waiting == 0)
		slot_finish(c, s);
	return 0;
}

int ps_client_pull(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
		   uint32_t n, float *out, ps_done_fn *done, void *arg, struct ps_msgbuf *msgs)
{
	return sparse_req(c, PS_T_PULL, table, dim, keys, n, NULL, out, done, arg, msgs);
}

int ps_client_push(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
		   uint32_t n, const float *grads, ps_done_fn *done, void *arg,
		   struct ps_msgbuf *msgs)
{
	return sparse_req(c, PS_T_PUSH, table, dim, keys, n, grads, NULL, done, arg, msgs);
}

int ps_client_push_pull(struct ps_client *c, uint32_t table, uint32_t dim, const uint64_t *keys,
			uint32_t n, const float *grads, float *out, ps_done_fn *done, void *arg,
			struct ps_msgbuf *msgs)
{
	return sparse_req(c, out ? PS_T_PUSH_PULL : PS_T_PUSH, table, dim, keys, n, grads, out,
			  done, arg, msgs);
}

/* Nothing to any destination yet: what a request does not ask stays "not asked". */
static void none_asked(struct ps_client *c, struct cl_slot *s, struct ps_msgbuf *msgs)
{
	for (uint32_t d = 0; d < c->n_dst; d++) {
		msgs[d].len = 0;
		msg_drop(c, s, d);
		s->answered[d] = 2;
	}
}

static inline uint32_t dense_dest(const struct ps_client *c, uint32_t srv, uint32_t table)
{
	return c->dbase[srv] + ps_shard_owner(ps_dense_shard(table, c->shards[srv]), c->lanes[srv]);
}

static int dense_req(struct ps_client *c, bool push, uint32_t table, uint32_t dim, uint64_t total,
		     uint64_t first, uint32_t rows, const float *grads, float *out,
		     ps_done_fn *done, void *arg, struct ps_msgbuf *msgs)
{
	uint32_t ns = c->cfg.n_servers, srv, d;
	uint64_t lo, hi, a, b, rid;
	struct cl_slot *s;
	int rc;

	if (dim == 0 || dim > PS_MAX_DIM || first > total || rows > total - first ||
	    (push ? !grads : !out))
		return -EINVAL;
	s = slot_get(c, 0);
	if (!s)
		return -EAGAIN;
	for (srv = 0; srv < ns; srv++) {
		ps_dense_range(total, srv, ns, &lo, &hi);
		a = first > lo ? first : lo;
		b = first + rows < hi ? first + rows : hi;
		d = dense_dest(c, srv, table);
		if (a < b && TL_MSG_HDR_LEN + (push ? PS_DENSE_PUSH_HEAD + (b - a) * dim * 4 : 8) >
		    msgs[d].cap)
			return -ENOBUFS;
		if (a < b && (rc = writable(c, &msgs[d])) < 0)
			return rc;
	}
	rid = c->gen << SLOT_BITS | (uint64_t)(s - c->slots);
	none_asked(c, s, msgs);
	for (srv = 0; srv < ns; srv++) {
		uint8_t *m, *p;
		ps_dense_range(total, srv, ns, &lo, &hi);
		a = first > lo ? first : lo;
		b = first + rows < hi ? first + rows : hi;
		if (a >= b)
			continue;
		/* The server's part goes to the lane owning the table's shard. */
		d = dense_dest(c, srv, table);
		m = msgs[d].buf;
		s->answered[d] = 0;
		s->srv_off[d] = (uint32_t)(a - first);
		s->dcnt[d] = (uint32_t)(b - a);
		p = m + TL_MSG_HDR_LEN;
		if (push)
			p = push_head(c, p);
		tl_st64(p, a);
		p += 8;
		if (push) {
			memcpy(p, grads + (a - first) * dim, (b - a) * dim * 4);
			p += (b - a) * dim * 4;
		}
		put_hdr(m, push ? PS_T_DENSE_PUSH : PS_T_DENSE_PULL, table, rid,
			(uint32_t)(p - m - TL_MSG_HDR_LEN), (uint32_t)(b - a), dim);
		msgs[d].len = (uint32_t)(p - m);
		if (keep_msg(c, s, d, m, msgs[d].len) < 0)
			return -ENOMEM;
	}
	s->out = out;
	s->dim = dim;
	s->n = rows;
	s->dense_first = first;
	s->seq = push ? c->next_seq++ : 0;
	slot_commit(c, s, push ? PS_T_DENSE_PUSH : PS_T_DENSE_PULL, done, arg);
	if (s->waiting == 0)
		slot_finish(c, s);
	return 0;
}

int ps_client_dense_pull(struct ps_client *c, uint32_t table, uint32_t dim, uint64_t total_rows,
			 uint64_t first, uint32_t rows, float *out, ps_done_fn *done, void *arg,
			 struct ps_msgbuf *msgs)
{
	return dense_req(c, false, table, dim, total_rows, first, rows, NULL, out, done, arg, msgs);
}

int ps_client_dense_push(struct ps_client *c, uint32_t table, uint32_t dim, uint64_t total_rows,
			 uint64_t first, uint32_t rows, const float *grads, ps_done_fn *done,
			 void *arg, struct ps_msgbuf *msgs)
{
	return dense_req(c, true, table, dim, total_rows, first, rows, grads, NULL, done, arg, msgs);
}

/*
 * A request with the same small body to lane 0 of every server (barrier, hello, GEO pull):
 * u32 worker, u32 zero, then w1 and w2 as far as body reaches.
 */
static struct cl_slot *bcast(struct ps_client *c, uint8_t type, uint32_t table, uint32_t dim,
			     uint64_t w1, uint64_t w2, struct ps_msgbuf *msgs, uint32_t body, int *rc)
{
	uint32_t srv;
	struct cl_slot *s = slot_get(c, 0);
	uint64_t rid;

	*rc = -EAGAIN;
	if (!s)
		return NULL;
	*rc = -ENOBUFS;
	for (srv = 0; srv < c->cfg.n_servers; srv++) {
		if (msgs[c->dbase[srv]].cap < TL_MSG_HDR_LEN + body)
			return NULL;
		if ((*rc = writable(c, &msgs[c->dbase[srv]])) < 0)
			return NULL;
	}
	rid = c->gen << SLOT_BITS | (uint64_t)(s - c->slots);
	none_asked(c, s, msgs);
	for (srv = 0; srv < c->cfg.n_servers; srv++) {
		uint32_t d = c->dbase[srv]; /* lane 0: the lcore that owns server-wide state */
		uint8_t *p = msgs[d].buf + TL_MSG_HDR_LEN;
		tl_st32(p, c->cfg.worker_id);
		tl_st32(p + 4, 0);
		if (body >= 16)
			tl_st64(p + 8, w1);
		if (body >= 24)
			tl_st64(p + 16, w2);
		put_hdr(msgs[d].buf, type, table, rid, body, 0, dim);
		msgs[d].len = TL_MSG_HDR_LEN + body;
		if (keep_msg(c, s, d, msgs[d].buf, msgs[d].len) < 0) {
			*rc = -ENOMEM;
			return NULL;
		}
		s->answered[d] = 0;
	}
	*rc = 0;
	return s;
}

int ps_client_barrier(struct ps_client *c, uint64_t step, bool *done_out, ps_done_fn *done,
		      void *arg, struct ps_msgbuf *msgs)
{
	int rc;
	struct cl_slot *s;

	if (step != c->step) {
		snprintf(c->err, sizeof(c->err), "barrier for step %llu, but this worker is at step "
			 "%llu%s", (unsigned long long)step, (unsigned long long)c->step,
			 step < c->step ? " (where its servers were when it said hello, or after "
			 "the barriers it completed): count steps from ps_client_step" : "");
		return -EINVAL;
	}
	s = bcast(c, PS_T_BARRIER, 0, 0, step, c->cfg.incarnation, msgs, PS_BARRIER_BODY, &rc);
	if (!s)
		return rc;
	*done_out = true;
	s->bar_done = done_out;
	s->bar_step = step;
	s->bar_all = true;
	slot_commit(c, s, PS_T_BARRIER, done, arg);
	return 0;
}

int ps_client_hello(struct ps_client *c, ps_done_fn *done, void *arg, struct ps_msgbuf *msgs)
{
	int rc;
	struct cl_slot *s = bcast(c, PS_T_HELLO, 0, 0, c->cfg.incarnation, 0, msgs, PS_HELLO_BODY,
				  &rc);

	if (!s)
		return rc;
	c->h_last = c->h_first = c->h_step_hi = 0;
	c->h_step_lo = UINT64_MAX;
	c->err[0] = '\0';
	slot_commit(c, s, PS_T_HELLO, done, arg);
	return 0;
}

uint64_t ps_client_step(const struct ps_client *c) { return c->step; }
const char *ps_client_error(const struct ps_client *c) { return c->err; }
const char *ps_client_retry_reason(const struct ps_client *c) { return c->retry_why; }
const char *ps_client_done_error(const struct ps_client *c) { return c->done_err; }

bool ps_client_epoch_changed(const struct ps_client *c, uint32_t server, uint64_t *was,
			     uint64_t *now)
{
	if (server >= c->cfg.n_servers || c->epoch_new[server] == 0)
		return false;
	*was = c->epoch[server];
	*now = c->epoch_new[server];
	return true;
}

void ps_client_epoch_accept(struct ps_client *c, uint32_t server)
{
	if (server >= c->cfg.n_servers || c->epoch_new[server] == 0)
		return;
	c->epoch[server] = c->epoch_new[server];
	c->epoch_new[server] = 0;
}

uint64_t ps_client_next_seq(const struct ps_client *c) { return c->next_seq; }

/* The acknowledgement state of table (made on first use), or -ENOMEM. */
static int geo_ack_of(struct ps_client *c, uint32_t table, uint32_t *idx)
{
	struct cl_geo_ack *a;
	uint32_t i;

	for (i = 0; i < c->n_geo_acks; i++)
		if (c->geo_acks[i].table == table) {
			*idx = i;
			return 0;
		}
	a = realloc(c->geo_acks, (c->n_geo_acks + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	c->geo_acks = a;
	a[i].table = table;
	a[i].id = calloc(c->n_dst, sizeof(*a[i].id));
	if (!a[i].id)
		return -ENOMEM;
	c->n_geo_acks++;
	*idx = i;
	return 0;
}

int ps_client_geo_pull(struct ps_client *c, uint32_t table, uint32_t dim, ps_geo_row_fn *row_fn,
		       void *row_arg, bool *more_out, ps_done_fn *done, void *arg,
		       struct ps_msgbuf *msgs)
{
	uint32_t tab, srv;
	int rc;
	struct cl_slot *s;

	if (dim == 0 || dim > PS_MAX_DIM || !row_fn || !more_out)
		return -EINVAL;
	if ((rc = geo_ack_of(c, table, &tab)) < 0)
		return rc;
	s = bcast(c, PS_T_GEO_PULL, table, dim, 0, c->cfg.incarnation, msgs, PS_GEO_PULL_BODY, &rc);
	if (!s)
		return rc;
	for (srv = 0; srv < c->cfg.n_servers; srv++) {
		uint32_t d = c->dbase[srv];
		tl_st64(msgs[d].buf + TL_MSG_HDR_LEN + 8, c->geo_acks[tab].id[d]);
	}
	s->geo_tab = tab;
	s->dim = dim;
	s->row_fn = row_fn;
	s->row_arg = row_arg;
	*more_out = false;
	s->more = more_out;
	slot_commit(c, s, PS_T_GEO_PULL, done, arg);
	return 0;
}

/* ---------------------------------------------------------------- replies */

/* Values of one server's part, scattered to the caller's positions, from the views. */
static int scatter(struct cl_slot *s, uint32_t srv, const struct tl_msg_view *v)
{
	uint32_t a, k, i, d = s->dim, row = d * 4, off, avail = 0;
	const uint8_t *p = NULL;
	struct tl_view_cur cur;

	if (s->kind == PS_T_DENSE_PULL) {
		/* srv_off: where this server's rows start in out; dcnt: how many it holds. */
		if (v->hdr.dim != d || v->hdr.key_count != s->dcnt[srv] ||
		    v->hdr.body_len != (uint64_t)s->dcnt[srv] * d * 4)
			return -EBADMSG;
		return tl_view_copy(v, 0, s->out + (size_t)s->srv_off[srv] * d, v->hdr.body_len) < 0 ?
		       -EBADMSG : 0;
	}
	a = s->srv_off[srv];
	k = s->srv_off[srv + 1] - a;
	if (v->hdr.key_count != k || v->hdr.dim != d || v->hdr.body_len != (uint64_t)k * d * 4)
		return -EBADMSG;
	if (row == 0)
		return 0;
	/*
	 * Piece by piece: the rows a piece holds whole are copied straight from it, a row
	 * across pieces is gathered into its place; a cursor look-up per row was a tenth of a
	 * polling worker's CPU on 1000-key pulls.
	 */
	tl_cur_init(&cur, v);
	for (i = 0, off = 0; i < k; i++, off += row) {
		float *dst = s->out + (size_t)s->pos[a + i] * d;
		if (avail < row && (p = tl_cur_span(&cur, off, &avail), avail < row)) {
			const uint8_t *q = tl_cur_get(&cur, off, row, dst);
			if (q == NULL)
				return -EBADMSG;
			if (q != (const uint8_t *)dst)
				memcpy(dst, q, row);
			continue; /* avail < row: the next row looks its piece up */
		}
		memcpy(dst, p, row);
		p += row;
		avail -= row;
	}
	return 0;
}

/* The rows of one server's GEO reply to the caller; then its id is what the next pull acks. */
static int geo_rows(struct ps_client *c, struct cl_slot *s, uint32_t dest,
		    const struct tl_msg_view *v)
{
	uint32_t i, d = s->dim, rec = 8 + d * 4;
	struct tl_view_cur cur;
	uint8_t kb[8];
	uint64_t id;

	if (v->hdr.dim != d || v->hdr.body_len != 8 + (uint64_t)v->hdr.key_count * rec)
		return -EBADMSG;
	id = tl_ld64(tl_view_get(v, 0, 8, kb));
	if (!s->row_fn)
		return 0; /* detached: nobody took the rows, so they are not acknowledged */
	tl_cur_init(&cur, v);
	for (i = 0; i < v->hdr.key_count; i++) {
		uint64_t key = tl_ld64(tl_cur_get(&cur, 8 + i * rec, 8, kb));
		const uint8_t *row = tl_cur_get(&cur, 8 + i * rec + 8, d * 4, c->row);
		if (row != (const uint8_t *)c->row)
			memcpy(c->row, row, d * 4); /* row_fn gets aligned floats */
		s->row_fn(s->row_arg, key, c->row, d);
	}
	if (s->geo_tab < c->n_geo_acks)
		c->geo_acks[s->geo_tab].id[dest] = id;
	return 0;
}

/*
 * One server's hello answer: its numbers into the round's, its epoch against the known one,
 * its layout against the one its keys are routed by (with one lane every key goes to lane 0,
 * whatever the shard count).
 */
static int hello_reply(struct ps_client *c, struct cl_slot *s, uint32_t dest,
		       const struct tl_msg_view *v)
{
	uint8_t b[PS_HELLO_R_BODY];
	const uint8_t *p = v->hdr.body_len == PS_HELLO_R_BODY ?
			   tl_view_get(v, 0, PS_HELLO_R_BODY, b) : NULL;
	uint32_t srv = dest_server(c, dest), lanes, shards;
	uint64_t last, epoch, step, first;

	if (!p || tl_ld32(p + 8) != c->cfg.worker_id)
		return -EBADMSG;
	lanes = tl_ld32(p + 40);
	shards = tl_ld32(p + 44);
	if (lanes == 0 || shards < lanes) {
		slot_fail(c, s, dest, -EBADMSG, "a hello reply announcing %u lanes over %u shards",
			  lanes, shards);
		return -EBADMSG;
	}
	if (lanes != c->lanes[srv] || (lanes > 1 && shards != c->shards[srv])) {
		slot_fail(c, s, dest, -EPROTO, "it runs %u lanes over %u shards (its hello reply), "
			  "this client routes keys to it by %u lanes over %u shards (the layout "
			  "changed since it was read: restart the worker)", lanes, shards,
			  c->lanes[srv], c->shards[srv]);
		return -EPROTO;
	}
	last = tl_ld64(p);
	epoch = tl_ld64(p + 16);
	step = tl_ld64(p + 24);
	first = tl_ld64(p + 32);
	if (last > c->h_last && last < UINT64_MAX)
		c->h_last = last;
	if (first && (c->h_first == 0 || first < c->h_first))
		c->h_first = first;
	if (step < c->h_step_lo) {
		c->h_step_lo = step;
		c->h_srv_lo = srv;
	}
	if (step >= c->h_step_hi) {
		c->h_step_hi = step;
		c->h_srv_hi = srv;
	}
	if (c->epoch[srv] == 0)
		c->epoch[srv] = epoch;
	else if (epoch != c->epoch[srv])
		c->epoch_new[srv] = epoch; /* it came back without its state */
	return 0;
}

/*
 * Every server answered the hello: numbering goes on after the largest last sequence, or,
 * for a client that never pushed, from the first push of the step its servers are in (its
 * previous process's, which it is about to repeat); its step becomes theirs.
 */
static void hello_finish(struct ps_client *c, struct cl_slot *s)
{
	if (s->status != 0)
		return;
	if (c->h_step_hi > c->h_step_lo + 1) {
		snprintf(c->err, sizeof(c->err), "servers are more than one sync step apart: ps %u "
			 "at step %llu, ps %u at step %llu (a server that came back without its "
			 "state?)", c->h_srv_lo, (unsigned long long)c->h_step_lo, c->h_srv_hi,
			 (unsigned long long)c->h_step_hi);
		s->status = -EPROTO;
		return;
	}
	if (c->next_seq == 1 && c->h_first != 0)
		c->next_seq = c->h_first;
	else if (c->h_last >= c->next_seq)
		c->next_seq = c->h_last + 1;
	c->step = c->h_step_lo;
}

static int apply_reply(struct ps_client *c, struct cl_slot *s, uint32_t srv, const struct tl_msg_view *v)
{
	uint8_t b[24];
	const uint8_t *p;

	if (v->hdr.type != s->kind + 1u) {
		slot_fail(c, s, srv, -EBADMSG, "a reply of type %u and %u bytes to a request of "
			  "type %u", v->hdr.type, v->hdr.body_len, s->kind);
		return -EBADMSG;
	}
	switch (s->kind) {
	case PS_T_PULL:
	case PS_T_PUSH_PULL:
	case PS_T_DENSE_PULL:
		return s->out ? scatter(s, srv, v) : 0; /* detached: nowhere to put them */
	case PS_T_BARRIER:
		p = v->hdr.body_len == 24 ? tl_view_get(v, 0, 24, b) : NULL;
		if (!p)
			return -EBADMSG;
		if (!tl_ld32(p + 16)) {
			s->bar_all = false;
			if (s->bar_done)
				*s->bar_done = false;
		}
		return 0;
	case PS_T_GEO_PULL:
		if ((v->hdr.flags & PS_F_MORE) && s->more)
			*s->more = true;
		return geo_rows(c, s, srv, v);
	case PS_T_HELLO:
		return hello_reply(c, s, srv, v);
	default: /* push acks: applied or duplicate, both mean "the server has it" */
		return v->hdr.body_len == 16 ? 0 : -EBADMSG;
	}
}

/* The length of an error reply's head before its text: PS_T_ERROR 8, TL_TYPE_ERROR 4. */
static uint32_t error_head(const struct tl_msg_view *v)
{
	return v->hdr.type == PS_T_ERROR ? 8 : 4;
}

/* An error reply's text, at most len - 1 bytes, into text (NUL-terminated); its length. */
static uint32_t error_text(const struct tl_msg_view *v, char *text, uint32_t len)
{
	uint32_t head = error_head(v), n = v->hdr.body_len > head ? v->hdr.body_len - head : 0;

	if (n > len - 1)
		n = len - 1;
	if (n > 0 && tl_view_copy(v, head, text, n) != 0)
		n = 0;
	text[n] = '\0';
	return n;
}

/*
 * An error reply: PS_T_ERROR (i32 -errno, u32 kind, text) or the transport's TL_TYPE_ERROR
 * (u32 errno, text). Final ones fail s with the server's text; returns the -errno.
 */
static int error_reply(struct ps_client *c, struct cl_slot *s, uint32_t dest,
		       const struct tl_msg_view *v)
{
	uint32_t n, raw;
	char text[ERR_LEN];
	uint8_t b[8];
	const uint8_t *p = tl_view_get(v, 0, error_head(v), b);
	int rc;

	if (p == NULL) {
		slot_fail(c, s, dest, -EBADMSG, "an error reply of %u bytes", v->hdr.body_len);
		return -EBADMSG;
	}
	/*
	 * -errno (PS_T_ERROR) or errno (TL_TYPE_ERROR), 1..4095; anything else is -EPROTO. So
	 * is EAGAIN, which a server sends only with PS_F_RETRY: a call's status is never
	 * -EAGAIN, which wharf_wait_timeout keeps for "not complete yet" (the request stays the
	 * caller's), so a final one would have the caller wait on a request already freed.
	 */
	raw = v->hdr.type == PS_T_ERROR ? 0u - tl_ld32(p) : tl_ld32(p);
	rc = raw >= 1 && raw <= 4095 && raw != EAGAIN ? -(int)raw : -EPROTO;
	n = error_text(v, text, sizeof(text));
	if (raw == EAGAIN)
		slot_fail(c, s, dest, rc, "a final refusal with EAGAIN, which is only sent as one "
			  "to retry: %s", n ? text : "no text");
	else
		slot_fail(c, s, dest, rc, "%s", n ? text : strerror(-rc));
	return rc;
}

/* A PS_F_RETRY refusal's text into retry_why (ps_client_retry_reason). */
static void retry_reason(struct ps_client *c, uint32_t dest, const struct tl_msg_view *v)
{
	char text[ERR_LEN];

	snprintf(c->retry_why, sizeof(c->retry_why), "destination %u: %s", dest,
		 error_text(v, text, sizeof(text)) ? text : "refused for now, retry");
}

int ps_client_on_reply(struct ps_client *c, uint32_t dest, const struct tl_msg_view *rep)
{
	uint32_t idx = (uint32_t)(rep->hdr.req_id & ((1u << SLOT_BITS) - 1));
	bool err = rep->hdr.type == PS_T_ERROR || rep->hdr.type == TL_TYPE_ERROR;
	struct cl_slot *s;
	int rc;

	if (dest >= c->n_dst || idx >= c->n_slots)
		return -ENOENT;
	s = &c->slots[idx];
	if (!s->req_id || s->req_id != rep->hdr.req_id || s->answered[dest] != ANS_WAIT)
		return -ENOENT;
	if (err && (rep->hdr.flags & PS_F_RETRY)) {
		/* Nothing applied: the same bytes go again after the destination's back-off. */
		retry_reason(c, dest, rep);
		set_answered(c, s, dest, ANS_RETRY);
		c->st.retries++;
		if (c->retry_at[dest] == 0) {
			uint64_t b = c->backoff[dest] ? 2 * c->backoff[dest] : RETRY_MIN_US;
			c->backoff[dest] = b < RETRY_MAX_US ? b : RETRY_MAX_US;
			c->retry_at[dest] = c->clock + c->backoff[dest];
		}
		return 0;
	}
	if (!err)
		c->backoff[dest] = 0;
	rc = err ? error_reply(c, s, dest, rep) : apply_reply(c, s, dest, rep);
	if (rc < 0 && s->status == 0)
		s->status = rc;
	set_answered(c, s, dest, ANS_DONE);
	msg_drop(c, s, dest); /* answered: nothing to send again */
	if (--s->waiting == 0)
		slot_finish(c, s);
	return rc == -EBADMSG ? rc : 0;
}

/* Non-pushes waiting for dest (sent or refused for a retry) let go with status. */
static uint32_t let_go_dest(struct ps_client *c, uint32_t dest, int status, const char *why)
{
	uint32_t i, count = 0;

	for (i = 0; i < c->n_slots; i++) {
		struct cl_slot *s = &c->slots[i];
		if (!s->req_id || kind_is_push(s->kind) ||
		    (s->answered[dest] != ANS_WAIT && s->answered[dest] != ANS_RETRY))
			continue;
		count++;
		slot_let_go(c, s, dest, status, why);
	}
	c->st.forgotten += count;
	return count;
}

uint32_t ps_client_forget_dest(struct ps_client *c, uint32_t dest, int status)
{
	if (dest >= c->n_dst)
		return 0;
	c->dflags[dest] = DF_LOST;
	c->retry_at[dest] = 0;
	return let_go_dest(c, dest, status, "connection lost");
}

uint32_t ps_client_resend(struct ps_client *c, uint32_t dest, ps_resend_fn *fn, void *arg)
{
	uint32_t count = 0, i;
	uint64_t last = 0;

	if (dest >= c->n_dst)
		return 0;
	let_go_dest(c, dest, -ECONNRESET, "connection lost");
	c->dflags[dest] = 0;
	c->retry_at[dest] = 0;
	c->backoff[dest] = 0;
	/* Oldest first: repeatedly the smallest sequence above the last one sent. */
	for (;;) {
		struct cl_slot *best = NULL;
		for (i = 0; i < c->n_slots; i++) {
			struct cl_slot *s = &c->slots[i];
			if (s->req_id && kind_is_push(s->kind) && s->seq > last &&
			    (s->answered[dest] == ANS_WAIT || s->answered[dest] == ANS_RETRY) &&
			    (!best || s->seq < best->seq))
				best = s;
		}
		if (!best)
			return count;
		set_answered(c, best, dest, ANS_WAIT);
		best->sent_at = c->clock;
		fn(arg, best->msg[dest], best->msg_len[dest]);
		last = best->seq;
		count++;
	}
}

/* Every request buffer held goes back to the caller (msg_drop on each). */
static void drop_held(struct ps_client *c)
{
	for (uint32_t i = 0; c->keep && i < c->n_slots; i++)
		for (uint32_t d = 0; d < c->n_dst; d++)
			if (c->slots[i].msg_cap[d] == 0)
				msg_drop(c, &c->slots[i], d);
}

void ps_client_keep_by_ref(struct ps_client *c, const struct ps_client_keep *k)
{
	c->keep = k;
}

void ps_client_unkeep(struct ps_client *c)
{
	drop_held(c);
	c->keep = NULL;
}

/* ---------------------------------------------------------------- timers */

/* dest's requests refused for a retry, sent again: others first, then pushes by sequence. */
static void retry_dest(struct ps_client *c, uint32_t dest, const struct ps_client_io *io)
{
	for (;;) {
		struct cl_slot *best = NULL;
		for (uint32_t i = 0; i < c->n_slots; i++) {
			struct cl_slot *s = &c->slots[i];
			if (s->req_id && s->answered[dest] == ANS_RETRY &&
			    (!best || s->seq < best->seq))
				best = s;
		}
		if (!best)
			return;
		set_answered(c, best, dest, ANS_WAIT);
		best->sent_at = c->clock;
		/* A send that fails means a lost connection: forget_dest/resend take it over. */
		(void)io->send(io->ctx, dest, best->msg[dest], best->msg_len[dest]);
	}
}

/* Requests that waited past the timeout: their destinations stall; non-pushes let go. */
static uint32_t expire(struct ps_client *c)
{
	uint64_t to = c->cfg.request_timeout_us;
	uint32_t i, d, stalled = 0;
	char why[64];

	snprintf(why, sizeof(why), "no answer in %" PRIu64 " ms", to / 1000);
	for (i = 0; i < c->n_slots; i++) {
		struct cl_slot *s = &c->slots[i];
		if (!s->req_id || c->clock - s->sent_at < to)
			continue;
		for (d = 0; d < c->n_dst && s->req_id; d++) {
			if (s->answered[d] != ANS_WAIT || (c->dflags[d] & DF_LOST))
				continue;
			if (!(c->dflags[d] & DF_STALLED)) {
				c->dflags[d] |= DF_STALLED;
				c->st.stalls++;
				stalled++;
				PS_LOG(WARNING, "worker %u: a request to server %u got %s: "
				       "giving its connection up", c->cfg.worker_id,
				       dest_server(c, d), why);
			}
			if (kind_is_push(s->kind))
				continue; /* waits for ps_client_resend: never given up */
			c->st.timeouts++;
			slot_let_go(c, s, d, -ETIMEDOUT, why);
		}
	}
	return stalled;
}

uint32_t ps_client_tick(struct ps_client *c, uint64_t now_us, const struct ps_client_io *io)
{
	uint64_t dt = c->last_now != 0 && now_us > c->last_now ? now_us - c->last_now : 0;

	c->last_now = now_us;
	c->clock += dt < TICK_GAP_US ? dt : TICK_GAP_US;
	for (uint32_t d = 0; c->held > 0 && d < c->n_dst; d++)
		if (c->retry_at[d] != 0 && c->clock >= c->retry_at[d] &&
		    !(c->dflags[d] & DF_LOST)) {
			c->retry_at[d] = 0;
			retry_dest(c, d, io);
		}
	if (c->cfg.request_timeout_us == 0 || c->inflight == 0 || c->clock < c->next_check)
		return 0;
	c->next_check = c->clock + 1000;
	return expire(c);
}
