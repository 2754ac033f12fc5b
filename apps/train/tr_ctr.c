/*
 * tr_ctr.c — the CTR worker (logistic regression or a factorization machine over hashed
 * sparse ids, rows on a sparse PS table, the bias a 1x1 dense table) on wc_model.h's
 * generator with a planted model, judged by test AUC against the generator's Bayes AUC; and
 * the exactly-once ledger ("count"): each push adds exactly 1 to this worker's key.
 *
 * Call chain: main -> tr_ctr_run -> ctr_step -> ctr_pull / ctr_push (sparse + bias requests in
 * flight together) -> ps_net_call_*; GEO: local rows (wc_geo), delta push, tr_net_geo_pull.
 * --ctr-tail adds fields of ever-new ids (tail_fill): the long tail the PS's memory policies
 * are for (a push a server answers "table full" is reported and training goes on).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/train/tr.h"

#define CTR_TEST 20000u
#define CTR_LOCAL_MAX (1u << 20)

struct ctr {
	struct tr_net *t;
	struct wc_ctr_spec spec;
	struct wc_ctr_gen *gen;
	uint32_t dim, k, n_train, fields;
	uint32_t tail;                  /* --ctr-tail: the last `tail` of the fields */
	uint64_t *keys, *tkeys;        /* train / test samples' keys */
	float *labels, *tlabels, *tp, *tscore;
	struct wc_keymap *km;           /* this batch's distinct keys */
	uint32_t *slot;
	uint64_t *miss;                 /* GEO: batch keys not held locally */
	float *rows, *row_grad, bias, bias_grad;
	/* GEO: every row this worker has seen (latest and base), and the bias the same way */
	struct wc_geo *local;
	float lbias, lbias_base;
	bool geo_dirty;                 /* GEO: local steps since the last geo_sync */
};

static int ctr_issue_pull(struct ctr *c, const uint64_t *keys, uint32_t n, float *rows, float *bias)
{
	struct tr_net *t = c->t;
	ps_done_fn *done;
	void *arg;
	int rc;

	if (n > 0 && ((rc = ps_net_call_track(t->n, &done, &arg)) != 0 ||
		      (rc = ps_net_call_issue(t->n, ps_client_pull(t->pc, 0, c->dim, keys, n, rows,
					done, arg, ps_net_io(t->n)->msgs))) != 0))
		return rc;
	if (bias == NULL)
		return 0;
	if ((rc = ps_net_call_track(t->n, &done, &arg)) != 0)
		return rc;
	return ps_net_call_issue(t->n, ps_client_dense_pull(t->pc, 1, 1, 1, 0, 1, bias, done, arg,
							       ps_net_io(t->n)->msgs));
}

/* Rows of keys (and the bias when bias != NULL), asked again across reconnects. */
static int ctr_pull(struct ctr *c, const uint64_t *keys, uint32_t n, float *rows, float *bias)
{
	int rc;

	for (;;) {
		ps_net_call_begin(c->t->n);
		rc = ctr_issue_pull(c, keys, n, rows, bias);
		if (rc == 0)
			rc = ps_net_call_wait(c->t->n);
		if (rc == 0 || (rc = tr_net_recover(c->t, rc)) != 0)
			return rc;
	}
}

/* A push is recorded before it is sent, so after a failure the recovery resends it. */
static int ctr_push(struct ctr *c, const uint64_t *keys, uint32_t n, const float *grads,
		    const float *bias_grad)
{
	struct tr_net *t = c->t;
	ps_done_fn *done;
	void *arg;
	int rc, enc, net = 0;

	ps_net_call_begin(t->n);
	for (int part = n > 0 ? 0 : 1; part < (bias_grad ? 2 : 1); part++) {
		if ((rc = ps_net_call_track(t->n, &done, &arg)) != 0)
			return rc;
		enc = part == 0 ? ps_client_push(t->pc, 0, c->dim, keys, n, grads, done, arg,
						 ps_net_io(t->n)->msgs)
				: ps_client_dense_push(t->pc, 1, 1, 1, 0, 1, bias_grad, done, arg,
						       ps_net_io(t->n)->msgs);
		rc = ps_net_call_issue(t->n, enc);
		if (enc < 0)
			return enc;
		if (rc != 0 && net == 0)
			net = rc;
	}
	for (;;) {
		rc = net != 0 ? net : ps_net_call_wait(t->n);
		net = 0;
		if (rc == -EDQUOT)
			return tr_net_table_full(t, 0);
		if (rc == 0 || (rc = tr_net_recover(t, rc)) != 0)
			return rc;
	}
}

static int ctr_loss(struct ctr *c, const struct wc_sparse_batch *b, const float *rows, float bias,
		    float *p, double *loss, float *rg, float *bg)
{
	if (c->k == 0)
		return wc_lr_loss_grad(b, rows, bias, p, loss, rg, bg);
	return wc_fm_loss_grad(b, c->k, rows, bias, p, loss, rg, bg);
}

/* Batch keys -> distinct keys (c->km) and slots. */
static int ctr_dedup(struct ctr *c, const uint64_t *keys, uint32_t n)
{
	uint32_t i;
	int rc;

	wc_keymap_clear(c->km);
	for (i = 0; i < n * c->fields; i++)
		if ((rc = wc_keymap_get_or_add(c->km, keys[i], &c->slot[i])) != 0)
			return rc;
	return 0;
}

static void geo_on_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	struct ctr *c = arg;

	(void)dim;
	wc_geo_recv(c->local, key, row, NULL); /* full (-ENOSPC): a row this worker never uses */
}

/*
 * GEO sync point: push 1/workers of what changed since the last one (the rest stays local),
 * then take the rows others changed and the bias (wc_geo's rules).
 */
static int geo_sync(struct ctr *c)
{
	struct tr_net *t = c->t;
	uint32_t n = wc_geo_count(c->local), m;
	uint64_t *keys = malloc((size_t)n * sizeof(*keys) + 1);
	float *delta = malloc((size_t)n * c->dim * sizeof(float) + 4), bd, bias;
	int rc = -ENOMEM;

	if (keys == NULL || delta == NULL)
		goto out;
	m = wc_geo_send(c->local, keys, delta);
	wc_geo_dense_send(&c->lbias, &c->lbias_base, &bd, 1, t->cl->n_workers);
	c->geo_dirty = false; /* the bases moved: what is left to send is the next steps' */
	for (uint32_t off = 0; off < m || off == 0; off += 65536) {
		uint32_t part = m - off < 65536 ? m - off : 65536;
		if ((rc = ctr_push(c, keys + off, part, delta + (size_t)off * c->dim,
				   off == 0 ? &bd : NULL)) != 0)
			goto out;
	}
	rc = tr_net_geo_pull(t, 0, c->dim, geo_on_row, c);
	if (rc == 0 && (rc = ctr_pull(c, NULL, 0, NULL, &bias)) == 0)
		wc_geo_dense_recv(&c->lbias, &c->lbias_base, &bias, 1);
out:
	free(keys);
	free(delta);
	return rc;
}

/* GEO step: missing rows from the server, then a local SGD step on the local copy. */
static int geo_step(struct ctr *c, const struct wc_sparse_batch *b, float lr, double *loss)
{
	uint32_t nu = b->n_unique, i, li, miss = 0;
	const uint64_t *uk = wc_keymap_keys(c->km);
	int rc;

	for (i = 0; i < nu; i++)
		if (wc_geo_find(c->local, uk[i], &li) != 0)
			c->miss[miss++] = uk[i];
	if (miss > 0) {
		if ((rc = ctr_pull(c, c->miss, miss, c->rows, NULL)) != 0)
			return rc;
		for (i = 0; i < miss; i++)
			if ((rc = wc_geo_recv(c->local, c->miss[i], c->rows + (size_t)i * c->dim,
					      NULL)) != 0)
				return rc;
	}
	for (i = 0; i < nu; i++) {
		wc_geo_find(c->local, uk[i], &li);
		memcpy(c->rows + (size_t)i * c->dim, wc_geo_latest(c->local, li), c->dim * 4);
	}
	if ((rc = ctr_loss(c, b, c->rows, c->lbias, NULL, loss, c->row_grad, &c->bias_grad)) != 0)
		return rc;
	for (i = 0; i < nu; i++) {
		float *l;
		wc_geo_find(c->local, uk[i], &li);
		l = wc_geo_latest(c->local, li);
		for (uint32_t j = 0; j < c->dim; j++)
			l[j] -= lr * c->row_grad[(size_t)i * c->dim + j];
		wc_geo_touch(c->local, li);
	}
	c->lbias -= lr * c->bias_grad;
	c->geo_dirty = true;
	return 0;
}

static int ctr_step(struct ctr *c, const uint64_t *keys, const float *labels, uint32_t n,
		    uint64_t step, float scale, double *loss)
{
	const struct ps_cluster *cl = c->t->cl;
	struct wc_sparse_batch b = { n, c->fields, c->slot, labels, 0 };
	uint32_t nu, i;
	int rc;

	if ((rc = ctr_dedup(c, keys, n)) != 0)
		return rc;
	nu = b.n_unique = wc_keymap_count(c->km);
	if (cl->mode == PS_JOB_GEO) {
		if ((rc = geo_step(c, &b, c->t->o->lr * scale, loss)) != 0)
			return rc;
		return (step + 1) % cl->geo_k == 0 ? geo_sync(c) : 0;
	}
	if ((rc = ctr_pull(c, wc_keymap_keys(c->km), nu, c->rows, &c->bias)) != 0)
		return rc;
	if ((rc = ctr_loss(c, &b, c->rows, c->bias, NULL, loss, c->row_grad, &c->bias_grad)) != 0)
		return rc;
	for (i = 0; i < nu * c->dim; i++)
		c->row_grad[i] *= scale;
	c->bias_grad *= scale;
	if ((rc = ctr_push(c, wc_keymap_keys(c->km), nu, c->row_grad, &c->bias_grad)) != 0)
		return rc;
	return cl->mode == PS_JOB_SYNC ? tr_net_barrier(c->t, step) : 0;
}

/* Test AUC with the server's current rows, a batch at a time. */
static int ctr_eval(struct ctr *c, uint32_t batch, double *auc, double *loss)
{
	struct wc_sparse_batch b = { 0, c->fields, c->slot, NULL, 0 };
	double l, lsum = 0;
	uint32_t off, n;
	int rc;

	for (off = 0; off < CTR_TEST; off += n) {
		if (tr_net_stop_asked(c->t))
			return -ECANCELED;
		n = CTR_TEST - off < batch ? CTR_TEST - off : batch;
		if ((rc = ctr_dedup(c, c->tkeys + (size_t)off * c->fields, n)) != 0)
			return rc;
		b.n = n;
		b.label = c->tlabels + off;
		b.n_unique = wc_keymap_count(c->km);
		if ((rc = ctr_pull(c, wc_keymap_keys(c->km), b.n_unique, c->rows, &c->bias)) != 0)
			return rc;
		if ((rc = ctr_loss(c, &b, c->rows, c->bias, c->tscore + off, &l, NULL, NULL)) != 0)
			return rc;
		lsum += l * n;
	}
	*loss = lsum / CTR_TEST;
	return wc_auc(c->tscore, c->tlabels, CTR_TEST, auc);
}

static int ctr_alloc(struct ctr *c, const struct tr_opts *o)
{
	size_t bk = (size_t)o->batch * c->fields;
	uint32_t local = c->spec.vocab * (c->fields - c->tail);

	c->keys = malloc((size_t)c->n_train * c->fields * sizeof(uint64_t));
	c->labels = malloc((size_t)c->n_train * sizeof(float));
	c->tkeys = malloc((size_t)CTR_TEST * c->fields * sizeof(uint64_t));
	c->tlabels = malloc(CTR_TEST * sizeof(float));
	c->tp = malloc(CTR_TEST * sizeof(float));
	c->tscore = malloc(CTR_TEST * sizeof(float));
	c->slot = malloc(bk * sizeof(uint32_t));
	c->miss = malloc(bk * sizeof(uint64_t));
	c->rows = malloc(bk * c->dim * sizeof(float));
	c->row_grad = malloc(bk * c->dim * sizeof(float));
	if (!c->keys || !c->labels || !c->tkeys || !c->tlabels || !c->tp || !c->tscore || !c->slot ||
	    !c->miss || !c->rows || !c->row_grad || wc_keymap_create((uint32_t)bk, &c->km) != 0 ||
	    wc_geo_create(local, c->dim, c->t->cl->n_workers, &c->local) != 0)
		return -ENOMEM;
	return 0;
}

static void ctr_free(struct ctr *c)
{
	wc_ctr_gen_destroy(c->gen);
	wc_keymap_destroy(c->km);
	wc_geo_destroy(c->local);
	free(c->keys); free(c->labels); free(c->tkeys); free(c->tlabels); free(c->tp);
	free(c->tscore); free(c->slot); free(c->miss); free(c->rows); free(c->row_grad);
}

/*
 * The long tail (--ctr-tail): field k of the tail takes, at sample `idx` of this worker's
 * stream (epochs one after the other), an id that changes every 4^k samples and never comes
 * back: keys seen once, in a push or two, in a few pushes, as long as training runs. The
 * labels do not depend on them. salt tells the training stream from the test set's.
 */
static uint64_t tail_key(const struct ctr *c, uint64_t salt, uint32_t k, uint64_t idx)
{
	return wc_mix64(salt ^ ((uint64_t)c->t->cl->task_index << 52) ^ ((uint64_t)k << 44) ^
			(idx >> (2 * k)));
}

static void tail_fill(struct ctr *c, uint64_t *keys, uint32_t n, uint64_t salt, uint64_t first)
{
	uint32_t head = c->fields - c->tail;

	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < c->tail; k++)
			keys[(size_t)i * c->fields + head + k] = tail_key(c, salt, k, first + i);
}

/* Samples generated with the head fields only, spread out to make room for the tail. */
static void tail_spread(struct ctr *c, uint64_t *keys, uint32_t n)
{
	uint32_t head = c->fields - c->tail;

	for (uint32_t i = n; c->tail && i-- > 0;)
		memmove(keys + (size_t)i * c->fields, keys + (size_t)i * head, head * sizeof(*keys));
}

#define TAIL_TRAIN 0x7a11c0de5eed0001ull
#define TAIL_TEST 0x7a11c0de5eed0002ull

static int ctr_train(struct ctr *c, uint64_t *step, double *secs)
{
	const struct tr_opts *o = c->t->o;
	uint32_t steps = c->n_train / o->batch, e, b;
	uint64_t resume = tr_net_resume(c->t);
	double l, lsum, t0;
	int rc;

	for (e = 0; e < o->epochs; e++) {
		float scale = 1.0f / (1.0f + (float)e);
		lsum = 0;
		t0 = tr_now();
		for (b = 0; b < steps; b++, (*step)++) {
			if (*step < resume)
				continue; /* done before this process: the same batches, in order */
			if (tr_net_stop_asked(c->t))
				return -ECANCELED;
			tail_fill(c, c->keys + (size_t)b * o->batch * c->fields, o->batch, TAIL_TRAIN,
				  ((uint64_t)e * steps + b) * o->batch);
			rc = ctr_step(c, c->keys + (size_t)b * o->batch * c->fields,
				      c->labels + (size_t)b * o->batch, o->batch, *step, scale, &l);
			if (rc != 0)
				return rc;
			lsum += l;
		}
		*secs += tr_now() - t0;
		if (c->t->cl->task_index == 0)
			tr_progress(e + 1, o->epochs, steps, steps, lsum / steps, 0,
				    (double)steps * o->batch / (tr_now() - t0) * c->t->cl->n_workers, true);
	}
	if (c->t->cl->mode == PS_JOB_GEO)
		return geo_sync(c);
	return 0;
}

/*
 * Stopped (tr_net_stop_asked) after `step` steps: in GEO mode the change held locally goes
 * out as at the end of training (unless the stop gave up a request: the servers are gone),
 * then the JSON line says where it stopped. -ECANCELED.
 */
static int ctr_stopped(struct ctr *c, uint64_t step)
{
	struct tr_net *t = c->t;
	bool sync = c->geo_dirty && t->given_up == NULL;

	if (sync && geo_sync(c) != 0)
		sync = false;
	return tr_net_steps_stopped(t, step, sync, ", its local GEO change pushed");
}

int tr_ctr_run(struct tr_net *t, const struct ps_model_tables *mt)
{
	const struct tr_opts *o = t->o;
	struct wc_rng rng;
	struct ctr c;
	uint64_t step = 0;
	double auc = 0, bayes = 0, loss = 0, secs = 0;
	int rc;

	memset(&c, 0, sizeof(c));
	c.t = t;
	c.dim = mt->t[0].dim;
	c.k = o->model == WC_PSM_FM ? o->fm_k : 0;
	wc_ctr_spec_default(&c.spec);
	c.tail = o->ctr_tail;
	c.fields = c.spec.n_fields + c.tail;
	c.n_train = o->ctr_samples / t->cl->n_workers / o->batch * o->batch;
	if (c.tail && t->cl->mode == PS_JOB_GEO) {
		fprintf(stderr, "wharf-train: --ctr-tail: not in GEO mode (a GEO worker keeps every "
			"row it has seen)\n");
		rc = -EINVAL;
		goto out;
	}
	if ((rc = wc_ctr_gen_create(&c.spec, &c.gen)) != 0 || (rc = ctr_alloc(&c, o)) != 0) {
		fprintf(stderr, "wharf-train: CTR set-up: %s\n", strerror(-rc));
		goto out;
	}
	wc_rng_seed(&rng, 1000003ull * (o->seed + 1) + t->cl->task_index);
	wc_ctr_gen_sample(c.gen, &rng, c.n_train, c.keys, c.labels, NULL);
	tail_spread(&c, c.keys, c.n_train);
	wc_rng_seed(&rng, 424242); /* the same test set on every worker */
	wc_ctr_gen_sample(c.gen, &rng, CTR_TEST, c.tkeys, c.tlabels, c.tp);
	tail_spread(&c, c.tkeys, CTR_TEST);
	tail_fill(&c, c.tkeys, CTR_TEST, TAIL_TEST, 0); /* never trained: initial rows */
	wc_auc(c.tp, c.tlabels, CTR_TEST, &bayes);
	if (t->cl->mode == PS_JOB_GEO && (rc = ctr_pull(&c, NULL, 0, NULL, &c.lbias)) == 0)
		c.lbias_base = c.lbias;
	if (rc == 0)
		rc = ctr_train(&c, &step, &secs);
	if (rc == 0)
		rc = ctr_eval(&c, o->batch, &auc, &loss);
	if (tr_net_stopped(t, rc)) {
		rc = ctr_stopped(&c, step);
		goto out;
	}
	if (rc != 0)
		goto out;
	printf("{\"role\":\"worker\",\"id\":%u,\"workers\":%u,\"model\":\"%s\",\"mode\":\"%s\","
	       "\"protocol\":\"%s\",\"epochs\":%u,\"batch\":%u,\"steps\":%" PRIu64 ",\"seconds\":%.2f,"
	       "\"samples_per_s\":%.1f,\"test_auc\":%.4f,\"bayes_auc\":%.4f,\"auc_gap\":%.4f,"
	       "\"test_loss\":%.4f}\n", t->cl->task_index, t->cl->n_workers,
	       wc_ps_model_name(o->model), ps_job_mode_name(t->cl->mode),
	       ps_protocol_name(t->cl->protocol), o->epochs, o->batch, step, secs,
	       secs > 0 ? (double)step * o->batch / secs : 0, auc, bayes, bayes - auc, loss);
	fflush(stdout);
out:
	ctr_free(&c);
	return rc;
}

/*
 * The exactly-once ledger, sync mode: every step each worker pushes -1 to its own key
 * (1000 + id) and to a shared key 999, waits count_delay_us, then reaches the barrier. After
 * each step the model must be the single-process sum of the pushes, step by step: this
 * worker's key counts the steps so far, no worker's counts more, and the shared key is the
 * sum of the workers' keys (a worker a barrier timeout left out, policy continue, counts
 * fewer; left_out says how many). A worker restarted under its old id resumes at the
 * servers' step and repeats that step's push if its previous process pushed it already:
 * taken for the same push, not a second one.
 */
static int count_sync(struct tr_net *t, struct ctr *c)
{
	const struct tr_opts *o = t->o;
	uint32_t nw = t->cl->n_workers, w, left = 0;
	uint64_t first = tr_net_resume(t), step, keys[1 + PS_MAX_NODES], own = 1000u + t->cl->task_index;
	float g[2] = { -1.0f, -1.0f }, v[1 + PS_MAX_NODES], sum;
	bool exact = true, pushed = false;
	int rc = 0;

	keys[0] = 999;
	for (w = 0; w < nw; w++)
		keys[1 + w] = 1000u + w;
	for (step = first; step < o->count_pushes && rc == 0 && exact; step++) {
		uint64_t mine[2] = { 999, own };
		if (tr_net_stop_asked(t)) {
			rc = -ECANCELED;
			break;
		}
		rc = ctr_push(c, mine, 2, g, NULL);
		pushed = rc == 0;
		if (rc == 0)
			tr_net_pause(t, o->count_delay_us);
		if (rc == 0)
			rc = tr_net_barrier(t, step);
		if (rc == 0)
			rc = ctr_pull(c, keys, 1 + nw, v, NULL);
		if (rc != 0)
			break;
		pushed = false;
		for (w = 0, sum = 0, left = 0; w < nw; w++) {
			exact &= v[1 + w] <= (float)(step + 1);
			left += v[1 + w] < (float)(step + 1);
			sum += v[1 + w];
		}
		exact &= v[1 + t->cl->task_index] == (float)(step + 1) && v[0] == sum;
		if (!exact)
			fprintf(stderr, "wharf-train: NOT exact after sync step %llu: shared key %.0f, "
				"the workers' keys sum to %.0f, this worker's holds %.0f (want %llu)\n",
				(unsigned long long)step, (double)v[0], (double)sum,
				(double)v[1 + t->cl->task_index], (unsigned long long)step + 1);
	}
	if (tr_net_stopped(t, rc)) {
		/* steps: done (pushed, barrier passed, read back); pushed: also the step it was in */
		printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"first_step\":%llu,"
		       "\"steps\":%llu,\"pushed\":%llu,\"gave_up\":%s,\"stopped\":\"%s\"}\n",
		       t->cl->task_index, (unsigned long long)first,
		       (unsigned long long)(step - first), (unsigned long long)(step - first + pushed),
		       t->given_up ? "true" : "false", tr_net_stop_name(t));
		fflush(stdout);
		return tr_net_stopped_at(t, "after %llu sync step%s%s",
					 (unsigned long long)(step - first), step - first == 1 ? "" : "s",
					 pushed ? " and its push of the next (acknowledged)" : "");
	}
	if (rc != 0)
		return rc;
	printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"mode\":\"sync\","
	       "\"steps\":%u,\"first_step\":%llu,\"shared\":%.0f,\"value\":%.0f,"
	       "\"left_out\":%u,\"exactly_once\":%s}\n", t->cl->task_index, o->count_pushes,
	       (unsigned long long)first, (double)v[0], (double)v[1 + t->cl->task_index], left,
	       exact ? "true" : "false");
	fflush(stdout);
	return exact ? 0 : -EPROTO;
}

/*
 * The exactly-once ledger: push a gradient of -1 to this worker's key count_pushes times on a
 * table with SGD lr 1 and zero init, so the value must grow by exactly count_pushes however
 * often the servers restarted in between (floats are exact up to 2^24). The value at the
 * start counts the pushes of earlier processes under the same worker id (a restart under
 * the old id, or one this process took the id from: that one is refused from then on and
 * says how many of its pushes were acknowledged). Sync mode: count_sync.
 */
int tr_count_run(struct tr_net *t)
{
	const struct tr_opts *o = t->o;
	uint64_t key = 1000u + t->cl->task_index;
	float g = -1.0f, v = 0, v0 = 0;
	uint32_t acked = 0;
	int rc = 0;
	struct ctr c;

	if (t->cl->mode == PS_JOB_GEO)
		return tr_geo_ledger_run(t); /* pushes are deltas there: the ledger GEO-style */
	memset(&c, 0, sizeof(c));
	c.t = t;
	c.dim = 1;
	if (t->cl->mode == PS_JOB_SYNC)
		return count_sync(t, &c);
	rc = ctr_pull(&c, &key, 1, &v0, NULL);
	while (acked < o->count_pushes && rc == 0) {
		if (tr_net_stop_asked(t)) {
			rc = -ECANCELED;
			break;
		}
		if ((rc = ctr_push(&c, &key, 1, &g, NULL)) != 0)
			break;
		acked++;
		tr_net_pause(t, o->count_delay_us);
	}
	if (rc == 0)
		rc = ctr_pull(&c, &key, 1, &v, NULL);
	if (tr_net_stopped(t, rc)) {
		/*
		 * Every acknowledged push is applied: start + acked on the PS, one more when the
		 * stop gave up a push in flight (gave_up) and the PS had applied it.
		 */
		printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"acked\":%u,"
		       "\"start\":%.0f,\"gave_up\":%s,\"stopped\":\"%s\"}\n", t->cl->task_index,
		       acked, (double)v0, t->given_up ? "true" : "false", tr_net_stop_name(t));
		fflush(stdout);
		return tr_net_stopped_at(t, "after %u acknowledged push%s", acked,
					 acked == 1 ? "" : "es");
	}
	if (rc != 0) {
		printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"acked\":%u,"
		       "\"start\":%.0f,\"error\":%d}\n", t->cl->task_index, acked, (double)v0, rc);
		fflush(stdout);
		return rc;
	}
	v -= v0;
	printf("{\"role\":\"worker\",\"id\":%u,\"model\":\"count\",\"pushes\":%u,\"value\":%.0f,"
	       "\"start\":%.0f,\"exactly_once\":%s}\n", t->cl->task_index, o->count_pushes,
	       (double)v, (double)v0, v == (float)o->count_pushes ? "true" : "false");
	fflush(stdout);
	return v == (float)o->count_pushes ? 0 : -EPROTO;
}
