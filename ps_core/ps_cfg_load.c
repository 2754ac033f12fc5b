/*
 * ps_cfg_load.c — gathers every configuration source in precedence order and checks the
 * result as a whole: the one entry point the executables call.
 *
 * Call chain: main() -> ps_config_load -> ps_flags_parse (first, because --config names the
 * file), ps_cfg_file_load, ps_cfg_env_knobs, ps_cfg_env_paddle, ps_cfg_env_tfconfig, then
 * ps_cluster_merge lowest precedence first, then ps_cluster_finalize -> ps_epmap_load,
 * ps_cfg_addr_task, ps_cfg_addr_node (names resolved, the data plane).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_config_pvt.h"

static const char *origin_of(const struct ps_cluster *c, enum ps_field f)
{
	return ps_source_name((enum ps_source)c->origin[f]);
}

static int check_counts(struct ps_cluster *c, char *err, size_t errlen)
{
	if (c->role == PS_ROLE_UNSET)
		return ps_errf_rc(err, errlen, -EINVAL, "no role given; expected --role ps|worker, "
			       "TF_CONFIG task.type, TRAINING_ROLE or task.type in the config file");
	if (c->n_ps == 0)
		return ps_errf_rc(err, errlen, -EINVAL, "no parameter servers given; expected --ps, "
			       "TF_CONFIG cluster.ps, PADDLE_PSERVERS_IP_PORT_LIST or cluster.ps in the "
			       "config file");
	if (ps_has(c, PS_F_NUM_WORKERS) && ps_has(c, PS_F_WORKERS) && c->n_workers != c->n_worker_addrs)
		return ps_errf_rc(err, errlen, -EINVAL, "worker count %u (from %s) does not match the %u "
			       "worker endpoints (from %s)", c->n_workers, origin_of(c, PS_F_NUM_WORKERS),
			       c->n_worker_addrs, origin_of(c, PS_F_WORKERS));
	if (!ps_has(c, PS_F_NUM_WORKERS))
		c->n_workers = c->n_worker_addrs;
	if (c->n_workers == 0)
		return ps_errf_rc(err, errlen, -EINVAL, "number of workers unknown; expected --workers, "
			       "--num-workers, TF_CONFIG cluster.worker, PADDLE_TRAINERS_NUM or "
			       "cluster.worker in the config file");
	if (c->n_workers > PS_MAX_NODES)
		return ps_errf_rc(err, errlen, -E2BIG, "%u workers (from %s); at most %u", c->n_workers,
			       origin_of(c, PS_F_NUM_WORKERS), PS_MAX_NODES);
	if (c->mode == PS_JOB_GEO && c->geo_k == 0)
		return ps_errf_rc(err, errlen, -EINVAL, "geo_k must be >= 1 in GEO mode");
	return 0;
}

/* After ps_cfg_addr_task: a Paddle PSERVER's index is known only once names resolved. */
static int check_index(const struct ps_cluster *c, char *err, size_t errlen)
{
	unsigned n = c->role == PS_ROLE_PS ? c->n_ps : c->n_workers;

	if (c->task_index >= n)
		return ps_errf_rc(err, errlen, -EINVAL, "task index %u (from %s) out of range: the cluster "
			       "has %u %s node%s", c->task_index, origin_of(c, PS_F_TASK_INDEX), n,
			       ps_role_name(c->role), n == 1 ? "" : "s");
	return 0;
}

static int check_duplicates(const struct ps_cluster *c, char *err, size_t errlen)
{
	unsigned na = c->n_ps + c->n_worker_addrs, i, j;
	const struct ps_endpoint *a, *b;

	for (i = 0; i < na; i++) {
		a = i < c->n_ps ? &c->ps[i] : &c->worker[i - c->n_ps];
		for (j = i + 1; j < na; j++) {
			b = j < c->n_ps ? &c->ps[j] : &c->worker[j - c->n_ps];
			if (ps_endpoint_equal(a, b))
				return ps_errf_rc(err, errlen, -EINVAL, "endpoint %s:%u appears twice in the "
					       "cluster (%s %u and %s %u); expected one per node", a->host,
					       a->port, i < c->n_ps ? "ps" : "worker",
					       i < c->n_ps ? i : i - c->n_ps, j < c->n_ps ? "ps" : "worker",
					       j < c->n_ps ? j : j - c->n_ps);
		}
	}
	return 0;
}

static unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

/*
 * Which map file to read: an explicit one (flag/file) or TF_SEASTAR_ENDPOINT_MAP_PATH must
 * exist; ./.endpoint_map is optional. Writes "" when there is none to read.
 */
static int resolve_map_path(struct ps_cluster *c, char *const envp[], char *err, size_t errlen)
{
	const char *env = ps_env_get(envp, "TF_SEASTAR_ENDPOINT_MAP_PATH");
	const char *src;
	char path[PS_PATH_LEN];
	FILE *f;

	if (ps_has(c, PS_F_EPMAP) && c->endpoint_map[0] != '\0') {
		snprintf(path, sizeof(path), "%s", c->endpoint_map);
		src = origin_of(c, PS_F_EPMAP);
	} else if (env != NULL && env[0] != '\0') {
		if (ps_is_dir(env))
			snprintf(path, sizeof(path), "%s/.endpoint_map", env);
		else
			snprintf(path, sizeof(path), "%s", env);
		src = "TF_SEASTAR_ENDPOINT_MAP_PATH";
	} else {
		f = fopen("./.endpoint_map", "r");
		if (f != NULL)
			fclose(f);
		snprintf(c->endpoint_map, sizeof(c->endpoint_map), "%s", f != NULL ? "./.endpoint_map" : "");
		return 0;
	}
	f = fopen(path, "r");
	if (f == NULL)
		return ps_errf_rc(err, errlen, -ENOENT, "%s: endpoint map %s cannot be opened: %s", src,
			       path, strerror(errno));
	fclose(f);
	snprintf(c->endpoint_map, sizeof(c->endpoint_map), "%s", path);
	return 0;
}

/*
 * The map's data addresses (as the cluster spells the control endpoints). protocol=dpdk: a
 * PS the map leaves out keeps an empty data address: its workers ask its health answer.
 */
static void fill_data(struct ps_cluster *c, const struct ps_epmap *m)
{
	const struct ps_endpoint *d;
	unsigned i;

	for (i = 0; i < c->n_ps; i++) {
		d = c->protocol == PS_PROTO_KERNEL ? &c->ps[i] : ps_epmap_lookup(m, &c->ps[i]);
		if (d != NULL)
			c->ps_data[i] = *d;
		else
			memset(&c->ps_data[i], 0, sizeof(c->ps_data[i]));
	}
	for (i = 0; i < c->n_worker_addrs; i++) {
		d = c->protocol == PS_PROTO_KERNEL ? &c->worker[i] : ps_epmap_lookup(m, &c->worker[i]);
		if (d != NULL)
			c->worker_data[i] = *d;
		else
			memset(&c->worker_data[i], 0, sizeof(c->worker_data[i]));
	}
}

/* An explicit --data-addr, else the map's line (dpdk: else --data-iface, ps_cfg_addr.c). */
static void fill_self_data(struct ps_cluster *c)
{
	const struct ps_endpoint *ctl = NULL, *data = NULL;
	unsigned i = c->task_index;

	if (c->role == PS_ROLE_PS) {
		ctl = &c->ps[i];
		data = c->ps_data[i].host[0] != '\0' ? &c->ps_data[i] : NULL;
	} else if (i < c->n_worker_addrs) {
		ctl = &c->worker[i];
		data = c->worker_data[i].host[0] != '\0' ? &c->worker_data[i] : NULL;
	}
	if (c->have_self_data) {
		/* An explicit --data-addr without a port listens on the control port. */
		if (c->self_data.port == 0 && ctl != NULL)
			c->self_data.port = ctl->port;
	} else if (data != NULL) {
		c->self_data = *data;
		c->have_self_data = true;
	}
}

int ps_cluster_finalize(struct ps_cluster *c, char *const envp[], char *err, size_t errlen)
{
	return ps_cluster_finalize_with(c, envp, &ps_resolver_default, err, errlen);
}

int ps_cluster_finalize_with(struct ps_cluster *c, char *const envp[],
			     const struct ps_resolver *r, char *err, size_t errlen)
{
	struct ps_epmap *m;
	int rc;

	rc = check_counts(c, err, errlen);
	if (rc == 0)
		rc = check_duplicates(c, err, errlen);
	if (rc == 0)
		rc = resolve_map_path(c, envp, err, errlen);
	if (rc == 0)
		rc = ps_cfg_addr_task(c, r, err, errlen);
	if (rc == 0)
		rc = check_index(c, err, errlen);
	if (rc != 0)
		return rc;
	if (!ps_has(c, PS_F_PS_CORES))
		c->ps_net.core_number = min_u(PS_DEF_PS_CORE_CAP, c->n_workers);
	if (!ps_has(c, PS_F_WORKER_CORES))
		c->worker_net.core_number = min_u(PS_DEF_WORKER_CORE_CAP, c->n_ps);
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	if (c->endpoint_map[0] != '\0')
		rc = ps_epmap_load(c->endpoint_map, m, err, errlen);
	if (rc == 0) {
		fill_data(c, m);
		fill_self_data(c);
		rc = ps_cfg_addr_node(c, r, err, errlen);
	}
	free(m);
	if (rc == 0)
		rc = ps_ctl_token_config(c, envp, err, errlen);
	return rc;
}

int ps_config_load(int argc, char **argv, const struct ps_app_opts *app, char *const envp[],
		   struct ps_cluster *out, bool *help, char *err, size_t errlen)
{
	/* Flags, file, knobs, paddle, tf, merged: 6 large structs, so on the heap. */
	struct ps_cluster *s = calloc(6, sizeof(*s));
	int rc;

	if (s == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	rc = ps_flags_parse(argc, argv, app, &s[0], help, err, errlen);
	if (rc != 0 || *help)
		goto out;
	if (ps_has(&s[0], PS_F_CONFIG_PATH))
		rc = ps_cfg_file_load(s[0].config_path, &s[1], err, errlen);
	if (rc == 0)
		rc = ps_cfg_env_knobs(envp, &s[2], err, errlen);
	if (rc == 0)
		rc = ps_cfg_env_paddle(envp, &s[3], err, errlen);
	if (rc == 0)
		rc = ps_cfg_env_tfconfig(envp, &s[4], err, errlen);
	if (rc != 0)
		goto out;
	ps_cluster_init(&s[5]);
	ps_cluster_merge(&s[5], &s[1], PS_SRC_FILE);
	ps_cluster_merge(&s[5], &s[2], PS_SRC_ENV_KNOBS);
	ps_cluster_merge(&s[5], &s[3], PS_SRC_PADDLE);
	ps_cluster_merge(&s[5], &s[4], PS_SRC_TF_CONFIG);
	ps_cluster_merge(&s[5], &s[0], PS_SRC_FLAGS);
	rc = ps_cluster_finalize(&s[5], envp, err, errlen);
	if (rc == 0)
		memcpy(out, &s[5], sizeof(*out));
out:
	free(s);
	return rc;
}
