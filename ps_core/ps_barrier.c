/*
 * ps_barrier.c — the sync barrier and the hello: what a worker's PS_T_BARRIER and PS_T_HELLO
 * do on the handler that received them (ps_handle_barrier, ps_handle_hello), and on shard 0's
 * owner, which holds the barrier (ps_barrier_run).
 *
 * Call chain: ps_handle -> ps_handle_barrier -> PS_OP_BARRIER on shard 0 -> [a first
 *   arrival: ps_wal_append, PS_OP_BARRIER_ARRIVE] -> [the step is complete, or overdue with
 *   policy continue: apply_step = pause the other handlers, PS_OP_BARRIER_CLAIM, a
 *   PS_T_WAL_STEP log record, PS_OP_SYNC_STEP on every shard, PS_OP_BARRIER_DONE, resume].
 *   ps_handle -> ps_handle_hello -> PS_OP_HELLO on every shard -> [it changes the fence:
 *   pause, ps_wal_append, PS_OP_HELLO_COMMIT on every shard, resume].
 *
 * Rules (a call that fails changes nothing; a replay of the log does what the server did):
 * - An arrival counts only once it is in the log: a refused append leaves the barrier as it
 *   was, and the worker, told to retry, asks again.
 * - A step is applied right after its PS_T_WAL_STEP record, both logged and applied while
 *   every other handler is parked between requests: each push is wholly before or wholly
 *   after the step, live and on replay (where arrivals never apply a step, only these
 *   records do). A refused record leaves the step complete but not applied; the next
 *   barrier query tries again.
 * - A hello that raises a worker's incarnation (or brings back a worker a timeout left out)
 *   is logged and made under the same pause, so the pushes refused as fenced live are the
 *   ones refused on replay.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_pause.h>

#include "ps_core/ps_pvt.h"

/* ---------------------------------------------------------------- shard 0's owner */

static inline void pub32(_Atomic uint32_t *p, uint32_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline void pub64(_Atomic uint64_t *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

void ps_barrier_publish(struct ps_server *s)
{
	pub64(&s->pub_step, s->bar_step);
	pub64(&s->pub_t0, s->bar_t0);
	pub32(&s->pub_arrived, s->bar_arrived);
	pub32(&s->pub_gone, s->bar_gone);
}

/* The workers the step still waits for into op->ids; the first report of a timeout. */
static void name_missing(struct ps_server *s, struct ps_op *op)
{
	uint32_t nw = s->cfg.n_workers, w;

	op->n_ids = 0;
	for (w = 0; w < nw; w++)
		if (s->bar_seen[w] == 0)
			op->ids[op->n_ids++] = w;
	op->first = s->bar_told != s->bar_step + 1;
	if (!op->first)
		return;
	s->bar_told = s->bar_step + 1;
	for (w = 0; w < (nw + 63) / 64; w++)
		atomic_store_explicit(&s->pub_late[w], 0, memory_order_relaxed);
	for (w = 0; w < op->n_ids; w++)
		atomic_fetch_or_explicit(&s->pub_late[op->ids[w] / 64], 1ull << (op->ids[w] % 64),
					 memory_order_relaxed);
	pub64(&s->pub_late_step, s->bar_step);
	pub32(&s->pub_late_n, op->n_ids);
	pub64(&s->pub_timeouts, atomic_load_explicit(&s->pub_timeouts, memory_order_relaxed) + 1);
}

static bool overdue(const struct ps_server *s, uint64_t now)
{
	return s->cfg.barrier_timeout_ms > 0 && s->bar_t0 != 0 &&
	       now - s->bar_t0 >= (uint64_t)s->cfg.barrier_timeout_ms * 1000000u;
}

/*
 * The current step, for a worker that has arrived: 0 waiting, PS_BAR_APPLY (everyone is in),
 * or overdue: PS_BAR_DROP (policy continue) or -ETIME (fail), op->ids naming the missing.
 * The wait's clock starts at the step's first arrival (or first query after a restore). A
 * replay has no clock and applies steps only at PS_T_WAL_STEP records: always 0.
 */
static int bar_state(struct ps_server *s, struct ps_op *op)
{
	uint64_t now;

	op->n = s->bar_arrived;
	if (op->replay || s->bar_applying)
		return 0;
	if (s->bar_arrived + s->bar_gone == s->cfg.n_workers)
		return PS_BAR_APPLY;
	if (s->cfg.barrier_timeout_ms == 0)
		return 0;
	now = ps_now_ns();
	if (s->bar_t0 == 0) {
		s->bar_t0 = now;
		ps_barrier_publish(s);
	}
	if (!overdue(s, now))
		return 0;
	name_missing(s, op);
	op->err_kind = PS_ERR_BARRIER_TIMEOUT;
	return s->cfg.barrier_policy == PS_BARRIER_CONTINUE ? (int)PS_BAR_DROP : -ETIME;
}

/*
 * Called with every other handler parked. Makes the caller the one that applies step
 * op->seq: when everyone is in, or (op->fresh, policy continue) the step is still overdue,
 * op->ids then naming the workers to leave out. From the log (op->replay), the record's
 * list stands. PS_BAR_APPLY, or 0: not due (any more).
 */
static int bar_claim(struct ps_server *s, struct ps_op *op)
{
	if (op->seq != s->bar_step || s->bar_applying)
		return 0;
	if (!op->replay) {
		op->n_ids = 0;
		if (s->bar_arrived + s->bar_gone < s->cfg.n_workers) {
			if (!op->fresh || !overdue(s, ps_now_ns()))
				return 0; /* a worker came back meanwhile and restarted the clock */
			name_missing(s, op);
		}
	}
	s->bar_applying = true;
	return PS_BAR_APPLY;
}

/* Step op->seq was applied: the left-out workers (op->ids) marked, the next step begins. */
static int bar_done(struct ps_server *s, struct ps_op *op)
{
	uint32_t nw = s->cfg.n_workers, w, i, dropped = 0;

	if (op->seq != s->bar_step)
		return -EINVAL;
	for (i = 0; i < op->n_ids; i++) {
		w = op->ids[i];
		if (w < nw && s->bar_seen[w] == 0) { /* one that arrived meanwhile stays in */
			s->bar_seen[w] = 2;
			s->bar_gone++;
			dropped++;
		}
	}
	for (w = 0; w < nw; w++)
		if (s->bar_seen[w] == 1)
			s->bar_seen[w] = 0;
	s->bar_arrived = 0;
	s->bar_applying = false;
	s->bar_step++;
	s->bar_t0 = 0;
	if (dropped)
		pub64(&s->pub_dropped, atomic_load_explicit(&s->pub_dropped, memory_order_relaxed) +
		      dropped);
	ps_barrier_publish(s);
	return 1;
}

void ps_barrier_readmit(struct ps_server *s, uint32_t w)
{
	s->bar_seen[w] = 0;
	s->bar_gone--;
	s->bar_t0 = 0; /* a worker that comes back gets a whole timeout */
	ps_barrier_publish(s);
}

/*
 * Runs on shard 0's owner (lcore slot 0), reached from any lcore with these ops. op->seq is
 * the step asked about; statuses: 0 waiting, 1 the step is done, PS_BAR_FRESH (PS_OP_BARRIER:
 * this worker's first arrival, to be logged and then counted by PS_OP_BARRIER_ARRIVE),
 * PS_BAR_APPLY / PS_BAR_DROP (see bar_state), -EINVAL a future step, -ETIME overdue. The
 * fence was checked before (ps_shard_run).
 */
void ps_barrier_run(struct ps_server *s, struct ps_op *op)
{
	uint32_t w = op->worker;

	op->dense_first = s->bar_step; /* reported back: the server's step */
	switch (op->kind) {
	case PS_OP_BARRIER:
		if (op->seq != s->bar_step) {
			op->status = op->seq > s->bar_step ? -EINVAL : 1;
			op->n = s->cfg.n_workers;
			return;
		}
		op->fresh = s->bar_seen[w] != 1;
		op->status = op->fresh ? (int)PS_BAR_FRESH : bar_state(s, op);
		return;
	case PS_OP_BARRIER_ARRIVE:
		if (op->seq != s->bar_step) {
			op->status = op->seq > s->bar_step ? -EINVAL : 1;
			return;
		}
		if (s->bar_seen[w] != 1) {
			s->bar_gone -= s->bar_seen[w] == 2; /* a left-out worker is back */
			s->bar_seen[w] = 1;
			s->bar_arrived++;
		}
		op->status = bar_state(s, op);
		ps_barrier_publish(s);
		return;
	case PS_OP_BARRIER_CLAIM:
		op->status = bar_claim(s, op);
		return;
	case PS_OP_BARRIER_UNCLAIM:
		s->bar_applying = false;
		op->status = 0;
		return;
	case PS_OP_BARRIER_DONE:
		op->status = bar_done(s, op);
		return;
	default:
		op->status = -EINVAL;
	}
}

/* ---------------------------------------------------------------- the handler */

static int bar_op(struct ps_handler *h, struct ps_op *op, enum ps_op_kind kind)
{
	op->kind = kind;
	ps_handler_run_op(h, 0, op);
	ps_handler_wait(h, op);
	return op->status;
}

/* The PS_T_WAL_STEP record of the step op->seq leaving out op->ids. 0 or -errno. */
static int log_step(struct ps_handler *h, const struct ps_op *bar)
{
	uint32_t body = 16 + 4 * bar->n_ids, i;
	struct tl_msg_hdr hd = { .magic = TL_MSG_MAGIC, .version = TL_MSG_VERSION,
				 .type = PS_T_WAL_STEP, .body_len = body };
	struct tl_iov iov = { .base = h->rec + TL_MSG_HDR_LEN, .len = body };
	struct tl_msg_view v = { .hdr = hd, .iov = &iov, .iovcnt = 1 };
	uint8_t *p = h->rec + TL_MSG_HDR_LEN;

	tl_st64(p, bar->seq);
	tl_st32(p + 8, bar->n_ids);
	tl_st32(p + 12, 0);
	for (i = 0; i < bar->n_ids; i++)
		tl_st32(p + 16 + 4 * i, bar->ids[i]);
	return ps_wal_append(h, &v, PS_T_WAL_STEP);
}

/*
 * Applies step bar->seq if it is still due once the others are paused (drop: leaving out
 * the missing, it being overdue). 1 applied, 0 not due (another handler applied it, or a
 * worker came back), -errno: the log refused its record (nothing changed).
 */
static int apply_step(struct ps_handler *h, struct ps_op *bar, bool drop)
{
	struct ps_server *s = h->s;
	uint32_t sh;
	int rc;

	if (!h->replaying)
		ps_server_pause_wait(h);
	bar->fresh = drop;
	if (bar_op(h, bar, PS_OP_BARRIER_CLAIM) != (int)PS_BAR_APPLY) {
		rc = 0;
		goto out_resume;
	}
	if ((rc = log_step(h, bar)) < 0) {
		bar_op(h, bar, PS_OP_BARRIER_UNCLAIM);
		goto out_resume;
	}
	if (s->cfg.mode == PS_MODE_SYNC) {
		for (sh = 0; sh < s->cfg.n_shards; sh++) {
			memset(&h->ops[sh], 0, sizeof(h->ops[sh]));
			h->ops[sh].kind = PS_OP_SYNC_STEP;
			ps_handler_run_op(h, sh, &h->ops[sh]);
		}
		for (sh = 0; sh < s->cfg.n_shards; sh++)
			ps_handler_wait(h, &h->ops[sh]);
	}
	rc = bar_op(h, bar, PS_OP_BARRIER_DONE) == 1 ? 1 : -EINVAL;
out_resume:
	if (!h->replaying)
		ps_server_resume(h);
	return rc;
}

/* "3, 5, 9" (at most 32 ids, then how many more). */
static void list_ids(char *buf, size_t len, const uint32_t *ids, uint32_t n)
{
	size_t off = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < n && i < 32 && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%u", i ? ", " : "", ids[i]);
	if (i < n && off < len)
		snprintf(buf + off, len - off, " and %u more", n - i);
}

/* A step overdue: said in the PS log once per step; the text of the timeout reply. */
static void overdue_text(struct ps_handler *h, const struct ps_op *bar, char *txt, size_t len)
{
	const struct ps_server *s = h->s;
	char ids[400];

	list_ids(ids, sizeof(ids), bar->ids, bar->n_ids);
	snprintf(txt, len, "sync step %" PRIu64 " waited %u ms at the barrier of server %u for "
		 "worker%s %s (%u of %u missing)", bar->dense_first, s->cfg.barrier_timeout_ms,
		 s->cfg.server_id, bar->n_ids == 1 ? "" : "s", ids, bar->n_ids, s->cfg.n_workers);
	if (bar->first)
		PS_LOG(WARNING, "%s; barrier policy %s", txt,
		       s->cfg.barrier_policy == PS_BARRIER_CONTINUE ?
		       "continue: the step is applied without them" :
		       "fail: the waiting workers are told so");
}

static int reply_barrier(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep,
			 const struct ps_op *bar, bool done)
{
	uint8_t *b = rep->buf + TL_MSG_HDR_LEN;

	tl_st64(b, bar->seq);
	tl_st32(b + 8, done ? h->s->cfg.n_workers : bar->n);
	tl_st32(b + 12, h->s->cfg.n_workers);
	tl_st32(b + 16, done);
	tl_st32(b + 20, 0);
	ps_reply_hdr(rep, PS_T_BARRIER_R, &v->hdr, 24);
	return 0;
}

int ps_handle_barrier(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	struct ps_op bar = { .kind = PS_OP_BARRIER, .ids = h->ids, .replay = h->replaying };
	uint8_t tmp[PS_BARRIER_BODY];
	const uint8_t *p;
	char txt[600];
	int st, rc;

	if (q->body_len != PS_BARRIER_BODY || q->key_count != 0) {
		snprintf(txt, sizeof(txt), "barrier body is %u bytes with %u keys, expected %u and 0",
			 q->body_len, q->key_count, PS_BARRIER_BODY);
		return ps_reply_text(rep, q, -EBADMSG, PS_ERR_BAD_LENGTH, txt);
	}
	p = tl_view_get(v, 0, PS_BARRIER_BODY, tmp);
	bar.worker = tl_ld32(p);
	bar.seq = tl_ld64(p + 8);
	bar.inc = tl_ld64(p + 16);
	if (bar.worker >= h->s->cfg.n_workers) {
		snprintf(txt, sizeof(txt), "worker %u out of range (%u workers)", bar.worker,
			 h->s->cfg.n_workers);
		return ps_reply_text(rep, q, -EINVAL, PS_ERR_BAD_WORKER, txt);
	}
	st = bar_op(h, &bar, PS_OP_BARRIER);
	if (st == (int)PS_BAR_FRESH) {
		/* Logged before it counts: a refused append changes nothing. */
		if ((rc = ps_wal_append(h, v, PS_T_BARRIER)) < 0) {
			snprintf(txt, sizeof(txt), "write-ahead log cannot take the barrier (%s); "
				 "nothing counted, retry", strerror(-rc));
			return ps_reply_retry_text(rep, q, rc, PS_ERR_IO, txt);
		}
		st = bar_op(h, &bar, PS_OP_BARRIER_ARRIVE);
	}
	if (st < 0 && bar.err_kind == PS_ERR_FENCED)
		return ps_reply_fenced(rep, q, bar.worker, bar.inc, bar.have, st);
	if (st == -EINVAL) {
		snprintf(txt, sizeof(txt), "barrier for step %" PRIu64 " while the server is at step "
			 "%" PRIu64, bar.seq, bar.dense_first);
		return ps_reply_text(rep, q, -EINVAL, PS_ERR_BAD_MODE, txt);
	}
	if (st == -ETIME || st == (int)PS_BAR_DROP)
		overdue_text(h, &bar, txt, sizeof(txt));
	if (st == -ETIME)
		return ps_reply_text(rep, q, -ETIME, PS_ERR_BARRIER_TIMEOUT, txt);
	if (st == (int)PS_BAR_APPLY || st == (int)PS_BAR_DROP) {
		rc = apply_step(h, &bar, st == (int)PS_BAR_DROP);
		if (rc < 0) {
			snprintf(txt, sizeof(txt), "write-ahead log cannot take sync step %" PRIu64
				 " (%s): not applied yet, retry", bar.seq, strerror(-rc));
			return ps_reply_retry_text(rep, q, rc, PS_ERR_IO, txt);
		}
		st = rc;
	}
	return reply_barrier(h, v, rep, &bar, st == 1);
}

/* PS_T_WAL_STEP, from the log only: apply the step where the live server did. */
int ps_handle_wal_step(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	struct ps_op bar = { .ids = h->ids, .replay = true };
	struct tl_view_cur cur;
	uint8_t tmp[16];
	const uint8_t *p;
	char txt[200];
	uint32_t i;
	int rc;

	p = q->body_len >= 16 ? tl_view_get(v, 0, 16, tmp) : NULL;
	if (p == NULL || tl_ld32(p + 8) > h->s->cfg.n_workers ||
	    q->body_len != 16 + 4ull * tl_ld32(p + 8))
		return ps_reply_text(rep, q, -EBADMSG, PS_ERR_BAD_LENGTH, "sync step record of a "
				     "length that does not add up");
	bar.seq = tl_ld64(p);
	bar.n_ids = tl_ld32(p + 8);
	tl_cur_init(&cur, v);
	for (i = 0; i < bar.n_ids; i++)
		bar.ids[i] = tl_ld32(tl_cur_get(&cur, 16 + 4 * i, 4, tmp));
	rc = apply_step(h, &bar, false);
	if (rc != 1) {
		snprintf(txt, sizeof(txt), "sync step %" PRIu64 " applied in the log while the barrier "
			 "is at step %" PRIu64, bar.seq, bar.dense_first);
		return ps_reply_text(rep, q, -EBADMSG, PS_ERR_BAD_MODE, txt);
	}
	return reply_barrier(h, v, rep, &bar, true);
}

/* ---------------------------------------------------------------- hello */

/* Runs kind on every shard for worker w of incarnation inc; -ESTALE (with the newest
 * registered one in *have) if any refused, else whether any answered 1. */
static int hello_ops(struct ps_handler *h, enum ps_op_kind kind, uint32_t w, uint64_t inc,
		     uint64_t *have)
{
	uint32_t ns = h->s->cfg.n_shards, s;
	int rc = 0;

	for (s = 0; s < ns; s++) {
		memset(&h->ops[s], 0, sizeof(h->ops[s]));
		h->ops[s].kind = kind;
		h->ops[s].worker = w;
		h->ops[s].inc = inc;
		ps_handler_run_op(h, s, &h->ops[s]);
	}
	for (s = 0; s < ns; s++) {
		ps_handler_wait(h, &h->ops[s]);
		if (h->ops[s].status < 0 && h->ops[s].have > *have)
			*have = h->ops[s].have;
		if (h->ops[s].status < 0)
			rc = h->ops[s].status;
		else if (rc == 0 && h->ops[s].status > 0)
			rc = 1;
	}
	return rc;
}

int ps_handle_hello(struct ps_handler *h, const struct tl_msg_view *v, struct ps_reply *rep)
{
	const struct tl_msg_hdr *q = &v->hdr;
	uint32_t ns = h->s->cfg.n_shards, s, worker;
	uint64_t inc, last = 0, first = 0, have = 0;
	uint8_t tmp[PS_HELLO_BODY], *b;
	const uint8_t *p;
	char txt[200];
	int rc;

	if (q->body_len != PS_HELLO_BODY || q->key_count != 0) {
		snprintf(txt, sizeof(txt), "hello body is %u bytes with %u keys, expected %u and 0",
			 q->body_len, q->key_count, PS_HELLO_BODY);
		return ps_reply_text(rep, q, -EBADMSG, PS_ERR_BAD_LENGTH, txt);
	}
	p = tl_view_get(v, 0, PS_HELLO_BODY, tmp);
	worker = tl_ld32(p);
	inc = tl_ld64(p + 8);
	if (worker >= h->s->cfg.n_workers) {
		snprintf(txt, sizeof(txt), "worker %u out of range (%u workers)", worker,
			 h->s->cfg.n_workers);
		return ps_reply_text(rep, q, -EINVAL, PS_ERR_BAD_WORKER, txt);
	}
	rc = hello_ops(h, PS_OP_HELLO, worker, inc, &have);
	if (rc == 1) {
		/*
		 * A newer incarnation (or a left-out worker back): asked again with the others
		 * paused, logged, made; the answer is read after the change, when an older
		 * process of the id can no longer move its sequences.
		 */
		if (!h->replaying)
			ps_server_pause_wait(h);
		rc = hello_ops(h, PS_OP_HELLO, worker, inc, &have);
		if (rc == 1 && (rc = ps_wal_append(h, v, PS_T_HELLO)) == 0)
			rc = hello_ops(h, PS_OP_HELLO_COMMIT, worker, inc, &have) < 0 ? -ESTALE : 0;
		if (!h->replaying)
			ps_server_resume(h);
		if (rc < 0 && rc != -ESTALE) {
			snprintf(txt, sizeof(txt), "write-ahead log cannot take the hello (%s); "
				 "nothing changed, retry", strerror(-rc));
			return ps_reply_retry_text(rep, q, rc, PS_ERR_IO, txt);
		}
	}
	if (rc < 0)
		return ps_reply_fenced(rep, q, worker, inc, have, -ESTALE);
	for (s = 0; s < ns; s++) {
		if (h->ops[s].seq > last)
			last = h->ops[s].seq;
		if (h->ops[s].dense_first && (first == 0 || h->ops[s].dense_first < first))
			first = h->ops[s].dense_first;
	}
	b = rep->buf + TL_MSG_HDR_LEN;
	tl_st64(b, last);
	tl_st32(b + 8, worker);
	tl_st32(b + 12, 0);
	tl_st64(b + 16, h->s->epoch);
	tl_st64(b + 24, h->ops[0].step);
	tl_st64(b + 32, first);
	tl_st32(b + 40, h->s->cfg.n_lcores);
	tl_st32(b + 44, ns);
	ps_reply_hdr(rep, PS_T_HELLO_R, q, PS_HELLO_R_BODY);
	return 0;
}

/* ---------------------------------------------------------------- telemetry */

int ps_server_barrier_stats(struct ps_server *s, struct ps_barrier_stats *st, uint32_t *missing,
			    uint32_t cap)
{
	uint64_t t0 = atomic_load_explicit(&s->pub_t0, memory_order_relaxed), now;
	uint32_t w, n = 0;

	memset(st, 0, sizeof(*st));
	st->step = atomic_load_explicit(&s->pub_step, memory_order_relaxed);
	st->arrived = atomic_load_explicit(&s->pub_arrived, memory_order_relaxed);
	st->gone = atomic_load_explicit(&s->pub_gone, memory_order_relaxed);
	st->timeouts = atomic_load_explicit(&s->pub_timeouts, memory_order_relaxed);
	st->dropped = atomic_load_explicit(&s->pub_dropped, memory_order_relaxed);
	st->late_step = atomic_load_explicit(&s->pub_late_step, memory_order_relaxed);
	st->late_n = atomic_load_explicit(&s->pub_late_n, memory_order_relaxed);
	st->epoch = s->epoch;
	now = ps_now_ns();
	if (t0 != 0 && now > t0)
		st->waited_ms = (now - t0) / 1000000u;
	for (w = 0; w < s->cfg.n_workers && n < cap; w++)
		if (atomic_load_explicit(&s->pub_late[w / 64], memory_order_relaxed) &
		    (1ull << (w % 64)))
			missing[n++] = w;
	return (int)n;
}
