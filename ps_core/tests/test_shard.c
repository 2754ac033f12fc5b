/*
 * test_shard.c — shards owned by two lcores (threads) with cross-lcore traffic over the
 * SPSC rings: both lcores push and pull keys that live on both lcores' shards, with small
 * rings so enqueues hit a full ring while the other side waits on us. Every update must
 * land exactly once, and nothing may deadlock.
 */
#include <math.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

#define NKEYS 512u
#define ITERS 400u
#define DIM 4u

struct lcore {
	struct ps_server *s;
	struct ps_handler *h;
	uint32_t slot;
	_Atomic uint32_t *finished;
	int failures;
	int cpu; /* >= 0: the thread runs on this CPU only */
	bool fifo; /* SCHED_FIFO: it gives up the CPU only by blocking or yielding */
	pthread_barrier_t *start;
	long switches; /* times it left the CPU with work left (ru_nivcsw: yields, preemption) */
};

static void build(uint8_t *m, uint8_t type, uint32_t worker, uint64_t seq, uint32_t first_key)
{
	bool push = type == PS_T_PUSH;
	uint32_t body = push ? PS_PUSH_HEAD + NKEYS * (8 + 4 * DIM) : NKEYS * 8, i;
	struct tl_msg_hdr h = { .type = type, .aux = PS_ELEM_F32, .table_id = 1, .body_len = body,
				.key_count = NKEYS, .dim = DIM, .req_id = seq };
	uint8_t *p = m + TL_MSG_HDR_LEN;
	float one = 1.0f;

	tl_msg_hdr_encode(m, &h);
	if (push) {
		memset(p, 0, PS_PUSH_HEAD); /* incarnation 0, step 0 */
		tl_st32(p, worker);
		tl_st64(p + 8, seq);
		p += PS_PUSH_HEAD;
	}
	for (i = 0; i < NKEYS; i++, p += 8)
		tl_st64(p, first_key + i);
	for (i = 0; push && i < NKEYS * DIM; i++, p += 4)
		memcpy(p, &one, 4);
}

static void *lcore_main(void *arg)
{
	struct lcore *l = arg;

	if (l->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(l->cpu, &one);
		assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
	}
	if (l->fifo) {
		struct sched_param sp = { .sched_priority = 1 };
		assert_int_equal(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
	}
	/* Both start at once, each already pinned and scheduled as the test wants. */
	pthread_barrier_wait(l->start);
	uint8_t *req = malloc(TL_MSG_HDR_LEN + PS_PUSH_HEAD + NKEYS * (8 + 4 * DIM));
	uint8_t *rep = aligned_alloc(64, 1u << 20);
	uint32_t it, i, n = l->s->cfg.n_lcores;

	for (it = 0; it < ITERS; it++) {
		struct tl_iov iov[3];
		struct tl_msg_view v;
		struct ps_reply r = { .buf = rep, .cap = 1u << 20 };
		/* both lcores push the same keys: half the shards of each request are remote */
		build(req, it % 4 == 3 ? PS_T_PULL : PS_T_PUSH, l->slot, it + 1, 0);
		pt_view(req, 1000, iov, 3, &v);
		if (ps_handle(l->h, &v, &r) != 0)
			l->failures++;
		if (rep[3] == PS_T_PULL_R)
			for (i = 0; i < NKEYS * DIM; i++) {
				float f;
				memcpy(&f, rep + TL_MSG_HDR_LEN + 4 * i, 4);
				if (!(f <= 0.0f && f >= -0.1f * 2 * ITERS))
					l->failures++;
			}
	}
	/* Partner: the acquire loads below (the other lcore's exit condition). */
	atomic_fetch_add_explicit(l->finished, 1, memory_order_release);
	while (atomic_load_explicit(l->finished, memory_order_acquire) < n)
		if (ps_handler_poll(l->h) == 0 && l->cpu >= 0) /* serve the other's ops on our shards */
			sched_yield();
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	l->switches = ru.ru_nivcsw;
	free(req);
	free(rep);
	return NULL;
}

/*
 * Longest a run may take before it counts as hung: a run takes milliseconds (tens under the
 * sanitizers), so this bounds a hang, not a speed.
 */
#define HANG_GUARD_S 20

/*
 * Joins the n threads of th, waiting HANG_GUARD_S at most. False when some were still
 * running then: those get the CPU time-sliced (SCHED_OTHER) to finish, and are joined.
 */
static bool join_or_hang(pthread_t *th, unsigned n)
{
	struct timespec dl;
	bool done = true;
	unsigned i;

	clock_gettime(CLOCK_REALTIME, &dl); /* pthread_timedjoin_np's clock */
	dl.tv_sec += HANG_GUARD_S;
	for (i = 0; i < n; i++)
		if (pthread_timedjoin_np(th[i], NULL, &dl) != 0) {
			done = false;
			break;
		}
	for (unsigned k = i; !done && k < n; k++) {
		struct sched_param sp = { .sched_priority = 0 };
		pthread_setschedparam(th[k], SCHED_OTHER, &sp);
	}
	for (; i < n; i++)
		pthread_join(th[i], NULL);
	return done;
}

/*
 * cpu >= 0: both lcores' threads on that one CPU (lanes sharing a core); fifo: scheduled
 * SCHED_FIFO there. Returns false when the lcores did not finish within HANG_GUARD_S.
 */
static bool run(uint32_t ring_size, uint32_t shards, const int *numa, int cpu, bool fifo,
		long *switches)
{
	struct ps_table_config t = pt_table(1, DIM, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = shards, .n_lcores = 2,
				       .n_workers = 2, .mode = PS_MODE_ASYNC, .ring_size = ring_size,
				       .lcore_numa = numa,
				       .tables = &t, .n_tables = 1 };
	struct ps_server *s;
	struct lcore l[2];
	pthread_t th[2];
	pthread_barrier_t start;
	_Atomic uint32_t finished = 0;
	uint32_t i, sh, j, pushes = ITERS - ITERS / 4;
	bool done;
	char err[128];

	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), 0);
	assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
	for (i = 0; i < 2; i++) {
		l[i] = (struct lcore){ .s = s, .slot = i, .finished = &finished, .cpu = cpu,
				       .fifo = fifo, .start = &start };
		assert_int_equal(ps_handler_create(s, i, &l[i].h), 0);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, lcore_main, &l[i]), 0);
	done = join_or_hang(th, 2);
	pthread_barrier_destroy(&start);
	for (i = 0; i < 2; i++) {
		assert_int_equal(l[i].failures, 0);
		if (switches)
			switches[i] = l[i].switches;
	}
	/* every key got 2 workers x `pushes` updates of -0.1: each exactly once */
	for (sh = 0; sh < shards; sh++) {
		struct ps_table *tb = &s->shards[sh].tables[0];
		assert_true(tb->n_rows > 0);
		for (j = 0; j < tb->n_rows; j++)
			assert_true(fabsf(ps_row_val(tb, j)[0] + 0.1f * 2 * pushes) < 1e-2f);
	}
	for (i = 0; i < 2; i++)
		ps_handler_destroy(l[i].h);
	ps_server_destroy(s);
	return done;
}

static void test_shard_two_lcores_cross_traffic_over_rings(void **state)
{
	(void)state;
	assert_true(run(1024, 4, NULL, -1, false, NULL));
}

static void test_shard_two_lcores_full_rings_no_deadlock(void **state)
{
	(void)state;
	static const int node0[2] = { 0, 0 };

	/* one free entry per ring: enqueue often finds it full; memory from node 0 if NUMA */
	assert_true(run(2, 6, numa_available() >= 0 ? node0 : NULL, -1, false, NULL));
}

/*
 * Two lanes on one CPU (kernel lanes, unpinned DPDK lanes, a PS given fewer cores than lanes):
 * a lane waiting for an op on the other's shards must let that lane run. Both lanes' threads
 * run SCHED_FIFO on one CPU at the same priority: neither is ever preempted for the other, so
 * the other runs only when the waiter yields. With the yield the 2 x 400 cross-lane requests
 * finish in milliseconds; a waiter that only spun holds the CPU forever and the run never
 * ends (under the default time-sliced policy it ended at each time slice instead, a few
 * milliseconds per wait, which only a clock could tell from a yield). The same with rings of
 * one free entry, where a lane also waits for room in the other's ring.
 */
static void test_shard_two_lcores_on_one_cpu_wait_by_yielding(void **state)
{
	struct sched_param fifo = { .sched_priority = 1 }, other = { .sched_priority = 0 };
	long sw[2];

	(void)state;
	/* The probe: may this process use SCHED_FIFO (CAP_SYS_NICE or RLIMIT_RTPRIO)? */
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) != 0) {
		print_message("SKIP: SCHED_FIFO refused (needs CAP_SYS_NICE or RLIMIT_RTPRIO): "
			      "two lanes on one CPU not run\n");
		skip();
	}
	assert_int_equal(pthread_setschedparam(pthread_self(), SCHED_OTHER, &other), 0);
	if (!run(1024, 4, NULL, sched_getcpu(), true, sw))
		fail_msg("two SCHED_FIFO lcores on one CPU did not finish %u requests each in %d s: "
			 "a waiter holds the CPU the lcore it waits for needs", ITERS, HANG_GUARD_S);
	print_message("two lcores on one CPU: %u requests each; they left the CPU %ld and %ld "
		      "times\n", ITERS, sw[0], sw[1]);
	/* Rings of one free entry: a lane that finds the other's ring full lets it run too. */
	if (!run(2, 6, NULL, sched_getcpu(), true, sw))
		fail_msg("two SCHED_FIFO lcores on one CPU with full rings did not finish %u "
			 "requests each in %d s: a lane waiting for room holds the CPU", ITERS,
			 HANG_GUARD_S);
}

struct poller {
	struct ps_handler *h;
	_Atomic int stop;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;

	/* Partner: the release store of stop in the test. */
	while (!atomic_load_explicit(&p->stop, memory_order_acquire))
		ps_handler_poll(p->h);
	return NULL;
}

static int send_req(struct ps_handler *h, const uint8_t *req, uint8_t *rep)
{
	struct tl_iov iov[3];
	struct tl_msg_view v;
	struct ps_reply r = { .buf = rep, .cap = 1u << 20 };

	pt_view(req, 999, iov, 3, &v);
	return ps_handle(h, &v, &r);
}

/* Barrier state lives with shard 0 (lcore slot 0); workers' barriers arrive on slot 1. */
static void test_shard_sync_barrier_on_other_lcore(void **state)
{
	struct ps_table_config t = pt_table(1, DIM, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 4, .n_lcores = 2,
				       .n_workers = 2, .mode = PS_MODE_SYNC, .tables = &t, .n_tables = 1 };
	struct ps_server *s;
	struct ps_handler *h1;
	struct poller p = { 0 };
	pthread_t th;
	uint8_t *req = malloc(TL_MSG_HDR_LEN + PS_PUSH_HEAD + NKEYS * (8 + 4 * DIM));
	uint8_t *rep = aligned_alloc(64, 1u << 20);
	uint32_t w, i;

	(void)state;
	assert_int_equal(ps_server_create(&sc, &s, NULL, 0), 0);
	assert_int_equal(ps_handler_create(s, 0, &p.h), 0);
	assert_int_equal(ps_handler_create(s, 1, &h1), 0);
	assert_int_equal(pthread_create(&th, NULL, poller_main, &p), 0);
	for (w = 0; w < 2; w++) {
		build(req, PS_T_PUSH, w, 1, 0);
		assert_int_equal(send_req(h1, req, rep), 0);
	}
	for (w = 0; w < 2; w++) {
		struct tl_msg_hdr hd = { .type = PS_T_BARRIER, .body_len = PS_BARRIER_BODY, .req_id = 7 };
		tl_msg_hdr_encode(req, &hd);
		memset(req + TL_MSG_HDR_LEN, 0, PS_BARRIER_BODY); /* step 0, incarnation 0 */
		tl_st32(req + TL_MSG_HDR_LEN, w);
		assert_int_equal(send_req(h1, req, rep), 0);
		assert_int_equal(rep[3], PS_T_BARRIER_R);
		assert_int_equal(tl_ld32(rep + TL_MSG_HDR_LEN + 16), w == 1); /* done when both came */
	}
	build(req, PS_T_PULL, 0, 0, 0);
	assert_int_equal(send_req(h1, req, rep), 0);
	for (i = 0; i < NKEYS * DIM; i++) {
		float f;
		memcpy(&f, rep + TL_MSG_HDR_LEN + 4 * i, 4);
		assert_true(fabsf(f + 0.2f) < 1e-6f); /* both workers' gradients, applied once */
	}
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	pthread_join(th, NULL);
	ps_handler_destroy(h1);
	ps_handler_destroy(p.h);
	ps_server_destroy(s);
	free(req);
	free(rep);
}

/* Wake hook: counts the wake-ups asked for each slot. */
static _Atomic uint32_t woken[2];
static void count_wake(void *arg, uint32_t slot)
{
	(void)arg;
	atomic_fetch_add_explicit(&woken[slot], 1, memory_order_relaxed);
}

/*
 * A shard-aware client (two lanes) sends each key to the lcore owning its shard: both
 * handlers apply their part locally (no op crosses lcores, no wake-up), and every key is
 * updated exactly once. A client that sends all keys to lane 0 makes lcore 0 hand lcore 1's
 * shards over the ring: counted as remote data ops (one per shard), a wake-up each.
 */
static void test_shard_lane_aware_client_never_crosses_lcores(void **state)
{
	struct ps_table_config t = pt_table(1, DIM, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 8, .n_lcores = 2,
				       .n_workers = 1, .mode = PS_MODE_ASYNC, .tables = &t,
				       .n_tables = 1, .wake = count_wake };
	struct ps_client_config cc = { .worker_id = 0, .n_servers = 1 };
	static uint8_t bufs[2][1 << 16];
	struct ps_msgbuf m[2] = { { bufs[0], sizeof(bufs[0]), 0 }, { bufs[1], sizeof(bufs[1]), 0 } };
	uint32_t lanes = 2, shards = 8, d, i;
	struct ps_lcore_stats st[2];
	struct ps_handler *h[2];
	struct ps_client *c;
	struct ps_server *srv;
	struct poller p = { 0 };
	uint64_t keys[NKEYS];
	float g[NKEYS * DIM], out[NKEYS * DIM];
	uint8_t *rep = aligned_alloc(64, 1u << 20);
	int status = 1;
	pthread_t th;

	(void)state;
	atomic_store(&woken[0], 0);
	atomic_store(&woken[1], 0);
	assert_int_equal(ps_server_create(&sc, &srv, NULL, 0), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(ps_handler_create(srv, i, &h[i]), 0);
	assert_int_equal(ps_client_create(&cc, &c), 0);
	assert_int_equal(ps_client_set_lanes(c, &lanes, &shards), 0);
	assert_int_equal(ps_client_dests(c), 2);
	for (i = 0; i < NKEYS; i++)
		keys[i] = i * 7919u + 3;
	for (i = 0; i < NKEYS * DIM; i++)
		g[i] = 1.0f;
	assert_int_equal(ps_client_push(c, 1, DIM, keys, NKEYS, g, pt_done, &status, m), 0);
	for (d = 0; d < 2; d++) {
		struct tl_msg_hdr hd;
		struct tl_iov iov[1];
		struct tl_msg_view v;
		assert_true(m[d].len > 0); /* 512 keys over 8 shards: both lanes have some */
		tl_msg_hdr_decode(m[d].buf, UINT32_MAX, &hd);
		for (i = 0; i < hd.key_count; i++)
			assert_int_equal(ps_shard_owner(ps_key_shard(tl_ld64(m[d].buf + TL_MSG_HDR_LEN +
							PS_PUSH_HEAD + 8 * i), 8), 2), d);
		assert_int_equal(send_req(h[d], m[d].buf, rep), 0);
		pt_view(rep, 0, iov, 1, &v);
		assert_int_equal(ps_client_on_reply(c, d, &v), 0);
	}
	assert_int_equal(status, 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(ps_server_lcore_stats(srv, i, &st[i]), 0);
		assert_int_equal(st[i].data_ops_remote, 0);
		assert_int_equal(atomic_load(&woken[i]), 0);
	}
	/* Not lane-aware: everything to lcore 0, whose handler reaches lcore 1 over the ring. */
	p.h = h[1];
	assert_int_equal(pthread_create(&th, NULL, poller_main, &p), 0);
	struct ps_client *c1;
	assert_int_equal(ps_client_create(&cc, &c1), 0);
	assert_int_equal(ps_client_pull(c1, 1, DIM, keys, NKEYS, out, pt_done, &status, m), 0);
	assert_int_equal(send_req(h[0], m[0].buf, rep), 0);
	for (i = 0; i < NKEYS * DIM; i++)
		assert_true(fabsf(((float *)(rep + TL_MSG_HDR_LEN))[i] + 0.1f) < 1e-6f); /* once */
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	pthread_join(th, NULL);
	assert_int_equal(ps_server_lcore_stats(srv, 0, &st[0]), 0);
	assert_int_equal(st[0].data_ops_remote, 4); /* one op per shard of lcore 1 */
	assert_int_equal(atomic_load(&woken[1]), 4);
	assert_int_equal(ps_server_lcore_stats(srv, 1, &st[1]), 0);
	assert_int_equal(st[1].ops_served, 4);
	ps_client_destroy(c1);
	ps_client_destroy(c);
	for (i = 0; i < 2; i++)
		ps_handler_destroy(h[i]);
	ps_server_destroy(srv);
	free(rep);
}

/*
 * A hello's reply names the server's layout (2 lanes over 8 shards here). A client routing
 * by it says hello; one routing by another (one lane; 2 lanes over 4 shards) fails the hello
 * with -EPROTO, its reason naming both layouts; a reply announcing no lanes is malformed.
 */
static void test_shard_hello_reply_names_the_layout(void **state)
{
	struct ps_table_config t = pt_table(1, DIM, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 8, .n_lcores = 2,
				       .n_workers = 1, .mode = PS_MODE_ASYNC, .tables = &t,
				       .n_tables = 1 };
	struct ps_client_config cc = { .worker_id = 0, .n_servers = 1, .incarnation = 7 };
	static const uint32_t lanes[4] = { 2, 1, 2, 2 }, shards[4] = { 8, 8, 4, 8 };
	static const int want[4] = { 0, -EPROTO, -EPROTO, -EBADMSG };
	static uint8_t bufs[2][4096];
	struct ps_msgbuf m[2] = { { bufs[0], sizeof(bufs[0]), 0 }, { bufs[1], sizeof(bufs[1]), 0 } };
	uint8_t *rep = aligned_alloc(64, 1u << 20);
	struct ps_handler *h[2];
	struct ps_server *srv;
	struct poller p = { 0 };
	pthread_t th;
	uint32_t i;

	(void)state;
	assert_int_equal(ps_server_create(&sc, &srv, NULL, 0), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(ps_handler_create(srv, i, &h[i]), 0);
	p.h = h[1]; /* a hello asks every shard: lane 1's over the ring */
	assert_int_equal(pthread_create(&th, NULL, poller_main, &p), 0);
	for (uint32_t k = 0; k < 4; k++) {
		struct tl_msg_hdr hd;
		struct tl_iov iov[1];
		struct tl_msg_view v;
		struct ps_client *c;
		int status = 1;

		assert_int_equal(ps_client_create(&cc, &c), 0);
		assert_int_equal(ps_client_set_lanes(c, &lanes[k], &shards[k]), 0);
		m[0].len = m[1].len = 0;
		assert_int_equal(ps_client_hello(c, pt_done, &status, m), 0);
		assert_true(m[0].len > 0); /* hellos go to lane 0 */
		assert_int_equal(m[1].len, 0);
		assert_int_equal(send_req(h[0], m[0].buf, rep), 0);
		tl_msg_hdr_decode(rep, UINT32_MAX, &hd);
		assert_int_equal(hd.type, PS_T_HELLO_R);
		assert_int_equal(tl_ld32(rep + TL_MSG_HDR_LEN + 40), 2);
		assert_int_equal(tl_ld32(rep + TL_MSG_HDR_LEN + 44), 8);
		if (k == 3)
			tl_st32(rep + TL_MSG_HDR_LEN + 40, 0);
		pt_view(rep, 0, iov, 1, &v);
		assert_int_equal(ps_client_on_reply(c, 0, &v), want[k] == -EBADMSG ? -EBADMSG : 0);
		assert_int_equal(status, want[k]);
		if (k == 1 || k == 2) {
			char why[160];
			snprintf(why, sizeof(why), "runs 2 lanes over 8 shards (its hello reply), this "
				 "client routes keys to it by %u lanes over %u shards", lanes[k],
				 shards[k]);
			assert_non_null(strstr(ps_client_error(c), why));
		}
		ps_client_destroy(c);
	}
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	pthread_join(th, NULL);
	for (i = 0; i < 2; i++)
		ps_handler_destroy(h[i]);
	ps_server_destroy(srv);
	free(rep);
}

static void test_shard_handler_slots_checked(void **state)
{
	struct ps_table_config t = pt_table(1, DIM, PS_OPT_SGD);
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 2, .n_lcores = 2, .n_workers = 1,
				       .tables = &t, .n_tables = 1 };
	struct ps_server *s;
	struct ps_handler *h, *h2;

	(void)state;
	assert_int_equal(ps_server_create(&sc, &s, NULL, 0), 0);
	assert_int_equal(ps_handler_create(s, 2, &h), -EINVAL);
	assert_int_equal(ps_handler_create(s, 1, &h), 0);
	assert_int_equal(ps_handler_create(s, 1, &h2), -EINVAL); /* one handler per slot */
	ps_handler_destroy(h);
	ps_server_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shard_two_lcores_cross_traffic_over_rings),
		cmocka_unit_test(test_shard_two_lcores_full_rings_no_deadlock),
		cmocka_unit_test(test_shard_two_lcores_on_one_cpu_wait_by_yielding),
		cmocka_unit_test(test_shard_sync_barrier_on_other_lcore),
		cmocka_unit_test(test_shard_handler_slots_checked),
		cmocka_unit_test(test_shard_lane_aware_client_never_crosses_lcores),
		cmocka_unit_test(test_shard_hello_reply_names_the_layout),
	};
	return cmocka_run_group_tests_name("ps_shard", tests, NULL, NULL);
}
