/*
 * wh_server.c — wharf_server_run: a PS node of a library user's process, the same server
 * wharf-psd runs (ps_net_run_server: lanes, shards, write-ahead log, checkpoints).
 *
 * Call chain: wharf_server_run -> ps_net_run_server -> (lanes serve) -> returns on
 *   wharf_server_stop (ps_net_stop_all), a "shutdown" command, or a blocked SIGINT/SIGTERM.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "api/wh_config.h"
#include "api/wh_pvt.h"

int wharf_server_run(const struct wharf_config *c, const struct wharf_model *m,
		     const char *ckpt, const char *restore)
{
	const struct ps_model_tables *mt;
	sigset_t blocked, sigs;
	char err[1024];
	int rc;

	if (c == NULL || m == NULL)
		return wh_errf(-EINVAL, "wharf_server_run: NULL %s", c == NULL ? "config" : "model");
	if (c->cl.role != PS_ROLE_PS)
		return wh_errf(-EINVAL, "the cluster role is %s; wharf_server_run serves only as ps "
			       "(--role ps, TRAINING_ROLE=PSERVER, TF_CONFIG task.type ps)",
			       ps_role_name(c->cl.role));
	mt = wh_model_tables(m);
	/* The signals the caller blocked are ours to take; the others stay the caller's. */
	sigemptyset(&sigs);
	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0) {
		if (sigismember(&blocked, SIGINT) == 1)
			sigaddset(&sigs, SIGINT);
		if (sigismember(&blocked, SIGTERM) == 1)
			sigaddset(&sigs, SIGTERM);
	}
	rc = ps_net_run_server(&c->cl, mt, c->eal_argc, c->eal_argv, "wharf", ckpt, restore,
				 &sigs, err, sizeof(err));
	/* Stopped: a later run of this process serves again until its own stop. */
	ps_net_stop_all(false);
	if (rc != 0)
		return wh_errf(rc, "%s", err);
	return 0;
}

void wharf_server_stop(void)
{
	ps_net_stop_all(true);
}
