/*
 * ps_cfg_file.c — JSON configuration: the --config cluster file, and the "cluster"/"task"
 * objects it shares with TF_CONFIG (ps_cfg_env.c calls ps_json_cluster_task).
 *
 * Call chain: ps_config_load -> ps_cfg_file_load -> ps_cfg_file_parse -> jansson, then the
 * per-section readers below. Unknown keys are refused so a typo never silently falls back to
 * a default. Syntax errors carry file:line:column from jansson; value errors carry the key path.
 *
 * File schema (every key optional; see ps_config.h for meanings and defaults):
 *   { "cluster": {"ps": ["ip:port",..], "worker": [..], "chief": ["ip:port"]},
 *     "task": {"type": "ps"|"worker"|"chief", "index": 0},
 *     "num_workers": 2, "data_addr": "host[:port]", "endpoint_map": "path",
 *     "data_iface": "net1", "data_prefix": 24, "data_gateway": "host"|"none",
 *     "protocol": "dpdk"|"kernel", "tensor_fuse": false,
 *     "fuse": {"max_bytes": 8192, "max_msgs": 64, "flush_us": 20},
 *     "mode": "sync"|"async"|"geo", "geo_k": 10, "geo_log_max": 1048576,
 *     "wait_timeout_s": 60, "retry_interval_s": 3,
 *     "barrier_timeout_s": 600, "barrier_policy": "fail"|"continue",
 *     "ps_lost_state": "fail"|"continue", "mtu": 1500,
 *     "request_timeout_s": 30, "request_slots": 256, "reply_buffers": 512,
 *     "net": {"ps": {"core_number": 8, "enable_polling": false, "disable_pin_cores": true},
 *             "worker": {...}},
 *     "durability": {"wal_dir": "path"|"none", "ckpt_interval_s": 300, "wal_max_mb": 1024,
 *                    "wal_sync_ms": 1000},
 *     "ctl_token_file": "path",
 *     "eal_args": "-l 0 --vdev=..." | ["-l", "0", "--vdev=..."] }
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ps_core/ps_cfg_json.h"
#include "ps_core/ps_config_pvt.h"

#define PS_CFG_MAX_BYTES (4u << 20)

static int json_endpoints(json_t *arr, const char *src, const char *key, struct ps_endpoint *out,
			  unsigned max, unsigned *n, char *err, size_t errlen)
{
	char what[PS_PATH_LEN + 64];
	size_t i;
	json_t *v;
	int rc;

	if (!json_is_array(arr))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: %s: expected an array of \"host:port\" strings",
			       src, key);
	if (json_array_size(arr) > max)
		return ps_errf_rc(err, errlen, -E2BIG, "%s: %s: %zu entries; at most %u", src, key,
			       json_array_size(arr), max);
	json_array_foreach(arr, i, v) {
		snprintf(what, sizeof(what), "%s: %s[%zu]", src, key, i);
		if (!json_is_string(v))
			return ps_errf_rc(err, errlen, -EINVAL, "%s: expected a \"host:port\" string", what);
		rc = ps_parse_endpoint(json_string_value(v), json_string_length(v), false, &out[i],
				       what, err, errlen);
		if (rc != 0)
			return rc;
	}
	*n = (unsigned)json_array_size(arr);
	return 0;
}

/* Keys of obj must all be in the NULL-terminated allowed list. */
int ps_json_known_keys(json_t *obj, const char *const *allowed, const char *src, const char *path,
		       char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach(obj, key, v) {
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(allowed[i], key) == 0)
				break;
		if (allowed[i] == NULL)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: unknown key '%s%s%s'; see ps_config.h "
				       "for the schema", src, path, path[0] ? "." : "", key);
	}
	return 0;
}

static int cluster_section(json_t *cl, const char *src, struct ps_cluster *out, unsigned *chief,
			   char *err, size_t errlen)
{
	static const char *const keys[] = { "ps", "worker", "chief", NULL };
	json_t *ps = json_object_get(cl, "ps"), *wk = json_object_get(cl, "worker");
	json_t *ch = json_object_get(cl, "chief");
	unsigned nw = 0, nc = 0;
	int rc;

	if (!json_is_object(cl))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: cluster: expected an object", src);
	rc = ps_json_known_keys(cl, keys, src, "cluster", err, errlen);
	if (rc == 0 && ps != NULL) {
		rc = json_endpoints(ps, src, "cluster.ps", out->ps, PS_MAX_NODES, &out->n_ps, err, errlen);
		ps_mark(out, PS_F_PS);
	}
	/* TensorFlow's chief is a worker too: it becomes worker 0, the others shift by one. */
	if (rc == 0 && ch != NULL) {
		rc = json_endpoints(ch, src, "cluster.chief", out->worker, 1, &nc, err, errlen);
		ps_mark(out, PS_F_WORKERS);
	}
	if (rc == 0 && wk != NULL) {
		rc = json_endpoints(wk, src, "cluster.worker", out->worker + nc, PS_MAX_NODES - 1, &nw,
				    err, errlen);
		ps_mark(out, PS_F_WORKERS);
	}
	out->n_worker_addrs = nc + nw;
	*chief = nc;
	return rc;
}

static int task_section(json_t *t, const char *src, unsigned chief, struct ps_cluster *out,
			char *err, size_t errlen)
{
	static const char *const keys[] = { "type", "index", NULL };
	json_t *type = json_object_get(t, "type"), *idx = json_object_get(t, "index");
	const char *ts;
	json_int_t i = 0;
	int rc;

	if (!json_is_object(t))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: task: expected an object", src);
	rc = ps_json_known_keys(t, keys, src, "task", err, errlen);
	if (rc != 0)
		return rc;
	if (idx != NULL) {
		if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
		    json_integer_value(idx) >= PS_MAX_NODES)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: task.index: expected an integer in 0..%u",
				       src, PS_MAX_NODES - 1);
		i = json_integer_value(idx);
		ps_mark(out, PS_F_TASK_INDEX);
	}
	if (type == NULL)
		goto done;
	ts = json_string_value(type);
	if (ts == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: task.type: expected \"ps\", \"worker\" or "
			       "\"chief\"", src);
	if (strcmp(ts, "chief") == 0) {
		if (i != 0)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: task.index: chief has index 0 only", src);
		out->role = PS_ROLE_WORKER;
	} else {
		char what[PS_PATH_LEN + 16];
		snprintf(what, sizeof(what), "%s: task.type", src);
		rc = ps_parse_role(ts, &out->role, what, err, errlen);
		if (rc != 0)
			return rc;
		if (out->role == PS_ROLE_WORKER)
			i += chief;
	}
	ps_mark(out, PS_F_ROLE);
done:
	out->task_index = (unsigned)i;
	return 0;
}

int ps_json_cluster_task(json_t *root, const char *src, struct ps_cluster *out, char *err,
			 size_t errlen)
{
	json_t *cl = json_object_get(root, "cluster"), *t = json_object_get(root, "task");
	unsigned chief = 0;
	int rc = 0;

	if (cl != NULL)
		rc = cluster_section(cl, src, out, &chief, err, errlen);
	if (rc == 0 && t != NULL)
		rc = task_section(t, src, chief, out, err, errlen);
	return rc;
}

static int get_uint(json_t *o, const char *key, const char *src, const char *path, unsigned lo,
		    unsigned hi, unsigned *dst, struct ps_cluster *out, enum ps_field f, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: %s%s: expected an integer in %u..%u", src, path,
			       key, lo, hi);
	*dst = (unsigned)json_integer_value(v);
	ps_mark(out, f);
	return 0;
}

static int get_bool(json_t *o, const char *key, const char *src, const char *path, bool *dst,
		    struct ps_cluster *out, enum ps_field f, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);
	char what[PS_PATH_LEN + 64];

	if (v == NULL)
		return 0;
	snprintf(what, sizeof(what), "%s: %s%s", src, path, key);
	if (json_is_boolean(v))
		*dst = json_is_true(v);
	else if (!json_is_string(v) || ps_parse_bool(json_string_value(v), dst, what, err, errlen) != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: expected true/false (or \"True\"/\"False\"/"
			       "\"1\"/\"0\")", what);
	ps_mark(out, f);
	return 0;
}

/* A string-valued key handed to one of the ps_parse_* enum parsers. */
static int get_str(json_t *o, const char *key, const char *src, const char **dst, char *err,
		   size_t errlen)
{
	json_t *v = json_object_get(o, key);

	*dst = NULL;
	if (v == NULL)
		return 0;
	if (!json_is_string(v))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: %s: expected a string", src, key);
	*dst = json_string_value(v);
	return 0;
}

static int net_section(json_t *net, const char *src, struct ps_cluster *out, char *err,
		       size_t errlen)
{
	static const char *const keys[] = { "ps", "worker", NULL };
	static const char *const rk[] = { "core_number", "enable_polling", "disable_pin_cores", NULL };
	json_t *ps = json_object_get(net, "ps"), *wk = json_object_get(net, "worker");
	int rc;

	if (!json_is_object(net))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: net: expected an object", src);
	rc = ps_json_known_keys(net, keys, src, "net", err, errlen);
	if (rc == 0 && ps != NULL) {
		rc = json_is_object(ps) ? ps_json_known_keys(ps, rk, src, "net.ps", err, errlen)
			: ps_errf_rc(err, errlen, -EINVAL, "%s: net.ps: expected an object", src);
		if (rc == 0)
			rc = get_uint(ps, "core_number", src, "net.ps.", 1, PS_MAX_CORES,
				      &out->ps_net.core_number, out, PS_F_PS_CORES, err, errlen);
		if (rc == 0)
			rc = get_bool(ps, "enable_polling", src, "net.ps.", &out->ps_net.enable_polling,
				      out, PS_F_PS_POLLING, err, errlen);
		if (rc == 0)
			rc = get_bool(ps, "disable_pin_cores", src, "net.ps.",
				      &out->ps_net.disable_pin_cores, out, PS_F_PS_DISABLE_PIN, err, errlen);
	}
	if (rc == 0 && wk != NULL) {
		rc = json_is_object(wk) ? ps_json_known_keys(wk, rk, src, "net.worker", err, errlen)
			: ps_errf_rc(err, errlen, -EINVAL, "%s: net.worker: expected an object", src);
		if (rc == 0)
			rc = get_uint(wk, "core_number", src, "net.worker.", 1, PS_MAX_CORES,
				      &out->worker_net.core_number, out, PS_F_WORKER_CORES, err, errlen);
		if (rc == 0)
			rc = get_bool(wk, "enable_polling", src, "net.worker.",
				      &out->worker_net.enable_polling, out, PS_F_WORKER_POLLING, err, errlen);
		if (rc == 0)
			rc = get_bool(wk, "disable_pin_cores", src, "net.worker.",
				      &out->worker_net.disable_pin_cores, out, PS_F_WORKER_DISABLE_PIN, err,
				      errlen);
	}
	return rc;
}

static int fuse_section(json_t *fz, const char *src, struct ps_cluster *out, char *err,
			size_t errlen)
{
	static const char *const keys[] = { "max_bytes", "max_msgs", "flush_us", NULL };
	int rc;

	if (!json_is_object(fz))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: fuse: expected an object", src);
	rc = ps_json_known_keys(fz, keys, src, "fuse", err, errlen);
	if (rc == 0)
		rc = get_uint(fz, "max_bytes", src, "fuse.", 256, 1u << 20, &out->fuse_max_bytes, out,
			      PS_F_FUSE_MAX_BYTES, err, errlen);
	if (rc == 0)
		rc = get_uint(fz, "max_msgs", src, "fuse.", 1, 4096, &out->fuse_max_msgs, out,
			      PS_F_FUSE_MAX_MSGS, err, errlen);
	if (rc == 0)
		rc = get_uint(fz, "flush_us", src, "fuse.", 0, 100000, &out->fuse_flush_us, out,
			      PS_F_FUSE_FLUSH_US, err, errlen);
	return rc;
}

static int durability_section(json_t *d, const char *src, struct ps_cluster *out, char *err,
			      size_t errlen)
{
	static const char *const keys[] = { "wal_dir", "ckpt_interval_s", "wal_max_mb",
					    "wal_sync_ms", NULL };
	const char *s = NULL;
	int rc;

	if (!json_is_object(d))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: durability: expected an object", src);
	rc = ps_json_known_keys(d, keys, src, "durability", err, errlen);
	if (rc == 0)
		rc = get_str(d, "wal_dir", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		if (s[0] == '\0' || strlen(s) >= PS_PATH_LEN)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: durability.wal_dir: expected a path "
				       "of 1..%u bytes or \"none\"", src, PS_PATH_LEN - 1);
		snprintf(out->wal_dir, sizeof(out->wal_dir), "%s", s);
		ps_mark(out, PS_F_WAL_DIR);
	}
	if (rc == 0)
		rc = get_uint(d, "ckpt_interval_s", src, "durability.", 0, 86400, &out->ckpt_interval_s,
			      out, PS_F_CKPT_INTERVAL, err, errlen);
	if (rc == 0)
		rc = get_uint(d, "wal_max_mb", src, "durability.", 1, 1u << 20, &out->wal_max_mb, out,
			      PS_F_WAL_MAX_MB, err, errlen);
	if (rc == 0)
		rc = get_uint(d, "wal_sync_ms", src, "durability.", 0, 60000, &out->wal_sync_ms, out,
			      PS_F_WAL_SYNC_MS, err, errlen);
	return rc;
}

static int strings_section(json_t *root, const char *src, struct ps_cluster *out, char *err,
			   size_t errlen)
{
	char what[PS_PATH_LEN + 32];
	const char *s;
	int rc;

	rc = get_str(root, "protocol", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: protocol", src);
		rc = ps_parse_protocol(s, &out->protocol, what, err, errlen);
		ps_mark(out, PS_F_PROTOCOL);
	}
	if (rc == 0)
		rc = get_str(root, "mode", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: mode", src);
		rc = ps_parse_job_mode(s, &out->mode, what, err, errlen);
		ps_mark(out, PS_F_MODE);
	}
	if (rc == 0)
		rc = get_str(root, "barrier_policy", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: barrier_policy", src);
		rc = ps_parse_policy(s, &out->barrier_policy, what, err, errlen);
		ps_mark(out, PS_F_BARRIER_POLICY);
	}
	if (rc == 0)
		rc = get_str(root, "ps_lost_state", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: ps_lost_state", src);
		rc = ps_parse_policy(s, &out->ps_lost_state, what, err, errlen);
		ps_mark(out, PS_F_PS_LOST_STATE);
	}
	if (rc == 0)
		rc = get_str(root, "data_addr", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: data_addr", src);
		rc = ps_parse_endpoint(s, strlen(s), true, &out->self_data, what, err, errlen);
		ps_mark(out, PS_F_DATA_ADDR);
	}
	if (rc == 0)
		rc = get_str(root, "data_iface", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: data_iface", src);
		rc = ps_parse_ifname(s, out->data_iface, what, err, errlen);
		ps_mark(out, PS_F_DATA_IFACE);
	}
	if (rc == 0)
		rc = get_str(root, "data_gateway", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		snprintf(what, sizeof(what), "%s: data_gateway", src);
		rc = ps_parse_gateway(s, &out->data_gateway, what, err, errlen);
		ps_mark(out, PS_F_DATA_GATEWAY);
	}
	if (rc == 0)
		rc = get_str(root, "endpoint_map", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		if (strlen(s) == 0 || strlen(s) >= PS_PATH_LEN)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: endpoint_map: expected a path of 1..%u "
				       "bytes", src, PS_PATH_LEN - 1);
		snprintf(out->endpoint_map, sizeof(out->endpoint_map), "%s", s);
		ps_mark(out, PS_F_EPMAP);
	}
	if (rc == 0)
		rc = get_str(root, "ctl_token_file", src, &s, err, errlen);
	if (rc == 0 && s != NULL) {
		if (strlen(s) == 0 || strlen(s) >= PS_PATH_LEN)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: ctl_token_file: expected a path of "
				       "1..%u bytes", src, PS_PATH_LEN - 1);
		snprintf(out->ctl_token_file, sizeof(out->ctl_token_file), "%s", s);
		ps_mark(out, PS_F_CTL_TOKEN_FILE);
	}
	return rc;
}

/* "eal_args": a string of words, or an array of words (each a string without blanks). */
static int eal_args(json_t *v, const char *src, struct ps_cluster *out, char *err, size_t errlen)
{
	char what[PS_PATH_LEN + 32], *joined;
	size_t i, n = 0;
	json_t *w;
	int rc;

	snprintf(what, sizeof(what), "%s: eal_args", src);
	if (json_is_string(v)) {
		rc = ps_parse_eal_args(json_string_value(v), out->eal_args, what, err, errlen);
		goto out;
	}
	if (!json_is_array(v))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: expected a string or an array of strings",
			       what);
	joined = calloc(1, PS_EAL_ARGS_LEN);
	if (joined == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	rc = 0;
	json_array_foreach(v, i, w) {
		const char *s = json_string_value(w);
		size_t len = s != NULL ? strlen(s) : 0;
		if (s == NULL || len == 0 || strcspn(s, " \t\n") != len) {
			rc = ps_errf_rc(err, errlen, -EINVAL, "%s[%zu]: expected one EAL argument: a "
				     "non-empty string without blanks", what, i);
			break;
		}
		if (n + len + 1 >= PS_EAL_ARGS_LEN) {
			rc = ps_errf_rc(err, errlen, -E2BIG, "%s: more than %u bytes of EAL arguments",
				     what, PS_EAL_ARGS_LEN - 1);
			break;
		}
		if (n > 0)
			joined[n++] = ' ';
		memcpy(joined + n, s, len);
		n += len;
	}
	if (rc == 0)
		rc = ps_parse_eal_args(joined, out->eal_args, what, err, errlen);
	free(joined);
out:
	if (rc == 0)
		ps_mark(out, PS_F_EAL_ARGS);
	return rc;
}

static int file_root(json_t *root, const char *src, struct ps_cluster *out, char *err,
		     size_t errlen)
{
	static const char *const keys[] = {
		"cluster", "task", "num_workers", "data_addr", "endpoint_map", "protocol",
		"tensor_fuse", "fuse", "mode", "geo_k", "geo_log_max", "wait_timeout_s",
		"retry_interval_s", "net", "mtu", "durability", "data_iface", "data_prefix",
		"data_gateway", "ctl_token_file", "barrier_timeout_s", "barrier_policy",
		"ps_lost_state", "eal_args", "request_timeout_s", "reply_buffers",
		"request_slots", NULL,
	};
	json_t *v;
	int rc;

	if (!json_is_object(root))
		return ps_errf_rc(err, errlen, -EINVAL, "%s: expected a JSON object at the top", src);
	rc = ps_json_known_keys(root, keys, src, "", err, errlen);
	if (rc == 0)
		rc = ps_json_cluster_task(root, src, out, err, errlen);
	if (rc == 0)
		rc = strings_section(root, src, out, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "num_workers", src, "", 1, PS_MAX_NODES, &out->n_workers, out,
			      PS_F_NUM_WORKERS, err, errlen);
	if (rc == 0)
		rc = get_bool(root, "tensor_fuse", src, "", &out->tensor_fuse, out, PS_F_TENSOR_FUSE,
			      err, errlen);
	if (rc == 0)
		rc = get_uint(root, "geo_k", src, "", 1, 100000, &out->geo_k, out, PS_F_GEO_K, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "geo_log_max", src, "", 65536, 1u << 30, &out->geo_log_max, out,
			      PS_F_GEO_LOG_MAX, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "mtu", src, "", 576, 9000, &out->mtu, out, PS_F_MTU, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "data_prefix", src, "", 1, 32, &out->data_prefix, out,
			      PS_F_DATA_PREFIX, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "wait_timeout_s", src, "", 1, 86400, &out->wait_timeout_s, out,
			      PS_F_WAIT_TIMEOUT, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "retry_interval_s", src, "", 1, 3600, &out->retry_interval_s, out,
			      PS_F_RETRY_INTERVAL, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "barrier_timeout_s", src, "", 0, 86400, &out->barrier_timeout_s,
			      out, PS_F_BARRIER_TIMEOUT, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "request_timeout_s", src, "", 0, 86400, &out->request_timeout_s,
			      out, PS_F_REQUEST_TIMEOUT, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "reply_buffers", src, "", 1, 65536, &out->reply_buffers, out,
			      PS_F_REPLY_BUFFERS, err, errlen);
	if (rc == 0)
		rc = get_uint(root, "request_slots", src, "", 1, 4096, &out->request_slots, out,
			      PS_F_REQUEST_SLOTS, err, errlen);
	v = json_object_get(root, "fuse");
	if (rc == 0 && v != NULL)
		rc = fuse_section(v, src, out, err, errlen);
	v = json_object_get(root, "net");
	if (rc == 0 && v != NULL)
		rc = net_section(v, src, out, err, errlen);
	v = json_object_get(root, "durability");
	if (rc == 0 && v != NULL)
		rc = durability_section(v, src, out, err, errlen);
	v = json_object_get(root, "eal_args");
	if (rc == 0 && v != NULL)
		rc = eal_args(v, src, out, err, errlen);
	return rc;
}

int ps_cfg_file_parse(const char *text, const char *name, struct ps_cluster *out, char *err,
		      size_t errlen)
{
	struct ps_cluster *tmp;
	json_error_t je;
	json_t *root;
	int rc;

	root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s:%d:%d: JSON syntax error: %s", name, je.line,
			       je.column, je.text);
	/* Fill a scratch copy so a refused file changes nothing in *out. */
	tmp = malloc(sizeof(*tmp));
	if (tmp == NULL) {
		json_decref(root);
		return ps_errf_rc(err, errlen, -ENOMEM, "%s: out of memory", name);
	}
	memcpy(tmp, out, sizeof(*tmp));
	rc = file_root(root, name, tmp, err, errlen);
	json_decref(root);
	if (rc == 0) {
		snprintf(tmp->config_path, sizeof(tmp->config_path), "%s", name);
		memcpy(out, tmp, sizeof(*out));
	}
	free(tmp);
	return rc;
}

int ps_cfg_file_load(const char *path, struct ps_cluster *out, char *err, size_t errlen)
{
	char *text;
	int rc;

	rc = ps_read_text(path, PS_CFG_MAX_BYTES, &text, err, errlen);
	if (rc != 0)
		return rc;
	rc = ps_cfg_file_parse(text, path, out, err, errlen);
	free(text);
	return rc;
}
