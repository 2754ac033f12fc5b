/*
 * pt_util.c — the in-process cluster of ps_core's tests (see pt_util.h). Linked into
 * every test binary of ps_core/tests.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/tests/pt_util.h"

#define PT_MAX_IOV 4096

struct ps_table_config pt_table(uint32_t id, uint32_t dim, enum ps_optim_kind o)
{
	struct ps_table_config t = { .id = id, .kind = PS_TABLE_SPARSE, .dim = dim, .optim = o,
				     .op = { .lr = 0.1f, .eps = 1e-6f, .beta1 = 0.9f, .beta2 = 0.999f,
					     .l1 = 0.01f, .l2 = 0.1f, .init_accum = 0.1f } };
	if (o == PS_OPT_FTRL)
		t.op.beta1 = 1.0f;
	return t;
}

void pt_wal_paths(const char *dir, uint32_t server, char *wal, char *ckpt, size_t len)
{
	snprintf(wal, len, "%s/s%u.wal", dir, server);
	snprintf(ckpt, len, "%s/s%u.ckpt", dir, server);
}

int pt_cluster_create(uint32_t n_servers, uint32_t n_shards, enum ps_mode mode, uint32_t n_workers,
		      const struct ps_table_config *t, uint32_t nt, struct pt_cluster **out)
{
	return pt_cluster_create_wal(n_servers, n_shards, mode, n_workers, t, nt, NULL, 0, out);
}

bool pt_wal_bg_sync;
uint32_t pt_barrier_timeout_ms;
enum ps_barrier_policy pt_barrier_policy;
uint32_t pt_geo_log_max;

static int server_make(struct pt_cluster *c, uint32_t i)
{
	char wal[PATH_MAX], ckpt[PATH_MAX];
	struct ps_server_config sc = { .server_id = i, .n_servers = c->n_servers,
		.n_shards = c->n_shards, .n_lcores = 1, .n_workers = c->n_workers, .mode = c->mode,
		.max_keys = 8192, .tables = c->t, .n_tables = c->nt, .geo_log_max = pt_geo_log_max,
		.barrier_timeout_ms = pt_barrier_timeout_ms, .barrier_policy = pt_barrier_policy,
		.allow_save_requests = true /* the test stands for the control plane */ };
	int rc;

	if (c->dir[0]) {
		pt_wal_paths(c->dir, i, wal, ckpt, sizeof(wal));
		sc.wal_dir = wal;
		sc.ckpt_path = ckpt;
		sc.wal_segment_bytes = c->seg;
		sc.wal_bg_sync = pt_wal_bg_sync;
	}
	if ((rc = ps_server_create(&sc, &c->srv[i], NULL, 0)) < 0)
		return rc;
	return ps_handler_create(c->srv[i], 0, &c->h[i]);
}

int pt_server_restart(struct pt_cluster *c, uint32_t i, uint32_t n_shards, const char *restore)
{
	struct ps_recover_stats st;
	char err[256];
	int rc;

	ps_handler_destroy(c->h[i]);
	ps_server_destroy(c->srv[i]);
	c->h[i] = NULL;
	c->srv[i] = NULL;
	if (n_shards)
		c->n_shards = n_shards;
	if ((rc = server_make(c, i)) < 0)
		return rc;
	if (c->dir[0])
		rc = ps_recover(c->h[i], restore, &st, err, sizeof(err));
	else if (restore)
		rc = ps_load(c->h[i], restore, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "pt_server_restart: %s\n", err);
	return rc;
}

int pt_cluster_create_wal(uint32_t n_servers, uint32_t n_shards, enum ps_mode mode,
			  uint32_t n_workers, const struct ps_table_config *t, uint32_t nt,
			  const char *dir, uint64_t seg, struct pt_cluster **out)
{
	struct pt_cluster *c = calloc(1, sizeof(*c));
	uint32_t i;
	int rc = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->n_servers = n_servers;
	c->n_clients = n_workers;
	c->n_shards = n_shards;
	c->n_workers = n_workers;
	c->mode = mode;
	c->t = t;
	c->nt = nt;
	c->seg = seg;
	if (dir && snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir))
		goto out;
	c->rep_buf = aligned_alloc(64, PT_BUF);
	if (!c->rep_buf)
		goto out;
	for (i = 0; i < n_servers; i++) {
		c->msgs[i].buf = malloc(PT_BUF);
		c->msgs[i].cap = PT_BUF;
		if (!c->msgs[i].buf)
			goto out;
		if ((rc = server_make(c, i)) < 0)
			goto out;
	}
	for (i = 0; i < n_workers; i++) {
		struct ps_client_config cc = { .worker_id = i, .n_servers = n_servers, .max_keys = 8192 };
		if ((rc = ps_client_create(&cc, &c->cl[i])) < 0)
			goto out;
	}
	*out = c;
	return 0;
out:
	pt_cluster_destroy(c);
	return rc;
}

void pt_client_restart(struct pt_cluster *c, uint32_t w, uint64_t inc)
{
	struct ps_client_config cc = { .worker_id = w, .n_servers = c->n_servers, .max_keys = 8192,
				       .incarnation = inc };

	ps_client_destroy(c->cl[w]);
	c->cl[w] = NULL;
	if (ps_client_create(&cc, &c->cl[w]) < 0)
		abort();
}

void pt_cluster_destroy(struct pt_cluster *c)
{
	uint32_t i;

	if (!c)
		return;
	for (i = 0; i < PT_MAX_SERVERS; i++) {
		ps_handler_destroy(c->h[i]);
		ps_server_destroy(c->srv[i]);
		free(c->msgs[i].buf);
	}
	for (i = 0; i < PT_MAX_CLIENTS; i++)
		ps_client_destroy(c->cl[i]);
	free(c->rep_buf);
	free(c);
}

/*
 * Pieces of a split view are copies laid apart in this pool, with NaN bytes between them
 * (a read past a piece's end gets wrong bytes, as with received buffers, not the next
 * piece's); the pool is reused from its start when the next copy would not fit.
 */
#define PT_POOL (4u << 20)
#define PT_GAP  64u
static _Thread_local uint8_t *pt_pool; /* one a thread: lcores build views too */
static _Thread_local uint32_t pt_pool_at;
static pthread_key_t pt_pool_key;        /* frees a thread's pool when it exits */
static pthread_once_t pt_pool_once = PTHREAD_ONCE_INIT;

static void pt_pool_key_make(void) { (void)pthread_key_create(&pt_pool_key, free); }

static const uint8_t *pt_apart(const uint8_t *p, uint32_t n)
{
	uint8_t *d;

	if (!pt_pool) {
		pthread_once(&pt_pool_once, pt_pool_key_make);
		if ((pt_pool = malloc(PT_POOL)) != NULL)
			(void)pthread_setspecific(pt_pool_key, pt_pool);
	}
	if (!pt_pool || n + PT_GAP > PT_POOL)
		return p; /* too big for the pool: in place */
	if (pt_pool_at + n + PT_GAP > PT_POOL)
		pt_pool_at = 0;
	d = pt_pool + pt_pool_at;
	memcpy(d, p, n);
	memset(d + n, 0xff, PT_GAP);
	pt_pool_at += n + PT_GAP;
	return d;
}

void pt_view(const uint8_t *msg, uint32_t split, struct tl_iov *iov, uint32_t max_iov,
	     struct tl_msg_view *v)
{
	uint32_t off = 0, body;

	tl_msg_hdr_decode(msg, UINT32_MAX, &v->hdr);
	body = v->hdr.body_len;
	v->iov = iov;
	v->iovcnt = 0;
	while (off < body && v->iovcnt < max_iov) {
		uint32_t n = split && body - off > split ? split : body - off;
		const uint8_t *p = msg + TL_MSG_HDR_LEN + off;
		if (v->iovcnt == max_iov - 1)
			n = body - off;
		iov[v->iovcnt].base = split ? pt_apart(p, n) : p;
		iov[v->iovcnt].len = n;
		v->iovcnt++;
		off += n;
	}
}

void pt_deliver(struct pt_cluster *c, uint32_t worker)
{
	struct tl_iov *iov = malloc(PT_MAX_IOV * sizeof(*iov));
	struct tl_iov *riov = malloc(PT_MAX_IOV * sizeof(*riov));
	struct tl_msg_view v, rv;
	uint32_t s;

	for (s = 0; s < c->n_servers && iov && riov; s++) {
		struct ps_reply rep = { .buf = c->rep_buf, .cap = PT_BUF };
		if (!c->msgs[s].len)
			continue;
		pt_view(c->msgs[s].buf, c->split, iov, PT_MAX_IOV, &v);
		c->last_rc = ps_handle(c->h[s], &v, &rep);
		c->msgs[s].len = 0;
		if (rep.len == 0)
			continue;
		pt_view(rep.buf, c->split, riov, PT_MAX_IOV, &rv);
		if (rv.hdr.type == PS_T_ERROR)
			c->errors++;
		ps_client_on_reply(c->cl[worker], s, &rv);
	}
	free(iov);
	free(riov);
}

void pt_done(void *arg, int status) { *(int *)arg = status; }

int pt_pull(struct pt_cluster *c, uint32_t w, uint32_t table, uint32_t dim, const uint64_t *keys,
	    uint32_t n, float *out)
{
	int st = 1, rc = ps_client_pull(c->cl[w], table, dim, keys, n, out, pt_done, &st, c->msgs);

	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}

int pt_push(struct pt_cluster *c, uint32_t w, uint32_t table, uint32_t dim, const uint64_t *keys,
	    uint32_t n, const float *grads)
{
	int st = 1, rc = ps_client_push(c->cl[w], table, dim, keys, n, grads, pt_done, &st, c->msgs);

	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}

int pt_barrier(struct pt_cluster *c, uint32_t w, uint64_t step, bool *done)
{
	int st = 1, rc = ps_client_barrier(c->cl[w], step, done, pt_done, &st, c->msgs);

	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}

int pt_barrier_all(struct pt_cluster *c, uint64_t step)
{
	uint32_t w, n = c->n_clients;
	bool done;
	int rc;

	for (w = 0; w < n; w++) {
		if ((rc = pt_barrier(c, w, step, &done)) != 0)
			return rc;
		if (done != (w == n - 1))
			return -EPROTO;
	}
	for (w = 0; w + 1 < n; w++) {
		if ((rc = pt_barrier(c, w, step, &done)) != 0)
			return rc;
		if (!done)
			return -EPROTO;
	}
	return 0;
}

int pt_hello(struct pt_cluster *c, uint32_t w)
{
	int st = 1, rc = ps_client_hello(c->cl[w], pt_done, &st, c->msgs);

	if (rc < 0)
		return rc;
	pt_deliver(c, w);
	return st;
}
