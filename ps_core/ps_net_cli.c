/*
 * ps_net_cli.c — the worker half of the PS network side: waits for the servers (Paddle's "server
 * not ready, wait 3 sec to retry..." line per retry), opens one data connection per lane of
 * each server (its health answer names them; ps_client routes each key to its shard's lane),
 * drives ps_core's client through struct ps_client_io, routes replies to ps_client_on_reply,
 * and after a server restart reconnects and resends every unacknowledged push exactly once.
 * Before the first push and after every reconnect it says hello (PS_T_HELLO) with this
 * process's incarnation: an older process of the same worker id is refused from then on; the
 * client's numbering continues after the last sequence any server applied from this worker
 * id (a worker restarted under its old id is not taken for a resend of its previous life),
 * and its sync step becomes the servers'. A server whose state epoch changed came back
 * without its state: said, and handled by ps_lost_state.
 * A lost connection is reported to the client at once (ps_client_forget_dest: nothing it
 * owed but pushes keeps a slot), and every poll round ticks the client (ps_client_tick:
 * retries, and connections that answered nothing for request_timeout_s are closed).
 *
 * Call chain: trainer -> ps_client_*_wait | ps_net_call_* -> cli_send -> fz_conn_send;
 *   cli_poll -> ps_net_poll -> fz_net_poll -> ps_net_on_msg -> ps_net_cli_on_msg -> ps_client_on_reply.
 * Encode buffers are pooled transport buffers: cli_send lends the encoded one to the
 * transport (zero copy) and puts a fresh one in its place. ps_client keeps each request in
 * that same buffer until answered (ps_client_keep: counted in the buffer, pooled again when
 * neither a send nor the client has it), and a resend or a retry sends it as it is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_net_pvt.h"

#define PS_NET_CONNECT_US 3000000u

static int cli_send(void *ctx, uint32_t dest, const uint8_t *msg, uint32_t len)
{
	struct ps_net *n = ctx;
	struct tl_msg_hdr h;
	struct ps_net_buf *b, *fresh;
	struct ps_net_conn *c;
	uint32_t lane;
	int rc;

	if (!ps_net_dest_up(n, dest))
		return -ENOTCONN;
	lane = ps_net_wl_lane_of(n, dest);
	c = lane == 0 ? n->dst[dest] : NULL; /* another lane's: its thread sends it */
	if (len < TL_MSG_HDR_LEN || len > n->buf_size ||
	    tl_msg_hdr_decode(msg, UINT32_MAX, &h) != 0 || h.body_len != len - TL_MSG_HDR_LEN)
		return -EINVAL;
	if (msg == n->msgs[dest].buf) {
		fresh = ps_net_buf_get(n);
		if (fresh == NULL)
			return -ENOBUFS;
		b = ps_net_buf_of(n->msgs[dest].buf);
		b->in_msgs = false;
		fresh->in_msgs = true;
		n->msgs[dest].buf = fresh->data;
	} else if (ps_net_buf_of((uint8_t *)msg)->sends == 0) {
		/* A resend of a request ps_client holds in our buffer (ps_client_keep): as is. */
		b = ps_net_buf_of((uint8_t *)msg);
	} else {
		/* ... still being sent (on a lost connection, its completion to come): a copy,
		 * so one buffer is never on two send queues. */
		b = ps_net_buf_get(n);
		if (b == NULL)
			return -ENOBUFS;
		memcpy(b->data, msg, len);
	}
	b->sends++;
	rc = lane != 0 ? ps_net_wl_send(n, dest, b) : ps_net_send_buf(c, b, &h, true);
	if (rc != 0) {
		b->sends--;
		ps_net_buf_unref(b);
		return rc;
	}
	if (c != NULL)
		c->reqs++;
	n->cst.requests++;
	n->cst.bytes_out += len;
	return 0;
}

static int cli_poll(void *ctx)
{
	struct ps_net *n = ctx;
	uint32_t d, nd = ps_client_dests(n->pc);
	int rc;

	rc = ps_net_poll(n);
	if (rc < 0)
		return rc;
	if (n->stop)
		return -ECANCELED;
	for (d = 0; d < nd; d++)
		if (!ps_net_dest_up(n, d))
			return -ECONNRESET;
	return 0;
}

void ps_net_cli_on_msg(struct ps_net_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier)
{
	struct ps_net *n = c->n;

	if (n->wlane != NULL) { /* a worker's lane k > 0: the owner's thread takes it */
		ps_net_wl_on_reply(c, m, carrier);
		return;
	}
	c->replies++;
	n->cst.replies++;
	n->cst.bytes_in += TL_MSG_HDR_LEN + m->hdr.body_len;
	if (n->pc != NULL && ps_client_on_reply(n->pc, c->dest, m) == -EBADMSG)
		c->errors++;
}

void ps_net_cli_lost(struct ps_net_conn *c)
{
	struct ps_net *n = c->n;

	if (n->pc != NULL && n->layout_set && c->dest < PS_NET_MAX_DST && n->dst[c->dest] == c)
		ps_client_forget_dest(n->pc, c->dest, -ECONNRESET);
}

/* Lets go of a data connection, open or not (its closed callback then finds no context). */
static void drop_conn(struct ps_net_conn *c)
{
	ps_net_cli_lost(c);
	if (c->fc != NULL) {
		fz_conn_set_ctx(c->fc, NULL);
		fz_conn_close(c->fc);
	}
	ps_net_conn_free(c);
}

/* The server and server lane of destination d's connection; false when it has none. */
static bool dest_where(const struct ps_net *n, uint32_t d, uint32_t *srv, uint32_t *sl)
{
	if (ps_net_wl_lane_of(n, d) != 0) {
		const struct ps_net_ldst *st = ps_net_wl_dst(n, d);
		*srv = st->server;
		*sl = st->lane;
		return st->st != PS_NET_DST_NONE;
	}
	if (n->dst[d] == NULL)
		return false;
	*srv = n->dst[d]->server;
	*sl = n->dst[d]->lane;
	return true;
}

/* Lets go of destination d's connection, whichever lane carries it. */
static void drop_dest(struct ps_net *n, uint32_t d)
{
	if (ps_net_wl_lane_of(n, d) != 0)
		ps_net_wl_close(n, d);
	else if (n->dst[d] != NULL)
		drop_conn(n->dst[d]);
}

/*
 * Requests a server refused for now (nothing applied; ps_client sends them again after a
 * back-off, for as long as it refuses: e.g. its log's disk is full): said every 5 s while it
 * lasts, with the server's reason, so a worker that waits says why.
 */
static void say_retries(struct ps_net *n, uint64_t now)
{
	struct ps_client_stats st;

	if (now < n->next_retry_say_us)
		return;
	ps_client_stats_get(n->pc, &st);
	if (st.retries == n->retries_said)
		return;
	PS_LOG(WARNING, "%s: %" PRIu64 " request%s refused for now and sent again in the last "
	       "%s (%" PRIu64 " in all); the server says: %s", n->name, st.retries - n->retries_said,
	       st.retries - n->retries_said == 1 ? "" : "s", n->retries_said ? "5 s" : "moments",
	       st.retries, ps_client_retry_reason(n->pc));
	n->retries_said = st.retries;
	n->next_retry_say_us = now + 5000000u;
}

void ps_net_cli_tick(struct ps_net *n)
{
	uint32_t d, nd;
	uint64_t now = ps_net_now_us();

	if (n->layout_set)
		say_retries(n, now);
	if (!n->layout_set || ps_client_tick(n->pc, now, &n->io) == 0)
		return;
	nd = ps_client_dests(n->pc);
	for (d = 0; d < nd; d++) {
		uint32_t srv, sl;
		if (!ps_client_dest_stalled(n->pc, d) || !dest_where(n, d, &srv, &sl))
			continue;
		PS_LOG(WARNING, "%s: ps %u lane %u answered nothing for %u s (request_timeout_s): "
		       "closing the connection to reconnect", n->name, srv, sl,
		       n->cl->request_timeout_s);
		drop_dest(n, d);
	}
}

/* Opens the data connection to lane `lane` of server s; 0 once it is up. */
static int open_data(struct ps_net *n, uint32_t s, uint32_t lane)
{
	const struct ps_endpoint *ep = &n->cl->ps_data[s];
	uint64_t deadline = ps_net_now_us() + PS_NET_CONNECT_US;
	uint16_t port = n->lane_port[s][lane];
	struct ps_net_conn *c;
	uint32_t ip = n->ps_ip[s], d;
	int rc;

	if (!n->ps_ip_known[s] && (rc = ps_net_endpoint_ip(ep, &ip, NULL, 0, "")) != 0)
		return rc;
	d = ps_client_dest(n->pc, s, lane);
	if (ps_net_wl_lane_of(n, d) != 0) { /* another lane's thread connects it */
		struct ps_net_ldst *st = ps_net_wl_dst(n, d);
		ps_net_wl_open(n, d, s, lane, ip, port);
		while (st->st == PS_NET_DST_CONNECTING && ps_net_now_us() < deadline)
			ps_net_poll(n);
		if (st->st != PS_NET_DST_UP) {
			rc = st->st == PS_NET_DST_CONNECTING ? -ETIMEDOUT :
			     (st->reason ? st->reason : -ECONNREFUSED);
			ps_net_wl_close(n, d);
			return rc;
		}
		n->fresh[d] = true;
		return 0;
	}
	c = ps_net_conn_new(n, PS_NET_TO_SERVER);
	if (c == NULL)
		return -ENOMEM;
	ps_net_aim(n, n, s, lane, ip, port);
	c->server = s;
	c->lane = lane;
	c->dest = ps_client_dest(n->pc, s, lane);
	rc = fz_net_connect(n->fz, ip, port, &n->fzc, &ps_net_conn_ops, c, &c->fc);
	if (rc != 0) {
		ps_net_conn_free(c);
		return rc;
	}
	while (c->up == 0 && ps_net_now_us() < deadline)
		ps_net_poll(n);
	if (c->up != 1) {
		rc = c->up == 0 ? -ETIMEDOUT : (c->reason ? c->reason : -ECONNREFUSED);
		drop_conn(c);
		return rc;
	}
	n->dst[c->dest] = c;
	n->fresh[c->dest] = true; /* ps_net_recover sends it what the lost one owed */
	return 0;
}

_Static_assert(TL_PEER_RSS_MAX >= PS_MAX_NODES * PS_NET_MAX_LANES,
	       "a worker lane may aim at every lane of every server");

void ps_net_aim(struct ps_net *tn, const struct ps_net *owner, uint32_t s, uint32_t lane,
		uint32_t ip, uint16_t port)
{
	uint32_t reta = owner->rss_of[s], lanes = owner->lanes_of[s];
	int rc;

	if (reta == 0 || lanes <= 1)
		return;
	rc = tl_peer_rss(tn->tl, ip, port, reta, (uint16_t)lanes, (uint16_t)lane);
	if (rc != 0) /* the connection opens all the same, its frames handed over at the PS */
		PS_LOG(WARNING, "ps %u lane %u: cannot aim at its queue: %s", s, lane, strerror(-rc));
}

/* Every lane of server s connected. */
static bool server_up(const struct ps_net *n, uint32_t s)
{
	if (!n->layout_set)
		return false;
	for (uint32_t l = 0; l < n->lanes_of[s]; l++)
		if (!ps_net_dest_up(n, ps_client_dest(n->pc, s, l)))
			return false;
	return true;
}

static size_t list_not_ready(const struct ps_net *n, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t s;
	char ep[PS_HOST_LEN + 8];

	off += (size_t)snprintf(buf, len, "[");
	for (s = 0; s < n->cl->n_ps && off < len; s++) {
		if (server_up(n, s))
			continue;
		ps_endpoint_format(&n->cl->ps[s], ep, sizeof(ep));
		off += (size_t)snprintf(buf + off, len - off, "%s'%s'", off > 1 ? ", " : "", ep);
	}
	if (off < len)
		snprintf(buf + off, len - off, "]");
	return off;
}

/*
 * A server's data address from its health answer (" addr A.B.C.D"), used when the cluster
 * has none for it: no .endpoint_map line (protocol=dpdk). A worker on kernel TCP, whose
 * cluster says the data plane is the control endpoint, takes it too when it names another
 * address: a PS on DPDK, whose data plane is its port's address. 0, or -EPROTO when it is
 * needed and missing.
 */
static int parse_addr(struct ps_net *n, uint32_t s, const char *ans, uint16_t port0)
{
	const char *p = strstr(ans, " addr ");
	char txt[INET_ADDRSTRLEN];
	bool have = n->cl->ps_data[s].host[0] != '\0';
	uint32_t ctl_ip;
	struct in_addr a;
	size_t len;

	if (have && n->cl->protocol != PS_PROTO_KERNEL)
		return 0;
	if (p == NULL || port0 == 0)
		return have ? 0 : -EPROTO;
	p += 6;
	len = strcspn(p, " ");
	if (len >= sizeof(txt))
		return -EPROTO;
	memcpy(txt, p, len);
	txt[len] = '\0';
	if (inet_pton(AF_INET, txt, &a) != 1)
		return -EPROTO;
	if (have && ps_net_endpoint_ip(&n->cl->ps_data[s], &ctl_ip, NULL, 0, "") == 0 &&
	    ctl_ip == ntohl(a.s_addr))
		return 0; /* a PS on kernel TCP: its data plane is its control endpoint */
	if (!n->ps_ip_known[s] || n->ps_ip[s] != ntohl(a.s_addr) || n->lane_port[s][0] != port0)
		PS_LOG(INFO, "%s: ps %u data address %s:%u (from its health answer)", n->name, s,
		       txt, port0);
	n->ps_ip[s] = ntohl(a.s_addr);
	n->ps_ip_known[s] = true;
	n->lane_port[s][0] = port0;
	return 0;
}

/*
 * A server's layout from its health answer ("ok ready ps I lanes L shards S ports P0,P1,..
 * addr A.B.C.D model D"): 0, or -EPROTO for one that does not parse. An answer without it is
 * a PS of one lane.
 */
static int parse_layout(struct ps_net *n, uint32_t s, const char *ans, uint32_t *lanes,
			uint32_t *shards)
{
	const char *p = strstr(ans, " lanes ");
	unsigned l, sh;
	uint16_t port0 = 0;
	int used = 0;

	*lanes = 1;
	*shards = 1;
	n->rss_of[s] = 0;
	if (n->cl->ps_data[s].host[0] != '\0')
		n->lane_port[s][0] = n->cl->ps_data[s].port;
	if (p == NULL)
		return parse_addr(n, s, ans, 0);
	if (sscanf(p, " lanes %u shards %u ports %n", &l, &sh, &used) != 2 || used == 0 ||
	    l == 0 || l > PS_NET_MAX_LANES || sh < l)
		return -EPROTO;
	p += used;
	for (uint32_t k = 0; k < l; k++) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v == 0 || v > 65535 || (k + 1 < l && *end != ','))
			return -EPROTO;
		if (k > 0)
			n->lane_port[s][k] = (uint16_t)v;
		else
			port0 = (uint16_t)v;
		p = end + (*end != '\0');
	}
	/* " rss R": its lane k reads queue k of R-entry round-robin RSS (ps_net_aim). */
	unsigned r;
	if (strncmp(p, "rss ", 4) == 0) {
		if (sscanf(p, "rss %u", &r) != 1 || r < 2 || r > 65536)
			return -EPROTO;
		n->rss_of[s] = r;
	}
	*lanes = l;
	*shards = sh;
	return parse_addr(n, s, ans, port0);
}

/*
 * The model a server's health answer names (" model <16 hex digits>") against the one this
 * worker trains (n->model_digest; 0: no check). 0, or -EPROTO naming both.
 */
static int check_model(struct ps_net *n, uint32_t s, const char *ans, char *err, size_t errlen)
{
	const char *p = strstr(ans, " model ");
	char ep[PS_HOST_LEN + 8], *end;
	unsigned long long d = 0;

	if (n->model_digest == 0)
		return 0;
	ps_endpoint_format(&n->cl->ps[s], ep, sizeof(ep));
	if (p != NULL) {
		p += strlen(" model ");
		d = strtoull(p, &end, 16);
		if (end != p + 16 || (*end != '\0' && *end != ' '))
			p = NULL;
	}
	if (p == NULL)
		return ps_errf_rc(err, errlen, -EPROTO, "ps %u (%s) did not name its model in its "
			       "health answer '%.200s'; this worker's is %016" PRIx64, s, ep, ans,
			       n->model_digest);
	if (d != n->model_digest)
		return ps_errf_rc(err, errlen, -EPROTO, "ps %u (%s) serves model %016llx, this worker "
			       "trains model %016" PRIx64 ": start servers and workers from the same "
			       "model (--model and its flags, or --model-file)", s, ep, d,
			       n->model_digest);
	return 0;
}

/* ps_client_keep: a request encoded into m->buf and not sent is still held: a fresh one. */
static int keep_writable(void *ctx, struct ps_msgbuf *m)
{
	struct ps_net_buf *b = ps_net_buf_of(m->buf), *fresh;

	if (b->keeps == 0)
		return 0;
	if ((fresh = ps_net_buf_get(ctx)) == NULL)
		return -ENOBUFS;
	b->in_msgs = false;
	fresh->in_msgs = true;
	m->buf = fresh->data;
	return 0;
}

static void keep_hold(void *ctx, uint8_t *buf)
{
	(void)ctx;
	ps_net_buf_of(buf)->keeps++;
}

static void keep_release(void *ctx, uint8_t *buf)
{
	struct ps_net_buf *b = ps_net_buf_of(buf);

	(void)ctx;
	b->keeps--;
	ps_net_buf_unref(b);
}

/* Encode buffers for every destination (once the layout is known). */
static int ensure_msgs(struct ps_net *n)
{
	for (uint32_t d = 0; d < ps_client_dests(n->pc); d++) {
		struct ps_net_buf *b;
		if (n->msgs[d].buf != NULL)
			continue;
		if ((b = ps_net_buf_get(n)) == NULL)
			return -ENOMEM;
		b->in_msgs = true;
		n->msgs[d].buf = b->data;
		n->msgs[d].cap = n->buf_size;
		n->msgs[d].len = 0;
	}
	return 0;
}

/*
 * One readiness round: health on each control endpoint not fully connected (its answer
 * gives the server's lanes and their ports), the client's layout once every server
 * answered, then a data connection per lane. Returns the servers still down, or -errno
 * (message in err) for what waiting cannot fix.
 */
static int try_servers(struct ps_net *n, char *err, size_t errlen)
{
	bool healthy[PS_MAX_NODES] = { false };
	char ans[512], cerr[256];
	uint32_t s, l, down = 0, lanes, shards;
	int rc;

	for (s = 0; s < n->cl->n_ps; s++) {
		if (server_up(n, s))
			continue;
		for (l = 0; n->layout_set && l < n->lanes_of[s]; l++)
			drop_dest(n, ps_client_dest(n->pc, s, l));
		if (ps_ctl_request(&n->cl->ps[s], NULL, "health", 1000, ans, sizeof(ans), cerr,
				   sizeof(cerr)) != 0 || strncmp(ans, "ok ready", 8) != 0) {
			down++;
			continue;
		}
		if (parse_layout(n, s, ans, &lanes, &shards) != 0)
			return ps_errf_rc(err, errlen, -EPROTO, "ps %u answered health with '%.200s': "
				       "expected lanes, shards and ports%s", s, ans,
				       n->cl->ps_data[s].host[0] == '\0' ? ", and its data address "
				       "(.endpoint_map has no line for it)" : "");
		if ((rc = check_model(n, s, ans, err, errlen)) != 0)
			return rc;
		if (n->layout_known[s] && (lanes != n->lanes_of[s] || shards != n->shards_of[s]))
			return ps_errf_rc(err, errlen, -EPROTO, "ps %u came back with %u lanes and %u "
				       "shards; it had %u and %u (restart the workers to follow a "
				       "changed NETWORK_PS_CORE_NUMBER)", s, lanes, shards,
				       n->lanes_of[s], n->shards_of[s]);
		n->lanes_of[s] = lanes;
		n->shards_of[s] = shards;
		n->layout_known[s] = true;
		healthy[s] = true;
	}
	if (!n->layout_set) {
		for (s = 0; s < n->cl->n_ps; s++)
			if (!n->layout_known[s])
				return (int)(down ? down : 1);
		if ((rc = ps_client_set_lanes(n->pc, n->lanes_of, n->shards_of)) != 0 ||
		    (rc = ensure_msgs(n)) != 0)
			return ps_errf_rc(err, errlen, rc, "routing to %u server lanes: %s",
				       ps_client_dests(n->pc), strerror(-rc));
		n->layout_set = true;
	}
	for (s = 0; s < n->cl->n_ps; s++) {
		if (!healthy[s])
			continue;
		for (l = 0; l < n->lanes_of[s]; l++)
			if (open_data(n, s, l) != 0)
				break;
		down += l < n->lanes_of[s];
	}
	return (int)down;
}

/*
 * A worker's wait for its servers is over: a shutdown command, a signal of stop_sigs, or
 * the stop flag.
 */
static bool wait_stopped(struct ps_net *n)
{
	if (!n->stop && n->stop_sigs != NULL && ps_net_signalled(n, n->stop_sigs))
		n->stop = true;
	/* relaxed: the flag carries no data; the caller only learns it should give up */
	if (!n->stop && n->stop_flag != NULL &&
	    atomic_load_explicit(n->stop_flag, memory_order_relaxed) != 0)
		n->stop = n->stop_flagged = true;
	return n->stop;
}

static int wait_servers(struct ps_net *n, char *err, size_t errlen)
{
	const struct ps_cluster *cl = n->cl;
	uint64_t t0 = ps_net_now_us(), deadline = t0 + (uint64_t)cl->wait_timeout_s * 1000000u;
	char eps[1024];

	for (;;) {
		int down = try_servers(n, err, errlen);
		if (down <= 0)
			return down;
		list_not_ready(n, eps, sizeof(eps));
		if (wait_stopped(n))
			return ps_errf_rc(err, errlen, -ECANCELED, "stopped (%s) while waiting for the "
				       "parameter servers; not ready endpoints: %s",
				       n->stop_sig == SIGTERM ? "SIGTERM" : n->stop_sig == SIGINT ?
				       "SIGINT" : n->stop_sig != 0 ? "a signal" :
				       n->stop_flagged ? "interrupted" : "a shutdown", eps);
		if (ps_net_now_us() >= deadline)
			return ps_errf_rc(err, errlen, -ETIMEDOUT, "gave up after %u s waiting for the "
				       "parameter servers (wait_timeout_s); not ready endpoints: %s",
				       cl->wait_timeout_s, eps);
		PS_LOG(INFO, "%s: server not ready, wait %u sec to retry... not ready endpoints: %s",
			n->name, cl->retry_interval_s, eps);
		uint64_t until = ps_net_now_us() + (uint64_t)cl->retry_interval_s * 1000000u;
		if (until > deadline)
			until = deadline;
		while (ps_net_now_us() < until && !wait_stopped(n))
			ps_net_poll(n);
	}
}

/*
 * After a hello: a server whose state epoch changed came back without its state (a fresh
 * start, not a restore). Said, then by ps_lost_state: fail (-ESTALE), or go on with it.
 */
static int check_epochs(struct ps_net *n, char *err, size_t errlen)
{
	char ep[PS_HOST_LEN + 8];
	uint64_t was, now;

	for (uint32_t s = 0; s < n->cl->n_ps; s++) {
		if (!ps_client_epoch_changed(n->pc, s, &was, &now))
			continue;
		ps_endpoint_format(&n->cl->ps[s], ep, sizeof(ep));
		if (n->cl->ps_lost_state == PS_POLICY_FAIL)
			return ps_errf_rc(err, errlen, -ESTALE, "ps %u (%s) came back without its state "
				       "(state epoch %016" PRIx64 ", it had %016" PRIx64 "): what it "
				       "held is gone; ps_lost_state fail: stopping (restore it from its "
				       "checkpoint, or restart the job)", s, ep, now, was);
		PS_LOG(WARNING, "%s: ps %u (%s) came back without its state (state epoch %016" PRIx64
		       ", it had %016" PRIx64 "); ps_lost_state continue: training goes on with it",
		       n->name, s, ep, now, was);
		ps_client_epoch_accept(n->pc, s);
	}
	return 0;
}

/*
 * Every server up, then the hello round trip (this process's incarnation; the servers'
 * last applied sequence from this worker id, their sync step and state epoch). A server
 * lost again meanwhile: wait again (bounded by the same wait_timeout_s per round, at most
 * a few rounds). A refused hello (a newer process has this worker id) is final.
 */
static int connect_and_hello(struct ps_net *n, char *err, size_t errlen)
{
	const char *why;
	int rc = 0, i;

	for (i = 0; i < 5; i++) {
		if ((rc = wait_servers(n, err, errlen)) != 0)
			return rc;
		rc = ps_client_hello_wait(n->pc, &n->io);
		if (rc == 0)
			return check_epochs(n, err, errlen);
		if (rc != -ECONNRESET && rc != -ENOTCONN && rc != -ETIMEDOUT)
			break;
	}
	why = ps_client_error(n->pc);
	return ps_errf_rc(err, errlen, rc, "saying hello to the servers (worker %u): %s%s%s",
		       n->cl->task_index, strerror(-rc), why[0] ? ": " : "", why);
}

struct resend_ctx {
	struct ps_net *n;
	uint32_t dest;
	int rc;
};

static void resend_one(void *arg, const uint8_t *msg, uint32_t len)
{
	struct resend_ctx *r = arg;
	int rc = cli_send(r->n, r->dest, msg, len);

	if (rc != 0 && r->rc == 0)
		r->rc = rc;
}

/*
 * Every destination connected since the last call gets what its lost connection owed
 * (ps_client_resend: the pushes not acknowledged, oldest first; the rest is let go to be
 * asked again). Decided per connection as it opens, so a server lost again while the others
 * were being waited for is not missed.
 */
static int resend_fresh(struct ps_net *n, bool first, char *err, size_t errlen)
{
	struct resend_ctx r = { n, 0, 0 };
	uint32_t s, l, cnt;
	bool any;

	for (s = 0; s < n->cl->n_ps; s++) {
		for (l = 0, cnt = 0, any = false; l < n->lanes_of[s]; l++) {
			r.dest = ps_client_dest(n->pc, s, l);
			if (!n->fresh[r.dest])
				continue;
			n->fresh[r.dest] = false;
			any = true;
			cnt += ps_client_resend(n->pc, r.dest, resend_one, &r);
		}
		if (!any || first)
			continue;
		n->cst.reconnects++;
		n->cst.resent += cnt;
		PS_LOG(NOTICE, "%s: reconnected to ps %u, resent %u unacknowledged push%s",
			n->name, s, cnt, cnt == 1 ? "" : "es");
	}
	if (r.rc != 0)
		return ps_errf_rc(err, errlen, r.rc, "resending to a reconnected server: %s",
			       strerror(-r.rc));
	return 0;
}

int ps_net_connect(struct ps_net *n, struct ps_client *pc, char *err, size_t errlen)
{
	int rc;

	if (n->is_ps)
		return ps_errf_rc(err, errlen, -EINVAL, "this node is a ps, not a worker");
	n->pc = pc;
	n->io.send = cli_send;
	n->io.poll = cli_poll;
	n->io.ctx = n;
	n->io.msgs = n->msgs;
	/* The client keeps each request in the buffer it was sent from, not a copy of it. */
	n->keep = (struct ps_client_keep){ keep_writable, keep_hold, keep_release, n };
	ps_client_keep_by_ref(pc, &n->keep);
	rc = connect_and_hello(n, err, errlen);
	return rc != 0 ? rc : resend_fresh(n, true, err, errlen);
}

const struct ps_client_io *ps_net_io(struct ps_net *n) { return &n->io; }

int ps_net_recover(struct ps_net *n, char *err, size_t errlen)
{
	int rc = connect_and_hello(n, err, errlen);

	return rc != 0 ? rc : resend_fresh(n, false, err, errlen);
}

/* ---- several requests in flight ---------------------------------------------------- */

static void track_done(void *arg, int status)
{
	struct ps_net_track *t = arg;
	struct ps_net *n = t->n;

	t->busy = false;
	if (t->call != n->call)
		return; /* a request given up on earlier (e.g. a push completed after a resend) */
	n->call_pending--;
	if (status != 0 && n->call_status == 0)
		n->call_status = status;
}

void ps_net_call_begin(struct ps_net *n)
{
	n->call++;
	n->call_pending = 0;
	n->call_status = 0;
}

int ps_net_call_track(struct ps_net *n, ps_done_fn **done, void **arg)
{
	uint32_t i;

	for (i = 0; i < PS_NET_TRACK_MAX; i++) {
		struct ps_net_track *t = &n->track[(n->track_next + i) % PS_NET_TRACK_MAX];
		if (t->busy)
			continue;
		n->track_next = (n->track_next + i + 1) % PS_NET_TRACK_MAX;
		t->n = n;
		t->busy = true;
		t->call = n->call;
		n->call_pending++;
		*done = track_done;
		*arg = t;
		return 0;
	}
	return -EAGAIN;
}

int ps_net_call_issue(struct ps_net *n, int encode_rc)
{
	struct ps_net_track *last = &n->track[(n->track_next + PS_NET_TRACK_MAX - 1) % PS_NET_TRACK_MAX];
	uint32_t s;
	int rc = 0;

	if (encode_rc < 0) {
		last->busy = false;
		n->call_pending--;
		return encode_rc;
	}
	for (s = 0; s < ps_client_dests(n->pc); s++) {
		if (n->msgs[s].len == 0)
			continue;
		int r = cli_send(n, s, n->msgs[s].buf, n->msgs[s].len);
		n->msgs[s].len = 0;
		if (r != 0 && rc == 0)
			rc = r;
	}
	return rc;
}

int ps_net_call_wait(struct ps_net *n)
{
	int rc;

	while (n->call_pending > 0)
		if ((rc = cli_poll(n)) < 0)
			return rc;
	return n->call_status;
}

void ps_net_cli_stats(const struct ps_net *n, struct ps_net_cli_stats *out)
{
	*out = n->cst;
}
