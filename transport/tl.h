/*
 * tl.h — transport: the one public header of wharf's message transport.
 *
 * Upper layers (fuse, ps_core, apps) see connections that carry whole messages (a
 * struct tl_msg_hdr from tl_wire.h plus a body), never bytes. One struct tl is one
 * share-nothing instance, driven by one thread: with protocol=dpdk one per lcore (the
 * TCP-lite stack of that lcore), with protocol=kernel one per thread (sockets + epoll).
 * The API is the same for both, in the spirit of Redis' ae.h: create, listen/connect,
 * send, and a poll entry point that runs the callbacks.
 *
 * Call chain:  app loop -> tl_poll -> backend (epoll_wait | one dpdk_net run-loop turn)
 *   -> bytes in -> tl_frame (reassembly, header checks) -> ops->msg(view)
 *   app -> tl_send (queued, zero copy) -> flushed inside tl_poll -> done(arg, status)
 *
 * Threads: nothing here is thread-safe; every call on an instance, its connections and
 * its held messages comes from the thread that polls it. Callbacks never run inside
 * the call that caused them (tl_send, tl_close, tl_connect): only inside tl_poll or
 * tl_destroy, so an application may call any function of this API from a callback.
 */
#ifndef WHARF_TL_H
#define WHARF_TL_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tl_wire.h"

struct tl;          /* one transport instance */
struct tl_conn;     /* one message connection */
struct tl_listener; /* one listening endpoint */
struct tl_msg;      /* a received message the receiver holds past its callback */

enum tl_protocol {
	TL_PROTO_KERNEL = 1, /* Linux sockets + epoll; the reference and the fallback */
	TL_PROTO_DPDK = 2,   /* TCP-lite on dpdk_net, one instance per lcore */
};

/* Limits. tl_config_default fills every field; zero is never a valid limit. */
struct tl_config {
	enum tl_protocol protocol;
	uint32_t max_body;      /* largest body accepted or sent; <= TL_MSG_MAX_BODY_DEFAULT */
	uint32_t max_conns;     /* open connections per instance; more are refused */
	uint32_t tx_max_msgs;   /* queued, not yet completed sends per connection */
	uint64_t tx_max_bytes;  /* queued, not yet completed bytes per connection */
	uint32_t rx_buf_size;   /* bytes per receive buffer (kernel backend) */
	uint32_t rx_max_bufs;   /* receive buffers per instance, held messages included */
	uint32_t max_held_msgs; /* messages in reassembly or held by receivers, per instance */
	uint32_t max_msg_segs;  /* pieces one message may span (views per tl_msg_view) */
	/*
	 * protocol=dpdk only (the kernel backend ignores them). backend_arg: the dpdk_net
	 * lcore (struct dn_lcore) this instance runs on, set up by the caller. When it is
	 * NULL the backend brings up EAL and a port itself from eal_argc/eal_argv and
	 * local_ip/local_prefix/local_gateway (a standalone instance, as in wharf-perf), so a
	 * program written against this header runs on either protocol unchanged.
	 */
	void *backend_arg;
	int eal_argc;
	char **eal_argv;
	uint32_t local_ip;      /* host byte order */
	uint8_t local_prefix;
	uint32_t local_gateway; /* host byte order; 0 = none (off-subnet peers unreachable) */
	uint16_t mtu;           /* standalone dpdk port MTU; 0 = 1500 (TCP MSS = MTU - 40) */
	uint32_t nb_mbufs;      /* standalone dpdk port mempool size; 0 = sized by dpdk_net */
};

void tl_config_default(struct tl_config *cfg);
/* 0, or -EINVAL with *why naming the bad field (a static string). */
/*
 * The environment variables the transport reads (dpdk_net's under it included), each a
 * decimal integer in lo..hi; unset or empty means the default. tl_config_check refuses a
 * value outside them, with why naming the variable and its range.
 */
struct tl_env_knob {
	const char *name;
	unsigned lo, hi;
	const char *why;
};
extern const struct tl_env_knob tl_env_knobs[];
extern const unsigned tl_env_n_knobs;
/* Variable name of tl_env_knobs: true with its value when set and in its range. */
bool tl_env_get(const char *name, unsigned *out);
/* 0 when cfg and the environment (tl_env_knobs) are usable, else -EINVAL with why set. */
int tl_config_check(const struct tl_config *cfg, const char **why);
/* "kernel" | "dpdk" -> 0, else -EINVAL. */
int tl_protocol_parse(const char *s, enum tl_protocol *out);
const char *tl_protocol_name(enum tl_protocol p);

/*
 * Creates an instance. -EINVAL for a bad config (see tl_config_check), -EPROTONOSUPPORT
 * when the protocol's backend is not part of this build, -ENOMEM, or the backend's error.
 */
int tl_create(const struct tl_config *cfg, struct tl **out);
/*
 * Closes every connection (closed callbacks run with -ECONNABORTED, queued sends
 * complete with -ECANCELED) and frees all, held messages included: their views are
 * invalid after it. NULL is a no-op.
 */
void tl_destroy(struct tl *tl);
/*
 * One round: flush queued sends, wait up to timeout_us (0: do not wait, <0: until an
 * event) for events, run their callbacks, flush again, then run deferred close
 * callbacks. Returns the number of events handled, or -errno.
 */
int tl_poll(struct tl *tl, int64_t timeout_us);

/*
 * Wakes the instance if its thread sleeps in tl_poll (its poll then returns at once); the
 * one call of this API that any thread may make, for work handed to the instance's thread
 * from elsewhere. kernel: an eventfd in the epoll set (a syscall per call); dpdk: the
 * lcore's eventfd (dn_lcore_wake; a back-off sleep without Rx interrupts is bounded).
 */
void tl_wake(struct tl *tl);

/*
 * Connection callbacks. msg's view (and the memory under it) is valid until msg returns,
 * unless the receiver calls tl_msg_hold on it. After connected(c, <0) or closed(c, ...)
 * returns, c is freed. Reasons (negative errno):
 *   0              peer closed the stream at a message boundary
 *   -ECONNABORTED  closed locally (tl_close, tl_abort, tl_destroy)
 *   -ECONNRESET    reset by the peer, or a socket error
 *   -EPROTO        peer closed the stream inside a message
 *   -EBADMSG       malformed stream (bad magic, type 0): refused
 *   -EMSGSIZE      a header announced a body above max_body: refused
 *   -ENOBUFS       a receive limit (rx_max_bufs, max_held_msgs, max_msg_segs) was hit
 *   -ETIMEDOUT     retransmission limit (dpdk)
 * tl_conn_why gives the human text of the last reason.
 */
struct tl_conn_ops {
	void (*connected)(struct tl_conn *c, int status); /* 0, or -errno: c is gone after */
	void (*msg)(struct tl_conn *c, const struct tl_msg_view *m);
	void (*closed)(struct tl_conn *c, int reason);
};
typedef void (*tl_accept_fn)(struct tl_listener *l, struct tl_conn *c);

/*
 * Listens on ip:port (host byte order; port 0 picks one, see tl_listener_port).
 * Accepted connections get ops and ctx as their context; accepted runs for each and may
 * replace the context or close the connection.
 */
int tl_listen(struct tl *tl, uint32_t ip, uint16_t port, const struct tl_conn_ops *ops,
	      tl_accept_fn accepted, void *ctx, struct tl_listener **out);
uint16_t tl_listener_port(const struct tl_listener *l);
void *tl_listener_ctx(const struct tl_listener *l);
/* Stops listening. Connections already accepted are not affected. NULL is a no-op. */
void tl_unlisten(struct tl_listener *l);

/*
 * Where a peer's RSS puts a connection. A wharf PS on a port whose queues are hashed with
 * dpdk_net's RSS (dn.h: its symmetric Toeplitz key, a redirection table of reta_size
 * entries round robin over its queues; the PS's health answer gives reta_size) serves lane
 * k's connections on queue k. tl_peer_rss tells tl so: connections it opens to ip:port from
 * now on take a local port whose hash puts them on the peer's queue `queue`, and, where our
 * own port hashes too, on our own queue; a port meeting both where one is free, else one
 * meeting the peer's, else as before. On kernel TCP the socket is bound, before its connect,
 * to such a port of the kernel's ephemeral range (not a reserved one), from the address the
 * route to ip gives; none free in 64 tries: the kernel picks. reta_size 0 forgets ip:port. 0, -EINVAL (queue >= queues, queues 0,
 * reta_size over 65536), -ENOSPC (TL_PEER_RSS_MAX peers known already).
 */
#define TL_PEER_RSS_MAX 4096 /* PS_MAX_NODES servers of PS_NET_MAX_LANES lanes */
int tl_peer_rss(struct tl *tl, uint32_t ip, uint16_t port, uint32_t reta_size, uint16_t queues,
		uint16_t queue);
/*
 * This instance's side of that: 0 with the table size, the queue count and the queue this
 * instance reads when its port hashes with dpdk_net's RSS over a queue per lcore; -ENOTSUP
 * otherwise (kernel TCP, one shared queue, a device that took another table).
 */
int tl_rss_layout(struct tl *tl, uint32_t *reta_size, uint16_t *queues, uint16_t *queue);

/*
 * fn(arg) runs in every tl_poll after the round's input and before the round's last flush,
 * so what it sends (a server's batched replies, an open fused frame) leaves in that flush,
 * with what the callbacks sent, rather than in a flush of its own. NULL fn: none.
 */
void tl_on_round_end(struct tl *tl, void (*fn)(void *arg), void *arg);

/* Starts an active open; ops->connected reports the outcome from tl_poll. */
int tl_connect(struct tl *tl, uint32_t ip, uint16_t port, const struct tl_conn_ops *ops,
	       void *ctx, struct tl_conn **out);
/*
 * Graceful close: nothing more is delivered or taken from the send queue; queued sends
 * complete with -ECANCELED and closed(c, -ECONNABORTED) runs from the next tl_poll. What
 * the backend had already begun to send still goes out (dpdk: from a copy, the caller's
 * memory is free at the completion as ever; kernel: from the socket buffer), then the
 * stream ends with a FIN. -ENOTCONN when c is already closing.
 */
int tl_close(struct tl_conn *c);
/*
 * Abortive close: the connection is reset (RST) now, nothing queued is sent; queued
 * sends complete with -ECANCELED and closed(c, -ECONNABORTED) runs from the next tl_poll.
 * -ENOTCONN when c is already closing.
 */
int tl_abort(struct tl_conn *c);
void tl_conn_set_ctx(struct tl_conn *c, void *ctx);
void *tl_conn_ctx(const struct tl_conn *c);
struct tl *tl_conn_tl(const struct tl_conn *c);
const char *tl_conn_why(const struct tl_conn *c);
/*
 * Bytes (headers included) handed to tl_send on c and not yet completed: queued, being
 * written, or (dpdk) sent and not yet acknowledged. 0 means the connection's send side is
 * idle; fuse's autocorking batches small messages only while this is non-zero.
 */
uint64_t tl_conn_tx_pending(const struct tl_conn *c);

/*
 * Sends a message: header fields from h (magic, version and body_len are set here; the
 * body length is the sum of iov), body read from the caller's memory in iov (zero copy:
 * the iov array itself is copied, the bytes are not). On 0 the bytes stay referenced
 * until done(arg, status) runs, exactly once, from tl_poll: status 0 once the backend is
 * done with them (kernel: written to the socket; dpdk: acknowledged), -ECANCELED or the
 * close reason if the connection closed first. On -errno nothing was queued, done never
 * runs and the memory is the caller's: -ENOTCONN (closing), -EMSGSIZE (body above
 * max_body), -ENOBUFS (tx_max_msgs or tx_max_bytes reached: poll and retry), -E2BIG
 * (iovcnt above max_msg_segs), -EINVAL (bad type). done may be NULL.
 */
typedef void (*tl_send_done_fn)(void *arg, int status);
int tl_send(struct tl_conn *c, const struct tl_msg_hdr *h, const struct tl_iov *iov,
	    uint32_t iovcnt, tl_send_done_fn done, void *arg);
/*
 * Sends a small message whose body (at most TL_SEND_COPY_MAX bytes, else -EMSGSIZE) is
 * copied before this returns: nothing stays referenced and there is no completion. For
 * replies built on the stack and echoes of received bytes: it spares the caller a hold
 * on the received message (tl_msg_hold) and a completion per message. Other errors as
 * tl_send. On dpdk, with nothing queued ahead on c, the message goes straight into the
 * connection's send buffer and is not counted by tl_conn_tx_pending; otherwise it is
 * queued (and counted) like any other.
 */
#define TL_SEND_COPY_MAX 128u
int tl_send_copy(struct tl_conn *c, const struct tl_msg_hdr *h, const struct tl_iov *iov,
		 uint32_t iovcnt);
/*
 * Starts what is queued on c toward the wire now instead of at the next tl_poll: for a
 * sender with more to build, so the peer works on the first part while it does (fuse
 * pushes each full frame). Runs no callback: sends it finishes complete from the next
 * tl_poll, and a failure it meets closes c from there. Called from inside a callback
 * it does nothing (the round flushes c at its end). 0, or -ENOTCONN if c is closing.
 */
int tl_conn_push(struct tl_conn *c);
/*
 * Back-pressure for a receiver that cannot take more now: paused, the backend stops
 * taking c's bytes from the peer, so the peer's messages wait in the TCP window and then in
 * the peer's own send queue; resumed, reading goes on where it stopped. Messages already
 * read still arrive after the pause (kernel: the rest of the read in progress, at most
 * rx_buf_size bytes; dpdk: what the peer sent before the window shut, at most one receive
 * window), in order. A peer that closes or resets meanwhile is still noticed. 0, or
 * -ENOTCONN when c is not open.
 */
int tl_conn_rx_pause(struct tl_conn *c, bool paused);

/*
 * Sends a TL_TYPE_ERROR reply to req_id: body u32 code (positive errno) then text,
 * copied (at most TL_ERR_TEXT_MAX bytes of it). For upper layers answering a type they
 * do not know; transport itself answers unknown versions and transport types so.
 */
#define TL_ERR_TEXT_MAX 96u
int tl_send_error(struct tl_conn *c, uint64_t req_id, int code, const char *text);

/*
 * Keeps a received message (its view and every byte under it) valid after the msg
 * callback returns; only callable on a view handed to msg, from inside msg or while
 * already held. Each hold is undone by one tl_msg_release. The view pointer itself
 * stays valid too: tl_msg_view_of returns it. Held messages count against
 * max_held_msgs and rx_max_bufs, so hold briefly.
 */
struct tl_msg *tl_msg_hold(const struct tl_msg_view *m);
const struct tl_msg_view *tl_msg_view_of(const struct tl_msg *m);
void tl_msg_release(struct tl_msg *m);

/* Counters of one instance (monotonic). */
struct tl_stats {
	uint64_t msgs_in, bytes_in;    /* delivered messages, body bytes */
	uint64_t msgs_out, bytes_out;  /* completed sends, header+body bytes */
	uint64_t rejected;             /* unknown version/type answered with TL_TYPE_ERROR */
	uint64_t refused_streams;      /* connections closed for a malformed stream or a limit */
	uint64_t refused_conns;        /* accepts refused at max_conns */
	uint64_t refused_conns_nomem;  /* accepts refused while the mempool runs low (dpdk) */
	uint64_t rx_dropped_nomem;     /* data segments dropped for the peer to resend while the
					* mempool ran critically low (dpdk) */
	uint64_t err_replies_dropped;  /* error replies that found the tx queue full */
};
void tl_stats_get(const struct tl *tl, struct tl_stats *out);

/*
 * Memory for message bodies that this instance's backend sends without copying: with
 * protocol=dpdk, DPDK memory on the lcore's NUMA socket (the only memory a vhost-user peer
 * or a NIC can read); with protocol=kernel, the C heap. 64-byte aligned; NULL when out of
 * memory. Bodies in other memory are still sent, copied into packet buffers on the way.
 * tl_buf_free(tl, NULL) is a no-op.
 */
void *tl_buf_alloc(struct tl *tl, size_t size);
void tl_buf_free(struct tl *tl, void *p);

/* Parses dotted IPv4 "a.b.c.d" to host order: 0 or -EINVAL. */
int tl_ip_parse(const char *s, uint32_t *out);

/* ---- lanes: a process's network threads over one data port (tl_lanes.c) ---- */

#define TL_LANES_MAX 16u

/*
 * A process's lanes: lane k drives its own struct tl from its own thread. protocol=dpdk
 * brings up EAL (eal_argc/eal_argv), one port on local_ip/local_prefix/local_gateway/mtu
 * with a queue per lane, and runs lane k on EAL's k-th lcore; protocol=kernel runs lane k > 0
 * on a pthread. The layers above never touch EAL, ports or lcores.
 */
struct tl_lanes;

struct tl_lanes_config {
	enum tl_protocol protocol;
	uint32_t lanes;          /* wanted, 1..TL_LANES_MAX; dpdk grants at most EAL's lcores */
	int eal_argc;            /* dpdk: EAL's arguments */
	char **eal_argv;
	uint32_t local_ip;       /* dpdk: the port's address, host byte order */
	uint8_t local_prefix;
	uint32_t local_gateway;  /* host byte order; 0 = none */
	uint16_t mtu;            /* 0 = 1500 */
};

/* -errno with one line in err; nothing left running on failure. */
int tl_lanes_create(const struct tl_lanes_config *cfg, struct tl_lanes **out, char *err,
		    size_t errlen);
/* No-op for NULL. After tl_lanes_join; closes the lanes' lcores, the port and EAL. */
void tl_lanes_destroy(struct tl_lanes *g);
/* The lanes granted: the wanted number, or EAL's lcores when it has fewer. */
uint32_t tl_lanes_count(const struct tl_lanes *g);
/*
 * True with protocol=dpdk: the lanes share one port, whose device may still hold any lane's
 * frames, so every lane stays until tl_lanes_port_stop and flushes after it.
 */
bool tl_lanes_shared_port(const struct tl_lanes *g);
/*
 * From lane k's own thread, before tl_create: what its struct tl_config's backend_arg must be
 * (dpdk: the lane's lcore, which lane 0 announces by ARP; kernel: NULL). 0 or -errno.
 */
int tl_lanes_open(struct tl_lanes *g, uint32_t k, void **backend_arg);
/* Lane k's frames waiting for the device go out (or, after the port stopped, are freed). */
void tl_lanes_flush(struct tl_lanes *g, uint32_t k);
/* After lane k's struct tl is destroyed. */
void tl_lanes_close(struct tl_lanes *g, uint32_t k);
/* Stops the shared port (dpdk): once every lane has flushed and sends no more. */
void tl_lanes_port_stop(struct tl_lanes *g);
/* The CPUs the lanes may run on: EAL's lcores (dpdk) or the process's affinity (kernel). */
void tl_lanes_cpus(const struct tl_lanes *g, cpu_set_t *cpus);
/*
 * Runs fn(arg) as lane k (1 <= k < count) on its own thread; lane 0 is the caller's. 0 or
 * -errno (then lane k does not run).
 */
int tl_lanes_launch(struct tl_lanes *g, uint32_t k, int (*fn)(void *), void *arg);
/* Waits for every launched lane's fn to return. */
void tl_lanes_join(struct tl_lanes *g);

#endif /* WHARF_TL_H */
