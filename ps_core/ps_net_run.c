/*
 * ps_net_run.c — one PS node from start to stop, shared by wharf-psd and by wharf-train in
 * the server role (Paddle's "the same binary is server or worker" example).
 *
 * Call chain: psd/train main -> ps_net_run_server -> ps_net_lanes_start (dpdk: EAL, the port)
 *   -> ps_server_create (one lcore slot per lane), ps_handler_create per lane, ps_recover
 *   (with the log) | [ps_load] on lane 0's -> ps_net_lanes_run (ps_net_lanes.c: per lane
 *   ps_net_create, ps_net_serve, ps_net_serve_loop) -> teardown.
 *
 * The write-ahead log is on whenever there is a checkpoint path (in <ckpt>.wal unless
 * --wal-dir names another directory or "none"): then a restart recovers the checkpoint
 * (--restore) plus the log after it, and a server that never checkpointed replays its log.
 * --wal-dir without --ckpt keeps its checkpoint in DIR/checkpoint and recovers from it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ps_core/ps_net_pvt.h"

enum ps_mode ps_job_to_mode(enum ps_job_mode m)
{
	return m == PS_JOB_SYNC ? PS_MODE_SYNC : m == PS_JOB_GEO ? PS_MODE_GEO : PS_MODE_ASYNC;
}

/* Checkpoint (when restoring) + the log after it; one line saying what came back. */
static int recover(struct ps_handler *h, const char *name, const char *restore, const char *wal,
		   char *err, size_t errlen)
{
	struct ps_recover_stats st;
	int rc = ps_recover(h, restore, &st, err, errlen);

	if (rc != 0)
		return rc;
	PS_LOG(NOTICE, "%s: restored from %s%s; log %s: %u segment%s, %" PRIu64 " records "
		"replayed (%" PRIu64 " applied, %" PRIu64 " already in the checkpoint), %" PRIu64
		" torn tail record%s dropped, %" PRIu64 " covered segment%s skipped", name,
		st.ckpt_loaded ? restore : "empty tables", restore && !st.ckpt_loaded ?
		" (no checkpoint file yet)" : "", wal, st.segments, st.segments == 1 ? "" : "s",
		st.records, st.applied, st.skipped, st.torn, st.torn == 1 ? "" : "s", st.covered,
		st.covered == 1 ? "" : "s");
	return 0;
}

int ps_net_run_server(const struct ps_cluster *cl, const struct ps_model_tables *mt,
			int eal_argc, char **eal_argv, const char *name, const char *ckpt,
			const char *restore, const sigset_t *sigs, char *err, size_t errlen)
{
	struct ps_net_params np = { cl, eal_argc, eal_argv, ps_model_max_msg(mt), name, 0, 0, NULL,
				      ps_model_digest(mt) };
	struct ps_handler *h[PS_NET_MAX_LANES] = { NULL };
	struct ps_server_config sc;
	struct ps_server *ps = NULL;
	struct ps_net_group *g = NULL;
	uint32_t lanes = ps_net_lanes_wanted(cl), k;
	int rc;

	char wal[PS_PATH_LEN + 8] = "", own_ckpt[PS_PATH_LEN + 16];
	int len = 0;

	if (strcmp(cl->wal_dir, "none") != 0 && cl->wal_dir[0] != '\0')
		len = snprintf(wal, sizeof(wal), "%s", cl->wal_dir);
	else if (cl->wal_dir[0] == '\0' && ckpt != NULL)
		len = snprintf(wal, sizeof(wal), "%s.wal", ckpt);
	/* A path cut short would put the log somewhere nobody asked for: refuse it. */
	if (len < 0 || (size_t)len >= sizeof(wal) - sizeof("/checkpoint"))
		return ps_errf_rc(err, errlen, -ENAMETOOLONG, "write-ahead log directory %s%s: longer "
			       "than %zu bytes", cl->wal_dir[0] != '\0' ? cl->wal_dir : ckpt,
			       cl->wal_dir[0] != '\0' ? "" : ".wal",
			       sizeof(wal) - sizeof("/checkpoint") - 1);
	if (wal[0] != '\0' && ckpt == NULL) {
		/* A log alone: the checkpoints that bound it live beside its segments. */
		memcpy(own_ckpt, wal, (size_t)len);
		memcpy(own_ckpt + len, "/checkpoint", sizeof("/checkpoint"));
		ckpt = own_ckpt;
		if (restore == NULL && access(own_ckpt, F_OK) == 0)
			restore = own_ckpt;
	}
	/* The lanes first: on DPDK, EAL says how many lcores there are to serve on. */
	if ((rc = ps_net_lanes_start(&g, cl, &np, &lanes, err, errlen)) != 0)
		return rc;
	memset(&sc, 0, sizeof(sc));
	sc.wal_dir = wal[0] != '\0' ? wal : NULL;
	sc.ckpt_path = ckpt;
	sc.server_id = cl->task_index;
	sc.n_servers = cl->n_ps;
	sc.n_shards = PS_NET_PS_SHARDS;
	sc.n_lcores = lanes;
	sc.n_workers = cl->n_workers;
	sc.mode = ps_job_to_mode(cl->mode);
	sc.max_keys = 65536;
	sc.geo_log_max = cl->geo_log_max;
	sc.tables = mt->t;
	sc.n_tables = mt->n;
	/* The log's syncs run on a thread of their own (ps_net_lanes_run): lanes never wait for disk. */
	sc.wal_bg_sync = sc.wal_dir != NULL && cl->wal_sync_ms > 0;
	sc.barrier_timeout_ms = cl->barrier_timeout_s * 1000u;
	sc.barrier_policy = cl->barrier_policy == PS_POLICY_CONTINUE ? PS_BARRIER_CONTINUE :
			    PS_BARRIER_FAIL;
	ps_net_lanes_wake_hook(g, &sc);
	if ((rc = ps_server_create(&sc, &ps, err, errlen)) != 0)
		goto out_lanes;
	for (k = 0; k < lanes; k++)
		if ((rc = ps_handler_create(ps, k, &h[k])) != 0) {
			ps_errf_rc(err, errlen, rc, "ps handler of lane %u: %s", k, strerror(-rc));
			goto out_h;
		}
	/* Recovery runs on lane 0's handler alone, before any lane serves. */
	if (sc.wal_dir != NULL)
		rc = recover(h[0], name, restore, wal, err, errlen);
	else if (restore != NULL && (rc = ps_load(h[0], restore, err, errlen)) == 0)
		PS_LOG(NOTICE, "%s: restored from %s", name, restore);
	if (rc != 0)
		goto out_h;
	rc = ps_net_lanes_run(g, ps, h, &sc, ckpt, sigs, err, errlen);
out_h:
	for (k = 0; k < lanes; k++)
		ps_handler_destroy(h[k]);
	ps_server_destroy(ps);
out_lanes:
	ps_net_lanes_fini(g);
	return rc;
}
