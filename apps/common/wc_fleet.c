/*
 * wc_fleet.c — Paddle's fleet role API on top of the existing glue: the role and cluster
 * from wc_config_load, the server role through wc_psnet_run_server, the worker role through
 * ps_client + wc_psnet (connect, io, recover, barrier). Nothing network-level is done here;
 * this file only sequences those calls per role and keeps their state in one object.
 *
 * Call chain: app main -> wc_fleet_init -> wc_config_load;
 *   server: wc_fleet_init_server -> wc_fleet_run_server -> wc_psnet_run_server;
 *   worker: wc_fleet_init_worker -> ps_client_create, wc_psnet_create, wc_psnet_connect
 *   -> (app) ps_client_*_wait over wc_psnet_io -> wc_fleet_recover -> wc_psnet_recover.
 * Start-up and shutdown only; the hot path is ps_client + wc_psnet, untouched by this file.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_fleet.h"
#include "apps/common/wc_pvt.h"

struct wc_fleet {
	struct wc_cluster cl;   /* wc_psnet keeps a pointer to it: lives as long as the fleet */
	char name[32];
	int eal_argc;
	char **eal_argv;        /* the caller's argv (EAL may permute it), or eal's */
	struct wc_eal eal;      /* the cluster's eal_args when the command line has none */
	char **app_argv;        /* our copy: program name + the part after "--" */
	sigset_t sigs;          /* SIGINT, SIGTERM: blocked, polled by the loops */

	/* server */
	bool server_ready;
	struct wc_model_tables mt;
	char ckpt[WC_PATH_LEN], restore[WC_PATH_LEN];

	/* worker */
	struct ps_client *pc;
	struct wc_psnet *n;

	char err[512];
};

static int fl_errf(struct wc_fleet *f, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fl_errf(struct wc_fleet *f, int rc, const char *fmt, ...)
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
static int split_args(struct wc_fleet *f, int argc, char **argv, int *app_argc)
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

int wc_fleet_init_app(int argc, char **argv, char *const envp[], const struct wc_app_opts *app,
		      const char *name, bool *help, struct wc_fleet **out, char *err, size_t errlen)
{
	struct wc_fleet *f = calloc(1, sizeof(*f));
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
	rc = wc_config_load(app_argc, f->app_argv, app, envp, &f->cl, help, err, errlen);
	if (rc == 0 && *help)
		*out = NULL;
	if (rc != 0 || *help)
		goto out_free;
	if (f->cl.role != WC_ROLE_PS && f->cl.role != WC_ROLE_WORKER) {
		rc = -EINVAL;
		snprintf(err, errlen, "fleet: no role (expected TRAINING_ROLE=PSERVER|TRAINER, "
			 "TF_CONFIG task.type or --role ps|worker)");
		goto out_free;
	}
	wc_eal_pick(&f->cl, f->eal_argc, f->eal_argv, &f->eal);
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

int wc_fleet_init(int argc, char **argv, char *const envp[], struct wc_fleet **out, char *err,
		  size_t errlen)
{
	bool help = false;
	int rc = wc_fleet_init_app(argc, argv, envp, NULL, NULL, &help, out, err, errlen);

	if (rc == 0 && help) {
		snprintf(err, errlen, "fleet: --help asked; nothing initialised");
		return -ECANCELED;
	}
	return rc;
}

void wc_fleet_destroy(struct wc_fleet *f)
{
	if (f == NULL)
		return;
	wc_fleet_stop_worker(f);
	wc_model_tables_free(&f->mt);
	free(f->app_argv);
	free(f);
}

bool wc_fleet_is_server(const struct wc_fleet *f) { return f->cl.role == WC_ROLE_PS; }
bool wc_fleet_is_worker(const struct wc_fleet *f) { return f->cl.role == WC_ROLE_WORKER; }
unsigned wc_fleet_index(const struct wc_fleet *f) { return f->cl.task_index; }
const struct wc_cluster *wc_fleet_cluster(const struct wc_fleet *f) { return &f->cl; }
const char *wc_fleet_error(const struct wc_fleet *f) { return f->err; }

static int check_tables(struct wc_fleet *f, const struct wc_model_tables *t)
{
	if (t == NULL || t->n == 0 || t->n > WC_MODEL_MAX_TABLES)
		return fl_errf(f, -EINVAL, "fleet: expected 1..%u tables", WC_MODEL_MAX_TABLES);
	return 0;
}

/* ---- server role ---------------------------------------------------------------- */

int wc_fleet_init_server(struct wc_fleet *f, const struct wc_model_tables *tables)
{
	int rc;

	if (!wc_fleet_is_server(f))
		return fl_errf(f, -EINVAL, "fleet: init_server on a %s (this node's role is "
			       "from its environment)", wc_role_name(f->cl.role));
	if ((rc = check_tables(f, tables)) != 0)
		return rc;
	wc_model_tables_free(&f->mt);
	if (wc_model_tables_copy(&f->mt, tables) != 0)
		return fl_errf(f, -ENOMEM, "fleet: out of memory");
	f->server_ready = true;
	return 0;
}

int wc_fleet_set_checkpoints(struct wc_fleet *f, const char *ckpt, const char *restore)
{
	if ((ckpt != NULL && strlen(ckpt) >= sizeof(f->ckpt)) ||
	    (restore != NULL && strlen(restore) >= sizeof(f->restore)))
		return fl_errf(f, -ENAMETOOLONG, "fleet: checkpoint path longer than %u bytes",
			       WC_PATH_LEN - 1);
	snprintf(f->ckpt, sizeof(f->ckpt), "%s", ckpt != NULL ? ckpt : "");
	snprintf(f->restore, sizeof(f->restore), "%s", restore != NULL ? restore : "");
	return 0;
}

int wc_fleet_run_server(struct wc_fleet *f)
{
	if (!f->server_ready)
		return fl_errf(f, -EINVAL, "fleet: run_server before init_server");
	return wc_psnet_run_server(&f->cl, &f->mt, f->eal_argc, f->eal_argv, f->name,
				   f->ckpt[0] ? f->ckpt : NULL, f->restore[0] ? f->restore : NULL,
				   &f->sigs, f->err, sizeof(f->err));
}

/* ---- worker role ---------------------------------------------------------------- */

int wc_fleet_init_worker(struct wc_fleet *f, const struct wc_model_tables *tables)
{
	struct ps_client_config cc = { f->cl.task_index, f->cl.n_ps, f->cl.request_slots, 65536,
				       ps_incarnation_new(),
				       (uint64_t)f->cl.request_timeout_s * 1000000u };
	struct wc_psnet_params np = { &f->cl, f->eal_argc, f->eal_argv, 0, f->name, 0, 0, NULL, 0 };
	int rc;

	if (!wc_fleet_is_worker(f))
		return fl_errf(f, -EINVAL, "fleet: init_worker on a %s (this node's role is "
			       "from its environment)", wc_role_name(f->cl.role));
	if (f->pc != NULL)
		return fl_errf(f, -EALREADY, "fleet: init_worker called twice");
	if ((rc = check_tables(f, tables)) != 0)
		return rc;
	np.max_msg = wc_model_max_msg(tables);
	np.model_digest = wc_model_digest(tables);
	if ((rc = ps_client_create(&cc, &f->pc)) != 0)
		return fl_errf(f, rc, "fleet: ps client: %s", strerror(-rc));
	if ((rc = wc_psnet_create(&np, &f->n, f->err, sizeof(f->err))) != 0)
		goto out_pc;
	if ((rc = wc_psnet_connect(f->n, f->pc, f->err, sizeof(f->err))) != 0)
		goto out_n;
	WC_LOG(INFO, "%s: worker %u of %u connected to %u server%s (%s, mode %s)", f->name,
		f->cl.task_index, f->cl.n_workers, f->cl.n_ps, f->cl.n_ps == 1 ? "" : "s",
		wc_protocol_name(f->cl.protocol), wc_mode_name(f->cl.mode));
	return 0;
out_n:
	wc_psnet_destroy(f->n);
	f->n = NULL;
out_pc:
	ps_client_destroy(f->pc);
	f->pc = NULL;
	return rc;
}

struct ps_client *wc_fleet_client(struct wc_fleet *f, const struct ps_client_io **io)
{
	if (io != NULL)
		*io = f->n != NULL ? wc_psnet_io(f->n) : NULL;
	return f->n != NULL ? f->pc : NULL;
}

static bool conn_error(int rc)
{
	return rc == -ECONNRESET || rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -EPIPE ||
	       rc == -ECONNABORTED || rc == -EIO;
}

int wc_fleet_recover(struct wc_fleet *f, int rc)
{
	if (rc == 0)
		return 0;
	if (f->n == NULL)
		return fl_errf(f, -ENOTCONN, "fleet: the worker is not initialised");
	if (rc == -ECANCELED || wc_psnet_signalled(f->n, &f->sigs))
		return fl_errf(f, -ECANCELED, "fleet: stopped by a signal or a shutdown");
	if (!conn_error(rc))
		return fl_errf(f, rc, "fleet: the server refused a request: %s%s%s", strerror(-rc),
			       ps_client_error(f->pc)[0] ? ": " : "", ps_client_error(f->pc));
	WC_LOG(WARNING, "%s: lost a server (%s); waiting for it to come back", f->name,
		strerror(-rc));
	return wc_psnet_recover(f->n, f->err, sizeof(f->err));
}

int wc_fleet_barrier(struct wc_fleet *f, uint64_t step)
{
	int rc;

	if (f->n == NULL)
		return fl_errf(f, -ENOTCONN, "fleet: the worker is not initialised");
	while ((rc = ps_client_barrier_wait(f->pc, wc_psnet_io(f->n), step)) != 0)
		if ((rc = wc_fleet_recover(f, rc)) != 0)
			return rc;
	return 0;
}

bool wc_fleet_signalled(struct wc_fleet *f)
{
	return f->n != NULL && wc_psnet_signalled(f->n, &f->sigs);
}

void wc_fleet_stop_worker(struct wc_fleet *f)
{
	wc_psnet_destroy(f->n);
	ps_client_destroy(f->pc);
	f->n = NULL;
	f->pc = NULL;
}

int wc_fleet_stop_servers(struct wc_fleet *f, int timeout_ms)
{
	char out[256], err[256], ep[WC_HOST_LEN + 8], tok[WC_CTL_TOKEN_MAX + 1];
	int rc, first = 0;
	unsigned s;

	for (s = 0; s < f->cl.n_ps; s++) {
		/* shutdown needs the server's token: the job's, or the one it made beside us. */
		rc = wc_ctl_token_of(&f->cl, &f->cl.ps[s], tok, sizeof(tok), err, sizeof(err));
		if (rc == 0)
			rc = wc_ctl_request(&f->cl.ps[s], tok, "shutdown", timeout_ms, out, sizeof(out),
					    err, sizeof(err));
		if (rc == 0 && strncmp(out, "ok", 2) != 0)
			rc = -EPROTO;
		if (rc != 0 && first == 0) {
			wc_endpoint_format(&f->cl.ps[s], ep, sizeof(ep));
			first = fl_errf(f, rc, "fleet: shutdown of ps %s: %s", ep,
					rc == -EPROTO ? out : err);
		}
	}
	return first;
}
