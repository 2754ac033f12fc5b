/*
 * test_config.c — configuration sources: flags, TF_CONFIG, Paddle variables, DeepRec knobs,
 * the JSON file, .endpoint_map, precedence and the checks of ps_cluster_finalize.
 * The environment is passed as an array; files go to a private temp directory.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_core/ps_config.h"

struct fx {
	char dir[64];
	char err[512];
	char path[256];
	struct ps_cluster c;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/wc_cfg_XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static const char *write_file(struct fx *f, const char *name, const char *text)
{
	FILE *fp;

	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	return f->path;
}

static int load(struct fx *f, char **envp, int argc, const char **argv)
{
	char *av[32];
	bool help;
	int i;

	assert_true(argc < 32);
	for (i = 0; i < argc; i++)
		av[i] = (char *)argv[i];
	av[argc] = NULL;
	f->err[0] = '\0';
	return ps_config_load(argc, av, NULL, envp, &f->c, &help, f->err, sizeof(f->err));
}

static void test_config_parsers_accept_and_refuse(void **state)
{
	char err[256];
	struct ps_endpoint ep;
	bool b;
	unsigned u, n;
	struct ps_endpoint list[4];

	(void)state;
	assert_int_equal(ps_parse_endpoint("10.0.0.1:4444", 13, false, &ep, "x", err, sizeof(err)), 0);
	assert_string_equal(ep.host, "10.0.0.1");
	assert_int_equal(ep.port, 4444);
	assert_int_equal(ps_parse_endpoint("10.0.0.1", 8, false, &ep, "X_VAR", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "X_VAR"));
	assert_non_null(strstr(err, "host:port"));
	assert_int_equal(ps_parse_endpoint("h:0", 3, false, &ep, "x", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_endpoint("h:65536", 7, false, &ep, "x", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_endpoint("h :1", 4, false, &ep, "x", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_endpoint("10.0.0.9", 8, true, &ep, "x", err, sizeof(err)), 0);
	assert_int_equal(ep.port, 0);

	for (const char **s = (const char *[]){ "True", "true", "1", NULL }; *s; s++) {
		assert_int_equal(ps_parse_bool(*s, &b, "B", err, sizeof(err)), 0);
		assert_true(b);
	}
	for (const char **s = (const char *[]){ "False", "false", "0", NULL }; *s; s++) {
		assert_int_equal(ps_parse_bool(*s, &b, "B", err, sizeof(err)), 0);
		assert_false(b);
	}
	assert_int_equal(ps_parse_bool("yes", &b, "PS_ENABLE_POLLING", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "PS_ENABLE_POLLING"));
	assert_non_null(strstr(err, "True/False"));

	assert_int_equal(ps_parse_uint("128", 1, 128, &u, "N", err, sizeof(err)), 0);
	assert_int_equal(u, 128);
	assert_int_equal(ps_parse_uint("129", 1, 128, &u, "N", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_uint("0", 1, 128, &u, "N", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_uint("", 0, 128, &u, "N", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_uint("-1", 0, 128, &u, "N", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_uint("99999999999999999999", 0, 128, &u, "N", err, sizeof(err)), -EINVAL);

	assert_int_equal(ps_parse_endpoint_list("a:1, b:2", list, 4, &n, "L", err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[1].host, "b");
	assert_int_equal(ps_parse_endpoint_list("a:1,,b:2", list, 4, &n, "L", err, sizeof(err)), -EINVAL);
	assert_int_equal(ps_parse_endpoint_list("a:1,b:2,c:3,d:4,e:5", list, 4, &n, "L", err,
						sizeof(err)), -E2BIG);
}

static void test_config_flags_full_cluster(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "train", "--role", "worker", "--task-index=1", "--ps", "10.0.0.1:4000",
			       "--workers", "10.0.0.2:3000,10.0.0.3:3000", "--protocol", "kernel",
			       "--mode", "geo", "--geo-k", "5", "--tensor-fuse", "--worker-polling=True",
			       "--wait-timeout", "7" };
	char *envp[] = { NULL };

	assert_int_equal(load(f, envp, 18, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_WORKER);
	assert_int_equal(f->c.task_index, 1);
	assert_int_equal(f->c.n_ps, 1);
	assert_int_equal(f->c.n_workers, 2);
	assert_int_equal(f->c.protocol, PS_PROTO_KERNEL);
	assert_int_equal(f->c.mode, PS_JOB_GEO);
	assert_int_equal(f->c.geo_k, 5);
	assert_true(f->c.tensor_fuse);
	assert_true(f->c.worker_net.enable_polling);
	assert_int_equal(f->c.wait_timeout_s, 7);
	/* kernel: data flows over the control address */
	assert_true(ps_endpoint_equal(&f->c.ps_data[0], &f->c.ps[0]));
	assert_true(ps_endpoint_equal(&f->c.self_data, &f->c.worker[1]));
	assert_int_equal(f->c.origin[PS_F_ROLE], PS_SRC_FLAGS);
}

static void test_config_defaults_core_numbers_follow_connections(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "psd", "--role=ps", "--ps=10.0.0.1:1,10.0.0.2:1,10.0.0.3:1", "--num-workers=12",
			       "--protocol=kernel" };
	const char *argv2[] = { "psd", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=3", "--protocol=kernel" };
	char *envp[] = { NULL };

	assert_int_equal(load(f, envp, 5, argv), 0);
	assert_int_equal(f->c.ps_net.core_number, 8);     /* min(8, 12) */
	assert_int_equal(f->c.worker_net.core_number, 2); /* min(2, 3) */
	assert_false(f->c.ps_net.enable_polling);
	assert_false(f->c.worker_net.enable_polling);
	assert_true(f->c.ps_net.disable_pin_cores);       /* DeepRec: no pinning by default */
	assert_true(f->c.worker_net.disable_pin_cores);
	assert_false(f->c.tensor_fuse);
	assert_int_equal(f->c.mode, PS_JOB_SYNC);
	assert_int_equal(load(f, envp, 5, argv2), 0);
	assert_int_equal(f->c.ps_net.core_number, 3);
	assert_int_equal(f->c.worker_net.core_number, 1);
}

static void test_config_flags_refuse_bad_input(void **state)
{
	struct fx *f = *state;
	char *envp[] = { NULL };
	const char *a1[] = { "t", "--role", "chief" };
	const char *a2[] = { "t", "--bogus" };
	const char *a3[] = { "t", "--role" };
	const char *a4[] = { "t", "stray" };
	const char *a5[] = { "t", "--ps-cores", "0" };

	assert_int_equal(load(f, envp, 3, a1), -EINVAL);
	assert_non_null(strstr(f->err, "--role"));
	assert_int_equal(load(f, envp, 2, a2), -EINVAL);
	assert_non_null(strstr(f->err, "--bogus"));
	assert_int_equal(load(f, envp, 2, a3), -EINVAL);
	assert_non_null(strstr(f->err, "expects a value"));
	assert_int_equal(load(f, envp, 2, a4), -EINVAL);
	assert_non_null(strstr(f->err, "stray"));
	assert_int_equal(load(f, envp, 3, a5), -EINVAL);
	assert_non_null(strstr(f->err, "--ps-cores"));
}

struct app_ctx {
	unsigned epochs;
	int seen;
};

static int app_on_opt(void *ctx, int val, const char *arg, char *err, size_t errlen)
{
	struct app_ctx *a = ctx;

	a->seen++;
	if (val != 1000)
		return -EINVAL;
	return ps_parse_uint(arg, 1, 1000, &a->epochs, "--epochs", err, errlen);
}

static void test_config_flags_app_options_mix(void **state)
{
	struct fx *f = *state;
	static const struct option app_opts[] = { { "epochs", required_argument, NULL, 1000 },
						   { NULL, 0, NULL, 0 } };
	struct app_ctx a = { 0, 0 };
	struct ps_app_opts app = { app_opts, "  --epochs N\n", app_on_opt, &a };
	char *argv[] = { "t", "--epochs", "7", "--role", "ps", "--epochs=9", NULL };
	struct ps_cluster c;
	bool help = true;

	memset(&c, 0, sizeof(c));
	assert_int_equal(ps_flags_parse(6, argv, &app, &c, &help, f->err, sizeof(f->err)), 0);
	assert_false(help);
	assert_int_equal(a.seen, 2);
	assert_int_equal(a.epochs, 9);
	assert_int_equal(c.role, PS_ROLE_PS);
	assert_true(c.set == 1u << PS_F_ROLE);
}

static void test_config_tfconfig_roles_and_chief(void **state)
{
	struct fx *f = *state;
	char *envp[] = { "TF_CONFIG={\"cluster\":{\"chief\":[\"10.0.1.0:2000\"],\"worker\":"
			 "[\"10.0.1.1:2000\",\"10.0.1.2:2000\"],\"ps\":[\"10.0.2.0:3000\",\"10.0.2.1:3000\"]},"
			 "\"task\":{\"type\":\"worker\",\"index\":1}}", "WHARF_PROTOCOL=kernel", NULL };
	char *envp2[] = { "TF_CONFIG={\"cluster\":{\"ps\":[\"10.0.2.0:3000\"],\"worker\":[\"w:1\"]},"
			  "\"task\":{\"type\":\"ps\",\"index\":0}}", "WHARF_PROTOCOL=kernel", NULL };
	const char *argv[] = { "t" };

	assert_int_equal(load(f, envp, 1, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_WORKER);
	assert_int_equal(f->c.n_workers, 3);
	assert_int_equal(f->c.task_index, 2); /* chief is worker 0 */
	assert_string_equal(f->c.worker[0].host, "10.0.1.0");
	assert_int_equal(f->c.n_ps, 2);
	assert_int_equal(f->c.origin[PS_F_PS], PS_SRC_TF_CONFIG);
	assert_int_equal(load(f, envp2, 1, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_PS);
	assert_int_equal(f->c.worker_net.core_number, 1);
}

static void test_config_tfconfig_refuses_bad_json(void **state)
{
	struct fx *f = *state;
	char *e1[] = { "TF_CONFIG={\"cluster\":{\"ps\":[\"p0:3000\"],}", NULL };
	char *e2[] = { "TF_CONFIG={\"cluster\":{\"ps\":[\"p0\"]}}", NULL };
	char *e3[] = { "TF_CONFIG={\"cluster\":{\"ps\":[\"p:1\"]},\"task\":{\"type\":\"evaluator\"}}", NULL };
	char *e4[] = { "TF_CONFIG={\"task\":{\"type\":\"ps\",\"index\":\"0\"}}", NULL };
	const char *argv[] = { "t" };

	assert_int_equal(load(f, e1, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "TF_CONFIG:1:"));
	assert_int_equal(load(f, e2, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "TF_CONFIG: cluster.ps[0]"));
	assert_int_equal(load(f, e3, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "task.type"));
	assert_int_equal(load(f, e4, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "task.index"));
}

static void test_config_paddle_pserver_finds_its_index(void **state)
{
	struct fx *f = *state;
	char *envp[] = { "PADDLE_PSERVERS_IP_PORT_LIST=10.89.176.11:36000,10.89.176.12:36000",
			 "TRAINING_ROLE=PSERVER", "POD_IP=10.89.176.12", "PADDLE_PORT=36000",
			 "PADDLE_TRAINERS_NUM=2", "WHARF_PROTOCOL=kernel", NULL };
	char *bad[] = { "PADDLE_PSERVERS_IP_PORT_LIST=10.89.176.11:36000", "TRAINING_ROLE=PSERVER",
			"POD_IP=10.89.176.99", "PADDLE_PORT=36000", "PADDLE_TRAINERS_NUM=2", NULL };
	const char *argv[] = { "t" };

	assert_int_equal(load(f, envp, 1, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_PS);
	assert_int_equal(f->c.task_index, 1);
	assert_int_equal(f->c.n_workers, 2);
	assert_int_equal(f->c.n_worker_addrs, 0);
	assert_int_equal(f->c.ps_net.core_number, 2); /* min(8, 2 workers) */
	assert_int_equal(load(f, bad, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "POD_IP:PADDLE_PORT"));
}

static void test_config_paddle_trainer_and_errors(void **state)
{
	struct fx *f = *state;
	char *envp[] = { "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:36000", "TRAINING_ROLE=TRAINER",
			 "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ID=1", "WHARF_PROTOCOL=kernel", NULL };
	char *e1[] = { "TRAINING_ROLE=TRAINER", "PADDLE_TRAINERS_NUM=2", NULL };
	char *e2[] = { "TRAINING_ROLE=WORKER", NULL };
	char *e3[] = { "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:36000", "TRAINING_ROLE=TRAINER",
		       "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ID=2", "WHARF_PROTOCOL=kernel", NULL };
	char *e4[] = { "PADDLE_TRAINERS_NUM=two", NULL };
	const char *argv[] = { "t" };

	assert_int_equal(load(f, envp, 1, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_WORKER);
	assert_int_equal(f->c.task_index, 1);
	assert_int_equal(f->c.origin[PS_F_TASK_INDEX], PS_SRC_PADDLE);
	assert_int_equal(load(f, e1, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "PADDLE_TRAINER_ID"));
	assert_int_equal(load(f, e2, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "TRAINING_ROLE"));
	assert_int_equal(load(f, e3, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "task index 2 (from Paddle environment)"));
	assert_int_equal(load(f, e4, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "PADDLE_TRAINERS_NUM"));
}

static void test_config_knobs_env_bools_and_numbers(void **state)
{
	struct fx *f = *state;
	char *envp[] = { "PS_ENABLE_POLLING=True", "WORKER_ENABLE_POLLING=0",
			 "PS_DISABLE_PIN_CORES=false", "WORKER_DISABLE_PIN_CORES=1",
			 "NETWORK_PS_CORE_NUMBER=4", "NETWORK_WORKER_CORE_NUMBER=3", NULL };
	char *bad[] = { "WORKER_DISABLE_PIN_CORES=yes", NULL };
	char *bad2[] = { "NETWORK_PS_CORE_NUMBER=0", NULL };
	const char *argv[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };

	assert_int_equal(load(f, envp, 5, argv), 0);
	assert_true(f->c.ps_net.enable_polling);
	assert_false(f->c.worker_net.enable_polling);
	assert_false(f->c.ps_net.disable_pin_cores);
	assert_true(f->c.worker_net.disable_pin_cores);
	assert_int_equal(f->c.ps_net.core_number, 4); /* explicit beats min(8, 1) */
	assert_int_equal(f->c.worker_net.core_number, 3);
	assert_int_equal(load(f, bad, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "WORKER_DISABLE_PIN_CORES"));
	assert_int_equal(load(f, bad2, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "NETWORK_PS_CORE_NUMBER"));
}

/* WHARF_LOG_LEVEL is applied by the log types themselves; the configuration refuses a bad one. */
static void test_config_log_level_env_checked(void **state)
{
	struct fx *f = *state;
	char *good[] = { "WHARF_LOG_LEVEL=wharf.ps:debug, wharf.*:warning", NULL };
	char *bad[] = { "WHARF_LOG_LEVEL=wharf.ps:debug,wharf.tl:chatty", NULL };
	const char *argv[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };

	assert_int_equal(load(f, good, 5, argv), 0);
	assert_int_equal(load(f, bad, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_LOG_LEVEL: 'wharf.tl:chatty' is not pattern:level"));
}

/* The lower layers' knobs (read where they apply) are refused here when out of range. */
static void test_config_lower_layer_env_checked(void **state)
{
	struct fx *f = *state;
	char *good[] = { "WHARF_IDLE_SPIN_US=0", "WHARF_TCP_RTO_MIN_US=200", "WHARF_TSO=0",
			 "WHARF_TCP_SYNCOOKIES=1", "WHARF_TCP_KEEPALIVE_S=", NULL };
	char *spin[] = { "WHARF_IDLE_SPIN_US=50us", NULL };
	char *rto[] = { "WHARF_TCP_RTO_MIN_US=10", NULL };
	char *tso[] = { "WHARF_TSO=off", NULL };
	const char *argv[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };

	assert_int_equal(load(f, good, 5, argv), 0);
	assert_int_equal(load(f, spin, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_IDLE_SPIN_US"));
	assert_int_equal(load(f, rto, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_TCP_RTO_MIN_US"));
	assert_int_equal(load(f, tso, 5, argv), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_TSO"));
}

static void test_config_file_full_schema(void **state)
{
	struct fx *f = *state;
	const char *path = write_file(f, "c.json",
		"{\n  \"cluster\": {\"ps\": [\"10.0.0.1:4444\"], \"worker\": [\"10.0.0.2:3333\"]},\n"
		"  \"task\": {\"type\": \"ps\", \"index\": 0},\n  \"protocol\": \"kernel\",\n"
		"  \"tensor_fuse\": true, \"fuse\": {\"max_bytes\": 4096, \"max_msgs\": 8, \"flush_us\": 5},\n"
		"  \"mode\": \"async\", \"geo_k\": 3, \"wait_timeout_s\": 9, \"retry_interval_s\": 2,\n"
		"  \"net\": {\"ps\": {\"core_number\": 2, \"enable_polling\": \"True\"}}\n}\n");
	char arg[300];
	const char *argv[] = { "t", arg };
	char *envp[] = { NULL };

	snprintf(arg, sizeof(arg), "--config=%s", path);
	assert_int_equal(load(f, envp, 2, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_PS);
	assert_int_equal(f->c.fuse_max_bytes, 4096);
	assert_int_equal(f->c.fuse_max_msgs, 8);
	assert_int_equal(f->c.fuse_flush_us, 5);
	assert_int_equal(f->c.mode, PS_JOB_ASYNC);
	assert_int_equal(f->c.retry_interval_s, 2);
	assert_int_equal(f->c.ps_net.core_number, 2);
	assert_true(f->c.ps_net.enable_polling);
	assert_int_equal(f->c.origin[PS_F_MODE], PS_SRC_FILE);
}

/* The dpdk data port MTU: every source, its default, its range named in the error. */
static void test_config_mtu_sources_default_and_range(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char *env[] = { "WHARF_MTU=4000", NULL };
	char *env_bad[] = { "WHARF_MTU=9001", NULL };
	const char *base[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };
	const char *flag[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel",
			       "--mtu=9000" };
	const char *flag_bad[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				   "--protocol=kernel", "--mtu", "575" };
	const char *jpath = write_file(f, "m.json", "{\"mtu\": 20000}\n");
	char arg[300];
	const char *file_bad[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				   "--protocol=kernel", arg };

	assert_int_equal(load(f, none, 5, base), 0);
	assert_int_equal(f->c.mtu, 1500);
	assert_int_equal(load(f, env, 5, base), 0);
	assert_int_equal(f->c.mtu, 4000);
	assert_int_equal(f->c.origin[PS_F_MTU], PS_SRC_ENV_KNOBS);
	assert_int_equal(load(f, env, 6, flag), 0);
	assert_int_equal(f->c.mtu, 9000); /* the flag beats the variable */
	assert_int_equal(load(f, env_bad, 5, base), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_MTU"));
	assert_int_equal(load(f, none, 7, flag_bad), -EINVAL);
	assert_non_null(strstr(f->err, "--mtu"));
	snprintf(arg, sizeof(arg), "--config=%s", jpath);
	assert_int_equal(load(f, none, 6, file_bad), -EINVAL);
	assert_non_null(strstr(f->err, "mtu"));
}

/* The GEO log bound from each source, its default and its range (one request's keys .. 2^30). */
static void test_config_geo_log_max_sources_default_and_range(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char *env[] = { "WHARF_GEO_LOG_MAX=70000", NULL };
	char *env_bad[] = { "WHARF_GEO_LOG_MAX=65535", NULL };
	const char *base[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };
	const char *flag[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel",
			       "--geo-log-max=1073741824" };
	const char *flag_bad[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				   "--protocol=kernel", "--geo-log-max", "1073741825" };
	const char *jpath = write_file(f, "g.json", "{\"geo_log_max\": 100000}\n");
	char arg[300];
	const char *file[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
			       "--protocol=kernel", arg };

	assert_int_equal(load(f, none, 5, base), 0);
	assert_int_equal(f->c.geo_log_max, 1u << 20);
	assert_int_equal(load(f, env, 5, base), 0);
	assert_int_equal(f->c.geo_log_max, 70000);
	assert_int_equal(f->c.origin[PS_F_GEO_LOG_MAX], PS_SRC_ENV_KNOBS);
	assert_int_equal(load(f, env, 6, flag), 0);
	assert_int_equal(f->c.geo_log_max, 1u << 30); /* the flag beats the variable */
	assert_int_equal(load(f, env_bad, 5, base), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_GEO_LOG_MAX"));
	assert_int_equal(load(f, none, 7, flag_bad), -EINVAL);
	assert_non_null(strstr(f->err, "--geo-log-max"));
	snprintf(arg, sizeof(arg), "--config=%s", jpath);
	assert_int_equal(load(f, none, 6, file), 0);
	assert_int_equal(f->c.geo_log_max, 100000);
	jpath = write_file(f, "gb.json", "{\"geo_log_max\": 10}\n");
	snprintf(arg, sizeof(arg), "--config=%s", jpath);
	assert_int_equal(load(f, none, 6, file), -EINVAL);
	assert_non_null(strstr(f->err, "geo_log_max"));
}

/* The fault knobs: barrier timeout and policy (PS), ps_lost_state (worker). */
static void test_config_fault_policies_sources_and_refusals(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char *env[] = { "WHARF_BARRIER_TIMEOUT_S=5", "WHARF_BARRIER_POLICY=continue",
			"WHARF_PS_LOST_STATE=continue", NULL };
	char *env_bad[] = { "WHARF_BARRIER_POLICY=retry", NULL };
	char *env_big[] = { "WHARF_BARRIER_TIMEOUT_S=86401", NULL };
	const char *base[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };
	const char *flag[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel",
			       "--barrier-timeout=0", "--barrier-policy=fail", "--ps-lost-state", "fail" };
	const char *flag_bad[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				   "--protocol=kernel", "--ps-lost-state", "ignore" };
	const char *jpath = write_file(f, "b.json", "{\"barrier_timeout_s\": 30, \"barrier_policy\": "
				       "\"continue\", \"ps_lost_state\": \"continue\"}\n");
	const char *jbad = NULL;
	char arg[300];
	const char *file[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
			       "--protocol=kernel", arg };

	assert_int_equal(load(f, none, 5, base), 0);
	assert_int_equal(f->c.barrier_timeout_s, 600);
	assert_int_equal(f->c.barrier_policy, PS_POLICY_FAIL);
	assert_int_equal(f->c.ps_lost_state, PS_POLICY_FAIL);
	assert_int_equal(load(f, env, 5, base), 0);
	assert_int_equal(f->c.barrier_timeout_s, 5);
	assert_int_equal(f->c.barrier_policy, PS_POLICY_CONTINUE);
	assert_int_equal(f->c.ps_lost_state, PS_POLICY_CONTINUE);
	assert_int_equal(f->c.origin[PS_F_BARRIER_POLICY], PS_SRC_ENV_KNOBS);
	assert_int_equal(load(f, env, 9, flag), 0); /* flags beat the variables */
	assert_int_equal(f->c.barrier_timeout_s, 0);
	assert_int_equal(f->c.barrier_policy, PS_POLICY_FAIL);
	assert_int_equal(f->c.ps_lost_state, PS_POLICY_FAIL);
	snprintf(arg, sizeof(arg), "--config=%s", jpath);
	assert_int_equal(load(f, none, 6, file), 0);
	assert_int_equal(f->c.barrier_timeout_s, 30);
	assert_int_equal(f->c.barrier_policy, PS_POLICY_CONTINUE);
	assert_int_equal(f->c.ps_lost_state, PS_POLICY_CONTINUE);
	assert_string_equal(ps_policy_name(f->c.barrier_policy), "continue");
	assert_int_equal(load(f, env_bad, 5, base), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_BARRIER_POLICY: 'retry' expected fail or continue"));
	assert_int_equal(load(f, env_big, 5, base), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_BARRIER_TIMEOUT_S"));
	assert_int_equal(load(f, none, 7, flag_bad), -EINVAL);
	assert_non_null(strstr(f->err, "--ps-lost-state: 'ignore'"));
	jbad = write_file(f, "bb.json", "{\"barrier_policy\": \"wait\"}\n");
	snprintf(arg, sizeof(arg), "--config=%s", jbad);
	assert_int_equal(load(f, none, 6, file), -EINVAL);
	assert_non_null(strstr(f->err, "barrier_policy: 'wait'"));
}

/*
 * EAL arguments: the file's eal_args (a string or an array of words), WHARF_EAL_ARGS above
 * it, a command line's own above both (ps_eal_pick).
 */
static void test_config_eal_args_file_env_command_line(void **state)
{
	struct fx *f = *state;
	const char *spath = write_file(f, "s.json", "{\"eal_args\": \" -l 0  --no-pci \"}\n");
	char sarg[300], aarg[300];
	const char *s_argv[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				 "--protocol=kernel", sarg };
	const char *a_argv[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				 "--protocol=kernel", aarg };
	char *none[] = { NULL };
	char *env[] = { "WHARF_EAL_ARGS=-l 1 --vdev=net_null0", NULL };
	char *cmd[] = { "wharf-x", "-l", "3", NULL };
	struct ps_eal e;
	struct ps_cluster c;
	char big[300], *env_big[] = { NULL, NULL };
	int i;

	snprintf(sarg, sizeof(sarg), "--config=%s", spath);
	assert_int_equal(load(f, none, 6, s_argv), 0);
	assert_string_equal(f->c.eal_args, "-l 0 --no-pci");
	assert_int_equal(f->c.origin[PS_F_EAL_ARGS], PS_SRC_FILE);
	/* The command line has none: the cluster's, behind its program name. */
	ps_eal_pick(&f->c, 1, cmd, &e);
	assert_int_equal(e.argc, 4);
	assert_string_equal(e.argv[0], "wharf-x");
	assert_string_equal(e.argv[1], "-l");
	assert_string_equal(e.argv[3], "--no-pci");
	assert_null(e.argv[4]);
	/* The command line's come first. */
	ps_eal_pick(&f->c, 3, cmd, &e);
	assert_int_equal(e.argc, 3);
	assert_ptr_equal(e.argv, cmd);
	/* The variable beats the file. */
	assert_int_equal(load(f, env, 6, s_argv), 0);
	assert_string_equal(f->c.eal_args, "-l 1 --vdev=net_null0");
	assert_int_equal(f->c.origin[PS_F_EAL_ARGS], PS_SRC_ENV_KNOBS);
	/* An array of words. */
	snprintf(aarg, sizeof(aarg), "--config=%s", write_file(f, "a.json",
		 "{\"eal_args\": [\"-l\", \"0-1\", \"--vdev=virtio_user0,path=/tmp/p.sock\"]}"));
	assert_int_equal(load(f, none, 6, a_argv), 0);
	assert_string_equal(f->c.eal_args, "-l 0-1 --vdev=virtio_user0,path=/tmp/p.sock");
	/* Refused, naming the key or the variable. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(ps_cfg_file_parse("{\"eal_args\": 7}", "x.json", &c, f->err,
					   sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "x.json: eal_args: expected a string or an array of strings"));
	assert_int_equal(ps_cfg_file_parse("{\"eal_args\": [\"-l\", \"0 1\"]}", "x.json", &c,
					   f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "x.json: eal_args[1]: expected one EAL argument"));
	assert_int_equal(ps_cfg_file_parse("{\"eal_args\": [\"-l\", 0]}", "x.json", &c,
					   f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "eal_args[1]"));
	assert_int_equal(c.set, 0);
	snprintf(big, sizeof(big), "WHARF_EAL_ARGS=");
	for (i = 0; i < PS_EAL_MAX_ARGS + 1; i++)
		strcat(big, "-x ");
	env_big[0] = big;
	assert_int_equal(load(f, env_big, 6, s_argv), -E2BIG);
	assert_non_null(strstr(f->err, "WHARF_EAL_ARGS: more than 64 words"));
}

/* The request timeout, request slots and the PS's reply buffers: defaults, sources, ranges. */
static void test_config_request_timeout_and_reply_buffers(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char *env[] = { "WHARF_REQUEST_TIMEOUT_S=5", "WHARF_REPLY_BUFFERS=64", "WHARF_REQUEST_SLOTS=7",
			NULL };
	char *env_bad[] = { "WHARF_REPLY_BUFFERS=0", NULL };
	const char *base[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel" };
	const char *flag[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1", "--protocol=kernel",
			       "--request-timeout=0", "--reply-buffers=8" };
	const char *flag_bad[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
				   "--protocol=kernel", "--request-timeout", "86401" };
	const char *jpath = write_file(f, "r.json", "{\"request_timeout_s\": 9, \"reply_buffers\": 4}\n");
	char arg[300];
	const char *file[] = { "t", "--role=ps", "--ps=10.0.0.1:1", "--num-workers=1",
			       "--protocol=kernel", arg };

	assert_int_equal(load(f, none, 5, base), 0);
	assert_int_equal(f->c.request_timeout_s, 30);
	assert_int_equal(f->c.reply_buffers, 512);
	assert_int_equal(f->c.request_slots, 256);
	assert_int_equal(load(f, env, 5, base), 0);
	assert_int_equal(f->c.request_timeout_s, 5);
	assert_int_equal(f->c.reply_buffers, 64);
	assert_int_equal(f->c.request_slots, 7);
	assert_int_equal(load(f, env, 7, flag), 0);
	assert_int_equal(f->c.request_timeout_s, 0); /* the flag beats the variable; 0: none */
	assert_int_equal(f->c.reply_buffers, 8);
	assert_int_equal(f->c.origin[PS_F_REPLY_BUFFERS], PS_SRC_FLAGS);
	snprintf(arg, sizeof(arg), "--config=%s", jpath);
	assert_int_equal(load(f, none, 6, file), 0);
	assert_int_equal(f->c.request_timeout_s, 9);
	assert_int_equal(f->c.reply_buffers, 4);
	assert_int_equal(load(f, env_bad, 5, base), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_REPLY_BUFFERS"));
	assert_int_equal(load(f, none, 7, flag_bad), -EINVAL);
	assert_non_null(strstr(f->err, "--request-timeout"));
	snprintf(arg, sizeof(arg), "--config=%s",
		 write_file(f, "rb.json", "{\"reply_buffers\": 70000}\n"));
	assert_int_equal(load(f, none, 6, file), -EINVAL);
	assert_non_null(strstr(f->err, "reply_buffers"));
}

static void test_config_file_syntax_error_names_line_and_column(void **state)
{
	struct fx *f = *state;
	const char *path = write_file(f, "bad.json", "{\n  \"protocol\": \"kernel\",\n  \"mode\" \"sync\"\n}\n");
	struct ps_cluster c;
	char want[300];

	memset(&c, 0, sizeof(c));
	assert_int_equal(ps_cfg_file_load(path, &c, f->err, sizeof(f->err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:3:", path);
	assert_non_null(strstr(f->err, want));
	assert_int_equal(c.set, 0); /* nothing applied */
	assert_int_equal(ps_cfg_file_parse("{\"protcol\":\"dpdk\"}", "x.json", &c, f->err,
					   sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "unknown key 'protcol'"));
	assert_int_equal(ps_cfg_file_parse("{\"net\":{\"ps\":{\"core_number\":999}}}", "x.json", &c,
					   f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "net.ps.core_number"));
	assert_int_equal(ps_cfg_file_parse("{\"protocol\":\"kernel\",\"mode\":\"fast\"}", "x.json", &c,
					   f->err, sizeof(f->err)), -EINVAL);
	assert_int_equal(c.set, 0); /* protocol parsed before mode failed: still not applied */
	assert_int_equal(ps_cfg_file_load("/nonexistent/x.json", &c, f->err, sizeof(f->err)), -ENOENT);
}

static void test_config_precedence_flags_tf_paddle_env_file(void **state)
{
	struct fx *f = *state;
	const char *path = write_file(f, "p.json",
		"{\"cluster\":{\"ps\":[\"10.0.0.6:1\"],\"worker\":[\"10.0.0.7:1\"]},\"mode\":\"async\","
		"\"protocol\":\"kernel\",\"geo_k\":4,\"net\":{\"ps\":{\"core_number\":5}}}");
	char arg[300];
	const char *argv[] = { "t", arg, "--mode=geo" };
	char *envp[] = { "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.8:1", "TRAINING_ROLE=TRAINER",
			 "PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=1", "NETWORK_PS_CORE_NUMBER=6",
			 "TF_CONFIG={\"cluster\":{\"ps\":[\"10.0.0.9:1\"],\"worker\":[\"10.0.0.10:1\"]}}", NULL };

	snprintf(arg, sizeof(arg), "--config=%s", path);
	assert_int_equal(load(f, envp, 3, argv), 0);
	assert_string_equal(f->c.ps[0].host, "10.0.0.9");     /* TF_CONFIG > Paddle > file */
	assert_int_equal(f->c.role, PS_ROLE_WORKER);          /* only Paddle names a role */
	assert_int_equal(f->c.mode, PS_JOB_GEO);             /* flags > file */
	assert_int_equal(f->c.geo_k, 4);                      /* file only */
	assert_int_equal(f->c.ps_net.core_number, 6);         /* env > file */
	assert_int_equal(f->c.origin[PS_F_PS], PS_SRC_TF_CONFIG);
	assert_int_equal(f->c.origin[PS_F_MODE], PS_SRC_FLAGS);
	assert_int_equal(f->c.origin[PS_F_GEO_K], PS_SRC_FILE);
}

static void test_config_epmap_parse_and_errors(void **state)
{
	struct fx *f = *state;
	struct ps_epmap *m = calloc(1, sizeof(*m));
	struct ps_endpoint ctl = { .host = "127.0.0.1", .port = 4444 };
	const struct ps_endpoint *d;

	assert_non_null(m);
	assert_int_equal(ps_epmap_parse("# map\n\n127.0.0.1:3333=127.0.0.1:5555\n"
					" 127.0.0.1:4444 = 127.0.0.1:6666  # ps0\r\n", "em", m, f->err,
					sizeof(f->err)), 0);
	assert_int_equal(m->n, 2);
	d = ps_epmap_lookup(m, &ctl);
	assert_non_null(d);
	assert_int_equal(d->port, 6666);
	assert_int_equal(m->e[1].line, 4);
	assert_int_equal(ps_epmap_parse("a:1=b:2\nnonsense\n", "em", m, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "em:2:"));
	assert_non_null(strstr(f->err, "control_ip:port=data_ip:port"));
	assert_int_equal(m->n, 2); /* failed parse left the old map */
	assert_int_equal(ps_epmap_parse("a:1=b:2\n\na:1=c:3\n", "em", m, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "em:3:"));
	assert_non_null(strstr(f->err, "line 1"));
	assert_int_equal(ps_epmap_parse("a:1=b\n", "em", m, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "em:1: data address"));
	free(m);
}

static void test_config_epmap_fills_data_for_dpdk(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "t", "--role=worker", "--task-index=1", "--ps=127.0.0.1:4444",
			       "--workers=127.0.0.1:3333,127.0.0.1:3334" };
	char envvar[300];
	char *envp[] = { envvar, NULL };

	write_file(f, ".endpoint_map", "127.0.0.1:3333=10.1.0.2:5555\n127.0.0.1:3334=10.1.0.3:5555\n"
		   "127.0.0.1:4444=10.1.0.1:6666\n");
	/* DeepRec's variable names a directory */
	snprintf(envvar, sizeof(envvar), "TF_SEASTAR_ENDPOINT_MAP_PATH=%s", f->dir);
	assert_int_equal(load(f, envp, 5, argv), 0);
	assert_string_equal(f->c.ps_data[0].host, "10.1.0.1");
	assert_int_equal(f->c.ps_data[0].port, 6666);
	assert_string_equal(f->c.self_data.host, "10.1.0.3");
	assert_true(f->c.have_self_data);
	assert_true(f->c.ps_data[0].resolved);
	assert_int_equal(f->c.ps_data[0].ip, 0x0a010001);
	assert_int_equal(f->c.data_prefix, 24); /* the default */
	assert_false(f->c.data_gateway.resolved);
	/* a PS the map leaves out: its workers take its data address from its health answer */
	write_file(f, ".endpoint_map", "127.0.0.1:3333=10.1.0.2:5555\n127.0.0.1:3334=10.1.0.3:5555\n");
	assert_int_equal(load(f, envp, 5, argv), 0);
	assert_string_equal(f->c.ps_data[0].host, "");
	assert_false(f->c.ps_data[0].resolved);
	snprintf(envvar, sizeof(envvar), "TF_SEASTAR_ENDPOINT_MAP_PATH=%s/none", f->dir);
	assert_int_equal(load(f, envp, 5, argv), -ENOENT);
	assert_non_null(strstr(f->err, "TF_SEASTAR_ENDPOINT_MAP_PATH"));
}

static void test_config_finalize_refuses_inconsistent_cluster(void **state)
{
	struct fx *f = *state;
	char *envp[] = { "WHARF_PROTOCOL=kernel", NULL };
	const char *a1[] = { "t", "--ps=a:1", "--num-workers=1" };
	const char *a2[] = { "t", "--role=worker", "--num-workers=1" };
	const char *a3[] = { "t", "--role=ps", "--ps=a:1,a:1", "--num-workers=1" };
	const char *a4[] = { "t", "--role=ps", "--ps=a:1", "--workers=b:1,c:1", "--num-workers=1" };
	const char *a5[] = { "t", "--role=ps", "--task-index=1", "--ps=a:1", "--num-workers=1" };
	const char *a6[] = { "t", "--role=ps", "--ps=a:1" };

	assert_int_equal(load(f, envp, 3, a1), -EINVAL);
	assert_non_null(strstr(f->err, "no role"));
	assert_int_equal(load(f, envp, 3, a2), -EINVAL);
	assert_non_null(strstr(f->err, "no parameter servers"));
	assert_int_equal(load(f, envp, 4, a3), -EINVAL);
	assert_non_null(strstr(f->err, "appears twice"));
	assert_int_equal(load(f, envp, 5, a4), -EINVAL);
	assert_non_null(strstr(f->err, "does not match"));
	assert_int_equal(load(f, envp, 5, a5), -EINVAL);
	assert_non_null(strstr(f->err, "task index 1 (from flags)"));
	assert_int_equal(load(f, envp, 3, a6), -EINVAL);
	assert_non_null(strstr(f->err, "number of workers unknown"));
}

static void test_config_dpdk_worker_without_address_needs_data_addr(void **state)
{
	struct fx *f = *state;
	char path[300];
	char *envp[] = { NULL };
	const char *a1[] = { "t", "--role=worker", "--ps=127.0.0.1:1", "--num-workers=2", path };
	const char *a2[] = { "t", "--role=worker", "--ps=127.0.0.1:1", "--num-workers=2", path,
			     "--data-addr=10.9.0.5" };

	snprintf(path, sizeof(path), "--endpoint-map=%s",
		 write_file(f, "em", "127.0.0.1:1=10.9.0.1:7000\n"));
	assert_int_equal(load(f, envp, 5, a1), -EINVAL);
	assert_non_null(strstr(f->err, "--data-addr"));
	assert_int_equal(load(f, envp, 6, a2), 0);
	assert_string_equal(f->c.self_data.host, "10.9.0.5");
}

/*
 * The worked examples in configs/ must load. Env files are read the simple way a shell would
 * for them: "export NAME=VALUE", surrounding quotes and a trailing "  # comment" removed,
 * lines using command substitution skipped. Tests run from the repository root.
 */
static int read_env_file(const char *path, char *store, size_t cap, char **envp, int max)
{
	char line[1024];
	size_t used = 0;
	int n = 0;
	FILE *fp = fopen(path, "r");

	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp) != NULL && n < max - 1) {
		char *v, *c, *end;
		if (strncmp(line, "export ", 7) != 0 || strstr(line, "$(") != NULL)
			continue;
		line[strcspn(line, "\n")] = '\0';
		c = strstr(line, "  #");
		if (c != NULL)
			*c = '\0';
		end = line + strlen(line);
		while (end > line && end[-1] == ' ')
			*--end = '\0';
		v = strchr(line, '=');
		assert_non_null(v);
		if ((v[1] == '\'' || v[1] == '"') && end[-1] == v[1]) {
			end[-1] = '\0';
			memmove(v + 1, v + 2, strlen(v + 2) + 1);
		}
		assert_true(used + strlen(line + 7) + 1 <= cap);
		envp[n++] = strcpy(store + used, line + 7);
		used += strlen(line + 7) + 1;
	}
	fclose(fp);
	envp[n] = NULL;
	return n;
}

static void test_config_examples_in_configs_load(void **state)
{
	struct fx *f = *state;
	char store[4096], *envp[32], epvar[64] = "TF_SEASTAR_ENDPOINT_MAP_PATH=configs";
	const char *a_file[] = { "t", "--config=configs/cluster.json" };
	const char *a_none[] = { "t" };
	const char *a_tr[] = { "t", "--data-addr=198.19.0.9" };
	struct ps_epmap *m = calloc(1, sizeof(*m));
	int n;

	assert_non_null(m);
	assert_int_equal(ps_epmap_load("configs/.endpoint_map", m, f->err, sizeof(f->err)), 0);
	assert_int_equal(m->n, 6);
	free(m);
	envp[0] = NULL;
	assert_int_equal(load(f, envp, 2, a_file), 0);
	assert_int_equal(f->c.role, PS_ROLE_WORKER);
	assert_true(f->c.tensor_fuse);
	assert_string_equal(f->c.self_data.host, "198.19.0.2");
	assert_string_equal(f->c.ps_data[0].host, "198.19.0.1");

	n = read_env_file("configs/tf_config.env", store, sizeof(store), envp, 31);
	envp[n++] = epvar;
	envp[n] = NULL;
	assert_int_equal(load(f, envp, 1, a_none), 0);
	assert_int_equal(f->c.task_index, 1);
	assert_string_equal(f->c.self_data.host, "198.19.0.3");
	assert_int_equal(f->c.ps_net.core_number, 2);

	n = read_env_file("configs/paddle_pserver.env", store, sizeof(store), envp, 31);
	envp[n++] = epvar;
	envp[n] = NULL;
	assert_int_equal(load(f, envp, 1, a_none), 0);
	assert_int_equal(f->c.role, PS_ROLE_PS);
	assert_int_equal(f->c.ps_data[0].port, 6666);

	n = read_env_file("configs/paddle_trainer.env", store, sizeof(store), envp, 31);
	envp[n++] = epvar;
	envp[n] = NULL;
	assert_int_equal(load(f, envp, 2, a_tr), 0);
	assert_int_equal(f->c.role, PS_ROLE_WORKER);
	assert_string_equal(f->c.self_data.host, "198.19.0.9"); /* --data-addr beats the map */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_parsers_accept_and_refuse),
		cmocka_unit_test_setup_teardown(test_config_flags_full_cluster, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_defaults_core_numbers_follow_connections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_flags_refuse_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_flags_app_options_mix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_tfconfig_roles_and_chief, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_tfconfig_refuses_bad_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_paddle_pserver_finds_its_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_paddle_trainer_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_knobs_env_bools_and_numbers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_log_level_env_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_lower_layer_env_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_file_full_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_eal_args_file_env_command_line, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_config_mtu_sources_default_and_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_request_timeout_and_reply_buffers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_config_fault_policies_sources_and_refusals, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_config_geo_log_max_sources_default_and_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_file_syntax_error_names_line_and_column, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_precedence_flags_tf_paddle_env_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_epmap_parse_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_epmap_fills_data_for_dpdk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_finalize_refuses_inconsistent_cluster, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_dpdk_worker_without_address_needs_data_addr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_examples_in_configs_load, setup, teardown),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
