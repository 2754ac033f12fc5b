/*
 * tr_net.c — the trainer's network handle: opens the PS client and the glue, waits for the
 * servers, and turns a failed call into a recovery (reconnect, resend unacknowledged pushes)
 * so the model loops retry a pull or a barrier and never push twice. Also the progress line.
 *
 * Call chain: tr_*_run -> tr_net_recover / tr_net_barrier -> ps_net_recover,
 *   ps_client_barrier_wait.
 */
#include <errno.h>
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
	if ((rc = ps_net_connect(t->n, t->pc, t->err, sizeof(t->err))) != 0)
		goto out_n;
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

int tr_net_recover(struct tr_net *t, int rc)
{
	if (rc == 0)
		return 0;
	if (ps_net_signalled(t->n, t->sigs) || rc == -ECANCELED) {
		fprintf(stderr, "wharf-train: stopped\n");
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

int tr_net_barrier(struct tr_net *t, uint64_t step)
{
	int rc;

	while ((rc = ps_client_barrier_wait(t->pc, ps_net_io(t->n), step)) != 0)
		if ((rc = tr_net_recover(t, rc)) != 0)
			return rc;
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
