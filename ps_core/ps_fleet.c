/*
 * ps_fleet.c — Paddle's fleet role API on top of the PS network side: the role and cluster
 * from ps_config_load, the server role through ps_net_run_server, the worker role through
 * ps_client + ps_net (connect, io, recover, barrier). Nothing network-level is done here;
 * this file only sequences those calls per role and keeps their state in one object.
 *
 * Call chain: app main -> ps_fleet_init -> ps_config_load;
 *   server: ps_fleet_init_server -> ps_fleet_run_server -> ps_net_run_server;
 *   worker: ps_fleet_init_worker -> ps_client_create, ps_net_create, ps_net_connect
 *   -> (app) ps_client_*_wait over ps_net_io -> ps_fleet_recover -> ps_net_recover.
 * Start-up and shutdown only; the hot path is ps_client + ps_net, untouched by this file.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_fleet.h"
#include "ps_core/ps_config_pvt.h"

struct ps_fleet {
	struct ps_cluster cl;   /* ps_net keeps a pointer to it: lives as long as the fleet */
	char name[32];
	int eal_argc;
	char **eal_argv;        /* the caller's argv (EAL may permute it), or eal's */
	struct ps_eal eal;      /* the cluster's eal_args when the command line has none */
	char **app_argv;        /* our copy: program name + the part after "--" */
	sigset_t sigs;          /* SIGINT, SIGTERM: blocked, polled by the loops */

	/* server */
	bool server_ready;
	struct ps_model_tables mt;
	char ckpt[PS_PATH_LEN], restore[PS_PATH_LEN];

	/* worker */
	struct ps_client *pc;
	struct ps_net *n;

	char err[512];
};

static int fl_errf(struct ps_fleet *f, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fl_errf(struct ps_fleet *f, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->err, sizeof(f->err), fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * "[EAL] -- [app]" into the EAL part (the caller's array, argv[0] first) and a private copy of
 * the app part with the program name first, so getopt may permute it without touching argv.
 */
static int split_args(struct ps_fleet *f, int argc, char **argv, int *app_argc)
{
	int i, dd = 0, n;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	n = dd > 0 ? argc - dd : argc;
	f->app_argv = calloc((size_t)n + 1, sizeof(char *));
	if (f->app_argv == NULL)
		return -ENOMEM;
	f->app_argv[0] = argc > 0 ? argv[0] : (char *)"wharf";
	for (i = 1; i < n; i++)
		f->app_argv[i] = argv[(dd > 0 ? dd : 0) + i];
	f->eal_argc = dd > 0 ? dd : 1;
	f->eal_argv = argc > 0 ? argv : f->app_argv;
	*app_argc = n > 0 ? n : 1;
	return 0;
}

int ps_fleet_init_app(int argc, char **argv, char *const envp[], const struct ps_app_opts *app,
		      const char *name, bool *help, struct ps_fleet **out, char *err, size_t errlen)
{
	struct ps_fleet *f = calloc(1, sizeof(*f));
	int app_argc = 0, rc;

	*help = false;
	if (f == NULL) {
		snprintf(err, errlen, "fleet: out of memory");
		return -ENOMEM;
	}
	snprintf(f->name, sizeof(f->name), "%s", name != NULL ? name : "wharf");
	if ((rc = split_args(f, argc, argv, &app_argc)) != 0) {
		snprintf(err, errlen, "fleet: out of memory");
		goto out_free;
	}
	rc = ps_config_load(app_argc, f->app_argv, app, envp, &f->cl, help, err, errlen);
	if (rc == 0 && *help)
		*out = NULL;
	if (rc != 0 || *help)
		goto out_free;
	if (f->cl.role != PS_ROLE_PS && f->cl.role != PS_ROLE_WORKER) {
		rc = -EINVAL;
		snprintf(err, errlen, "fleet: no role (expected TRAINING_ROLE=PSERVER|TRAINER, "
			 "TF_CONFIG task.type or --role ps|worker)");
		goto out_free;
	}
	ps_eal_pick(&f->cl, f->eal_argc, f->eal_argv, &f->eal);
	f->eal_argc = f->eal.argc;
	f->eal_argv = f->eal.argv;
	/* Before any thread exists (EAL's among them), so every thread inherits the mask. */
	sigemptyset(&f->sigs);
	sigaddset(&f->sigs, SIGINT);
	sigaddset(&f->sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &f->sigs, NULL);
	*out = f;
	return 0;
out_free:
	free(f->app_argv);
	free(f);
	return rc;
}

int ps_fleet_init(int argc, char **argv, char *const envp[], struct ps_fleet **out, char *err,
		  size_t errlen)
{
	bool help = false;
	int rc = ps_fleet_init_app(argc, argv, envp, NULL, NULL, &help, out, err, errlen);

	if (rc == 0 && help) {
		snprintf(err, errlen, "fleet: --help asked; nothing initialised");
		return -ECANCELED;
	}
	return rc;
}

void ps_fleet_destroy(struct ps_fleet *f)
{
	if (f == NULL)
		return;
	ps_fleet_stop_worker(f);
	ps_model_tables_free(&f->mt);
	free(f->app_argv);
	free(f);
}

bool ps_fleet_is_server(const struct ps_fleet *f) { return f->cl.role == PS_ROLE_PS; }
bool ps_fleet_is_worker(const struct ps_fleet *f) { return f->cl.role == PS_ROLE_WORKER; }
unsigned ps_fleet_index(const struct ps_fleet *f) { return f->cl.task_index; }
const struct ps_cluster *ps_fleet_cluster(const struct ps_fleet *f) { return &f->cl; }
const char *ps_fleet_error(const struct ps_fleet *f) { return f->err; }

static int check_tables(struct ps_fleet *f, const struct ps_model_tables *t)
{
	if (t == NULL || t->n == 0 || t->n > PS_MODEL_MAX_TABLES)
		return fl_errf(f, -EINVAL, "fleet: expected 1..%u tables", PS_MODEL_MAX_TABLES);
	return 0;
}

/* ---- server role ---------------------------------------------------------------- */

int ps_fleet_init_server(struct ps_fleet *f, const struct ps_model_tables *tables)
{
	int rc;

	if (!ps_fleet_is_server(f))
		return fl_errf(f, -EINVAL, "fleet: init_server on a %s (this node's role is "
			       "from its environment)", ps_role_name(f->cl.role));
	if ((rc = check_tables(f, tables)) != 0)
		return rc;
	ps_model_tables_free(&f->mt);
	if (ps_model_tables_copy(&f->mt, tables) != 0)
		return fl_errf(f, -ENOMEM, "fleet: out of memory");
	f->server_ready = true;
	return 0;
}

int ps_fleet_set_checkpoints(struct ps_fleet *f, const char *ckpt, const char *restore)
{
	if ((ckpt != NULL && strlen(ckpt) >= sizeof(f->ckpt)) ||
	    (restore != NULL && strlen(restore) >= sizeof(f->restore)))
		return fl_errf(f, -ENAMETOOLONG, "fleet: checkpoint path longer than %u bytes",
			       PS_PATH_LEN - 1);
	snprintf(f->ckpt, sizeof(f->ckpt), "%s", ckpt != NULL ? ckpt : "");
	snprintf(f->restore, sizeof(f->restore), "%s", restore != NULL ? restore : "");
	return 0;
}

int ps_fleet_run_server(struct ps_fleet *f)
{
	if (!f->server_ready)
		return fl_errf(f, -EINVAL, "fleet: run_server before init_server");
	return ps_net_run_server(&f->cl, &f->mt, f->eal_argc, f->eal_argv, f->name,
				   f->ckpt[0] ? f->ckpt : NULL, f->restore[0] ? f->restore : NULL,
				   &f->sigs, f->err, sizeof(f->err));
}

/* ---- worker role ---------------------------------------------------------------- */

int ps_fleet_init_worker(struct ps_fleet *f, const struct ps_model_tables *tables)
{
	struct ps_client_config cc = { f->cl.task_index, f->cl.n_ps, f->cl.request_slots, 65536,
				       ps_incarnation_new(),
				       (uint64_t)f->cl.request_timeout_s * 1000000u };
	struct ps_net_params np = { &f->cl, f->eal_argc, f->eal_argv, 0, f->name, 0, 0, NULL, 0 };
	int rc;

	if (!ps_fleet_is_worker(f))
		return fl_errf(f, -EINVAL, "fleet: init_worker on a %s (this node's role is "
			       "from its environment)", ps_role_name(f->cl.role));
	if (f->pc != NULL)
		return fl_errf(f, -EALREADY, "fleet: init_worker called twice");
	if ((rc = check_tables(f, tables)) != 0)
		return rc;
	np.max_msg = ps_model_max_msg(tables);
	np.model_digest = ps_model_digest(tables);
	if ((rc = ps_client_create(&cc, &f->pc)) != 0)
		return fl_errf(f, rc, "fleet: ps client: %s", strerror(-rc));
	if ((rc = ps_net_create(&np, &f->n, f->err, sizeof(f->err))) != 0)
		goto out_pc;
	if ((rc = ps_net_connect(f->n, f->pc, f->err, sizeof(f->err))) != 0)
		goto out_n;
	PS_LOG(INFO, "%s: worker %u of %u connected to %u server%s (%s, mode %s)", f->name,
		f->cl.task_index, f->cl.n_workers, f->cl.n_ps, f->cl.n_ps == 1 ? "" : "s",
		ps_protocol_name(f->cl.protocol), ps_job_mode_name(f->cl.mode));
	return 0;
out_n:
	ps_net_destroy(f->n);
	f->n = NULL;
out_pc:
	ps_client_destroy(f->pc);
	f->pc = NULL;
	return rc;
}

struct ps_client *ps_fleet_client(struct ps_fleet *f, const struct ps_client_io **io)
{
	if (io != NULL)
		*io = f->n != NULL ? ps_net_io(f->n) : NULL;
	return f->n != NULL ? f->pc : NULL;
}

static bool conn_error(int rc)
{
	return rc == -ECONNRESET || rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -EIO;
}

int ps_fleet_recover(struct ps_fleet *f, int rc)
{
	if (rc == 0)
		return 0;
	if (f->n == NULL)
		return fl_errf(f, -ENOTCONN, "fleet: the worker is not initialised");
	if (rc == -ECANCELED || ps_net_signalled(f->n, &f->sigs))
		return fl_errf(f, -ECANCELED, "fleet: stopped by a signal or a shutdown");
	if (!conn_error(rc))
		return fl_errf(f, rc, "fleet: the server refused a request: %s%s%s", strerror(-rc),
			       ps_client_error(f->pc)[0] ? ": " : "", ps_client_error(f->pc));
	PS_LOG(WARNING, "%s: lost a server (%s); waiting for it to come back", f->name,
		strerror(-rc));
	return ps_net_recover(f->n, f->err, sizeof(f->err));
}

int ps_fleet_barrier(struct ps_fleet *f, uint64_t step)
{
	int rc;

	if (f->n == NULL)
		return fl_errf(f, -ENOTCONN, "fleet: the worker is not initialised");
	while ((rc = ps_client_barrier_wait(f->pc, ps_net_io(f->n), step)) != 0)
		if ((rc = ps_fleet_recover(f, rc)) != 0)
			return rc;
	return 0;
}

bool ps_fleet_signalled(struct ps_fleet *f)
{
	return f->n != NULL && ps_net_signalled(f->n, &f->sigs);
}

void ps_fleet_stop_worker(struct ps_fleet *f)
{
	ps_net_destroy(f->n);
	ps_client_destroy(f->pc);
	f->n = NULL;
	f->pc = NULL;
}

int ps_fleet_stop_servers(struct ps_fleet *f, int timeout_ms)
{
	char out[256], err[256], ep[PS_HOST_LEN + 8], tok[PS_CTL_TOKEN_MAX + 1];
	int rc, first = 0;
	unsigned s;

	for (s = 0; s < f->cl.n_ps; s++) {
		/* shutdown needs the server's token: the job's, or the one it made beside us. */
		rc = ps_ctl_token_of(&f->cl, &f->cl.ps[s], tok, sizeof(tok), err, sizeof(err));
		if (rc == 0)
			rc = ps_ctl_request(&f->cl.ps[s], tok, "shutdown", timeout_ms, out, sizeof(out),
					    err, sizeof(err));
		if (rc == 0 && strncmp(out, "ok", 2) != 0)
			rc = -EPROTO;
		if (rc != 0 && first == 0) {
			ps_endpoint_format(&f->cl.ps[s], ep, sizeof(ep));
			first = fl_errf(f, rc, "fleet: shutdown of ps %s: %s", ep,
					rc == -EPROTO ? out : err);
		}
	}
	return first;
}
