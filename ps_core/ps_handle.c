/*
 * ps_handle.c — decoding, validating and answering one PS request (ps_handle). Called by
 * the network side (or a test) with a received struct tl_msg_view; runs shard ops through
 * ps_server.c (ps_handler_run_op/wait) and writes the reply into the caller's storage.
 *
 * Rule: every check that can refuse a request runs before the first op is queued, so a
 * refused request changes nothing. Two refusals come later, from the shards, and are
 * partial: a row whose update would not be finite (ps_optim.c) stays as it was (-ERANGE),
 * and a key new to a table at its cap gets no row (ps_mem.c, -EDQUOT); the other rows are
 * applied, the push's sequence is recorded, and the reply says how many were refused.
 * Keys and values are read in place from the request's views, through cursors (tl_wire.h).
 * Durability: an accepted push-type request goes into the write-ahead log (ps_wal.c) after
 * its checks and before its first op, so nothing is acknowledged that a restart could lose;
 * ps_recover replays the log through ps_handle_replay, i.e. these same functions.
 * Barriers and hellos: ps_barrier.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

static void put_hdr(struct ps_reply *rep, uint8_t type, const struct tl_msg_hdr *req,
		    uint32_t body_len, uint32_t key_count, uint32_t dim)
{
	struct tl_msg_hdr h = {
		.type = type, .aux = PS_ELEM_F32, .body_len = body_len, .table_id = req->table_id,
		.req_id = req->req_id, .key_count = key_count, .dim = dim,
	};

	tl_msg_hdr_encode(rep->buf, &h);
	rep->len = TL_MSG_HDR_LEN + body_len;
}

static int reply_err(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
		     enum ps_err_kind kind, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int reply_err(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
		     enum ps_err_kind kind, const char *fmt, ...)
{
	uint8_t *b = rep->buf + TL_MSG_HDR_LEN;
	size_t room = rep->cap - TL_MSG_HDR_LEN - 8;
	va_list ap;
	int n;

	tl_st32(b, (uint32_t)rc);
	tl_st32(b + 4, kind);
	va_start(ap, fmt);
	n = vsnprintf((char *)b + 8, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= room)
		n = (int)room - 1;
	put_hdr(rep, PS_T_ERROR, req, 8 + (uint32_t)n, 0, 0);
	return rc;
}

/* A refusal that changed nothing and may pass later: the same bytes are to be sent again. */
static int reply_retry(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
		       enum ps_err_kind kind, const char *what)
{
	reply_err(rep, req, rc, kind, "%s (%s); nothing applied, retry", what, strerror(-rc));
	tl_st16(rep->buf + 4, PS_F_RETRY);
	return rc;
}

/* Some rows' updates were refused as not finite: the others went in, the sequence counts. */
static int reply_nonfinite(struct ps_reply *rep, const struct tl_msg_hdr *q, uint32_t refused)
{
	return reply_err(rep, q, -ERANGE, PS_ERR_NOT_FINITE, "table %u: %u of %u rows would not "
			 "be finite after this update (NaN or infinity): left as they were, the "
			 "others applied", q->table_id, refused, q->key_count);
}

/* Keys new to a table at its cap were refused: the others went in, the sequence counts. */
static int reply_full(struct ps_handler *h, struct ps_reply *rep, const struct tl_msg_hdr *q,
		      uint32_t full)
{
	const struct ps_table_config *t = &h->s->tcfg[ps_server_table_index(h->s, q->table_id)];

	return reply_err(rep, q, -EDQUOT, PS_ERR_TABLE_FULL, "table %u is full on server %u "
			 "(max_rows %llu, max_bytes %llu): %u of %u keys new to it refused, their "
			 "gradients dropped; the others applied", q->table_id, h->s->cfg.server_id,
			 (unsigned long long)t->max_rows, (unsigned long long)t->max_bytes, full,
			 q->key_count);
}

int ps_reply_text(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
		  enum ps_err_kind kind, const char *text)
{
	return reply_err(rep, req, rc, kind, "%s", text);
}

int ps_reply_retry_text(struct ps_reply *rep, const struct tl_msg_hdr *req, int rc,
			enum ps_err_kind kind, const char *text)
{
	reply_err(rep, req, rc, kind, "%s", text);
	tl_st16(rep->buf + 4, PS_F_RETRY);
	return rc;
}

void ps_reply_hdr(struct ps_reply *rep, uint8_t type, const struct tl_msg_hdr *req,
		  uint32_t body_len)
{
	put_hdr(rep, type, req, body_len, 0, 0);
}

int ps_reply_fenced(struct ps_reply *rep, const struct tl_msg_hdr *req, uint32_t worker,
		    uint64_t inc, uint64_t have, int rc)
{
	if (rc == -ESTALE)
		return reply_err(rep, req, rc, PS_ERR_FENCED, "worker %u: incarnation %016llx is "
				 "older than %016llx, which said hello to this server: a newer "
				 "process took over this worker id, this one must stop", worker,
				 (unsigned long long)inc, (unsigned long long)have);
	return reply_err(rep, req, rc, PS_ERR_FENCED, "worker %u: incarnation %016llx has not "
			 "said hello to this server (it knows %016llx): hello first", worker,
			 (unsigned long long)inc, (unsigned long long)have);
}

/* A shard's refusal of a push: fenced, of another sync step, or out of memory. */
static int reply_op_err(struct ps_reply *rep, const struct tl_msg_hdr *q, const struct ps_op *op)
{
	int rc = op->status;

	if (op->err_kind == PS_ERR_FENCED)
		return ps_reply_fenced(rep, q, op->worker, op->inc, op->have, rc);
	if (op->err_kind == PS_ERR_WRONG_STEP)
		return reply_err(rep, q, rc, PS_ERR_WRONG_STEP, "push of worker %u for sync step "
				 "%llu, the server is at step %llu: %s; nothing applied", op->worker,
				 (unsigned long long)op->step, (unsigned long long)op->have,
				 rc == -ESTALE ? "that step closed without it" :
				 "that step has not begun");
	return reply_err(rep, q, rc, PS_ERR_NO_SPACE, "shard could not apply: %s", strerror(-rc));
}

/* Table index for table_id of the given kind, or an error reply. */
static int req_table(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep,
		     enum ps_table_kind kind, int *ti)
{
	const struct tl_msg_hdr *q = &v->hdr;
	int i = ps_server_table_index(h->s, q->table_id);

	if (i < 0 || h->s->tcfg[i].kind != kind)
		return reply_err(rep, q, -ENOENT, PS_ERR_UNKNOWN_TABLE, "table %u: no %s table of "
				 "that id on this server", q->table_id, kind ? "dense" : "sparse");
	if (q->aux != PS_ELEM_F32)
		return reply_err(rep, q, -EPROTONOSUPPORT, PS_ERR_BAD_TYPE,
				 "element type %u not supported (only f32 = %u)", q->aux, PS_ELEM_F32);
	if (q->dim != h->s->tcfg[i].dim)
		return reply_err(rep, q, -EINVAL, PS_ERR_WRONG_DIM, "table %u has dim %u, request "
				 "says %u", q->table_id, h->s->tcfg[i].dim, q->dim);
	*ti = i;
	return 0;
}

static int check_len(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep,
		     uint64_t need, uint64_t reply_body)
{
	const struct tl_msg_hdr *q = &v->hdr;

	if (q->key_count > h->s->max_keys)
		return reply_err(rep, q, -E2BIG, PS_ERR_BAD_LENGTH, "%u keys/rows exceed the "
				 "limit of %u per request", q->key_count, h->s->max_keys);
	if (q->body_len != need)
		return reply_err(rep, q, -EBADMSG, PS_ERR_BAD_LENGTH, "body is %u bytes but %u "
				 "keys/rows of dim %u need %llu", q->body_len, q->key_count, q->dim,
				 (unsigned long long)need);
	if (TL_MSG_HDR_LEN + reply_body > rep->cap)
		return reply_err(rep, q, -ENOBUFS, PS_ERR_NO_SPACE, "reply of %llu bytes does not "
				 "fit in %u", (unsigned long long)reply_body, rep->cap);
	return 0;
}

/* A push's head: worker, sequence, incarnation, step (PS_PUSH_HEAD bytes). */
static int check_worker(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep,
			struct ps_op *op)
{
	uint8_t tmp[PS_PUSH_HEAD];
	const uint8_t *p = tl_view_get(v, 0, PS_PUSH_HEAD, tmp);

	op->worker = tl_ld32(p);
	op->seq = tl_ld64(p + 8);
	op->inc = tl_ld64(p + 16);
	op->step = tl_ld64(p + 24);
	if (op->worker >= h->s->cfg.n_workers)
		return reply_err(rep, &v->hdr, -EINVAL, PS_ERR_BAD_WORKER, "worker %u out of range "
				 "(%u workers)", op->worker, h->s->cfg.n_workers);
	if (op->seq == 0)
		return reply_err(rep, &v->hdr, -EINVAL, PS_ERR_BAD_WORKER, "push sequence 0: "
				 "sequences start at 1");
	return 0;
}

static int reply_value(struct ps_reply *rep, const struct tl_msg_view *v, uint64_t i)
{
	return reply_err(rep, &v->hdr, -EDOM, PS_ERR_NOT_FINITE, "value %llu (row %llu) is not "
			 "finite", (unsigned long long)i, (unsigned long long)(i / v->hdr.dim));
}

/* The first of n floats at p (in place) that is not finite; n when all are. */
static uint32_t first_nonfinite(const uint8_t *p, uint32_t n)
{
	uint32_t j = 0;

	if (PS_LIKELY(ps_all_finite_bytes(p, n)))
		return n;
	while (ps_all_finite_bytes(p + 4 * (size_t)j, 1))
		j++;
	return j;
}

/*
 * count floats from body offset off: all finite, or an error reply. Read in place, view by
 * view; only a float split between two views is put together (4 bytes).
 */
static int check_finite(const struct tl_msg_view *v, struct ps_reply *rep, uint32_t off,
			uint64_t count)
{
	uint64_t at = 0, end = count * 4; /* bytes checked, of the block */
	uint32_t avail, k, whole, nc = 0, j;
	struct tl_view_cur c;
	uint8_t carry[4];
	const uint8_t *p;

	tl_cur_init(&c, v);
	while (at < end && (p = tl_cur_span(&c, off + (uint32_t)at, &avail)) != NULL) {
		if (avail > end - at)
			avail = (uint32_t)(end - at);
		k = 0;
		if (nc > 0) { /* the rest of a float that began in the previous view */
			k = 4 - nc < avail ? 4 - nc : avail;
			memcpy(carry + nc, p, k);
			nc += k;
			if (nc < 4) { /* a view of fewer bytes than the float's rest */
				at += avail;
				continue;
			}
			if (!ps_all_finite_bytes(carry, 1))
				return reply_value(rep, v, (at + k) / 4 - 1);
			nc = 0;
		}
		whole = (avail - k) / 4;
		if ((j = first_nonfinite(p + k, whole)) < whole)
			return reply_value(rep, v, (at + k) / 4 + j);
		nc = avail - k - 4 * whole;
		memcpy(carry, p + k + 4 * whole, nc);
		at += avail;
	}
	return 0;
}

/*
 * Checks the keys at body offset off are ours and groups their positions by shard (into
 * h->idx, ascending within a shard; h->cnt[s] is shard s's start). The keys are read in
 * place through a cursor and not kept: the shards read them again where they lie.
 */
static int route_keys(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep,
		      uint32_t off)
{
	const struct ps_server_config *c = &h->s->cfg;
	uint32_t n = v->hdr.key_count, i, ns = c->n_shards;
	uint32_t *cnt = h->cnt;
	struct ps_keys k;

	memset(cnt, 0, (ns + 1) * sizeof(*cnt));
	if (ns == 1 && c->n_servers == 1) {
		for (i = 0; i < n; i++)
			h->idx[i] = i;
		cnt[1] = n;
		return 0;
	}
	ps_keys_view(&k, v, off, NULL, n);
	for (i = 0; i < n; i++) {
		uint64_t key = k.flat ? tl_ld64(k.flat + 8 * (size_t)i) : ps_key_at_pos(&k, i);
		if (c->n_servers > 1 && ps_key_server(key, c->n_servers) != c->server_id)
			return reply_err(rep, &v->hdr, -EXDEV, PS_ERR_WRONG_SERVER, "key %llu "
					 "belongs to server %u, this is %u",
					 (unsigned long long)key, ps_key_server(key, c->n_servers),
					 c->server_id);
		h->ksh[i] = ns == 1 ? 0 : ps_key_shard_inl(key, ns); /* hashed once, placed below */
		cnt[h->ksh[i] + 1]++;
	}
	/* Counting sort of positions by shard (stable: ascending within each shard). */
	for (i = 1; i <= ns; i++)
		cnt[i] += cnt[i - 1];
	for (i = 0; i < n; i++)
		h->idx[cnt[h->ksh[i]]++] = i;
	/* cnt[s] now holds shard s's end = shard s+1's start; shift back. */
	memmove(cnt + 1, cnt, ns * sizeof(*cnt));
	cnt[0] = 0;
	return 0;
}

/*
 * Runs one op per shard that has keys, waits for all; returns the worst status. *refused:
 * rows left as they were because their result would not be finite; *full: keys refused by
 * the table's cap.
 */
static int run_sparse(struct ps_handler *h, const struct ps_op *tmpl, int *dups, uint32_t *refused,
		      uint32_t *full, const struct ps_op **bad)
{
	uint32_t s, ns = h->s->cfg.n_shards, parts = 0, nd = 0;
	int worst = 0;

	for (s = 0; s < ns; s++) {
		struct ps_op *op = &h->ops[s];
		uint32_t n = h->cnt[s + 1] - h->cnt[s];
		if (n == 0)
			continue;
		*op = *tmpl;
		op->idx = h->idx + h->cnt[s];
		op->n = n;
		ps_handler_run_op(h, s, op);
	}
	for (s = 0; s < ns; s++) {
		if (h->cnt[s + 1] == h->cnt[s])
			continue;
		ps_handler_wait(h, &h->ops[s]);
		parts++;
		*refused += h->ops[s].refused;
		*full += h->ops[s].full;
		if (h->ops[s].status == 1) {
			nd++;
		} else if (h->ops[s].status < 0) {
			worst = h->ops[s].status;
			*bad = &h->ops[s];
		}
	}
	*dups = parts > 0 && nd == parts;
	return worst;
}

static int handle_sparse(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	uint8_t type = q->type;
	bool push = type != PS_T_PULL, out = type != PS_T_PUSH;
	uint64_t n = q->key_count, d = q->dim;
	uint32_t refused = 0, full = 0, head = push ? PS_PUSH_HEAD : 0;
	struct ps_op op = { .kind = push ? PS_OP_PUSH : PS_OP_PULL, .v = v, .keys_off = head };
	const struct ps_op *bad = NULL;
	int ti, rc, dups;

	if ((rc = req_table(h, v, rep, PS_TABLE_SPARSE, &ti)) < 0)
		return rc;
	if ((rc = check_len(h, v, rep, head + n * 8 + (push ? n * d * 4 : 0),
			    out ? n * d * 4 : 16)) < 0)
		return rc;
	if (push && (rc = check_worker(h, v, rep, &op)) < 0)
		return rc;
	if (push && (rc = check_finite(v, rep, head + (uint32_t)n * 8, n * d)) < 0)
		return rc;
	if ((rc = route_keys(h, v, rep, head)) < 0)
		return rc;
	/* A push-pull is logged as a push: replaying it needs no values back. */
	if (push && (rc = ps_wal_append(h, v, PS_T_PUSH)) < 0)
		return reply_retry(rep, q, rc, PS_ERR_IO, "write-ahead log cannot take the push");
	op.table = (uint32_t)ti;
	op.vals_off = head + (uint32_t)n * 8;
	op.out = out ? (float *)(rep->buf + TL_MSG_HDR_LEN) : NULL;
	rc = run_sparse(h, &op, &dups, &refused, &full, &bad);
	if (rc < 0)
		return reply_op_err(rep, q, bad);
	if (full > 0)
		return reply_full(h, rep, q, full);
	if (refused > 0)
		return reply_nonfinite(rep, q, refused);
	if (out) {
		put_hdr(rep, type + 1, q, (uint32_t)(n * d * 4), (uint32_t)n, (uint32_t)d);
		return 0;
	}
	tl_st64(rep->buf + TL_MSG_HDR_LEN, op.seq);
	tl_st32(rep->buf + TL_MSG_HDR_LEN + 8, dups ? 0 : 1);
	tl_st32(rep->buf + TL_MSG_HDR_LEN + 12, 0);
	put_hdr(rep, PS_T_PUSH_R, q, 16, (uint32_t)n, (uint32_t)d);
	return 0;
}

static int handle_dense(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	bool push = q->type == PS_T_DENSE_PUSH;
	uint64_t n = q->key_count, d = q->dim, first, lo, hi;
	struct ps_op op = { .kind = push ? PS_OP_DENSE_PUSH : PS_OP_DENSE_PULL, .v = v };
	uint8_t tmp[8];
	int ti, rc;

	if ((rc = req_table(h, v, rep, PS_TABLE_DENSE, &ti)) < 0)
		return rc;
	if ((rc = check_len(h, v, rep, push ? PS_DENSE_PUSH_HEAD + n * d * 4 : 8,
			    push ? 16 : n * d * 4)) < 0)
		return rc;
	if (push && (rc = check_worker(h, v, rep, &op)) < 0)
		return rc;
	first = tl_ld64(tl_view_get(v, push ? PS_PUSH_HEAD : 0, 8, tmp));
	ps_dense_range(h->s->tcfg[ti].dense_rows, h->s->cfg.server_id, h->s->cfg.n_servers, &lo, &hi);
	if (first < lo || first > hi || n > hi - first)
		return reply_err(rep, q, -EXDEV, PS_ERR_WRONG_SERVER, "rows [%llu, %llu) are not "
				 "all in this server's range [%llu, %llu)", (unsigned long long)first,
				 (unsigned long long)(first + n), (unsigned long long)lo,
				 (unsigned long long)hi);
	if (push && (rc = check_finite(v, rep, PS_DENSE_PUSH_HEAD, n * d)) < 0)
		return rc;
	if (push && (rc = ps_wal_append(h, v, PS_T_DENSE_PUSH)) < 0)
		return reply_retry(rep, q, rc, PS_ERR_IO, "write-ahead log cannot take the push");
	op.table = (uint32_t)ti;
	op.n = (uint32_t)n;
	op.dense_first = first;
	op.vals_off = PS_DENSE_PUSH_HEAD;
	op.out = push ? NULL : (float *)(rep->buf + TL_MSG_HDR_LEN);
	ps_handler_run_op(h, ps_dense_shard(q->table_id, h->s->cfg.n_shards), &op);
	ps_handler_wait(h, &op);
	if (op.status < 0)
		return reply_op_err(rep, q, &op);
	if (op.refused > 0)
		return reply_nonfinite(rep, q, op.refused);
	if (!push) {
		put_hdr(rep, PS_T_DENSE_PULL_R, q, (uint32_t)(n * d * 4), (uint32_t)n, (uint32_t)d);
		return 0;
	}
	tl_st64(rep->buf + TL_MSG_HDR_LEN, op.seq);
	tl_st32(rep->buf + TL_MSG_HDR_LEN + 8, op.status == 1 ? 0 : 1);
	tl_st32(rep->buf + TL_MSG_HDR_LEN + 12, 0);
	put_hdr(rep, PS_T_DENSE_PUSH_R, q, 16, (uint32_t)n, (uint32_t)d);
	return 0;
}

/*
 * GEO pull: every shard commits what the worker acknowledged (the ack is the id of the last
 * reply it took); then shard by shard the rows changed since its position go into the reply
 * until one does not fit (PS_F_MORE; the shards after it only commit). The reply's id
 * comes first in its body, for the worker's next pull to acknowledge.
 */
static int handle_geo_pull(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	uint32_t ns = h->s->cfg.n_shards, s, worker, n = 0;
	size_t rec, off = TL_MSG_HDR_LEN + 8;
	uint64_t ack, id, inc;
	bool more = false;
	uint8_t tmp[PS_GEO_PULL_BODY];
	const uint8_t *p;
	int ti, rc;

	if (h->s->cfg.mode != PS_MODE_GEO)
		return reply_err(rep, q, -EOPNOTSUPP, PS_ERR_BAD_MODE, "GEO pull on a server "
				 "not in GEO mode");
	if ((rc = req_table(h, v, rep, PS_TABLE_SPARSE, &ti)) < 0)
		return rc;
	if (q->body_len != PS_GEO_PULL_BODY || q->key_count != 0)
		return reply_err(rep, q, -EBADMSG, PS_ERR_BAD_LENGTH, "GEO pull body is %u bytes "
				 "with %u keys, expected %u and 0", q->body_len, q->key_count,
				 PS_GEO_PULL_BODY);
	p = tl_view_get(v, 0, PS_GEO_PULL_BODY, tmp);
	worker = tl_ld32(p);
	ack = tl_ld64(p + 8);
	inc = tl_ld64(p + 16);
	if (worker >= h->s->cfg.n_workers)
		return reply_err(rep, q, -EINVAL, PS_ERR_BAD_WORKER, "worker %u out of range", worker);
	/* Relaxed: ids need only be distinct (a counter from a random start), not ordered. */
	do
		id = atomic_fetch_add_explicit(&h->s->geo_next_id, 1, memory_order_relaxed);
	while (id == 0);
	rec = 8 + (size_t)q->dim * 4;
	for (s = 0; s < ns; s++) {
		struct ps_op *op = &h->ops[s];
		memset(op, 0, sizeof(*op));
		op->kind = PS_OP_GEO_PULL;
		op->table = (uint32_t)ti;
		op->worker = worker;
		op->inc = inc;
		op->geo_ack = ack;
		op->geo_id = id;
		if (!more) {
			op->geo_out = rep->buf + off;
			op->geo_cap = rep->cap > off ? (uint32_t)((rep->cap - off) / rec) : 0;
		}
		ps_handler_run_op(h, s, op);
		ps_handler_wait(h, op);
		/* Fenced on shard 0 (hellos reach every shard alike): nothing was committed. */
		if (op->status < 0)
			return ps_reply_fenced(rep, q, worker, inc, op->have, op->status);
		if (more)
			continue;
		more = op->status == 1; /* this shard stopped early: the rest wait for next time */
		off += op->geo_n * rec;
		n += op->geo_n;
	}
	if (more && n == 0)
		return reply_err(rep, q, -ENOBUFS, PS_ERR_NO_SPACE, "a GEO row of dim %u does not "
				 "fit in a %u-byte reply", q->dim, rep->cap);
	tl_st64(rep->buf + TL_MSG_HDR_LEN, id);
	put_hdr(rep, PS_T_GEO_PULL_R, q, (uint32_t)(off - TL_MSG_HDR_LEN), n, q->dim);
	if (more)
		tl_st16(rep->buf + 4, PS_F_MORE);
	return 0;
}

static int handle_save(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	char path[4096], err[256];
	uint64_t rows = 0;
	int rc;

	if (!h->s->cfg.allow_save_requests)
		return reply_err(rep, q, -EPERM, PS_ERR_BAD_TYPE,
				 "checkpoint save is a control-plane command, refused here");
	if (q->body_len == 0 || q->body_len >= sizeof(path))
		return reply_err(rep, q, -EINVAL, PS_ERR_BAD_LENGTH, "save path of %u bytes",
				 q->body_len);
	tl_view_copy(v, 0, path, q->body_len);
	path[q->body_len] = '\0';
	if (strlen(path) != q->body_len)
		return reply_err(rep, q, -EINVAL, PS_ERR_BAD_LENGTH, "save path contains NUL");
	rc = ps_save(h, path, &rows, err, sizeof(err));
	if (rc < 0)
		return reply_err(rep, q, rc, PS_ERR_IO, "%s", err);
	tl_st64(rep->buf + TL_MSG_HDR_LEN, rows);
	put_hdr(rep, PS_T_SAVE_R, q, 8, 0, 0);
	return 0;
}

static int handle_one(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep);

int ps_handle_replay(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep)
{
	uint8_t t = req->hdr.type;
	int rc;

	rep->len = 0;
	if (t != PS_T_PUSH && t != PS_T_DENSE_PUSH && t != PS_T_BARRIER && t != PS_T_HELLO &&
	    t != PS_T_WAL_STEP)
		return reply_err(rep, &req->hdr, -EBADMSG, PS_ERR_BAD_TYPE, "message type %u is "
				 "never logged", t);
	h->in_request = true;
	rc = t == PS_T_WAL_STEP ? ps_handle_wal_step(h, req, rep) : handle_one(h, req, rep);
	h->in_request = false;
	return rc;
}

int ps_handle(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep)
{
	int rc;

	if (!rep->buf || rep->cap < TL_MSG_HDR_LEN + 64 || ((uintptr_t)rep->buf & 3))
		return -ENOBUFS;
	ps_handler_park_if_asked(h); /* a checkpoint cut falls between requests */
	h->in_request = true;
	rc = handle_one(h, req, rep);
	h->in_request = false;
	return rc;
}

/* A push's worker and sequence, read before ps_handle checks the rest; false: not a push. */
static bool push_id(const struct tl_msg_view *v, uint32_t *worker, uint64_t *seq)
{
	uint8_t tmp[16];
	const uint8_t *p;

	if ((v->hdr.type != PS_T_PUSH && v->hdr.type != PS_T_PUSH_PULL &&
	     v->hdr.type != PS_T_DENSE_PUSH) || v->hdr.body_len < 16)
		return false;
	p = tl_view_get(v, 0, 16, tmp);
	*worker = tl_ld32(p);
	*seq = tl_ld64(p + 8);
	return true;
}

int ps_handle_ordered(struct ps_handler *h, struct ps_push_order *o, const struct tl_msg_view *req,
		      struct ps_reply *rep)
{
	uint32_t worker;
	uint64_t seq;
	bool push = push_id(req, &worker, &seq);
	int rc;

	if (push && o->seq != 0 && worker == o->worker && seq > o->seq) {
		if (!rep->buf || rep->cap < TL_MSG_HDR_LEN + 64 || ((uintptr_t)rep->buf & 3))
			return -ENOBUFS;
		reply_err(rep, &req->hdr, -EAGAIN, PS_ERR_ORDER, "push %llu of worker %u waits for "
			  "its push %llu, refused for a retry, to be sent again first; nothing "
			  "applied, retry", (unsigned long long)seq, worker,
			  (unsigned long long)o->seq);
		tl_st16(rep->buf + 4, PS_F_RETRY);
		return -EAGAIN;
	}
	rc = ps_handle(h, req, rep);
	if (!push || rep->len < TL_MSG_HDR_LEN)
		return rc;
	if (rc < 0 && (tl_ld16(rep->buf + 4) & PS_F_RETRY)) {
		if (o->seq == 0 || worker != o->worker || seq < o->seq) {
			o->worker = worker;
			o->seq = seq;
		}
	} else if (o->seq != 0 && worker == o->worker && seq <= o->seq) {
		o->seq = 0; /* the refused push (or an older one) went through: order is kept */
	}
	return rc;
}

static int handle_one(struct ps_handler *h, const struct tl_msg_view *req, struct ps_reply *rep)
{
	rep->len = 0;
	switch (req->hdr.type) {
	case PS_T_PULL:
	case PS_T_PUSH:
	case PS_T_PUSH_PULL:
		return handle_sparse(h, req, rep);
	case PS_T_DENSE_PULL:
	case PS_T_DENSE_PUSH:
		return handle_dense(h, req, rep);
	case PS_T_BARRIER:
		return ps_handle_barrier(h, req, rep);
	case PS_T_GEO_PULL:
		return handle_geo_pull(h, req, rep);
	case PS_T_SAVE:
		return handle_save(h, req, rep);
	case PS_T_HELLO:
		return ps_handle_hello(h, req, rep);
	default:
		return reply_err(rep, &req->hdr, -EPROTO, PS_ERR_BAD_TYPE, "message type %u is not "
				 "a PS request", req->hdr.type);
	}
}
