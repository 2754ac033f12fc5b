/*
 * tr_net.c — the trainer's network handle: opens the PS client and the glue, waits for the
 * servers, and turns a failed call into a recovery (reconnect, resend unacknowledged pushes)
 * so the model loops retry a pull or a barrier and never push twice. The graceful stop
 * (SIGINT, SIGTERM, a shutdown command: tr_net_stop_asked). Also the progress line.
 *
 * Call chain: tr_*_run -> tr_net_recover / tr_net_barrier -> ps_net_recover,
 *   ps_client_barrier_wait; tr_*_run -> tr_net_stop_asked / tr_net_pause -> sigtimedwait.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/train/tr.h"

double tr_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tr_net_open(struct tr_net *t, const struct ps_cluster *cl, const struct tr_opts *o,
		const struct ps_model_tables *mt, int eal_argc, char **eal_argv,
		const sigset_t *sigs)
{
	struct ps_net_params np = { cl, eal_argc, eal_argv, ps_model_max_msg(mt), "wharf-train",
				      0, 0, NULL, ps_model_digest(mt) };
	struct ps_client_config cc = { cl->task_index, cl->n_ps, cl->request_slots, 65536,
				       ps_incarnation_new(),
				       (uint64_t)cl->request_timeout_s * 1000000u };
	int rc;

	memset(t, 0, sizeof(*t));
	t->cl = cl;
	t->o = o;
	t->sigs = sigs;
	if ((rc = ps_client_create(&cc, &t->pc)) != 0) {
		snprintf(t->err, sizeof(t->err), "ps client: %s", strerror(-rc));
		return rc;
	}
	if ((rc = ps_net_create(&np, &t->n, t->err, sizeof(t->err))) != 0)
		goto out_pc;
	ps_net_stop_on(t->n, sigs); /* a signal ends the wait for the servers too */
	if ((rc = ps_net_connect(t->n, t->pc, t->err, sizeof(t->err))) != 0) {
		(void)tr_net_stop_asked(t); /* the stop that ended the wait, if one did */
		goto out_n;
	}
	fprintf(stderr, "wharf-train: worker %u of %u connected to %u server%s (%s, mode %s)\n",
		cl->task_index, cl->n_workers, cl->n_ps, cl->n_ps == 1 ? "" : "s",
		ps_protocol_name(cl->protocol), ps_job_mode_name(cl->mode));
	return 0;
out_n:
	ps_net_destroy(t->n);
out_pc:
	ps_client_destroy(t->pc);
	t->n = NULL;
	t->pc = NULL;
	return rc;
}

void tr_net_close(struct tr_net *t)
{
	ps_net_destroy(t->n);
	ps_client_destroy(t->pc);
}

static bool conn_error(int rc)
{
	return rc == -ECONNRESET || rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -EIO;
}

/*
 * The signals stay blocked (main), so none interrupts a system call in the transport or
 * the EAL's threads, and the server role of this binary takes them the same way
 * (ps_net_serve_loop). Here they are taken off the pending set: the stop is this struct's
 * flag, set on the trainer's own thread and read by its loops.
 */
bool tr_net_stop_asked(struct tr_net *t)
{
	struct timespec zero = { 0, 0 };
	double now;
	int sig;

	if (t->stop_sig != 0 || t->stop_cmd)
		return true;
	now = tr_now();
	if (t->n != NULL && (sig = ps_net_stop_signal(t->n)) != 0) { /* ended a wait for servers */
		t->stop_sig = sig;
		t->stop_t = now;
		return true;
	}
	if (t->n != NULL && ps_net_stopping(t->n)) {
		t->stop_t = now;
		return t->stop_cmd = true;
	}
	if (t->sigs == NULL || now < t->next_sig_look)
		return false;
	t->next_sig_look = now + 0.01; /* a system call per 10 ms at most, whatever the step rate */
	if ((sig = sigtimedwait(t->sigs, NULL, &zero)) <= 0)
		return false;
	t->stop_sig = sig;
	t->stop_t = now;
	return true;
}

const char *tr_net_stop_name(const struct tr_net *t)
{
	if (t->stop_sig != 0)
		return t->stop_sig == SIGINT ? "SIGINT" : "SIGTERM";
	return t->stop_cmd ? "shutdown" : NULL;
}

int tr_net_stopped_at(struct tr_net *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->stop_at, sizeof(t->stop_at), fmt, ap);
	va_end(ap);
	return -ECANCELED;
}

int tr_net_steps_stopped(struct tr_net *t, uint64_t step, bool geo_synced, const char *synced)
{
	printf("{\"role\":\"worker\",\"id\":%u,\"workers\":%u,\"model\":\"%s\",\"steps\":%"
	       PRIu64 ",\"geo_synced\":%s,\"stopped\":\"%s\"}\n", t->cl->task_index,
	       t->cl->n_workers, wc_ps_model_name(t->o->model), step, geo_synced ? "true" : "false",
	       tr_net_stop_name(t));
	fflush(stdout);
	return tr_net_stopped_at(t, "after %" PRIu64 " step%s%s", step, step == 1 ? "" : "s",
				 geo_synced ? synced : "");
}

void tr_net_pause(struct tr_net *t, unsigned us)
{
	struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000 };
	int sig;

	if (us == 0 || tr_net_stop_asked(t))
		return;
	if (t->sigs == NULL) {
		nanosleep(&ts, NULL);
		return;
	}
	if ((sig = sigtimedwait(t->sigs, NULL, &ts)) > 0) {
		t->stop_sig = sig;
		t->stop_t = tr_now();
	}
}

int tr_net_recover(struct tr_net *t, int rc)
{
	if (rc == 0)
		return 0;
	t->next_sig_look = 0; /* look now: a stop may be why the call ended */
	if (tr_net_stop_asked(t) || rc == -ECANCELED) {
		if (tr_net_stop_name(t) == NULL)
			fprintf(stderr, "wharf-train: a request was cancelled\n");
		else if (t->given_up == NULL)
			t->given_up = "a request in flight";
		return -ECANCELED;
	}
	if (!conn_error(rc)) {
		const char *why = ps_client_error(t->pc);
		fprintf(stderr, "wharf-train: the server refused a request: %s%s%s\n", strerror(-rc),
			why[0] ? ": " : "", why);
		return rc;
	}
	fprintf(stderr, "wharf-train: lost a server (%s); waiting for it to come back\n",
		strerror(-rc));
	rc = ps_net_recover(t->n, t->err, sizeof(t->err));
	if (rc == -ECANCELED && tr_net_stop_asked(t)) {
		t->given_up = "the wait for the servers";
		return rc;
	}
	if (rc != 0)
		fprintf(stderr, "wharf-train: %s\n", t->err);
	return rc;
}

int tr_net_table_full(struct tr_net *t, uint32_t table)
{
	if (t->full_pushes++ % 1000 == 0)
		fprintf(stderr, "wharf-train: table %u is at its memory cap on a server: keys new to "
			"it were refused, their gradients dropped; training goes on (%llu push%s so "
			"far)\n", table, (unsigned long long)t->full_pushes,
			t->full_pushes == 1 ? "" : "es");
	return 0;
}

/*
 * The barrier's poll: a stop ends the wait (ps_client_barrier_wait detaches its waiter and
 * fails). The arrival was sent: whether the step completes is the other workers' business.
 */
static int stop_poll(void *ctx)
{
	struct tr_net *t = ctx;
	const struct ps_client_io *io = ps_net_io(t->n);
	int rc = io->poll(io->ctx);

	return rc < 0 ? rc : tr_net_stop_asked(t) ? -ECANCELED : rc;
}

static int stop_send(void *ctx, uint32_t dest, const uint8_t *msg, uint32_t len)
{
	const struct ps_client_io *io = ps_net_io(((struct tr_net *)ctx)->n);

	return io->send(io->ctx, dest, msg, len);
}

int tr_net_barrier(struct tr_net *t, uint64_t step)
{
	int rc;

	t->bio = *ps_net_io(t->n);
	t->bio.send = stop_send;
	t->bio.poll = stop_poll;
	t->bio.ctx = t;
	while ((rc = ps_client_barrier_wait(t->pc, &t->bio, step)) != 0) {
		if (tr_net_stop_asked(t) && t->given_up == NULL)
			t->given_up = "the wait at the barrier";
		if ((rc = tr_net_recover(t, rc)) != 0)
			return rc;
	}
	return 0;
}

uint64_t tr_net_resume(struct tr_net *t)
{
	uint64_t step = t->cl->mode == PS_JOB_SYNC ? ps_client_step(t->pc) : 0;

	if (step > 0)
		fprintf(stderr, "wharf-train: worker %u resumes at sync step %llu, where its servers "
			"are\n", t->cl->task_index, (unsigned long long)step);
	return step;
}

int tr_net_pull(struct tr_net *t, uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n,
		float *out)
{
	ps_done_fn *done;
	void *arg;
	int rc;

	for (;;) {
		ps_net_call_begin(t->n);
		rc = ps_net_call_track(t->n, &done, &arg);
		if (rc == 0)
			rc = ps_net_call_issue(t->n, ps_client_pull(t->pc, table, dim, keys, n, out,
							done, arg, ps_net_io(t->n)->msgs));
		if (rc == 0)
			rc = ps_net_call_wait(t->n);
		if (rc == 0 || (rc = tr_net_recover(t, rc)) != 0)
			return rc;
	}
}

int tr_net_push(struct tr_net *t, uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n,
		const float *grads)
{
	ps_done_fn *done;
	void *arg;
	int rc, enc;

	ps_net_call_begin(t->n);
	if ((rc = ps_net_call_track(t->n, &done, &arg)) != 0)
		return rc;
	enc = ps_client_push(t->pc, table, dim, keys, n, grads, done, arg, ps_net_io(t->n)->msgs);
	rc = ps_net_call_issue(t->n, enc);
	if (enc < 0)
		return enc; /* not recorded: nothing to resend */
	/* Recorded before it was sent: after a failure the recovery resends it; wait again. */
	for (;;) {
		if (rc == 0)
			rc = ps_net_call_wait(t->n);
		if (rc == 0 || (rc = tr_net_recover(t, rc)) != 0)
			return rc;
		rc = 0;
	}
}

int tr_net_geo_pull(struct tr_net *t, uint32_t table, uint32_t dim, ps_geo_row_fn *fn, void *arg)
{
	ps_done_fn *done;
	void *darg;
	bool more = true;
	int rc = 0;

	while (more) {
		more = false;
		ps_net_call_begin(t->n);
		rc = ps_net_call_track(t->n, &done, &darg);
		if (rc == 0)
			rc = ps_net_call_issue(t->n, ps_client_geo_pull(t->pc, table, dim, fn, arg,
						 &more, done, darg, ps_net_io(t->n)->msgs));
		if (rc == 0)
			rc = ps_net_call_wait(t->n);
		if (rc != 0 && (rc = tr_net_recover(t, rc)) == 0)
			more = true; /* recovered: ask again */
		if (rc != 0)
			return rc;
	}
	return 0;
}

void tr_progress(unsigned epoch, unsigned epochs, uint64_t done, uint64_t total, double loss,
		 double acc, double sps, bool final)
{
	char bar[31];
	unsigned i, fill = total ? (unsigned)(30 * done / total) : 30;
	bool tty = isatty(STDOUT_FILENO);

	for (i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = '\0';
	printf("%sepoch %2u/%u [%s] %3u%%  loss %.4f  acc %.4f  %8.0f samples/s%s",
	       tty ? "\r" : "", epoch, epochs, bar, total ? (unsigned)(100 * done / total) : 100,
	       loss, acc, sps, final || !tty ? "\n" : "");
	fflush(stdout);
}
