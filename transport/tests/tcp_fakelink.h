/*
 * tcp_fakelink.h — a fake wire and a fake clock for TCP-lite unit tests (after lwIP's
 * test netif): two tl_tcp stacks joined by a link that copies every emitted segment,
 * checks its checksum, and can drop, duplicate, reorder, delay, corrupt or CE-mark it.
 * Also a small test application (fl_app) that streams a source buffer and records what
 * arrives, and a builder for hand-made segments. Shared by every transport test.
 */
#ifndef WHARF_TCP_FAKELINK_H
#define WHARF_TCP_FAKELINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tl_tcp.h"

#define FL_LOG_MAX 8192u
#define FL_CHUNK_RANDOM UINT32_MAX
#define FL_CHAIN_MAX 64u      /* buffers of a chained frame (the DPDK backend's DB_CHAIN_PIECES) */

/* One emitted segment as the wire saw it (for assertions). */
struct fl_seg {
	int from;                 /* node index 0 or 1 */
	uint8_t flags, ecn, hdr_len;
	uint16_t tso_segsz;       /* the emitted segment's device cut size (0: fits the MSS) */
	uint32_t seq, ack, len;
	uint16_t wnd;
	uint8_t hdr[TL_TCP_HDR_MAX];
	bool dropped;
	uint64_t at;              /* the clock when it was emitted */
};

struct fl_frame;
struct fl_link;

/* Return true to drop this segment (decided at emit time). */
typedef bool (*fl_filter_fn)(void *arg, const struct fl_seg *seg);

/* A test application on one node. */
struct fl_app {
	struct fl_link *link;
	int node;
	struct tl_tcp_conn *conn;
	int accepted, connected, closed, eof, sent_cbs;
	int closed_reason;
	bool refuse_accept;
	bool auto_recved;         /* call tl_tcp_recved for every byte at once */
	bool hold_pkts;           /* keep received packets until fl_app_release_held */
	void *held[256];
	uint32_t nheld;
	uint8_t *rx;              /* everything received, in order */
	size_t rx_len, rx_cap;
	const uint8_t *src;       /* what fl_app_pump sends */
	size_t src_len, src_off;
	uint32_t chunk;           /* bytes per tl_tcp_send (0: as much as fits,
				   * FL_CHUNK_RANDOM: 1 byte .. 64 KiB at random) */
	bool close_after_src;
	uint64_t sends, sends_done, sends_failed;
};

struct fl_link {
	struct tl_tcp_stack *stack[2];
	uint32_t addr[2];
	struct fl_app app[2];
	uint64_t now;
	uint64_t delay_ns;        /* one way */
	uint64_t ns_per_kb;       /* serialization: ns per 1000 bytes, 0 = infinite rate */
	uint64_t busy_until[2];   /* per direction (indexed by sender) */
	uint32_t loss_ppm, dup_ppm, reorder_ppm, corrupt_ppm;
	uint32_t ce_queue_bytes;  /* mark ECT packets CE above this queue (0 = never) */
	fl_filter_fn filter;
	void *filter_arg;
	uint32_t iss[2];          /* ISS per node when iss_set (wraparound tests) */
	bool iss_set[2];
	bool hold_sbufs;          /* keep tl_tcp_sbuf references until delivery (like mbufs) */
	uint64_t rng;
	struct fl_frame *q, *q_tail; /* in flight, sorted by delivery time */
	uint64_t frames_live, frames_emitted, frames_dropped, frames_corrupt;
	uint64_t holds, releases;
	/* Chained frames (fl_inject_chain): buffer refcount updates, buffers whose count
	 * reached zero, and releases of a buffer already at zero (a double release). */
	uint64_t buf_ref_updates, bufs_freed, buf_underflows;
	struct fl_seg log[FL_LOG_MAX];
	uint32_t nlog;            /* total emitted (log is a ring) */
};

/* Defaults for tests: small buffers, 1 ms RTO floor, 10 us delay. */
void fl_cfg(struct tl_tcp_cfg *cfg);
/* Builds both stacks (cfg_b NULL: same as cfg_a). Returns 0 or -errno. */
int fl_init(struct fl_link *l, const struct tl_tcp_cfg *cfg_a, const struct tl_tcp_cfg *cfg_b,
	    uint64_t seed);
/*
 * cmocka fixtures: a fresh link with fl_cfg defaults and the given seed in *state; teardown
 * fails (-1) when fl_fini reports a leaked packet reference, frame or send descriptor.
 */
int fl_test_setup(void **state, uint64_t seed);
int fl_test_teardown(void **state);

/* Destroys both stacks and the frames in flight. Returns the number of leaked
 * packet references + frames + send descriptors (0 when clean). */
uint64_t fl_fini(struct fl_link *l);

/* Advances the clock by dur_ns, delivering frames and running timers on the way. */
void fl_run(struct fl_link *l, uint64_t dur_ns);
/* Runs until cond(arg) or max_ns passed; returns cond's final value. */
bool fl_run_until(struct fl_link *l, uint64_t max_ns, bool (*cond)(void *arg), void *arg);
/* Delivers only what is due now (no clock movement). */
void fl_deliver_due(struct fl_link *l);
/* Frames still in flight. */
uint32_t fl_in_flight(const struct fl_link *l);

/* Node 0 listens on port 80 with fl_app callbacks; node 1 connects from lport (0 = any). */
int fl_listen(struct fl_link *l, int node, uint16_t port);
int fl_connect(struct fl_link *l, int node, uint16_t lport, uint16_t rport);
/* Listens on node 0 and connects from node 1, runs until both sides are up. */
int fl_open_pair(struct fl_link *l);

/* Sends more of app->src while the connection takes it. */
void fl_app_pump(struct fl_app *a);
void fl_app_release_held(struct fl_app *a);
extern const struct tl_tcp_cbs fl_app_cbs;

/* Builds a TCP segment into buf (no checksum needed by the core). Returns its length. */
uint32_t fl_build(uint8_t *buf, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
		  uint8_t flags, uint16_t wnd, const uint8_t *opts, uint32_t optlen,
		  const uint8_t *payload, uint32_t plen);
/* Feeds a hand-made segment from node `from`'s address to node `to`. Returns input's rc. */
int fl_inject(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint8_t ecn);
/* Hands a segment (fl_build) to node `to` as a backend hands a frame held in several
 * buffers: its payload in `pieces` parts of equal size, each with the header (sequence
 * advanced) and rx.more set on all but the last. Returns the last tl_tcp_input result. */
int fl_inject_pieces(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint32_t pieces);
/* The same for a frame in a chain of `pieces` buffers (at most FL_CHAIN_MAX), one piece
 * each, whose every reference taken or dropped updates each buffer's count, as an mbuf
 * chain's does (buf_ref_updates, bufs_freed, buf_underflows count them). */
int fl_inject_chain(struct fl_link *l, int to, const uint8_t *seg, uint32_t len, uint32_t pieces);

/* Segments logged since index `since` matching from/flag mask; the last one in *out. */
uint32_t fl_count(const struct fl_link *l, uint32_t since, int from, uint8_t flags_all,
		  uint8_t flags_none, struct fl_seg *out);
/* The timestamp option of a logged segment: true and *tsval, *tsecr set when it has one. */
/* The option of this kind in g's header (pointing at its kind byte), or NULL. */
const uint8_t *fl_seg_opt(const struct fl_seg *g, uint8_t kind);
bool fl_seg_ts(const struct fl_seg *g, uint32_t *tsval, uint32_t *tsecr);
/* The SACK blocks of a logged segment into blocks[i][0..1] (start, end); returns how many. */
uint32_t fl_seg_sack(const struct fl_seg *g, uint32_t blocks[4][2]);

/* An fl_filter_fn (arg: struct fl_drop_nth) that drops node 1's data segments by their
 * order of transmission: the which[] -th (1-based; 0 = unused). */
struct fl_drop_nth {
	uint32_t seen;
	uint32_t which[4];
};
bool fl_drop_nth_filter(void *arg, const struct fl_seg *g);
/* Deterministic test data. */
void fl_fill_random(uint8_t *buf, size_t len, uint64_t seed);
uint64_t fl_rand(struct fl_link *l);

#endif /* WHARF_TCP_FAKELINK_H */
