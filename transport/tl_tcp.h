/*
 * tl_tcp.h — TCP-lite, the per-lcore TCP core (an RFC 9293 subset) that the transport's
 * backends drive. It never touches a NIC or a socket: the caller hands it parsed
 * segments and the current time, and it hands segments back through ops.emit.
 *
 * Call chain (DPDK backend, one lcore):
 *   rx_burst -> dn eth/ip -> tl_tcp_input(stack, rx, now) -> cbs.recv (message reassembly)
 *   app -> tl_tcp_send(conn, buf, ...) -> ops.emit(tx) -> backend adds IPv4/Ethernet -> tx_burst
 *   loop tail -> tl_tcp_timers(stack, now) -> retransmissions, delayed ACKs, probes, TIME_WAIT
 * Tests drive the same seam with a fake link and a fake clock (transport/tests/tcp_fakelink.c).
 *
 * Threading: a stack and everything reached from it belong to one lcore. Nothing here is
 * thread safe and nothing needs to be: share nothing. Reference counts (send buffers) are
 * plain integers because the only other party that touches them, the backend's TX
 * completion, runs on the same lcore.
 *
 * Memory: everything is sized by the config and allocated by tl_tcp_stack_create; input,
 * output and timers never allocate.
 */
#ifndef WHARF_TL_TCP_H
#define WHARF_TL_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tl_tcp_stack;
struct tl_tcp_conn;
struct tl_tcp_listener;
struct tl_tcp_sbuf;

/* Header flag bits as they sit in byte 13 of the TCP header. */
#define TL_TCP_FIN 0x01u
#define TL_TCP_SYN 0x02u
#define TL_TCP_RST 0x04u
#define TL_TCP_PSH 0x08u
#define TL_TCP_ACK 0x10u
#define TL_TCP_URG 0x20u
#define TL_TCP_ECE 0x40u /* ECN echo: the receiver saw CE (or, on a SYN, ECN offered) */
#define TL_TCP_CWR 0x80u /* congestion window reduced (on a SYN: ECN offered) */

/* IP ECN codepoints (low two bits of the IPv4 TOS byte). */
#define TL_ECN_NOT_ECT 0u
#define TL_ECN_ECT1    1u
#define TL_ECN_ECT0    2u
#define TL_ECN_CE      3u

#define TL_TCP_HDR_MAX    60u
#define TL_TCP_TX_SLICES  32u /* payload pieces per emitted segment: a full segment of small messages */

/* A connection's addresses, all in host byte order. */
struct tl_tcp_tuple {
	uint32_t laddr, raddr;
	uint16_t lport, rport;
};

/* One received segment, as the backend hands it in. */
struct tl_tcp_rx {
	uint32_t saddr, daddr;   /* IPv4, host byte order */
	const uint8_t *tcp;      /* TCP header, options and payload, contiguous */
	uint32_t tcp_len;        /* IP total length minus the IP header */
	/* Set by tl_tcp_input_pieces (NULL / false otherwise): the payload lies here, tcp_len
	 * covering the header only, and more pieces of the same frame follow. */
	const uint8_t *payload;
	uint32_t payload_len;
	bool more;
	uint8_t ecn;             /* TL_ECN_* from the IP header */
	void *pkt;               /* opaque packet handle, see ops.pkt_hold */
};

/* A piece of send-queue memory in an emitted segment (zero copy). */
struct tl_tcp_slice {
	const uint8_t *base;
	uint32_t len;
	struct tl_tcp_sbuf *sb;  /* tl_tcp_sbuf_get() it to keep base valid past emit */
};

/*
 * One segment to put on the wire. hdr holds the complete TCP header with options; its
 * checksum field is zero: the backend fills it (offload, or tl_tcp_tx_cksum()).
 */
struct tl_tcp_tx {
	uint32_t saddr, daddr;   /* host byte order */
	uint8_t ecn;             /* TL_ECN_* to put in the IP header */
	uint8_t hdr_len;
	uint16_t nslices;
	uint32_t payload_len;
	uint16_t tso_segsz;      /* nonzero: payload_len exceeds the MSS, the device cuts
				  * segments of this much payload (cfg.tso_max) */
	uint8_t hdr[TL_TCP_HDR_MAX];
	struct tl_tcp_slice slice[TL_TCP_TX_SLICES];
};

/*
 * What the core needs from its backend. emit is synchronous: hdr and the slice list are
 * only valid during the call; the payload memory stays valid while the backend holds a
 * reference on each slice's sbuf. emit returns 0 or -errno (e.g. -ENOBUFS); a failed
 * emit is treated like a loss on the wire and repaired by retransmission.
 * pkt_hold/pkt_release take and drop a reference on a received packet handle: the core
 * holds packets it queues out of order; the caller's own reference is never consumed.
 */
struct tl_tcp_ops {
	int (*emit)(void *ctx, const struct tl_tcp_tx *tx);
	void (*pkt_hold)(void *ctx, void *pkt);
	void (*pkt_release)(void *ctx, void *pkt);
	/* Optional: initial send sequence; NULL = RFC 6528 style hash of tuple, secret, clock. */
	uint32_t (*iss)(void *ctx, const struct tl_tcp_tuple *t);
};

/* Why a connection ended (cbs.closed's reason): 0 or a negative errno. */
#define TL_TCP_CLOSED_OK        0              /* both FINs exchanged and acknowledged */
/* -ECONNRESET: peer reset. -ETIMEDOUT: retransmission limit. -ECONNREFUSED: RST to our
 * SYN. -ECONNABORTED: tl_tcp_abort or stack teardown. */

/*
 * Per-connection callbacks; any may be NULL. They run on the stack's lcore, from inside
 * tl_tcp_input/tl_tcp_timers/tl_tcp_send. A callback may call tl_tcp_send, tl_tcp_recved,
 * tl_tcp_close and tl_tcp_abort on its own connection.
 */
struct tl_tcp_cbs {
	/* Passive open completed (listener's cbs). Return <0 to refuse (peer gets a RST). The
	 * new connection inherits the listener's cbs and arg; tl_tcp_conn_set_cbs changes them. */
	int (*accept)(void *arg, struct tl_tcp_conn *c);
	/* Active open completed. */
	void (*connected)(void *arg, struct tl_tcp_conn *c);
	/* In-order bytes. data stays valid until return unless the receiver holds pkt with
	 * tl_tcp_pkt_hold. The bytes count against the receive window until tl_tcp_recved.
	 * data == NULL, len == 0: the peer sent FIN (end of stream). */
	void (*recv)(void *arg, struct tl_tcp_conn *c, const uint8_t *data, uint32_t len, void *pkt);
	/* Bytes newly acknowledged (send space freed). */
	void (*sent)(void *arg, struct tl_tcp_conn *c, uint32_t acked);
	/* Last call for c: the handle is invalid once this returns. */
	void (*closed)(void *arg, struct tl_tcp_conn *c, int reason);
};

struct tl_tcp_cfg {
	uint16_t mss;            /* MSS we advertise and the cap on what we send (bytes) */
	uint32_t rcv_buf;        /* receive window ceiling per connection (bytes) */
	uint32_t snd_buf;        /* queued-but-unacknowledged ceiling per connection (bytes) */
	uint32_t max_conns;      /* connection table size (includes TIME_WAIT and embryonic) */
	uint32_t max_listeners;
	uint32_t max_sbufs;      /* send buffer descriptors per stack */
	uint32_t ooo_max;        /* out-of-order segments held per connection; below
				  * rcv_buf / mss, reordering past it turns into drops */
	uint32_t ooo_mem;        /* bytes the out-of-order queues of the whole stack hold
				  * (each packet counted as at least a segment: a one-byte one
				  * pins a buffer all the same); one connection holds at most
				  * rcv_buf. Past it a queue is pruned from its top. Default 4 MiB */
	uint64_t rto_init_ns, rto_min_ns, rto_max_ns;
	uint64_t delack_ns;      /* delayed ACK timeout */
	uint64_t time_wait_ns;
	uint64_t tick_ns;        /* timer wheel granularity */
	uint32_t max_retrans;    /* consecutive RTOs, SYN retries or unanswered zero-window
				  * probes before reset */
	uint64_t keepalive_ns;   /* idle time before keepalive probes; 0 (default): off */
	uint64_t keepalive_intvl_ns; /* between unanswered keepalive probes (default 1 s) */
	uint32_t keepalive_probes; /* unanswered ones before reset (default 5) */
	uint32_t syn_backlog;    /* default embryonic limit per listener */
	bool syncookies;         /* SYNs over the backlog (or a full table) answered with SYN
				  * cookies instead of dropped (RFC 4987); default on */
	uint64_t iss_secret;     /* for the default ISS; backends seed it from rte_rand */
	bool ecn;                /* offer/accept ECN, react to CE DCTCP style */
	bool timestamps;         /* RFC 7323 timestamps (also RTT sampling and PAWS) */
	uint64_t ts_tick_ns;     /* TSval clock: 1000 (1 us, default) .. 1e9. At 1 us a
				  * connection silent for ~35 min may have its next segment
				  * refused by the peer's PAWS; 1 ms ticks push that to 24 days
				  * at the price of coarse RTT samples */
	bool wscale;             /* RFC 7323 window scaling */
	bool sack;               /* RFC 2018 selective acknowledgments: offer/accept, report the
				  * out-of-order queue, resend the holes the peer reports */
	uint32_t tso_max;        /* 0: every segment fits the MSS. Else the device segments (TSO):
				  * new data leaves in segments of up to this much payload, whole
				  * MSS multiples (retransmissions and probes stay MSS-sized) */
};

/* Per-stack counters (plain integers: one lcore writes them; telemetry reads a copy). */
struct tl_tcp_stats {
	uint64_t seg_in, seg_out, bytes_in, bytes_out;
	uint64_t retrans, fast_retrans, rto_fired, probes;
	uint64_t spurious_rto;    /* timeouts undone by Eifel detection (RFC 3522) */
	uint64_t ooo_queued, dup_segs, dup_acks;
	uint64_t challenge_acks, rst_in, rst_out;
	uint64_t drop_malformed;  /* bad length, data offset, options, flag combination */
	uint64_t drop_no_conn;    /* no connection or listener (answered with RST) */
	uint64_t drop_window;     /* outside the receive window, or PAWS */
	uint64_t drop_bad_ack;    /* ACK outside what we sent */
	uint64_t drop_backlog;    /* SYN over the backlog or table (answered by a cookie
				   * when cfg.syncookies) */
	uint64_t drop_ooo_full;   /* out-of-order queue full */
	uint64_t drop_emit;       /* ops.emit failed */
	uint64_t ce_marks;        /* data segments that arrived marked CE */
	uint64_t ecn_cuts;        /* DCTCP window cuts on an ECN echo (at most one a window) */
	uint64_t conns_opened, conns_reset, conns_timedout;
	uint64_t sack_rexmits;    /* holes resent in recovery from the SACK scoreboard */
	uint64_t sack_walks;      /* SACK blocks rebuilt by walking the out-of-order queue
				   * (after a change below the ranges kept: a hole filled, data
				   * cut) */
	uint64_t syncookies_sent, syncookies_ok, syncookies_bad; /* bad: ACKs for no connection
				   * that were no valid cookie while the listener was full */
};

struct tl_tcp_conn_stats {
	uint64_t seg_in, seg_out, bytes_acked, bytes_rcvd, retrans;
	uint32_t srtt_us, rttvar_us, rto_us;
	uint32_t cwnd, ssthresh, snd_wnd, rcv_wnd;
	uint32_t snd_rewound;     /* snd_max - snd_nxt: sent bytes a timeout or a zero window
				   * pulled back to send again (0 in the steady state) */
	uint32_t dctcp_alpha;     /* fraction of CE-marked bytes, in 1/1024 */
	uint8_t state;            /* enum tl_tcp_state */
	bool ecn, ts, ws, sack;
};

enum tl_tcp_state {
	TL_TCP_CLOSED, TL_TCP_LISTEN, TL_TCP_SYN_SENT, TL_TCP_SYN_RCVD, TL_TCP_ESTABLISHED,
	TL_TCP_FIN_WAIT_1, TL_TCP_FIN_WAIT_2, TL_TCP_CLOSE_WAIT, TL_TCP_CLOSING,
	TL_TCP_LAST_ACK, TL_TCP_TIME_WAIT,
};

/* Fills cfg with datacenter defaults (1 ms RTO floor, 1460 MSS, 4 MiB windows). */
void tl_tcp_cfg_default(struct tl_tcp_cfg *cfg);

/* Creates a stack. ops and cfg are copied. Returns 0, -EINVAL (bad config), -ENOMEM.
 * cbs pointers handed to listen/connect/set_cbs are kept, not copied: keep them alive. */
int tl_tcp_stack_create(const struct tl_tcp_cfg *cfg, const struct tl_tcp_ops *ops, void *ops_ctx,
			uint64_t now, struct tl_tcp_stack **out);
/* Aborts every connection (closed(-ECONNABORTED), no RST sent) and frees. The backend
 * must have put every tl_tcp_sbuf reference it took first. NULL is a no-op. */
void tl_tcp_stack_destroy(struct tl_tcp_stack *s);
/*
 * Changes cfg.tso_max for the segments built from now on (a device's segmentation can
 * come and go: a vhost endpoint follows its guest). Resends and probes are MSS-sized
 * anyway; 0 turns TSO off.
 */
void tl_tcp_stack_set_tso_max(struct tl_tcp_stack *s, uint32_t tso_max);

/*
 * Feeds one received segment. The segment is validated (lengths, data offset, options,
 * flags); bad ones are dropped and counted. Returns 0 when the segment was processed,
 * or, when it was dropped: -EBADMSG (malformed), -ENOTCONN (no connection or listener),
 * -ENOBUFS (SYN over the backlog or table), -EINVAL (unacceptable for the connection's
 * state). The return is informational: every drop is counted in tl_tcp_stats, and the
 * caller's reference on rx->pkt is never consumed. rx->tcp_len must not exceed the
 * bytes readable at rx->tcp (the IP layer checks total length against the frame).
 */
int tl_tcp_input(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx, uint64_t now);

/* A part of a received segment's payload (tl_tcp_input_pieces). */
struct tl_tcp_piece {
	const uint8_t *data;
	uint32_t len;
};
/*
 * A segment whose payload lies in several buffers (an LRO frame in a chain): rx->tcp and
 * rx->tcp_len cover the header and options only, p[0..n) the payload in order, all under
 * the one rx->pkt reference. Each piece goes in as a segment of its own (sequence number
 * advanced; FIN and PSH on the last only), and an ACK that falls due waits for the last
 * piece: one ACK per frame, as GRO gives Linux. Returns -EINVAL, taking nothing, for a SYN
 * or RST, an empty list or a header that is not whole (the caller makes the frame
 * contiguous instead); else what tl_tcp_input returned for the last piece.
 */
int tl_tcp_input_pieces(struct tl_tcp_stack *s, const struct tl_tcp_rx *rx,
			const struct tl_tcp_piece *p, uint32_t n, uint64_t now);

/* Runs expired timers. Call every loop iteration (cheap when nothing is due). */
void tl_tcp_timers(struct tl_tcp_stack *s, uint64_t now);
/* Earliest time tl_tcp_timers has work (the timer wheel's tick the first deadline rounds up
 * to), UINT64_MAX when idle (for sleeping loops). */
uint64_t tl_tcp_next_timer(const struct tl_tcp_stack *s);

/* Passive open on laddr (0 = any):lport. backlog 0 = cfg.syn_backlog. */
int tl_tcp_listen(struct tl_tcp_stack *s, uint32_t laddr, uint16_t lport, uint32_t backlog,
		  const struct tl_tcp_cbs *cbs, void *arg, struct tl_tcp_listener **out);
/* Stops listening; embryonic connections are reset. NULL is a no-op. */
void tl_tcp_unlisten(struct tl_tcp_listener *l);

/*
 * Active open. t->lport 0 picks a free ephemeral port (use tl_steer_pick_port first when
 * RSS steering matters). Returns 0 with *out valid until cbs.closed, -EADDRINUSE,
 * -ENOMEM (table full), -EINVAL.
 */
int tl_tcp_connect(struct tl_tcp_stack *s, const struct tl_tcp_tuple *t, const struct tl_tcp_cbs *cbs,
		   void *arg, uint64_t now, struct tl_tcp_conn **out);

/*
 * Queues len bytes at buf for sending, zero copy: the memory is referenced until the
 * peer has acknowledged all of it and no backend holds it, then done(done_arg, 0) runs
 * (done(done_arg, -errno) if the connection dies first). On success the core owns the
 * reference; on failure nothing is queued and done is not called.
 * Returns 0, -ENOTCONN (not open for sending), -ENOBUFS (snd_buf or descriptors full:
 * wait for cbs.sent), -EINVAL (len 0 or too big).
 */
int tl_tcp_send(struct tl_tcp_conn *c, const void *buf, uint32_t len,
		void (*done)(void *done_arg, int status), void *done_arg, uint64_t now);
/*
 * Corking: while on, tl_tcp_send only queues, so a message's header and body pieces
 * leave as full segments; turning it off sends what the windows allow.
 */
void tl_tcp_cork(struct tl_tcp_conn *c, bool on, uint64_t now);
/* Bytes tl_tcp_send would accept now. */
uint32_t tl_tcp_send_space(const struct tl_tcp_conn *c);
/* The receiver has finished with len delivered bytes: the window reopens. */
void tl_tcp_recved(struct tl_tcp_conn *c, uint32_t len, uint64_t now);
/* Graceful close: FIN after the queued data. cbs.closed follows later. */
int tl_tcp_close(struct tl_tcp_conn *c, uint64_t now);
/*
 * Copies every byte still queued on c (sent and unacknowledged, or not yet sent) into
 * memory of the core's own (malloc: a close, not the data path) and lets go of the
 * caller's: each buffer's done runs now with status -ECANCELED. For a connection that
 * must outlive the memory it was given (a graceful close whose sends the application
 * has been told are over). Returns 0, or -ENOMEM with nothing changed.
 */
int tl_tcp_conn_own_payload(struct tl_tcp_conn *c);
/* Sends RST and ends the connection now; cbs.closed(-ECONNABORTED) runs before return.
 * tl_tcp_close during the handshake forgets the attempt when nothing is queued, else
 * sends the queued data and the FIN once established. */
void tl_tcp_abort(struct tl_tcp_conn *c);

void tl_tcp_conn_set_cbs(struct tl_tcp_conn *c, const struct tl_tcp_cbs *cbs, void *arg);
void tl_tcp_conn_tuple(const struct tl_tcp_conn *c, struct tl_tcp_tuple *out);
void tl_tcp_conn_get_stats(const struct tl_tcp_conn *c, struct tl_tcp_conn_stats *out);
void tl_tcp_stack_get_stats(const struct tl_tcp_stack *s, struct tl_tcp_stats *out);
/* Connections in the table (any state but CLOSED) and send descriptors in use. */
uint32_t tl_tcp_conn_count(const struct tl_tcp_stack *s);
uint32_t tl_tcp_sbufs_in_use(const struct tl_tcp_stack *s);

/* Receive-side packet references for receivers that keep data past cbs.recv. */
void tl_tcp_pkt_hold(struct tl_tcp_stack *s, void *pkt);
void tl_tcp_pkt_release(struct tl_tcp_stack *s, void *pkt);

/* Backend references on emitted payload (e.g. while an mbuf points at it). */
void tl_tcp_sbuf_get(struct tl_tcp_sbuf *sb);
void tl_tcp_sbuf_put(struct tl_tcp_sbuf *sb);

/*
 * Internet checksum of the TCP pseudo header plus n pieces, in software (for the fake
 * link and backends without offload). Returns the value to store (network order bytes
 * via tl_tcp_tx_cksum); a received segment is intact when it sums to 0.
 */
uint16_t tl_tcp_cksum(uint32_t saddr, uint32_t daddr, uint32_t tcp_len,
		      const struct tl_tcp_slice *pieces, uint32_t n);
/* Computes and stores the checksum of an emitted segment into tx->hdr[16..17]. */
void tl_tcp_tx_cksum(struct tl_tcp_tx *tx);
/* True when a received segment's checksum verifies. */
bool tl_tcp_rx_cksum_ok(const struct tl_tcp_rx *rx);

/*
 * RSS-aware source port choice (tl_steer.c). Finds a port in [lo, hi], starting at
 * start and wrapping, such that a NIC hashing the *reply* tuple (src raddr:rport, dst
 * laddr:lport) with Toeplitz key `key` (40 bytes) and redirection table reta[reta_size]
 * steers it to queue `want`, and in_use (may be NULL) says it is free. Returns 0 with
 * *lport, -EADDRNOTAVAIL if no port in the range fits.
 */
int tl_steer_pick_port(const uint8_t key[40], const uint16_t *reta, uint32_t reta_size, uint16_t want,
		       uint32_t laddr, uint32_t raddr, uint16_t rport, uint16_t lo, uint16_t hi,
		       uint16_t start, bool (*in_use)(void *arg, uint16_t lport), void *arg,
		       uint16_t *lport);
/* The Toeplitz hash of a received IPv4/TCP tuple (same value as rte_softrss with the
 * unconverted key), and the queue it lands on. */
uint32_t tl_steer_hash(const uint8_t key[40], uint32_t saddr, uint32_t daddr, uint16_t sport,
		       uint16_t dport);
uint16_t tl_steer_queue(const uint8_t key[40], const uint16_t *reta, uint32_t reta_size,
			uint32_t saddr, uint32_t daddr, uint16_t sport, uint16_t dport);

/*
 * Software steering (one RX queue, e.g. virtio-user): one lcore receives everything and
 * hands each packet to its owner lcore over a ring. The owner follows from the packet
 * alone. A reply to an active open goes to the lcore whose slice of the port range
 * [lo, hi] holds the local port ((dport - lo) % n); anything else (passive opens: the
 * local port is a listening port outside [lo, hi]) to a hash of the 4-tuple.
 * saddr/sport are the packet's source (the peer), daddr/dport ours.
 */
uint32_t tl_steer_sw_owner(uint32_t saddr, uint32_t daddr, uint16_t sport, uint16_t dport,
			   uint16_t lo, uint16_t hi, uint32_t n);
/* A free port in [lo, hi] that tl_steer_sw_owner maps to lcore `idx` of n, scanning
 * from start. Returns 0 with *lport, -EADDRNOTAVAIL, -EINVAL. */
int tl_steer_sw_pick_port(uint32_t idx, uint32_t n, uint16_t lo, uint16_t hi, uint16_t start,
			  bool (*in_use)(void *arg, uint16_t lport), void *arg, uint16_t *lport);

#endif /* WHARF_TL_TCP_H */
