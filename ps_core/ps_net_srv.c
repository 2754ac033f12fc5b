/*
 * ps_net_srv.c — the server half of the PS network side: listens on this node's data endpoint,
 * hands each request to ps_handle on this lcore's handler, and sends the reply from a
 * pooled buffer that stays lent to the transport until the send completes (zero copy, no
 * allocation once the pool is warm). Shutdown drains before it checkpoints, so every push
 * is either acknowledged and saved, or neither (its client resends it to the next server).
 * With the write-ahead log on (ps_core logs every push before its reply), the serve loop
 * also checkpoints to --ckpt every ckpt_interval_s and whenever the log passes wal_max_mb
 * (each such save deletes the log it covers: the log stays bounded), and msyncs the log
 * every wal_sync_ms.
 *
 * Back-pressure: a lane has cl->reply_buffers reply buffers, and a connection holds at most
 * its fair share of them (conn_full). A request that finds none for it waits on its
 * connection (bytes held, in order), and the connection is not read (tl_conn_rx_pause)
 * until the buffers that come back have served what waits. So an overloaded PS slows its
 * clients down through TCP; it never refuses or drops for lack of room. Each connection
 * keeps its push order (ps_handle_ordered): pushes pipelined behind one refused for a retry
 * wait for it.
 *
 * Call chain: ps_net_serve_loop -> ps_net_poll -> fz_net_poll -> ps_net_on_msg (ps_net.c)
 *   -> ps_net_srv_handle -> ps_handle_ordered -> ps_net_send_buf -> fz_conn_send -> ... -> ps_net_buf_done;
 *   ps_net_poll -> ps_net_srv_deferred -> (the same from ps_handle_ordered on).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_core/ps_net_pvt.h"

#define PS_NET_DRAIN_US 5000000u

/*
 * WHARF_TEST_DROP_GEO_REPLY=N (tests only): every N-th GEO-pull reply this lane builds is
 * dropped and its connection closed, so the integration tests can lose replies on demand.
 */
static int test_knobs(struct ps_net *n, char *err, size_t errlen)
{
	const char *v = getenv("WHARF_TEST_SAVE_DELAY_MS");
	unsigned every, ms;
	int rc;

	/* WHARF_TEST_SAVE_DELAY_MS=N (tests only): the checkpoint writer waits N ms first, as
	 * a slow disk would, so a test can see lane 0 serve while a checkpoint is written. */
	if (v != NULL) {
		if ((rc = ps_parse_uint(v, 0, 600000, &ms, "WHARF_TEST_SAVE_DELAY_MS", err,
					errlen)) != 0)
			return rc;
		n->test_save_delay_ms = ms;
		PS_LOG(WARNING, "%s: lane %u: test knob WHARF_TEST_SAVE_DELAY_MS: each checkpoint "
		       "is written %u ms late", n->name, n->lane, ms);
	}
	v = getenv("WHARF_TEST_DROP_GEO_REPLY");
	if (v == NULL)
		return 0;
	if ((rc = ps_parse_uint(v, 1, 1000000, &every, "WHARF_TEST_DROP_GEO_REPLY", err, errlen)) != 0)
		return rc;
	n->geo_drop_every = every;
	PS_LOG(WARNING, "%s: lane %u: test knob WHARF_TEST_DROP_GEO_REPLY: every %u%s GEO-pull "
	       "reply is dropped and its connection closed", n->name, n->lane, every,
	       every == 1 ? "st" : every == 2 ? "nd" : every == 3 ? "rd" : "th");
	return 0;
}

/* The test knob above: true when this GEO-pull reply is to be lost (connection closed). */
static bool test_drop_geo_reply(struct ps_net_conn *c, const struct tl_msg_hdr *h)
{
	struct ps_net *n = c->n;

	if (n->geo_drop_every == 0 || h->type != PS_T_GEO_PULL_R ||
	    ++n->geo_replies % n->geo_drop_every != 0)
		return false;
	n->geo_dropped++;
	PS_LOG(NOTICE, "%s: test knob: GEO-pull reply %" PRIu64 " dropped (%" PRIu64 " so far), "
	       "its connection closed", n->name, n->geo_replies, n->geo_dropped);
	fz_conn_close(c->fc);
	return true;
}

int ps_net_serve(struct ps_net *n, struct ps_server *ps, struct ps_handler *h,
		   const struct ps_server_config *cfg, const char *ckpt_path, char *err,
		   size_t errlen)
{
	const struct ps_cluster *cl = n->cl;
	const struct ps_endpoint *data = &cl->self_data, *ctl = &cl->ps[cl->task_index];
	uint32_t ip, cip;
	uint16_t port;
	int rc;

	if (!n->is_ps)
		return ps_errf_rc(err, errlen, -EINVAL, "this node's role is %s, not ps",
			       ps_role_name(cl->role));
	if ((rc = ps_net_endpoint_ip(data, &ip, err, errlen, "data endpoint")) != 0 ||
	    (rc = ps_net_endpoint_ip(ctl, &cip, err, errlen, "control endpoint")) != 0)
		return rc;
	if ((rc = test_knobs(n, err, errlen)) != 0)
		return rc;
	n->ps = ps;
	n->h = h;
	n->scfg = cfg;
	if (n->lane == 0 && n->obs == NULL && (rc = ps_obs_create(ps, cfg, &n->obs)) != 0)
		PS_LOG(WARNING, "%s: no PS telemetry (/wharf/ps): %s", n->name, strerror(-rc));
	if (n->lane == 0)
		n->obs_count = n->obs;
	snprintf(n->ckpt, sizeof(n->ckpt), "%s", ckpt_path ? ckpt_path : "");
	n->wal_on = cfg->wal_dir != NULL;
	n->ckpt_every_us = (uint64_t)cl->ckpt_interval_s * 1000000u;
	n->next_ckpt_us = ps_net_now_us() + n->ckpt_every_us;
	n->wal_max_bytes = (uint64_t)cl->wal_max_mb << 20;
	n->sync_every_us = (uint64_t)cl->wal_sync_ms * 1000u;
	n->next_sync_us = ps_net_now_us() + n->sync_every_us;
	/*
	 * Lane 0 serves the data endpoint. Lane k > 0 listens beside it: on DPDK the next ports
	 * of the node's own address (its lcore claims them), on kernel TCP a port the kernel
	 * picks. The health answer names them all (ps_net_lanes_layout).
	 */
	port = n->lane == 0 ? data->port : cl->protocol == PS_PROTO_KERNEL ? 0 :
	       (uint16_t)(data->port + n->lane);
	if (n->lane > 0 && cl->protocol != PS_PROTO_KERNEL && port <= data->port) {
		n->h = NULL;
		return ps_errf_rc(err, errlen, -ERANGE, "data port %u + lane %u is past 65535",
			       data->port, n->lane);
	}
	/* Kernel TCP's lane 0 listens once, on the control endpoint: data and control share it. */
	rc = fz_net_listen(n->fz, ip, port, &n->fzc, &ps_net_conn_ops, n->ctl_fz == n->fz && n->lane == 0 ?
			   ps_net_on_accept_either : ps_net_on_accept_data, n, &n->data_l);
	if (rc != 0) {
		n->h = NULL;
		return ps_errf_rc(err, errlen, rc, "data endpoint %s:%u (lane %u): cannot listen: %s",
			       data->host, port, n->lane, strerror(-rc));
	}
	n->data_port = fz_listener_port(n->data_l);
	if (n->ctl_fz != n->fz) {
		rc = fz_net_listen(n->ctl_fz, cip, ctl->port, &n->fzc_ctl, &ps_net_conn_ops,
				   ps_net_on_accept_ctl, n, &n->ctl_l);
		if (rc != 0) {
			fz_unlisten(n->data_l);
			n->data_l = NULL;
			n->h = NULL;
			return ps_errf_rc(err, errlen, rc, "control endpoint %s:%u: cannot listen: %s",
				       ctl->host, ctl->port, strerror(-rc));
		}
	}
	if (n->lane == 0) {
		struct ps_barrier_stats bs;
		ps_server_barrier_stats(ps, &bs, NULL, 0);
		PS_LOG(INFO, "%s: ps %u serving %u table%s, mode %s, %u worker%s: data %s:%u (%s), "
			"control %s:%u; state epoch %016" PRIx64 ", barrier timeout %u s (%s)", n->name,
			cl->task_index, cfg->n_tables, cfg->n_tables == 1 ? "" : "s",
			ps_job_mode_name(cl->mode), cfg->n_workers, cfg->n_workers == 1 ? "" : "s",
			data->host, data->port, ps_protocol_name(cl->protocol), ctl->host, ctl->port,
			bs.epoch, cl->barrier_timeout_s, ps_policy_name(cl->barrier_policy));
	}
	return 0;
}

/*
 * Sync barriers answered when they are done. A worker's barrier query of a step that is not
 * complete yet is parked here, unanswered, instead of being told "not yet" (which made it
 * sleep out its poll's timeout, then ask again): once a query completes a step, or every
 * PS_NET_BAR_RECHECK_US (a timeout's policy), the parked ones are asked again on their workers'
 * behalf (a barrier query is idempotent), and the ones done are answered at once. A query
 * parked for PS_NET_BAR_PARK_MAX_US gets its "not yet" after all, so a worker never waits long
 * enough on one request to take its server for stalled (request_timeout_s).
 */
#define PS_NET_BAR_RECHECK_US 10000u
#define PS_NET_BAR_PARK_MAX_US 100000u

struct ps_net_bar {
	struct ps_net_bar *next;
	struct ps_net_conn *c;
	uint64_t since_us;
	struct tl_msg_hdr hdr;
	uint8_t body[PS_BARRIER_BODY];
};

/* Is this reply a barrier's "not yet"? */
static bool bar_not_done(const struct ps_net_buf *b, const struct tl_msg_hdr *h)
{
	return h->type == PS_T_BARRIER_R && h->body_len >= 24 &&
	       tl_ld32(b->data + TL_MSG_HDR_LEN + 16) == 0;
}

/* Parks m (a barrier query whose answer was "not yet"); false without memory for it. */
static bool bar_park(struct ps_net_conn *c, const struct tl_msg_view *m, struct ps_net_bar *r)
{
	struct ps_net *n = c->n;

	if (m->hdr.body_len != PS_BARRIER_BODY)
		return false;
	if (r == NULL) {
		if ((r = malloc(sizeof(*r))) == NULL) /* one per waiting worker, not per packet */
			return false;
		r->c = c;
		r->since_us = ps_net_now_us();
		r->hdr = m->hdr;
		if (tl_view_copy(m, 0, r->body, PS_BARRIER_BODY) != 0) {
			free(r);
			return false;
		}
	}
	r->next = n->bars;
	n->bars = r;
	n->bars_parked++;
	return true;
}

/* Answers m from reply buffer b (taken by the caller); the reply stays lent until sent. A
 * barrier's "not yet" is parked instead when park allows (r: the record it came from). */
static void serve_q(struct ps_net_conn *c, const struct tl_msg_view *m, struct ps_net_buf *b, bool park,
		    struct ps_net_bar *r)
{
	struct ps_net *n = c->n;
	struct ps_reply rep;
	struct tl_msg_hdr h;
	int rc;

	rep.buf = b->data;
	rep.cap = n->buf_size;
	rep.len = 0;
	rc = ps_handle_ordered(n->h, &c->order, m, &rep);
	c->reqs++;
	n->srv_reqs++;
	ps_obs_count(n->obs_count, n->lane, m->hdr.type, m->hdr.table_id, m->hdr.key_count, rc);
	if (rc < 0) {
		n->srv_errors++;
		c->errors++;
	}
	if (rep.len < TL_MSG_HDR_LEN || tl_msg_hdr_decode(b->data, UINT32_MAX, &h) != 0 ||
	    test_drop_geo_reply(c, &h)) {
		ps_net_buf_put(b);
		free(r);
		return;
	}
	if (m->hdr.type == PS_T_BARRIER && h.type == PS_T_BARRIER_R) {
		if (!bar_not_done(b, &h)) {
			n->bars_due = true; /* a step done: the parked queries are answered now */
		} else if (park && bar_park(c, m, r)) {
			ps_net_buf_put(b);
			return;
		}
	}
	free(r);
	n->srv_inflight++;
	b->owner = c;
	c->out++;
	if (ps_net_send_buf(c, b, &h, true) != 0) {
		ps_net_buf_done(b, -ENOTCONN);
		c->errors++;
		return;
	}
	c->replies++;
}

static void serve(struct ps_net_conn *c, const struct tl_msg_view *m, struct ps_net_buf *b)
{
	serve_q(c, m, b, !c->n->draining, NULL);
}

/*
 * The parked barrier queries asked again (after a step was done, or every
 * PS_NET_BAR_RECHECK_US): the done ones answered, the others parked again until
 * PS_NET_BAR_PARK_MAX_US, then answered "not yet". all: answer every one (draining).
 */
void ps_net_srv_bars(struct ps_net *n, bool all)
{
	uint64_t now = ps_net_now_us();
	struct ps_net_bar *r, *list;

	if (n->bars == NULL || (!all && !n->bars_due && now < n->next_bars_us))
		return;
	n->bars_due = false;
	n->next_bars_us = now + PS_NET_BAR_RECHECK_US;
	list = n->bars;
	n->bars = NULL;
	while ((r = list) != NULL) {
		struct tl_iov iov = { r->body, PS_BARRIER_BODY };
		struct tl_msg_view v = { .hdr = r->hdr, .iov = &iov, .iovcnt = 1 };
		struct ps_net_buf *b;
		list = r->next;
		if (r->c->fc == NULL || n->h == NULL) { /* its connection is going */
			free(r);
			continue;
		}
		if ((b = ps_net_buf_get(n)) == NULL) {
			r->next = n->bars; /* no buffer now: the next round */
			n->bars = r;
			continue;
		}
		serve_q(r->c, &v, b, !all && now - r->since_us < PS_NET_BAR_PARK_MAX_US, r);
	}
}

static uint32_t bars_count(const struct ps_net *n)
{
	uint32_t k = 0;

	for (const struct ps_net_bar *r = n->bars; r != NULL; r = r->next)
		k++;
	return k;
}

/* Lets go of c's parked barrier queries (c is going away). */
static void bars_drop(struct ps_net_conn *c)
{
	struct ps_net_bar **pp = &c->n->bars, *r;

	while ((r = *pp) != NULL) {
		if (r->c == c) {
			*pp = r->next;
			free(r);
		} else {
			pp = &r->next;
		}
	}
}

/*
 * The reply buffers one connection may hold: its fair share of the lane's, at most half of
 * them and never less than 16 (or all, when there are fewer), so a client that does not read
 * its replies stalls itself, not the others.
 */
static bool conn_full(const struct ps_net_conn *c)
{
	const struct ps_net *n = c->n;
	uint32_t share = n->pool_max / (n->srv_conns > 2 ? n->srv_conns : 2);
	uint32_t floor = n->pool_max < 16 ? n->pool_max : 16;

	return c->out >= (share > floor ? share : floor);
}

/*
 * No reply buffer for m (every one waits for its send to complete): m waits, its bytes held,
 * and c's reading stops until its waiting requests are served (ps_net_srv_deferred). Nothing is
 * refused for lack of room, and the requests of a connection stay in order. Without memory
 * for the record the connection closes: its client sends again what was not answered.
 */
static void defer(struct ps_net_conn *c, const struct tl_msg_view *m, const struct tl_msg_view *carrier)
{
	struct ps_net *n = c->n;
	struct ps_net_defer *d = malloc(sizeof(*d) + (size_t)m->iovcnt * sizeof(d->iov[0]));

	if (d == NULL || (d->hold = tl_msg_hold(carrier)) == NULL) {
		free(d);
		PS_LOG(ERR, "%s: connection %u: no memory to hold a request: closing it", n->name,
		       c->id);
		fz_conn_close(c->fc);
		return;
	}
	d->next = NULL;
	d->v = *m;
	memcpy(d->iov, m->iov, (size_t)m->iovcnt * sizeof(d->iov[0]));
	d->v.iov = d->iov;
	if (c->defer_tail != NULL) {
		c->defer_tail->next = d;
	} else {
		c->defer = d;
		n->srv_deferring++;
		(void)tl_conn_rx_pause(fz_conn_tl(c->fc), true);
	}
	c->defer_tail = d;
	n->srv_deferred++;
}

/* Pops and frees c's first deferred request (its bytes released); resumes c when none is left. */
static void defer_pop(struct ps_net_conn *c)
{
	struct ps_net_defer *d = c->defer;

	c->defer = d->next;
	tl_msg_release(d->hold);
	free(d);
	if (c->defer != NULL)
		return;
	c->defer_tail = NULL;
	c->n->srv_deferring--;
	if (c->fc != NULL)
		(void)tl_conn_rx_pause(fz_conn_tl(c->fc), false);
}

void ps_net_srv_drop_deferred(struct ps_net_conn *c)
{
	while (c->defer != NULL)
		defer_pop(c);
	if (c->n->bars != NULL)
		bars_drop(c);
}

void ps_net_srv_handle(struct ps_net_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier)
{
	struct ps_net *n = c->n;
	struct ps_net_buf *b;

	if (n->draining || n->h == NULL) {
		/* Not applied, not answered: the client resends it to the next server. */
		n->srv_dropped++;
		return;
	}
	if (c->defer != NULL || conn_full(c) || (b = ps_net_buf_get(n)) == NULL) {
		defer(c, m, carrier);
		return;
	}
	serve(c, m, b);
}

/*
 * Each round: the deferred requests, oldest first on each connection and one connection
 * after another, while buffers last; a draining server drops them unanswered instead.
 */
void ps_net_srv_deferred(struct ps_net *n)
{
	bool more = true;

	while (n->srv_deferring > 0 && more) {
		more = false;
		for (struct ps_net_conn *c = n->conns; c != NULL; c = c->next) {
			struct ps_net_buf *b;
			if (c->defer == NULL)
				continue;
			if (n->draining || n->h == NULL || c->fc == NULL) {
				n->srv_dropped++;
				defer_pop(c);
				more = true;
				continue;
			}
			if (conn_full(c))
				continue; /* its replies are not read: others go first */
			if ((b = ps_net_buf_get(n)) == NULL)
				return;
			serve(c, &c->defer->v, b);
			defer_pop(c);
			more = true;
		}
	}
}

void ps_net_srv_status(struct ps_net *n, char *out, size_t len, size_t *off)
{
	struct ps_table_stats st;
	uint32_t i;

#define OUT(...) do { if (*off < len) *off += (size_t)snprintf(out + *off, len - *off, __VA_ARGS__); } while (0)
	struct ps_net_lane_sum ls;

	ps_net_lanes_sum(n, &ls);
	OUT("server requests %" PRIu64 "  errors %" PRIu64 "  dropped_while_draining %" PRIu64
	    "  replies_in_flight %" PRIu64 "  deferred %" PRIu64 "  control %" PRIu64 "  lanes %u"
	    "  data_ops_remote %" PRIu64 "  ctl_ops_remote %" PRIu64 "\n", ls.reqs, ls.errors,
	    ls.dropped, ls.inflight, ls.deferred, n->ctl_reqs, n->lanes, ls.data_ops_remote,
	    ls.ctl_ops_remote);
	OUT("durability  log %s  log_bytes %" PRIu64 "  checkpoints %" PRIu64 "  failed %" PRIu64
	    "\n", n->wal_on ? n->scfg->wal_dir : "off", n->wal_on ? ps_server_wal_bytes(n->ps) : 0,
	    n->ckpts, n->ckpt_errors);
	if (n->cl->mode == PS_JOB_SYNC)
		OUT("barrier  queries_parked %" PRIu64 "  parked_now %u\n", n->bars_parked,
		    bars_count(n));
	for (i = 0; n->scfg != NULL && i < n->scfg->n_tables; i++) {
		const struct ps_table_config *t = &n->scfg->tables[i];
		memset(&st, 0, sizeof(st));
		ps_server_table_stats(n->ps, t->id, &st);
		OUT("table  %u %s  dim %u  rows %" PRIu64 "  bytes %" PRIu64, t->id,
		    t->kind == PS_TABLE_DENSE ? "dense " : "sparse", t->dim, st.rows, st.bytes);
		/* The memory policies' counters, for a table that has any (ps.h). */
		if (t->max_rows || t->max_bytes || t->admit_after > 1 || t->evict_after)
			OUT("  rows_cap %" PRIu64 "  rows_refused_cap %" PRIu64 "  admission_pending %"
			    PRIu64 "  admission_admitted %" PRIu64 "  admission_dropped %" PRIu64
			    "  admission_expired %" PRIu64 "  evicted %" PRIu64, st.rows_cap,
			    st.rows_refused_cap, st.admission_pending, st.admission_admitted,
			    st.admission_dropped, st.admission_expired, st.evicted);
		OUT("\n");
	}
#undef OUT
}

/* One idle round of a lane: its network, and (with other lanes) ops queued for its shards. */
int ps_net_lane_round(struct ps_net *n)
{
	int rc = ps_net_poll(n);

	/* Other lanes' ops on our shards, and a running save's copy of them. */
	if (n->lanes > 1 || n->save_job != NULL)
		ps_handler_poll(n->h);
	return rc;
}

static void *save_writer(void *arg)
{
	struct ps_net *n = arg;

	if (n->test_save_delay_ms > 0) {
		struct timespec d = { n->test_save_delay_ms / 1000,
				      (long)(n->test_save_delay_ms % 1000) * 1000000 };
		nanosleep(&d, NULL);
	}

	n->save_rc = ps_save_write(n->save_job, &n->save_rows, n->save_err, sizeof(n->save_err));
	/* release: partner, the acquire in save_progress. */
	atomic_store_explicit(&n->save_written, 1, memory_order_release);
	return NULL;
}

/*
 * A periodic checkpoint in steps, so lane 0 serves throughout: the cut (ps_save_start), the
 * copy-on-write copies made as the lanes poll, then the file written and fsynced by a
 * thread of its own. Called each round while a save runs; finish: wait it out (shutdown).
 */
static void save_progress(struct ps_net *n, bool finish)
{
	struct timespec ts = { 0, 100000 };

	while (n->save_job != NULL) {
		if (!n->save_th_on && ps_save_copied(n->save_job)) {
			if (pthread_create(&n->save_th, NULL, save_writer, n) == 0)
				n->save_th_on = true;
			else
				save_writer(n); /* no thread to be had: written here, once */
		}
		if (atomic_load_explicit(&n->save_written, memory_order_acquire)) {
			if (n->save_th_on)
				pthread_join(n->save_th, NULL);
			n->save_th_on = false;
			bool primary = strcmp(n->save_path, n->ckpt) == 0;
			ps_save_free(n->save_job);
			n->save_job = NULL;
			if (primary)
				n->next_ckpt_us = ps_net_now_us() + n->ckpt_every_us;
			if (n->save_rc != 0) {
				n->ckpt_errors++;
				PS_LOG(ERR, "%s: %s checkpoint %s: %s", n->name, n->save_why,
				       n->save_path, n->save_err);
			} else {
				n->ckpts++;
				PS_LOG(INFO, "%s: %s checkpoint %s: %" PRIu64 " rows%s", n->name,
				       n->save_why, n->save_path, n->save_rows,
				       n->wal_on && primary ? "; the log before it deleted" : "");
			}
			if (n->save_ctl != NULL) {
				char out[sizeof(n->save_err) + sizeof(n->save_path) + 64];
				if (n->save_rc != 0)
					snprintf(out, sizeof(out), "error save %s: %s", n->save_path,
						 n->save_err);
				else
					snprintf(out, sizeof(out), "ok saved %" PRIu64 " rows to %s",
						 n->save_rows, n->save_path);
				if (ps_net_ctl_reply(n->save_ctl, n->save_ctl_req, out) != 0)
					n->save_ctl->errors++;
				n->save_ctl = NULL;
			}
			return;
		}
		if (!finish)
			return;
		if (n->save_th_on)
			nanosleep(&ts, NULL);
		else
			ps_net_lane_round(n);
	}
}

/*
 * Stops taking requests, lets every reply complete, then writes the checkpoint. With
 * several lanes, lane 0 saves once every lane has drained, and the others keep serving
 * their rings meanwhile (the save's cut and copy reach their shards through them).
 */
static int drain_and_save(struct ps_net *n)
{
	uint64_t deadline = ps_net_now_us() + PS_NET_DRAIN_US, rows = 0;
	struct ps_net_group *g = n->g;
	struct ps_net_conn *c;
	char err[256];
	int rc = 0;

	n->draining = true;
	save_progress(n, true); /* a periodic checkpoint still running ends first */
	while (n->srv_inflight > 0 && ps_net_now_us() < deadline)
		if (ps_net_lane_round(n) < 0)
			break;
	if (n->srv_inflight > 0)
		PS_LOG(WARNING, "%s: lane %u: %" PRIu64 " replies still unsent after %u s; their "
			"pushes are in the checkpoint and will be answered as duplicates", n->name,
			n->lane, n->srv_inflight, PS_NET_DRAIN_US / 1000000u);
	if (g != NULL)
		ps_net_lanes_drained(n);
	if (n->lane == 0 && n->ckpt[0] != '\0') {
		rc = ps_save(n->h, n->ckpt, &rows, err, sizeof(err));
		if (rc != 0)
			PS_LOG(ERR, "%s: checkpoint %s: %s", n->name, n->ckpt, err);
		else
			PS_LOG(INFO, "%s: checkpoint %s: %" PRIu64 " rows", n->name, n->ckpt, rows);
	}
	if (g != NULL)
		ps_net_lanes_saved(n);
	fz_unlisten(n->data_l);
	n->data_l = NULL;
	for (c = n->conns; c != NULL; c = c->next)
		if (c->fc)
			fz_conn_close(c->fc);
	for (int i = 0; i < 20; i++)
		ps_net_poll(n);
	return rc;
}

/* Lane 0: the cut of a checkpoint to path; its copy and write go on as lane 0 serves. */
static int save_begin(struct ps_net *n, const char *path, const char *why, char *err,
		      size_t errlen)
{
	int rc = ps_save_start(n->h, path, &n->save_job, err, errlen);

	if (rc != 0) {
		n->save_job = NULL;
		return rc;
	}
	snprintf(n->save_path, sizeof(n->save_path), "%s", path);
	n->save_why = why;
	atomic_store_explicit(&n->save_written, 0, memory_order_relaxed); /* this job's, from now */
	save_progress(n, false);
	return 0;
}

/*
 * Every lane: msync of its own log every wal_sync_ms, unless the sync thread does it
 * (wal_bg_sync, the PS executables' way). Lane 0: a checkpoint to --ckpt on the timer or
 * when the log has grown past wal_max_mb.
 */
static void periodic_duties(struct ps_net *n)
{
	uint64_t now = ps_net_now_us(), logged = 0;
	const char *why = NULL;
	char err[256];
	int rc;

	if (n->wal_on && n->sync_every_us && !n->scfg->wal_bg_sync && now >= n->next_sync_us) {
		n->next_sync_us = now + n->sync_every_us;
		if ((rc = ps_handler_wal_sync(n->h)) != 0)
			PS_LOG(ERR, "%s: log msync: %s", n->name, strerror(-rc));
	}
	if (n->lane != 0 || n->ckpt[0] == '\0')
		return;
	if (n->save_job != NULL) {
		save_progress(n, false);
		return;
	}
	if (n->ckpt_every_us && now >= n->next_ckpt_us)
		why = "periodic";
	if (!why && n->wal_on && now >= n->next_walchk_us) {
		n->next_walchk_us = now + 100000;
		logged = ps_server_wal_bytes(n->ps);
		if (logged > n->wal_max_bytes)
			why = "log size";
	}
	if (!why)
		return;
	rc = save_begin(n, n->ckpt, why, err, sizeof(err));
	if (rc != 0) {
		n->next_ckpt_us = ps_net_now_us() + n->ckpt_every_us;
		n->ckpt_errors++;
		PS_LOG(ERR, "%s: %s checkpoint %s: %s", n->name, why, n->ckpt, err);
	}
}

int ps_net_srv_save_start(struct ps_net *n, const char *path, struct ps_net_conn *c, uint64_t req_id,
		      char *err, size_t errlen)
{
	int rc;

	if (n->h == NULL)
		return ps_errf_rc(err, errlen, -EAGAIN, "not serving yet");
	if (n->save_job != NULL)
		return ps_errf_rc(err, errlen, -EBUSY, "a %s checkpoint to %s is being written; ask "
			       "again when it is done", n->save_why, n->save_path);
	if (n->draining)
		return ps_errf_rc(err, errlen, -EAGAIN, "shutting down (the shutdown checkpoint "
			       "follows)");
	if ((rc = save_begin(n, path, "requested", err, errlen)) != 0)
		return rc;
	n->save_ctl = c;
	n->save_ctl_req = req_id;
	return 0;
}

int ps_net_serve_loop(struct ps_net *n, const sigset_t *sigs)
{
	uint64_t reqs = 0, next_log = ps_net_now_us() + 10000000u;
	struct ps_net_lane_sum ls;
	int rc = 0;

	while (!ps_net_stop_asked(n)) {
		rc = ps_net_lane_round(n);
		if (rc < 0) {
			PS_LOG(ERR, "%s: lane %u: poll: %s", n->name, n->lane, strerror(-rc));
			break;
		}
		rc = 0;
		periodic_duties(n);
		if (ps_net_signalled(n, sigs)) {
			PS_LOG(NOTICE, "%s: signal: shutting down", n->name);
			break;
		}
		if (n->lane == 0 && ps_net_now_us() >= next_log) {
			next_log = ps_net_now_us() + 10000000u;
			ps_net_lanes_sum(n, &ls);
			PS_LOG(INFO, "%s: %" PRIu64 " requests (%" PRIu64 " in the last 10 s), %"
				PRIu64 " errors", n->name, ls.reqs, ls.reqs - reqs, ls.errors);
			reqs = ls.reqs;
		}
	}
	if (n->g != NULL)
		ps_net_group_stop(n->g);
	{
		int drc = drain_and_save(n);
		if (rc == 0)
			rc = drc;
	}
	if (n->lane == 0) {
		ps_net_lanes_sum(n, &ls);
		PS_LOG(INFO, "%s: ps %u stopped after %" PRIu64 " requests (%" PRIu64 " errors, %"
			PRIu64 " dropped while draining)", n->name, n->cl->task_index, ls.reqs,
			ls.errors, ls.dropped);
	}
	return rc;
}
