/*
 * ps_config.h — one cluster description for every wharf executable, gathered from the
 * sources DeepRec and Paddle users already configure jobs with.
 *
 * Call chain: main() of psd/train/ctl -> ps_config_load() -> (ps_flags_parse, ps_cfg_file_load,
 * ps_cfg_env_paddle, ps_cfg_env_knobs, ps_cfg_env_tfconfig) -> ps_cluster_finalize ->
 * (ps_epmap_load, ps_cfg_addr: host names resolved, the data plane's address, prefix and
 * gateway). The executables then hand struct ps_cluster's fields to
 * dpdk_net/transport/fuse/ps_core. Nothing here runs on a hot path; it runs once at start-up.
 *
 * Precedence, highest first:  flags > TF_CONFIG > Paddle variables > DeepRec knob variables
 * > JSON file (--config) > defaults. Each source fills only what it names; a field keeps the
 * value of the highest source that set it (struct ps_cluster.origin tells which).
 *
 * Errors: every function that reads outside input takes (char *err, size_t errlen) and on
 * failure writes one line naming the source (file:line[:col], JSON key path, variable name or
 * flag) and what was expected, then returns -errno (-EINVAL for bad values, -ENOENT for a
 * missing file, -ENOMEM, -E2BIG for too many entries). Nothing aborts; a failed call leaves
 * the caller's struct as it was.
 *
 * Knob table (the README copies it):
 *
 * | knob (flag / JSON key / env)                                   | default              | meaning
 * |----------------------------------------------------------------|----------------------|---------
 * | --role / task.type / TF_CONFIG task.type / TRAINING_ROLE        | none (required)      | ps | worker (TF "chief" = worker 0; Paddle PSERVER | TRAINER)
 * | --task-index / task.index / TF_CONFIG task.index / PADDLE_TRAINER_ID | 0             | index among the nodes of that role; a Paddle PSERVER finds its index as POD_IP:PADDLE_PORT in the list
 * | --ps / cluster.ps / TF_CONFIG cluster.ps / PADDLE_PSERVERS_IP_PORT_LIST | none (required) | PS control endpoints ip:port, comma separated on flags/env
 * | --workers / cluster.worker / TF_CONFIG cluster.worker (+chief) / PADDLE_TRAINER_ENDPOINTS | none | worker control endpoints (Paddle gives only the count)
 * | --num-workers / - / - / PADDLE_TRAINERS_NUM                     | len(workers)         | number of workers (needed when their endpoints are unknown)
 * | --data-addr / data_addr / - / -                                 | from .endpoint_map   | this node's own data-plane host[:port], overrides the map (no port: the control port)
 * | --data-iface / data_iface / WHARF_DATA_IFACE                    | none                 | protocol=dpdk: a Linux interface whose IPv4 configuration is this node's data plane: its address when neither --data-addr nor the map names one, its prefix and its gateway route unless given (an SR-IOV VF the CNI configured, e.g. Multus' net1)
 * | --data-prefix / data_prefix / WHARF_DATA_PREFIX                 | 24 (or the interface's) | protocol=dpdk: the data subnet's prefix length (1..32); other destinations go through the gateway
 * | --data-gateway / data_gateway / WHARF_DATA_GATEWAY              | none (or the interface's) | protocol=dpdk: the data subnet's router (host or IPv4 on the subnet; "none": no gateway)
 * | --endpoint-map / endpoint_map / TF_SEASTAR_ENDPOINT_MAP_PATH    | ./.endpoint_map      | control->data map; the env names a directory (DeepRec) or a file
 * | --protocol / protocol / WHARF_PROTOCOL                          | dpdk                 | dpdk | kernel (kernel: data flows over the control address)
 * | --tensor-fuse / tensor_fuse / WHARF_TENSOR_FUSE                 | false (as DeepRec)   | Send/Recv fusion on or off
 * | --fuse-max-bytes / fuse.max_bytes / -                          | 8192                 | flush a fused frame at this many body bytes (256..1 MiB)
 * | --fuse-max-msgs / fuse.max_msgs / -                            | 64                   | flush after this many sub-messages (1..4096)
 * | --fuse-flush-us / fuse.flush_us / -                            | 20                   | flush a non-empty batch after this long (0..100000 us)
 * | --mode / mode / WHARF_MODE                                      | sync                 | sync | async | geo (Paddle's three)
 * | --geo-k / geo_k / WHARF_GEO_K                                   | 10                   | GEO: local steps between pushes (1..100000)
 * | --geo-log-max / geo_log_max / WHARF_GEO_LOG_MAX                 | 1048576              | PS, GEO: change-log entries per shard and sparse table (65536..2^30); a worker behind by more, or dead, gets a full resync of the rows instead
 * | --wait-timeout / wait_timeout_s / WHARF_WAIT_TIMEOUT_S          | 60                   | seconds a worker waits for servers before giving up (1..86400)
 * | --retry-interval / retry_interval_s / -                         | 3 (as Paddle)        | seconds between readiness retries (1..3600)
 * | --request-timeout / request_timeout_s / WHARF_REQUEST_TIMEOUT_S | 30                   | worker: a request unanswered this many seconds (counted while the worker polls) gives its server's connection up: the worker reconnects, sends its unacknowledged pushes again and asks the rest again (0: never; 0..86400)
 * | --request-slots / request_slots / WHARF_REQUEST_SLOTS          | 256                  | worker: requests a process keeps in flight at most (each keeps its encoded bytes until answered; 1..4096; the library's client at most 256)
 * | --reply-buffers / reply_buffers / WHARF_REPLY_BUFFERS          | 512                  | PS: reply buffers per network lane; while every one waits for its send to complete, the PS stops reading the connections that ask for more (back-pressure: nothing refused, nothing dropped; 1..65536)
 * | --ps-cores / net.ps.core_number / NETWORK_PS_CORE_NUMBER        | min(8, connections)  | PS network lcores; connections = number of workers
 * | --worker-cores / net.worker.core_number / NETWORK_WORKER_CORE_NUMBER | min(2, connections) | worker network lcores; connections = number of PS
 * | --ps-polling / net.ps.enable_polling / PS_ENABLE_POLLING        | false                | PS lcores spin (true) or sleep/interrupt when idle
 * | --worker-polling / net.worker.enable_polling / WORKER_ENABLE_POLLING | false           | same for workers
 * | --ps-disable-pin / net.ps.disable_pin_cores / PS_DISABLE_PIN_CORES | true (DeepRec: no pinning) | do not pin PS network lcores
 * | --worker-disable-pin / net.worker.disable_pin_cores / WORKER_DISABLE_PIN_CORES | true | same for workers
 * | --wal-dir / durability.wal_dir / WHARF_WAL_DIR                  | <ckpt>.wal (PS with --ckpt), else none | PS write-ahead log directory (without --ckpt, its checkpoint is DIR/checkpoint and a restart recovers from it); "none" turns the log off (then a SIGKILL loses what was acknowledged after the last checkpoint)
 * | --ckpt-interval / durability.ckpt_interval_s / WHARF_CKPT_INTERVAL_S | 300            | PS: seconds between periodic checkpoints to --ckpt (0: only at shutdown and on request; 0..86400)
 * | --wal-max-mb / durability.wal_max_mb / WHARF_WAL_MAX_MB         | 1024                 | PS: also checkpoint when the log since the last one passes this many MiB (1..1048576)
 * | --wal-sync-ms / durability.wal_sync_ms / WHARF_WAL_SYNC_MS      | 1000                 | PS: msync the log this often, bounding what a machine crash can take (0: only checkpoints do; 0..60000). A process crash loses nothing either way
 * | --ctl-token-file / ctl_token_file / WHARF_CTL_TOKEN_FILE       | none: the node makes one | file holding the control token (16..256 printable bytes, no spaces) that status, save and shutdown need; WHARF_CTL_TOKEN gives the token itself (a file given by flag comes first); without either a node makes a token and writes it to <run dir>/ctl-<ip>-<port>.token (mode 0600), where wharf-ctl finds it
 * | - / - / WHARF_RUNTIME_DIR                                     | $XDG_RUNTIME_DIR/wharf, else /tmp/wharf-<uid> | the run directory for those token files (private: 0700, ours)
 * | --barrier-timeout / barrier_timeout_s / WHARF_BARRIER_TIMEOUT_S | 600                 | PS, sync: seconds a step's barrier waits for missing workers before it names them (log, telemetry) and acts by the policy (0: for ever; 0..86400)
 * | --barrier-policy / barrier_policy / WHARF_BARRIER_POLICY        | fail                 | fail: the waiting workers fail naming the missing ones; continue: the step goes on without them (they rejoin when they return)
 * | --ps-lost-state / ps_lost_state / WHARF_PS_LOST_STATE           | fail                 | worker: what to do when a PS comes back without its state (a new epoch in its hello): fail, or continue with the empty PS
 * | --mtu / mtu / WHARF_MTU                                          | 1500                 | protocol=dpdk: the data port's MTU (576..9000; every node of a cluster must agree: jumbo 9000 is what a PS network wants, fewer segments per tensor)
 * | EAL args before "--" / eal_args / WHARF_EAL_ARGS               | none                 | protocol=dpdk: the EAL arguments a node starts with when its command line gives none (the library: always); the file's key a string or an array of words, the variable a string; split at blanks, at most 64 words of 8191 bytes in all
 * | --config / - / -                                                | none                 | the JSON cluster file
 *
 * Booleans accept True/False/true/false/1/0 everywhere (JSON also true/false literals).
 * Core numbers accept 1..128. Endpoints are host:port with port 1..65535, the host an IPv4
 * literal or a name. ps_cluster_finalize resolves the names this node uses (getaddrinfo,
 * IPv4; each logged once as "resolved NAME -> ADDRESS (source)"); a name that does not
 * resolve is retried every retry_interval_s for up to wait_timeout_s (a Kubernetes service
 * name appears when its pod starts), then refused naming its source. The .endpoint_map
 * matches control endpoints as the cluster spells them. A worker whose map has no line for a
 * PS (protocol=dpdk) takes the PS's data address from its health answer.
 */
#ifndef WHARF_PS_CONFIG_H
#define WHARF_PS_CONFIG_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PS_MAX_NODES 256      /* per role */
#define PS_HOST_LEN 256       /* host text incl. NUL: a DNS name is at most 253 */
#define PS_IFNAME_LEN 16      /* a Linux interface name incl. NUL (IFNAMSIZ) */
#define PS_PATH_LEN 512
#define PS_MAX_CORES 128
#define PS_CTL_TOKEN_MIN 16   /* control token bytes */
#define PS_CTL_TOKEN_MAX 256
#define PS_EAL_ARGS_LEN 8192  /* eal_args bytes incl. NUL */
#define PS_EAL_MAX_ARGS 64    /* its words */

#define PS_DEF_FUSE_MAX_BYTES 8192u
#define PS_DEF_FUSE_MAX_MSGS 64u
#define PS_DEF_FUSE_FLUSH_US 20u
#define PS_DEF_GEO_K 10u
#define PS_DEF_GEO_LOG_MAX (1u << 20)
#define PS_DEF_WAIT_TIMEOUT_S 60u
#define PS_DEF_RETRY_INTERVAL_S 3u
#define PS_DEF_REQUEST_TIMEOUT_S 30u
#define PS_DEF_REPLY_BUFFERS 512u
#define PS_DEF_REQUEST_SLOTS 256u
#define PS_DEF_PS_CORE_CAP 8u
#define PS_DEF_WORKER_CORE_CAP 2u
#define PS_DEF_CKPT_INTERVAL_S 300u
#define PS_DEF_WAL_MAX_MB 1024u
#define PS_DEF_WAL_SYNC_MS 1000u
#define PS_DEF_MTU 1500u
#define PS_DEF_DATA_PREFIX 24u
#define PS_DEF_BARRIER_TIMEOUT_S 600u

enum ps_role { PS_ROLE_UNSET = 0, PS_ROLE_PS, PS_ROLE_WORKER };
enum ps_protocol { PS_PROTO_DPDK = 0, PS_PROTO_KERNEL };
enum ps_job_mode { PS_JOB_SYNC = 0, PS_JOB_ASYNC, PS_JOB_GEO };
/* What a node does when a fault outlasts its patience (barrier_policy, ps_lost_state). */
enum ps_policy { PS_POLICY_FAIL = 0, PS_POLICY_CONTINUE };

/* Where a field's value came from; higher value = higher precedence. */
enum ps_source {
	PS_SRC_DEFAULT = 0,
	PS_SRC_FILE,
	PS_SRC_ENV_KNOBS, /* DeepRec's tuning variables and WHARF_* */
	PS_SRC_PADDLE,
	PS_SRC_TF_CONFIG,
	PS_SRC_FLAGS,
	PS_SRC_COUNT
};

/* One field per bit, so a source can say exactly what it set. */
enum ps_field {
	PS_F_ROLE = 0,
	PS_F_TASK_INDEX,
	PS_F_PS,
	PS_F_WORKERS,
	PS_F_NUM_WORKERS,
	PS_F_DATA_ADDR,
	PS_F_EPMAP,
	PS_F_PROTOCOL,
	PS_F_TENSOR_FUSE,
	PS_F_FUSE_MAX_BYTES,
	PS_F_FUSE_MAX_MSGS,
	PS_F_FUSE_FLUSH_US,
	PS_F_MODE,
	PS_F_GEO_K,
	PS_F_GEO_LOG_MAX,
	PS_F_WAIT_TIMEOUT,
	PS_F_RETRY_INTERVAL,
	PS_F_PS_CORES,
	PS_F_WORKER_CORES,
	PS_F_PS_POLLING,
	PS_F_WORKER_POLLING,
	PS_F_PS_DISABLE_PIN,
	PS_F_WORKER_DISABLE_PIN,
	PS_F_WAL_DIR,
	PS_F_CKPT_INTERVAL,
	PS_F_WAL_MAX_MB,
	PS_F_WAL_SYNC_MS,
	PS_F_MTU,
	PS_F_DATA_IFACE,
	PS_F_DATA_PREFIX,
	PS_F_DATA_GATEWAY,
	PS_F_CONFIG_PATH,
	PS_F_CTL_TOKEN_FILE,
	PS_F_BARRIER_TIMEOUT,
	PS_F_BARRIER_POLICY,
	PS_F_PS_LOST_STATE,
	PS_F_EAL_ARGS,
	PS_F_REQUEST_TIMEOUT,
	PS_F_REPLY_BUFFERS,
	PS_F_REQUEST_SLOTS,
	PS_F_COUNT
};

struct ps_endpoint {
	char host[PS_HOST_LEN]; /* as given: an IPv4 literal or a host name */
	uint16_t port;          /* 0 only for a data address given without a port */
	bool resolved;          /* ip is valid: set by ps_cluster_finalize / ps_endpoint_resolve */
	uint32_t ip;            /* IPv4, host byte order */
};

/* Per-role network knobs (DeepRec's names in the comments). */
struct ps_net_knobs {
	unsigned core_number;   /* NETWORK_{PS,WORKER}_CORE_NUMBER, 0 until finalized */
	bool enable_polling;    /* {PS,WORKER}_ENABLE_POLLING */
	bool disable_pin_cores; /* {PS,WORKER}_DISABLE_PIN_CORES */
};

struct ps_cluster {
	enum ps_role role;
	unsigned task_index;

	unsigned n_ps;
	unsigned n_workers;          /* count; may exceed n_worker_addrs (Paddle) */
	unsigned n_worker_addrs;     /* 0 or n_workers after finalize */
	struct ps_endpoint ps[PS_MAX_NODES];          /* control plane */
	struct ps_endpoint worker[PS_MAX_NODES];      /* control plane */
	struct ps_endpoint ps_data[PS_MAX_NODES];     /* data plane, filled by finalize */
	struct ps_endpoint worker_data[PS_MAX_NODES]; /* data plane, where known */
	struct ps_endpoint self_data;                 /* this node's data address */
	bool have_self_data;
	/* Paddle: the task index is the position of task_ep (POD_IP:PADDLE_PORT) in the PS list,
	 * found by finalize once names are resolved (the list may name services, POD_IP not). */
	struct ps_endpoint task_ep;
	bool task_by_ep;

	enum ps_protocol protocol;
	bool tensor_fuse;
	unsigned fuse_max_bytes;
	unsigned fuse_max_msgs;
	unsigned fuse_flush_us;

	enum ps_job_mode mode;
	unsigned geo_k;
	unsigned geo_log_max;        /* PS: GEO change-log entries per shard and table */
	unsigned wait_timeout_s;
	unsigned retry_interval_s;
	unsigned barrier_timeout_s;     /* PS: 0 = wait for ever */
	enum ps_policy barrier_policy;  /* PS: after barrier_timeout_s */
	enum ps_policy ps_lost_state;   /* worker: a PS came back without its state */
	unsigned request_timeout_s;  /* worker: see the table; 0 = none */
	unsigned reply_buffers;      /* PS: per network lane */
	unsigned request_slots;      /* worker: the client's requests in flight */

	struct ps_net_knobs ps_net;
	struct ps_net_knobs worker_net;

	/* PS durability (see the table): "" = the default, "none" = no log */
	char wal_dir[PS_PATH_LEN];
	unsigned ckpt_interval_s, wal_max_mb, wal_sync_ms;

	unsigned mtu;                   /* protocol=dpdk data port MTU */
	/* protocol=dpdk data plane: on-link prefix (0 until finalized), gateway (host "" = none) */
	char data_iface[PS_IFNAME_LEN];
	unsigned data_prefix;
	struct ps_endpoint data_gateway;

	/*
	 * Control plane (ps_net_auth.c). ctl_token_file: a source's file; finalize reads the
	 * token into ctl_token (or takes WHARF_CTL_TOKEN), "" when the node is to make its own;
	 * ctl_token_src says where it came from; run_dir: where a made token's file goes.
	 */
	char ctl_token_file[PS_PATH_LEN];
	char ctl_token[PS_CTL_TOKEN_MAX + 1];
	char ctl_token_src[PS_PATH_LEN + 32];
	char run_dir[PS_PATH_LEN];

	/* EAL arguments, words separated by single blanks ("" = none given); see ps_eal_pick. */
	char eal_args[PS_EAL_ARGS_LEN];

	char endpoint_map[PS_PATH_LEN]; /* file path after finalize ("" = none found) */
	char config_path[PS_PATH_LEN];

	uint8_t origin[PS_F_COUNT]; /* enum ps_source per field */
	uint64_t set;               /* bit per enum ps_field this struct's source set */
};

/*
 * Splits "prog [EAL args] -- [app args]" in place, as every wharf executable takes them:
 * *eal_argc counts prog and the EAL part (1 when there is no "--"), and *argc / *argv then
 * describe the app part with argv[0] = prog, ready for getopt. Nothing is copied.
 */
void ps_split_eal(int *argc, char ***argv, int *eal_argc);

/*
 * The EAL arguments a DPDK node starts with, argv[0] first: its command line's part before
 * "--" when that has any (cmd_argc > 1), else the cluster's eal_args (WHARF_EAL_ARGS, else the
 * config file's key) split at blanks into e's own storage. argv points at cmd_argv or into e.
 */
struct ps_eal {
	int argc;
	char **argv;
	char *v[PS_EAL_MAX_ARGS + 2];
	char buf[PS_EAL_ARGS_LEN];
};
void ps_eal_pick(const struct ps_cluster *c, int cmd_argc, char **cmd_argv, struct ps_eal *e);
/*
 * Checks EAL arguments from `what` (a variable, a file's key) and copies them into out
 * (PS_EAL_ARGS_LEN bytes) with single blanks between words: 0, or -E2BIG naming what.
 */
int ps_parse_eal_args(const char *s, char *out, const char *what, char *err, size_t errlen);

/* Environment lookup over an envp-style NULL-terminated array (pass `environ`). */
const char *ps_env_get(char *const envp[], const char *name);

/* Defaults for everything; role unset, no endpoints. */
void ps_cluster_init(struct ps_cluster *c);

/* Copy into dst each field src->set names, recording src_kind as its origin. */
void ps_cluster_merge(struct ps_cluster *dst, const struct ps_cluster *src, enum ps_source src_kind);

/*
 * How finalize turns a host name into an address and where it says so. lookup: 0 and *ip
 * (IPv4, host byte order), or -errno with the reason in why. log: one line per event
 * (a resolution, a retry round, what an interface gave); NULL logs nothing.
 */
struct ps_resolver {
	int (*lookup)(void *ctx, const char *name, uint32_t *ip, char *why, size_t whylen);
	void (*log)(void *ctx, const char *line);
	void *ctx;
};

/* getaddrinfo(name, AF_INET): the first address. */
int ps_resolve_system(void *ctx, const char *name, uint32_t *ip, char *why, size_t whylen);
/* ps_resolve_system, logging to "wharf.ps" at INFO, prefixed with the program's name. */
extern const struct ps_resolver ps_resolver_default;

/*
 * Resolve defaults that depend on other fields (core numbers from connection counts),
 * load the endpoint map (envp for TF_SEASTAR_ENDPOINT_MAP_PATH) and fill the data endpoints,
 * resolve the host names this node uses and its data plane (--data-iface, prefix, gateway),
 * and check the whole: role, index range, counts, duplicates, ranges.
 * ps_cluster_finalize uses ps_resolver_default.
 */
int ps_cluster_finalize(struct ps_cluster *c, char *const envp[], char *err, size_t errlen);
int ps_cluster_finalize_with(struct ps_cluster *c, char *const envp[],
			     const struct ps_resolver *r, char *err, size_t errlen);

/* One endpoint's host resolved now, no retry (wharf-ctl); r NULL = ps_resolver_default. */
int ps_endpoint_resolve(struct ps_endpoint *ep, const struct ps_resolver *r, const char *what,
			char *err, size_t errlen);

/*
 * The IPv4 configuration of Linux interface name: its (first) address and prefix, and
 * the gateway of its routes (the default route's if it has one, else the lowest metric's;
 * 0 = none), all host byte order. -ENODEV: no such interface; -EADDRNOTAVAIL: no IPv4
 * address on it; the reason in err.
 */
int ps_iface_ipv4(const char *name, uint32_t *ip, unsigned *prefix, uint32_t *gateway,
		  char *err, size_t errlen);

/* Application options merged into wc's getopt_long table. on_opt gets the option's val. */
struct ps_app_opts {
	const struct option *longopts; /* terminated by a zero entry; val must be >= 1000 */
	const char *usage;             /* the app's own help lines; the app prints them after ps_flags_usage() */
	int (*on_opt)(void *ctx, int val, const char *arg, char *err, size_t errlen);
	void *ctx;
};

/*
 * Parse the app part of argv (after "--", argv[0] is the program name). Cluster flags go into
 * *out (only fields named, out->set says which), app flags to app->on_opt (app may be NULL).
 * *help is set when -h/--help was given. Non-option arguments are an error.
 */
int ps_flags_parse(int argc, char **argv, const struct ps_app_opts *app, struct ps_cluster *out,
		   bool *help, char *err, size_t errlen);
const char *ps_flags_usage(void);

/* The JSON cluster file; syntax errors are reported as path:line:column. */
int ps_cfg_file_load(const char *path, struct ps_cluster *out, char *err, size_t errlen);
int ps_cfg_file_parse(const char *text, const char *name, struct ps_cluster *out, char *err,
		      size_t errlen);

/* TF_CONFIG (JSON text in the variable); nothing set when the variable is absent. */
int ps_cfg_env_tfconfig(char *const envp[], struct ps_cluster *out, char *err, size_t errlen);
/* Paddle's PADDLE_* / TRAINING_ROLE / POD_IP variables; nothing set when all are absent. */
int ps_cfg_env_paddle(char *const envp[], struct ps_cluster *out, char *err, size_t errlen);
/* DeepRec's tuning variables and WHARF_* (see the table). */
int ps_cfg_env_knobs(char *const envp[], struct ps_cluster *out, char *err, size_t errlen);

/* All sources in precedence order, then finalize. */
int ps_config_load(int argc, char **argv, const struct ps_app_opts *app, char *const envp[],
		   struct ps_cluster *out, bool *help, char *err, size_t errlen);

/* ---- small parsers shared by the sources (exposed for tests and apps) ---- */

/* "host:port" (port required unless port_optional). what names the source for errors. */
int ps_parse_endpoint(const char *s, size_t len, bool port_optional, struct ps_endpoint *out,
		      const char *what, char *err, size_t errlen);
/* Comma-separated endpoints, empty items refused. */
int ps_parse_endpoint_list(const char *s, struct ps_endpoint *out, unsigned max, unsigned *n,
			   const char *what, char *err, size_t errlen);
/* True/False/true/false/1/0. */
int ps_parse_bool(const char *s, bool *out, const char *what, char *err, size_t errlen);
/* Decimal in [lo, hi], whole string. */
int ps_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out, const char *what,
		  char *err, size_t errlen);
int ps_parse_role(const char *s, enum ps_role *out, const char *what, char *err, size_t errlen);
int ps_parse_protocol(const char *s, enum ps_protocol *out, const char *what, char *err,
		      size_t errlen);
int ps_parse_job_mode(const char *s, enum ps_job_mode *out, const char *what, char *err, size_t errlen);
/* "fail" | "continue". */
int ps_parse_policy(const char *s, enum ps_policy *out, const char *what, char *err,
		    size_t errlen);

/* IPv4 of an endpoint in network byte order: the resolved address or the literal;
 * -EINVAL for a name not resolved. */
int ps_endpoint_ipv4(const struct ps_endpoint *ep, uint32_t *be_addr);
/* A Linux interface name: 1..15 bytes, no '/', ':' or white space. */
int ps_parse_ifname(const char *s, char *out, const char *what, char *err, size_t errlen);
/* An on-link prefix length, 1..32. */
int ps_parse_prefix(const char *s, unsigned *out, const char *what, char *err, size_t errlen);
/* A gateway: an IPv4 literal, a host name, or "none" (an empty host). */
int ps_parse_gateway(const char *s, struct ps_endpoint *out, const char *what, char *err,
		     size_t errlen);
/* "host:port" into buf (always NUL-terminated). */
void ps_endpoint_format(const struct ps_endpoint *ep, char *buf, size_t len);
bool ps_endpoint_equal(const struct ps_endpoint *a, const struct ps_endpoint *b);

const char *ps_role_name(enum ps_role r);
const char *ps_protocol_name(enum ps_protocol p);
const char *ps_job_mode_name(enum ps_job_mode m);
const char *ps_policy_name(enum ps_policy p);
const char *ps_source_name(enum ps_source s);

/* ---- .endpoint_map ---- */

struct ps_epmap_entry {
	struct ps_endpoint control;
	struct ps_endpoint data;
	unsigned line;
};

struct ps_epmap {
	unsigned n;
	struct ps_epmap_entry e[2 * PS_MAX_NODES];
};

/* Parse map text; name is used in "name:line: ..." errors. Duplicate control keys refused. */
int ps_epmap_parse(const char *text, const char *name, struct ps_epmap *out, char *err,
		   size_t errlen);
int ps_epmap_load(const char *path, struct ps_epmap *out, char *err, size_t errlen);
const struct ps_endpoint *ps_epmap_lookup(const struct ps_epmap *m, const struct ps_endpoint *control);

#endif
