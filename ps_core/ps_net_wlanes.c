/*
 * ps_net_wlanes.c — a worker's network lanes: NETWORK_WORKER_CORE_NUMBER transport
 * instances (DPDK lcores sharing the port, or kernel epoll loops), each on a thread of its
 * own and carrying the data connections of the destinations d with d % lanes == its index.
 * Lane 0 is the worker's own node, driven by the thread that runs ps_client (the trainer's,
 * or the library client's network thread); ps_client stays single-threaded.
 *
 * Call chain (lane k > 0):  owner: cli_send -> ps_net_wl_send -> cmd ring -> [wake]
 *   -> lane thread: wl_cmds -> ps_net_send_buf -> fz_conn_send (zero copy, the owner's buffer)
 *   -> ... reply -> ps_net_on_msg -> ps_net_cli_on_msg -> ps_net_wl_on_reply (holds the bytes)
 *   -> event ring -> [wake] -> owner: ps_net_poll_for -> ps_net_wl_drain
 *   -> ps_client_on_reply -> RELEASE back over the cmd ring -> lane: tl_msg_release.
 * Two single-producer/single-consumer rings per lane (rte_rings on our own memory): owner to
 * lane (SEND, RELEASE, OPEN, CLOSE) and lane to owner (SENT, REPLY, UP, FAIL, LOST), in
 * order, so a connection's replies never overtake its UP or its LOST. The owner never touches
 * a lane's connections; it knows each by an id and a state (struct ps_net_ldst). What the rings
 * can hold bounds what is in flight: a send per pooled buffer (PS_NET_POOL_MAX), a reply per
 * request; both rings are larger than that.
 *
 * Pinning (WORKER_DISABLE_PIN_CORES) as a PS's lanes: DPDK lanes run on EAL's worker lcores
 * (pinned by EAL to their -l cores), kernel lanes on pthreads; floating lanes may run on any
 * CPU of the set.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "ps_core/ps_net_pvt.h"

#define WL_RING 4096u   /* entries per ring: more than a lane can have in flight */
#define WL_REC_IOV 8u   /* iov room of a pooled reply record; larger ones are sized to fit */
#define WL_BURST 64u

enum wl_kind {
	WL_SEND = 1, WL_RELEASE, WL_OPEN, WL_CLOSE,  /* owner -> lane */
	WL_SENT, WL_REPLY, WL_UP, WL_FAIL, WL_LOST,  /* lane -> owner */
};

struct wl_ev {
	uint16_t kind;
	uint16_t slane;         /* OPEN: the server's lane */
	uint32_t dest;
	uint32_t id;            /* the connection's owner id */
	int32_t arg;            /* OPEN: port; FAIL, LOST: reason */
	uint32_t ip, server;    /* OPEN */
	void *p;                /* SEND, SENT: a ps_net_buf; REPLY, RELEASE: a record */
};
_Static_assert(sizeof(struct wl_ev) == 32, "ring element of 32 bytes");

/* A reply a lane holds for the owner: the carrier's hold, the message's header and pieces. */
struct wl_rec {
	struct wl_rec *next, *prev;  /* the lane's free list, or its list of records lent */
	struct tl_msg *hold;
	struct tl_msg_view v;
	uint32_t cap;
	struct tl_iov iov[];
};

struct ps_net_wl_lane {
	struct ps_net_wl *wl;
	uint32_t k;
	struct ps_net *n;          /* release-stored once built */
	struct rte_ring *cmd, *ev;
	struct wl_rec *free_rec, *lent;
	bool pushed;                 /* lane: events pushed since it last woke the owner */
	bool kick;                   /* owner: commands pushed since it last woke the lane */
	/* The lane's fuse counters for the owner (seqlock: odd while being written). */
	_Atomic uint32_t fz_seq;
	struct fz_conn_stats fz;
	uint64_t next_fz_us;
	uint64_t sent, replies;      /* owner: requests handed to this lane, replies taken */
	int rc;
	char err[256];
};

struct ps_net_wl {
	struct ps_net *owner;
	const struct ps_cluster *cl;
	struct ps_net_params np;
	uint32_t lanes;
	struct tl_lanes *tl_lanes;     /* the lanes' threads (dpdk: EAL, the shared port) */
	cpu_set_t cpus;
	bool th_on[PS_NET_MAX_LANES];
	_Atomic uint32_t ready, failed, closed, quiet;
	_Atomic int stop, stopped;
	uint32_t next_id;
	struct ps_net_wl_lane l[PS_NET_MAX_LANES];
	struct ps_net_ldst ld[PS_NET_MAX_DST];
};

uint32_t ps_net_wl_wanted(const struct ps_cluster *cl)
{
	uint32_t k = cl->worker_net.core_number ? cl->worker_net.core_number : 1;

	return k > PS_NET_MAX_LANES ? PS_NET_MAX_LANES : k;
}

struct ps_net_ldst *ps_net_wl_dst(const struct ps_net *n, uint32_t d)
{
	return &n->wl->ld[d];
}

/* ---- rings ------------------------------------------------------------------------------ */

static struct rte_ring *ring_new(void)
{
	ssize_t sz = rte_ring_get_memsize_elem(sizeof(struct wl_ev), WL_RING);
	struct rte_ring *r;

	if (sz < 0 || (r = aligned_alloc(64, ((size_t)sz + 63) & ~(size_t)63)) == NULL)
		return NULL;
	if (rte_ring_init(r, "wl", WL_RING, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
		free(r);
		return NULL;
	}
	return r;
}

/*
 * Puts ev on r. The rings are sized past what can be in flight, so this waits only if that
 * bound is wrong; then it yields until the other side makes room (it drains without us).
 */
static void ring_put(struct rte_ring *r, struct wl_ev ev, struct tl *wake)
{
	while (rte_ring_sp_enqueue_elem(r, &ev, sizeof(ev)) != 0) {
		tl_wake(wake);
		sched_yield();
	}
}

/* ---- lane side ------------------------------------------------------------------------- */

static struct ps_net_wl_lane *lane_of_node(const struct ps_net *n)
{
	return n->wlane;
}

static void lane_event(struct ps_net_wl_lane *L, const struct wl_ev *ev)
{
	ring_put(L->ev, *ev, L->wl->owner->tl);
	L->pushed = true;
}

void ps_net_wl_buf_done(struct ps_net_buf *b)
{
	struct ps_net_wl *wl = b->n->wl;
	struct wl_ev ev = { .kind = WL_SENT, .p = b };

	lane_event(&wl->l[b->lane], &ev);
}

void ps_net_wl_on_conn(struct ps_net_conn *c, bool up, int reason)
{
	struct ps_net_wl_lane *L = lane_of_node(c->n);
	struct wl_ev ev = { .kind = up ? WL_UP : WL_LOST, .dest = c->dest, .id = c->oid,
			    .arg = reason };

	lane_event(L, &ev);
}

void ps_net_wl_on_reply(struct ps_net_conn *c, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier)
{
	struct ps_net_wl_lane *L = lane_of_node(c->n);
	struct wl_rec *r = L->free_rec;
	struct wl_ev ev = { .kind = WL_REPLY, .dest = c->dest, .id = c->oid };

	if (r != NULL && r->cap >= m->iovcnt) {
		L->free_rec = r->next;
	} else {
		uint32_t cap = m->iovcnt > WL_REC_IOV ? m->iovcnt : WL_REC_IOV;
		r = malloc(sizeof(*r) + (size_t)cap * sizeof(r->iov[0]));
		if (r == NULL) {
			/* The request goes unanswered: its connection closes and is resent. */
			PS_LOG(ERR, "%s: lane %u: no memory to hold a reply: closing the connection "
			       "to ps %u", c->n->name, L->k, c->server);
			fz_conn_close(c->fc);
			return;
		}
		r->cap = cap;
	}
	r->hold = tl_msg_hold(carrier);
	r->v = *m;
	memcpy(r->iov, m->iov, (size_t)m->iovcnt * sizeof(r->iov[0]));
	r->v.iov = r->iov;
	r->prev = NULL;
	r->next = L->lent;
	if (L->lent != NULL)
		L->lent->prev = r;
	L->lent = r;
	ev.p = r;
	c->replies++;
	lane_event(L, &ev);
}

static void rec_release(struct ps_net_wl_lane *L, struct wl_rec *r)
{
	tl_msg_release(r->hold);
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		L->lent = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	if (r->cap > WL_REC_IOV) {
		free(r);
		return;
	}
	r->next = L->free_rec;
	L->free_rec = r;
}

/* Closes a connection the owner let go of: no LOST follows (its ctx is gone first). */
static void lane_drop(struct ps_net_conn *c)
{
	if (c->fc != NULL) {
		fz_conn_set_ctx(c->fc, NULL);
		fz_conn_close(c->fc);
	}
	ps_net_conn_free(c);
}

static void lane_open(struct ps_net_wl_lane *L, const struct wl_ev *e)
{
	struct ps_net *n = L->n;
	struct wl_ev ev = { .kind = WL_FAIL, .dest = e->dest, .id = e->id };
	struct ps_net_conn *c;
	int rc;

	if (n->dst[e->dest] != NULL)
		lane_drop(n->dst[e->dest]);
	if ((c = ps_net_conn_new(n, PS_NET_TO_SERVER)) == NULL) {
		ev.arg = -ENOMEM;
		lane_event(L, &ev);
		return;
	}
	c->server = e->server;
	c->lane = e->slane;
	c->dest = e->dest;
	c->oid = e->id;
	/* The owner wrote the server's layout before it pushed the OPEN (ring: release). */
	ps_net_aim(n, L->wl->owner, e->server, e->slane, e->ip, (uint16_t)e->arg);
	rc = fz_net_connect(n->fz, e->ip, (uint16_t)e->arg, &n->fzc, &ps_net_conn_ops, c, &c->fc);
	if (rc != 0) {
		ps_net_conn_free(c);
		ev.arg = rc;
		lane_event(L, &ev);
		return;
	}
	n->dst[e->dest] = c;
}

static void lane_send(struct ps_net_wl_lane *L, const struct wl_ev *e, bool stopping)
{
	struct ps_net_conn *c = L->n->dst[e->dest];
	struct ps_net_buf *b = e->p;
	struct tl_msg_hdr h;

	if (!stopping && c != NULL && c->up == 1 && c->oid == e->id &&
	    tl_msg_hdr_decode(b->data, UINT32_MAX, &h) == 0 && ps_net_send_buf(c, b, &h, true) == 0) {
		c->reqs++;
		return;
	}
	/* Not sent (its connection went meanwhile): back to the owner, whose client resends. */
	ps_net_wl_buf_done(b);
}

/* The owner's commands; how many there were. */
static uint32_t lane_cmds(struct ps_net_wl_lane *L, bool stopping)
{
	struct wl_ev ev[WL_BURST];
	uint32_t got, i, total = 0;

	while ((got = rte_ring_sc_dequeue_burst_elem(L->cmd, ev, sizeof(ev[0]), WL_BURST, NULL)) > 0) {
		for (i = 0; i < got; i++) {
			switch (ev[i].kind) {
			case WL_SEND:
				lane_send(L, &ev[i], stopping);
				break;
			case WL_RELEASE:
				rec_release(L, ev[i].p);
				break;
			case WL_OPEN:
				if (!stopping) {
					lane_open(L, &ev[i]);
				} else {
					struct wl_ev f = { .kind = WL_FAIL, .dest = ev[i].dest,
							   .id = ev[i].id, .arg = -ECANCELED };
					lane_event(L, &f);
				}
				break;
			case WL_CLOSE: {
				struct ps_net_conn *c = L->n->dst[ev[i].dest];
				if (c != NULL && c->oid == ev[i].id)
					lane_drop(c);
				break;
			}
			default:
				break;
			}
		}
		total += got;
	}
	return total;
}

/* What the owner reads of this lane's fuse counters: refreshed every 20 ms. */
static void lane_publish(struct ps_net_wl_lane *L)
{
	struct ps_net *n = L->n;
	uint64_t now = ps_net_now_us();
	struct fz_conn_stats st;
	uint32_t seq;

	atomic_store_explicit(&n->pub.polls,
			      atomic_load_explicit(&n->pub.polls, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (now < L->next_fz_us)
		return;
	L->next_fz_us = now + 20000;
	struct timespec cpu;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
		atomic_store_explicit(&n->pub.cpu_us, (uint64_t)cpu.tv_sec * 1000000u +
				      (uint64_t)cpu.tv_nsec / 1000u, memory_order_relaxed);
	atomic_store_explicit(&n->pub.cpu, sched_getcpu(), memory_order_relaxed);
	ps_net_fuse_stats(n, &st);
	seq = atomic_load_explicit(&L->fz_seq, memory_order_relaxed);
	atomic_store_explicit(&L->fz_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	L->fz = st;
	/* release: partner, the acquire loads in ps_net_wl_fuse_add. */
	atomic_store_explicit(&L->fz_seq, seq + 2, memory_order_release);
}

static void lane_loop(struct ps_net_wl_lane *L)
{
	struct ps_net_wl *wl = L->wl;
	struct ps_net *n = L->n;
	const struct timespec nap = { 0, 1000000 };

	/* acquire: partner, the release store in ps_net_wl_stop; what the owner sent before is ours. */
	while (!atomic_load_explicit(&wl->stop, memory_order_acquire)) {
		uint32_t got = lane_cmds(L, false);
		ps_net_poll_for(n, got == 0);
		/*
		 * Polling, with no connection and nothing lent (more lanes than destinations): it
		 * has nothing to poll for, and naps instead of spinning a core; an OPEN the owner
		 * hands it waits at most a nap.
		 */
		if (n->polling && got == 0 && n->conns == NULL && L->lent == NULL)
			nanosleep(&nap, NULL);
		if (L->pushed) {
			L->pushed = false;
			if (!n->polling) /* a polling owner sees the ring without it */
				tl_wake(wl->owner->tl);
		}
		lane_publish(L);
	}
}

/* Resets every data connection of n (its closed callbacks run). */
static void abort_all(struct ps_net *n)
{
	struct ps_net_conn *c, *next;

	for (c = n->conns; c != NULL; c = next) {
		next = c->next;
		if (c->kind == PS_NET_TO_SERVER && c->fc != NULL)
			tl_abort(fz_conn_tl(c->fc));
	}
}

static int lane_main(void *arg)
{
	struct ps_net_wl_lane *L = arg;
	struct ps_net_wl *wl = L->wl;
	struct ps_net_params np = wl->np;
	struct ps_net *n = NULL;
	struct timespec ts = { 0, 100000 };
	struct wl_rec *r;
	int rc = 0;

	ps_net_lane_affinity(wl->cl, wl->cl->worker_net.disable_pin_cores, &wl->cpus, L->k);
	rc = tl_lanes_open(wl->tl_lanes, L->k, &np.backend_arg);
	if (rc != 0)
		ps_errf_rc(L->err, sizeof(L->err), rc, "worker lane %u: dpdk lcore: %s", L->k,
			    strerror(-rc));
	if (rc == 0) {
		np.lane = L->k;
		np.lanes = wl->lanes;
		rc = ps_net_create(&np, &n, L->err, sizeof(L->err));
	}
	if (rc == 0) {
		n->wlane = L;
		atomic_store_explicit(&n->pub.cpu, sched_getcpu(), memory_order_relaxed);
		__atomic_store_n(&L->n, n, __ATOMIC_RELEASE);
		atomic_fetch_add_explicit(&wl->ready, 1, memory_order_release);
		lane_loop(L);
		/* What the owner handed over is answered; what it was lent comes back unread. */
		lane_cmds(L, true);
		while ((r = L->lent) != NULL)
			rec_release(L, r);
		/* The servers hear of it now, while the port still sends (lane 0 relays). */
		abort_all(n);
		for (int i = 0; i < 8; i++)
			ps_net_poll_for(n, false);
		tl_lanes_flush(wl->tl_lanes, L->k);
		atomic_fetch_add_explicit(&wl->closed, 1, memory_order_release);
	} else {
		L->rc = rc;
		atomic_fetch_add_explicit(&wl->failed, 1, memory_order_release);
		atomic_fetch_add_explicit(&wl->closed, 1, memory_order_release);
		/* acquire: partner, the release store in ps_net_wl_stop. */
		while (!atomic_load_explicit(&wl->stop, memory_order_acquire))
			nanosleep(&ts, NULL);
	}
	if (tl_lanes_shared_port(wl->tl_lanes)) {
		tl_lanes_flush(wl->tl_lanes, L->k);
		atomic_fetch_add_explicit(&wl->quiet, 1, memory_order_release);
		/* acquire: partner, the release store once the owner stopped the port. */
		while (!atomic_load_explicit(&wl->stopped, memory_order_acquire))
			nanosleep(&ts, NULL);
	}
	ps_net_destroy(n); /* its connections' last completions go to the owner */
	tl_lanes_close(wl->tl_lanes, L->k);
	while ((r = L->free_rec) != NULL) {
		L->free_rec = r->next;
		free(r);
	}
	return 0;
}

/* ---- owner side ------------------------------------------------------------------------ */

static void owner_cmd(struct ps_net *n, uint32_t lane, const struct wl_ev *ev)
{
	struct ps_net_wl_lane *L = &n->wl->l[lane];

	ring_put(L->cmd, *ev, L->n->tl);
	L->kick = true;
}

void ps_net_wl_kick(struct ps_net *n)
{
	for (uint32_t k = 1; k < n->wl_n; k++) {
		struct ps_net_wl_lane *L = &n->wl->l[k];
		if (L->kick) {
			L->kick = false;
			if (!n->polling) /* a polling lane sees the ring without it */
				tl_wake(L->n->tl);
		}
	}
}

int ps_net_wl_send(struct ps_net *n, uint32_t d, struct ps_net_buf *b)
{
	struct ps_net_ldst *s = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_SEND, .dest = d, .id = s->id, .p = b };

	if (s->st != PS_NET_DST_UP)
		return -ENOTCONN;
	b->lane = (uint8_t)ps_net_wl_lane_of(n, d);
	owner_cmd(n, b->lane, &ev);
	n->wl->l[b->lane].sent++;
	return 0;
}

int ps_net_wl_open(struct ps_net *n, uint32_t d, uint32_t s, uint32_t sl, uint32_t ip,
	       uint16_t port)
{
	struct ps_net_ldst *st = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_OPEN, .slane = (uint16_t)sl, .dest = d, .arg = port,
			    .ip = ip, .server = s };

	ps_net_wl_close(n, d);
	if (++n->wl->next_id == 0)
		n->wl->next_id = 1;
	*st = (struct ps_net_ldst){ .id = n->wl->next_id, .server = s, .lane = sl,
				.st = PS_NET_DST_CONNECTING };
	ev.id = st->id;
	owner_cmd(n, ps_net_wl_lane_of(n, d), &ev);
	ps_net_wl_kick(n);
	return 0;
}

void ps_net_wl_close(struct ps_net *n, uint32_t d)
{
	struct ps_net_ldst *st = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_CLOSE, .dest = d, .id = st->id };

	if (st->st == PS_NET_DST_NONE)
		return;
	if (st->st == PS_NET_DST_UP && n->pc != NULL && n->layout_set)
		ps_client_forget_dest(n->pc, d, -ECONNRESET);
	owner_cmd(n, ps_net_wl_lane_of(n, d), &ev);
	st->st = PS_NET_DST_NONE;
	st->id = 0;
}

/* One event from a lane. final: the lanes are gone; only buffers come back. */
static void owner_event(struct ps_net *n, uint32_t k, const struct wl_ev *e, bool final)
{
	struct ps_net_ldst *st = &n->wl->ld[e->dest];
	struct ps_net_buf *b;

	if (e->kind == WL_SENT) {
		b = e->p;
		b->sends--;
		if (b->sends == 0)
			b->lane = 0;
		ps_net_buf_unref(b);
		return;
	}
	if (final)
		return;
	switch (e->kind) {
	case WL_REPLY: {
		struct wl_rec *r = e->p;
		struct wl_ev rel = { .kind = WL_RELEASE, .p = r };
		if (st->id == e->id && st->st == PS_NET_DST_UP) {
			n->wl->l[k].replies++;
			n->cst.replies++;
			n->cst.bytes_in += TL_MSG_HDR_LEN + r->v.hdr.body_len;
			if (n->pc != NULL)
				(void)ps_client_on_reply(n->pc, e->dest, &r->v);
		}
		owner_cmd(n, k, &rel);
		break;
	}
	case WL_UP:
		if (st->id == e->id && st->st == PS_NET_DST_CONNECTING)
			st->st = PS_NET_DST_UP;
		break;
	case WL_FAIL:
	case WL_LOST:
		if (st->id != e->id || (st->st != PS_NET_DST_CONNECTING && st->st != PS_NET_DST_UP))
			break;
		if (st->st == PS_NET_DST_UP && n->pc != NULL && n->layout_set)
			ps_client_forget_dest(n->pc, e->dest, -ECONNRESET);
		st->st = PS_NET_DST_FAILED;
		st->reason = e->arg ? e->arg : -ECONNRESET;
		break;
	default:
		break;
	}
}

static void owner_drain(struct ps_net *n, bool final)
{
	struct wl_ev ev[WL_BURST];
	uint32_t k, got, i;

	for (k = 1; k < n->wl_n; k++) {
		struct ps_net_wl_lane *L = &n->wl->l[k];
		while ((got = rte_ring_sc_dequeue_burst_elem(L->ev, ev, sizeof(ev[0]), WL_BURST,
							     NULL)) > 0)
			for (i = 0; i < got; i++)
				owner_event(n, k, &ev[i], final);
	}
}

void ps_net_wl_drain(struct ps_net *n)
{
	owner_drain(n, false);
	ps_net_wl_kick(n); /* the releases it queued */
}

void ps_net_wl_status(const struct ps_net *n, char *out, size_t len, size_t *off)
{
	/* Lane 0 carried what the node counted and the other lanes did not. */
	uint64_t sent0 = n->cst.requests, replies0 = n->cst.replies;

	for (uint32_t k = 1; k < n->wl_n; k++) {
		sent0 -= n->wl->l[k].sent;
		replies0 -= n->wl->l[k].replies;
	}
	for (uint32_t k = 0; k < n->wl_n && *off < len; k++) {
		const struct ps_net_wl_lane *L = &n->wl->l[k];
		const struct ps_net *m = k == 0 ? n : __atomic_load_n(&L->n, __ATOMIC_ACQUIRE);
		if (m == NULL)
			continue;
		*off += (size_t)snprintf(out + *off, len - *off, "wlane  %u  requests %" PRIu64
			"  replies %" PRIu64 "  cpu %d %s", k, k == 0 ? sent0 : L->sent,
			k == 0 ? replies0 : L->replies,
			k == 0 ? sched_getcpu() : atomic_load_explicit(&m->pub.cpu, memory_order_relaxed),
			n->cl->worker_net.disable_pin_cores ? "floating" : "pinned");
		/* Lane 0's thread is the caller's (it computes too): only the others' CPU time. */
		if (k > 0 && *off < len)
			*off += (size_t)snprintf(out + *off, len - *off, "  cpu_ms %" PRIu64,
				atomic_load_explicit(&m->pub.cpu_us, memory_order_relaxed) / 1000u);
		if (*off < len)
			*off += (size_t)snprintf(out + *off, len - *off, "\n");
	}
}

void ps_net_wl_fuse_add(const struct ps_net *n, struct fz_conn_stats *out)
{
	for (uint32_t k = 1; k < n->wl_n; k++) {
		struct ps_net_wl_lane *L = &n->wl->l[k];
		struct fz_conn_stats st;
		uint32_t s0, s1;
		do {
			/* acquire: partner, the release store in lane_publish. */
			s0 = atomic_load_explicit(&L->fz_seq, memory_order_acquire);
			st = L->fz;
			atomic_thread_fence(memory_order_acquire);
			s1 = atomic_load_explicit(&L->fz_seq, memory_order_relaxed);
		} while (s0 != s1 || (s0 & 1u));
		fz_conn_stats_add(out, &st);
	}
}

int ps_net_wl_prepare(struct ps_net_params *np, uint32_t *lanes, struct ps_net_wl **out, char *err,
		  size_t errlen)
{
	const struct ps_cluster *cl = np->cl;
	struct ps_net_wl *wl = calloc(1, sizeof(*wl));
	int rc;

	if (wl == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	wl->cl = cl;
	rc = ps_net_lanes_open(cl, np, "NETWORK_WORKER_CORE_NUMBER", lanes, &wl->tl_lanes, err,
			       errlen);
	if (rc != 0) {
		free(wl);
		return rc;
	}
	if ((rc = tl_lanes_open(wl->tl_lanes, 0, &np->backend_arg)) != 0) {
		ps_errf_rc(err, errlen, rc, "worker lane 0: dpdk lcore: %s", strerror(-rc));
		ps_net_wl_fini(wl);
		return rc;
	}
	wl->lanes = *lanes;
	tl_lanes_cpus(wl->tl_lanes, &wl->cpus);
	for (uint32_t k = 1; k < wl->lanes; k++) {
		wl->l[k].wl = wl;
		wl->l[k].k = k;
		if ((wl->l[k].cmd = ring_new()) == NULL || (wl->l[k].ev = ring_new()) == NULL) {
			ps_net_wl_fini(wl);
			return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
		}
	}
	np->lanes = *lanes;
	*out = wl;
	return 0;
}

int ps_net_wl_start(struct ps_net_wl *wl, struct ps_net *n, char *err, size_t errlen)
{
	uint32_t k;

	wl->owner = n;
	wl->np = (struct ps_net_params){ n->cl, 0, NULL, n->max_msg, n->name, 0, wl->lanes,
					   NULL, n->model_digest };
	n->wl = wl;
	n->wl_n = wl->lanes;
	if (wl->lanes <= 1)
		return 0;
	for (k = 1; k < wl->lanes; k++) {
		if (tl_lanes_launch(wl->tl_lanes, k, lane_main, &wl->l[k]) != 0)
			break;
		wl->th_on[k] = true;
	}
	uint32_t started = k;
	if (started < wl->lanes) {
		snprintf(wl->l[started].err, sizeof(wl->l[started].err), "worker lane %u: no thread",
			 started);
		atomic_fetch_add_explicit(&wl->failed, wl->lanes - started, memory_order_release);
	}
	/* acquire: partners, the release increments in lane_main. */
	while (atomic_load_explicit(&wl->ready, memory_order_acquire) +
	       atomic_load_explicit(&wl->failed, memory_order_acquire) < wl->lanes - 1) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	if (atomic_load_explicit(&wl->failed, memory_order_acquire) == 0)
		return 0;
	for (k = 1; k < wl->lanes; k++)
		if (wl->l[k].err[0] != '\0') {
			snprintf(err, errlen, "%s", wl->l[k].err);
			break;
		}
	return wl->l[k < wl->lanes ? k : 1].rc ? wl->l[k < wl->lanes ? k : 1].rc : -EAGAIN;
}

void ps_net_wl_stop(struct ps_net *n)
{
	struct ps_net_wl *wl = n->wl;
	uint32_t k;

	if (wl == NULL || wl->owner != n)
		return;
	if (wl->lanes > 1) { /* what each lane carried, for the log (status shows it live) */
		char txt[PS_NET_MAX_LANES * 96];
		size_t off = 0;
		ps_net_wl_status(n, txt, sizeof(txt), &off);
		for (char *line = strtok(txt, "\n"); line != NULL; line = strtok(NULL, "\n"))
			PS_LOG(INFO, "%s: worker %s", n->name, line);
	}
	/* release: partner, the acquire loads of every lane. */
	atomic_store_explicit(&wl->stop, 1, memory_order_release);
	for (k = 1; k < wl->lanes; k++) {
		struct ps_net *m = __atomic_load_n(&wl->l[k].n, __ATOMIC_ACQUIRE);
		if (m != NULL)
			tl_wake(m->tl);
	}
	uint32_t launched = 0;
	for (k = 1; k < wl->lanes; k++)
		launched += wl->th_on[k];
	/*
	 * Every connection reset while the port still sends, so no server waits for a worker
	 * that is gone: the lanes reset theirs, and lane 0 relays their frames (software
	 * steering sends through it) until they are done, then a moment more.
	 */
	abort_all(n);
	/* acquire: partner, the release increments in lane_main. */
	while (atomic_load_explicit(&wl->closed, memory_order_acquire) < launched)
		fz_net_poll(n->fz, 0);
	bool shared = tl_lanes_shared_port(wl->tl_lanes);
	for (uint64_t until = ps_net_now_us() + 2000; shared && ps_net_now_us() < until;)
		fz_net_poll(n->fz, 0);
	if (shared) {
		ps_net_group_wait(&wl->quiet, launched);
		tl_lanes_flush(wl->tl_lanes, 0);
		tl_lanes_port_stop(wl->tl_lanes);
		tl_lanes_flush(wl->tl_lanes, 0); /* frees what waited in our queue, other lanes' too */
		atomic_store_explicit(&wl->stopped, 1, memory_order_release);
	}
	tl_lanes_join(wl->tl_lanes);
	for (k = 1; k < wl->lanes; k++)
		wl->th_on[k] = false;
	owner_drain(n, true);
	n->wl_n = 0;
}

void ps_net_wl_fini(struct ps_net_wl *wl)
{
	if (wl == NULL)
		return;
	for (uint32_t k = 1; k < PS_NET_MAX_LANES; k++) {
		free(wl->l[k].cmd);
		free(wl->l[k].ev);
	}
	tl_lanes_destroy(wl->tl_lanes);
	free(wl);
}
