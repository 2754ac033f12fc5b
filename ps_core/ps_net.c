/*
 * ps_net.c — the node under the PS network side: transport bring-up from the cluster description,
 * the loop's poll, message buffers lent to the transport, connections, and the control plane
 * (health, status, save, shutdown) every node answers.
 *
 * Call chain: psd/train main -> ps_net_create -> tl_create (+ fz_net_create) -> listen;
 *   loop -> ps_net_poll -> fz_net_poll -> ps_net_on_msg -> ps_net_ctl_handle | ps_net_srv_handle |
 *   ps_net_cli_on_msg. ps_net_srv.c and ps_net_cli.c hold the PS halves.
 */
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_core/ps_net_pvt.h"

uint64_t ps_net_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- buffers ---------------------------------------------------------------------- */

/*
 * The pool grows while the node warms up and then only recycles, so the steady path never
 * allocates; pool_max (a PS lane: cl->reply_buffers; a worker: PS_NET_POOL_MAX) bounds what a
 * flood of requests can take.
 */
struct ps_net_buf *ps_net_buf_get(struct ps_net *n)
{
	struct ps_net_buf *b = n->pool;
	uint8_t *mem;

	if (b != NULL) {
		n->pool = b->next;
		n->pool_free--;
		b->next = NULL;
		b->owner = NULL; /* and a worker's counts */
		return b;
	}
	if (n->pool_total >= n->pool_max)
		return NULL;
	mem = tl_buf_alloc(n->tl, PS_NET_BUF_HEAD + (size_t)n->buf_size);
	if (mem == NULL)
		return NULL;
	b = (struct ps_net_buf *)(void *)mem;
	memset(b, 0, sizeof(*b));
	b->n = n;
	b->data = mem + PS_NET_BUF_HEAD;
	n->pool_total++;
	return b;
}

void ps_net_buf_put(struct ps_net_buf *b)
{
	struct ps_net *n = b->n;

	b->next = n->pool;
	n->pool = b;
	n->pool_free++;
}

void ps_net_buf_unref(struct ps_net_buf *b)
{
	if (b->keeps == 0 && b->sends == 0 && !b->in_msgs)
		ps_net_buf_put(b);
}

void ps_net_buf_done(void *arg, int status)
{
	struct ps_net_buf *b = arg;
	struct ps_net_conn *c;

	(void)status; /* a reply lost with its connection: the client resends the request */
	if (!b->n->is_ps && b->lane != 0) { /* sent by a worker lane: the owner counts it */
		ps_net_wl_buf_done(b);
		return;
	}
	if (!b->n->is_ps) { /* a request: ps_client may still hold it */
		b->sends--;
		ps_net_buf_unref(b);
		return;
	}
	c = b->owner;
	if (b->n->srv_inflight > 0)
		b->n->srv_inflight--;
	b->owner = NULL;
	if (c != NULL && --c->out == 0 && c->gone)
		free(c);
	ps_net_buf_put(b);
}

static void pool_free_all(struct ps_net *n)
{
	struct ps_net_buf *b;

	while ((b = n->pool) != NULL) {
		n->pool = b->next;
		tl_buf_free(n->tl, b);
	}
}

int ps_net_send_buf(struct ps_net_conn *c, struct ps_net_buf *b, const struct tl_msg_hdr *h, bool backlog)
{
	struct tl_iov iov = { b->data + TL_MSG_HDR_LEN, h->body_len };
	struct fz_msg m = { .hdr = *h, .iov = &iov, .iovcnt = h->body_len > 0, .done = ps_net_buf_done,
			    .done_arg = b };
	int rc;

	if (c->backlog == NULL || !backlog) {
		rc = fz_conn_send(c->fc, &m);
		if (rc == 0) {
			c->bytes_out += TL_MSG_HDR_LEN + h->body_len;
			return 0;
		}
		if (rc != -ENOBUFS || !backlog)
			return rc;
	}
	/* Send queue full: keep it in order behind the others; ps_net_poll retries. */
	b->hdr = *h;
	b->next = NULL;
	if (c->backlog_tail)
		c->backlog_tail->next = b;
	else
		c->backlog = b;
	c->backlog_tail = b;
	return 0;
}

static void flush_backlog(struct ps_net_conn *c)
{
	struct ps_net_buf *b;

	while ((b = c->backlog) != NULL) {
		struct tl_msg_hdr h = b->hdr;
		struct ps_net_buf *next = b->next;
		if (ps_net_send_buf(c, b, &h, false) != 0)
			return;
		c->backlog = next;
		if (next == NULL)
			c->backlog_tail = NULL;
	}
}

/* ---- connections ------------------------------------------------------------------ */

struct ps_net_conn *ps_net_conn_new(struct ps_net *n, enum ps_net_kind kind)
{
	struct ps_net_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->n = n;
	c->kind = kind;
	c->id = n->next_conn_id++;
	c->next = n->conns;
	if (n->conns)
		n->conns->prev = c;
	n->conns = c;
	return c;
}

void ps_net_conn_free(struct ps_net_conn *c)
{
	struct ps_net_buf *b;

	if (c == NULL)
		return;
	while ((b = c->backlog) != NULL) {
		c->backlog = b->next;
		ps_net_buf_done(b, -ECANCELED);
	}
	ps_net_srv_drop_deferred(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		c->n->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->kind == PS_NET_TO_SERVER && c->n->dst[c->dest] == c)
		c->n->dst[c->dest] = NULL;
	if (c->kind == PS_NET_ACCEPTED)
		c->n->srv_conns--;
	if (c->n->save_ctl == c) /* its save goes on, unanswered */
		c->n->save_ctl = NULL;
	/* Replies still lent point at c: the last one's completion frees it. */
	c->gone = true;
	if (c->out == 0)
		free(c);
}

static void ps_net_on_connected(struct fz_conn *fc, int status)
{
	struct ps_net_conn *c = fz_conn_ctx(fc);

	if (c == NULL)
		return; /* given up on by the connect loop */
	c->up = status == 0 ? 1 : -1;
	c->reason = status;
	if (c->n->wlane != NULL && c->kind == PS_NET_TO_SERVER) { /* a worker lane's: tell the owner */
		ps_net_wl_on_conn(c, status == 0, status);
		if (status != 0) {
			c->fc = NULL;
			ps_net_conn_free(c);
		}
		return;
	}
	if (status != 0) {
		c->fc = NULL; /* fz frees fc after this callback */
		if (c->kind == PS_NET_TO_SERVER)
			return; /* the connect loop sees up == -1 and frees c */
		ps_net_conn_free(c);
	}
}

/* Adds fc's fuse counters to sum (the node's totals outlive its connections). */
static void ps_net_fz_add(struct fz_conn_stats *sum, const struct fz_conn *fc)
{
	struct fz_conn_stats st;

	fz_conn_stats_get(fc, &st);
	fz_conn_stats_add(sum, &st);
}

static void ps_net_on_closed(struct fz_conn *fc, int reason)
{
	struct ps_net_conn *c = fz_conn_ctx(fc);

	if (c == NULL)
		return;
	ps_net_fz_add(&c->n->fz_gone, fc);
	c->fc = NULL;
	c->up = -1;
	c->reason = reason;
	if (c->kind == PS_NET_TO_SERVER) {
		/* The worker's next poll reports it; ps_net_recover replaces the connection. */
		if (reason != -ECONNABORTED)
			PS_LOG(WARNING, "%s: connection to ps %u closed: %s", c->n->name, c->server,
			reason == 0 ? "peer closed" : strerror(-reason));
		if (c->n->wlane != NULL) { /* a worker lane's: the owner lets its requests go */
			ps_net_wl_on_conn(c, false, reason);
			ps_net_conn_free(c);
			return;
		}
		ps_net_cli_lost(c);
		return;
	}
	ps_net_conn_free(c);
}

/* One log line a second at most: a peer that keeps trying must not flood the log. */
static void plane_refused(struct ps_net_conn *c, const char *what)
{
	struct ps_net *n = c->n;
	uint64_t now = ps_net_now_us();

	n->ctl_refused++;
	c->errors++;
	if (now < n->next_refused_log_us)
		return;
	n->next_refused_log_us = now + 1000000u;
	PS_LOG(WARNING, "%s: connection %u: %s refused (%" PRIu64 " control refusals so far)",
	       n->name, c->id, what, n->ctl_refused);
}

/*
 * Control commands only on the control endpoint, on a connection of their own: a data
 * connection (a DPDK data port's, a kernel one that sent a PS request first, or one a worker
 * opened to a server) never carries one, and a control connection carries no PS request.
 */
static bool plane_allows(struct ps_net_conn *c, const struct tl_msg_view *m)
{
	bool ctl = m->hdr.type == PS_T_CTL;

	if (c->kind == PS_NET_TO_SERVER) {
		if (ctl)
			plane_refused(c, "a control command from a server");
		return !ctl;
	}
	if (c->plane == PS_NET_PLANE_EITHER)
		c->plane = ctl ? PS_NET_PLANE_CTL : PS_NET_PLANE_DATA;
	if (ctl == (c->plane == PS_NET_PLANE_CTL))
		return true;
	if (ctl) {
		plane_refused(c, "a control command on a data connection");
		(void)ps_net_ctl_reply(c, m->hdr.req_id, "error control commands are answered on the "
				"control endpoint only, on a connection that sends no data requests");
	} else {
		plane_refused(c, "a data request on a control connection");
		tl_send_error(fz_conn_tl(c->fc), m->hdr.req_id, EPERM, "data requests go to the "
			      "data endpoint, on a connection that sends no control commands");
	}
	return false;
}

static void ps_net_on_msg(struct fz_conn *fc, const struct tl_msg_view *m,
		      const struct tl_msg_view *carrier)
{
	struct ps_net_conn *c = fz_conn_ctx(fc);

	if (c == NULL)
		return;
	c->bytes_in += TL_MSG_HDR_LEN + m->hdr.body_len;
	if (!plane_allows(c, m))
		return;
	if (m->hdr.type == PS_T_CTL)
		ps_net_ctl_handle(c, m);
	else if (c->kind == PS_NET_TO_SERVER)
		ps_net_cli_on_msg(c, m, carrier);
	else
		ps_net_srv_handle(c, m, carrier);
}

const struct fz_conn_ops ps_net_conn_ops = { ps_net_on_connected, ps_net_on_msg, ps_net_on_closed };

static void on_accept(struct fz_conn *fc, struct ps_net *n, enum ps_net_plane plane)
{
	struct ps_net_conn *c = ps_net_conn_new(n, PS_NET_ACCEPTED);

	if (c == NULL) {
		fz_conn_set_ctx(fc, NULL);
		fz_conn_close(fc);
		return;
	}
	c->fc = fc;
	c->up = 1;
	c->plane = plane;
	n->srv_conns++;
	fz_conn_set_ctx(fc, c);
}

void ps_net_on_accept_data(struct fz_conn *fc, void *ctx) { on_accept(fc, ctx, PS_NET_PLANE_DATA); }
void ps_net_on_accept_ctl(struct fz_conn *fc, void *ctx) { on_accept(fc, ctx, PS_NET_PLANE_CTL); }
void ps_net_on_accept_either(struct fz_conn *fc, void *ctx) { on_accept(fc, ctx, PS_NET_PLANE_EITHER); }

int ps_net_endpoint_ip(const struct ps_endpoint *ep, uint32_t *ip, char *err, size_t errlen,
		   const char *what)
{
	if (ep->resolved) {
		*ip = ep->ip;
		return 0;
	}
	if (tl_ip_parse(ep->host, ip) != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "%s %s:%u: a host name not resolved (expected "
			       "an IPv4 literal or a cluster from ps_cluster_finalize)", what, ep->host,
			       ep->port);
	return 0;
}

/* ---- bring-up --------------------------------------------------------------------- */

static int make_tl(const struct ps_net_params *p, enum tl_protocol proto, struct tl **out,
		   char *err, size_t errlen)
{
	const struct ps_cluster *cl = p->cl;
	struct tl_config cfg;
	const char *why = "";
	int rc;

	tl_config_default(&cfg);
	cfg.protocol = proto;
	if (proto == TL_PROTO_DPDK && p->backend_arg != NULL) /* a lane on a port set up for it */
		cfg.backend_arg = p->backend_arg;
	cfg.max_body = p->max_msg + 1024 < TL_MSG_MAX_BODY_DEFAULT ? p->max_msg + 1024
								   : TL_MSG_MAX_BODY_DEFAULT;
	cfg.max_msg_segs = FZ_RX_MAX_IOV; /* fuse refuses frames in more pieces */
	if (proto == TL_PROTO_DPDK && cfg.backend_arg == NULL) {
		cfg.eal_argc = p->eal_argc;
		cfg.eal_argv = p->eal_argv;
		rc = ps_net_endpoint_ip(&cl->self_data, &cfg.local_ip, err, errlen, "data address");
		if (rc != 0)
			return rc;
		cfg.local_prefix = (uint8_t)cl->data_prefix;
		cfg.local_gateway = cl->data_gateway.resolved ? cl->data_gateway.ip : 0;
		cfg.mtu = (uint16_t)cl->mtu;
	}
	rc = tl_create(&cfg, out);
	if (rc == -EINVAL && tl_config_check(&cfg, &why) != 0)
		return ps_errf_rc(err, errlen, rc, "transport config: %s", why);
	if (rc != 0)
		return ps_errf_rc(err, errlen, rc, "cannot start the %s transport: %s%s",
			       tl_protocol_name(proto), strerror(-rc), proto == TL_PROTO_DPDK ?
			       " (check the EAL arguments before \"--\")" : "");
	return 0;
}

static const struct ps_endpoint *own_control(const struct ps_cluster *cl)
{
	if (cl->role == PS_ROLE_PS)
		return &cl->ps[cl->task_index];
	return cl->task_index < cl->n_worker_addrs ? &cl->worker[cl->task_index] : NULL;
}

static int listen_control(struct ps_net *n, char *err, size_t errlen)
{
	const struct ps_endpoint *ep = own_control(n->cl);
	uint32_t ip;
	int rc;

	if (ep == NULL || n->is_ps || n->lane != 0) /* a server's starts with ps_net_serve */
		return 0;
	if ((rc = ps_net_endpoint_ip(ep, &ip, err, errlen, "control endpoint")) != 0)
		return rc;
	rc = fz_net_listen(n->ctl_fz, ip, ep->port, &n->fzc_ctl, &ps_net_conn_ops, ps_net_on_accept_ctl, n,
			   &n->ctl_l);
	if (rc != 0)
		return ps_errf_rc(err, errlen, rc, "control endpoint %s:%u: cannot listen: %s", ep->host,
			       ep->port, strerror(-rc));
	return 0;
}

/*
 * The node's control token (lane 0, when the node has a control endpoint): the job's, or
 * one made now and written where wharf-ctl finds it; the path is logged, as Jupyter does.
 */
static int ctl_token_setup(struct ps_net *n, char *err, size_t errlen)
{
	const struct ps_endpoint *ep = own_control(n->cl);
	int rc;

	if (ep == NULL || n->lane != 0)
		return 0;
	if (n->cl->ctl_token[0] != '\0') {
		snprintf(n->ctl_token, sizeof(n->ctl_token), "%s", n->cl->ctl_token);
		PS_LOG(INFO, "%s: control token from %s (health needs none; status, save and "
		       "shutdown need it)", n->name, n->cl->ctl_token_src);
		return 0;
	}
	rc = ps_ctl_token_make(n->cl->run_dir, ep, n->ctl_token, sizeof(n->ctl_token),
			       n->ctl_token_made, sizeof(n->ctl_token_made), err, errlen);
	if (rc != 0)
		return rc;
	PS_LOG(INFO, "%s: control token in %s (mode 0600; wharf-ctl on this host reads it; give "
	       "WHARF_CTL_TOKEN or --ctl-token-file for a token of your own)", n->name,
	       n->ctl_token_made);
	return 0;
}

static void log_knobs(const struct ps_net *n)
{
	const struct ps_net_knobs *k = n->is_ps ? &n->cl->ps_net : &n->cl->worker_net;
	const char *role = n->is_ps ? "PS" : "WORKER";

	if (n->lane != 0)
		return; /* said once per node */
	PS_LOG(INFO, "%s: %s %u, protocol %s, tensor_fuse %s; NETWORK_%s_CORE_NUMBER=%u: %s "
		"%u network lane%s; %s_ENABLE_POLLING=%s (%s); %s_DISABLE_PIN_CORES=%s", n->name,
		ps_role_name(n->cl->role), n->cl->task_index, ps_protocol_name(n->cl->protocol),
		n->cl->tensor_fuse ? "on" : "off", role, k->core_number,
		n->is_ps ? "the PS runs" : "the worker runs (lane 0 on its client's thread)",
		n->lanes, n->lanes == 1 ? "" : "s", role, k->enable_polling ? "True" : "False",
		k->enable_polling ? "tl_poll spins" : "sleeping poll", role,
		k->disable_pin_cores ? "True" : "False");
}

static void round_end(void *arg);

int ps_net_create(const struct ps_net_params *p, struct ps_net **out, char *err,
		    size_t errlen)
{
	const struct ps_cluster *cl = p->cl;
	struct ps_net *n = calloc(1, sizeof(*n));
	enum tl_protocol proto = cl->protocol == PS_PROTO_KERNEL ? TL_PROTO_KERNEL : TL_PROTO_DPDK;
	struct ps_net_params lp = *p;
	struct ps_net_wl *wl = NULL;
	uint32_t wlanes;
	int rc;

	if (n == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	/* A worker of several lanes: its port and lane 0's lcore first (ps_net_wlanes.c). */
	if (cl->role != PS_ROLE_PS && p->lanes == 0 && (wlanes = ps_net_wl_wanted(cl)) > 1) {
		if ((rc = ps_net_wl_prepare(&lp, &wlanes, &wl, err, errlen)) != 0) {
			free(n);
			return rc;
		}
		p = &lp;
	}
	n->cl = cl;
	snprintf(n->name, sizeof(n->name), "%s", p->name ? p->name : "wharf");
	n->is_ps = cl->role == PS_ROLE_PS;
	n->polling = n->is_ps ? cl->ps_net.enable_polling : cl->worker_net.enable_polling;
	n->lane = p->lane;
	n->lanes = p->lanes ? p->lanes : 1;
	n->max_msg = p->max_msg;
	n->model_digest = p->model_digest;
	n->buf_size = p->max_msg + TL_MSG_HDR_LEN + 64; /* ps_handle wants room for an error */
	n->pool_max = n->is_ps ? cl->reply_buffers : PS_NET_POOL_MAX;
	n->t0_us = ps_net_now_us();
	fz_config_defaults(&n->fzc);
	n->fzc.tensor_fuse = cl->tensor_fuse;
	n->fzc.fuse_max_bytes = cl->fuse_max_bytes;
	n->fzc.fuse_max_msgs = cl->fuse_max_msgs;
	n->fzc.fuse_max_delay_us = cl->fuse_flush_us ? cl->fuse_flush_us : 1;
	if (n->fzc.fuse_threshold_bytes > n->fzc.fuse_max_bytes - FZ_SUB_HDR_MAX)
		n->fzc.fuse_threshold_bytes = n->fzc.fuse_max_bytes / 2;
	fz_config_defaults(&n->fzc_ctl);
	if ((rc = fz_config_validate(&n->fzc, err, errlen)) != 0)
		goto out_free;
	if ((rc = make_tl(p, proto, &n->tl, err, errlen)) != 0)
		goto out_free;
	if ((rc = fz_net_create(n->tl, &n->fz)) != 0)
		goto out_tl;
	tl_on_round_end(n->tl, round_end, n);
	n->ctl_tl = n->tl;
	n->ctl_fz = n->fz;
	if (proto == TL_PROTO_DPDK && n->lane == 0) { /* the control plane lives on lane 0 */
		if ((rc = make_tl(p, TL_PROTO_KERNEL, &n->ctl_tl, err, errlen)) != 0)
			goto out_fz;
		if ((rc = fz_net_create(n->ctl_tl, &n->ctl_fz)) != 0)
			goto out_ctl_tl;
	}
	if ((rc = ctl_token_setup(n, err, errlen)) != 0)
		goto out_ctl_fz;
	if ((rc = listen_control(n, err, errlen)) != 0)
		goto out_ctl_token;
	log_knobs(n);
	if (wl != NULL && (rc = ps_net_wl_start(wl, n, err, errlen)) != 0) {
		ps_net_destroy(n); /* stops the lanes that started, then the port */
		return rc;
	}
	*out = n;
	return 0;

out_ctl_token:
	if (n->ctl_token_made[0] != '\0')
		ps_ctl_token_unmake(n->ctl_token_made, n->ctl_token);
out_ctl_fz:
	if (n->ctl_fz != n->fz)
		fz_net_destroy(n->ctl_fz);
out_ctl_tl:
	if (n->ctl_tl != n->tl)
		tl_destroy(n->ctl_tl);
out_fz:
	fz_net_destroy(n->fz);
out_tl:
	tl_destroy(n->tl);
	if (rc == -ENOMEM)
		ps_errf_rc(err, errlen, rc, "out of memory");
out_free:
	ps_net_wl_fini(wl);
	free(n);
	return rc;
}

void ps_net_destroy(struct ps_net *n)
{
	uint32_t i;

	if (n == NULL)
		return;
	ps_net_wl_stop(n); /* a worker's other lanes first: what they were lent comes back */
	ps_obs_destroy(n->obs);
	fz_unlisten(n->data_l);
	fz_unlisten(n->ctl_l);
	/* Closing runs every closed callback, which frees the connections: no round-end flush
	 * of them meanwhile. */
	tl_on_round_end(n->tl, NULL, NULL);
	if (n->ctl_fz != n->fz)
		fz_net_destroy(n->ctl_fz);
	fz_net_destroy(n->fz);
	while (n->conns)
		ps_net_conn_free(n->conns);
	if (n->pc != NULL)
		ps_client_unkeep(n->pc); /* its held requests come back before the pool goes */
	for (i = 0; i < PS_NET_MAX_DST; i++) {
		if (n->msgs[i].buf == NULL)
			continue;
		ps_net_buf_of(n->msgs[i].buf)->in_msgs = false;
		ps_net_buf_unref(ps_net_buf_of(n->msgs[i].buf));
	}
	pool_free_all(n);
	if (n->ctl_tl != n->tl)
		tl_destroy(n->ctl_tl);
	tl_destroy(n->tl);
	if (n->ctl_token_made[0] != '\0')
		ps_ctl_token_unmake(n->ctl_token_made, n->ctl_token);
	if (n->wl != NULL && n->wlane == NULL)
		ps_net_wl_fini(n->wl);
	free(n);
}

/*
 * The end of a batch, on every connection: replies that found the send queue full go
 * first, then the open fused frame. Called before the round (a worker's requests, issued
 * since the last one, must not wait out fuse_flush_us while it sleeps for the replies),
 * at its end inside tl_poll (round_end: a PS's replies to everything this round received
 * leave in the round's last flush, with the large ones, not in a segment of their own),
 * and after it (what the deferred requests and the barriers answered). So fusion packs what
 * one round produces, and the timer only bounds what a round leaves behind when the send
 * queue was full (fz_net_poll retries that flush). Each flush corks the connection again
 * (fz_conn_cork): what the next round, or the trainer between two polls, sends is one
 * batch that this function ends, so its first message does not leave alone ahead of it.
 */
static void flush_round(struct ps_net *n)
{
	struct ps_net_conn *c;

	for (c = n->conns; c != NULL; c = c->next) {
		if (c->fc == NULL || c->up != 1)
			continue;
		if (c->backlog)
			flush_backlog(c);
		if (fz_conn_flush(c->fc) == 0)
			fz_conn_cork(c->fc);
	}
}

/* tl_on_round_end: the round's replies and fused frames leave in its last flush. */
static void round_end(void *arg)
{
	flush_round(arg);
}

int ps_net_poll(struct ps_net *n)
{
	return ps_net_poll_for(n, true);
}

int ps_net_poll_for(struct ps_net *n, bool may_sleep)
{
	uint64_t now;
	int rc;

	if (n->wl_n > 1) /* a worker's other lanes: what they sent back, what we hand them */
		ps_net_wl_drain(n);
	flush_round(n);
	rc = fz_net_poll(n->fz, n->polling || !may_sleep ? 0 : 1000);
	if (n->wl_n > 1)
		ps_net_wl_drain(n);
	if (n->srv_deferring > 0) /* buffers the poll gave back serve what waits for them */
		ps_net_srv_deferred(n);
	if (n->bars != NULL)
		ps_net_srv_bars(n, n->draining);
	flush_round(n);
	if (!n->is_ps && n->pc != NULL)
		ps_net_cli_tick(n);
	if (n->wlane != NULL)
		return rc; /* a worker's lane k > 0: the lane loop publishes */
	if (n->is_ps) {
		/* For lane 0's status and telemetry: a few relaxed stores per round. */
		atomic_store_explicit(&n->pub.reqs, n->srv_reqs, memory_order_relaxed);
		atomic_store_explicit(&n->pub.errors, n->srv_errors, memory_order_relaxed);
		atomic_store_explicit(&n->pub.dropped, n->srv_dropped, memory_order_relaxed);
		atomic_store_explicit(&n->pub.inflight, n->srv_inflight, memory_order_relaxed);
		atomic_store_explicit(&n->pub.deferred, n->srv_deferred, memory_order_relaxed);
		atomic_store_explicit(&n->pub.polls,
				      atomic_load_explicit(&n->pub.polls, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		atomic_store_explicit(&n->pub.cpu, sched_getcpu(), memory_order_relaxed); /* vDSO */
	}
	if (n->obs == NULL && n->ctl_fz == n->fz)
		return rc;
	now = ps_net_now_us(); /* one clock read for both timers below */
	if (n->obs != NULL)
		ps_obs_publish(n->obs, n, now, 0);
	if (n->ctl_fz != n->fz && now >= n->next_ctl_us) {
		n->next_ctl_us = now + 2000;
		fz_net_poll(n->ctl_fz, 0);
	}
	return rc;
}

bool ps_net_stopping(const struct ps_net *n) { return n->stop; }
void ps_net_request_stop(struct ps_net *n) { n->stop = true; }

/* Set by ps_net_stop_all from any thread; read by every node's loop (relaxed: a flag). */
static _Atomic int stop_all;

void ps_net_stop_all(bool on)
{
	atomic_store_explicit(&stop_all, on ? 1 : 0, memory_order_relaxed);
}

bool ps_net_signalled(struct ps_net *n, const sigset_t *sigs)
{
	struct timespec zero = { 0, 0 };
	uint64_t now = ps_net_now_us();
	int sig;

	if (atomic_load_explicit(&stop_all, memory_order_relaxed) != 0)
		return true;
	if (sigs == NULL || now < n->next_sig_us)
		return false;
	n->next_sig_us = now + 100000;
	if ((sig = sigtimedwait(sigs, NULL, &zero)) <= 0)
		return false;
	n->stop_sig = sig;
	return true;
}

void ps_net_stop_on(struct ps_net *n, const sigset_t *sigs) { n->stop_sigs = sigs; }
void ps_net_stop_flag(struct ps_net *n, const _Atomic int *flag) { n->stop_flag = flag; }
int ps_net_stop_signal(const struct ps_net *n) { return n->stop_sig; }

/* ---- control plane, server side ------------------------------------------------------ */

void ps_net_fuse_stats(const struct ps_net *n, struct fz_conn_stats *out)
{
	const struct ps_net_conn *c;

	*out = n->fz_gone;
	for (c = n->conns; c != NULL; c = c->next)
		if (c->fc)
			ps_net_fz_add(out, c->fc);
	if (n->wl_n > 1)
		ps_net_wl_fuse_add(n, out);
}

static void ctl_status(struct ps_net *n, char *out, size_t len)
{
	struct fz_conn_stats fz;
	struct tl_stats ts;
	struct ps_net_conn *c;
	size_t off = 0;
	uint32_t i;

#define OUT(...) do { if (off < len) off += (size_t)snprintf(out + off, len - off, __VA_ARGS__); } while (0)
	tl_stats_get(n->tl, &ts);
	OUT("ok status\nnode   %s %u  protocol %s  mode %s  tensor_fuse %s  up %.1f s%s\n",
	    ps_role_name(n->cl->role), n->cl->task_index, ps_protocol_name(n->cl->protocol),
	    ps_job_mode_name(n->cl->mode), n->cl->tensor_fuse ? "on" : "off",
	    (double)(ps_net_now_us() - n->t0_us) / 1e6, n->draining ? "  draining" : "");
	OUT("control  requests %" PRIu64 "  refused %" PRIu64 "  token %s\n", n->ctl_reqs,
	    n->ctl_refused, n->ctl_token_made[0] ? n->ctl_token_made : n->cl->ctl_token_src);
	OUT("lcore  0  msgs_in %" PRIu64 "  bytes_in %" PRIu64 "  msgs_out %" PRIu64 "  bytes_out %"
	    PRIu64 "  rejected %" PRIu64 "  refused_streams %" PRIu64 "  buffers %u/%u free\n",
	    ts.msgs_in, ts.bytes_in, ts.msgs_out, ts.bytes_out, ts.rejected, ts.refused_streams,
	    n->pool_free, n->pool_total);
	if (n->is_ps) {
		ps_net_srv_status(n, out, len, &off);
		ps_net_lanes_status(n, out, len, &off);
	}
	else
	{
		OUT("client requests %" PRIu64 "  replies %" PRIu64 "  reconnects %" PRIu64
		    "  resent %" PRIu64 "\n", n->cst.requests, n->cst.replies, n->cst.reconnects,
		    n->cst.resent);
		if (n->wl_n > 1)
			ps_net_wl_status(n, out, len, &off);
	}
	ps_net_fuse_stats(n, &fz);
	/* Fusion over the node's life (closed connections included); fz.h says what each is. */
	OUT("fuse   frames_out %" PRIu64 "  single %" PRIu64 "  subs_out %" PRIu64 "  alone %" PRIu64
	    "  bytes_saved %" PRId64 "  frames_in %" PRIu64 "  subs_in %" PRIu64 "  refused %" PRIu64
	    "\n", fz.tx.frames, fz.tx.frames_single, fz.tx.msgs_fused, fz.tx.msgs_alone,
	    fz.tx.bytes_saved, fz.rx.frames, fz.rx.subs, fz.rx.refused);
	OUT("fuse   flush full %" PRIu64 " explicit %" PRIu64 " timer %" PRIu64 " idle %" PRIu64
	    " large %" PRIu64 "  subs_per_frame", fz.tx.flush[FZ_FLUSH_FULL],
	    fz.tx.flush[FZ_FLUSH_EXPLICIT], fz.tx.flush[FZ_FLUSH_TIMER], fz.tx.flush[FZ_FLUSH_IDLE],
	    fz.tx.flush[FZ_FLUSH_LARGE]);
	for (i = 0; i < FZ_HIST_BUCKETS; i++)
		OUT(" %s%u:%" PRIu64, i + 1 == FZ_HIST_BUCKETS ? ">=" : "", 1u << i, fz.tx.subs_hist[i]);
	OUT("\n");
	for (c = n->conns; c != NULL; c = c->next)
		OUT("conn   %u %s  msgs_in %" PRIu64 "  msgs_out %" PRIu64 "  errors %" PRIu64
		    "  bytes_in %" PRIu64 "  bytes_out %" PRIu64 "  tx_pending %" PRIu64 "\n", c->id,
		    c->kind == PS_NET_TO_SERVER ? "to-ps" : "accepted", c->reqs, c->replies, c->errors,
		    c->bytes_in, c->bytes_out, c->fc ? tl_conn_tx_pending(fz_conn_tl(c->fc)) : 0);
#undef OUT
}

static void free_done(void *arg, int status)
{
	(void)status;
	free(arg);
}

int ps_net_ctl_reply(struct ps_net_conn *c, uint64_t req_id, const char *text)
{
	struct tl_msg_hdr h = { .type = PS_T_CTL_R, .req_id = req_id };
	size_t len = strlen(text);
	char *copy = malloc(len + 1); /* control path: not per packet */
	struct tl_iov iov;
	struct fz_msg m;
	int rc;

	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, text, len + 1);
	iov.base = (const uint8_t *)copy;
	iov.len = (uint32_t)len;
	memset(&m, 0, sizeof(m));
	m.hdr = h;
	m.hdr.body_len = (uint32_t)len;
	m.iov = &iov;
	m.iovcnt = len > 0;
	m.done = free_done;
	m.done_arg = copy;
	rc = fz_conn_send(c->fc, &m);
	if (rc != 0)
		free(copy);
	return rc;
}

/* Answered when the checkpoint is written (out left empty), or at once with an error. */
static void ctl_save(struct ps_net_conn *c, uint64_t req_id, const char *path, char *out, size_t len)
{
	char err[512], target[2 * PS_PATH_LEN + 2];
	const char *wal = c->n->scfg != NULL ? c->n->scfg->wal_dir : NULL;
	int rc;

	if (!c->n->is_ps) {
		snprintf(out, len, "error save: this node is a worker; save goes to a PS");
		return;
	}
	while (*path == ' ')
		path++;
	if (*path == '\0')
		path = c->n->ckpt;
	if (*path == '\0') {
		snprintf(out, len, "error save: no path given and the server has no --ckpt");
		return;
	}
	/* Only under the checkpoint's directory: a control peer picks a name, not a place. */
	rc = ps_ctl_save_target(c->n->ckpt, wal, path, target, sizeof(target), err, sizeof(err));
	if (rc == 0)
		rc = ps_net_srv_save_start(c->n, target, c, req_id, err, sizeof(err));
	if (rc != 0)
		snprintf(out, len, "error save %s: %s", path, err);
	else
		out[0] = '\0';
}

/*
 * "token T\n" then the command line; health answers without the token, the rest only with
 * the node's (constant-time compare). 0 when allowed, else the refusal is in out.
 */
static int ctl_auth(struct ps_net_conn *c, const char *line, const char *tok, size_t toklen,
		    char *out, size_t len)
{
	struct ps_net *n = c->n;
	char what[80];

	if (strcmp(line, "health") == 0)
		return 0;
	if (tok != NULL && n->ctl_token[0] != '\0' &&
	    ps_ctl_token_equal(tok, toklen, n->ctl_token, strlen(n->ctl_token)))
		return 0;
	snprintf(what, sizeof(what), "control command '%.16s' %s", line,
		 tok == NULL ? "without a token" : "with a wrong token");
	plane_refused(c, what);
	snprintf(out, len, "error %.32s: %s; health needs none, every other command the node's "
		 "control token (wharf-ctl reads WHARF_CTL_TOKEN, --ctl-token-file, or the file "
		 "the node logged at start)", line, tok == NULL ? "no control token given" :
		 "wrong control token");
	return -EPERM;
}

static void ctl_command(struct ps_net_conn *c, uint64_t req_id, const char *cmd, char *out,
			size_t len)
{
	struct ps_net *n = c->n;

	if (strcmp(cmd, "health") == 0) {
		char layout[256] = "";
		/* A PS names its lanes and the model it serves (ps_model_digest). */
		if (n->is_ps && n->h != NULL) {
			ps_net_lanes_layout(n, layout, sizeof(layout) - 32);
			snprintf(layout + strlen(layout), 32, " model %016" PRIx64, n->model_digest);
		}
		snprintf(out, len, "%s %s %u%s%s", n->is_ps && n->h == NULL ? "error starting" :
			 n->draining ? "error draining" : "ok ready", ps_role_name(n->cl->role),
			 n->cl->task_index, layout[0] ? " " : "", layout);
	} else if (strcmp(cmd, "status") == 0) {
		ctl_status(n, out, len);
	} else if (strncmp(cmd, "save", 4) == 0 && (cmd[4] == ' ' || cmd[4] == '\0')) {
		ctl_save(c, req_id, cmd + 4, out, len);
	} else if (strcmp(cmd, "shutdown") == 0) {
		n->stop = true;
		snprintf(out, len, "ok shutting down");
	} else {
		snprintf(out, len, "error unknown command '%.64s'; expected health, status, save "
			 "[PATH] or shutdown", cmd);
	}
}

void ps_net_ctl_handle(struct ps_net_conn *c, const struct tl_msg_view *m)
{
	struct ps_net *n = c->n;
	char cmd[PS_CTL_TOKEN_MAX + PS_PATH_LEN + 32];
	const char *line = cmd, *tok = NULL;
	size_t toklen = 0;
	uint32_t len = m->hdr.body_len;
	char *out;

	n->ctl_reqs++;
	out = malloc(PS_CTL_MAX);
	if (out == NULL)
		return;
	if (len >= sizeof(cmd) || tl_view_copy(m, 0, cmd, len) != 0) {
		snprintf(out, PS_CTL_MAX, "error command longer than %zu bytes", sizeof(cmd) - 1);
	} else {
		cmd[len] = '\0';
		if (strncmp(cmd, "token ", 6) == 0) {
			tok = cmd + 6;
			toklen = strcspn(tok, "\r\n");
			line = tok + toklen;
			line += strspn(line, "\r\n");
		}
		cmd[line - cmd + strcspn(line, "\r\n")] = '\0';
		if (ctl_auth(c, line, tok, toklen, out, PS_CTL_MAX) == 0)
			ctl_command(c, m->hdr.req_id, line, out, PS_CTL_MAX);
	}
	/* Empty: answered later (a save, when written). */
	int rc = out[0] != '\0' ? ps_net_ctl_reply(c, m->hdr.req_id, out) : 0;
	if (rc != 0) {
		c->errors++;
		PS_LOG(ERR, "%s: control reply: %s", n->name, strerror(-rc));
	}
	free(out);
}

void ps_net_wake(struct ps_net *n)
{
	tl_wake(n->tl);
}

bool ps_net_dest_up(const struct ps_net *n, uint32_t dest)
{
	if (dest >= PS_NET_MAX_DST)
		return false;
	if (ps_net_wl_lane_of(n, dest) != 0)
		return ps_net_wl_dst(n, dest)->st == PS_NET_DST_UP;
	return n->dst[dest] != NULL && n->dst[dest]->up == 1;
}
