/*
 * ps_cfg_flags.c — the app part of argv (after DPDK's "--") as the highest-precedence
 * configuration source, with getopt_long. An executable may add its own options; they are
 * merged into one table so both kinds can be mixed in any order.
 *
 * Call chain: main() -> ps_config_load -> ps_flags_parse -> getopt_long -> set_opt / app->on_opt.
 * getopt keeps its cursor in libc globals (optind); we reset it on entry so the parser can
 * run more than once per process (tests, rte_eal_init having used it before).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_config_pvt.h"

enum {
	OPT_ROLE = 256, OPT_TASK, OPT_PS, OPT_WORKERS, OPT_NUM_WORKERS, OPT_DATA, OPT_EPMAP,
	OPT_PROTO, OPT_FUSE, OPT_FUSE_BYTES, OPT_FUSE_MSGS, OPT_FUSE_US, OPT_MODE, OPT_GEO_K,
	OPT_GEO_LOG_MAX, OPT_WAIT, OPT_RETRY, OPT_PS_CORES, OPT_WK_CORES, OPT_PS_POLL, OPT_WK_POLL, OPT_PS_NOPIN,
	OPT_WK_NOPIN, OPT_WAL_DIR, OPT_CKPT_INTERVAL, OPT_WAL_MAX_MB, OPT_WAL_SYNC_MS, OPT_MTU, OPT_DATA_IFACE, OPT_DATA_PREFIX, OPT_DATA_GW, OPT_CONFIG,
	OPT_CTL_TOKEN_FILE, OPT_BAR_TIMEOUT, OPT_BAR_POLICY, OPT_LOST_STATE, OPT_REQ_TIMEOUT,
	OPT_REPLY_BUFS, OPT_REQ_SLOTS,
};

static const struct option ps_opts[] = {
	{ "role", required_argument, NULL, OPT_ROLE },
	{ "task-index", required_argument, NULL, OPT_TASK },
	{ "ps", required_argument, NULL, OPT_PS },
	{ "workers", required_argument, NULL, OPT_WORKERS },
	{ "num-workers", required_argument, NULL, OPT_NUM_WORKERS },
	{ "data-addr", required_argument, NULL, OPT_DATA },
	{ "endpoint-map", required_argument, NULL, OPT_EPMAP },
	{ "protocol", required_argument, NULL, OPT_PROTO },
	{ "tensor-fuse", optional_argument, NULL, OPT_FUSE },
	{ "fuse-max-bytes", required_argument, NULL, OPT_FUSE_BYTES },
	{ "fuse-max-msgs", required_argument, NULL, OPT_FUSE_MSGS },
	{ "fuse-flush-us", required_argument, NULL, OPT_FUSE_US },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "geo-k", required_argument, NULL, OPT_GEO_K },
	{ "geo-log-max", required_argument, NULL, OPT_GEO_LOG_MAX },
	{ "wait-timeout", required_argument, NULL, OPT_WAIT },
	{ "retry-interval", required_argument, NULL, OPT_RETRY },
	{ "ps-cores", required_argument, NULL, OPT_PS_CORES },
	{ "worker-cores", required_argument, NULL, OPT_WK_CORES },
	{ "ps-polling", optional_argument, NULL, OPT_PS_POLL },
	{ "worker-polling", optional_argument, NULL, OPT_WK_POLL },
	{ "ps-disable-pin", optional_argument, NULL, OPT_PS_NOPIN },
	{ "worker-disable-pin", optional_argument, NULL, OPT_WK_NOPIN },
	{ "wal-dir", required_argument, NULL, OPT_WAL_DIR },
	{ "ckpt-interval", required_argument, NULL, OPT_CKPT_INTERVAL },
	{ "wal-max-mb", required_argument, NULL, OPT_WAL_MAX_MB },
	{ "wal-sync-ms", required_argument, NULL, OPT_WAL_SYNC_MS },
	{ "mtu", required_argument, NULL, OPT_MTU },
	{ "data-iface", required_argument, NULL, OPT_DATA_IFACE },
	{ "data-prefix", required_argument, NULL, OPT_DATA_PREFIX },
	{ "data-gateway", required_argument, NULL, OPT_DATA_GW },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "ctl-token-file", required_argument, NULL, OPT_CTL_TOKEN_FILE },
	{ "barrier-timeout", required_argument, NULL, OPT_BAR_TIMEOUT },
	{ "barrier-policy", required_argument, NULL, OPT_BAR_POLICY },
	{ "ps-lost-state", required_argument, NULL, OPT_LOST_STATE },
	{ "request-timeout", required_argument, NULL, OPT_REQ_TIMEOUT },
	{ "reply-buffers", required_argument, NULL, OPT_REPLY_BUFS },
	{ "request-slots", required_argument, NULL, OPT_REQ_SLOTS },
	{ "help", no_argument, NULL, 'h' },
};

#define PS_N_OPTS (sizeof(ps_opts) / sizeof(ps_opts[0]))

const char *ps_flags_usage(void)
{
	return
	"cluster options (override TF_CONFIG, Paddle variables, the environment and --config):\n"
	"  --role ps|worker          this node's role\n"
	"  --task-index N            index among nodes of that role (default 0)\n"
	"  --ps H:P[,H:P..]          PS control endpoints (H: IPv4 or host name)\n"
	"  --workers H:P[,H:P..]     worker control endpoints\n"
	"  --num-workers N           worker count when their endpoints are unknown\n"
	"  --data-addr H[:P]         this node's data-plane address (else from .endpoint_map)\n"
	"  --data-iface NAME         dpdk: Linux interface holding this node's data address, prefix, gateway\n"
	"  --data-prefix N           dpdk: data subnet prefix length 1..32 (default 24 or the interface's)\n"
	"  --data-gateway H|none     dpdk: data subnet router (default none or the interface's)\n"
	"  --endpoint-map FILE       control->data map (default $TF_SEASTAR_ENDPOINT_MAP_PATH or ./.endpoint_map)\n"
	"  --protocol dpdk|kernel    data path (default dpdk)\n"
	"  --tensor-fuse[=BOOL]      Send/Recv fusion (default off)\n"
	"  --fuse-max-bytes N        fused frame body limit (default 8192)\n"
	"  --fuse-max-msgs N         sub-messages per fused frame (default 64)\n"
	"  --fuse-flush-us N         flush delay in us (default 20)\n"
	"  --mode sync|async|geo     consistency mode (default sync)\n"
	"  --geo-k N                 GEO local steps per push (default 10)\n"
	"  --geo-log-max N           PS, GEO: change-log entries per shard and table; a worker\n"
	"                            behind by more gets a full resync (default 1048576)\n"
	"  --wait-timeout S          seconds to wait for servers (default 60)\n"
	"  --retry-interval S        seconds between readiness retries (default 3)\n"
	"  --request-timeout S       worker: reconnect after S s without an answer (30; 0 off)\n"
	"  --reply-buffers N         PS: reply buffers per lane before it pauses reading (512)\n"
	"  --request-slots N         worker: requests in flight at most (default 256)\n"
	"  --ps-cores N              PS network lcores (default min(8, workers))\n"
	"  --worker-cores N          worker network lcores (default min(2, servers))\n"
	"  --ps-polling[=BOOL]       PS lcores busy-poll (default false)\n"
	"  --worker-polling[=BOOL]   worker lcores busy-poll (default false)\n"
	"  --ps-disable-pin[=BOOL]   do not pin PS lcores (default true)\n"
	"  --worker-disable-pin[=BOOL] do not pin worker lcores (default true)\n"
	"  --wal-dir DIR|none        PS write-ahead log (default <ckpt>.wal when --ckpt is given)\n"
	"  --ckpt-interval S         PS periodic checkpoint to --ckpt every S s (default 300; 0 off)\n"
	"  --wal-max-mb N            PS: checkpoint also when the log passes N MiB (default 1024)\n"
	"  --wal-sync-ms N           PS: msync the log every N ms (default 1000; 0 off)\n"
	"  --barrier-timeout S       PS sync: a barrier waits S s for missing workers (default 600; 0 for ever)\n"
	"  --barrier-policy P        PS: after it, fail (default) the waiting workers or continue without\n"
	"  --ps-lost-state P         worker: a PS came back without its state: fail (default) or continue\n"
	"  --mtu M                   dpdk data port MTU 576..9000 (default 1500; all nodes alike)\n"
	"  --config FILE             JSON cluster file (lowest precedence)\n"
	"  --ctl-token-file FILE     control token for status/save/shutdown (default: made, in the run dir)\n"
	"  -h, --help                this text\n"
	"booleans: True/False/true/false/1/0\n";
}

static int set_path(const char *arg, char *dst, const char *what, char *err, size_t errlen)
{
	if (arg[0] == '\0' || strlen(arg) >= PS_PATH_LEN)
		return ps_errf_rc(err, errlen, -EINVAL, "%s: expected a path of 1..%u bytes", what,
			       PS_PATH_LEN - 1);
	snprintf(dst, PS_PATH_LEN, "%s", arg);
	return 0;
}

/* optional_argument booleans: a bare flag means true. */
static int opt_bool(const char *arg, bool *dst, const char *what, char *err, size_t errlen)
{
	if (arg == NULL) {
		*dst = true;
		return 0;
	}
	return ps_parse_bool(arg, dst, what, err, errlen);
}

static int set_opt_net(struct ps_cluster *c, int id, const char *a, char *err, size_t el)
{
	switch (id) {
	case OPT_PS_CORES:
		return ps_parse_uint(a, 1, PS_MAX_CORES, &c->ps_net.core_number, "--ps-cores", err, el);
	case OPT_WK_CORES:
		return ps_parse_uint(a, 1, PS_MAX_CORES, &c->worker_net.core_number, "--worker-cores",
				     err, el);
	case OPT_PS_POLL:
		return opt_bool(a, &c->ps_net.enable_polling, "--ps-polling", err, el);
	case OPT_WK_POLL:
		return opt_bool(a, &c->worker_net.enable_polling, "--worker-polling", err, el);
	case OPT_PS_NOPIN:
		return opt_bool(a, &c->ps_net.disable_pin_cores, "--ps-disable-pin", err, el);
	case OPT_WK_NOPIN:
		return opt_bool(a, &c->worker_net.disable_pin_cores, "--worker-disable-pin", err, el);
	case OPT_FUSE_BYTES:
		return ps_parse_uint(a, 256, 1u << 20, &c->fuse_max_bytes, "--fuse-max-bytes", err, el);
	case OPT_FUSE_MSGS:
		return ps_parse_uint(a, 1, 4096, &c->fuse_max_msgs, "--fuse-max-msgs", err, el);
	case OPT_FUSE_US:
		return ps_parse_uint(a, 0, 100000, &c->fuse_flush_us, "--fuse-flush-us", err, el);
	case OPT_FUSE:
		return opt_bool(a, &c->tensor_fuse, "--tensor-fuse", err, el);
	case OPT_GEO_K:
		return ps_parse_uint(a, 1, 100000, &c->geo_k, "--geo-k", err, el);
	case OPT_GEO_LOG_MAX:
		return ps_parse_uint(a, 65536, 1u << 30, &c->geo_log_max, "--geo-log-max", err, el);
	case OPT_WAIT:
		return ps_parse_uint(a, 1, 86400, &c->wait_timeout_s, "--wait-timeout", err, el);
	case OPT_RETRY:
		return ps_parse_uint(a, 1, 3600, &c->retry_interval_s, "--retry-interval", err, el);
	case OPT_REQ_TIMEOUT:
		return ps_parse_uint(a, 0, 86400, &c->request_timeout_s, "--request-timeout", err,
				     el);
	case OPT_REPLY_BUFS:
		return ps_parse_uint(a, 1, 65536, &c->reply_buffers, "--reply-buffers", err, el);
	case OPT_REQ_SLOTS:
		return ps_parse_uint(a, 1, 4096, &c->request_slots, "--request-slots", err, el);
	case OPT_WAL_DIR:
		return set_path(a, c->wal_dir, "--wal-dir", err, el);
	case OPT_CKPT_INTERVAL:
		return ps_parse_uint(a, 0, 86400, &c->ckpt_interval_s, "--ckpt-interval", err, el);
	case OPT_WAL_MAX_MB:
		return ps_parse_uint(a, 1, 1u << 20, &c->wal_max_mb, "--wal-max-mb", err, el);
	case OPT_WAL_SYNC_MS:
		return ps_parse_uint(a, 0, 60000, &c->wal_sync_ms, "--wal-sync-ms", err, el);
	case OPT_MTU:
		return ps_parse_uint(a, 576, 9000, &c->mtu, "--mtu", err, el);
	case OPT_DATA_IFACE:
		return ps_parse_ifname(a, c->data_iface, "--data-iface", err, el);
	case OPT_DATA_PREFIX:
		return ps_parse_prefix(a, &c->data_prefix, "--data-prefix", err, el);
	case OPT_DATA_GW:
		return ps_parse_gateway(a, &c->data_gateway, "--data-gateway", err, el);
	case OPT_BAR_TIMEOUT:
		return ps_parse_uint(a, 0, 86400, &c->barrier_timeout_s, "--barrier-timeout", err, el);
	case OPT_BAR_POLICY:
		return ps_parse_policy(a, &c->barrier_policy, "--barrier-policy", err, el);
	case OPT_LOST_STATE:
		return ps_parse_policy(a, &c->ps_lost_state, "--ps-lost-state", err, el);
	default:
		return -ENOENT;
	}
}

static int set_opt(struct ps_cluster *c, int id, const char *a, char *err, size_t el)
{
	switch (id) {
	case OPT_ROLE:
		return ps_parse_role(a, &c->role, "--role", err, el);
	case OPT_TASK:
		return ps_parse_uint(a, 0, PS_MAX_NODES - 1, &c->task_index, "--task-index", err, el);
	case OPT_PS:
		return ps_parse_endpoint_list(a, c->ps, PS_MAX_NODES, &c->n_ps, "--ps", err, el);
	case OPT_WORKERS:
		return ps_parse_endpoint_list(a, c->worker, PS_MAX_NODES, &c->n_worker_addrs,
					      "--workers", err, el);
	case OPT_NUM_WORKERS:
		return ps_parse_uint(a, 1, PS_MAX_NODES, &c->n_workers, "--num-workers", err, el);
	case OPT_DATA:
		return ps_parse_endpoint(a, strlen(a), true, &c->self_data, "--data-addr", err, el);
	case OPT_EPMAP:
		return set_path(a, c->endpoint_map, "--endpoint-map", err, el);
	case OPT_CONFIG:
		return set_path(a, c->config_path, "--config", err, el);
	case OPT_CTL_TOKEN_FILE:
		return set_path(a, c->ctl_token_file, "--ctl-token-file", err, el);
	case OPT_PROTO:
		return ps_parse_protocol(a, &c->protocol, "--protocol", err, el);
	case OPT_MODE:
		return ps_parse_job_mode(a, &c->mode, "--mode", err, el);
	default:
		return set_opt_net(c, id, a, err, el);
	}
}

/* Field bit for each of our option ids, in enum order from OPT_ROLE. */
static const uint8_t opt_field[] = {
	PS_F_ROLE, PS_F_TASK_INDEX, PS_F_PS, PS_F_WORKERS, PS_F_NUM_WORKERS, PS_F_DATA_ADDR,
	PS_F_EPMAP, PS_F_PROTOCOL, PS_F_TENSOR_FUSE, PS_F_FUSE_MAX_BYTES, PS_F_FUSE_MAX_MSGS,
	PS_F_FUSE_FLUSH_US, PS_F_MODE, PS_F_GEO_K, PS_F_GEO_LOG_MAX, PS_F_WAIT_TIMEOUT,
	PS_F_RETRY_INTERVAL, PS_F_PS_CORES, PS_F_WORKER_CORES, PS_F_PS_POLLING, PS_F_WORKER_POLLING,
	PS_F_PS_DISABLE_PIN, PS_F_WORKER_DISABLE_PIN, PS_F_WAL_DIR, PS_F_CKPT_INTERVAL,
	PS_F_WAL_MAX_MB, PS_F_WAL_SYNC_MS, PS_F_MTU, PS_F_DATA_IFACE, PS_F_DATA_PREFIX, PS_F_DATA_GATEWAY, PS_F_CONFIG_PATH,
	PS_F_CTL_TOKEN_FILE, PS_F_BARRIER_TIMEOUT, PS_F_BARRIER_POLICY, PS_F_PS_LOST_STATE,
	PS_F_REQUEST_TIMEOUT, PS_F_REPLY_BUFFERS, PS_F_REQUEST_SLOTS,
};
_Static_assert(sizeof(opt_field) == OPT_REQ_SLOTS - OPT_ROLE + 1, "one field per option");

static struct option *build_table(const struct ps_app_opts *app, size_t *n_out)
{
	size_t n_app = 0, i;
	struct option *t;

	if (app != NULL && app->longopts != NULL)
		while (app->longopts[n_app].name != NULL)
			n_app++;
	t = calloc(PS_N_OPTS + n_app + 1, sizeof(*t));
	if (t == NULL)
		return NULL;
	memcpy(t, ps_opts, sizeof(ps_opts));
	for (i = 0; i < n_app; i++)
		t[PS_N_OPTS + i] = app->longopts[i];
	*n_out = PS_N_OPTS + n_app;
	return t;
}

static int one_opt(int id, int argc, char **argv, const struct ps_app_opts *app,
		   struct ps_cluster *c, char *err, size_t errlen)
{
	const char *bad = optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "?";
	int rc;

	if (id == '?')
		return ps_errf_rc(err, errlen, -EINVAL, "flags: unknown option '%s'; see --help", bad);
	if (id == ':')
		return ps_errf_rc(err, errlen, -EINVAL, "flags: option '%s' expects a value", bad);
	if (id >= OPT_ROLE && id < OPT_ROLE + (int)sizeof(opt_field)) {
		rc = set_opt(c, id, optarg, err, errlen);
		if (rc == 0)
			ps_mark(c, (enum ps_field)opt_field[id - OPT_ROLE]);
		return rc;
	}
	if (app != NULL && app->on_opt != NULL)
		return app->on_opt(app->ctx, id, optarg, err, errlen);
	return ps_errf_rc(err, errlen, -EINVAL, "flags: option '%s' not handled", bad);
}

int ps_flags_parse(int argc, char **argv, const struct ps_app_opts *app, struct ps_cluster *out,
		   bool *help, char *err, size_t errlen)
{
	struct ps_cluster *c;
	struct option *table;
	size_t n;
	int id, rc = 0;

	*help = false;
	table = build_table(app, &n);
	c = malloc(sizeof(*c));
	if (table == NULL || c == NULL) {
		free(table);
		free(c);
		return ps_errf_rc(err, errlen, -ENOMEM, "flags: out of memory");
	}
	memcpy(c, out, sizeof(*c));
	optind = 0; /* GNU: 0 re-initialises getopt's internal state as well */
	opterr = 0;
	while (rc == 0 && (id = getopt_long(argc, argv, ":h", table, NULL)) != -1) {
		if (id == 'h')
			*help = true;
		else
			rc = one_opt(id, argc, argv, app, c, err, errlen);
	}
	if (rc == 0 && optind < argc)
		rc = ps_errf_rc(err, errlen, -EINVAL, "flags: unexpected argument '%s'; expected "
			     "--option[=value] only", argv[optind]);
	if (rc == 0)
		memcpy(out, c, sizeof(*out));
	free(table);
	free(c);
	return rc;
}
