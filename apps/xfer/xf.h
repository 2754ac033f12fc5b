/*
 * xf.h — wharf-xfer's internals: the deterministic message generator, the in-order
 * checker, the options and the two roles (client, server).
 *
 * Call chain: main.c (xf_parse) -> xf_client | xf_server (xf_run.c, xf_srv.c) ->
 *   tl_poll loop -> callbacks -> xf_gen_* / xf_check_msg (xf_gen.c) -> tl_send.
 *
 * Every message on a wharf-xfer stream carries in its 32-byte header:
 *   type     XF_TYPE
 *   req_id   the message's global index i (0, 1, 2, ...)
 *   table_id the sending connection's number j (0..C-1)
 *   key_count  the number of connections C: connection j sends i = j, j+C, j+2C, ...
 * so a receiver knows, per connection, which index must come next.
 */
#ifndef WHARF_XF_H
#define WHARF_XF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "transport/tl.h"

#define XF_TYPE 201 /* a ps_core-range type nobody else interprets */
#define XF_MAX_CONNS 1024
#define XF_WINDOW_BYTES (8u << 20) /* body bytes in flight per connection */
#define XF_WINDOW_MSGS 1024u       /* messages in flight per connection */

/* ---- generator ----------------------------------------------------------------------- */

/*
 * The body of message i under seed s is a pure function of (s, i): its first 8 bytes
 * are i (little-endian, truncated for shorter bodies), every further 8-byte word is
 * splitmix64(key + w) with key derived from (s, i). Any byte can be computed on its
 * own, so a body is checked piece by piece as it sits in the received segments.
 */
struct xf_gen {
	uint64_t seed;
	uint32_t min_size, max_size;
	double log_span; /* ln(max - min + 1): sizes are log-uniform */
};

void xf_gen_init(struct xf_gen *g, uint64_t seed, uint32_t min_size, uint32_t max_size);
/* Body size of message i, log-uniform in [min_size, max_size]. */
uint32_t xf_gen_size(const struct xf_gen *g, uint64_t i);
/* Writes body bytes [0, len) of message i into buf. */
void xf_gen_fill(const struct xf_gen *g, uint64_t i, uint8_t *buf, uint32_t len);
/* True when p[0..len) equals body bytes [off, off+len) of message i. */
bool xf_gen_match(const struct xf_gen *g, uint64_t i, uint64_t off, const uint8_t *p, uint32_t len);
/* True when a received view is exactly message i (size and every byte). */
bool xf_gen_match_view(const struct xf_gen *g, uint64_t i, const struct tl_msg_view *m);
/* A stream of random sizes (for --send-file) from the seed alone. */
uint32_t xf_gen_size_only(uint64_t seed, uint64_t i, uint32_t min_size, uint32_t max_size);

/* ---- in-order checker (one per received stream) ---------------------------------------- */

struct xf_tally {
	uint64_t received;   /* messages that arrived, duplicates and bad ones included */
	uint64_t ok;         /* arrived once, in order, intact */
	uint64_t bad;        /* wrong size, wrong bytes, wrong header fields */
	uint64_t missing;    /* skipped over, or never arrived */
	uint64_t duplicated; /* an index at or below one already seen */
	uint64_t bytes;      /* body bytes received */
};

/*
 * Per received stream: which index must come next. xf_check_seq classifies an arrival
 * and returns true when it is the next message of its connection's sequence (the
 * caller then checks its content and counts ok or bad); false when it was counted as a
 * duplicate or as bad (not of this stream).
 */
struct xf_check {
	bool known;            /* next and stride learnt from the first arrival */
	uint64_t next, stride;
	struct xf_tally t;
};

bool xf_check_seq(struct xf_check *ck, const struct tl_msg_view *m);

/* ---- options ------------------------------------------------------------------------- */

struct xf_opts {
	bool server, echo, verify, have_ip, have_peer, have_count, have_seed;
	uint32_t ip, peer, conns, min_size, max_size;
	uint8_t prefix;
	uint16_t port;
	uint64_t count, seed, verify_seed;
	uint64_t abort_after_ms; /* client: reset every connection this long after connecting; 0 off */
	enum tl_protocol proto;
	const char *send_file, *recv_file;
	double seconds;
	int eal_argc;
	char **eal_argv;
};

void xf_parse(int argc, char **argv, struct xf_opts *o);

/*
 * Roles: each runs to the end, destroys tl and returns the exit status (0 everything
 * checked out, 1 not).
 */

int xf_tl_create(const struct xf_opts *o, struct tl **out);
bool xf_stop_requested(void);
double xf_now(void);
void xf_tally_add(struct xf_tally *sum, const struct xf_tally *t);
void xf_print_json(FILE *f, const char *role, const struct xf_opts *o, uint32_t conns,
		   uint64_t sent, const struct xf_tally *t, double secs, uint32_t aborted, bool ok);
int xf_client(const struct xf_opts *o, struct tl *tl);
int xf_server(const struct xf_opts *o, struct tl *tl);

#endif /* WHARF_XF_H */
