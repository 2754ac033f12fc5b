/*
 * tl_pvt.h — transport internals shared by tl_api.c (backend-neutral), tl_frame.c
 * (message reassembly) and the backends (tl_be_kernel.c, tl_be_dpdk.c).
 *
 * The backend seam, after Redis' ae_epoll.c / ae_kqueue.c: every backend fills one
 * struct tl_backend_ops with the same operations, and tl_api.c picks one by
 * cfg->protocol from tl_backends[] (see tl_api.c; a new backend adds its line there).
 * Everything above the seam (connections, send queues, limits, framing, callbacks,
 * deferred close) is written once in tl_api.c and tl_frame.c.
 *
 * What a backend (the DPDK one included) must provide — struct tl_backend_ops:
 *   conn_priv, listener_priv  bytes of backend state behind each struct tl_conn /
 *                    struct tl_listener (tl_conn_priv / tl_listener_priv reach them).
 *   init / fini      per-instance state in tl->be (dpdk: bind to cfg.backend_arg, the
 *                    dn_lcore; register the L4 input and poll hooks).
 *   listen/unlisten  open/close a passive endpoint; listen sets l->port to the real port.
 *   connect          start an active open of c; later call tl_up_connected(c, status).
 *   flush            move c->txq's bytes toward the wire, starting at each tx's off;
 *                    call tl_up_tx_done(c, tx, 0) when the backend no longer needs a tx's
 *                    memory (kernel: written; dpdk: ACKed — ext-buf mbufs released).
 *                    Called from tl_poll for connections on tl->dirty, and from
 *                    tl_conn_push (inside an application call: tl_up_tx_done then
 *                    only defers). It must not complete a tx before all its bytes are
 *                    out of caller memory.
 *   shutdown         close the endpoint of c now (no callbacks, no more events for c);
 *                    called once, when c starts closing: gracefully (c->graceful: a FIN
 *                    after what is already being sent, without c's memory) or not (a
 *                    reset). Pending txs stay on c->txq: tl_api.c cancels them
 *                    afterwards. Release c's receive buffers.
 *   poll             wait up to timeout_us for events and handle them (dpdk: one run
 *                    loop iteration, rx burst -> TCP-lite -> tl_up_input). Return the
 *                    number handled or -errno.
 *   rx_pause         stop taking c's bytes from the peer while c->rx_paused, resume after
 *                    (kernel: EPOLLIN off; dpdk: delivered bytes no longer reopen the
 *                    window). Bytes already taken are still handed to tl_up_input.
 * And calls back into tl_api.c with:
 *   tl_up_new + tl_up_accepted   for a passive open (after the handshake),
 *   tl_up_connected                outcome of an active open,
 *   tl_up_input                    in-order stream bytes with a chunk reference
 *                                    (its hold/release are the backend's chunk ops,
 *                                    given to tl_fr_pool at init via tl->chunk_ops),
 *   tl_up_eof                      orderly end of the peer's stream,
 *   tl_up_fail                     anything fatal (reset, retransmission limit).
 * Rules: none of these callbacks may run inside an application call (tl_send, tl_close,
 * tl_connect, tl_listen); after tl_up_input returns < 0 the connection is closing and
 * the backend must stop touching its endpoint.
 */
#ifndef WHARF_TL_PVT_H
#define WHARF_TL_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpdk_net/dn_log.h"
#include "transport/tl.h"

/* transport's log type, "wharf.tl" (tl_api.c). */
extern int tl_logtype;
#define TL_LOG(lvl, ...) WLOG(tl_logtype, lvl, __VA_ARGS__)

#define tl_container_of(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ---- intrusive circular doubly linked list ----------------------------------------- */
struct tl_link {
	struct tl_link *prev, *next;
};

static inline void tl_list_init(struct tl_link *h) { h->prev = h->next = h; }
static inline bool tl_list_empty(const struct tl_link *h) { return h->next == h; }
static inline bool tl_linked(const struct tl_link *e) { return e->next != NULL && e->next != e; }
static inline void tl_list_add_tail(struct tl_link *h, struct tl_link *e)
{
	e->prev = h->prev;
	e->next = h;
	h->prev->next = e;
	h->prev = e;
}
static inline void tl_list_del(struct tl_link *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

/* ---- framing (tl_frame.c) ----------------------------------------------------------- */

/*
 * A chunk of the in-order byte stream is (pointer, length, ref). The framer never
 * copies body bytes: a message refers to the chunks it lies in and holds each ref
 * once per run of its views in that chunk until the message is released. hold/release
 * come from the backend (kernel: receive buffer refcount; dpdk: mbuf refcount).
 */
struct tl_chunk_ops {
	void (*hold)(void *ref);
	void (*release)(void *ref);
};

/* A message record: view first so a view pointer leads back to its record. */
struct tl_msg {
	struct tl_msg_view view;
	struct tl_fr_pool *pool;
	struct tl_msg *next;   /* free list */
	struct tl_msg *all;    /* every record of the pool, for destroy */
	struct tl_iov *seg;    /* capacity cap; view.iov points here */
	void **ref;            /* ref[i]: seg[i]'s chunk, held by the first seg of a run of
				* segs in it once that seg is below nheld */
	uint32_t cap;
	uint32_t nheld;        /* leading segs whose chunk references are held */
	uint32_t users;        /* framer during delivery + holds */
};

/* Records for one instance: allocated on first need up to max, then recycled. */
struct tl_fr_pool {
	const struct tl_chunk_ops *ops;
	struct tl_msg *free;
	struct tl_msg *all;
	uint32_t total, max, in_use;
};

int tl_fr_pool_create(const struct tl_chunk_ops *ops, uint32_t max_msgs, struct tl_fr_pool **out);
/* Frees every record, held or not (their refs are released first). NULL is a no-op. */
void tl_fr_pool_destroy(struct tl_fr_pool *p);

/* What the framer reports. Both return 0 to go on or -errno to stop tl_fr_push. */
struct tl_fr_sink {
	int (*msg)(void *arg, const struct tl_msg_view *v);
	/* unknown version or transport type: the body is skipped, the stream goes on */
	int (*reject)(void *arg, const struct tl_msg_hdr *h, int err);
};

/* Reassembly state of one stream; caller storage (embedded in the connection). */
struct tl_framer {
	struct tl_fr_pool *pool;
	uint32_t max_body, max_segs;
	uint32_t hlen;          /* header bytes collected in hbuf */
	uint32_t remain;        /* body bytes still missing from cur */
	uint64_t skip;          /* body bytes of a rejected message still to discard */
	struct tl_msg *cur;     /* message being assembled, or NULL */
	int dead;               /* 0, or the -errno the stream was refused with */
	const char *why;        /* human text of dead */
	uint8_t hbuf[TL_MSG_HDR_LEN];
};

void tl_fr_init(struct tl_framer *f, struct tl_fr_pool *pool, uint32_t max_body, uint32_t max_segs);
/* Drops a partly assembled message (its refs released). */
void tl_fr_fini(struct tl_framer *f);
/*
 * Feeds len in-order stream bytes at p, lying in chunk ref. The caller keeps its own
 * reference: the framer takes holds for what it keeps. Returns 0 when all was consumed,
 * the sink's -errno when it stopped, or (stream refused, f->dead set, f->why says why)
 * -EBADMSG bad magic or type 0, -EMSGSIZE body above max_body, -ENOBUFS no record left
 * (max_held_msgs) or -E2BIG a message spanning more than max_segs chunks.
 */
int tl_fr_push(struct tl_framer *f, const uint8_t *p, uint32_t len, void *ref,
	       const struct tl_fr_sink *sink, void *arg);
/* True between messages: a peer closing here closed cleanly. */
static inline bool tl_fr_at_boundary(const struct tl_framer *f)
{
	return f->hlen == 0 && f->cur == NULL && f->skip == 0;
}

/* ---- connections, sends, listeners ------------------------------------------------- */

#define TL_TX_IOV_INLINE 8u

/* One queued send. iov[0] is the encoded header, then the body pieces. */
struct tl_tx {
	struct tl_link link;        /* on conn->txq, or the instance's free list */
	struct tl_iov *iov;         /* iov_inl, or a grown array kept across reuse */
	uint32_t iovcnt, iovcap;
	uint64_t len;               /* header + body bytes */
	uint64_t off;               /* bytes the backend has taken from memory */
	tl_send_done_fn done;
	void *arg;
	int status;                 /* on conn->txdone: what done will be told */
	uint8_t hdr[TL_MSG_HDR_LEN];
	uint8_t inl[TL_SEND_COPY_MAX]; /* the body of tl_send_copy (error replies too) */
	struct tl_iov iov_inl[TL_TX_IOV_INLINE];
};

enum tl_conn_state { TL_CS_CONNECTING, TL_CS_OPEN, TL_CS_CLOSING };

struct tl_conn {
	struct tl *tl;
	struct tl_link link;        /* tl->conns while alive, tl->zombies while closing */
	struct tl_link dirty;       /* on tl->dirty while txq has bytes to flush */
	const struct tl_conn_ops *ops;
	void *ctx;
	enum tl_conn_state state;
	bool established;           /* closed (not connected) is owed at the end */
	bool graceful;              /* closing: tl_close or the peer's end of stream */
	bool abort;                 /* closing: tl_abort (the backend resets) */
	bool rx_paused;             /* tl_conn_rx_pause: the backend takes no more bytes */
	int reason;
	const char *why;
	struct tl_link txq;
	struct tl_link txdone;      /* finished inside tl_conn_push: completed at the next round */
	uint32_t tx_msgs;
	uint64_t tx_bytes;
	struct tl_framer fr;
	max_align_t priv[];         /* backend's conn_priv bytes */
};

struct tl_listener {
	struct tl *tl;
	struct tl_link link;
	const struct tl_conn_ops *ops;
	tl_accept_fn accepted;
	void *ctx;
	uint16_t port;
	bool closing;
	max_align_t priv[];
};

static inline void *tl_conn_priv(struct tl_conn *c) { return c->priv; }
static inline void *tl_listener_priv(struct tl_listener *l) { return l->priv; }
static inline struct tl_conn *tl_conn_of_priv(void *p)
{
	return tl_container_of(p, struct tl_conn, priv);
}
static inline struct tl_listener *tl_listener_of_priv(void *p)
{
	return tl_container_of(p, struct tl_listener, priv);
}

struct tl_backend_ops {
	const char *name;
	size_t conn_priv, listener_priv;
	int (*init)(struct tl *tl);
	void (*fini)(struct tl *tl);
	int (*listen)(struct tl_listener *l, uint32_t ip, uint16_t port);
	void (*unlisten)(struct tl_listener *l);
	int (*connect)(struct tl_conn *c, uint32_t ip, uint16_t port);
	void (*flush)(struct tl_conn *c);
	void (*shutdown)(struct tl_conn *c);
	int (*poll)(struct tl *tl, int64_t timeout_us);
	/*
	 * Optional: hands frames the flushes queued in the backend to the device now (dpdk:
	 * the lcore's software Tx queue), for tl_conn_push and at the end of every tl_poll
	 * round. NULL: flush already writes.
	 */
	void (*kick)(struct tl *tl);
	/* Optional: tl_wake, from any thread. NULL: the instance never sleeps long. */
	void (*wake)(struct tl *tl);
	/* Stop or resume reading c (c->rx_paused already says which); c is open. */
	void (*rx_pause)(struct tl_conn *c);
	/*
	 * Optional: copies a small message (header h but body_len, the sum of iov) straight
	 * into the backend's send buffer, for tl_send_copy when nothing is queued ahead of it
	 * on c. 0: taken (marked dirty by the caller); else not, and the caller queues it as
	 * usual. Never transmits from inside the call.
	 */
	int (*send_copy)(struct tl_conn *c, const struct tl_msg_hdr *h, uint32_t body_len,
			 const struct tl_iov *iov, uint32_t iovcnt);
	/* Optional: memory the backend sends without copying (NULL: the C heap is fine). */
	void *(*buf_alloc)(struct tl *tl, size_t size);
	void (*buf_free)(struct tl *tl, void *p);
	/* Optional: tl_rss_layout (NULL: -ENOTSUP). */
	int (*rss_layout)(struct tl *tl, uint32_t *reta_size, uint16_t *queues, uint16_t *queue);
};

/*
 * TCP-lite counters through DPDK telemetry (tl_obs.c): an instance claims a slot, its
 * lcore publishes a snapshot at most every 100 ms, the /wharf/tl/... commands read it.
 */
struct tl_obs;
struct tl_tcp_stack;
struct tl_tcp_conn;
int tl_obs_create(struct tl *tl, struct tl_tcp_stack *stack,
		  struct tl_tcp_conn *(*conn_tcp)(struct tl_conn *c), struct tl_obs **out);
void tl_obs_publish(struct tl_obs *o, uint64_t now_tsc);
void tl_obs_destroy(struct tl_obs *o);

extern const struct tl_backend_ops tl_be_kernel_ops;
extern const struct tl_backend_ops tl_be_dpdk_ops;

struct tl {
	struct tl_config cfg;
	const struct tl_backend_ops *be_ops;
	void *be;                   /* backend instance state */
	const struct tl_chunk_ops *chunk_ops; /* set by be_ops->init */
	struct tl_fr_pool *msgs;
	struct tl_link conns, zombies, dirty, listeners, dead_listeners;
	bool destroying;            /* tl_destroy: closes need not be graceful */
	struct tl_link tx_free;
	uint32_t nconns;
	bool in_poll;               /* inside tl_poll (callbacks included): tl_conn_push waits */
	bool pushing;               /* inside tl_conn_push: tl_up_tx_done defers to txdone */
	uint64_t tx_done_runs;      /* send completions run: a round that ran some does not sleep */
	struct tl_stats st;
	struct tl_peer_rss *peer_rss; /* tl_peer_rss entries (allocated at the first) */
	uint8_t peer_rss_key[40];     /* dn's RSS key, the peers' (filled with the entries) */
	void (*round_end)(void *arg); /* tl_on_round_end */
	void *round_end_arg;
	uint32_t n_peer_rss;
};

struct tl_peer_rss {
	uint32_t ip, reta_size;
	uint16_t port, queues, queue;
};
/* The tl_peer_rss entry for ip:port, or NULL. */
const struct tl_peer_rss *tl_peer_rss_find(const struct tl *tl, uint32_t ip, uint16_t port);
/* Whether the peer's RSS puts the segments laddr:lport -> pr's ip:port on its queue pr->queue. */
bool tl_peer_rss_lands(const struct tl *tl, const struct tl_peer_rss *pr, uint32_t laddr,
		       uint16_t lport);

/* Puts c on its instance's flush list (once): its queue or its backend has bytes to send. */
static inline void tl_conn_mark_dirty(struct tl_conn *c)
{
	if (!tl_linked(&c->dirty))
		tl_list_add_tail(&c->tl->dirty, &c->dirty);
}

/* Backend -> neutral calls (tl_api.c). */
struct tl_conn *tl_up_new(struct tl *tl, const struct tl_conn_ops *ops, void *ctx);
/* Frees a tl_up_new connection the backend could not set up: no callbacks run. */
void tl_up_drop(struct tl_conn *c);
void tl_up_accepted(struct tl_listener *l, struct tl_conn *c);
void tl_up_connected(struct tl_conn *c, int status);
int tl_up_input(struct tl_conn *c, const uint8_t *p, uint32_t len, void *ref);
void tl_up_eof(struct tl_conn *c);
void tl_up_fail(struct tl_conn *c, int reason, const char *why);
/* Unlinks tx from c->txq, runs its done, recycles it (inside tl_conn_push: moves it to
 * c->txdone, for the next tl_poll to complete). */
void tl_up_tx_done(struct tl_conn *c, struct tl_tx *tx, int status);

#endif /* WHARF_TL_PVT_H */
