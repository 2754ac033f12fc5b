/*
 * test_fleet.c — the fleet role API (ps_fleet.h): the role from Paddle's variables and from
 * flags, refusals (bad role, a call for the other role), a worker giving up on a server that
 * never comes, and a real pull/push round trip over protocol=kernel on 127.0.0.1: a server
 * fleet runs in a thread, a worker fleet in the test thread, both configured only through an
 * environment array as Paddle's launcher would set it; and a raw peer that pipelines 3000
 * pulls without reading: the server's pending replies stay within its buffer cap (the rest
 * refused with errors), every reply well formed and unique, and the server still serves.
 * And a model of 30 tables from a model file (configs/model_30.json: sparse and dense, every
 * optimizer and initializer): the server's health answer names its digest, a worker of the
 * same file pulls and pushes every table, a worker of another model is refused at once.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "transport/tl_wire.h"

#include "ps_core/ps_fleet.h"

#define DIM 4
#define LR 0.5f

struct fx {
	unsigned port;
	char env[8][128];
	char *envp[9];
	unsigned n_env;
	char err[512];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	/* A port of our own: other engineers' tests run on this machine at the same time. */
	f->port = 31000 + (unsigned)(getpid() % 8000) * 3;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

static void env_add(struct fx *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void env_add(struct fx *f, const char *fmt, ...)
{
	va_list ap;

	assert_true(f->n_env < 8);
	va_start(ap, fmt);
	vsnprintf(f->env[f->n_env], sizeof(f->env[0]), fmt, ap);
	va_end(ap);
	f->envp[f->n_env] = f->env[f->n_env];
	f->n_env++;
	f->envp[f->n_env] = NULL;
}

/* Paddle's variables for one server on port and one trainer, over the kernel's TCP. */
static void paddle_env(struct fx *f, const char *role, unsigned wait_s)
{
	f->n_env = 0;
	env_add(f, "TRAINING_ROLE=%s", role);
	env_add(f, "PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:%u", f->port);
	env_add(f, "POD_IP=127.0.0.1");
	env_add(f, "PADDLE_PORT=%u", f->port);
	env_add(f, "PADDLE_TRAINERS_NUM=1");
	env_add(f, "PADDLE_TRAINER_ID=0");
	env_add(f, "WHARF_PROTOCOL=kernel");
	env_add(f, "WHARF_WAIT_TIMEOUT_S=%u", wait_s);
}

static int fleet_from_env(struct fx *f, struct ps_fleet **out)
{
	static const char *const args[] = { "test_fleet", "--", "--retry-interval", "1", "--mode",
					    "async" };
	char *argv[6];

	memcpy(argv, args, sizeof(argv));
	return ps_fleet_init(6, argv, f->envp, out, f->err, sizeof(f->err));
}

/* One sparse SGD table of dim DIM, rows start at zero: after a push, value = -LR * sum(g). */
static void tables(struct ps_model_tables *mt)
{
	struct ps_table_config t;

	ps_model_tables_init(mt);
	ps_model_table_defaults(&t);
	t.dim = DIM;
	t.op.lr = LR;
	assert_int_equal(ps_model_tables_set_max_keys(mt, 256, NULL, 0), 0);
	assert_int_equal(ps_model_tables_add(mt, &t, "t", NULL, 0), 0);
}

static void test_fleet_role_from_paddle_env(void **state)
{
	struct fx *f = *state;
	struct ps_fleet *fl = NULL;

	paddle_env(f, "PSERVER", 5);
	assert_int_equal(fleet_from_env(f, &fl), 0);
	assert_true(ps_fleet_is_server(fl));
	assert_false(ps_fleet_is_worker(fl));
	assert_int_equal(ps_fleet_index(fl), 0);
	assert_int_equal(ps_fleet_cluster(fl)->protocol, PS_PROTO_KERNEL);
	assert_int_equal(ps_fleet_cluster(fl)->mode, PS_JOB_ASYNC);
	ps_fleet_destroy(fl);

	paddle_env(f, "TRAINER", 5);
	assert_int_equal(fleet_from_env(f, &fl), 0);
	assert_true(ps_fleet_is_worker(fl));
	assert_false(ps_fleet_is_server(fl));
	assert_int_equal(ps_fleet_cluster(fl)->n_ps, 1);
	ps_fleet_destroy(fl);
	ps_fleet_destroy(NULL);
}

static void test_fleet_init_role_from_flags_leaves_argv(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "prog", "-l", "0", "--", "--role", "worker", "--task-index", "1",
			 "--ps", "127.0.0.1:7", "--num-workers", "2", "--protocol", "kernel", NULL };
	char *envp[] = { NULL };
	struct ps_fleet *fl = NULL;

	assert_int_equal(ps_fleet_init(14, argv, envp, &fl, f->err, sizeof(f->err)), 0);
	assert_true(ps_fleet_is_worker(fl));
	assert_int_equal(ps_fleet_index(fl), 1);
	assert_int_equal(ps_fleet_cluster(fl)->n_workers, 2);
	/* The caller's argv is not rearranged: EAL keeps its part, getopt works on a copy. */
	assert_string_equal(argv[3], "--");
	assert_string_equal(argv[4], "--role");
	ps_fleet_destroy(fl);
}

static void test_fleet_init_refuses_bad_role(void **state)
{
	struct fx *f = *state;
	struct ps_fleet *fl = (struct ps_fleet *)(uintptr_t)0x1;

	paddle_env(f, "CHIEF", 5);
	assert_int_equal(fleet_from_env(f, &fl), -EINVAL);
	assert_ptr_equal(fl, (struct ps_fleet *)(uintptr_t)0x1); /* untouched on failure */
	assert_non_null(strstr(f->err, "TRAINING_ROLE"));
}

static void test_fleet_calls_of_other_role_refused(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt;
	struct ps_fleet *fl = NULL;
	const struct ps_client_io *io = (const void *)1;

	tables(&mt);
	paddle_env(f, "PSERVER", 5);
	assert_int_equal(fleet_from_env(f, &fl), 0);
	assert_int_equal(ps_fleet_run_server(fl), -EINVAL); /* before init_server */
	assert_int_equal(ps_fleet_init_worker(fl, &mt), -EINVAL);
	assert_non_null(strstr(ps_fleet_error(fl), "init_worker"));
	assert_null(ps_fleet_client(fl, &io));
	assert_null(io);
	mt.n = 0;
	assert_int_equal(ps_fleet_init_server(fl, &mt), -EINVAL);
	ps_fleet_destroy(fl);

	ps_model_tables_free(&mt);
	tables(&mt);
	paddle_env(f, "TRAINER", 5);
	assert_int_equal(fleet_from_env(f, &fl), 0);
	assert_int_equal(ps_fleet_init_server(fl, &mt), -EINVAL);
	assert_int_equal(ps_fleet_barrier(fl, 1), -ENOTCONN);
	ps_fleet_stop_worker(fl); /* not up: no-op */
	ps_fleet_destroy(fl);
	ps_model_tables_free(&mt);
}

static void test_fleet_worker_gives_up_without_server(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt;
	struct ps_fleet *fl = NULL;
	char ep[64];

	tables(&mt);
	f->port += 2; /* nobody listens there */
	paddle_env(f, "TRAINER", 1);
	assert_int_equal(fleet_from_env(f, &fl), 0);
	assert_int_equal(ps_fleet_init_worker(fl, &mt), -ETIMEDOUT);
	snprintf(ep, sizeof(ep), "127.0.0.1:%u", f->port);
	assert_non_null(strstr(ps_fleet_error(fl), ep));
	assert_null(ps_fleet_client(fl, NULL));
	ps_fleet_destroy(fl);
	ps_model_tables_free(&mt);
}

struct srv_arg {
	struct ps_fleet *fl;
	int rc;
};

static void *server_main(void *p)
{
	struct srv_arg *a = p;

	a->rc = ps_fleet_run_server(a->fl);
	return NULL;
}

static void test_fleet_pull_push_round_trip_kernel(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt;
	struct ps_fleet *srv = NULL, *wk = NULL;
	struct srv_arg a = { NULL, -1 };
	const struct ps_client_io *io = NULL;
	struct ps_client *pc;
	uint64_t keys[64];
	float grads[64 * DIM], vals[64 * DIM];
	pthread_t th;
	unsigned i;

	tables(&mt);
	paddle_env(f, "PSERVER", 10);
	assert_int_equal(fleet_from_env(f, &srv), 0);
	assert_int_equal(ps_fleet_init_server(srv, &mt), 0);
	a.fl = srv;
	assert_int_equal(pthread_create(&th, NULL, server_main, &a), 0);

	paddle_env(f, "TRAINER", 10);
	assert_int_equal(fleet_from_env(f, &wk), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &mt), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &mt), -EALREADY);
	pc = ps_fleet_client(wk, &io);
	assert_non_null(pc);
	assert_non_null(io);

	for (i = 0; i < 64; i++)
		keys[i] = 1000003ull * (i + 1);
	keys[63] = keys[0]; /* a duplicate: both gradients count, once each */
	for (i = 0; i < 64 * DIM; i++) {
		grads[i] = (float)(i % 7) - 3.0f;
		vals[i] = 99.0f;
	}
	assert_int_equal(ps_client_pull_wait(pc, io, 0, DIM, keys, 64, vals), 0);
	for (i = 0; i < 64 * DIM; i++)
		assert_true(vals[i] == 0.0f); /* zeros initialiser */
	assert_int_equal(ps_client_push_wait(pc, io, 0, DIM, keys, 64, grads), 0);
	assert_int_equal(ps_client_pull_wait(pc, io, 0, DIM, keys, 64, vals), 0);
	for (i = DIM; i < 63 * DIM; i++)
		assert_float_equal(vals[i], -LR * grads[i], 1e-6);
	for (i = 0; i < DIM; i++) {
		float want = -LR * (grads[i] + grads[63 * DIM + i]);
		assert_float_equal(vals[i], want, 1e-6);
		assert_float_equal(vals[63 * DIM + i], want, 1e-6);
	}
	/* A refused request comes back as an error, in the server's words; the worker goes on. */
	assert_true(ps_client_pull_wait(pc, io, 7, DIM, keys, 4, vals) < 0);
	if (strstr(ps_client_error(pc), "server 0: table 7: no sparse table") == NULL)
		fail_msg("the server's reason is lost: '%s'", ps_client_error(pc));
	assert_int_equal(ps_client_pull_wait(pc, io, 0, DIM, keys + 1, 1, vals), 0);
	assert_float_equal(vals[0], -LR * grads[DIM], 1e-6);

	ps_fleet_stop_worker(wk);
	assert_null(ps_fleet_client(wk, NULL));
	assert_int_equal(ps_fleet_stop_servers(wk, 2000), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.rc, 0);
	ps_fleet_destroy(wk);
	ps_fleet_destroy(srv);
	ps_model_tables_free(&mt);
}

/*
 * A peer that pipelines FLOOD_REQS pulls and reads nothing for a while (its receive buffer
 * at the minimum): the server's replies back up, the peer's share of the reply buffers
 * (reply_buffers) runs out, and the server stops reading it (back-pressure) rather than
 * growing or refusing. Meanwhile a real worker gets its round trip: the stalled peer holds
 * at most half of the buffers. Then the peer reads: every pull is answered exactly once,
 * none refused, every reply well formed — bounded, no crash, no hang.
 */
#define FLOOD_REQS 3000u

static int flood_connect(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 4096;

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 100; i++) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		usleep(50000);
	}
	fail_msg("cannot connect to the server on port %u", port);
	return -1;
}

/* Sends req[from, to) until done or the socket stays full for ms; returns where it got to. */
static size_t flood_send(int fd, const uint8_t *req, size_t from, size_t to, int ms)
{
	while (from < to) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t r;

		if (poll(&p, 1, ms) <= 0)
			break;
		r = send(fd, req + from, to - from, MSG_DONTWAIT);
		if (r <= 0)
			break;
		from += (size_t)r;
	}
	return from;
}

/*
 * Reads replies until none came for ms (or the buffer's worth); counts them by kind in n[0]
 * ok, n[1] errors. Returns the replies read.
 */
static unsigned flood_read(int fd, uint8_t *seen, unsigned n[2], int ms)
{
	static uint8_t buf[1 << 16];
	static size_t have; /* a reply cut by the end of one call is finished by the next */
	unsigned got = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (got < 512 && poll(&p, 1, ms) > 0) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - have);
		size_t off = 0;

		if (r <= 0)
			break;
		have += (size_t)r;
		while (have - off >= TL_MSG_HDR_LEN) {
			struct tl_msg_hdr h;

			assert_int_equal(tl_msg_hdr_decode(buf + off, 1u << 20, &h), 0);
			if (have - off < TL_MSG_HDR_LEN + h.body_len)
				break;
			assert_true(h.req_id < FLOOD_REQS);
			assert_int_equal(seen[h.req_id], 0); /* answered at most once */
			seen[h.req_id] = 1;
			if (h.type == PS_T_PULL_R) {
				assert_int_equal(h.body_len, DIM * 4);
				n[0]++;
			} else {
				assert_true(h.type == PS_T_ERROR || h.type == TL_TYPE_ERROR);
				n[1]++;
			}
			off += TL_MSG_HDR_LEN + h.body_len;
			got++;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	return got;
}

static void test_fleet_server_bounded_under_pipelined_flood(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt;
	struct ps_fleet *srv = NULL, *wk = NULL;
	struct srv_arg a = { NULL, -1 };
	const struct ps_client_io *io = NULL;
	struct ps_client *pc;
	static uint8_t req[FLOOD_REQS * (TL_MSG_HDR_LEN + 8)];
	static uint8_t seen[FLOOD_REQS];
	unsigned n[2] = { 0, 0 };
	uint64_t key = 42;
	float vals[DIM];
	pthread_t th;
	size_t off = 0, sent;
	int fd;

	tables(&mt);
	paddle_env(f, "PSERVER", 10);
	assert_int_equal(fleet_from_env(f, &srv), 0);
	assert_int_equal(ps_fleet_init_server(srv, &mt), 0);
	a.fl = srv;
	assert_int_equal(pthread_create(&th, NULL, server_main, &a), 0);

	fd = flood_connect(f->port);
	for (uint32_t i = 0; i < FLOOD_REQS; i++) {
		struct tl_msg_hdr h = { .type = PS_T_PULL, .aux = PS_ELEM_F32, .body_len = 8,
					.req_id = i, .key_count = 1, .dim = DIM };

		tl_msg_hdr_encode(req + off, &h);
		tl_st64(req + off + TL_MSG_HDR_LEN, key + i);
		off += TL_MSG_HDR_LEN + 8;
	}
	/* Non-blocking: what the server does not read stays in our send buffer. */
	sent = flood_send(fd, req, 0, off, 2000);
	sleep(1); /* the server runs into its limits while we read nothing */

	/* The stalled peer does not stall the server for a real worker. */
	paddle_env(f, "TRAINER", 10);
	assert_int_equal(fleet_from_env(f, &wk), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &mt), 0);
	pc = ps_fleet_client(wk, &io);
	assert_non_null(pc);
	assert_int_equal(ps_client_pull_wait(pc, io, 0, DIM, &key, 1, vals), 0);

	while (n[0] + n[1] < FLOOD_REQS && flood_read(fd, seen, n, 1500) > 0)
		sent = flood_send(fd, req, sent, off, 0);
	print_message("flood: %u pulls pipelined: %u answered, %u refused with an error, %u "
		      "unanswered\n", FLOOD_REQS, n[0], n[1], FLOOD_REQS - n[0] - n[1]);
	assert_int_equal(n[0], FLOOD_REQS);
	assert_int_equal(n[1], 0);
	close(fd);

	ps_fleet_stop_worker(wk);
	assert_int_equal(ps_fleet_stop_servers(wk, 2000), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.rc, 0);
	ps_fleet_destroy(wk);
	ps_fleet_destroy(srv);
	ps_model_tables_free(&mt);
}

/* ---- a model file's 30 tables ------------------------------------------------------ */

struct dwait {
	bool done;
	int status;
};

static void dwake(void *arg, int status)
{
	struct dwait *w = arg;

	w->status = status;
	w->done = true;
}

/* A dense pull (grads NULL) or push of a whole table, sent and waited for as ps_client_*_wait. */
static int dense_wait(struct ps_client *pc, const struct ps_client_io *io,
		      const struct ps_table_config *t, const float *grads, float *out)
{
	struct dwait w = { false, 0 };
	int rc = grads != NULL ?
		ps_client_dense_push(pc, t->id, t->dim, t->dense_rows, 0, (uint32_t)t->dense_rows,
				     grads, dwake, &w, io->msgs) :
		ps_client_dense_pull(pc, t->id, t->dim, t->dense_rows, 0, (uint32_t)t->dense_rows,
				     out, dwake, &w, io->msgs);

	for (uint32_t d = 0; rc == 0 && d < ps_client_dests(pc); d++)
		if (io->msgs[d].len != 0) {
			rc = io->send(io->ctx, d, io->msgs[d].buf, io->msgs[d].len);
			io->msgs[d].len = 0;
		}
	while (rc == 0 && !w.done)
		rc = io->poll(io->ctx) < 0 ? -ETIMEDOUT : 0;
	return rc != 0 ? rc : w.status;
}

/* Table t as first made: zeros, in [a, b), or spread around a (normal). */
static void check_init(const struct ps_table_config *t, const float *v, uint32_t n)
{
	bool spread = false;

	for (uint32_t i = 0; i < n; i++) {
		if (t->init == PS_INIT_ZEROS)
			assert_true(v[i] == 0.0f);
		if (t->init == PS_INIT_UNIFORM)
			assert_true(v[i] >= t->init_a && v[i] < t->init_b);
		spread |= v[i] != v[0];
	}
	if (t->init != PS_INIT_ZEROS)
		assert_true(spread);
}

/*
 * Every table of the model: pull (the initializer's values), push a gradient of +1 on every
 * value, pull again: each value went down (whichever optimizer), by exactly lr for SGD.
 */
static void every_table_round_trip(struct ps_client *pc, const struct ps_client_io *io,
				   const struct ps_model_tables *mt)
{
	enum { KEYS = 8 };
	static float v0[64 * 32], v1[64 * 32], g[64 * 32];
	uint64_t keys[KEYS];

	for (uint32_t i = 0; i < 64 * 32; i++)
		g[i] = 1.0f;
	for (uint32_t k = 0; k < KEYS; k++)
		keys[k] = 7919ull * (k + 1);
	for (uint32_t id = 0; id < mt->n; id++) {
		const struct ps_table_config *t = &mt->t[id];
		bool dense = t->kind == PS_TABLE_DENSE;
		uint32_t n = (dense ? (uint32_t)t->dense_rows : KEYS) * t->dim;

		assert_true(n <= 64 * 32);
		if (dense) {
			assert_int_equal(dense_wait(pc, io, t, NULL, v0), 0);
			check_init(t, v0, n);
			assert_int_equal(dense_wait(pc, io, t, g, NULL), 0);
			assert_int_equal(dense_wait(pc, io, t, NULL, v1), 0);
		} else {
			assert_int_equal(ps_client_pull_wait(pc, io, id, t->dim, keys, KEYS, v0), 0);
			check_init(t, v0, n);
			assert_int_equal(ps_client_push_wait(pc, io, id, t->dim, keys, KEYS, g), 0);
			assert_int_equal(ps_client_pull_wait(pc, io, id, t->dim, keys, KEYS, v1), 0);
			/* The table's own dim only. */
			assert_true(ps_client_pull_wait(pc, io, id, t->dim + 1, keys, 1, v1 + n) < 0);
		}
		for (uint32_t i = 0; i < n; i++) {
			if (!(v1[i] < v0[i]))
				fail_msg("table %u '%s' value %u: %g after a push of +1, %g before", id,
					 mt->name[id], i, (double)v1[i], (double)v0[i]);
			if (t->optim == PS_OPT_SGD)
				assert_float_equal(v1[i], v0[i] - t->op.lr, 1e-6);
		}
	}
}

static void test_fleet_model_file_served_other_model_refused(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt, other;
	struct ps_fleet *srv = NULL, *wk = NULL;
	struct srv_arg a = { NULL, -1 };
	const struct ps_client_io *io = NULL;
	struct ps_endpoint ep;
	char ans[512], want[64], ep_s[32];
	struct ps_client *pc;
	uint32_t dense = 0;
	pthread_t th;

	assert_int_equal(ps_model_file_load("configs/model_30.json", &mt, f->err, sizeof(f->err)), 0);
	assert_int_equal(mt.n, 30);
	for (uint32_t i = 0; i < mt.n; i++)
		dense += mt.t[i].kind == PS_TABLE_DENSE;
	assert_true(dense > 0 && dense < mt.n);
	paddle_env(f, "PSERVER", 10);
	assert_int_equal(fleet_from_env(f, &srv), 0);
	assert_int_equal(ps_fleet_init_server(srv, &mt), 0);
	a.fl = srv;
	assert_int_equal(pthread_create(&th, NULL, server_main, &a), 0);

	paddle_env(f, "TRAINER", 10);
	assert_int_equal(fleet_from_env(f, &wk), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &mt), 0);
	pc = ps_fleet_client(wk, &io);
	assert_non_null(pc);
	every_table_round_trip(pc, io, &mt);

	/* The control plane names the model served. */
	snprintf(ep_s, sizeof(ep_s), "127.0.0.1:%u", f->port);
	assert_int_equal(ps_parse_endpoint(ep_s, strlen(ep_s), false, &ep, "test", f->err,
					   sizeof(f->err)), 0);
	assert_int_equal(ps_ctl_request(&ep, NULL, "health", 2000, ans, sizeof(ans), f->err,
					sizeof(f->err)), 0);
	snprintf(want, sizeof(want), " model %016llx", (unsigned long long)ps_model_digest(&mt));
	if (strstr(ans, want) == NULL || strncmp(ans, "ok ready ps 0 lanes ", 20) != 0)
		fail_msg("health answer '%s' lacks '%s'", ans, want);
	ps_fleet_stop_worker(wk);
	ps_fleet_destroy(wk);

	/* A worker of another model (one learning rate apart) is refused at once. */
	assert_int_equal(ps_model_tables_copy(&other, &mt), 0);
	other.t[5].op.lr *= 2;
	assert_int_equal(fleet_from_env(f, &wk), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &other), -EPROTO);
	snprintf(want, sizeof(want), "serves model %016llx", (unsigned long long)ps_model_digest(&mt));
	assert_non_null(strstr(ps_fleet_error(wk), want));
	snprintf(want, sizeof(want), "trains model %016llx",
		 (unsigned long long)ps_model_digest(&other));
	assert_non_null(strstr(ps_fleet_error(wk), want));
	assert_null(ps_fleet_client(wk, NULL));
	ps_fleet_destroy(wk);

	assert_int_equal(fleet_from_env(f, &wk), 0);
	assert_int_equal(ps_fleet_init_worker(wk, &mt), 0); /* the server is still there */
	assert_int_equal(ps_fleet_stop_servers(wk, 2000), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.rc, 0);
	ps_fleet_destroy(wk);
	ps_fleet_destroy(srv);
	ps_model_tables_free(&other);
	ps_model_tables_free(&mt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fleet_role_from_paddle_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fleet_init_role_from_flags_leaves_argv, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fleet_init_refuses_bad_role, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fleet_calls_of_other_role_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fleet_worker_gives_up_without_server, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fleet_pull_push_round_trip_kernel, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fleet_server_bounded_under_pipelined_flood, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fleet_model_file_served_other_model_refused, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("fleet", tests, NULL, NULL);
}
