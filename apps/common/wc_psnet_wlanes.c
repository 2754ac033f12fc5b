/*
 * wc_psnet_wlanes.c — a worker's network lanes: NETWORK_WORKER_CORE_NUMBER transport
 * instances (DPDK lcores sharing the port, or kernel epoll loops), each on a thread of its
 * own and carrying the data connections of the destinations d with d % lanes == its index.
 * Lane 0 is the worker's own node, driven by the thread that runs ps_client (the trainer's,
 * or the library client's network thread); ps_client stays single-threaded.
 *
 * Call chain (lane k > 0):  owner: cli_send -> wn_wl_send -> cmd ring -> [wake]
 *   -> lane thread: wl_cmds -> wn_send_buf -> fz_conn_send (zero copy, the owner's buffer)
 *   -> ... reply -> wn_on_msg -> wn_cli_on_msg -> wn_wl_on_reply (holds the bytes)
 *   -> event ring -> [wake] -> owner: wc_psnet_poll_for -> wn_wl_drain
 *   -> ps_client_on_reply -> RELEASE back over the cmd ring -> lane: tl_msg_release.
 * Two single-producer/single-consumer rings per lane (rte_rings on our own memory): owner to
 * lane (SEND, RELEASE, OPEN, CLOSE) and lane to owner (SENT, REPLY, UP, FAIL, LOST), in
 * order, so a connection's replies never overtake its UP or its LOST. The owner never touches
 * a lane's connections; it knows each by an id and a state (struct wn_ldst). What the rings
 * can hold bounds what is in flight: a send per pooled buffer (WN_POOL_MAX), a reply per
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

#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "apps/common/wc_psnet_pvt.h"
#include "dpdk_net/dn.h"

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
	void *p;                /* SEND, SENT: a wn_buf; REPLY, RELEASE: a record */
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

struct wn_wl_lane {
	struct wn_wl *wl;
	uint32_t k;
	struct wc_psnet *n;          /* release-stored once built */
	struct dn_lcore *lc;
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

struct wn_wl {
	struct wc_psnet *owner;
	const struct wc_cluster *cl;
	struct wc_psnet_params np;
	uint32_t lanes;
	struct dn_port *port;
	struct dn_lcore *lc0;
	cpu_set_t cpus;
	pthread_t th[WN_MAX_LANES];
	bool th_on[WN_MAX_LANES];
	_Atomic uint32_t ready, failed, closed, quiet;
	_Atomic int stop, stopped;
	uint32_t next_id;
	struct wn_wl_lane l[WN_MAX_LANES];
	struct wn_ldst ld[WN_MAX_DST];
};

uint32_t wn_wl_wanted(const struct wc_cluster *cl)
{
	uint32_t k = cl->worker_net.core_number ? cl->worker_net.core_number : 1;

	return k > WN_MAX_LANES ? WN_MAX_LANES : k;
}

struct wn_ldst *wn_wl_dst(const struct wc_psnet *n, uint32_t d)
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

static struct wn_wl_lane *lane_of_node(const struct wc_psnet *n)
{
	return n->wlane;
}

static void lane_event(struct wn_wl_lane *L, const struct wl_ev *ev)
{
	ring_put(L->ev, *ev, L->wl->owner->tl);
	L->pushed = true;
}

void wn_wl_buf_done(struct wn_buf *b)
{
	struct wn_wl *wl = b->n->wl;
	struct wl_ev ev = { .kind = WL_SENT, .p = b };

	lane_event(&wl->l[b->lane], &ev);
}

void wn_wl_on_conn(struct wn_conn *c, bool up, int reason)
{
	struct wn_wl_lane *L = lane_of_node(c->n);
	struct wl_ev ev = { .kind = up ? WL_UP : WL_LOST, .dest = c->dest, .id = c->oid,
			    .arg = reason };

	lane_event(L, &ev);
}

void wn_wl_on_reply(struct wn_conn *c, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier)
{
	struct wn_wl_lane *L = lane_of_node(c->n);
	struct wl_rec *r = L->free_rec;
	struct wl_ev ev = { .kind = WL_REPLY, .dest = c->dest, .id = c->oid };

	if (r != NULL && r->cap >= m->iovcnt) {
		L->free_rec = r->next;
	} else {
		uint32_t cap = m->iovcnt > WL_REC_IOV ? m->iovcnt : WL_REC_IOV;
		r = malloc(sizeof(*r) + (size_t)cap * sizeof(r->iov[0]));
		if (r == NULL) {
			/* The request goes unanswered: its connection closes and is resent. */
			WC_LOG(ERR, "%s: lane %u: no memory to hold a reply: closing the connection "
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

static void rec_release(struct wn_wl_lane *L, struct wl_rec *r)
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
static void lane_drop(struct wn_conn *c)
{
	if (c->fc != NULL) {
		fz_conn_set_ctx(c->fc, NULL);
		fz_conn_close(c->fc);
	}
	wn_conn_free(c);
}

static void lane_open(struct wn_wl_lane *L, const struct wl_ev *e)
{
	struct wc_psnet *n = L->n;
	struct wl_ev ev = { .kind = WL_FAIL, .dest = e->dest, .id = e->id };
	struct wn_conn *c;
	int rc;

	if (n->dst[e->dest] != NULL)
		lane_drop(n->dst[e->dest]);
	if ((c = wn_conn_new(n, WN_TO_SERVER)) == NULL) {
		ev.arg = -ENOMEM;
		lane_event(L, &ev);
		return;
	}
	c->server = e->server;
	c->lane = e->slane;
	c->dest = e->dest;
	c->oid = e->id;
	rc = fz_net_connect(n->fz, e->ip, (uint16_t)e->arg, &n->fzc, &wn_conn_ops, c, &c->fc);
	if (rc != 0) {
		wn_conn_free(c);
		ev.arg = rc;
		lane_event(L, &ev);
		return;
	}
	n->dst[e->dest] = c;
}

static void lane_send(struct wn_wl_lane *L, const struct wl_ev *e, bool stopping)
{
	struct wn_conn *c = L->n->dst[e->dest];
	struct wn_buf *b = e->p;
	struct tl_msg_hdr h;

	if (!stopping && c != NULL && c->up == 1 && c->oid == e->id &&
	    tl_msg_hdr_decode(b->data, UINT32_MAX, &h) == 0 && wn_send_buf(c, b, &h, true) == 0) {
		c->reqs++;
		return;
	}
	/* Not sent (its connection went meanwhile): back to the owner, whose client resends. */
	wn_wl_buf_done(b);
}

/* The owner's commands; how many there were. */
static uint32_t lane_cmds(struct wn_wl_lane *L, bool stopping)
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
				struct wn_conn *c = L->n->dst[ev[i].dest];
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
static void lane_publish(struct wn_wl_lane *L)
{
	struct wc_psnet *n = L->n;
	uint64_t now = wn_now_us();
	struct fz_conn_stats st;
	uint32_t seq;

	atomic_store_explicit(&n->pub.polls,
			      atomic_load_explicit(&n->pub.polls, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (now < L->next_fz_us)
		return;
	L->next_fz_us = now + 20000;
	atomic_store_explicit(&n->pub.cpu, sched_getcpu(), memory_order_relaxed);
	wc_psnet_fuse_stats(n, &st);
	seq = atomic_load_explicit(&L->fz_seq, memory_order_relaxed);
	atomic_store_explicit(&L->fz_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	L->fz = st;
	/* release: partner, the acquire loads in wn_wl_fuse_add. */
	atomic_store_explicit(&L->fz_seq, seq + 2, memory_order_release);
}

static void lane_loop(struct wn_wl_lane *L)
{
	struct wn_wl *wl = L->wl;
	struct wc_psnet *n = L->n;

	/* acquire: partner, the release store in wn_wl_stop; what the owner sent before is ours. */
	while (!atomic_load_explicit(&wl->stop, memory_order_acquire)) {
		uint32_t got = lane_cmds(L, false);
		wc_psnet_poll_for(n, got == 0);
		if (L->pushed) {
			L->pushed = false;
			if (!n->polling) /* a polling owner sees the ring without it */
				tl_wake(wl->owner->tl);
		}
		lane_publish(L);
	}
}

/* Resets every data connection of n (its closed callbacks run). */
static void abort_all(struct wc_psnet *n)
{
	struct wn_conn *c, *next;

	for (c = n->conns; c != NULL; c = next) {
		next = c->next;
		if (c->kind == WN_TO_SERVER && c->fc != NULL)
			tl_abort(fz_conn_tl(c->fc));
	}
}

static int lane_main(void *arg)
{
	struct wn_wl_lane *L = arg;
	struct wn_wl *wl = L->wl;
	struct wc_psnet_params np = wl->np;
	struct wc_psnet *n = NULL;
	struct timespec ts = { 0, 100000 };
	struct wl_rec *r;
	int rc = 0;

	wn_lane_affinity(wl->cl, wl->cl->worker_net.disable_pin_cores, &wl->cpus, L->k);
	if (wl->port != NULL) {
		rc = dn_lcore_create(wl->port, (uint16_t)L->k, NULL, &L->lc);
		if (rc != 0)
			wn_errf(L->err, sizeof(L->err), rc, "worker lane %u: dpdk lcore: %s", L->k,
				strerror(-rc));
		else
			dn_obs_register(L->lc);
	}
	if (rc == 0) {
		np.lane = L->k;
		np.lanes = wl->lanes;
		np.backend_arg = L->lc;
		rc = wc_psnet_create(&np, &n, L->err, sizeof(L->err));
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
			wc_psnet_poll_for(n, false);
		if (L->lc != NULL)
			dn_tx_flush(L->lc);
		atomic_fetch_add_explicit(&wl->closed, 1, memory_order_release);
	} else {
		L->rc = rc;
		atomic_fetch_add_explicit(&wl->failed, 1, memory_order_release);
		atomic_fetch_add_explicit(&wl->closed, 1, memory_order_release);
		/* acquire: partner, the release store in wn_wl_stop. */
		while (!atomic_load_explicit(&wl->stop, memory_order_acquire))
			nanosleep(&ts, NULL);
	}
	if (wl->port != NULL) {
		if (L->lc != NULL)
			dn_tx_flush(L->lc);
		atomic_fetch_add_explicit(&wl->quiet, 1, memory_order_release);
		/* acquire: partner, the release store once the owner stopped the port. */
		while (!atomic_load_explicit(&wl->stopped, memory_order_acquire))
			nanosleep(&ts, NULL);
	}
	wc_psnet_destroy(n); /* its connections' last completions go to the owner */
	dn_lcore_destroy(L->lc);
	L->lc = NULL;
	while ((r = L->free_rec) != NULL) {
		L->free_rec = r->next;
		free(r);
	}
	return 0;
}

static void *lane_thread(void *arg)
{
	lane_main(arg);
	return NULL;
}

/* ---- owner side ------------------------------------------------------------------------ */

static void owner_cmd(struct wc_psnet *n, uint32_t lane, const struct wl_ev *ev)
{
	struct wn_wl_lane *L = &n->wl->l[lane];

	ring_put(L->cmd, *ev, L->n->tl);
	L->kick = true;
}

void wn_wl_kick(struct wc_psnet *n)
{
	for (uint32_t k = 1; k < n->wl_n; k++) {
		struct wn_wl_lane *L = &n->wl->l[k];
		if (L->kick) {
			L->kick = false;
			if (!n->polling) /* a polling lane sees the ring without it */
				tl_wake(L->n->tl);
		}
	}
}

int wn_wl_send(struct wc_psnet *n, uint32_t d, struct wn_buf *b)
{
	struct wn_ldst *s = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_SEND, .dest = d, .id = s->id, .p = b };

	if (s->st != WN_DST_UP)
		return -ENOTCONN;
	b->lane = (uint8_t)wn_wl_lane_of(n, d);
	owner_cmd(n, b->lane, &ev);
	n->wl->l[b->lane].sent++;
	return 0;
}

int wn_wl_open(struct wc_psnet *n, uint32_t d, uint32_t s, uint32_t sl, uint32_t ip,
	       uint16_t port)
{
	struct wn_ldst *st = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_OPEN, .slane = (uint16_t)sl, .dest = d, .arg = port,
			    .ip = ip, .server = s };

	wn_wl_close(n, d);
	if (++n->wl->next_id == 0)
		n->wl->next_id = 1;
	*st = (struct wn_ldst){ .id = n->wl->next_id, .server = s, .lane = sl,
				.st = WN_DST_CONNECTING };
	ev.id = st->id;
	owner_cmd(n, wn_wl_lane_of(n, d), &ev);
	wn_wl_kick(n);
	return 0;
}

void wn_wl_close(struct wc_psnet *n, uint32_t d)
{
	struct wn_ldst *st = &n->wl->ld[d];
	struct wl_ev ev = { .kind = WL_CLOSE, .dest = d, .id = st->id };

	if (st->st == WN_DST_NONE)
		return;
	if (st->st == WN_DST_UP && n->pc != NULL && n->layout_set)
		ps_client_forget_dest(n->pc, d, -ECONNRESET);
	owner_cmd(n, wn_wl_lane_of(n, d), &ev);
	st->st = WN_DST_NONE;
	st->id = 0;
}

/* One event from a lane. final: the lanes are gone; only buffers come back. */
static void owner_event(struct wc_psnet *n, uint32_t k, const struct wl_ev *e, bool final)
{
	struct wn_ldst *st = &n->wl->ld[e->dest];
	struct wn_buf *b;

	if (e->kind == WL_SENT) {
		b = e->p;
		b->sends--;
		if (b->sends == 0)
			b->lane = 0;
		wn_buf_unref(b);
		return;
	}
	if (final)
		return;
	switch (e->kind) {
	case WL_REPLY: {
		struct wl_rec *r = e->p;
		struct wl_ev rel = { .kind = WL_RELEASE, .p = r };
		if (st->id == e->id && st->st == WN_DST_UP) {
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
		if (st->id == e->id && st->st == WN_DST_CONNECTING)
			st->st = WN_DST_UP;
		break;
	case WL_FAIL:
	case WL_LOST:
		if (st->id != e->id || (st->st != WN_DST_CONNECTING && st->st != WN_DST_UP))
			break;
		if (st->st == WN_DST_UP && n->pc != NULL && n->layout_set)
			ps_client_forget_dest(n->pc, e->dest, -ECONNRESET);
		st->st = WN_DST_FAILED;
		st->reason = e->arg ? e->arg : -ECONNRESET;
		break;
	default:
		break;
	}
}

static void owner_drain(struct wc_psnet *n, bool final)
{
	struct wl_ev ev[WL_BURST];
	uint32_t k, got, i;

	for (k = 1; k < n->wl_n; k++) {
		struct wn_wl_lane *L = &n->wl->l[k];
		while ((got = rte_ring_sc_dequeue_burst_elem(L->ev, ev, sizeof(ev[0]), WL_BURST,
							     NULL)) > 0)
			for (i = 0; i < got; i++)
				owner_event(n, k, &ev[i], final);
	}
}

void wn_wl_drain(struct wc_psnet *n)
{
	owner_drain(n, false);
	wn_wl_kick(n); /* the releases it queued */
}

void wn_wl_status(const struct wc_psnet *n, char *out, size_t len, size_t *off)
{
	/* Lane 0 carried what the node counted and the other lanes did not. */
	uint64_t sent0 = n->cst.requests, replies0 = n->cst.replies;

	for (uint32_t k = 1; k < n->wl_n; k++) {
		sent0 -= n->wl->l[k].sent;
		replies0 -= n->wl->l[k].replies;
	}
	for (uint32_t k = 0; k < n->wl_n && *off < len; k++) {
		const struct wn_wl_lane *L = &n->wl->l[k];
		const struct wc_psnet *m = k == 0 ? n : __atomic_load_n(&L->n, __ATOMIC_ACQUIRE);
		if (m == NULL)
			continue;
		*off += (size_t)snprintf(out + *off, len - *off, "wlane  %u  requests %" PRIu64
			"  replies %" PRIu64 "  cpu %d %s\n", k, k == 0 ? sent0 : L->sent,
			k == 0 ? replies0 : L->replies,
			k == 0 ? sched_getcpu() : atomic_load_explicit(&m->pub.cpu, memory_order_relaxed),
			n->cl->worker_net.disable_pin_cores ? "floating" : "pinned");
	}
}

void wn_wl_fuse_add(const struct wc_psnet *n, struct fz_conn_stats *out)
{
	for (uint32_t k = 1; k < n->wl_n; k++) {
		struct wn_wl_lane *L = &n->wl->l[k];
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

int wn_wl_prepare(struct wc_psnet_params *np, uint32_t *lanes, struct wn_wl **out, char *err,
		  size_t errlen)
{
	const struct wc_cluster *cl = np->cl;
	struct wn_wl *wl = calloc(1, sizeof(*wl));
	int rc;

	if (wl == NULL)
		return wn_errf(err, errlen, -ENOMEM, "out of memory");
	wl->cl = cl;
	if (cl->protocol != WC_PROTO_KERNEL) {
		rc = wn_lanes_port(cl, np, "NETWORK_WORKER_CORE_NUMBER", lanes, &wl->port, err,
				   errlen);
		if (rc != 0) {
			free(wl);
			return rc;
		}
		if ((rc = dn_lcore_create(wl->port, 0, NULL, &wl->lc0)) != 0) {
			wn_errf(err, errlen, rc, "worker lane 0: dpdk lcore: %s", strerror(-rc));
			wn_wl_fini(wl);
			return rc;
		}
		dn_obs_register(wl->lc0);
		dn_arp_announce(wl->lc0);
		np->backend_arg = wl->lc0;
	}
	wl->lanes = *lanes;
	wn_lanes_cpus(wl->port, &wl->cpus);
	for (uint32_t k = 1; k < wl->lanes; k++) {
		wl->l[k].wl = wl;
		wl->l[k].k = k;
		if ((wl->l[k].cmd = ring_new()) == NULL || (wl->l[k].ev = ring_new()) == NULL) {
			wn_wl_fini(wl);
			return wn_errf(err, errlen, -ENOMEM, "out of memory");
		}
	}
	np->lanes = *lanes;
	*out = wl;
	return 0;
}

int wn_wl_start(struct wn_wl *wl, struct wc_psnet *n, char *err, size_t errlen)
{
	uint32_t k, started = 1;
	unsigned lcore;

	wl->owner = n;
	wl->np = (struct wc_psnet_params){ n->cl, 0, NULL, n->max_msg, n->name, 0, wl->lanes,
					   NULL, n->model_digest };
	n->wl = wl;
	n->wl_n = wl->lanes;
	if (wl->lanes <= 1)
		return 0;
	if (wl->port != NULL) {
		k = 1;
		RTE_LCORE_FOREACH_WORKER(lcore) {
			if (k >= wl->lanes)
				break;
			if (rte_eal_remote_launch(lane_main, &wl->l[k], lcore) != 0)
				break;
			wl->th_on[k++] = true;
		}
		started = k;
	} else {
		for (k = 1; k < wl->lanes; k++) {
			if (pthread_create(&wl->th[k], NULL, lane_thread, &wl->l[k]) != 0)
				break;
			wl->th_on[k] = true;
		}
		started = k;
	}
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

void wn_wl_stop(struct wc_psnet *n)
{
	struct wn_wl *wl = n->wl;
	uint32_t k;

	if (wl == NULL || wl->owner != n)
		return;
	if (wl->lanes > 1) { /* what each lane carried, for the log (status shows it live) */
		char txt[WN_MAX_LANES * 96];
		size_t off = 0;
		wn_wl_status(n, txt, sizeof(txt), &off);
		for (char *line = strtok(txt, "\n"); line != NULL; line = strtok(NULL, "\n"))
			WC_LOG(INFO, "%s: worker %s", n->name, line);
	}
	/* release: partner, the acquire loads of every lane. */
	atomic_store_explicit(&wl->stop, 1, memory_order_release);
	for (k = 1; k < wl->lanes; k++) {
		struct wc_psnet *m = __atomic_load_n(&wl->l[k].n, __ATOMIC_ACQUIRE);
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
	for (uint64_t until = wn_now_us() + 2000; wl->port != NULL && wn_now_us() < until;)
		fz_net_poll(n->fz, 0);
	if (wl->port != NULL) {
		wn_group_wait(&wl->quiet, launched);
		dn_tx_flush(wl->lc0);
		dn_port_stop(wl->port);
		dn_tx_flush(wl->lc0); /* frees what waited in our queue, other lanes' frames too */
		atomic_store_explicit(&wl->stopped, 1, memory_order_release);
		rte_eal_mp_wait_lcore();
	} else {
		for (k = 1; k < wl->lanes; k++)
			if (wl->th_on[k])
				pthread_join(wl->th[k], NULL);
	}
	for (k = 1; k < wl->lanes; k++)
		wl->th_on[k] = false;
	owner_drain(n, true);
	n->wl_n = 0;
}

void wn_wl_fini(struct wn_wl *wl)
{
	if (wl == NULL)
		return;
	for (uint32_t k = 1; k < WN_MAX_LANES; k++) {
		free(wl->l[k].cmd);
		free(wl->l[k].ev);
	}
	dn_lcore_destroy(wl->lc0);
	if (wl->port != NULL) {
		dn_port_destroy(wl->port);
		dn_eal_fini();
	}
	free(wl);
}
