/*
 * tr_dense.c — the Fashion-MNIST worker: softmax regression, the 784-H-10 MLP or the deep
 * MLP (tr_deep.c, --layers 2 and more), every tensor a dense PS table. Sync: pull, gradient, push, barrier (the server applies the
 * workers' summed gradients once per step). Async: the same without the barrier. GEO: k
 * local SGD steps, then push 1/workers of the change since the last sync and take the
 * server's model (wc_geo_dense_send/recv: Paddle's GEO rules).
 *
 * Call chain: main -> tr_dense_run -> dense_step -> pull_all / push_all (one request per table
 * in flight together) -> ps_net_call_* -> ps_client_dense_pull/push.
 *
 * Each step is timed by phase (struct dense_phases): what a step spends on the network
 * (pulling, pushing, the barrier) against computing, the figures the report gives per step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/train/tr.h"

/* Seconds spent in each phase of the timed steps (all but the job's first), and how many. */
struct dense_phases {
	double pull, compute, push, barrier;
	uint64_t steps;
	uint64_t barrier_long;  /* barriers of 1 ms or more */
};

struct dense {
	struct tr_net *t;
	struct wc_dense_spec spec;
	struct wc_tensor_desc td4[4];
	const struct wc_tensor_desc *td;
	struct tr_deep *deep;     /* the deep MLP; NULL: wc_dense's model (spec) */
	unsigned nt;
	size_t np;
	float *params, *grad, *base, *xb;
	uint8_t *yb;
	uint32_t *idx, n_idx;
	struct wc_dense_ws *ws;
	struct wc_dataset *train, *test;
	struct dense_phases ph;
};

static int pull_all_untimed(struct dense *d, float *dst)
{
	struct tr_net *t = d->t;
	ps_done_fn *done;
	void *arg;
	unsigned i;
	int rc;

	for (;;) {
		ps_net_call_begin(t->n);
		rc = 0;
		for (i = 0; i < d->nt && rc == 0; i++) {
			if ((rc = ps_net_call_track(t->n, &done, &arg)) != 0)
				break;
			rc = ps_net_call_issue(t->n, ps_client_dense_pull(t->pc, i, d->td[i].cols,
				d->td[i].rows, 0, d->td[i].rows, dst + d->td[i].offset, done, arg,
				ps_net_io(t->n)->msgs));
		}
		if (rc == 0)
			rc = ps_net_call_wait(t->n);
		if (rc == 0)
			return 0;
		if ((rc = tr_net_recover(t, rc)) != 0) /* pulls are simply asked again */
			return rc;
	}
}

/* Pushes are recorded by ps_client before they are sent: after a failure they are resent by
 * the recovery, never encoded twice, so the wait just goes on. */
static int push_all_untimed(struct dense *d, const float *src)
{
	struct tr_net *t = d->t;
	ps_done_fn *done;
	void *arg;
	unsigned i;
	int rc, enc, net = 0;

	ps_net_call_begin(t->n);
	for (i = 0; i < d->nt; i++) {
		if ((rc = ps_net_call_track(t->n, &done, &arg)) != 0)
			return rc;
		enc = ps_client_dense_push(t->pc, i, d->td[i].cols, d->td[i].rows, 0, d->td[i].rows,
					   src + d->td[i].offset, done, arg, ps_net_io(t->n)->msgs);
		rc = ps_net_call_issue(t->n, enc);
		if (enc < 0) {
			fprintf(stderr, "wharf-train: encoding a push: %s\n", strerror(-enc));
			return enc;
		}
		if (rc != 0 && net == 0)
			net = rc;
	}
	for (;;) {
		rc = net != 0 ? net : ps_net_call_wait(t->n);
		net = 0;
		if (rc == 0)
			return 0;
		if ((rc = tr_net_recover(t, rc)) != 0)
			return rc;
	}
}

static int pull_all(struct dense *d, float *dst)
{
	double t0 = tr_now();
	int rc = pull_all_untimed(d, dst);

	d->ph.pull += tr_now() - t0;
	return rc;
}

static int push_all(struct dense *d, const float *src)
{
	double t0 = tr_now();
	int rc = push_all_untimed(d, src);

	d->ph.push += tr_now() - t0;
	return rc;
}

static int dense_load(struct dense *d, const struct tr_opts *o)
{
	char err[512];
	int rc;

	rc = wc_fmnist_load(o->data_dir, 1, o->train_limit, &d->train, err, sizeof(err));
	if (rc == 0)
		rc = wc_fmnist_load(o->data_dir, 0, o->test_limit, &d->test, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "wharf-train: %s\n", err);
		return rc;
	}
	d->spec.kind = o->model == WC_PSM_MLP ? WC_DENSE_MLP : WC_DENSE_SOFTMAX;
	d->spec.in_dim = d->train->dim;
	d->spec.hidden = o->model == WC_PSM_MLP ? o->hidden : 0;
	d->spec.n_classes = WC_FMNIST_CLASSES;
	if (o->layers >= 2) {
		rc = tr_deep_create(d->train->dim, o->hidden, o->layers, WC_FMNIST_CLASSES,
				    o->batch, &d->deep);
		if (rc != 0) {
			fprintf(stderr, "wharf-train: the deep MLP: %s\n", strerror(-rc));
			return rc;
		}
		d->nt = tr_deep_tensors(d->deep, &d->td);
		d->np = tr_deep_param_count(d->deep);
	} else {
		d->nt = wc_dense_tensors(&d->spec, d->td4);
		d->td = d->td4;
		d->np = wc_dense_param_count(&d->spec);
	}
	d->params = calloc(d->np, sizeof(float));
	d->grad = calloc(d->np, sizeof(float));
	d->base = calloc(d->np, sizeof(float));
	d->xb = calloc((size_t)o->batch * d->spec.in_dim, sizeof(float));
	d->yb = calloc(o->batch, 1);
	d->idx = calloc(d->train->n, sizeof(uint32_t));
	if (!d->params || !d->grad || !d->base || !d->xb || !d->yb || !d->idx ||
	    (d->deep == NULL && wc_dense_ws_create(&d->spec, o->batch, &d->ws) != 0)) {
		fprintf(stderr, "wharf-train: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

static void dense_free(struct dense *d)
{
	tr_deep_destroy(d->deep);
	wc_dense_ws_destroy(d->ws);
	wc_dataset_destroy(d->train);
	wc_dataset_destroy(d->test);
	free(d->params);
	free(d->grad);
	free(d->base);
	free(d->xb);
	free(d->yb);
	free(d->idx);
}

static int model_loss_grad(struct dense *d, const float *params, const float *x,
			   const uint8_t *y, uint32_t n, float *grad, double *loss, uint32_t *correct)
{
	if (d->deep != NULL)
		return tr_deep_loss_grad(d->deep, params, x, y, n, grad, loss, correct);
	return wc_dense_loss_grad(&d->spec, d->ws, params, x, y, n, grad, loss, correct);
}

static int model_evaluate(struct dense *d, const float *params, double *acc, double *loss)
{
	if (d->deep != NULL)
		return tr_deep_evaluate(d->deep, params, d->test->x, d->test->y, d->test->n, acc,
					loss);
	return wc_dense_evaluate(&d->spec, d->ws, params, d->test->x, d->test->y, d->test->n, acc,
				 loss);
}

/* GEO sync: the scaled delta out (base moves with it), the server's model in (d->grad holds it). */
static int geo_sync(struct dense *d)
{
	int rc;

	wc_geo_dense_send(d->params, d->base, d->grad, d->np, d->t->cl->n_workers);
	if ((rc = push_all(d, d->grad)) != 0 || (rc = pull_all(d, d->grad)) != 0)
		return rc;
	wc_geo_dense_recv(d->params, d->base, d->grad, d->np);
	return 0;
}

/* One step on batch b of this epoch's order. */
static int dense_step(struct dense *d, uint64_t step, uint32_t b, float scale, double *loss,
		      uint32_t *correct)
{
	const struct tr_opts *o = d->t->o;
	const struct ps_cluster *cl = d->t->cl;
	uint32_t i, in = d->spec.in_dim;
	double t0;
	size_t k;
	int rc;

	for (i = 0; i < o->batch; i++) {
		uint32_t s = d->idx[(size_t)b * o->batch + i];
		memcpy(d->xb + (size_t)i * in, d->train->x + (size_t)s * in, in * sizeof(float));
		d->yb[i] = d->train->y[s];
	}
	if (cl->mode != PS_JOB_GEO && (rc = pull_all(d, d->params)) != 0)
		return rc;
	t0 = tr_now();
	rc = model_loss_grad(d, d->params, d->xb, d->yb, o->batch, d->grad, loss, correct);
	d->ph.compute += tr_now() - t0;
	if (rc != 0)
		return rc;
	if (cl->mode == PS_JOB_GEO) {
		wc_sgd_step(d->params, d->grad, d->np, o->lr * scale);
		return (step + 1) % cl->geo_k != 0 ? 0 : geo_sync(d);
	}
	if (scale != 1.0f)
		for (k = 0; k < d->np; k++)
			d->grad[k] *= scale;
	if ((rc = push_all(d, d->grad)) != 0)
		return rc;
	if (cl->mode != PS_JOB_SYNC)
		return 0;
	t0 = tr_now();
	rc = tr_net_barrier(d->t, step);
	t0 = tr_now() - t0;
	d->ph.barrier += t0;
	d->ph.barrier_long += t0 >= 1e-3;
	return rc;
}

/* This worker's share (every W-th sample), shuffled; the same step count on every worker. */
static uint32_t dense_order(struct dense *d, struct wc_rng *r, uint32_t steps)
{
	const struct ps_cluster *cl = d->t->cl;
	uint32_t i, n = 0;

	for (i = cl->task_index; i < d->train->n; i += cl->n_workers)
		d->idx[n++] = i;
	wc_shuffle_u32(r, d->idx, n);
	return steps * d->t->o->batch <= n ? steps : n / d->t->o->batch;
}

/* steps: the job's; timed: those secs covers (all but the first, which waits for the others). */
static void dense_report(struct dense *d, uint64_t steps, uint64_t timed, double secs, double acc,
			 double loss)
{
	const struct ps_cluster *cl = d->t->cl;
	const struct tr_opts *o = d->t->o;
	struct ps_net_cli_stats st;
	struct fz_conn_stats fz;
	uint64_t samples = steps * o->batch, timed_samples = timed * o->batch;
	const struct dense_phases *ph = &d->ph;
	double per = ph->steps ? 1e6 / (double)ph->steps : 0;

	ps_net_cli_stats(d->t->n, &st);
	ps_net_fuse_stats(d->t->n, &fz);
	printf("{\"role\":\"worker\",\"id\":%u,\"workers\":%u,\"model\":\"%s\",\"layers\":%u,"
	       "\"tensors\":%u,\"mode\":\"%s\",\"protocol\":\"%s\",\"tensor_fuse\":%s,\"epochs\":%u,"
	       "\"batch\":%u,\"steps\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"seconds\":%.2f,"
	       "\"samples_per_s\":%.1f,\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"reconnects\":%"
	       PRIu64 ",\"resent\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"fuse_frames_out\":%" PRIu64
	       ",\"fuse_subs_out\":%" PRIu64 ",\"fuse_frames_in\":%" PRIu64 ",\"fuse_subs_in\":%"
	       PRIu64 ",\"pull_us\":%.1f,\"compute_us\":%.1f,\"push_us\":%.1f,\"barrier_us\":%.1f,"
	       "\"barriers_over_1ms\":%" PRIu64 "}\n", cl->task_index, cl->n_workers,
	       wc_ps_model_name(o->model),
	       d->deep != NULL ? o->layers : o->model == WC_PSM_MLP ? 1u : 0u, d->nt,
	       ps_job_mode_name(cl->mode), ps_protocol_name(cl->protocol),
	       cl->tensor_fuse ? "true" : "false", o->epochs, o->batch, steps, samples, secs,
	       secs > 0 ? (double)timed_samples / secs : 0.0, acc, loss, st.reconnects, st.resent,
	       st.requests, fz.tx.frames, fz.tx.msgs_fused - fz.tx.frames_single, fz.rx.frames,
	       fz.rx.subs, ph->pull * per, ph->compute * per, ph->push * per, ph->barrier * per,
	       ph->barrier_long);
	fflush(stdout);
}

/*
 * The epochs; *train_s gets the time in steps but the job's first, whose barrier waits for
 * the other workers' start-up (what skews a short run's samples/s), and *timed their count.
 */
static int dense_epochs(struct dense *d, uint32_t steps, uint64_t *step, uint64_t *timed,
			double *train_s)
{
	const struct tr_opts *o = d->t->o;
	bool lead = d->t->cl->task_index == 0;
	struct wc_rng rng;
	double t0, loss_sum, l, acc, tl;
	uint32_t e, b, corr, corr_sum, n_steps;
	bool first = true;
	int rc;

	uint64_t resume = tr_net_resume(d->t);

	wc_rng_seed(&rng, o->seed * 7919u + d->t->cl->task_index);
	for (e = 0; e < o->epochs; e++) {
		float scale = e + o->decay_epochs >= o->epochs && o->epochs > o->decay_epochs ? 0.3f : 1.0f;
		n_steps = dense_order(d, &rng, steps);
		loss_sum = 0;
		corr_sum = 0;
		t0 = tr_now();
		for (b = 0; b < n_steps; b++, (*step)++) {
			if (*step < resume)
				continue; /* done before this process: the same batches, in order */
			if (tr_net_stop_asked(d->t))
				return -ECANCELED;
			if ((rc = dense_step(d, *step, b, scale, &l, &corr)) != 0)
				return rc;
			if (first) {
				t0 = tr_now();
				/* Its barrier waits for the other workers' start-up. */
				d->ph = (struct dense_phases){ 0 };
			} else {
				(*timed)++;
				d->ph.steps++;
			}
			first = false;
			loss_sum += l;
			corr_sum += corr;
			if (lead && ((b + 1) % (n_steps / 4 > 0 ? n_steps / 4 : 1) == 0) && b + 1 < n_steps)
				tr_progress(e + 1, o->epochs, b + 1, n_steps, loss_sum / (b + 1),
					    (double)corr_sum / ((b + 1.0) * o->batch),
					    (b + 1.0) * o->batch / (tr_now() - t0) * d->t->cl->n_workers, false);
		}
		*train_s += tr_now() - t0;
		if (lead) {
			model_evaluate(d, d->params, &acc, &tl);
			tr_progress(e + 1, o->epochs, n_steps, n_steps, loss_sum / (n_steps ? n_steps : 1),
				    (double)corr_sum / ((n_steps ? n_steps : 1.0) * o->batch),
				    (double)n_steps * o->batch / (tr_now() - t0) * d->t->cl->n_workers, true);
			printf("          test accuracy %.4f  test loss %.4f\n", acc, tl);
		}
	}
	return 0;
}

/*
 * Stopped (tr_net_stop_asked) after `step` steps: in GEO mode the steps since the last sync
 * go out as at the end of training (unless the stop gave up a request: the servers are
 * gone), then the JSON line says where it stopped. -ECANCELED.
 */
static int dense_stopped(struct dense *d, uint64_t step)
{
	struct tr_net *t = d->t;
	bool sync = t->cl->mode == PS_JOB_GEO && t->given_up == NULL && step % t->cl->geo_k != 0;

	if (sync && geo_sync(d) != 0)
		sync = false;
	return tr_net_steps_stopped(t, step, sync, ", the steps since its last GEO sync pushed");
}

int tr_dense_run(struct tr_net *t, const struct ps_model_tables *mt)
{
	const struct tr_opts *o = t->o;
	struct dense d;
	uint64_t step = 0;
	uint32_t steps;
	double acc = 0, loss = 0, train_s = 0;
	struct dense_phases ph;
	uint64_t timed = 0;
	int rc;

	(void)mt;
	memset(&d, 0, sizeof(d));
	d.t = t;
	if ((rc = dense_load(&d, o)) != 0)
		goto out;
	steps = d.train->n / (t->cl->n_workers * o->batch);
	if (steps == 0) {
		fprintf(stderr, "wharf-train: %u training samples are fewer than one batch of %u per "
			"worker\n", d.train->n, o->batch);
		rc = -EINVAL;
		goto out;
	}
	if ((rc = pull_all(&d, d.params)) != 0)
		goto out;
	memcpy(d.base, d.params, d.np * sizeof(float));
	if ((rc = dense_epochs(&d, steps, &step, &timed, &train_s)) != 0) {
		if (tr_net_stopped(t, rc))
			rc = dense_stopped(&d, step);
		goto out;
	}
	ph = d.ph; /* the steps' phases, without the last sync and pull below */
	/* GEO: a last sync for the steps since the previous one. */
	if (t->cl->mode == PS_JOB_GEO && step % t->cl->geo_k != 0 && (rc = geo_sync(&d)) != 0)
		goto out;
	if ((rc = pull_all(&d, d.params)) != 0)
		goto out;
	model_evaluate(&d, d.params, &acc, &loss);
	d.ph = ph;
	dense_report(&d, step, timed, train_s, acc, loss);
out:
	dense_free(&d);
	return rc;
}
