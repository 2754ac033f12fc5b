/*
 * tl_api.c — the backend-neutral half of transport: instances, connections, send
 * queues and their limits, callbacks, deferred close, and the glue from the framer to
 * the application.
 *
 * Call chain:  app -> tl_create / tl_listen / tl_connect / tl_send / tl_poll (here)
 *   -> struct tl_backend_ops (tl_be_kernel.c | tl_be_dpdk.c)
 *   backend events -> tl_up_input -> tl_fr_push (tl_frame.c) -> ops->msg
 *
 * Callbacks run only from tl_poll and tl_destroy, never inside tl_send/tl_close: a
 * connection that closes is moved to the zombie list and its final callback (closed,
 * or connected with an error) runs at the end of the poll round — the one place an
 * application has to free its per-connection state, and no use after free when it
 * closes a connection from inside another connection's callback.
 */
#include <arpa/inet.h>
#include <stdlib.h>

#include "dpdk_net/dn.h"
#include "transport/tl_pvt.h"
#include "transport/tl_tcp.h"

DN_LOG_REGISTER(tl_logtype, "wharf.tl")

/* Backends built into this library, by protocol (a new backend adds its line here). */
static const struct {
	enum tl_protocol proto;
	const struct tl_backend_ops *ops;
} tl_backends[] = {
	{ TL_PROTO_KERNEL, &tl_be_kernel_ops },
	{ TL_PROTO_DPDK, &tl_be_dpdk_ops },
};

void tl_config_default(struct tl_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->protocol = TL_PROTO_KERNEL;
	cfg->max_body = TL_MSG_MAX_BODY_DEFAULT;
	cfg->max_conns = 1024;
	cfg->tx_max_msgs = 4096;
	cfg->tx_max_bytes = 256ull << 20;
	cfg->rx_buf_size = 64u << 10;
	cfg->rx_max_bufs = 8192;
	cfg->max_held_msgs = 65536;
	cfg->max_msg_segs = 65536;
}

const struct tl_env_knob tl_env_knobs[] = {
	{ "WHARF_IDLE_SPIN_US", 0, DN_IDLE_SPIN_MAX_US,
	  "WHARF_IDLE_SPIN_US: expected an integer in 0..100000" },
	{ "WHARF_TCP_RTO_MIN_US", 100, 10000000,
	  "WHARF_TCP_RTO_MIN_US: expected an integer in 100..10000000" },
	{ "WHARF_TCP_KEEPALIVE_S", 0, 86400,
	  "WHARF_TCP_KEEPALIVE_S: expected an integer in 0..86400" },
	{ "WHARF_TCP_SYNCOOKIES", 0, 1, "WHARF_TCP_SYNCOOKIES: expected 0 or 1" },
	{ "WHARF_TCP_SACK", 0, 1, "WHARF_TCP_SACK: expected 0 or 1" },
	{ "WHARF_TCP_ECN", 0, 1, "WHARF_TCP_ECN: expected 0 or 1" },
	{ "WHARF_TSO", 0, 1, "WHARF_TSO: expected 0 or 1" },
};
const unsigned tl_env_n_knobs = sizeof(tl_env_knobs) / sizeof(tl_env_knobs[0]);
_Static_assert(DN_IDLE_SPIN_MAX_US == 100000, "the message above says 0..100000");

bool tl_env_get(const char *name, unsigned *out)
{
	for (unsigned i = 0; i < tl_env_n_knobs; i++)
		if (strcmp(tl_env_knobs[i].name, name) == 0) {
			const char *v = getenv(name);
			return v != NULL && dn_parse_uint(v, tl_env_knobs[i].lo, tl_env_knobs[i].hi, out);
		}
	return false;
}

int tl_config_check(const struct tl_config *cfg, const char **why)
{
	const char *w = NULL;

	if (cfg->protocol != TL_PROTO_KERNEL && cfg->protocol != TL_PROTO_DPDK)
		w = "protocol: neither kernel nor dpdk";
	else if (cfg->max_body == 0 || cfg->max_body > TL_MSG_MAX_BODY_DEFAULT)
		w = "max_body: must be 1..TL_MSG_MAX_BODY_DEFAULT (64 MiB)";
	else if (cfg->max_conns == 0 || cfg->max_conns > (1u << 20))
		w = "max_conns: must be 1..1048576";
	else if (cfg->tx_max_msgs == 0)
		w = "tx_max_msgs: must be at least 1";
	else if (cfg->tx_max_bytes < TL_MSG_HDR_LEN)
		w = "tx_max_bytes: must hold at least one header";
	else if (cfg->rx_buf_size < 2 * TL_MSG_HDR_LEN || cfg->rx_buf_size > (64u << 20))
		w = "rx_buf_size: must be 64 B..64 MiB";
	else if (cfg->rx_max_bufs == 0)
		w = "rx_max_bufs: must be at least 1";
	else if (cfg->max_held_msgs == 0)
		w = "max_held_msgs: must be at least 1";
	else if (cfg->max_msg_segs == 0)
		w = "max_msg_segs: must be at least 1";
	for (unsigned i = 0; w == NULL && i < tl_env_n_knobs; i++) {
		const char *v = getenv(tl_env_knobs[i].name);
		if (v != NULL && *v != '\0' &&
		    !dn_parse_uint(v, tl_env_knobs[i].lo, tl_env_knobs[i].hi, NULL))
			w = tl_env_knobs[i].why;
	}
	if (why != NULL)
		*why = w;
	return w == NULL ? 0 : -EINVAL;
}

int tl_protocol_parse(const char *s, enum tl_protocol *out)
{
	if (s != NULL && strcmp(s, "kernel") == 0)
		*out = TL_PROTO_KERNEL;
	else if (s != NULL && strcmp(s, "dpdk") == 0)
		*out = TL_PROTO_DPDK;
	else
		return -EINVAL;
	return 0;
}

const char *tl_protocol_name(enum tl_protocol p)
{
	return p == TL_PROTO_KERNEL ? "kernel" : p == TL_PROTO_DPDK ? "dpdk" : "?";
}

int tl_ip_parse(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (s == NULL || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*out = ntohl(a.s_addr);
	return 0;
}

int tl_create(const struct tl_config *cfg, struct tl **out)
{
	const struct tl_backend_ops *ops = NULL;
	struct tl *tl;
	size_t i;
	int rc;

	if (tl_config_check(cfg, NULL) != 0)
		return -EINVAL;
	for (i = 0; i < sizeof(tl_backends) / sizeof(tl_backends[0]); i++)
		if (tl_backends[i].proto == cfg->protocol)
			ops = tl_backends[i].ops;
	if (ops == NULL)
		return -EPROTONOSUPPORT;
	tl = calloc(1, sizeof(*tl));
	if (tl == NULL)
		return -ENOMEM;
	tl->cfg = *cfg;
	tl->be_ops = ops;
	tl_list_init(&tl->conns);
	tl_list_init(&tl->zombies);
	tl_list_init(&tl->dirty);
	tl_list_init(&tl->listeners);
	tl_list_init(&tl->dead_listeners);
	tl_list_init(&tl->tx_free);
	rc = ops->init(tl);
	if (rc != 0)
		goto out_free;
	rc = tl_fr_pool_create(tl->chunk_ops, cfg->max_held_msgs, &tl->msgs);
	if (rc != 0)
		goto out_fini;
	*out = tl;
	return 0;
out_fini:
	ops->fini(tl);
out_free:
	free(tl);
	return rc;
}

static void tl_tx_free_all(struct tl *tl)
{
	while (!tl_list_empty(&tl->tx_free)) {
		struct tl_tx *tx = tl_container_of(tl->tx_free.next, struct tl_tx, link);
		tl_list_del(&tx->link);
		if (tx->iov != tx->iov_inl)
			free(tx->iov);
		free(tx);
	}
}

static void tl_reap(struct tl *tl);

void tl_destroy(struct tl *tl)
{
	if (tl == NULL)
		return;
	while (!tl_list_empty(&tl->listeners))
		tl_unlisten(tl_container_of(tl->listeners.next, struct tl_listener, link));
	tl->destroying = true;
	while (!tl_list_empty(&tl->conns))
		tl_close(tl_container_of(tl->conns.next, struct tl_conn, link));
	tl_reap(tl);
	/* Records still held refer to backend buffers: release them before those go. */
	tl_fr_pool_destroy(tl->msgs);
	tl->be_ops->fini(tl);
	tl_tx_free_all(tl);
	free(tl->peer_rss);
	free(tl);
}

void *tl_buf_alloc(struct tl *tl, size_t size)
{
	void *p = NULL;

	if (tl->be_ops->buf_alloc != NULL)
		return tl->be_ops->buf_alloc(tl, size);
	return posix_memalign(&p, 64, size ? size : 1) == 0 ? p : NULL;
}

void tl_buf_free(struct tl *tl, void *p)
{
	if (p == NULL)
		return;
	if (tl->be_ops->buf_free != NULL)
		tl->be_ops->buf_free(tl, p);
	else
		free(p);
}

void tl_stats_get(const struct tl *tl, struct tl_stats *out)
{
	*out = tl->st;
}

/* ---- connections ------------------------------------------------------------------- */

struct tl_conn *tl_up_new(struct tl *tl, const struct tl_conn_ops *ops, void *ctx)
{
	struct tl_conn *c;

	if (tl->nconns >= tl->cfg.max_conns)
		return NULL;
	c = calloc(1, sizeof(*c) + tl->be_ops->conn_priv);
	if (c == NULL)
		return NULL;
	c->tl = tl;
	c->ops = ops;
	c->ctx = ctx;
	c->state = TL_CS_CONNECTING;
	tl_list_init(&c->dirty);
	tl_list_init(&c->txq);
	tl_list_init(&c->txdone);
	tl_fr_init(&c->fr, tl->msgs, tl->cfg.max_body, tl->cfg.max_msg_segs);
	tl_list_add_tail(&tl->conns, &c->link);
	tl->nconns++;
	return c;
}

void tl_up_drop(struct tl_conn *c)
{
	tl_list_del(&c->link);
	c->tl->nconns--;
	free(c);
}

void tl_conn_set_ctx(struct tl_conn *c, void *ctx) { c->ctx = ctx; }
void *tl_conn_ctx(const struct tl_conn *c) { return c->ctx; }
struct tl *tl_conn_tl(const struct tl_conn *c) { return c->tl; }
const char *tl_conn_why(const struct tl_conn *c) { return c->why != NULL ? c->why : ""; }
uint64_t tl_conn_tx_pending(const struct tl_conn *c) { return c->tx_bytes; }

void tl_up_accepted(struct tl_listener *l, struct tl_conn *c)
{
	c->state = TL_CS_OPEN;
	c->established = true;
	if (l->accepted != NULL)
		l->accepted(l, c);
}

/* Starts closing: the endpoint goes now, the callbacks at the end of the round. */
void tl_up_fail(struct tl_conn *c, int reason, const char *why)
{
	if (c->state == TL_CS_CLOSING)
		return;
	c->state = TL_CS_CLOSING;
	c->reason = reason;
	c->why = why;
	tl_list_del(&c->link);
	tl_list_add_tail(&c->tl->zombies, &c->link);
	if (tl_linked(&c->dirty))
		tl_list_del(&c->dirty);
	c->tl->be_ops->shutdown(c);
}

void tl_up_connected(struct tl_conn *c, int status)
{
	if (c->state != TL_CS_CONNECTING)
		return;
	if (status != 0) {
		tl_up_fail(c, status, "connect failed");
		return;
	}
	c->state = TL_CS_OPEN;
	c->established = true;
	if (c->ops->connected != NULL)
		c->ops->connected(c, 0);
}

void tl_up_eof(struct tl_conn *c)
{
	c->graceful = c->state != TL_CS_CLOSING;
	if (tl_fr_at_boundary(&c->fr))
		tl_up_fail(c, 0, "peer closed the connection");
	else
		tl_up_fail(c, -EPROTO, "peer closed the stream inside a message");
}

int tl_close(struct tl_conn *c)
{
	if (c->state == TL_CS_CLOSING)
		return -ENOTCONN;
	c->graceful = true;
	tl_up_fail(c, -ECONNABORTED, "closed locally");
	return 0;
}

int tl_abort(struct tl_conn *c)
{
	if (c->state == TL_CS_CLOSING)
		return -ENOTCONN;
	c->abort = true;
	tl_up_fail(c, -ECONNABORTED, "aborted locally");
	return 0;
}

/* Completes what tl_conn_push finished on c, in the order it finished. */
static void tl_txdone_run(struct tl_conn *c)
{
	while (!tl_list_empty(&c->txdone)) {
		struct tl_tx *tx = tl_container_of(c->txdone.next, struct tl_tx, link);
		tl_up_tx_done(c, tx, tx->status);
	}
}

static void tl_reap_one(struct tl *tl, struct tl_conn *c)
{
	tl_list_del(&c->link);
	tl_txdone_run(c);
	while (!tl_list_empty(&c->txq)) {
		struct tl_tx *tx = tl_container_of(c->txq.next, struct tl_tx, link);
		tl_up_tx_done(c, tx, c->reason == -ECONNABORTED || c->reason == 0 ? -ECANCELED
									       : c->reason);
	}
	tl_fr_fini(&c->fr);
	if (c->established && c->ops->closed != NULL)
		c->ops->closed(c, c->reason);
	else if (!c->established && c->ops->connected != NULL)
		c->ops->connected(c, c->reason);
	tl->nconns--;
	free(c);
}

/* Runs the final callbacks of closing connections; callbacks may close more. */
static void tl_reap(struct tl *tl)
{
	while (!tl_list_empty(&tl->zombies))
		tl_reap_one(tl, tl_container_of(tl->zombies.next, struct tl_conn, link));
	while (!tl_list_empty(&tl->dead_listeners)) {
		struct tl_listener *l = tl_container_of(tl->dead_listeners.next, struct tl_listener, link);
		tl_list_del(&l->link);
		free(l);
	}
}

/* ---- listeners --------------------------------------------------------------------- */

int tl_listen(struct tl *tl, uint32_t ip, uint16_t port, const struct tl_conn_ops *ops,
	      tl_accept_fn accepted, void *ctx, struct tl_listener **out)
{
	struct tl_listener *l;
	int rc;

	if (ops == NULL)
		return -EINVAL;
	l = calloc(1, sizeof(*l) + tl->be_ops->listener_priv);
	if (l == NULL)
		return -ENOMEM;
	l->tl = tl;
	l->ops = ops;
	l->accepted = accepted;
	l->ctx = ctx;
	rc = tl->be_ops->listen(l, ip, port);
	if (rc != 0) {
		free(l);
		return rc;
	}
	tl_list_add_tail(&tl->listeners, &l->link);
	*out = l;
	return 0;
}

uint16_t tl_listener_port(const struct tl_listener *l) { return l->port; }
void *tl_listener_ctx(const struct tl_listener *l) { return l->ctx; }

void tl_unlisten(struct tl_listener *l)
{
	if (l == NULL || l->closing)
		return;
	l->closing = true;
	l->tl->be_ops->unlisten(l);
	/* Freed at the end of the round: an event for it may still sit in this batch. */
	tl_list_del(&l->link);
	tl_list_add_tail(&l->tl->dead_listeners, &l->link);
}

const struct tl_peer_rss *tl_peer_rss_find(const struct tl *tl, uint32_t ip, uint16_t port)
{
	for (uint32_t i = 0; i < tl->n_peer_rss; i++)
		if (tl->peer_rss[i].ip == ip && tl->peer_rss[i].port == port)
			return &tl->peer_rss[i];
	return NULL;
}

int tl_peer_rss(struct tl *tl, uint32_t ip, uint16_t port, uint32_t reta_size, uint16_t queues,
		uint16_t queue)
{
	struct tl_peer_rss *e = (struct tl_peer_rss *)tl_peer_rss_find(tl, ip, port);

	if (reta_size == 0) {
		if (e != NULL)
			*e = tl->peer_rss[--tl->n_peer_rss];
		return 0;
	}
	if (queues == 0 || queue >= queues || reta_size > 65536u)
		return -EINVAL;
	if (e == NULL) {
		if (tl->n_peer_rss == TL_PEER_RSS_MAX)
			return -ENOSPC;
		if (tl->peer_rss == NULL) {
			if ((tl->peer_rss = calloc(TL_PEER_RSS_MAX, sizeof(*tl->peer_rss))) == NULL)
				return -ENOMEM;
			dn_rss_key_fill(tl->peer_rss_key, sizeof(tl->peer_rss_key));
		}
		e = &tl->peer_rss[tl->n_peer_rss++];
	}
	*e = (struct tl_peer_rss){ .ip = ip, .port = port, .reta_size = reta_size,
				   .queues = queues, .queue = queue };
	return 0;
}

bool tl_peer_rss_lands(const struct tl *tl, const struct tl_peer_rss *pr, uint32_t laddr,
		       uint16_t lport)
{
	return tl_steer_hash(tl->peer_rss_key, laddr, pr->ip, lport, pr->port) % pr->reta_size %
	       pr->queues == pr->queue;
}

int tl_rss_layout(struct tl *tl, uint32_t *reta_size, uint16_t *queues, uint16_t *queue)
{
	if (tl->be_ops->rss_layout == NULL)
		return -ENOTSUP;
	return tl->be_ops->rss_layout(tl, reta_size, queues, queue);
}

int tl_connect(struct tl *tl, uint32_t ip, uint16_t port, const struct tl_conn_ops *ops,
	       void *ctx, struct tl_conn **out)
{
	struct tl_conn *c;
	int rc;

	if (ops == NULL || port == 0)
		return -EINVAL;
	c = tl_up_new(tl, ops, ctx);
	if (c == NULL)
		return tl->nconns >= tl->cfg.max_conns ? -EMFILE : -ENOMEM;
	rc = tl->be_ops->connect(c, ip, port);
	if (rc != 0) {
		tl_up_drop(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- sending ----------------------------------------------------------------------- */

static struct tl_tx *tl_tx_get(struct tl *tl, uint32_t iovcnt)
{
	struct tl_tx *tx;

	if (!tl_list_empty(&tl->tx_free)) {
		/* The most recently freed (tl_up_tx_done adds at the tail): still in cache. */
		tx = tl_container_of(tl->tx_free.prev, struct tl_tx, link);
		tl_list_del(&tx->link);
	} else {
		tx = calloc(1, sizeof(*tx));
		if (tx == NULL)
			return NULL;
		tx->iov = tx->iov_inl;
		tx->iovcap = TL_TX_IOV_INLINE;
		tl_list_init(&tx->link);
	}
	if (iovcnt > tx->iovcap) {
		/* Grows once for big scatter lists, then kept across reuse. */
		struct tl_iov *v = malloc(iovcnt * sizeof(*v));
		if (v == NULL) {
			tl_list_add_tail(&tl->tx_free, &tx->link);
			return NULL;
		}
		if (tx->iov != tx->iov_inl)
			free(tx->iov);
		tx->iov = v;
		tx->iovcap = iovcnt;
	}
	return tx;
}

void tl_up_tx_done(struct tl_conn *c, struct tl_tx *tx, int status)
{
	struct tl *tl = c->tl;

	tl_list_del(&tx->link);
	if (tl->pushing) {
		tx->status = status;
		tl_list_add_tail(&c->txdone, &tx->link);
		return;
	}
	c->tx_msgs--;
	c->tx_bytes -= tx->len;
	tl->tx_done_runs++;
	if (status == 0) {
		tl->st.msgs_out++;
		tl->st.bytes_out += tx->len;
	}
	if (tx->done != NULL)
		tx->done(tx->arg, status);
	tl_list_add_tail(&tl->tx_free, &tx->link);
}

static int tl_send_check(struct tl_conn *c, const struct tl_msg_hdr *h, const struct tl_iov *iov,
			 uint32_t iovcnt, uint64_t *body)
{
	uint64_t n = 0;
	uint32_t i;

	if (c->state != TL_CS_OPEN)
		return -ENOTCONN;
	if (h->type == 0)
		return -EINVAL;
	if (iovcnt > c->tl->cfg.max_msg_segs)
		return -E2BIG;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].base == NULL && iov[i].len > 0)
			return -EINVAL;
		n += iov[i].len;
	}
	if (n > c->tl->cfg.max_body)
		return -EMSGSIZE;
	if (c->tx_msgs >= c->tl->cfg.tx_max_msgs ||
	    c->tx_bytes + n + TL_MSG_HDR_LEN > c->tl->cfg.tx_max_bytes)
		return -ENOBUFS;
	*body = n;
	return 0;
}

/* Queues tx (its body iovs from index 1 already set, iovcnt counting the header). */
static void tl_tx_queue(struct tl_conn *c, struct tl_tx *tx, const struct tl_msg_hdr *h,
			uint64_t body, tl_send_done_fn done, void *arg)
{
	tl_msg_hdr_encode(tx->hdr, h);
	tl_st32(tx->hdr + 8, (uint32_t)body);
	tx->iov[0].base = tx->hdr;
	tx->iov[0].len = TL_MSG_HDR_LEN;
	tx->len = body + TL_MSG_HDR_LEN;
	tx->off = 0;
	tx->done = done;
	tx->arg = arg;
	tl_list_add_tail(&c->txq, &tx->link);
	c->tx_msgs++;
	c->tx_bytes += tx->len;
	tl_conn_mark_dirty(c);
}

int tl_send(struct tl_conn *c, const struct tl_msg_hdr *h, const struct tl_iov *iov,
	    uint32_t iovcnt, tl_send_done_fn done, void *arg)
{
	struct tl_tx *tx;
	uint64_t body;
	uint32_t i, k = 1;
	int rc;

	rc = tl_send_check(c, h, iov, iovcnt, &body);
	if (rc != 0)
		return rc;
	tx = tl_tx_get(c->tl, iovcnt + 1);
	if (tx == NULL)
		return -ENOMEM;
	for (i = 0; i < iovcnt; i++)
		if (iov[i].len > 0)
			tx->iov[k++] = iov[i];
	tx->iovcnt = k;
	tl_tx_queue(c, tx, h, body, done, arg);
	return 0;
}

int tl_send_copy(struct tl_conn *c, const struct tl_msg_hdr *h, const struct tl_iov *iov,
		 uint32_t iovcnt)
{
	struct tl_tx *tx;
	uint64_t body;
	int rc;

	rc = tl_send_check(c, h, iov, iovcnt, &body);
	if (rc != 0)
		return rc;
	if (body > TL_SEND_COPY_MAX)
		return -EMSGSIZE;
	if (c->tl->be_ops->send_copy != NULL && tl_list_empty(&c->txq)) {
		if (c->tl->be_ops->send_copy(c, h, (uint32_t)body, iov, iovcnt) == 0) {
			c->tl->st.msgs_out++;
			c->tl->st.bytes_out += body + TL_MSG_HDR_LEN;
			tl_conn_mark_dirty(c);
			return 0;
		}
	}
	tx = tl_tx_get(c->tl, 2);
	if (tx == NULL)
		return -ENOMEM;
	tl_iov_gather(tx->inl, iov, iovcnt);
	tx->iov[1].base = tx->inl;
	tx->iov[1].len = (uint32_t)body;
	tx->iovcnt = body > 0 ? 2 : 1;
	tl_tx_queue(c, tx, h, body, NULL, NULL);
	return 0;
}

_Static_assert(4 + TL_ERR_TEXT_MAX <= TL_SEND_COPY_MAX, "an error reply fits tl_send_copy");

int tl_send_error(struct tl_conn *c, uint64_t req_id, int code, const char *text)
{
	struct tl_msg_hdr h = { .type = TL_TYPE_ERROR, .req_id = req_id };
	uint8_t body[4 + TL_ERR_TEXT_MAX];
	struct tl_iov v = { body, 4 };
	size_t n = text != NULL ? strnlen(text, TL_ERR_TEXT_MAX) : 0;

	tl_st32(body, (uint32_t)(code < 0 ? -code : code));
	memcpy(body + 4, text, n);
	v.len += (uint32_t)n;
	return tl_send_copy(c, &h, &v, 1);
}

/* ---- receiving --------------------------------------------------------------------- */

static int tl_sink_msg(void *arg, const struct tl_msg_view *v)
{
	struct tl_conn *c = arg;

	c->tl->st.msgs_in++;
	c->tl->st.bytes_in += v->hdr.body_len;
	c->ops->msg(c, v);
	/* The application may have closed c from its callback: stop feeding it. */
	return c->state == TL_CS_OPEN ? 0 : -ECONNABORTED;
}

static int tl_sink_reject(void *arg, const struct tl_msg_hdr *h, int err)
{
	struct tl_conn *c = arg;
	const char *text = err == -EPROTONOSUPPORT ? "unsupported message version"
						   : "unknown transport message type";

	c->tl->st.rejected++;
	if (tl_send_error(c, h->req_id, err, text) != 0)
		c->tl->st.err_replies_dropped++;
	return 0;
}

static const struct tl_fr_sink tl_sink = { tl_sink_msg, tl_sink_reject };

int tl_up_input(struct tl_conn *c, const uint8_t *p, uint32_t len, void *ref)
{
	int rc;

	if (c->state != TL_CS_OPEN)
		return -ENOTCONN;
	rc = tl_fr_push(&c->fr, p, len, ref, &tl_sink, c);
	if (rc != 0 && c->fr.dead != 0) {
		c->tl->st.refused_streams++;
		tl_up_fail(c, c->fr.dead, c->fr.why);
	}
	return rc;
}

/* ---- the round --------------------------------------------------------------------- */

static void tl_flush_dirty(struct tl *tl)
{
	/* Each flush may complete sends whose callbacks queue more: bounded by one pass. */
	struct tl_link pass;

	tl_list_init(&pass);
	while (!tl_list_empty(&tl->dirty)) {
		struct tl_link *e = tl->dirty.next;
		tl_list_del(e);
		tl_list_add_tail(&pass, e);
	}
	while (!tl_list_empty(&pass)) {
		struct tl_conn *c = tl_container_of(pass.next, struct tl_conn, dirty);
		tl_list_del(&c->dirty);
		tl_txdone_run(c);
		if (c->state == TL_CS_OPEN)
			tl->be_ops->flush(c);
	}
}

void tl_wake(struct tl *tl)
{
	if (tl->be_ops->wake != NULL)
		tl->be_ops->wake(tl);
}

int tl_conn_rx_pause(struct tl_conn *c, bool paused)
{
	if (c->state != TL_CS_OPEN)
		return -ENOTCONN;
	if (c->rx_paused == paused)
		return 0;
	c->rx_paused = paused;
	c->tl->be_ops->rx_pause(c);
	return 0;
}

int tl_conn_push(struct tl_conn *c)
{
	struct tl *tl = c->tl;

	if (c->state != TL_CS_OPEN)
		return -ENOTCONN;
	/* Nothing queued, or called from a callback: the round's own flush takes c. */
	if (tl->in_poll || !tl_linked(&c->dirty))
		return 0;
	tl->pushing = true;
	tl->be_ops->flush(c);
	tl->pushing = false;
	if (tl->be_ops->kick != NULL)
		tl->be_ops->kick(tl);
	return 0;
}

void tl_on_round_end(struct tl *tl, void (*fn)(void *arg), void *arg)
{
	tl->round_end = fn;
	tl->round_end_arg = arg;
}

int tl_poll(struct tl *tl, int64_t timeout_us)
{
	uint64_t done = tl->tx_done_runs;
	int n;

	tl->in_poll = true;
	tl_flush_dirty(tl);
	/*
	 * Completions the flush ran (sends tl_conn_push wrote, or this flush) may have given
	 * back what the caller waits for, a buffer: the round does not sleep, so the caller
	 * gets to use it (a server's requests deferred for want of one: their connections are
	 * paused, and nothing else would wake it).
	 */
	n = tl->be_ops->poll(tl, tl_list_empty(&tl->zombies) && tl_list_empty(&tl->dirty) &&
				     tl->tx_done_runs == done ? timeout_us : 0);
	if (tl->round_end != NULL)
		tl->round_end(tl->round_end_arg);
	tl_flush_dirty(tl);
	/*
	 * What the round wrote leaves now. Left queued until the next round's empty Rx poll, a
	 * reply waited a round, and a stream's ACKs waited behind its data (docs/benchmarks.md,
	 * "The PS path").
	 */
	if (tl->be_ops->kick != NULL)
		tl->be_ops->kick(tl);
	tl_reap(tl);
	tl->in_poll = false;
	return n;
}
