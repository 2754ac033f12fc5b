/*
 * fz.h — Send/Recv fusion: the one public header of fuse/.
 *
 * Call chain (docs/architecture.md): ps_core hands each outgoing message to the peer's packer
 * (fz_peer_send); the packer copies small ones into a fused frame it owns and hands frames
 * and large messages (zero copy, in order) to an output callback, which the transport glue
 * plugs in. On receive, the transport hands each message to fz_unpack, which validates a
 * fused frame whole and then delivers its sub-messages as views into the frame; anything
 * else passes straight through. fuse knows nothing of what a message means.
 *
 * Fused frame on the wire: an ordinary message (transport/tl_wire.h) with
 *   type      FZ_TYPE_FRAME
 *   key_count number of sub-messages N (>= 1)
 *   req_id    req_id of the first sub-message (base of the delta chain below)
 *   flags, aux, table_id, dim  zero (reserved: a receiver refuses non-zero)
 * and a body of exactly N sub-messages back to back, no padding:
 *   u8      type      the sub-message's type; never 0, never 16..31 (no nesting)
 *   u8      present   which optional fields follow; bits 6..7 zero
 *                       bit0 flags  bit1 aux  bit2 table_id  bit3 req_id delta
 *                       bit4 key_count  bit5 dim
 *   varint  body_len
 *   varint  each present field, in bit order; a field is present iff its value is
 *           non-zero (absent = 0). The req_id field is zigzag(req_id - previous req_id)
 *           where "previous" is the prior sub-message's req_id, or the frame's req_id for
 *           the first one, so consecutive request ids cost one byte or nothing.
 *   bytes   body (body_len bytes)
 * varint is unsigned LEB128, minimal length, at most the bytes its field's width needs.
 * magic and version are the frame's. A 64 B tensor costs ~6-9 header bytes instead of 32.
 *
 * Threading: a struct fz_peer and a struct fz_rx belong to one lcore; every callback
 * (output, wire_busy, done, deliver) runs on, and must be called from, that lcore. Nothing
 * here locks or allocates after create.
 */
#ifndef WHARF_FZ_H
#define WHARF_FZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tl_wire.h"

#define FZ_TYPE_FRAME     16u   /* a fused frame; 17..31 stay reserved for fuse */
#define FZ_SUB_HDR_MIN    3u    /* type, present, body_len=0 */
#define FZ_SUB_HDR_MAX    38u   /* 2 + 5 (len) + 3 + 3 + 5 + 10 (req delta) + 5 + 5 */

/* ---- configuration ------------------------------------------------------------ */

/* Defaults, and the accepted range of each knob (a value outside is an error). */
#define FZ_DEFAULT_MAX_BYTES       65536u  /* fused frame body; ~45 MSS-sized segments */
#define FZ_DEFAULT_THRESHOLD_BYTES 4096u   /* covers the fusion bench's 16 B..4 KiB mix */
#define FZ_DEFAULT_MAX_DELAY_US    50u     /* well under one PS step; above one RTT */
#define FZ_DEFAULT_MAX_MSGS        1024u   /* sub-messages per frame; bytes bind first at 64 B */
#define FZ_DEFAULT_FRAMES          8u      /* frame buffers per peer, in flight or open */
#define FZ_RAMP_START              4096u   /* first frame of a burst (fz_pack.c, the ramp) */
#define FZ_MIN_MAX_BYTES           256u
#define FZ_MAX_MAX_BYTES           (16u << 20)
#define FZ_MAX_MAX_DELAY_US        1000000u
#define FZ_MAX_MAX_MSGS            65535u
#define FZ_MIN_FRAMES              2u
#define FZ_MAX_FRAMES              1024u

struct fz_config {
	bool tensor_fuse;              /* off: every message passes through unchanged */
	uint32_t fuse_max_bytes;       /* largest fused frame body */
	uint32_t fuse_threshold_bytes; /* a body at or under this is fused; 1.. max - FZ_SUB_HDR_MAX */
	uint32_t fuse_max_delay_us;    /* most fusion may hold a message; 1..FZ_MAX_MAX_DELAY_US */
	uint32_t fuse_max_msgs;        /* sub-messages per frame; 1..FZ_MAX_MAX_MSGS */
	uint32_t fuse_frames;          /* frame buffers per peer */
};

/* Fills the documented defaults (tensor_fuse off). */
void fz_config_defaults(struct fz_config *cfg);

/*
 * Checks every field and the relations between them. Returns 0, or -EINVAL with a
 * sentence naming the field in err (err may be NULL).
 */
int fz_config_validate(const struct fz_config *cfg, char *err, size_t errlen);

/*
 * Sets one knob from text, as a config file line or flag gives it: "tensor_fuse"
 * (on/off/true/false/1/0), "fuse_max_bytes", "fuse_threshold_bytes",
 * "fuse_max_delay_us", "fuse_max_msgs", "fuse_frames" (decimal). Returns 0; -ENOENT for a key that is not
 * fuse's (so a caller can try other layers); -EINVAL for a bad value, with a message in
 * err, and cfg unchanged. Cross-field relations are checked by fz_config_validate.
 */
int fz_config_set(struct fz_config *cfg, const char *key, const char *value, char *err,
		  size_t errlen);

/* ---- sending ------------------------------------------------------------------ */

/*
 * Completion of a body the caller lent: runs exactly once when nothing references the
 * memory any more (status 0), or the output side gave up on it (-errno). For a message
 * that was fused this happens inside fz_peer_send (the body was copied), so a done
 * callback must tolerate being called from within fz_peer_send.
 */
typedef void (*fz_done_fn)(void *done_arg, int status);

/* A message handed down by the upper layer. */
struct fz_msg {
	struct tl_msg_hdr hdr;   /* magic/version ignored; body_len must equal the iov sum */
	const struct tl_iov *iov;
	uint32_t iovcnt;
	fz_done_fn done;         /* may be NULL */
	void *done_arg;
};

/*
 * What the packer hands to the output side: a header to encode and a body to send by
 * reference. Either a fused frame (hdr.type FZ_TYPE_FRAME, body in packer storage), or
 * one message alone (the caller's hdr, iov and done, untouched: zero copy), or a frame
 * that closed holding one message, sent as that message (its hdr, its body in packer
 * storage, the frame's done).
 */
struct fz_out {
	struct tl_msg_hdr hdr;
	const struct tl_iov *iov;  /* valid only during the output call: copy the array */
	uint32_t iovcnt;
	fz_done_fn done;           /* the output side calls it once, when done with the body */
	void *done_arg;
};

struct fz_peer_ops {
	/*
	 * Takes one message. Returns 0: the output side owns the reference and will call
	 * out->done (if non-NULL) exactly once. Returns -errno (e.g. -ENOBUFS when its queue
	 * is full): nothing was taken, done is not called, the packer keeps its state.
	 */
	int (*output)(void *arg, const struct fz_out *out);
	/*
	 * Autocorking: true while the connection has bytes in flight or queued. Fusion
	 * batches only while this is true; a message on an idle wire is sent at once.
	 */
	bool (*wire_busy)(void *arg);
	void *arg;
	/*
	 * Optional: storage for the frame bodies, in memory the output side sends without
	 * copying (tl_buf_alloc), 64-byte aligned (else fz_peer_create refuses it: frames
	 * are written in whole lines). NULL: the C heap. mem_free gets what mem_alloc
	 * returned, once, from fz_peer_destroy.
	 */
	void *(*mem_alloc)(void *arg, size_t size);
	void (*mem_free)(void *arg, void *p);
	/*
	 * Optional: a message was copied into a frame, so its caller's memory is free; the
	 * packer hands its done (non-NULL) here instead of calling done(done_arg, 0) from
	 * inside fz_peer_send (fz_conn queues it for the next poll).
	 */
	void (*copied)(void *arg, fz_done_fn done, void *done_arg);
};

enum fz_flush_reason {
	FZ_FLUSH_FULL,      /* the next message did not fit, or fuse_max_msgs reached */
	FZ_FLUSH_EXPLICIT,  /* fz_peer_flush (end of a step) */
	FZ_FLUSH_TIMER,     /* fuse_max_delay_us since the frame opened */
	FZ_FLUSH_IDLE,      /* the wire went idle while a frame was open */
	FZ_FLUSH_LARGE,     /* a large message must follow, in order */
	FZ_FLUSH_REASONS
};

#define FZ_HIST_BUCKETS 8  /* sub-messages per frame: 1 (stays 0: frames_single), 2-3, 4-7,
			    * .., 64-127, >=128 */

struct fz_tx_stats {
	uint64_t msgs;                 /* accepted by fz_peer_send */
	uint64_t msgs_fused;           /* copied into a frame */
	uint64_t msgs_alone;           /* passed through whole */
	uint64_t alone_no_frame;       /* of msgs_alone: small, but every frame buffer was busy */
	uint64_t frames;               /* fused frames handed to output */
	uint64_t frames_single;        /* frames that closed holding one message, which left
					* as that message (its header, no sub-header) */
	uint64_t frames_saved;         /* messages on the wire avoided: sum of (N - 1) */
	int64_t bytes_saved;           /* header bytes avoided: sum of (32 N - 32 - sub headers) */
	uint64_t subs_hist[FZ_HIST_BUCKETS];
	uint64_t flush[FZ_FLUSH_REASONS];
};

struct fz_peer;

/*
 * Creates a packer for one peer. cfg is validated and copied; ops is copied. Frame
 * buffers are allocated here, never later. Returns 0 or -EINVAL (bad cfg/ops), -ENOMEM.
 */
int fz_peer_create(const struct fz_config *cfg, const struct fz_peer_ops *ops,
		   struct fz_peer **out);

/*
 * Frees the packer. The caller must have flushed it and the output side must have
 * completed every frame (fz_peer_in_flight == 0); a frame still open is dropped.
 * NULL is a no-op.
 */
void fz_peer_destroy(struct fz_peer *peer);

/*
 * Sends one message, fused or alone per the config and flush policy; now_us is the
 * caller's clock. Returns 0: accepted, msg->done will run exactly once (possibly before
 * this returns). Returns -EINVAL for a bad message (fuse type, body_len not the iov sum)
 * or the output's -errno; then nothing of this message was applied, done is not called,
 * and the body is still the caller's. A frame flushed before the failure stays flushed.
 */
int fz_peer_send(struct fz_peer *peer, const struct fz_msg *msg, uint64_t now_us);
/*
 * Sends msgs[0..n) in order, each by fz_peer_send's rules, as one call: the wire's state
 * is read once and again only after something went to output, so a step's tensors pack
 * in a tight loop. *taken gets how many were accepted. Returns 0 when all were, else the
 * first failure's -errno (that message and the ones after it were not taken).
 */
int fz_peer_send_many(struct fz_peer *peer, const struct fz_msg *msgs, uint32_t n,
		      uint64_t now_us, uint32_t *taken);

/*
 * Hands the open frame (if any) to output now: end of step; uncorks when it succeeds.
 * 0 or the output's -errno.
 */
int fz_peer_flush(struct fz_peer *peer, uint64_t now_us);
/*
 * Until the next successful fz_peer_flush, small messages are fused even on an idle wire
 * (the caller knows more will follow and flushes at the end of its batch): the first of a
 * batch no longer leaves alone ahead of the rest. The timer still bounds the delay.
 */
void fz_peer_cork(struct fz_peer *peer);

/*
 * Timer and autocork check: flushes the open frame when fuse_max_delay_us has passed
 * since it opened or the wire is idle. Call at least by fz_peer_deadline. 0 or -errno.
 */
int fz_peer_poll(struct fz_peer *peer, uint64_t now_us);

/* The time by which fz_peer_poll must run, or UINT64_MAX when no frame is open. */
uint64_t fz_peer_deadline(const struct fz_peer *peer);

/* Frames handed to output and not yet completed. */
uint32_t fz_peer_in_flight(const struct fz_peer *peer);

const struct fz_tx_stats *fz_peer_stats(const struct fz_peer *peer);

/* ---- receiving ---------------------------------------------------------------- */

/*
 * Receives each message, in order. msg (its iov array included) is valid until this
 * returns. carrier is the message the transport handed to fz_unpack (the fused frame,
 * or msg itself when it was not fused): a receiver that must keep msg's bytes longer
 * holds the carrier (tl_msg_hold(carrier)) and copies msg's header and iov array.
 */
typedef void (*fz_deliver_fn)(void *arg, const struct tl_msg_view *msg,
			      const struct tl_msg_view *carrier);

#define FZ_RX_MAX_IOV 512u /* pieces one received frame may arrive in */

/* Why a frame was refused: a fixed sentence (no formatting on the data path). */
struct fz_rx_error {
	const char *reason;
	uint32_t sub_index;   /* the sub-message being parsed when it failed */
	uint32_t offset;      /* byte offset in the frame body where it failed */
};

struct fz_rx_stats {
	uint64_t msgs;        /* non-fused messages passed through */
	uint64_t frames;      /* fused frames delivered */
	uint64_t subs;        /* sub-messages delivered */
	uint64_t refused;     /* frames refused whole */
};

struct fz_rx;

/* Creates a receive context (scratch views and counters). 0, -EINVAL or -ENOMEM. */
int fz_rx_create(struct fz_rx **out);
void fz_rx_destroy(struct fz_rx *rx);
const struct fz_rx_stats *fz_rx_stats(const struct fz_rx *rx);

/*
 * Delivers a received message. A non-fused message goes to deliver as it is. A fused
 * frame is validated whole first: any shape that does not add up (zero-length frame,
 * count zero or larger than the body can hold, truncated sub-header, sub-length past the
 * end, nested fused frame, bad varint, reserved bits, trailing bytes, body shorter than
 * its header says) returns -EBADMSG with err filled, having delivered nothing. A frame
 * in more than FZ_RX_MAX_IOV pieces gets -E2BIG. Otherwise every sub-message is
 * delivered in order as views into msg's memory (no copy) and 0 is returned. msg stays
 * the caller's in every case.
 */
int fz_unpack(struct fz_rx *rx, const struct tl_msg_view *msg, fz_deliver_fn deliver,
	      void *arg, struct fz_rx_error *err);

/*
 * Formats the refusal for a human or for tl_send_error's text:
 * "fuse: <reason> (sub-message i, offset o)". Returns its length, or -ENOSPC.
 */
int fz_rx_error_text(const struct fz_rx_error *err, char *buf, size_t cap);

/*
 * Encodes the body of a TL_TYPE_ERROR reply for a refused frame (u32 code, then text
 * "fuse: <reason> (sub-message i, offset o)"). Returns the body length, or -ENOSPC.
 */
int fz_rx_error_body(const struct fz_rx_error *err, int code, uint8_t *buf, size_t cap);

/* ---- over the transport (fz_conn.c) -------------------------------------------- */

/*
 * The glue that puts a packer and an unpacker on each connection of one transport
 * instance (struct tl, either protocol). An application that wants fusion opens its
 * connections here instead of with tl_connect/tl_listen and calls fz_net_poll in place
 * of tl_poll; otherwise the rules are tl.h's:
 *   - callbacks (connected, msg, closed, and every send's done) run only from
 *     fz_net_poll (or fz_net_destroy), never inside the call that caused them, so a
 *     callback may call anything here. A fused message's done runs from the next
 *     fz_net_poll with status 0 (its body was copied); a message sent alone completes
 *     when the transport is done with it (kernel: written; dpdk: acknowledged).
 *   - after connected(fc, <0) or closed(fc, ...) returns, fc is freed.
 * Autocorking: a small message on a connection with nothing pending (tl_conn_tx_pending
 * == 0) goes out at once; while the wire is busy small messages are fused, and the open
 * frame leaves when full, on fz_conn_flush, when fuse_max_delay_us has passed since the
 * send that opened it, or when fz_net_poll sees the wire idle; a frame that closes holding
 * one message leaves as that message. So fusion adds at most fuse_max_delay_us to a message,
 * and nothing to a lone one.
 * The transport must be configured with max_msg_segs <= FZ_RX_MAX_IOV, or a fused frame
 * arriving in more pieces than that is refused (-E2BIG) like a malformed one.
 * A received fused frame that does not add up is refused whole: nothing of it is
 * delivered, the sender gets a TL_TYPE_ERROR reply (code EBADMSG, or E2BIG) to the
 * frame's req_id with fz_rx_error_text's sentence, and the connection stays open.
 */
struct tl;
struct tl_conn;
struct fz_net;       /* fusion over one struct tl: its connections and deferred completions */
struct fz_conn;      /* one fused connection over one tl_conn */
struct fz_listener;

struct fz_conn_ops {
	void (*connected)(struct fz_conn *fc, int status); /* may be NULL (accepted: never) */
	/* m and carrier as for fz_deliver_fn; tl_msg_hold(carrier) keeps the bytes. */
	void (*msg)(struct fz_conn *fc, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier);
	void (*closed)(struct fz_conn *fc, int reason);    /* tl.h's reasons; may be NULL */
};
/* An accepted connection, before any of its messages; ctx is fz_net_listen's. */
typedef void (*fz_accept_fn)(struct fz_conn *fc, void *ctx);

struct fz_conn_stats {
	struct fz_tx_stats tx;        /* the packer's */
	struct fz_rx_stats rx;        /* the unpacker's */
	uint64_t refusals_sent;       /* error replies sent for refused frames */
	uint64_t refusals_dropped;    /* refused frames whose error reply found no room */
	uint64_t deferred_done;       /* fused messages completed from fz_net_poll */
};

/* tl must outlive net. 0, -EINVAL or -ENOMEM. */
int fz_net_create(struct tl *tl, struct fz_net **out);
/*
 * Stops its listeners, closes its connections and runs their closed callbacks (one
 * tl_poll round, which may run other callbacks of tl too) and the completions still
 * owed. Call it before tl_destroy. NULL is a no-op.
 */
void fz_net_destroy(struct fz_net *net);
/*
 * One round of the application's loop: tl_poll (waiting at most timeout_us, and no
 * longer than the earliest open frame's deadline), then the owed completions, the timer
 * and idle flushes, and flushes that found the send queue full. Returns tl_poll's result.
 */
int fz_net_poll(struct fz_net *net, int64_t timeout_us);

/*
 * Listens on ip:port (tl_listen's rules). Each accepted connection gets a copy of cfg,
 * ops (which must outlive the listener) and ctx, then accepted(fc, ctx) runs; it may
 * change the context (fz_conn_set_ctx) or close fc. -EINVAL for a bad cfg, or tl's error.
 */
int fz_net_listen(struct fz_net *net, uint32_t ip, uint16_t port, const struct fz_config *cfg,
		  const struct fz_conn_ops *ops, fz_accept_fn accepted, void *ctx,
		  struct fz_listener **out);
uint16_t fz_listener_port(const struct fz_listener *l);
/* Stops listening now; accepted connections stay. NULL is a no-op. */
void fz_unlisten(struct fz_listener *l);

/* Starts an active open; ops->connected reports it from fz_net_poll. cfg is copied. */
int fz_net_connect(struct fz_net *net, uint32_t ip, uint16_t port, const struct fz_config *cfg,
		   const struct fz_conn_ops *ops, void *ctx, struct fz_conn **out);

/*
 * Sends one message (fz_peer_send's rules): fused or alone, in order with the rest. On 0
 * msg->done runs exactly once, from a later fz_net_poll. On -errno nothing was taken:
 * -ENOTCONN (closing or not connected yet), -EINVAL (bad message), -ENOBUFS (the
 * transport's send queue is full: poll and retry), -ENOMEM.
 */
int fz_conn_send(struct fz_conn *fc, const struct fz_msg *msg);
/*
 * fz_conn_send for msgs[0..n) in order, in one call (fz_peer_send_many). *taken gets
 * how many were accepted (each done runs exactly once from a later fz_net_poll); on
 * -errno, msgs[*taken] and the rest were not (-ENOBUFS: poll and send the rest).
 */
int fz_conn_send_many(struct fz_conn *fc, const struct fz_msg *msgs, uint32_t n,
		      uint32_t *taken);
/*
 * End of a step: the open frame goes to the transport now. -ENOBUFS when its send queue
 * is full; the frame then stays open and fz_net_poll retries it. 0 with nothing open.
 */
int fz_conn_flush(struct fz_conn *fc);
/* fz_peer_cork for the connection: fuse even on an idle wire until the next fz_conn_flush. */
void fz_conn_cork(struct fz_conn *fc);
/* Closes: closed(fc, -ECONNABORTED) runs from the next fz_net_poll. -ENOTCONN if closing. */
int fz_conn_close(struct fz_conn *fc);
void fz_conn_set_ctx(struct fz_conn *fc, void *ctx);
void *fz_conn_ctx(const struct fz_conn *fc);
/* The transport connection underneath (for tl_conn_why, tl_conn_tx_pending, ...). */
struct tl_conn *fz_conn_tl(const struct fz_conn *fc);
void fz_conn_stats_get(const struct fz_conn *fc, struct fz_conn_stats *out);
/* Adds every counter of st to sum (a node's totals over connections, closed ones too). */
void fz_conn_stats_add(struct fz_conn_stats *sum, const struct fz_conn_stats *st);

#endif /* WHARF_FZ_H */
