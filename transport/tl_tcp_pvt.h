/*
 * tl_tcp_pvt.h — TCP-lite internals shared by tl_conn.c (tables, API), tl_in.c (input),
 * tl_out.c (output), tl_timer.c (wheel and timeouts) and tl_cc.c (RTT and congestion
 * control). Nothing outside transport/ includes this.
 */
#ifndef WHARF_TL_TCP_PVT_H
#define WHARF_TL_TCP_PVT_H

#include "tl_tcp.h"

#define TL_SEQ_LT(a, b)  ((int32_t)((uint32_t)(a) - (uint32_t)(b)) < 0)
#define TL_SEQ_LEQ(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) <= 0)
#define TL_SEQ_GT(a, b)  TL_SEQ_LT(b, a)
#define TL_SEQ_GEQ(a, b) TL_SEQ_LEQ(b, a)

#define TL_NO_IDX UINT32_MAX
#define TL_MAX_WSCALE 14u

/* ---- timer wheel (tl_timer.c) --------------------------------------------- */

/* Intrusive entry: a connection embeds one and re-arms it for its earliest deadline. */
struct tl_tw_entry {
	struct tl_tw_entry *next, **pprev; /* pprev NULL: not armed */
	uint64_t deadline;
};

/*
 * Hashed wheel: slot = deadline tick mod nslots. Entries further out than one
 * revolution sit in their slot and are skipped until their deadline has passed, so
 * arming is O(1) and firing costs one look per entry per revolution.
 */
struct tl_tw {
	struct tl_tw_entry **slots;
	uint32_t nslots;       /* power of two */
	uint64_t tick_ns;
	uint64_t cur_tick;     /* every slot before this tick has been run */
	uint32_t armed;
};

int tl_tw_init(struct tl_tw *tw, uint64_t tick_ns, uint32_t nslots, uint64_t now);
void tl_tw_fini(struct tl_tw *tw);
void tl_tw_arm(struct tl_tw *tw, struct tl_tw_entry *e, uint64_t deadline);
void tl_tw_cancel(struct tl_tw *tw, struct tl_tw_entry *e);
/* Calls fire(arg, e) for every entry with deadline <= now (entry already disarmed). */
void tl_tw_expire(struct tl_tw *tw, uint64_t now, void (*fire)(void *arg, struct tl_tw_entry *e),
		  void *arg);

/* ---- send buffers ----------------------------------------------------------- */

struct tl_tcp_sbuf {
	struct tl_tcp_sbuf *next;      /* send queue order, or free list */
	struct tl_tcp_stack *stack;
	const uint8_t *base;
	uint32_t len;
	uint32_t refs;                 /* 1 for the send queue + backend holds */
	int status;                    /* handed to done once refs reaches 0 */
	void (*done)(void *arg, int status);
	void *done_arg;
};

/* ---- out-of-order queue entry (tl_ooo.c) ------------------------------------------ */

#define TL_OOO_NIL UINT32_MAX          /* no entry */

/* A node of a connection's out-of-order queue, a slot of its slice of the pool. */
struct tl_ooo {
	uint32_t seq, len;
	uint32_t charge;               /* bytes counted against ooo_mem / rcv_buf */
	uint32_t prev, next;           /* neighbours by seq (next: the free list's link) */
	uint32_t sprev, snext;         /* ring of the entries sharing pkt's one reference */
	bool fin;
	const uint8_t *data;
	void *pkt;                     /* held with ops.pkt_hold, once per ring */
};

/* ---- SACK scoreboard ----------------------------------------------------------- */

#define TL_SACK_SB 8u                  /* SACKed ranges a sender remembers per connection */

/* [start, end) in sequence space. */
struct tl_sack_range {
	uint32_t start, end;
};

/* ---- connection -------------------------------------------------------------- */

struct tl_tcp_conn {
	struct tl_tcp_stack *stack;
	struct tl_tcp_tuple t;
	uint32_t hnext;                /* hash chain / free list (index) */
	uint32_t idx;
	uint8_t state;
	bool app_attached;             /* closed() still owed to the app */
	bool fin_queued;               /* app closed: FIN after the send queue */
	bool fin_sent;
	bool fin_rcvd;
	bool ts_ok, ws_ok, ecn_ok, sack_ok;
	bool ack_now;
	bool ce_state;                 /* DCTCP receiver: last data segment was CE */
	bool in_recovery;
	/*
	 * Eifel detection (RFC 3522): at the first timeout of an episode, the TSval our
	 * retransmission carries and the window we had. An ACK echoing an older TSval acks the
	 * original, not the retransmission: the timeout was spurious and is undone.
	 */
	bool eifel_armed;
	uint32_t eifel_tsval, eifel_cwnd, eifel_ssthresh;
	bool corked;                   /* tl_tcp_cork: queue, do not push */
	bool cwr_pending;              /* tell the peer we cut cwnd on its ECE (RFC 3168) */
	uint16_t busy;                 /* inside input/timer/callback: defer the free */
	bool dead;
	uint8_t snd_wscale, rcv_wscale;
	struct tl_tcp_listener *listener; /* while SYN_RCVD */
	const struct tl_tcp_cbs *cbs;
	void *arg;

	/* send sequence space */
	uint32_t iss, snd_una, snd_nxt, snd_max, snd_wnd, snd_wl1, snd_wl2, max_snd_wnd;
	uint16_t mss;                  /* effective send MSS (payload) */
	struct tl_tcp_sbuf *sq_head, *sq_tail;
	uint32_t sq_head_off;          /* bytes of sq_head already acknowledged */
	uint32_t sq_bytes;             /* queued, unacknowledged (excluding FIN) */
	struct tl_tcp_sbuf *sq_cur;    /* cursor: the buffer last sliced for output... */
	uint32_t sq_cur_seq;           /* ...and the sequence number of its first byte */

	/* receive sequence space */
	uint32_t irs, rcv_nxt, rcv_adv; /* rcv_adv: right edge last advertised */
	uint32_t rcv_unread;           /* delivered, not yet tl_tcp_recved */
	uint32_t unacked_segs;         /* received since our last ACK */
	/* Out-of-order queue (tl_ooo.c): ooo_n entries linked by seq from ooo_head to ooo_tail,
	 * slots of the slice ooo (cfg.ooo_max of the pool). */
	struct tl_ooo *ooo;
	uint32_t ooo_head, ooo_tail;
	uint32_t ooo_n;
	uint32_t ooo_last;             /* queued last, while queued: the next piece goes after it */
	uint32_t ooo_free;             /* free slots, by next */
	uint32_t ooo_fresh;            /* slots from here on unused since the queue was empty */
	uint32_t ooo_bytes;            /* sum of the entries' charge */
	uint32_t sack_recent;          /* seq of the segment queued out of order last: its
					* block goes first (RFC 2018 4) */
	/*
	 * The blocks the next ACK reports (tl_out.c put_sack): the queue's highest ranges
	 * (entries merged where they touch), ascending, up to four, sack_below when there are
	 * more; and the one holding sack_recent. A segment joining the queue among the ranges
	 * kept updates them (tl_ooo.c sack_add); any other change makes them stale, and the
	 * next ACK rebuilds them with one walk of the queue.
	 */
	struct tl_sack_range sack_top[4];
	struct tl_sack_range sack_first;
	uint8_t sack_ntop;
	bool sack_has_first;
	bool sack_below;
	bool sack_stale;

	/*
	 * Sender's SACK scoreboard: what the peer reported holding above snd_una, sorted,
	 * disjoint, within (snd_una, snd_max]. Cleared on RTO (RFC 2018 8: the receiver may
	 * renege). In recovery, holes below rxt_next have been resent already.
	 */
	struct tl_sack_range sacked[TL_SACK_SB];
	uint32_t nsacked;
	uint32_t rxt_next;

	/* timestamps */
	uint32_t ts_recent, ts_last_ack_sent;

	/* RTT, RTO (tl_cc.c) */
	uint64_t srtt_ns, rttvar_ns;   /* srtt 0: no sample yet; in ns, not to floor a
					* microsecond RTT's eighths away */
	uint64_t rto_ns;
	uint32_t rtt_seq;              /* Karn timing without timestamps */
	uint64_t rtt_start;            /* 0: not timing */
	uint32_t backoff;              /* consecutive RTOs */

	/* congestion control (tl_cc.c) */
	uint32_t cwnd, ssthresh, recover, dupacks, bytes_acked_ca;
	uint32_t dctcp_alpha, dctcp_acked, dctcp_marked, dctcp_next_seq;
	bool dctcp_reduced;

	/* timers: one wheel entry, the earliest of these (0 = off) */
	struct tl_tw_entry tw;
	uint64_t rto_at, delack_at, persist_at, close_at;
	uint64_t oow_ack_at;           /* last ACK sent for an unacceptable pure ACK */
	uint64_t chal_at;              /* start of this challenge-ACK second (0: none yet) */
	uint32_t chal_left;            /* challenge (and PAWS) ACKs left in it */
	uint64_t persist_backoff;
	uint64_t ka_at;                /* keepalive check due (0 = off) */
	uint64_t last_rx;              /* clock of the last acceptable segment */
	uint32_t probes_out;           /* zero-window or keepalive probes since the last one */

	uint64_t seg_in, seg_out, bytes_acked, bytes_rcvd, retrans;
};

struct tl_tcp_listener {
	struct tl_tcp_stack *stack;
	bool used;
	uint32_t laddr;
	uint16_t lport;
	uint32_t backlog, embryonic;
	uint64_t cookie_at;            /* last SYN cookie sent (0: never): ACKs are checked
					* for one while it may still come back */
	const struct tl_tcp_cbs *cbs;
	void *arg;
};

struct tl_tcp_stack {
	struct tl_tcp_cfg cfg;
	struct tl_tcp_ops ops;
	void *ops_ctx;
	uint8_t rcv_wscale;            /* scale we offer: fits cfg.rcv_buf in 16 bits */

	struct tl_tcp_conn *conns;     /* cfg.max_conns */
	struct tl_ooo *ooo_pool;       /* max_conns * ooo_max */
	uint64_t ooo_bytes;            /* charged by every connection's queue (cfg.ooo_mem) */
	uint32_t *buckets;             /* nbuckets heads of index chains */
	uint32_t nbuckets;             /* power of two */
	uint32_t conn_free;            /* free list head */
	uint32_t nconns;

	struct tl_tcp_listener *listeners;
	struct tl_tcp_sbuf *sbufs, *sbuf_free;
	uint32_t sbufs_used;

	struct tl_tw tw;
	uint64_t now;                  /* clock of the current call */
	uint64_t ts_base;              /* subtracted from now to make TSval */
	uint16_t next_ephemeral;
	uint64_t rng;                  /* xorshift state (tl_rand): randomised limits */

	struct tl_tcp_stats st;
};

/* tl_cookie.c: SYN cookies. What a cookie connection negotiated (from the TSecr bits). */
struct tl_cookie_opts {
	uint16_t mss;
	bool ts_ok, ws_ok, sack_ok, ecn_ok;
	uint8_t snd_wscale;            /* the peer's shift, when ws_ok */
};
uint32_t tl_cookie_make(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t, uint32_t peer_isn,
			uint16_t peer_mss, uint16_t *mss_out);
uint32_t tl_cookie_tsval(uint32_t tsval, const struct tl_cookie_opts *o);
bool tl_cookie_check(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t, uint32_t seq,
		     uint32_t ack, bool has_ts, uint32_t tsecr, struct tl_cookie_opts *o);

/* tl_conn.c */
struct tl_tcp_conn *tl_conn_lookup(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport,
				   uint32_t raddr, uint16_t rport);
struct tl_tcp_listener *tl_listener_lookup(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport);
struct tl_tcp_conn *tl_conn_alloc(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t);
/* Ends c: completes its send buffers with status, drops held packets, tells the app
 * (closed(reason)) if attached, unhashes and frees (deferred while c->busy). */
void tl_conn_drop(struct tl_tcp_conn *c, int reason);
void tl_conn_put(struct tl_tcp_conn *c);      /* busy-- and free if dead */
void tl_conn_free_acked(struct tl_tcp_conn *c, uint32_t acked);
void tl_conn_enter_time_wait(struct tl_tcp_conn *c);
void tl_conn_app_closed(struct tl_tcp_conn *c, int reason);
void tl_conn_init_seq(struct tl_tcp_conn *c);
uint32_t tl_conn_rcv_space(const struct tl_tcp_conn *c);
uint32_t tl_rand(struct tl_tcp_stack *s);

/* tl_ooo.c */
void tl_ooo_reset(struct tl_tcp_conn *c);  /* an empty queue on c's slice (c->idx, c->stack set) */
bool tl_ooo_fit_fin(struct tl_tcp_conn *c, uint32_t seq, uint32_t *len, bool *fin);
/* Parks a segment (taking a reference on pkt unless a neighbour of the same pkt has one). */
void tl_ooo_insert(struct tl_tcp_conn *c, uint32_t seq, uint32_t len, const uint8_t *data,
		   bool fin, void *pkt);
/* Unlinks the first entry (ooo_n > 0) and returns its slot, which keeps its data, charge
 * and packet reference until tl_ooo_put: delivery reads it in between. */
uint32_t tl_ooo_pop(struct tl_tcp_conn *c);
void tl_ooo_put(struct tl_tcp_conn *c, uint32_t i);
void tl_ooo_clear(struct tl_tcp_conn *c);  /* drops every entry */

/* tl_out.c */
void tl_out_syn(struct tl_tcp_conn *c, bool ack);
void tl_out_ack(struct tl_tcp_conn *c);
void tl_out_push(struct tl_tcp_conn *c);
uint32_t tl_out_retransmit(struct tl_tcp_conn *c); /* the segment at snd_una; bytes resent */
bool tl_out_sack_rexmit(struct tl_tcp_conn *c);  /* the next unresent hole, if any */
void tl_out_probe(struct tl_tcp_conn *c);
void tl_out_rst_for(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint32_t seq, uint32_t ack,
		    uint8_t flags);
void tl_out_cookie_synack(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint32_t iss,
			  uint32_t ack, const struct tl_cookie_opts *o, uint32_t peer_tsval);
void tl_out_rst(struct tl_tcp_conn *c);
void tl_out_challenge_ack(struct tl_tcp_conn *c);
bool tl_out_ack_limited(struct tl_tcp_conn *c);
uint32_t tl_out_rcv_wnd(struct tl_tcp_conn *c);
uint32_t tl_out_tsval(const struct tl_tcp_stack *s);

/* tl_timer.c */
void tl_timer_update(struct tl_tcp_conn *c);     /* re-arm for the earliest deadline */
void tl_timer_rto_restart(struct tl_tcp_conn *c);
void tl_timer_fin_wait_2(struct tl_tcp_conn *c);

/* tl_cc.c */
void tl_cc_init(struct tl_tcp_conn *c);
void tl_cc_rtt_sample(struct tl_tcp_conn *c, uint64_t rtt_ns);
void tl_cc_on_ack(struct tl_tcp_conn *c, uint32_t acked, bool ece);
void tl_cc_on_dupack(struct tl_tcp_conn *c);
void tl_cc_on_rto(struct tl_tcp_conn *c);
uint32_t tl_cc_flight(const struct tl_tcp_conn *c);

/* A 64-bit finalizer (murmur3's): initial sequence numbers and SYN cookies from a secret. */
static inline uint64_t tl_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

#endif /* WHARF_TL_TCP_PVT_H */
