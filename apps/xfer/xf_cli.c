/*
 * xf_cli.c — wharf-xfer's client: sends generated messages or a file's bytes over C
 * connections, a window in flight on each, and with an echoing peer checks every echo
 * (exactly once, in order, intact) and writes echoed file bodies to --recv-file.
 *
 * Call chain: main -> xf_client -> cli_connect_all -> tl_poll loop -> cli_fill (tl_send
 *   from the ring or the mapped file) ; cli_on_msg (echo: xf_check_seq + content check,
 *   pwrite) and cli_done (send completed) -> cli_release -> cli_fill ; at the end
 *   cli_close_all (tl_close), or with --abort-after-ms cli_abort_all (tl_abort) first.
 *
 * Memory: a generated body lives in the connection's byte ring from tl_send until its
 * slot is released (send completed and, with --echo, echo checked): tl_send references
 * the bytes, it does not copy them. File bodies are sent straight from the mapping.
 * Slots are released in order; a slot's completion may arrive out of order.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/xfer/xf.h"

#define CLI_MAX_FILE_MSGS (1u << 26)

struct xf_cconn;

struct xf_slot {
	struct xf_cconn *cc;
	uint64_t idx;
	uint32_t len;
	uint64_t roff, rtake; /* ring offset of the body, bytes taken (wrap waste included) */
	bool done, echoed;
};

struct xf_cli;

struct xf_cconn {
	struct xf_cli *x;
	struct tl_conn *c;
	uint32_t j;
	int up;                 /* 1 connected, 0 connecting, -1 failed or closed */
	int status;
	uint64_t next_idx;      /* next index this connection sends: j, j+C, ... */
	struct xf_slot *slots;  /* FIFO of XF_WINDOW_MSGS */
	uint32_t sh, sn;
	uint64_t inflight_bytes;
	uint8_t *ring;
	uint64_t rsize, rhead, rtail, rused;
	struct xf_check ck;
};

struct xf_cli {
	const struct xf_opts *o;
	struct tl *tl;
	struct xf_gen gen;
	struct xf_cconn *cc;
	uint64_t total;         /* messages to send */
	const uint8_t *file;    /* --send-file mapping */
	uint64_t file_size;
	uint64_t *foff;         /* message k is file bytes [foff[k], foff[k+1]) */
	int rfd;                /* --recv-file, or -1 */
	bool running;
	uint64_t sent, completed, completed_bytes, errors;
	uint32_t aborted;       /* connections reset by --abort-after-ms */
};

static inline uint32_t msg_len(const struct xf_cli *x, uint64_t idx)
{
	return x->file != NULL ? (uint32_t)(x->foff[idx + 1] - x->foff[idx]) : xf_gen_size(&x->gen, idx);
}

/* ---- the byte ring ------------------------------------------------------------------- */

/* Takes len contiguous bytes at the ring's tail, wrapping when the end is too short. */
static int ring_take(struct xf_cconn *cc, uint32_t len, uint64_t *off, uint64_t *take)
{
	uint64_t waste = 0, at = cc->rtail;

	if (cc->rused == 0)
		cc->rhead = cc->rtail = at = 0;
	if (cc->rused > 0 && cc->rtail <= cc->rhead) {
		if (cc->rhead - cc->rtail < len)
			return -ENOBUFS;
	} else if (cc->rsize - cc->rtail < len) {
		if (cc->rhead < len)
			return -ENOBUFS;
		waste = cc->rsize - cc->rtail;
		at = 0;
	}
	*off = at;
	*take = waste + len;
	cc->rtail = at + len;
	cc->rused += waste + len;
	return 0;
}

/* ---- completion and release ---------------------------------------------------------- */

static void cli_fill(struct xf_cconn *cc);

/* Frees slots from the head while they are finished; then the window may refill. */
static void cli_release(struct xf_cconn *cc)
{
	bool echo = cc->x->o->echo;

	while (cc->sn > 0) {
		struct xf_slot *sl = &cc->slots[cc->sh];

		if (!sl->done || (echo && !sl->echoed))
			break;
		if (sl->rtake > 0) {
			cc->rhead = sl->roff + sl->len;
			cc->rused -= sl->rtake;
		}
		cc->inflight_bytes -= sl->len;
		cc->sh = (cc->sh + 1) % XF_WINDOW_MSGS;
		cc->sn--;
	}
	cli_fill(cc);
}

static void cli_done(void *arg, int status)
{
	struct xf_slot *sl = arg;
	struct xf_cli *x = sl->cc->x;

	sl->done = true;
	if (status == 0) {
		x->completed++;
		x->completed_bytes += sl->len;
	} else if (x->running && x->errors++ == 0) {
		/* The first failure says why; the rest of the window fails the same way. */
		fprintf(stderr, "wharf-xfer: send of message %" PRIu64 " failed: %s\n", sl->idx,
			strerror(-status));
	}
	cli_release(sl->cc);
}

/* ---- sending ------------------------------------------------------------------------- */

/* Queues one message; -ENOBUFS when the window, the ring or the send queue is full. */
static int cli_send_one(struct xf_cconn *cc)
{
	struct xf_cli *x = cc->x;
	uint64_t idx = cc->next_idx;
	uint32_t len = msg_len(x, idx);
	struct xf_slot *sl = &cc->slots[(cc->sh + cc->sn) % XF_WINDOW_MSGS];
	struct tl_msg_hdr h = { .type = XF_TYPE, .req_id = idx, .table_id = cc->j,
				.key_count = x->o->conns };
	uint64_t rtail = cc->rtail, rhead = cc->rhead, rused = cc->rused;
	struct tl_iov v;
	int rc;

	if (cc->sn == XF_WINDOW_MSGS || (cc->sn > 0 && cc->inflight_bytes + len > XF_WINDOW_BYTES))
		return -ENOBUFS;
	*sl = (struct xf_slot){ .cc = cc, .idx = idx, .len = len };
	if (x->file != NULL) {
		v.base = x->file + x->foff[idx];
	} else {
		if (len > 0 && ring_take(cc, len, &sl->roff, &sl->rtake) != 0)
			return -ENOBUFS;
		v.base = cc->ring + sl->roff;
		xf_gen_fill(&x->gen, idx, cc->ring + sl->roff, len);
	}
	v.len = len;
	rc = tl_send(cc->c, &h, &v, len > 0, cli_done, sl);
	if (rc != 0) {
		/* Nothing was queued: give the ring bytes back. */
		cc->rtail = rtail;
		cc->rhead = rhead;
		cc->rused = rused;
		return rc;
	}
	cc->sn++;
	cc->inflight_bytes += len;
	cc->next_idx += x->o->conns;
	x->sent++;
	return 0;
}

static void cli_fill(struct xf_cconn *cc)
{
	struct xf_cli *x = cc->x;

	while (x->running && cc->up == 1 && cc->next_idx < x->total) {
		int rc = cli_send_one(cc);

		/* -ENOTCONN: the connection is closing; cli_on_closed reports it. */
		if (rc == -ENOBUFS || rc == -ENOTCONN)
			return;
		if (rc != 0) {
			x->errors++;
			fprintf(stderr, "wharf-xfer: send: %s\n", strerror(-rc));
			return;
		}
	}
}

/* ---- receiving echoes ---------------------------------------------------------------- */

static bool cli_match_file(struct xf_cli *x, uint64_t idx, const struct tl_msg_view *m)
{
	uint64_t off = x->foff[idx];

	if (m->hdr.body_len != msg_len(x, idx))
		return false;
	for (uint32_t k = 0; k < m->iovcnt; k++) {
		if (memcmp(x->file + off, m->iov[k].base, m->iov[k].len) != 0)
			return false;
		if (x->rfd >= 0 && pwrite(x->rfd, m->iov[k].base, m->iov[k].len, (off_t)off) !=
					   (ssize_t)m->iov[k].len) {
			x->errors++;
			fprintf(stderr, "wharf-xfer: --recv-file: write: %s\n", strerror(errno));
		}
		off += m->iov[k].len;
	}
	return true;
}

static void cli_on_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct xf_cconn *cc = tl_conn_ctx(c);
	struct xf_cli *x = cc->x;
	uint64_t idx = m->hdr.req_id;

	if (!x->o->echo) {
		x->errors++;
		fprintf(stderr, "wharf-xfer: unexpected message from the peer (no --echo)\n");
		return;
	}
	if (xf_check_seq(&cc->ck, m)) {
		bool good = idx < x->total &&
			    (x->file != NULL ? cli_match_file(x, idx, m) : xf_gen_match_view(&x->gen, idx, m));
		if (good)
			cc->ck.t.ok++;
		else
			cc->ck.t.bad++;
		/* Every slot up to this index is answered (skipped ones counted missing). */
		for (uint32_t k = 0; k < cc->sn; k++) {
			struct xf_slot *sl = &cc->slots[(cc->sh + k) % XF_WINDOW_MSGS];
			if (sl->idx > idx)
				break;
			sl->echoed = true;
		}
	}
	cli_release(cc);
}

static void cli_on_connected(struct tl_conn *c, int status)
{
	struct xf_cconn *cc = tl_conn_ctx(c);

	cc->up = status == 0 ? 1 : -1;
	cc->status = status;
	if (status != 0)
		cc->c = NULL;
}

static void cli_on_closed(struct tl_conn *c, int reason)
{
	struct xf_cconn *cc = tl_conn_ctx(c);

	cc->up = -1;
	cc->c = NULL;
	if (cc->x->running) {
		cc->x->errors++;
		fprintf(stderr, "wharf-xfer: connection %u closed during the run: %s (%s)\n", cc->j,
			strerror(reason < 0 ? -reason : ECONNRESET), tl_conn_why(c));
	}
}

static const struct tl_conn_ops cli_ops = { cli_on_connected, cli_on_msg, cli_on_closed };

/* ---- setup --------------------------------------------------------------------------- */

/* Maps --send-file and cuts it into messages of seeded sizes. */
static int cli_map_file(struct xf_cli *x)
{
	const struct xf_opts *o = x->o;
	struct stat st;
	uint64_t n = 0, off = 0, cap = 1024;
	int fd = open(o->send_file, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "wharf-xfer: --send-file %s: %s\n", o->send_file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	x->file_size = (uint64_t)st.st_size;
	/* An empty file still maps to something valid to point at (no message is sent). */
	x->file = mmap(NULL, x->file_size ? x->file_size : 1, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (x->file == MAP_FAILED) {
		x->file = NULL;
		fprintf(stderr, "wharf-xfer: --send-file %s: mmap: %s\n", o->send_file, strerror(errno));
		return -1;
	}
	x->foff = malloc(cap * sizeof(*x->foff));
	while (x->foff != NULL) {
		uint64_t len = xf_gen_size_only(o->seed, n, o->min_size, o->max_size);
		if (n + 2 > cap) {
			uint64_t *p = cap < CLI_MAX_FILE_MSGS ? realloc(x->foff, 2 * cap * sizeof(*p)) : NULL;
			if (p == NULL)
				free(x->foff);
			x->foff = p;
			cap *= 2;
			if (p == NULL)
				break;
		}
		x->foff[n] = off;
		if (off >= x->file_size)
			break;
		off = off + len < x->file_size ? off + len : x->file_size;
		n++;
	}
	if (x->foff == NULL) {
		fprintf(stderr, "wharf-xfer: --send-file: more than %u messages or out of memory; "
				"raise --min-size\n", CLI_MAX_FILE_MSGS);
		return -1;
	}
	x->total = n;
	return 0;
}

static int cli_setup(struct xf_cli *x)
{
	const struct xf_opts *o = x->o;

	x->rfd = -1;
	xf_gen_init(&x->gen, o->seed, o->min_size, o->max_size);
	x->total = o->count;
	if (o->send_file != NULL && cli_map_file(x) != 0)
		return -1;
	if (o->recv_file != NULL) {
		x->rfd = open(o->recv_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (x->rfd < 0) {
			fprintf(stderr, "wharf-xfer: --recv-file %s: %s\n", o->recv_file, strerror(errno));
			return -1;
		}
	}
	x->cc = calloc(o->conns, sizeof(*x->cc));
	if (x->cc == NULL)
		return -1;
	for (uint32_t j = 0; j < o->conns; j++) {
		struct xf_cconn *cc = &x->cc[j];
		cc->x = x;
		cc->j = j;
		cc->next_idx = j;
		cc->slots = calloc(XF_WINDOW_MSGS, sizeof(*cc->slots));
		if (cc->slots == NULL)
			return -1;
		if (x->file == NULL) {
			cc->rsize = XF_WINDOW_BYTES + 2ull * o->max_size + 64;
			cc->ring = malloc(cc->rsize);
			if (cc->ring == NULL)
				return -1;
		}
	}
	return 0;
}

static void cli_teardown(struct xf_cli *x)
{
	if (x->cc != NULL)
		for (uint32_t j = 0; j < x->o->conns; j++) {
			free(x->cc[j].slots);
			free(x->cc[j].ring);
		}
	free(x->cc);
	free(x->foff);
	if (x->file != NULL)
		munmap((void *)(uintptr_t)x->file, x->file_size ? x->file_size : 1);
	if (x->rfd >= 0 && close(x->rfd) != 0) {
		x->errors++;
		fprintf(stderr, "wharf-xfer: --recv-file: close: %s\n", strerror(errno));
	}
}

/* Opens every connection, retrying refused ones for up to 10 s (server starting). */
static int cli_connect_all(struct xf_cli *x)
{
	const struct xf_opts *o = x->o;
	double deadline = xf_now() + 10.0;
	uint32_t j, up;
	int rc = 0;

	for (;;) {
		for (j = 0, up = 0; j < o->conns; j++) {
			struct xf_cconn *cc = &x->cc[j];
			if (cc->up == 1) {
				up++;
			} else if (cc->c == NULL) {
				cc->up = 0;
				rc = tl_connect(x->tl, o->peer, o->port, &cli_ops, cc, &cc->c);
				if (rc != 0)
					cc->status = rc;
			}
		}
		if (up == o->conns)
			return 0;
		if (xf_now() > deadline || xf_stop_requested())
			break;
		tl_poll(x->tl, 20000);
	}
	for (j = 0; j + 1 < o->conns && x->cc[j].up == 1; j++)
		;
	rc = x->cc[j].status;
	fprintf(stderr, "wharf-xfer: --peer: cannot connect to port %u: %s\n", o->port,
		strerror(rc < 0 ? -rc : ETIMEDOUT));
	return -1;
}

/* ---- the run ------------------------------------------------------------------------- */

/* A dead connection ends the run (as a failure); an abort run waits for its abort. */
static bool cli_finished(const struct xf_cli *x)
{
	bool all_done = true;

	for (uint32_t j = 0; j < x->o->conns; j++) {
		const struct xf_cconn *cc = &x->cc[j];
		if (cc->up == -1)
			return true;
		if (cc->up != 1 || cc->sn > 0 || cc->next_idx < x->total)
			all_done = false;
	}
	return all_done && x->o->abort_after_ms == 0;
}

static int cli_report(struct xf_cli *x, double secs)
{
	const struct xf_opts *o = x->o;
	struct xf_tally sum = { 0 };
	bool ok;

	for (uint32_t j = 0; j < o->conns; j++)
		xf_tally_add(&sum, &x->cc[j].ck.t);
	if (o->echo) {
		/* What was sent and never came back is missing. */
		if (sum.ok + sum.bad + sum.missing < x->sent)
			sum.missing = x->sent - sum.ok - sum.bad;
		ok = sum.ok == x->total && sum.bad == 0 && sum.missing == 0 && sum.duplicated == 0;
	} else {
		sum.bytes = x->completed_bytes;
		ok = true;
	}
	if (o->abort_after_ms != 0) /* cut short on purpose: what arrived must still be right */
		ok = sum.bad == 0 && sum.duplicated == 0 && x->aborted == o->conns;
	else
		ok = ok && x->sent == x->total && x->completed == x->total;
	ok = ok && x->errors == 0;
	xf_print_json(stdout, "client", o, o->conns, x->sent, &sum, secs, x->aborted, ok);
	return ok ? 0 : 1;
}

/*
 * --abort-after-ms: resets every connection still open (tl_abort sends the RST now); the
 * closed callbacks run from cli_close_all's polls, which also put the RSTs on the wire.
 */
static void cli_abort_all(struct xf_cli *x)
{
	for (uint32_t j = 0; j < x->o->conns; j++)
		if (x->cc[j].up == 1 && x->cc[j].c != NULL && tl_abort(x->cc[j].c) == 0)
			x->aborted++;
}

/*
 * Ends every connection gracefully (the peer reads its FIN after the last byte) and waits
 * up to 2 s for them to finish: tl_destroy would reset those still open.
 */
static void cli_close_all(struct xf_cli *x)
{
	double deadline = xf_now() + 2.0;
	bool open;

	for (uint32_t j = 0; j < x->o->conns; j++)
		if (x->cc[j].c != NULL)
			tl_close(x->cc[j].c);
	do {
		open = false;
		for (uint32_t j = 0; j < x->o->conns; j++)
			open |= x->cc[j].c != NULL;
		if (open && tl_poll(x->tl, 20000) < 0)
			break;
	} while (open && xf_now() < deadline);
}

int xf_client(const struct xf_opts *o, struct tl *tl)
{
	struct xf_cli x = { .o = o, .tl = tl };
	double t0 = 0, t1 = 0, next_check = 0;
	bool abort_due = false;
	int rc = 1;

	if (cli_setup(&x) != 0 || cli_connect_all(&x) != 0)
		goto out_destroy;
	x.running = true;
	t0 = t1 = xf_now();
	for (uint32_t j = 0; j < o->conns; j++)
		cli_fill(&x.cc[j]);
	while (!cli_finished(&x)) {
		rc = tl_poll(tl, 20000);
		if (rc < 0) {
			fprintf(stderr, "wharf-xfer: poll: %s\n", strerror(-rc));
			x.errors++;
			break;
		}
		t1 = xf_now();
		if (t1 < next_check)
			continue;
		next_check = t1 + 0.02;
		if (o->abort_after_ms != 0 && (t1 - t0) * 1e3 >= (double)o->abort_after_ms) {
			abort_due = true;
			break;
		}
		if (t1 - t0 >= o->seconds) {
			fprintf(stderr, "wharf-xfer: --seconds %.0f: time is up\n", o->seconds);
			break;
		}
		if (xf_stop_requested())
			break;
	}
	t1 = xf_now();
	x.running = false;
	if (abort_due)
		cli_abort_all(&x);
	rc = cli_report(&x, t1 - t0);
	cli_close_all(&x);
out_destroy:
	/* Callbacks run inside tl_destroy (cancelled sends): the slots must still exist. */
	tl_destroy(tl);
	cli_teardown(&x);
	return rc;
}
