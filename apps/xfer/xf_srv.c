/*
 * xf_srv.c — wharf-xfer's server: accepts connections, checks arrivals against the
 * generator (--verify) and/or echoes them (--echo), prints the JSON verdict at the end.
 *
 * Call chain: main -> xf_server -> tl_poll loop -> srv_on_msg -> xf_check_seq +
 *   xf_gen_match_view (verify) -> tl_msg_hold + tl_send (echo, zero copy from the
 *   received segments) ; srv_retry re-sends echoes a full send queue refused.
 *
 * An echo is never dropped: when tl_send says -ENOBUFS (the connection's send queue is
 * full) the held message waits in the connection's backlog, in order, and is retried
 * after each poll. The backlog is bounded; a peer that outruns it is refused (closed)
 * and the run fails, rather than anything being silently lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "apps/xfer/xf.h"

#define SRV_BACKLOG (1u << 16) /* echoes waiting for send-queue room, per connection */

struct xf_srv;

struct xf_sconn {
	struct xf_srv *s;
	struct tl_conn *c;
	uint32_t slot;          /* index in xf_srv.live */
	struct xf_check ck;
	struct tl_msg **pend;   /* backlog ring, allocated on first need */
	uint32_t ph, pn;
};

struct xf_srv {
	const struct xf_opts *o;
	struct tl *tl;
	struct xf_gen gen;
	struct xf_sconn **live;
	uint32_t nlive, accepted;
	struct xf_tally closed_sum; /* tallies of connections already gone */
	uint64_t received, echoed, errors;
	double t_first, t_last;
	double next_check; /* signals and time are looked at every 20 ms */
};

static void srv_echo_done(void *arg, int status)
{
	(void)status; /* a failed echo shows at the client, which checks every one */
	tl_msg_release(arg);
}

/* Sends the backlog in order until the queue is full again. */
static void srv_retry(struct xf_sconn *sc)
{
	while (sc->pn > 0) {
		struct tl_msg *held = sc->pend[sc->ph];
		const struct tl_msg_view *m = tl_msg_view_of(held);

		if (tl_send(sc->c, &m->hdr, m->iov, m->iovcnt, srv_echo_done, held) != 0)
			return;
		sc->s->echoed++;
		sc->ph = (sc->ph + 1) % SRV_BACKLOG;
		sc->pn--;
	}
}

static void srv_echo(struct xf_sconn *sc, const struct tl_msg_view *m)
{
	struct tl_msg *held = tl_msg_hold(m);
	int rc = -ENOBUFS;

	if (held == NULL) {
		sc->s->errors++;
		fprintf(stderr, "wharf-xfer: cannot hold a message for its echo\n");
		tl_close(sc->c);
		return;
	}
	if (sc->pn == 0)
		rc = tl_send(sc->c, &m->hdr, m->iov, m->iovcnt, srv_echo_done, held);
	if (rc == 0) {
		sc->s->echoed++;
		return;
	}
	if (rc == -ENOBUFS && sc->pend == NULL)
		sc->pend = malloc(SRV_BACKLOG * sizeof(*sc->pend));
	if (rc != -ENOBUFS || sc->pend == NULL || sc->pn == SRV_BACKLOG) {
		tl_msg_release(held);
		sc->s->errors++;
		fprintf(stderr, "wharf-xfer: echo refused (%s); closing the connection\n",
			rc == -ENOBUFS ? "backlog full" : strerror(-rc));
		tl_close(sc->c);
		return;
	}
	sc->pend[(sc->ph + sc->pn) % SRV_BACKLOG] = held;
	sc->pn++;
}

static void srv_on_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct xf_sconn *sc = tl_conn_ctx(c);
	struct xf_srv *s = sc->s;

	if (s->received++ == 0)
		s->t_first = xf_now();
	s->t_last = xf_now();
	if (s->o->verify) {
		if (xf_check_seq(&sc->ck, m)) {
			if (xf_gen_match_view(&s->gen, m->hdr.req_id, m))
				sc->ck.t.ok++;
			else
				sc->ck.t.bad++;
		}
	} else {
		sc->ck.t.received++;
		sc->ck.t.bytes += m->hdr.body_len;
	}
	if (s->o->echo)
		srv_echo(sc, m);
}

static void srv_on_closed(struct tl_conn *c, int reason)
{
	struct xf_sconn *sc = tl_conn_ctx(c);
	struct xf_srv *s = sc->s;

	/* A client that is done aborts its connections: a reset is how a run ends. */
	if (reason != 0 && reason != -ECONNRESET && reason != -ECONNABORTED) {
		s->errors++;
		fprintf(stderr, "wharf-xfer: server connection closed: %s (%s)\n", strerror(-reason),
			tl_conn_why(c));
	}
	while (sc->pn > 0) {
		tl_msg_release(sc->pend[sc->ph]);
		sc->ph = (sc->ph + 1) % SRV_BACKLOG;
		sc->pn--;
	}
	xf_tally_add(&s->closed_sum, &sc->ck.t);
	s->live[sc->slot] = s->live[--s->nlive];
	s->live[sc->slot]->slot = sc->slot;
	free(sc->pend);
	free(sc);
}

static const struct tl_conn_ops srv_ops = { NULL, srv_on_msg, srv_on_closed };

static void srv_on_accept(struct tl_listener *l, struct tl_conn *c)
{
	struct xf_srv *s = tl_listener_ctx(l);
	struct xf_sconn *sc = s->nlive < XF_MAX_CONNS * 2 ? calloc(1, sizeof(*sc)) : NULL;

	if (sc == NULL) {
		s->errors++;
		fprintf(stderr, "wharf-xfer: refusing a connection: too many or out of memory\n");
		tl_close(c);
		return;
	}
	sc->s = s;
	sc->c = c;
	sc->slot = s->nlive;
	s->live[s->nlive++] = sc;
	s->accepted++;
	tl_conn_set_ctx(c, sc);
}

/* The run is over: signalled, out of time, or --count arrived and every echo left. */
static bool srv_done(struct xf_srv *s, double t0)
{
	const struct xf_opts *o = s->o;
	uint32_t i, pend = 0;

	if (xf_now() < s->next_check)
		return false;
	s->next_check = xf_now() + 0.02;
	if (o->seconds > 0 && xf_now() - t0 >= o->seconds) {
		fprintf(stderr, "wharf-xfer: --seconds %.0f: time is up\n", o->seconds);
		return true;
	}
	if (xf_stop_requested())
		return true;
	if (!o->have_count || s->received < o->count)
		return false;
	for (i = 0; i < s->nlive; i++)
		pend += s->live[i]->pn;
	return pend == 0;
}

/* After --count: lets the last ACKs and echoes leave until the clients hang up (≤ 2 s). */
static void srv_linger(struct xf_srv *s)
{
	double end = xf_now() + 2.0;

	while (s->nlive > 0 && xf_now() < end && tl_poll(s->tl, 10000) >= 0)
		for (uint32_t i = 0; i < s->nlive; i++)
			srv_retry(s->live[i]);
}

static int srv_report(struct xf_srv *s)
{
	const struct xf_opts *o = s->o;
	struct xf_tally sum = s->closed_sum;
	bool ok;

	for (uint32_t i = 0; i < s->nlive; i++)
		xf_tally_add(&sum, &s->live[i]->ck.t);
	/* With --count, what never arrived is missing too (a gap at a stream's end). */
	if (o->verify && o->have_count && sum.ok + sum.bad + sum.missing < o->count)
		sum.missing = o->count - sum.ok - sum.bad;
	ok = s->errors == 0 && sum.bad == 0 && sum.missing == 0 && sum.duplicated == 0 &&
	     (!o->have_count || s->received >= o->count);
	xf_print_json(stdout, "server", o, s->accepted, s->echoed, &sum, s->t_last - s->t_first, 0, ok);
	return ok ? 0 : 1;
}

int xf_server(const struct xf_opts *o, struct tl *tl)
{
	uint32_t ip = o->have_ip ? o->ip : 0x7f000001u;
	struct xf_srv s = { .o = o, .tl = tl };
	struct tl_listener *l;
	double t0 = xf_now();
	int rc;

	xf_gen_init(&s.gen, o->verify_seed, o->min_size, o->max_size);
	s.live = calloc(XF_MAX_CONNS * 2, sizeof(*s.live));
	if (s.live == NULL) {
		fprintf(stderr, "wharf-xfer: out of memory\n");
		return 1;
	}
	rc = tl_listen(tl, ip, o->port, &srv_ops, srv_on_accept, &s, &l);
	if (rc != 0) {
		fprintf(stderr, "wharf-xfer: --port %u: cannot listen: %s\n", o->port, strerror(-rc));
		free(s.live);
		return 1;
	}
	fprintf(stderr, "wharf-xfer: %s server on port %u%s%s\n", tl_protocol_name(o->proto),
		tl_listener_port(l), o->echo ? ", echoing" : "", o->verify ? ", verifying" : "");
	for (;;) {
		rc = tl_poll(tl, 20000);
		if (rc < 0) {
			fprintf(stderr, "wharf-xfer: poll: %s\n", strerror(-rc));
			s.errors++;
			break;
		}
		for (uint32_t i = 0; i < s.nlive; i++)
			srv_retry(s.live[i]);
		if (srv_done(&s, t0))
			break;
	}
	if (o->have_count && s.received >= o->count)
		srv_linger(&s);
	rc = srv_report(&s);
	tl_unlisten(l);
	/* Connections still open close in tl_destroy; their callbacks must find s alive. */
	tl_destroy(tl);
	free(s.live);
	return rc;
}
