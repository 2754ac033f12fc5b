/*
 * pb_run.c — wharf-ps-bench's worker: timed phases of pulls, pushes or push-pulls with up to
 * --inflight requests outstanding at once (a closed loop: a request is issued as soon as one
 * completes, so with 1 in flight each request's latency is what a trainer waiting on it
 * sees, and with more the pipeline shows).
 *
 * Call chain: main -> pb_worker_run -> ps_fleet_init_worker -> pb_phase_run -> pipe_issue
 *   (ps_client_pull | _push | _push_pull | _dense_*, then the io's send) and the io's poll
 *   (-> ps_client_on_reply -> slot_done) -> on a lost server pipe_recover -> ps_fleet_recover.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/ps-bench/pb.h"

#define ZIPF_S 1.1
#define POOL_KEYS (1u << 18) /* pre-drawn keys; a request is a random window of them */
#define MAX_SAMPLES (1u << 20)
#define WARMUP_REQS 20u

/* One request in flight: its destination buffer, when it left and what it still awaits. */
struct pb_slot {
	float *vals;
	double t0;
	unsigned pending; /* replies awaited: 2 for a dense push-pull (a push and a pull) */
	int status;
	bool busy, done;
	bool lost; /* in flight when its server was lost: a failure is not the server's answer */
};

struct pb_run {
	struct ps_fleet *f;
	const struct pb_opts *o;
	struct ps_client *pc;
	const struct ps_client_io *io;
	uint64_t *pool;
	float *grads;
	double *lat;
	struct pb_slot slot[PB_MAX_INFLIGHT];
	bool send_failed; /* pipe_issue's error came from a send (the request is recorded) */
	struct wc_rng r;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Zipf ranks by inverting the continuous CDF of x^-s on [1, n+1): rank k gets the mass of
 * [k, k+1), which is k^-s up to a factor that tends to 1 — the heavy head and long tail a
 * CTR id stream has, without tables of n entries. Ranks are hashed so hot ids spread over
 * servers and shards as real ids do.
 */
static void draw_keys(uint64_t *pool, unsigned n, unsigned long long space, uint64_t seed)
{
	double a = 1.0 - ZIPF_S, hmax = (pow((double)space + 1.0, a) - 1.0) / a;
	struct wc_rng r;
	unsigned i;

	wc_rng_seed(&r, seed);
	for (i = 0; i < n; i++) {
		double x = pow(1.0 + wc_rng_uniform(&r) * hmax * a, 1.0 / a);
		uint64_t rank = (uint64_t)x;
		if (rank < 1)
			rank = 1;
		if (rank > space)
			rank = space;
		pool[i] = wc_mix64(rank);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ps_client's completion: runs inside the io's poll, once per reply awaited. */
static void slot_done(void *arg, int status)
{
	struct pb_slot *s = arg;

	if (status != 0 && s->status == 0)
		s->status = status;
	if (--s->pending == 0)
		s->done = true;
}

/* Hands what the last encode put in the io's buffers to the transport. */
static int send_encoded(struct pb_run *b)
{
	uint32_t d, nd = ps_client_dests(b->pc);
	int rc = 0;

	for (d = 0; d < nd; d++) {
		struct ps_msgbuf *m = &b->io->msgs[d];
		int r;
		if (m->len == 0)
			continue;
		r = b->io->send(b->io->ctx, d, m->buf, m->len);
		m->len = 0;
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

/*
 * Encodes one request of phase ph into slot s and sends it. A dense push-pull is a dense
 * push and a dense pull of the same rows, sent back to back (the protocol has no dense
 * push-pull message); the slot completes when both have answered. -errno: the encode
 * failed (nothing recorded for it), or a send failed (the request stays recorded; the
 * caller recovers).
 */
static int pipe_issue(struct pb_run *b, const struct pb_phase *ph, struct pb_slot *s)
{
	const struct pb_opts *o = b->o;
	uint32_t t = o->table[ph->kind], n = ph->batch;
	uint64_t first;
	int rc;

	b->send_failed = false;
	s->busy = true;
	s->done = false;
	s->lost = false;
	s->status = 0;
	s->pending = ph->kind == PB_DENSE && ph->op == PB_PUSH_PULL ? 2 : 1;
	s->t0 = now_s();
	if (ph->kind == PB_SPARSE) {
		const uint64_t *keys = b->pool + wc_rng_below(&b->r, POOL_KEYS - n + 1);
		if (ph->op == PB_PULL)
			rc = ps_client_pull(b->pc, t, o->dim, keys, n, s->vals, slot_done, s,
					    b->io->msgs);
		else if (ph->op == PB_PUSH)
			rc = ps_client_push(b->pc, t, o->dim, keys, n, b->grads, slot_done, s,
					    b->io->msgs);
		else
			rc = ps_client_push_pull(b->pc, t, o->dim, keys, n, b->grads, s->vals,
						 slot_done, s, b->io->msgs);
		goto out_send;
	}
	first = wc_rng_below(&b->r, (uint64_t)o->dense_rows - n + 1);
	if (ph->op != PB_PULL) {
		rc = ps_client_dense_push(b->pc, t, o->dim, o->dense_rows, first, n, b->grads,
					  slot_done, s, b->io->msgs);
		if (rc < 0 || ph->op == PB_PUSH)
			goto out_send;
		if ((rc = send_encoded(b)) < 0) {
			s->pending--; /* the pull was never asked */
			b->send_failed = true;
			return rc;
		}
	}
	rc = ps_client_dense_pull(b->pc, t, o->dim, o->dense_rows, first, n, s->vals, slot_done, s,
				  b->io->msgs);
	if (rc < 0 && ph->op == PB_PUSH_PULL) {
		s->pending--; /* the push went: the slot completes with it */
		return rc;
	}
out_send:
	if (rc < 0) {
		s->busy = false;
		return rc;
	}
	rc = send_encoded(b);
	b->send_failed = rc < 0;
	return rc;
}

/*
 * A server was lost (rc from a send or the poll): requests that will not be sent again
 * (pulls) complete with an error as ps_client lets go of what the lost connection owed (as
 * the glue reports the loss, and at the resend), then the fleet waits for the servers and
 * resends every unacknowledged push exactly once. 0 to go on, else the error to give up with.
 */
static int pipe_recover(struct pb_run *b, int rc)
{
	unsigned i;

	if (rc == -ECANCELED)
		return ps_fleet_recover(b->f, rc);
	for (i = 0; i < PB_MAX_INFLIGHT; i++)
		b->slot[i].lost = b->slot[i].busy;
	return ps_fleet_recover(b->f, rc);
}

struct pb_tally {
	uint64_t n;   /* requests completed */
	double last;  /* time of the last completion */
	double sum;   /* their latencies, us */
};

/*
 * Completed slots: latencies into the tally (timed) and the slot freed. A request lost with
 * its server (a pull) is not counted; one the server refused ends the phase: -errno. Else
 * the count of requests still in flight.
 */
static int pipe_reap(struct pb_run *b, unsigned inflight, struct pb_tally *t, bool timed)
{
	unsigned i;
	double now = 0;
	int busy = 0;

	for (i = 0; i < inflight; i++) {
		struct pb_slot *s = &b->slot[i];
		if (!s->busy)
			continue;
		if (!s->done) {
			busy++;
			continue;
		}
		s->busy = false;
		if (s->status != 0 && !s->lost)
			return s->status;
		if (s->status != 0 || !timed)
			continue;
		if (now == 0)
			now = now_s();
		if (t->n < MAX_SAMPLES)
			b->lat[t->n] = (now - s->t0) * 1e6;
		t->sum += (now - s->t0) * 1e6;
		t->n++;
		t->last = now;
	}
	return busy;
}

/*
 * Keeps ph->inflight requests going: until `count` were issued (warm-up), or until `end`
 * (timed); then drains. A request refused by a server ends the phase with its error.
 */
static int pipe_run(struct pb_run *b, const struct pb_phase *ph, unsigned count, double end,
		    struct pb_tally *t)
{
	bool timed = count == 0;
	unsigned issued = 0, i, polls = 0;
	int rc, busy;

	/* Reap first, then refill: a slot freed is reused before the poll may sleep. */
	for (;;) {
		bool more;
		if ((busy = pipe_reap(b, ph->inflight, t, timed)) < 0)
			return busy;
		more = timed ? now_s() < end : issued < count;
		for (i = 0; more && i < ph->inflight; i++) {
			if (b->slot[i].busy)
				continue;
			rc = pipe_issue(b, ph, &b->slot[i]);
			issued++;
			/* An encode refused is a bench bug or a full client: no recovering from it. */
			if (rc < 0 && (!b->send_failed || (rc = pipe_recover(b, rc)) != 0))
				return rc;
			busy++;
			more = timed || issued < count;
		}
		if (busy == 0)
			return 0;
		if ((rc = b->io->poll(b->io->ctx)) < 0 && (rc = pipe_recover(b, rc)) != 0)
			return rc;
		if ((++polls & 1023) == 0 && ps_fleet_signalled(b->f))
			return -ECANCELED;
	}
}

static int pb_phase_run(struct pb_run *b, struct pb_phase *ph)
{
	struct pb_tally t = { 0, 0, 0 };
	double t0;
	uint64_t n;
	int rc;

	if ((rc = pipe_run(b, ph, WARMUP_REQS, 0, &t)) != 0)
		return rc;
	t0 = now_s();
	if ((rc = pipe_run(b, ph, 0, t0 + b->o->seconds, &t)) != 0)
		return rc;
	ph->reqs = t.n;
	ph->secs = t.n ? t.last - t0 : 0;
	ph->lat_sum_us = t.sum;
	n = t.n < MAX_SAMPLES ? t.n : MAX_SAMPLES;
	qsort(b->lat, n, sizeof(double), cmp_double);
	ph->p50_us = n ? b->lat[(n - 1) / 2] : 0;
	ph->p99_us = n ? b->lat[(n - 1) * 99 / 100] : 0;
	return 0;
}

static void wait_start(double start_at)
{
	struct timespec ts;
	double now, d;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	if (start_at <= 0)
		return;
	d = start_at - now;
	if (d <= 0) {
		fprintf(stderr, "wharf-ps-bench: --start-at was %.1f s ago; starting now\n", -d);
		return;
	}
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

unsigned pb_sweep_size(const struct pb_opts *o)
{
	return o->n_kind * o->n_batch * o->n_inflight * o->n_op;
}

/* The sweep's points into ph, kinds outermost, ops innermost. */
static void sweep_fill(const struct pb_opts *o, struct pb_phase *ph)
{
	unsigned k, bt, in, op, i = 0;

	for (k = 0; k < o->n_kind; k++)
		for (bt = 0; bt < o->n_batch; bt++)
			for (in = 0; in < o->n_inflight; in++)
				for (op = 0; op < o->n_op; op++, i++) {
					memset(&ph[i], 0, sizeof(ph[i]));
					ph[i].kind = o->kind[k];
					ph[i].batch = o->batch[bt];
					ph[i].inflight = o->inflight[in];
					ph[i].op = o->op[op];
				}
}

static unsigned list_max(const unsigned *v, unsigned n)
{
	unsigned m = 0;

	while (n--)
		m = v[n] > m ? v[n] : m;
	return m;
}

static int run_alloc(struct pb_run *b, const struct pb_opts *o)
{
	size_t row = (size_t)list_max(o->batch, o->n_batch) * o->dim;
	unsigned i;

	b->pool = malloc(POOL_KEYS * sizeof(uint64_t));
	b->grads = malloc(row * sizeof(float));
	b->lat = malloc(MAX_SAMPLES * sizeof(double));
	if (b->pool == NULL || b->grads == NULL || b->lat == NULL)
		return -ENOMEM;
	for (i = 0; i < list_max(o->inflight, o->n_inflight); i++)
		if ((b->slot[i].vals = malloc(row * sizeof(float))) == NULL)
			return -ENOMEM;
	return 0;
}

static void run_free(struct pb_run *b)
{
	unsigned i;

	free(b->pool);
	free(b->grads);
	free(b->lat);
	for (i = 0; i < PB_MAX_INFLIGHT; i++)
		free(b->slot[i].vals);
}

int pb_worker_run(struct ps_fleet *f, const struct pb_opts *o, const struct ps_model_tables *mt,
		  struct pb_phase *ph, unsigned count, unsigned *done)
{
	struct pb_run b;
	unsigned i;
	int rc;

	*done = 0;
	memset(&b, 0, sizeof(b));
	b.f = f;
	b.o = o;
	if ((rc = run_alloc(&b, o)) != 0) {
		fprintf(stderr, "wharf-ps-bench: out of memory\n");
		goto out;
	}
	wc_rng_seed(&b.r, 1000 + ps_fleet_index(f));
	draw_keys(b.pool, POOL_KEYS, o->keys, 7 + ps_fleet_index(f));
	for (i = 0; i < list_max(o->batch, o->n_batch) * o->dim; i++)
		b.grads[i] = (float)(wc_rng_uniform(&b.r) - 0.5);
	sweep_fill(o, ph);
	if ((rc = ps_fleet_init_worker(f, mt)) != 0) {
		fprintf(stderr, "wharf-ps-bench: %s\n", ps_fleet_error(f));
		goto out;
	}
	b.pc = ps_fleet_client(f, &b.io);
	wait_start(o->start_at);
	for (i = 0; i < count && rc == 0; i++) {
		if ((rc = pb_phase_run(&b, &ph[i])) == 0)
			*done = i + 1;
		else if (rc == -ECANCELED)
			fprintf(stderr, "wharf-ps-bench: stopped by a signal in the %s %s phase (batch "
				"%u, %u in flight), %u of %u phases done\n", pb_kind_name[ph[i].kind],
				pb_op_name[ph[i].op], ph[i].batch, ph[i].inflight, i, count);
		else
			fprintf(stderr, "wharf-ps-bench: %s %s phase (batch %u, %u in flight): %s "
				"(%s)\n", pb_kind_name[ph[i].kind], pb_op_name[ph[i].op],
				ph[i].batch, ph[i].inflight, strerror(-rc), ps_fleet_error(f));
	}
	/* While b lives: a request still in flight may call back into its slot until then. */
	ps_fleet_stop_worker(f);
out:
	run_free(&b);
	return rc;
}
