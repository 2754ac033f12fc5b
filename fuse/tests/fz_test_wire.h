/*
 * fz_test_wire.h — test helpers shared by fuse's cmocka groups: a fake output side that
 * records what the packer sends (copying it, as a wire would) and holds the completions
 * until the test acks them, and a byte builder for hand-made (malformed) frames.
 */
#ifndef WHARF_FZ_TEST_WIRE_H
#define WHARF_FZ_TEST_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "fuse/fz.h"

/* One message as the wire saw it: its header and a copy of its body. */
struct fzt_rec {
	struct tl_msg_hdr hdr;
	uint8_t *body;
	const uint8_t *first_base;  /* out->iov[0].base, to check zero copy */
	fz_done_fn done;
	void *done_arg;
	bool completed;
	uint64_t at;                /* the wire's clock when output took it */
};

struct fzt_wire {
	struct fzt_rec *recs;
	uint32_t n, cap;
	bool busy;            /* what wire_busy answers */
	uint32_t fail_next;   /* refuse this many outputs with -ENOBUFS */
	bool complete_now;    /* call done from inside output (a copying backend) */
	uint64_t now;         /* the test's fake clock, stamped on each record */
};

void fzt_wire_init(struct fzt_wire *w);
void fzt_wire_fini(struct fzt_wire *w);          /* completes what is pending, frees */
void fzt_wire_ops(struct fzt_wire *w, struct fz_peer_ops *ops);
void fzt_wire_complete_all(struct fzt_wire *w);   /* the acks arrive */

/* Unpacks every record in order into a flat list of delivered messages (copies). */
struct fzt_got {
	struct tl_msg_hdr hdr;
	uint8_t *body;
};
struct fzt_sink {
	struct fzt_got *got;
	uint32_t n, cap;
};
void fzt_sink_deliver(void *arg, const struct tl_msg_view *m,
		      const struct tl_msg_view *carrier);
void fzt_sink_fini(struct fzt_sink *s);

/*
 * Feeds rec to fz_unpack split into pieces of at most piece bytes (0: one piece).
 * Returns fz_unpack's result.
 */
int fzt_unpack_rec(struct fz_rx *rx, const struct fzt_rec *rec, uint32_t piece,
		   struct fzt_sink *sink, struct fz_rx_error *err);

/* A byte builder for frames made by hand. */
struct fzt_buf {
	uint8_t b[16384];
	uint32_t n;
};
void fzt_u8(struct fzt_buf *b, uint8_t v);
void fzt_varint(struct fzt_buf *b, uint64_t v);
void fzt_bytes(struct fzt_buf *b, const void *p, uint32_t n);

/* A view of a hand-made frame: type FZ_TYPE_FRAME, the given count and body. */
void fzt_frame_view(struct tl_msg_view *v, struct tl_iov *iov, const struct fzt_buf *b,
		    uint32_t count);

#endif /* WHARF_FZ_TEST_WIRE_H */
