/*
 * tr_geo_ledger.c — the exactly-once ledger in GEO mode ("--model count --mode geo"), where a
 * push is a delta the server adds and rows come back through GEO pulls. Each of R rounds,
 * worker w moves, on its local copies (wc_geo): its counter row K(w) by W (the worker count;
 * wc_geo pushes 1/W of each change and keeps the rest for later rounds), and a fresh row
 * E(w, i) by W (pushed as exactly 1, never touched again); pushes them; GEO-pulls. At the
 * end it moves its done row D(w) the same way and GEO-pulls until every other worker's done
 * row has come, then once more. Checked, exactly (bit for bit, no tolerance):
 *   applied  every E(w, i) on the server is 1: none lost (0), none doubled (2 or more);
 *   counter  K(w) on the server is the float sum of the deltas this worker pushed for it, in
 *            order (a push applied twice or lost breaks it);
 *   handed   K(w) on the server plus what this worker still holds of its own change (latest -
 *            base) is its whole change, W per round, to float rounding (under 0.05 for 10^4
 *            rounds; a delta pushed again, as when a lost GEO reply left the base behind, adds
 *            at least 1);
 *   seen     every other worker's E(k, i) came through the GEO pulls, at 1 (none lost with a
 *            dropped reply or a server restart);
 *   others   each other worker's K(k) as this worker holds it equals the server's.
 * A fresh job only: a worker restarted under its old id finds its earlier rows.
 *
 * Call chain: main -> tr_count_run (GEO mode) -> tr_geo_ledger_run -> tr_net_push,
 *   tr_net_geo_pull, tr_net_pull.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/train/tr.h"

#define GL_KEY_K(w)    (1000ull + (w))
#define GL_KEY_D(w)    (2000ull + (w))
#define GL_KEY_E(w, i) ((1ull << 40) | ((uint64_t)(w) << 24) | (uint64_t)(i))
#define GL_MAX_ROUNDS  (1u << 24)

struct gl {
	struct tr_net *t;
	struct wc_geo *g;
	uint32_t w, workers, rounds;
	uint64_t *keys;
	float *deltas;
	float expect;          /* K(w) on the server: the pushed deltas, summed in order */
	float start;           /* K(w) when this worker began */
	uint32_t done;         /* rounds pushed and GEO-pulled */
	uint32_t pushes;       /* pushes acknowledged (each numbered: the PS's last sequence) */
};

static void gl_on_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct gl *l = arg;

	(void)dim;
	wc_geo_recv(l->g, key, row, NULL);
}

/* Moves key's local copy by W (a row new here starts at the table's 0) and marks it. */
static int gl_move(struct gl *l, uint64_t key)
{
	static const float zero;
	uint32_t idx;
	int rc;

	if (wc_geo_find(l->g, key, &idx) != 0 && (rc = wc_geo_recv(l->g, key, &zero, &idx)) != 0)
		return rc;
	*wc_geo_latest(l->g, idx) += (float)l->workers;
	wc_geo_touch(l->g, idx);
	return 0;
}

/* The deltas of what moved, pushed; K(w)'s added to the expected counter. */
static int gl_sync(struct gl *l)
{
	uint32_t m = wc_geo_send(l->g, l->keys, l->deltas), j;
	int rc;

	for (j = 0; j < m; j++)
		if (l->keys[j] == GL_KEY_K(l->w))
			l->expect += l->deltas[j];
	if (m > 0 && (rc = tr_net_push(l->t, 0, 1, l->keys, m, l->deltas)) != 0)
		return rc;
	l->pushes += m > 0;
	return tr_net_geo_pull(l->t, 0, 1, gl_on_row, l);
}

static bool gl_all_done(struct gl *l)
{
	uint32_t k, idx;

	for (k = 0; k < l->workers; k++)
		if (k != l->w && (wc_geo_find(l->g, GL_KEY_D(k), &idx) != 0 ||
				  *wc_geo_latest(l->g, idx) != 1.0f))
			return false;
	return true;
}

/* Every other worker done (its done row seen), then one more pull for what came before it. */
static int gl_wait_others(struct gl *l)
{
	double end = tr_now() + l->t->cl->wait_timeout_s;
	int rc;

	while (!gl_all_done(l)) {
		if (tr_now() > end) {
			fprintf(stderr, "wharf-train: GEO ledger: other workers' done rows not seen "
				"after %u s\n", l->t->cl->wait_timeout_s);
			return -ETIMEDOUT;
		}
		tr_net_pause(l->t, 2000);
		if (tr_net_stop_asked(l->t))
			return -ECANCELED;
		if ((rc = tr_net_geo_pull(l->t, 0, 1, gl_on_row, l)) != 0)
			return rc;
	}
	return tr_net_geo_pull(l->t, 0, 1, gl_on_row, l);
}

struct gl_result {
	uint32_t applied, lost, doubled, seen;
	float counter;
	double handed;         /* K(w) moved on the server + still held: its whole change */
	bool others_match;
};

/* This worker's E rows on the server, counted by value. */
static int gl_check_own(struct gl *l, struct gl_result *r)
{
	uint32_t i, n;
	int rc;

	for (i = 0; i < l->rounds; i += n) {
		n = l->rounds - i < 65536 ? l->rounds - i : 65536;
		for (uint32_t j = 0; j < n; j++)
			l->keys[j] = GL_KEY_E(l->w, i + j);
		if ((rc = tr_net_pull(l->t, 0, 1, l->keys, n, l->deltas)) != 0)
			return rc;
		for (uint32_t j = 0; j < n; j++) {
			if (l->deltas[j] == 1.0f)
				r->applied++;
			else if (l->deltas[j] == 0.0f)
				r->lost++;
			else
				r->doubled++;
		}
	}
	l->keys[0] = GL_KEY_K(l->w);
	if ((rc = tr_net_pull(l->t, 0, 1, l->keys, 1, &r->counter)) != 0)
		return rc;
	if ((rc = wc_geo_find(l->g, GL_KEY_K(l->w), &i)) != 0)
		return rc;
	r->handed = (double)r->counter - l->start + *wc_geo_latest(l->g, i) - *wc_geo_base(l->g, i);
	return 0;
}

/* The other workers' rows as this worker holds them. */
static int gl_check_others(struct gl *l, struct gl_result *r)
{
	uint32_t k, i, idx;
	float server;
	int rc;

	r->others_match = true;
	for (k = 0; k < l->workers; k++) {
		if (k == l->w)
			continue;
		for (i = 0; i < l->rounds; i++)
			if (wc_geo_find(l->g, GL_KEY_E(k, i), &idx) == 0 &&
			    *wc_geo_latest(l->g, idx) == 1.0f)
				r->seen++;
		l->keys[0] = GL_KEY_K(k);
		if ((rc = tr_net_pull(l->t, 0, 1, l->keys, 1, &server)) != 0)
			return rc;
		if (wc_geo_find(l->g, GL_KEY_K(k), &idx) != 0 ||
		    memcmp(wc_geo_latest(l->g, idx), &server, sizeof(server)) != 0)
			r->others_match = false;
	}
	return 0;
}

static int gl_run(struct gl *l, struct gl_result *r)
{
	const struct tr_opts *o = l->t->o;
	uint32_t i;
	int rc;

	l->keys[0] = GL_KEY_K(l->w);
	if ((rc = tr_net_pull(l->t, 0, 1, l->keys, 1, &l->expect)) != 0 ||
	    (rc = wc_geo_recv(l->g, GL_KEY_K(l->w), &l->expect, NULL)) != 0)
		return rc;
	l->start = l->expect;
	for (i = 0; i < l->rounds; i++, l->done = i) {
		if (tr_net_stop_asked(l->t))
			return -ECANCELED;
		if ((rc = gl_move(l, GL_KEY_K(l->w))) != 0 || (rc = gl_move(l, GL_KEY_E(l->w, i))) != 0 ||
		    (rc = gl_sync(l)) != 0)
			return rc;
		tr_net_pause(l->t, o->count_delay_us);
	}
	if ((rc = gl_move(l, GL_KEY_D(l->w))) != 0 || (rc = gl_sync(l)) != 0 ||
	    (rc = gl_wait_others(l)) != 0)
		return rc;
	if ((rc = gl_check_own(l, r)) != 0)
		return rc;
	return gl_check_others(l, r);
}

int tr_geo_ledger_run(struct tr_net *t)
{
	struct gl l = { .t = t, .w = t->cl->task_index, .workers = t->cl->n_workers,
			.rounds = t->o->count_pushes };
	struct gl_result r = { 0 };
	uint32_t cap = l.workers * (l.rounds + 2) + 8, want;
	double change = (double)l.workers * l.rounds;
	bool ok;
	int rc;

	if (l.rounds == 0 || l.rounds >= GL_MAX_ROUNDS || (uint64_t)l.workers * (l.rounds + 2) >
	    (1u << 26)) {
		fprintf(stderr, "wharf-train: GEO ledger: --count-pushes %u: expected 1..%u, and at "
			"most 2^26 rows for all workers\n", l.rounds, GL_MAX_ROUNDS - 1);
		return -EINVAL;
	}
	l.keys = malloc((size_t)(cap > 65536 ? cap : 65536) * sizeof(*l.keys));
	l.deltas = malloc((size_t)(cap > 65536 ? cap : 65536) * sizeof(*l.deltas));
	rc = l.keys && l.deltas ? wc_geo_create(cap, 1, l.workers, &l.g) : -ENOMEM;
	if (rc == 0)
		rc = gl_run(&l, &r);
	wc_geo_destroy(l.g);
	free(l.keys);
	free(l.deltas);
	if (tr_net_stopped(t, rc)) {
		/*
		 * K(w) on the server is counter_expected (bit for bit) and its last sequence from
		 * this worker is pushes, when the stop gave up no request (gave_up false); the
		 * rest of this worker's change stays unsent, as GEO keeps it between rounds.
		 */
		printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"rounds\":%u,"
		       "\"rounds_done\":%u,\"pushes\":%u,\"counter_expected\":%.9g,\"start\":%.9g,"
		       "\"gave_up\":%s,\"stopped\":\"%s\"}\n", l.w, l.rounds, l.done, l.pushes,
		       (double)l.expect, (double)l.start, t->given_up ? "true" : "false",
		       tr_net_stop_name(t));
		fflush(stdout);
		return tr_net_stopped_at(t, "after %u GEO round%s", l.done, l.done == 1 ? "" : "s");
	}
	if (rc != 0)
		return rc;
	want = (l.workers - 1) * l.rounds;
	ok = r.applied == l.rounds && r.lost == 0 && r.doubled == 0 && r.seen == want &&
	     r.others_match && memcmp(&r.counter, &l.expect, sizeof(float)) == 0 &&
	     r.handed > change - 0.5 && r.handed < change + 0.5;
	printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"mode\":\"geo\",\"rounds\":%u,"
	       "\"applied\":%u,\"lost\":%u,\"doubled\":%u,\"counter\":%.9g,\"counter_expected\":%.9g,"
	       "\"handed_in\":%.6f,\"change\":%.0f,\"seen\":%u,\"seen_expected\":%u,"
	       "\"others_match\":%s,\"exactly_once\":%s}\n", l.w, l.rounds, r.applied, r.lost,
	       r.doubled, (double)r.counter, (double)l.expect, r.handed, change, r.seen, want,
	       r.others_match ? "true" : "false", ok ? "true" : "false");
	fflush(stdout);
	return ok ? 0 : -EPROTO;
}
