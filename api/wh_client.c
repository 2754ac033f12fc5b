/*
 * wh_client.c — the worker client any thread of a training process calls: its network lcore
 * runs on a thread of its own, application threads hand it requests over a ring and wait on
 * a futex (or spin, when asked) for the completion.
 *
 * Call chain:  app thread: wharf_pull -> submit (rte_ring multi-producer enqueue; a kick when
 *   the network thread sleeps) -> wharf_wait (futex).
 *   network thread: net_main -> take (single-consumer dequeue, bursts of 32) -> issue (splits a
 *   request into chunks that fit one message: ps_client_* encodes, ps_net_io's send lends
 *   the buffer to the transport, zero copy) -> ps_net_poll_for -> ps_client_on_reply ->
 *   chunk_done -> complete (the app's callback, then the futex store and wake).
 *
 * Concurrency: everything but the ring, the kick flag, the broken flag, the counters and a
 * request's state word belongs to the network thread. A request's fields are written by its
 * submitter before the enqueue and read by the network thread after the dequeue (the ring's
 * release/acquire); the result (status) is written by the network thread before the state
 * store (release), read by the waiter after its load (acquire).
 *
 * Faults: a lost server (or one that answered nothing for request_timeout_s) lets go of what
 * the connection owed that will not be resent (pulls, barriers, GEO pulls: ps_client does it
 * as the glue reports the loss), the network thread reconnects and resends the
 * unacknowledged pushes (ps_net_recover), then asks the chunks let go again. A push thus
 * completes once, when acknowledged; a refusal a server marks for a retry is sent again by
 * ps_client after a back-off; any other refusal fails the call with the server's text. A
 * server that stays away past the wait timeout breaks the client: every request then fails
 * with the reason.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_pause.h>
#include <rte_ring.h>

#include "api/wh_config.h"
#include "api/wh_pvt.h"

#define WH_BURST 32u
#define WH_CHUNKS 256u          /* chunks in flight: ps_client's request slots */

enum wh_op { WH_PULL = 0, WH_PUSH, WH_PUSH_PULL, WH_DPULL, WH_DPUSH, WH_BARRIER, WH_GEO };
static const char *const op_names[] = { "pull", "push", "push_pull", "dense pull", "dense push",
					"barrier", "GEO pull" };

/* A request's state word (futex): the waiter may move RUNNING to SLEEPING, the network thread
 * stores DONE. */
enum { WH_RUNNING = 0, WH_DONE = 1, WH_SLEEPING = 2 };

struct wharf_req {
	_Atomic uint32_t state;
	int status;
	uint8_t op;
	bool handle;            /* a caller will wharf_wait it */
	bool heap;              /* malloc'd: freed by wharf_wait, or after done when no handle */
	bool spin;
	uint32_t table, dim, n; /* sparse: keys; dense: rows; barrier, GEO: 1 */
	const uint64_t *keys;
	const float *grads;
	float *out;
	uint64_t step;
	wharf_done_fn *done;
	void *arg;
	wharf_row_fn *row_fn;
	void *row_arg;
	int64_t rows;
	struct wharf_client *cl;
	/* network thread only */
	uint32_t issued, live, per_chunk;
	struct wharf_req *next;
	char why[192];          /* the failure's text (a server's, or the client's), for result */
};

struct wh_chunk {
	struct wharf_client *cl;
	struct wharf_req *r;
	uint32_t first, count;
	bool all, more;         /* barrier: the step completed; GEO: rows remain */
	struct wh_chunk *next;  /* free list, or the list to ask again */
};

struct wharf_client {
	const struct wharf_config *cfg;
	const struct ps_model_tables *mt;
	bool spin_wait;
	struct rte_ring *ring;
	void *ring_mem;
	pthread_t th;
	_Atomic int idle;       /* the network thread may sleep; submitters kick it */
	_Atomic int stop;
	_Atomic int cancel;          /* interrupted: waits for servers end (open, recovery) */
	_Atomic int broken;     /* 0, or the -errno every request now fails with */
	char broken_err[1024];  /* written before broken (release) */
	_Atomic uint64_t calls;
	_Atomic uint64_t step;  /* ps_client_step, stored by the network thread for wharf_step */
	struct ps_net *n;
	struct ps_client *pc;

	/* start-up: the network thread reports how bringing up the transport went */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started;
	int start_rc;
	char start_err[1024];

	/* network thread only */
	struct wharf_req *bl_head, *bl_tail;    /* accepted, not all chunks issued */
	struct wh_chunk chunk[WH_CHUNKS], *free_chunks, *again;
	struct wh_chunk *later;                 /* barriers to ask again after a poll round */
	uint32_t live;                          /* chunks in flight */
	bool need_recover;
	struct wharf_client_stats st;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static bool conn_error(int rc)
{
	return rc == -ECONNRESET || rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -EIO;
}

/* ---- completion (network thread) ---------------------------------------------------- */

static int result(struct wharf_req *r);

static void complete(struct wharf_client *cl, struct wharf_req *r)
{
	(void)cl;
	if (r->done != NULL) {
		if (r->status != 0)
			result(r); /* wharf_errmsg() in the function says why */
		r->done(r->arg, r->status);
	}
	if (!r->handle) {
		free(r);
		return;
	}
	/* release: status and the caller's out buffer are written; partner: the waiter's
	 * acquire load in wharf_wait. r may be freed by the waiter right after the store. */
	if (atomic_exchange_explicit(&r->state, WH_DONE, memory_order_acq_rel) == WH_SLEEPING)
		futex(&r->state, FUTEX_WAKE_PRIVATE, INT_MAX);
}

static void chunk_put(struct wharf_client *cl, struct wh_chunk *ch)
{
	ch->r = NULL;
	ch->next = cl->free_chunks;
	cl->free_chunks = ch;
	cl->live--;
}

static void ask_again(struct wharf_client *cl, struct wh_chunk *ch)
{
	ch->next = cl->again;
	cl->again = ch;
}

/* A request's first failure: its status, and the text that says why (may be ""). */
static void req_fail(struct wharf_req *r, int rc, const char *why)
{
	if (r->status != 0)
		return;
	r->status = rc;
	snprintf(r->why, sizeof(r->why), "%.*s", (int)sizeof(r->why) - 1, why);
}

/* A chunk that will not be answered: its request fails with rc (once its other chunks end). */
static void chunk_fail(struct wharf_client *cl, struct wh_chunk *ch, int rc);

/* ps_client's done callback of one chunk: on the network thread, from ps_client_on_reply
 * (or from inside the encode call when nothing had to be sent). */
static void chunk_done(void *arg, int status)
{
	struct wh_chunk *ch = arg;
	struct wharf_client *cl = ch->cl;
	struct wharf_req *r = ch->r;

	if (conn_error(status) && r->op != WH_PUSH && r->op != WH_PUSH_PULL &&
	    r->op != WH_DPUSH) {
		/* Forgotten with a lost connection (nothing to resend): asked again after the
		 * reconnect. */
		ask_again(cl, ch);
		return;
	}
	if (r->op == WH_BARRIER) /* a completed step moves the worker's step */
		atomic_store_explicit(&cl->step, ps_client_step(cl->pc), memory_order_relaxed);
	if (status == 0 && r->op == WH_BARRIER && !ch->all) {
		/* Not everyone reached the step yet: ask again after the next poll round (which
		 * may sleep), not in a tight loop. */
		ch->next = cl->later;
		cl->later = ch;
		return;
	}
	if (status == 0 && r->op == WH_GEO && ch->more) {
		ch->more = false; /* the server had more rows than fit one reply */
		ask_again(cl, ch);
		return;
	}
	if (status < 0 && r->status == 0)
		req_fail(r, status, ps_client_done_error(cl->pc));
	/*
	 * The rest of a failed request is not sent; a partial refusal (rows left as they were,
	 * keys a full table refused) is applied otherwise: the rest goes on.
	 */
	if (status < 0 && status != -EDQUOT && status != -ERANGE)
		r->issued = r->n;
	chunk_put(cl, ch);
	if (--r->live == 0 && r->issued >= r->n) {
		cl->st.replies++;
		complete(cl, r);
	}
}

/* GEO rows pass through to the caller's function while it waits. */
static void geo_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct wharf_req *r = arg;

	r->rows++;
	r->row_fn(r->row_arg, key, row, dim);
}

/* ---- issuing (network thread) ------------------------------------------------------- */

/*
 * Encodes and sends one chunk. fresh: a chunk not yet counted in its request's live (a
 * chunk asked again is counted already). -EAGAIN: no request slot now (try after replies).
 */
static int send_chunk(struct wharf_client *cl, struct wh_chunk *ch, bool fresh)
{
	const struct ps_client_io *io = ps_net_io(cl->n);
	struct wharf_req *r = ch->r;
	struct ps_client *pc = cl->pc;
	const struct ps_table_config *t = &cl->mt->t[r->table];
	uint32_t d, f = ch->first, k = ch->count;
	int rc;

	if (fresh)
		r->live++; /* first: the encode may complete the chunk at once */
	switch (r->op) {
	case WH_PULL:
		rc = ps_client_pull(pc, r->table, r->dim, r->keys + f, k, r->out + (size_t)f * r->dim,
				    chunk_done, ch, io->msgs);
		break;
	case WH_PUSH:
		rc = ps_client_push(pc, r->table, r->dim, r->keys + f, k,
				    r->grads + (size_t)f * r->dim, chunk_done, ch, io->msgs);
		break;
	case WH_PUSH_PULL:
		rc = ps_client_push_pull(pc, r->table, r->dim, r->keys + f, k,
					 r->grads + (size_t)f * r->dim, r->out + (size_t)f * r->dim,
					 chunk_done, ch, io->msgs);
		break;
	case WH_DPULL:
		rc = ps_client_dense_pull(pc, r->table, r->dim, t->dense_rows, f, k,
					  r->out + (size_t)f * r->dim, chunk_done, ch, io->msgs);
		break;
	case WH_DPUSH:
		rc = ps_client_dense_push(pc, r->table, r->dim, t->dense_rows, f, k,
					  r->grads + (size_t)f * r->dim, chunk_done, ch, io->msgs);
		break;
	case WH_BARRIER:
		rc = ps_client_barrier(pc, r->step, &ch->all, chunk_done, ch, io->msgs);
		break;
	default:
		rc = ps_client_geo_pull(pc, r->table, r->dim, geo_row, r, &ch->more, chunk_done, ch,
					io->msgs);
		break;
	}
	if (rc < 0) {
		if (fresh)
			r->live--;
		return rc;
	}
	cl->st.requests++;
	for (d = 0; d < ps_client_dests(pc); d++) {
		if (io->msgs[d].len == 0)
			continue;
		cl->st.bytes_out += io->msgs[d].len;
		if (io->send(io->ctx, d, io->msgs[d].buf, io->msgs[d].len) != 0)
			cl->need_recover = true; /* a push is resent, anything else asked again */
		io->msgs[d].len = 0;
	}
	return 0;
}

static void fail_req(struct wharf_client *cl, struct wharf_req *r, int rc)
{
	if (r->status == 0)
		r->status = rc;
	r->issued = r->n;
	if (r->live == 0)
		complete(cl, r);
}

/* Issues r's next chunks while slots last. 0 when all are out, -EAGAIN to come back. */
static int issue(struct wharf_client *cl, struct wharf_req *r)
{
	while (r->issued < r->n) {
		struct wh_chunk *ch = cl->free_chunks;
		int rc;

		if (ch == NULL)
			return -EAGAIN;
		cl->free_chunks = ch->next;
		cl->live++;
		ch->r = r;
		ch->first = r->issued;
		ch->count = r->n - r->issued < r->per_chunk ? r->n - r->issued : r->per_chunk;
		ch->all = ch->more = false;
		r->issued += ch->count;
		rc = send_chunk(cl, ch, true);
		if (rc == -EAGAIN) {
			r->issued -= ch->count;
			chunk_put(cl, ch);
			return -EAGAIN;
		}
		if (rc < 0) {
			chunk_put(cl, ch);
			req_fail(r, rc, ps_client_error(cl->pc)); /* e.g. a barrier of another step */
			fail_req(cl, r, rc);
			return 0;
		}
	}
	return 0;
}

/* The chunks to ask again, while slots last. */
static void reissue(struct wharf_client *cl)
{
	struct wh_chunk *list = cl->again, *ch;

	cl->again = NULL;
	while ((ch = list) != NULL) {
		int rc;

		list = ch->next;
		rc = send_chunk(cl, ch, false);
		if (rc == -EAGAIN) {
			ask_again(cl, ch);
			continue;
		}
		if (rc < 0)
			chunk_fail(cl, ch, rc);
	}
}

static void backlog_add(struct wharf_client *cl, struct wharf_req *r)
{
	r->next = NULL;
	if (cl->bl_tail != NULL)
		cl->bl_tail->next = r;
	else
		cl->bl_head = r;
	cl->bl_tail = r;
}

/* Requests from the ring, checked against the model, into the backlog. */
static unsigned take(struct wharf_client *cl)
{
	struct wharf_req *rs[WH_BURST];
	unsigned i, n = rte_ring_sc_dequeue_burst(cl->ring, (void **)rs, WH_BURST, NULL);

	for (i = 0; i < n; i++) {
		struct wharf_req *r = rs[i];
		r->issued = 0;
		r->live = 0;
		if (r->n == 0) {
			complete(cl, r);
			continue;
		}
		backlog_add(cl, r);
	}
	return n;
}

static void issue_backlog(struct wharf_client *cl)
{
	while (cl->bl_head != NULL) {
		struct wharf_req *r = cl->bl_head;
		if (issue(cl, r) == -EAGAIN)
			return;
		cl->bl_head = r->next;
		if (cl->bl_head == NULL)
			cl->bl_tail = NULL;
	}
}

/* ---- faults (network thread) -------------------------------------------------------- */

static void chunk_fail(struct wharf_client *cl, struct wh_chunk *ch, int rc)
{
	struct wharf_req *r = ch->r;

	chunk_put(cl, ch);
	if (r->status == 0)
		r->status = rc;
	r->issued = r->n;
	if (--r->live == 0)
		complete(cl, r);
}

/* Everything on the ring and in the backlog fails with rc. */
static void fail_queued(struct wharf_client *cl, int rc)
{
	while (take(cl) > 0)
		;
	while (cl->bl_head != NULL) {
		struct wharf_req *r = cl->bl_head;
		cl->bl_head = r->next;
		fail_req(cl, r, rc);
	}
	cl->bl_tail = NULL;
}

/* Every request queued or in flight fails with rc; later submits fail at once. */
static void break_client(struct wharf_client *cl, int rc, const char *why)
{
	snprintf(cl->broken_err, sizeof(cl->broken_err), "%s", why);
	atomic_store_explicit(&cl->broken, rc, memory_order_release); /* partner: submit */
	fail_queued(cl, rc);
	/*
	 * What is in flight (or waiting to be asked again) fails too. ps_client keeps its slots
	 * (they go with the client), so from now on the network thread never polls for replies:
	 * no chunk_done can run on a chunk handed back here.
	 */
	cl->again = cl->later = NULL;
	for (uint32_t i = 0; i < WH_CHUNKS; i++)
		if (cl->chunk[i].r != NULL)
			chunk_fail(cl, &cl->chunk[i], rc);
}

/* A broken client's network thread: fails what still arrives on the ring until closed. */
static void broken_loop(struct wharf_client *cl)
{
	int rc = atomic_load_explicit(&cl->broken, memory_order_relaxed);

	while (!atomic_load_explicit(&cl->stop, memory_order_acquire) ||
	       rte_ring_count(cl->ring) > 0) {
		fail_queued(cl, rc);
		usleep(1000);
	}
}

static int recover(struct wharf_client *cl)
{
	char err[1024];
	int rc;

	rc = ps_net_recover(cl->n, err, sizeof(err));
	if (rc != 0) {
		break_client(cl, rc, err);
		return rc;
	}
	cl->st.reconnects++;
	cl->need_recover = false;
	atomic_store_explicit(&cl->step, ps_client_step(cl->pc), memory_order_relaxed);
	return 0;
}

static bool any_down(struct wharf_client *cl)
{
	uint32_t d, nd = ps_client_dests(cl->pc);

	for (d = 0; d < nd; d++)
		if (!ps_net_dest_up(cl->n, d))
			return true;
	return false;
}

/* ---- the network thread ------------------------------------------------------------- */

static void started(struct wharf_client *cl, int rc, const char *err)
{
	pthread_mutex_lock(&cl->mu);
	cl->start_rc = rc;
	if (err != NULL)
		snprintf(cl->start_err, sizeof(cl->start_err), "%s", err);
	cl->started = true;
	pthread_cond_signal(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
}

static bool busy(const struct wharf_client *cl)
{
	return cl->bl_head != NULL || cl->again != NULL || cl->later != NULL || cl->live > 0;
}

static void *net_main(void *arg)
{
	struct wharf_client *cl = arg;
	const struct wharf_config *c = cl->cfg;
	struct ps_net_params np = { .cl = &c->cl, .eal_argc = c->eal_argc,
				      .eal_argv = c->eal_argv, .max_msg = ps_model_max_msg(cl->mt),
				      .name = "wharf" };
	char err[1024];
	sigset_t all;
	int rc;

	/* Signals are the application's: none lands on this thread or the EAL's it starts. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	np.model_digest = ps_model_digest(cl->mt);
	rc = ps_net_create(&np, &cl->n, err, sizeof(err));
	if (rc == 0)
		ps_net_stop_flag(cl->n, &cl->cancel);
	if (rc == 0 && (rc = ps_net_connect(cl->n, cl->pc, err, sizeof(err))) != 0) {
		ps_net_destroy(cl->n);
		cl->n = NULL;
	}
	if (rc == 0)
		atomic_store_explicit(&cl->step, ps_client_step(cl->pc), memory_order_relaxed);
	started(cl, rc, err);
	if (rc != 0)
		return NULL;

	for (;;) {
		bool work;

		take(cl);
		if (cl->again != NULL)
			reissue(cl);
		issue_backlog(cl);
		work = cl->bl_head != NULL || cl->again != NULL;
		if (!work) {
			/* seq_cst: idle is visible before the ring is looked at; partner: the fence
			 * in submit between its enqueue and reading idle. */
			atomic_store_explicit(&cl->idle, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			work = rte_ring_count(cl->ring) > 0;
		}
		rc = ps_net_poll_for(cl->n, !work);
		atomic_store_explicit(&cl->idle, 0, memory_order_relaxed);
		while (cl->later != NULL) {
			struct wh_chunk *ch = cl->later;
			cl->later = ch->next;
			ask_again(cl, ch);
		}
		if ((rc < 0 || cl->need_recover || (cl->live > 0 && any_down(cl))) &&
		    recover(cl) != 0) {
			broken_loop(cl);
			break;
		}
		if (atomic_load_explicit(&cl->stop, memory_order_acquire) && !busy(cl) &&
		    rte_ring_count(cl->ring) == 0)
			break;
	}
	/* The transport goes on the thread that brought it up: with dpdk this is the EAL's main
	 * lcore, whose per-thread epoll set and lcore id the teardown (and EAL cleanup) expect. */
	ps_net_destroy(cl->n);
	cl->n = NULL;
	return NULL;
}

/* ---- the ring (application threads) ------------------------------------------------- */

static int submit(struct wharf_client *cl, struct wharf_req *r)
{
	unsigned spins = 0;
	int rc;

	if ((rc = atomic_load_explicit(&cl->broken, memory_order_acquire)) != 0)
		return wh_errf(rc, "%s", cl->broken_err);
	while (rte_ring_mp_enqueue(cl->ring, r) != 0) {
		/* Full: the network thread is behind; let it run. */
		if ((rc = atomic_load_explicit(&cl->broken, memory_order_acquire)) != 0)
			return wh_errf(rc, "%s", cl->broken_err);
		if (cl->spin_wait || ++spins < 64)
			sched_yield();
		else
			usleep(50);
	}
	atomic_fetch_add_explicit(&cl->calls, 1, memory_order_relaxed);
	/* seq_cst: the enqueue is visible before idle is read; partner: net_main's fence. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&cl->idle, memory_order_relaxed))
		ps_net_wake(cl->n);
	return 0;
}

/* ---- open and close ----------------------------------------------------------------- */

/* Waits for net_main's start; asks interrupted (when given) every 50 ms meanwhile. */
static void wait_started(struct wharf_client *cl, int (*interrupted)(void *arg), void *arg)
{
	pthread_mutex_lock(&cl->mu);
	while (!cl->started) {
		struct timespec ts;

		if (interrupted == NULL) {
			pthread_cond_wait(&cl->cv, &cl->mu);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
		if (cl->started)
			break;
		pthread_mutex_unlock(&cl->mu); /* the callback may take its own locks */
		if (interrupted(arg) != 0) {
			atomic_store_explicit(&cl->cancel, 1, memory_order_relaxed);
			interrupted = NULL; /* asked once: now the net thread's answer */
		}
		pthread_mutex_lock(&cl->mu);
	}
	pthread_mutex_unlock(&cl->mu);
}

int wharf_client_open(const struct wharf_config *c, const struct wharf_model *m,
		      const struct wharf_client_opts *opts, struct wharf_client **out)
{
	return wharf_client_open_interruptible(c, m, opts, NULL, NULL, out);
}

int wharf_client_open_interruptible(const struct wharf_config *c, const struct wharf_model *m,
				    const struct wharf_client_opts *opts,
				    int (*interrupted)(void *arg), void *arg,
				    struct wharf_client **out)
{
	sigset_t all, old;
	struct ps_client_config cc = { 0 };
	struct wharf_client *cl;
	uint32_t depth = opts != NULL && opts->queue_depth ? opts->queue_depth : 1024, i;
	ssize_t sz;
	int rc;

	if (out == NULL || c == NULL || m == NULL)
		return wh_errf(-EINVAL, "wharf_client_open: NULL %s", out == NULL ? "out" :
			       c == NULL ? "config" : "model");
	*out = NULL;
	if (c->cl.role != PS_ROLE_WORKER)
		return wh_errf(-EINVAL, "the cluster role is %s; a client runs as a worker "
			       "(--role worker, TRAINING_ROLE=TRAINER, TF_CONFIG task.type worker)",
			       ps_role_name(c->cl.role));
	if (depth > (1u << 20))
		return wh_errf(-EINVAL, "queue_depth %u: at most %u", depth, 1u << 20);
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL)
		return wh_errf(-ENOMEM, "out of memory");
	cl->cfg = c;
	cl->mt = wh_model_tables(m);
	cl->spin_wait = opts != NULL && opts->spin_wait;
	depth = rte_align32pow2(depth);
	sz = rte_ring_get_memsize(depth);
	if (sz < 0 || (cl->ring_mem = aligned_alloc(64, (size_t)RTE_ALIGN_CEIL(sz, 64))) == NULL) {
		free(cl);
		return wh_errf(-ENOMEM, "out of memory for a ring of %u requests", depth);
	}
	cl->ring = cl->ring_mem;
	if ((rc = rte_ring_init(cl->ring, "wharf_client", depth, RING_F_SC_DEQ)) != 0) {
		rc = wh_errf(rc, "request ring: %s", strerror(-rc));
		goto out_ring;
	}
	for (i = 0; i < WH_CHUNKS; i++) {
		cl->chunk[i].cl = cl;
		cl->chunk[i].next = i + 1 < WH_CHUNKS ? &cl->chunk[i + 1] : NULL;
	}
	cl->free_chunks = &cl->chunk[0];
	cc.worker_id = c->cl.task_index;
	cc.n_servers = c->cl.n_ps;
	cc.max_inflight = c->cl.request_slots < WH_CHUNKS ? c->cl.request_slots : WH_CHUNKS;
	cc.max_keys = cl->mt->max_keys;
	/* Each open is a new process of its worker id: the servers refuse the ones before. */
	cc.incarnation = ps_incarnation_new();
	cc.request_timeout_us = (uint64_t)c->cl.request_timeout_s * 1000000u;
	if ((rc = ps_client_create(&cc, &cl->pc)) != 0) {
		rc = wh_errf(rc, "ps client: %s", strerror(-rc));
		goto out_ring;
	}
	pthread_mutex_init(&cl->mu, NULL);
	pthread_cond_init(&cl->cv, NULL);
	/* Created with every signal blocked: none lands there before net_main blocks them. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&cl->th, NULL, net_main, cl);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		rc = wh_errf(-rc, "network thread: %s", strerror(rc));
		goto out_pc;
	}
	wait_started(cl, interrupted, arg);
	if (cl->start_rc != 0) {
		rc = wh_errf(cl->start_rc, "%s", cl->start_err);
		pthread_join(cl->th, NULL);
		goto out_pc;
	}
	*out = cl;
	return 0;
out_pc:
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	ps_client_destroy(cl->pc);
out_ring:
	free(cl->ring_mem);
	free(cl);
	return rc;
}

void wharf_client_interrupt(struct wharf_client *cl)
{
	/* relaxed: ps_net reads it as a stop flag (wait_stopped); no data rides on it */
	if (cl != NULL)
		atomic_store_explicit(&cl->cancel, 1, memory_order_relaxed);
}

void wharf_client_close(struct wharf_client *cl)
{
	if (cl == NULL)
		return;
	/* No wake-up: the network thread sleeps 1 ms at most, and may tear down its transport as
	 * soon as it sees stop. */
	atomic_store_explicit(&cl->stop, 1, memory_order_release); /* partner: net_main */
	pthread_join(cl->th, NULL);
	ps_client_destroy(cl->pc);
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	free(cl->ring_mem);
	free(cl);
}

/* ---- calls -------------------------------------------------------------------------- */

static int check_table(struct wharf_client *cl, struct wharf_req *r, bool dense)
{
	const struct ps_table_config *t;

	if (cl == NULL)
		return wh_errf(-EINVAL, "%s: NULL client", op_names[r->op]);
	if (r->table >= cl->mt->n)
		return wh_errf(-EINVAL, "%s: table %u does not exist (the model has %u)",
			       op_names[r->op], r->table, cl->mt->n);
	t = &cl->mt->t[r->table];
	if (dense != (t->kind == PS_TABLE_DENSE))
		return wh_errf(-EINVAL, "%s: table %u (%s) is %s", op_names[r->op], r->table,
			       cl->mt->name[r->table],
			       t->kind == PS_TABLE_DENSE ? "dense" : "sparse");
	r->dim = t->dim;
	r->per_chunk = ps_model_req_rows(cl->mt, r->table);
	if (dense)
		r->n = (uint32_t)t->dense_rows;
	return 0;
}

static int start(struct wharf_client *cl, struct wharf_req *r, wharf_done_fn *done, void *arg,
		 struct wharf_req **req)
{
	struct wharf_req *h;
	int rc;

	if (req == NULL && done == NULL)
		return wh_errf(-EINVAL, "%s: neither a completion function nor a handle",
			       op_names[r->op]);
	h = malloc(sizeof(*h));
	if (h == NULL)
		return wh_errf(-ENOMEM, "out of memory");
	*h = *r;
	atomic_init(&h->state, WH_RUNNING);
	h->cl = cl;
	h->done = done;
	h->arg = arg;
	h->handle = req != NULL;
	h->heap = true;
	h->spin = cl->spin_wait;
	if (req != NULL)
		*req = h;
	if ((rc = submit(cl, h)) != 0) {
		if (req != NULL)
			*req = NULL;
		free(h);
	}
	return rc;
}

static int wait_done(struct wharf_req *r, int timeout_ms)
{
	struct timespec deadline, now, rel;
	unsigned spins = 0;
	uint32_t s;

	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += timeout_ms / 1000;
		deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	}
	/* acquire: the network thread's result; partner: complete's exchange. */
	while ((s = atomic_load_explicit(&r->state, memory_order_acquire)) != WH_DONE) {
		if (timeout_ms >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > deadline.tv_sec ||
			    (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
				return -ETIMEDOUT;
		}
		if (r->spin) {
			if (++spins % 1024 == 0)
				sched_yield();
			else
				rte_pause();
			continue;
		}
		if (s == WH_RUNNING) {
			uint32_t expect = WH_RUNNING;
			if (!atomic_compare_exchange_strong_explicit(&r->state, &expect, WH_SLEEPING,
					memory_order_acq_rel, memory_order_acquire))
				continue;
		}
		if (timeout_ms < 0) {
			futex(&r->state, FUTEX_WAIT_PRIVATE, WH_SLEEPING);
			continue;
		}
		rel.tv_sec = deadline.tv_sec - now.tv_sec;
		rel.tv_nsec = deadline.tv_nsec - now.tv_nsec;
		if (rel.tv_nsec < 0) {
			rel.tv_sec--;
			rel.tv_nsec += 1000000000;
		}
		syscall(SYS_futex, (uint32_t *)&r->state, FUTEX_WAIT_PRIVATE, WH_SLEEPING, &rel, NULL, 0);
	}
	return 0;
}

static int result(struct wharf_req *r)
{
	struct wharf_client *cl = r->cl;

	if (r->status != 0 && r->status == atomic_load_explicit(&cl->broken, memory_order_acquire))
		wh_set_err("%s of table %u: %s: %s", op_names[r->op], r->table,
			   strerror(-r->status), cl->broken_err);
	else if (r->status == -EDQUOT)
		wh_set_err("%s of table %u: the table is at its memory cap (max_rows, max_bytes) on a "
			   "server: keys new to it were refused, their gradients dropped; the other "
			   "keys were applied", op_names[r->op], r->table);
	else if (r->status != 0)
		wh_set_err("%s of table %u: %s%s%s", op_names[r->op], r->table, strerror(-r->status),
			   r->why[0] ? ": " : "", r->why);
	return r->status;
}

/* A blocking call: the request lives on the caller's stack until it completed. */
static int call(struct wharf_client *cl, struct wharf_req *r)
{
	int rc;

	atomic_init(&r->state, WH_RUNNING);
	r->cl = cl;
	r->handle = true;
	r->heap = false;
	r->spin = cl->spin_wait;
	if ((rc = submit(cl, r)) != 0)
		return rc;
	wait_done(r, -1);
	return result(r);
}

static int check_buf(const struct wharf_req *r, const void *p, const char *what)
{
	if (p == NULL && r->n > 0)
		return wh_errf(-EINVAL, "%s: %s is NULL", op_names[r->op], what);
	return 0;
}

static bool overlap(const void *a, size_t na, const void *b, size_t nb)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/*
 * out is written as replies come while keys (and a push_pull's grads) may still be read: a
 * later chunk is encoded from them, and a pull is asked again after a lost connection. So
 * out must not overlap keys, nor grads unless it is grads itself (a row's gradient is
 * encoded before that row's reply can arrive).
 */
static int check_out(const struct wharf_req *r)
{
	size_t rows = (size_t)r->n * r->dim * sizeof(float);

	if (overlap(r->out, rows, r->keys, (size_t)r->n * sizeof(*r->keys)))
		return wh_errf(-EINVAL, "%s: out overlaps keys", op_names[r->op]);
	if (r->op == WH_PUSH_PULL && (const float *)r->out != r->grads &&
	    overlap(r->out, rows, r->grads, rows))
		return wh_errf(-EINVAL, "%s: out overlaps grads (it may be grads itself, not "
			       "part of it)", op_names[r->op]);
	return 0;
}

static int sparse(struct wharf_client *cl, struct wharf_req *r)
{
	int rc;

	if ((rc = check_table(cl, r, false)) != 0 || (rc = check_buf(r, r->keys, "keys")) != 0)
		return rc;
	if (r->op != WH_PUSH && (rc = check_buf(r, r->out, "out")) != 0)
		return rc;
	if (r->op != WH_PULL && (rc = check_buf(r, r->grads, "grads")) != 0)
		return rc;
	return r->op != WH_PUSH ? check_out(r) : 0;
}

static int dense(struct wharf_client *cl, struct wharf_req *r)
{
	int rc;

	if ((rc = check_table(cl, r, true)) != 0)
		return rc;
	return check_buf(r, r->op == WH_DPULL ? (const void *)r->out : (const void *)r->grads,
			 r->op == WH_DPULL ? "out" : "grads");
}

#define REQ(...) (struct wharf_req){ __VA_ARGS__ }

int wharf_pull(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
	       float *out)
{
	struct wharf_req r = REQ(.op = WH_PULL, .table = table, .n = n, .keys = keys, .out = out);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

int wharf_push(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
	       const float *grads)
{
	struct wharf_req r = REQ(.op = WH_PUSH, .table = table, .n = n, .keys = keys,
				 .grads = grads);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

int wharf_push_pull(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		    const float *grads, float *out)
{
	struct wharf_req r = REQ(.op = WH_PUSH_PULL, .table = table, .n = n, .keys = keys,
				 .grads = grads, .out = out);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

int wharf_dense_pull(struct wharf_client *cl, uint32_t table, float *out)
{
	struct wharf_req r = REQ(.op = WH_DPULL, .table = table, .out = out);
	int rc = dense(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

int wharf_dense_push(struct wharf_client *cl, uint32_t table, const float *grads)
{
	struct wharf_req r = REQ(.op = WH_DPUSH, .table = table, .grads = grads);
	int rc = dense(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

static int barrier_req(struct wharf_client *cl, struct wharf_req *r)
{
	if (cl == NULL)
		return wh_errf(-EINVAL, "barrier: NULL client");
	if (cl->cfg->cl.mode != PS_JOB_SYNC)
		return wh_errf(-EINVAL, "barrier: the job runs in %s mode; barriers are for sync",
			       ps_job_mode_name(cl->cfg->cl.mode));
	r->n = 1;
	r->per_chunk = 1;
	return 0;
}

int wharf_barrier(struct wharf_client *cl, uint64_t step)
{
	struct wharf_req r = REQ(.op = WH_BARRIER, .step = step);
	int rc = barrier_req(cl, &r);

	return rc != 0 ? rc : call(cl, &r);
}

int wharf_pull_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		     float *out, wharf_done_fn *done, void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_PULL, .table = table, .n = n, .keys = keys, .out = out);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_push_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys, uint32_t n,
		     const float *grads, wharf_done_fn *done, void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_PUSH, .table = table, .n = n, .keys = keys,
				 .grads = grads);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_push_pull_async(struct wharf_client *cl, uint32_t table, const uint64_t *keys,
			  uint32_t n, const float *grads, float *out, wharf_done_fn *done,
			  void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_PUSH_PULL, .table = table, .n = n, .keys = keys,
				 .grads = grads, .out = out);
	int rc = sparse(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_dense_pull_async(struct wharf_client *cl, uint32_t table, float *out,
			   wharf_done_fn *done, void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_DPULL, .table = table, .out = out);
	int rc = dense(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_dense_push_async(struct wharf_client *cl, uint32_t table, const float *grads,
			   wharf_done_fn *done, void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_DPUSH, .table = table, .grads = grads);
	int rc = dense(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_barrier_async(struct wharf_client *cl, uint64_t step, wharf_done_fn *done, void *arg,
			struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_BARRIER, .step = step);
	int rc = barrier_req(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

int wharf_wait(struct wharf_req *req)
{
	int rc;

	if (req == NULL)
		return wh_errf(-EINVAL, "wharf_wait: NULL request");
	wait_done(req, -1);
	rc = result(req);
	free(req);
	return rc;
}

int wharf_wait_timeout(struct wharf_req *req, int timeout_ms)
{
	int rc;

	if (req == NULL)
		return wh_errf(-EINVAL, "wharf_wait_timeout: NULL request");
	if (timeout_ms < 0)
		return wharf_wait(req);
	if (wait_done(req, timeout_ms) != 0)
		return wh_errf(-EAGAIN, "%s of table %u: not complete after %d ms",
			       op_names[req->op], req->table, timeout_ms);
	rc = result(req);
	free(req);
	return rc;
}

bool wharf_req_done(const struct wharf_req *req)
{
	return req != NULL && atomic_load_explicit(&req->state, memory_order_acquire) == WH_DONE;
}

/* A GEO pull's checks and request fields: 0 or the refusal. */
static int geo(struct wharf_client *cl, struct wharf_req *r)
{
	int rc;

	if (r->row_fn == NULL)
		return wh_errf(-EINVAL, "GEO pull: NULL row function");
	if ((rc = check_table(cl, r, false)) != 0)
		return rc;
	if (cl->cfg->cl.mode != PS_JOB_GEO)
		return wh_errf(-EINVAL, "GEO pull: the job runs in %s mode",
			       ps_job_mode_name(cl->cfg->cl.mode));
	r->n = 1;
	r->per_chunk = 1;
	return 0;
}

int64_t wharf_geo_pull(struct wharf_client *cl, uint32_t table, wharf_row_fn *fn, void *arg)
{
	struct wharf_req r = REQ(.op = WH_GEO, .table = table, .row_fn = fn, .row_arg = arg);
	int rc = geo(cl, &r);

	if (rc == 0)
		rc = call(cl, &r);
	return rc != 0 ? rc : r.rows;
}

int wharf_geo_pull_async(struct wharf_client *cl, uint32_t table, wharf_row_fn *fn,
			 void *fn_arg, wharf_done_fn *done, void *arg, struct wharf_req **req)
{
	if (req != NULL)
		*req = NULL; /* refused below: nothing queued */
	struct wharf_req r = REQ(.op = WH_GEO, .table = table, .row_fn = fn, .row_arg = fn_arg);
	int rc = geo(cl, &r);

	return rc != 0 ? rc : start(cl, &r, done, arg, req);
}

uint64_t wharf_step(const struct wharf_client *cl)
{
	return cl != NULL ? atomic_load_explicit(&cl->step, memory_order_relaxed) : 0;
}

void wharf_client_stats(const struct wharf_client *cl, struct wharf_client_stats *out)
{
	struct ps_net_cli_stats ns;

	memset(out, 0, sizeof(*out));
	if (cl == NULL)
		return;
	/* The network thread's counters, read without a lock: figures for reports. */
	*out = cl->st;
	out->calls = atomic_load_explicit(&cl->calls, memory_order_relaxed);
	ps_net_cli_stats(cl->n, &ns);
	out->bytes_out = ns.bytes_out;
	out->bytes_in = ns.bytes_in;
	out->resent = ns.resent;
}
