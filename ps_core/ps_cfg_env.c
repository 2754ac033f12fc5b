/*
 * ps_cfg_env.c — the environment as a configuration source: TF_CONFIG (DeepRec/TensorFlow),
 * Paddle's PS launch variables, and DeepRec's network tuning variables.
 *
 * Call chain: ps_config_load -> ps_cfg_env_{knobs,paddle,tfconfig}. The environment is a
 * parameter (envp-style array), never read from the process, so tests need no setenv.
 * Every error names the variable and what it expected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ps_core/ps_cfg_json.h"
#include "ps_core/ps_config_pvt.h"
#include "transport/tl.h"

#define PS_TF_CONFIG_MAX 65536

int ps_cfg_env_tfconfig(char *const envp[], struct ps_cluster *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "cluster", "task", "environment", "rpc_layer", NULL };
	const char *v = ps_env_get(envp, "TF_CONFIG");
	struct ps_cluster *tmp;
	json_error_t je;
	json_t *root;
	int rc;

	if (v == NULL || v[0] == '\0')
		return 0;
	if (strlen(v) > PS_TF_CONFIG_MAX)
		return ps_errf_rc(err, errlen, -E2BIG, "TF_CONFIG: longer than %u bytes", PS_TF_CONFIG_MAX);
	root = json_loads(v, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "TF_CONFIG:%d:%d: JSON syntax error: %s; expected "
			       "{\"cluster\":{\"ps\":[..],\"worker\":[..]},\"task\":{\"type\":..,\"index\":..}}",
			       je.line, je.column, je.text);
	tmp = malloc(sizeof(*tmp));
	if (tmp == NULL) {
		json_decref(root);
		return ps_errf_rc(err, errlen, -ENOMEM, "TF_CONFIG: out of memory");
	}
	memcpy(tmp, out, sizeof(*tmp));
	if (!json_is_object(root))
		rc = ps_errf_rc(err, errlen, -EINVAL, "TF_CONFIG: expected a JSON object");
	else
		rc = ps_json_known_keys(root, keys, "TF_CONFIG", "", err, errlen);
	if (rc == 0)
		rc = ps_json_cluster_task(root, "TF_CONFIG", tmp, err, errlen);
	if (rc == 0)
		memcpy(out, tmp, sizeof(*out));
	json_decref(root);
	free(tmp);
	return rc;
}

static bool is_ipv4(const char *host)
{
	struct in_addr a;

	return inet_pton(AF_INET, host, &a) == 1;
}

/*
 * A PSERVER finds its own index as POD_IP:PADDLE_PORT in the server list. A list that names
 * hosts (a PaddleJob's services) is matched by address once finalize has resolved it.
 */
static int paddle_ps_index(char *const envp[], struct ps_cluster *c, char *err, size_t errlen)
{
	const char *ip = ps_env_get(envp, "POD_IP"), *port = ps_env_get(envp, "PADDLE_PORT");
	struct ps_endpoint self;
	unsigned p, i, names = 0;
	int rc;

	if (ip == NULL || port == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: missing; TRAINING_ROLE=PSERVER expects POD_IP "
			       "and PADDLE_PORT to name this server", ip == NULL ? "POD_IP" : "PADDLE_PORT");
	rc = ps_parse_endpoint(ip, strlen(ip), true, &self, "POD_IP", err, errlen);
	if (rc == 0)
		rc = ps_parse_uint(port, 1, 65535, &p, "PADDLE_PORT", err, errlen);
	if (rc != 0)
		return rc;
	if (self.port != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "POD_IP: '%s' expected an address without a port",
			       ip);
	self.port = (uint16_t)p;
	if (!ps_has(c, PS_F_PS))
		return ps_errf_rc(err, errlen, -EINVAL, "PADDLE_PSERVERS_IP_PORT_LIST: missing; "
			       "TRAINING_ROLE=PSERVER expects the server list");
	for (i = 0; i < c->n_ps; i++) {
		if (ps_endpoint_equal(&c->ps[i], &self))
			break;
		names += !is_ipv4(c->ps[i].host);
	}
	if (i == c->n_ps && names == 0 && is_ipv4(self.host))
		return ps_errf_rc(err, errlen, -EINVAL, "POD_IP:PADDLE_PORT %s:%u is not in "
			       "PADDLE_PSERVERS_IP_PORT_LIST; expected one of its entries", ip, p);
	c->task_by_ep = i == c->n_ps;
	c->task_ep = self;
	c->task_index = i == c->n_ps ? 0 : i;
	ps_mark(c, PS_F_TASK_INDEX);
	return 0;
}

static int paddle_role(char *const envp[], const char *role, struct ps_cluster *c, char *err,
		       size_t errlen)
{
	const char *id = ps_env_get(envp, "PADDLE_TRAINER_ID");
	int rc;

	if (strcmp(role, "PSERVER") == 0) {
		c->role = PS_ROLE_PS;
		ps_mark(c, PS_F_ROLE);
		return paddle_ps_index(envp, c, err, errlen);
	}
	if (strcmp(role, "TRAINER") != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "TRAINING_ROLE: '%.64s' expected PSERVER or TRAINER",
			       role);
	c->role = PS_ROLE_WORKER;
	ps_mark(c, PS_F_ROLE);
	if (id == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "PADDLE_TRAINER_ID: missing; TRAINING_ROLE=TRAINER "
			       "expects it");
	rc = ps_parse_uint(id, 0, PS_MAX_NODES - 1, &c->task_index, "PADDLE_TRAINER_ID", err, errlen);
	if (rc == 0)
		ps_mark(c, PS_F_TASK_INDEX);
	return rc;
}

int ps_cfg_env_paddle(char *const envp[], struct ps_cluster *out, char *err, size_t errlen)
{
	const char *list = ps_env_get(envp, "PADDLE_PSERVERS_IP_PORT_LIST");
	const char *role = ps_env_get(envp, "TRAINING_ROLE");
	const char *num = ps_env_get(envp, "PADDLE_TRAINERS_NUM");
	const char *eps = ps_env_get(envp, "PADDLE_TRAINER_ENDPOINTS");
	struct ps_cluster *c;
	int rc = 0;

	if (list == NULL && role == NULL && num == NULL && eps == NULL)
		return 0;
	c = malloc(sizeof(*c));
	if (c == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	memcpy(c, out, sizeof(*c));
	if (list != NULL) {
		rc = ps_parse_endpoint_list(list, c->ps, PS_MAX_NODES, &c->n_ps,
					    "PADDLE_PSERVERS_IP_PORT_LIST", err, errlen);
		ps_mark(c, PS_F_PS);
	}
	if (rc == 0 && num != NULL) {
		rc = ps_parse_uint(num, 1, PS_MAX_NODES, &c->n_workers, "PADDLE_TRAINERS_NUM", err,
				   errlen);
		ps_mark(c, PS_F_NUM_WORKERS);
	}
	if (rc == 0 && eps != NULL) {
		rc = ps_parse_endpoint_list(eps, c->worker, PS_MAX_NODES, &c->n_worker_addrs,
					    "PADDLE_TRAINER_ENDPOINTS", err, errlen);
		ps_mark(c, PS_F_WORKERS);
	}
	if (rc == 0 && role != NULL)
		rc = paddle_role(envp, role, c, err, errlen);
	if (rc == 0)
		memcpy(out, c, sizeof(*out));
	free(c);
	return rc;
}

static int knob_bool(char *const envp[], const char *name, bool *dst, struct ps_cluster *c,
		     enum ps_field f, char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, name);
	int rc;

	if (v == NULL)
		return 0;
	rc = ps_parse_bool(v, dst, name, err, errlen);
	if (rc == 0)
		ps_mark(c, f);
	return rc;
}

static int knob_uint(char *const envp[], const char *name, unsigned lo, unsigned hi,
		     unsigned *dst, struct ps_cluster *c, enum ps_field f, char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, name);
	int rc;

	if (v == NULL)
		return 0;
	rc = ps_parse_uint(v, lo, hi, dst, name, err, errlen);
	if (rc == 0)
		ps_mark(c, f);
	return rc;
}

static int knob_enums(char *const envp[], struct ps_cluster *c, char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, "WHARF_PROTOCOL");
	int rc = 0;

	if (v != NULL) {
		rc = ps_parse_protocol(v, &c->protocol, "WHARF_PROTOCOL", err, errlen);
		ps_mark(c, PS_F_PROTOCOL);
	}
	v = ps_env_get(envp, "WHARF_MODE");
	if (rc == 0 && v != NULL) {
		rc = ps_parse_job_mode(v, &c->mode, "WHARF_MODE", err, errlen);
		ps_mark(c, PS_F_MODE);
	}
	v = ps_env_get(envp, "WHARF_BARRIER_POLICY");
	if (rc == 0 && v != NULL) {
		rc = ps_parse_policy(v, &c->barrier_policy, "WHARF_BARRIER_POLICY", err, errlen);
		ps_mark(c, PS_F_BARRIER_POLICY);
	}
	v = ps_env_get(envp, "WHARF_PS_LOST_STATE");
	if (rc == 0 && v != NULL) {
		rc = ps_parse_policy(v, &c->ps_lost_state, "WHARF_PS_LOST_STATE", err, errlen);
		ps_mark(c, PS_F_PS_LOST_STATE);
	}
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_BARRIER_TIMEOUT_S", 0, 86400, &c->barrier_timeout_s, c,
			       PS_F_BARRIER_TIMEOUT, err, errlen);
	return rc;
}

/*
 * WHARF_WAL_DIR, WHARF_CKPT_INTERVAL_S, WHARF_WAL_MAX_MB, WHARF_WAL_SYNC_MS, and the control
 * token's file WHARF_CTL_TOKEN_FILE (WHARF_CTL_TOKEN and WHARF_RUNTIME_DIR are read by
 * ps_cluster_finalize).
 */
static int knob_durability(char *const envp[], struct ps_cluster *c, char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, "WHARF_CTL_TOKEN_FILE");
	int rc = 0;

	if (v != NULL) {
		if (v[0] == '\0' || strlen(v) >= PS_PATH_LEN)
			return ps_errf_rc(err, errlen, -EINVAL, "WHARF_CTL_TOKEN_FILE: expected a path of "
				       "1..%u bytes", PS_PATH_LEN - 1);
		snprintf(c->ctl_token_file, sizeof(c->ctl_token_file), "%s", v);
		ps_mark(c, PS_F_CTL_TOKEN_FILE);
	}
	v = ps_env_get(envp, "WHARF_WAL_DIR");

	if (v != NULL) {
		if (v[0] == '\0' || strlen(v) >= PS_PATH_LEN)
			return ps_errf_rc(err, errlen, -EINVAL, "WHARF_WAL_DIR: expected a path of 1..%u "
				       "bytes or none", PS_PATH_LEN - 1);
		snprintf(c->wal_dir, sizeof(c->wal_dir), "%s", v);
		ps_mark(c, PS_F_WAL_DIR);
	}
	rc = knob_uint(envp, "WHARF_CKPT_INTERVAL_S", 0, 86400, &c->ckpt_interval_s, c,
		       PS_F_CKPT_INTERVAL, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_WAL_MAX_MB", 1, 1u << 20, &c->wal_max_mb, c,
			       PS_F_WAL_MAX_MB, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_WAL_SYNC_MS", 0, 60000, &c->wal_sync_ms, c,
			       PS_F_WAL_SYNC_MS, err, errlen);
	return rc;
}

/* WHARF_DATA_IFACE, WHARF_DATA_PREFIX, WHARF_DATA_GATEWAY. */
static int knob_data_plane(char *const envp[], struct ps_cluster *c, char *err, size_t errlen)
{
	const char *v = ps_env_get(envp, "WHARF_DATA_IFACE");
	int rc = 0;

	if (v != NULL) {
		rc = ps_parse_ifname(v, c->data_iface, "WHARF_DATA_IFACE", err, errlen);
		ps_mark(c, PS_F_DATA_IFACE);
	}
	v = ps_env_get(envp, "WHARF_DATA_GATEWAY");
	if (rc == 0 && v != NULL) {
		rc = ps_parse_gateway(v, &c->data_gateway, "WHARF_DATA_GATEWAY", err, errlen);
		ps_mark(c, PS_F_DATA_GATEWAY);
	}
	v = ps_env_get(envp, "WHARF_DATA_PREFIX");
	if (rc == 0 && v != NULL) {
		rc = ps_parse_prefix(v, &c->data_prefix, "WHARF_DATA_PREFIX", err, errlen);
		ps_mark(c, PS_F_DATA_PREFIX);
	}
	return rc;
}

/*
 * The layers below read these themselves (dpdk_net, transport: tl_create refuses a bad one
 * for any program); a PS or worker refuses it here, when it loads its configuration.
 */
static int knob_lower_layers(char *const envp[], char *err, size_t errlen)
{
	unsigned tmp;

	/* The transport's own list (it refuses the same values when it is created). */
	for (unsigned i = 0; i < tl_env_n_knobs; i++) {
		const struct tl_env_knob *k = &tl_env_knobs[i];
		const char *v = ps_env_get(envp, k->name);
		int rc;
		if (v == NULL || *v == '\0')
			continue;
		if ((rc = ps_parse_uint(v, k->lo, k->hi, &tmp, k->name, err, errlen)) < 0)
			return rc;
	}
	return 0;
}

int ps_cfg_env_knobs(char *const envp[], struct ps_cluster *out, char *err, size_t errlen)
{
	struct ps_cluster *c = malloc(sizeof(*c));
	const char *v;
	int rc;

	if (c == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	memcpy(c, out, sizeof(*c));
	rc = knob_bool(envp, "PS_ENABLE_POLLING", &c->ps_net.enable_polling, c, PS_F_PS_POLLING,
		       err, errlen);
	if (rc == 0)
		rc = knob_bool(envp, "WORKER_ENABLE_POLLING", &c->worker_net.enable_polling, c,
			       PS_F_WORKER_POLLING, err, errlen);
	if (rc == 0)
		rc = knob_bool(envp, "PS_DISABLE_PIN_CORES", &c->ps_net.disable_pin_cores, c,
			       PS_F_PS_DISABLE_PIN, err, errlen);
	if (rc == 0)
		rc = knob_bool(envp, "WORKER_DISABLE_PIN_CORES", &c->worker_net.disable_pin_cores, c,
			       PS_F_WORKER_DISABLE_PIN, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "NETWORK_PS_CORE_NUMBER", 1, PS_MAX_CORES, &c->ps_net.core_number,
			       c, PS_F_PS_CORES, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "NETWORK_WORKER_CORE_NUMBER", 1, PS_MAX_CORES,
			       &c->worker_net.core_number, c, PS_F_WORKER_CORES, err, errlen);
	if (rc == 0)
		rc = knob_bool(envp, "WHARF_TENSOR_FUSE", &c->tensor_fuse, c, PS_F_TENSOR_FUSE, err,
			       errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_GEO_K", 1, 100000, &c->geo_k, c, PS_F_GEO_K, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_GEO_LOG_MAX", 65536, 1u << 30, &c->geo_log_max, c,
			       PS_F_GEO_LOG_MAX, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_MTU", 576, 9000, &c->mtu, c, PS_F_MTU, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_WAIT_TIMEOUT_S", 1, 86400, &c->wait_timeout_s, c,
			       PS_F_WAIT_TIMEOUT, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_REQUEST_TIMEOUT_S", 0, 86400, &c->request_timeout_s, c,
			       PS_F_REQUEST_TIMEOUT, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_REPLY_BUFFERS", 1, 65536, &c->reply_buffers, c,
			       PS_F_REPLY_BUFFERS, err, errlen);
	if (rc == 0)
		rc = knob_uint(envp, "WHARF_REQUEST_SLOTS", 1, 4096, &c->request_slots, c,
			       PS_F_REQUEST_SLOTS, err, errlen);
	if (rc == 0)
		rc = knob_durability(envp, c, err, errlen);
	if (rc == 0)
		rc = knob_data_plane(envp, c, err, errlen);
	if (rc == 0)
		rc = knob_enums(envp, c, err, errlen);
	if (rc == 0 && (v = ps_env_get(envp, "WHARF_EAL_ARGS")) != NULL) {
		rc = ps_parse_eal_args(v, c->eal_args, "WHARF_EAL_ARGS", err, errlen);
		ps_mark(c, PS_F_EAL_ARGS);
	}
	if (rc == 0)
		rc = knob_lower_layers(envp, err, errlen);
	/* Applied as each log type registers, before main (dpdk_net/dn_log.h); refused here. */
	if (rc == 0 && (v = ps_env_get(envp, "WHARF_LOG_LEVEL")) != NULL)
		rc = dn_log_check_levels(v, "WHARF_LOG_LEVEL", err, errlen);
	if (rc == 0)
		memcpy(out, c, sizeof(*out));
	free(c);
	return rc;
}
