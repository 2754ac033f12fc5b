/*
 * ps_config.c — the value parsers every configuration source shares (endpoints, booleans,
 * numbers, enum names), plus init/merge of struct ps_cluster.
 *
 * Call chain: ps_flags_parse / ps_cfg_file_parse / ps_cfg_env_* -> ps_parse_* here; and
 * ps_config_load -> ps_cluster_init, ps_cluster_merge. Start-up only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ps_core/ps_config_pvt.h"

int ps_errf_rc(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int ps_read_text(const char *path, size_t max, char **out, char *err, size_t errlen)
{
	FILE *f;
	char *buf;
	size_t n;
	int rc;

	f = fopen(path, "rb");
	if (f == NULL) {
		rc = -errno;
		return ps_errf_rc(err, errlen, rc, "%s: cannot open: %s", path, strerror(-rc));
	}
	buf = malloc(max + 1);
	if (buf == NULL) {
		fclose(f);
		return ps_errf_rc(err, errlen, -ENOMEM, "%s: out of memory", path);
	}
	n = fread(buf, 1, max + 1, f);
	rc = ferror(f) ? -EIO : 0;
	fclose(f);
	if (rc == 0 && n > max)
		rc = ps_errf_rc(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
	else if (rc != 0)
		ps_errf_rc(err, errlen, rc, "%s: read error", path);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	if (strlen(buf) != n) {
		free(buf);
		return ps_errf_rc(err, errlen, -EINVAL, "%s: contains a NUL byte; expected text", path);
	}
	*out = buf;
	return 0;
}

const char *ps_env_get(char *const envp[], const char *name)
{
	size_t len = strlen(name);

	if (envp == NULL)
		return NULL;
	for (; *envp != NULL; envp++)
		if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

/*
 * Host names and IPv4 literals: dot-separated labels of letters, digits, '-' and '_', none
 * empty or starting or ending with '-' (one trailing dot allowed: an absolute name). Text of
 * digits and dots only must be a dotted quad: getaddrinfo would read "10.1" as 10.0.0.1.
 */
static int host_ok(const char *s, size_t len)
{
	char quad[16];
	struct in_addr a;
	size_t i, digits = 0, label = 0;

	if (len == 0 || len >= PS_HOST_LEN)
		return 0;
	for (i = 0; i < len; i++) {
		char ch = s[i];
		if (ch == '.') {
			if (label == 0 || s[i - 1] == '-')
				return 0;
			label = 0;
			digits++;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '_') || (ch == '-' && label == 0))
			return 0;
		label++;
		digits += ch >= '0' && ch <= '9';
	}
	if (s[len - 1] == '-')
		return 0;
	if (digits < len)
		return 1;
	if (len >= sizeof(quad))
		return 0;
	memcpy(quad, s, len);
	quad[len] = '\0';
	return inet_pton(AF_INET, quad, &a) == 1;
}

int ps_parse_endpoint(const char *s, size_t len, bool port_optional, struct ps_endpoint *out,
		      const char *what, char *err, size_t errlen)
{
	const char *colon = memchr(s, ':', len);
	size_t hlen = colon != NULL ? (size_t)(colon - s) : len;
	unsigned long port = 0;
	size_t i;

	if (colon == NULL && !port_optional)
		goto bad;
	if (!host_ok(s, hlen))
		goto bad;
	if (colon != NULL) {
		const char *p = colon + 1;
		size_t plen = len - hlen - 1;
		if (plen == 0 || plen > 5)
			goto bad;
		for (i = 0; i < plen; i++) {
			if (p[i] < '0' || p[i] > '9')
				goto bad;
			port = port * 10 + (unsigned long)(p[i] - '0');
		}
		if (port == 0 || port > 65535)
			goto bad;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->host, s, hlen);
	out->port = (uint16_t)port;
	return 0;
bad:
	return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.*s' is not an endpoint; expected host:port%s "
		       "(host: IPv4 or name, port 1..65535)", what, (int)(len > 200 ? 200 : len), s,
		       port_optional ? " or host" : "");
}

int ps_parse_endpoint_list(const char *s, struct ps_endpoint *out, unsigned max, unsigned *n,
			   const char *what, char *err, size_t errlen)
{
	unsigned count = 0;
	const char *p = s;
	int rc;

	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		char item[PS_PATH_LEN];

		while (len > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0)
			return ps_errf_rc(err, errlen, -EINVAL, "%s: empty entry %u in '%s'; expected "
				       "host:port[,host:port...]", what, count, s);
		if (count == max)
			return ps_errf_rc(err, errlen, -E2BIG, "%s: more than %u endpoints", what, max);
		snprintf(item, sizeof(item), "%s[%u]", what, count);
		rc = ps_parse_endpoint(p, len, false, &out[count], item, err, errlen);
		if (rc != 0)
			return rc;
		count++;
		if (end == NULL)
			break;
		p = end + 1;
	}
	*n = count;
	return 0;
}

int ps_parse_bool(const char *s, bool *out, const char *what, char *err, size_t errlen)
{
	if (strcmp(s, "True") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
		*out = true;
	else if (strcmp(s, "False") == 0 || strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
		*out = false;
	else
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' is not a boolean; expected "
			       "True/False/true/false/1/0", what, s);
	return 0;
}

int ps_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out, const char *what,
		  char *err, size_t errlen)
{
	unsigned long long v = 0;
	const char *p = s;

	if (*p == '\0')
		goto bad;
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			goto bad;
		v = v * 10 + (unsigned)(*p - '0');
		if (v > hi)
			goto bad;
	}
	if (v < lo)
		goto bad;
	*out = (unsigned)v;
	return 0;
bad:
	return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected an integer in %u..%u", what, s,
		       lo, hi);
}

int ps_parse_role(const char *s, enum ps_role *out, const char *what, char *err, size_t errlen)
{
	if (strcmp(s, "ps") == 0)
		*out = PS_ROLE_PS;
	else if (strcmp(s, "worker") == 0)
		*out = PS_ROLE_WORKER;
	else
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected ps or worker", what, s);
	return 0;
}

int ps_parse_protocol(const char *s, enum ps_protocol *out, const char *what, char *err,
		      size_t errlen)
{
	if (strcmp(s, "dpdk") == 0)
		*out = PS_PROTO_DPDK;
	else if (strcmp(s, "kernel") == 0)
		*out = PS_PROTO_KERNEL;
	else
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected dpdk or kernel", what, s);
	return 0;
}

int ps_parse_job_mode(const char *s, enum ps_job_mode *out, const char *what, char *err, size_t errlen)
{
	if (strcmp(s, "sync") == 0)
		*out = PS_JOB_SYNC;
	else if (strcmp(s, "async") == 0)
		*out = PS_JOB_ASYNC;
	else if (strcmp(s, "geo") == 0)
		*out = PS_JOB_GEO;
	else
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected sync, async or geo", what, s);
	return 0;
}

int ps_parse_policy(const char *s, enum ps_policy *out, const char *what, char *err,
		    size_t errlen)
{
	if (strcmp(s, "fail") == 0)
		*out = PS_POLICY_FAIL;
	else if (strcmp(s, "continue") == 0)
		*out = PS_POLICY_CONTINUE;
	else
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected fail or continue", what, s);
	return 0;
}

int ps_endpoint_ipv4(const struct ps_endpoint *ep, uint32_t *be_addr)
{
	struct in_addr a;

	if (ep->resolved) {
		*be_addr = htonl(ep->ip);
		return 0;
	}
	if (inet_pton(AF_INET, ep->host, &a) != 1)
		return -EINVAL;
	*be_addr = a.s_addr;
	return 0;
}

int ps_parse_ifname(const char *s, char *out, const char *what, char *err, size_t errlen)
{
	size_t len = strlen(s);

	if (len == 0 || len >= PS_IFNAME_LEN || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
	    strpbrk(s, "/: \t\r\n") != NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' is not an interface name; expected "
			       "1..%u bytes without '/', ':' or spaces (e.g. net1)", what, s,
			       PS_IFNAME_LEN - 1);
	memcpy(out, s, len + 1);
	return 0;
}

int ps_parse_prefix(const char *s, unsigned *out, const char *what, char *err, size_t errlen)
{
	return ps_parse_uint(s, 1, 32, out, what, err, errlen);
}

int ps_parse_gateway(const char *s, struct ps_endpoint *out, const char *what, char *err,
		     size_t errlen)
{
	char w[PS_PATH_LEN];

	if (strcmp(s, "none") == 0) {
		memset(out, 0, sizeof(*out));
		return 0;
	}
	if (strchr(s, ':') != NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: '%.64s' expected an IPv4 address or host "
			       "name without a port, or none", what, s);
	snprintf(w, sizeof(w), "%s (a gateway)", what);
	return ps_parse_endpoint(s, strlen(s), true, out, w, err, errlen);
}

void ps_endpoint_format(const struct ps_endpoint *ep, char *buf, size_t len)
{
	if (ep->port != 0)
		snprintf(buf, len, "%s:%u", ep->host, ep->port);
	else
		snprintf(buf, len, "%s", ep->host);
}

bool ps_endpoint_equal(const struct ps_endpoint *a, const struct ps_endpoint *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

const char *ps_role_name(enum ps_role r)
{
	return r == PS_ROLE_PS ? "ps" : r == PS_ROLE_WORKER ? "worker" : "unset";
}

const char *ps_protocol_name(enum ps_protocol p)
{
	return p == PS_PROTO_KERNEL ? "kernel" : "dpdk";
}

const char *ps_job_mode_name(enum ps_job_mode m)
{
	return m == PS_JOB_ASYNC ? "async" : m == PS_JOB_GEO ? "geo" : "sync";
}

const char *ps_policy_name(enum ps_policy p)
{
	return p == PS_POLICY_CONTINUE ? "continue" : "fail";
}

const char *ps_source_name(enum ps_source s)
{
	static const char *const names[PS_SRC_COUNT] = {
		"default", "config file", "environment", "Paddle environment", "TF_CONFIG", "flags",
	};

	return (unsigned)s < PS_SRC_COUNT ? names[s] : "?";
}

void ps_cluster_init(struct ps_cluster *c)
{
	memset(c, 0, sizeof(*c));
	c->protocol = PS_PROTO_DPDK;
	c->fuse_max_bytes = PS_DEF_FUSE_MAX_BYTES;
	c->fuse_max_msgs = PS_DEF_FUSE_MAX_MSGS;
	c->fuse_flush_us = PS_DEF_FUSE_FLUSH_US;
	c->mode = PS_JOB_SYNC;
	c->geo_k = PS_DEF_GEO_K;
	c->geo_log_max = PS_DEF_GEO_LOG_MAX;
	c->wait_timeout_s = PS_DEF_WAIT_TIMEOUT_S;
	c->retry_interval_s = PS_DEF_RETRY_INTERVAL_S;
	c->request_timeout_s = PS_DEF_REQUEST_TIMEOUT_S;
	c->reply_buffers = PS_DEF_REPLY_BUFFERS;
	c->request_slots = PS_DEF_REQUEST_SLOTS;
	c->ckpt_interval_s = PS_DEF_CKPT_INTERVAL_S;
	c->mtu = PS_DEF_MTU;
	c->wal_max_mb = PS_DEF_WAL_MAX_MB;
	c->wal_sync_ms = PS_DEF_WAL_SYNC_MS;
	c->barrier_timeout_s = PS_DEF_BARRIER_TIMEOUT_S;
	/* DeepRec: "not pinned by default", polling off by default. */
	c->ps_net.disable_pin_cores = true;
	c->worker_net.disable_pin_cores = true;
}

static void merge_lists(struct ps_cluster *d, const struct ps_cluster *s)
{
	if (ps_has(s, PS_F_PS)) {
		d->n_ps = s->n_ps;
		memcpy(d->ps, s->ps, s->n_ps * sizeof(s->ps[0]));
	}
	if (ps_has(s, PS_F_WORKERS)) {
		d->n_worker_addrs = s->n_worker_addrs;
		memcpy(d->worker, s->worker, s->n_worker_addrs * sizeof(s->worker[0]));
	}
	if (ps_has(s, PS_F_DATA_ADDR)) {
		d->self_data = s->self_data;
		d->have_self_data = true;
	}
	if (ps_has(s, PS_F_EPMAP))
		memcpy(d->endpoint_map, s->endpoint_map, sizeof(d->endpoint_map));
	if (ps_has(s, PS_F_WAL_DIR))
		memcpy(d->wal_dir, s->wal_dir, sizeof(d->wal_dir));
	if (ps_has(s, PS_F_DATA_IFACE))
		memcpy(d->data_iface, s->data_iface, sizeof(d->data_iface));
	if (ps_has(s, PS_F_DATA_GATEWAY))
		d->data_gateway = s->data_gateway;
	if (ps_has(s, PS_F_TASK_INDEX)) {
		d->task_by_ep = s->task_by_ep;
		d->task_ep = s->task_ep;
	}
	if (ps_has(s, PS_F_CONFIG_PATH))
		memcpy(d->config_path, s->config_path, sizeof(d->config_path));
	if (ps_has(s, PS_F_CTL_TOKEN_FILE))
		memcpy(d->ctl_token_file, s->ctl_token_file, sizeof(d->ctl_token_file));
	if (ps_has(s, PS_F_EAL_ARGS))
		memcpy(d->eal_args, s->eal_args, sizeof(d->eal_args));
}

void ps_cluster_merge(struct ps_cluster *d, const struct ps_cluster *s, enum ps_source kind)
{
	unsigned f;

/* One line per scalar field keeps the field-to-bit pairing visible. */
#define PS_COPY(bit, field) do { if (ps_has(s, bit)) d->field = s->field; } while (0)
	PS_COPY(PS_F_ROLE, role);
	PS_COPY(PS_F_TASK_INDEX, task_index);
	PS_COPY(PS_F_NUM_WORKERS, n_workers);
	PS_COPY(PS_F_PROTOCOL, protocol);
	PS_COPY(PS_F_TENSOR_FUSE, tensor_fuse);
	PS_COPY(PS_F_FUSE_MAX_BYTES, fuse_max_bytes);
	PS_COPY(PS_F_FUSE_MAX_MSGS, fuse_max_msgs);
	PS_COPY(PS_F_FUSE_FLUSH_US, fuse_flush_us);
	PS_COPY(PS_F_MODE, mode);
	PS_COPY(PS_F_GEO_K, geo_k);
	PS_COPY(PS_F_GEO_LOG_MAX, geo_log_max);
	PS_COPY(PS_F_WAIT_TIMEOUT, wait_timeout_s);
	PS_COPY(PS_F_RETRY_INTERVAL, retry_interval_s);
	PS_COPY(PS_F_REQUEST_TIMEOUT, request_timeout_s);
	PS_COPY(PS_F_REPLY_BUFFERS, reply_buffers);
	PS_COPY(PS_F_REQUEST_SLOTS, request_slots);
	PS_COPY(PS_F_PS_CORES, ps_net.core_number);
	PS_COPY(PS_F_WORKER_CORES, worker_net.core_number);
	PS_COPY(PS_F_PS_POLLING, ps_net.enable_polling);
	PS_COPY(PS_F_WORKER_POLLING, worker_net.enable_polling);
	PS_COPY(PS_F_PS_DISABLE_PIN, ps_net.disable_pin_cores);
	PS_COPY(PS_F_WORKER_DISABLE_PIN, worker_net.disable_pin_cores);
	PS_COPY(PS_F_CKPT_INTERVAL, ckpt_interval_s);
	PS_COPY(PS_F_MTU, mtu);
	PS_COPY(PS_F_DATA_PREFIX, data_prefix);
	PS_COPY(PS_F_WAL_MAX_MB, wal_max_mb);
	PS_COPY(PS_F_WAL_SYNC_MS, wal_sync_ms);
	PS_COPY(PS_F_BARRIER_TIMEOUT, barrier_timeout_s);
	PS_COPY(PS_F_BARRIER_POLICY, barrier_policy);
	PS_COPY(PS_F_PS_LOST_STATE, ps_lost_state);
#undef PS_COPY
	merge_lists(d, s);
	for (f = 0; f < PS_F_COUNT; f++)
		if (ps_has(s, f))
			d->origin[f] = (uint8_t)kind;
	d->set |= s->set;
}

const char *ps_field_source(const struct ps_cluster *c, enum ps_field f, char *buf, size_t len)
{
	static const struct { enum ps_field f; const char *flag, *key, *env, *tf, *paddle; } t[] = {
		{ PS_F_PS, "--ps", "cluster.ps", NULL, "TF_CONFIG cluster.ps",
		  "PADDLE_PSERVERS_IP_PORT_LIST" },
		{ PS_F_WORKERS, "--workers", "cluster.worker", NULL, "TF_CONFIG cluster.worker",
		  "PADDLE_TRAINER_ENDPOINTS" },
		{ PS_F_TASK_INDEX, "--task-index", "task.index", NULL, "TF_CONFIG task.index",
		  "POD_IP:PADDLE_PORT" },
		{ PS_F_DATA_ADDR, "--data-addr", "data_addr", NULL, NULL, NULL },
		{ PS_F_DATA_IFACE, "--data-iface", "data_iface", "WHARF_DATA_IFACE", NULL, NULL },
		{ PS_F_DATA_PREFIX, "--data-prefix", "data_prefix", "WHARF_DATA_PREFIX", NULL, NULL },
		{ PS_F_DATA_GATEWAY, "--data-gateway", "data_gateway", "WHARF_DATA_GATEWAY", NULL,
		  NULL },
	};
	enum ps_source src = (enum ps_source)c->origin[f];
	const char *name = NULL;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (t[i].f != f)
			continue;
		name = src == PS_SRC_FLAGS ? t[i].flag : src == PS_SRC_ENV_KNOBS ? t[i].env :
		       src == PS_SRC_TF_CONFIG ? t[i].tf : src == PS_SRC_PADDLE ? t[i].paddle : NULL;
		if (src == PS_SRC_FILE)
			snprintf(buf, len, "%s: %s", c->config_path[0] ? c->config_path : "config file",
				 t[i].key);
		else
			snprintf(buf, len, "%s", name != NULL ? name : ps_source_name(src));
		return buf;
	}
	snprintf(buf, len, "%s", ps_source_name(src));
	return buf;
}

/* Is path a directory?  DeepRec's TF_SEASTAR_ENDPOINT_MAP_PATH names one. */
int ps_is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ps_parse_eal_args(const char *s, char *out, const char *what, char *err, size_t errlen)
{
	size_t n = 0, words = 0;
	const char *p = s;

	while (*p != '\0') {
		size_t len;
		p += strspn(p, " \t\n");
		len = strcspn(p, " \t\n");
		if (len == 0)
			break;
		if (++words > PS_EAL_MAX_ARGS || n + len + (n > 0) >= PS_EAL_ARGS_LEN)
			return ps_errf_rc(err, errlen, -E2BIG, "%s: more than %u words or %u bytes of EAL "
				       "arguments", what, PS_EAL_MAX_ARGS, PS_EAL_ARGS_LEN - 1);
		if (n > 0)
			out[n++] = ' ';
		memcpy(out + n, p, len);
		n += len;
		p += len;
	}
	out[n] = '\0';
	return 0;
}

void ps_eal_pick(const struct ps_cluster *c, int cmd_argc, char **cmd_argv, struct ps_eal *e)
{
	char *save = NULL, *tok;

	if (cmd_argc > 1 || c->eal_args[0] == '\0') {
		e->argc = cmd_argc;
		e->argv = cmd_argv;
		return;
	}
	/* Checked when it was read (ps_parse_eal_args): at most PS_EAL_MAX_ARGS words. */
	memcpy(e->buf, c->eal_args, sizeof(e->buf));
	e->v[0] = cmd_argv[0];
	e->argc = 1;
	for (tok = strtok_r(e->buf, " ", &save); tok != NULL && e->argc <= PS_EAL_MAX_ARGS;
	     tok = strtok_r(NULL, " ", &save))
		e->v[e->argc++] = tok;
	e->v[e->argc] = NULL;
	e->argv = e->v;
}

void ps_split_eal(int *argc, char ***argv, int *eal_argc)
{
	char **v = *argv;
	int n = *argc, dd = -1;

	for (int i = 1; i < n && dd < 0; i++)
		if (strcmp(v[i], "--") == 0)
			dd = i;
	*eal_argc = dd < 0 ? 1 : dd;
	if (dd < 0)
		return;
	/* getopt sees the program name followed by what came after "--". */
	v[dd] = v[0];
	*argc = n - dd;
	*argv = v + dd;
}
