/*
 * test_addr.c — cluster addressing: host names resolved by the system (getaddrinfo through
 * /etc/hosts' localhost; a name under the reserved .invalid domain for one that does not
 * resolve), each logged once; a Paddle server list of names; the data plane's prefix,
 * gateway and interface knobs in their three spellings, bad values refused naming the
 * source; an interface's configuration (the loopback) as the data plane.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_core/ps_config.h"

#define NOHOST "wharf-no-such-host.invalid" /* RFC 6761: never resolves */

struct fx {
	char dir[64];
	char err[512];
	char path[256];
	char log[4096]; /* every line the resolver logged, '\n' separated */
	struct ps_cluster c;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/wc_addr_XXXXXX");
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

/* The system's lookup; the log kept for the test to read. */
static void keep_log(void *ctx, const char *line)
{
	struct fx *f = ctx;
	size_t off = strlen(f->log);

	snprintf(f->log + off, sizeof(f->log) - off, "%s\n", line);
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;

	for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * The sources ps_config_load reads (flags, the JSON file they name, the environment), merged
 * in its order, then finalized with the system resolver logging into f->log.
 */
static int load(struct fx *f, char **envp, int argc, const char **argv)
{
	struct ps_resolver r = { ps_resolve_system, keep_log, f };
	struct ps_cluster *s = calloc(5, sizeof(*s));
	char *av[32];
	bool help;
	int i, rc;

	assert_non_null(s);
	assert_true(argc < 32);
	for (i = 0; i < argc; i++)
		av[i] = (char *)argv[i];
	av[argc] = NULL;
	f->err[0] = '\0';
	f->log[0] = '\0';
	rc = ps_flags_parse(argc, av, NULL, &s[0], &help, f->err, sizeof(f->err));
	if (rc == 0 && s[0].config_path[0] != '\0')
		rc = ps_cfg_file_load(s[0].config_path, &s[1], f->err, sizeof(f->err));
	if (rc == 0)
		rc = ps_cfg_env_knobs(envp, &s[2], f->err, sizeof(f->err));
	if (rc == 0)
		rc = ps_cfg_env_paddle(envp, &s[3], f->err, sizeof(f->err));
	if (rc == 0)
		rc = ps_cfg_env_tfconfig(envp, &s[4], f->err, sizeof(f->err));
	if (rc == 0) {
		ps_cluster_init(&f->c);
		ps_cluster_merge(&f->c, &s[1], PS_SRC_FILE);
		ps_cluster_merge(&f->c, &s[2], PS_SRC_ENV_KNOBS);
		ps_cluster_merge(&f->c, &s[3], PS_SRC_PADDLE);
		ps_cluster_merge(&f->c, &s[4], PS_SRC_TF_CONFIG);
		ps_cluster_merge(&f->c, &s[0], PS_SRC_FLAGS);
		rc = ps_cluster_finalize_with(&f->c, envp, &r, f->err, sizeof(f->err));
	}
	free(s);
	return rc;
}

static void test_addr_endpoint_grammar_names_and_literals(void **state)
{
	char err[256], name[300];
	struct ps_endpoint ep;

	(void)state;
	assert_int_equal(ps_parse_endpoint("ps-0.job.ns.svc:2222", 20, false, &ep, "x", err,
					   sizeof(err)), 0);
	assert_string_equal(ep.host, "ps-0.job.ns.svc");
	assert_false(ep.resolved);
	/* digits and dots only: a dotted quad, never getaddrinfo's "10.1" = 10.0.0.1 */
	assert_int_equal(ps_parse_endpoint("10.1:80", 7, false, &ep, "--ps", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "--ps"));
	assert_int_equal(ps_parse_endpoint("1.2.3.256:80", 12, false, &ep, "x", err, sizeof(err)),
			 -EINVAL);
	/* a DNS name may be 253 bytes */
	memset(name, 'a', 253);
	for (int i = 60; i < 253; i += 61)
		name[i] = '.';
	strcpy(name + 253, ":1");
	assert_int_equal(ps_parse_endpoint(name, 255, false, &ep, "x", err, sizeof(err)), 0);
	assert_int_equal(strlen(ep.host), 253);
	memset(name, 'a', 256);
	strcpy(name + 256, ":1");
	assert_int_equal(ps_parse_endpoint(name, 258, false, &ep, "x", err, sizeof(err)), -EINVAL);
}

/* Each name is looked up and logged once, however many places use it; literals are not. */
static void test_addr_names_resolved_once_and_logged(void **state)
{
	struct fx *f = *state;
	char mapflag[300];
	const char *argv[] = { "t", "--role=worker", "--task-index=1", "--ps=localhost:4444",
			       "--workers=127.0.0.1:3333,LOCALHOST:3334", mapflag };
	char *envp[] = { NULL };

	snprintf(mapflag, sizeof(mapflag), "--endpoint-map=%s", write_file(f, "em",
		 "localhost:4444=localhost:6666\nLOCALHOST:3334=127.0.0.3:5555\n"));
	assert_int_equal(load(f, envp, 6, argv), 0);
	assert_string_equal(f->c.ps[0].host, "localhost"); /* the name is kept for messages */
	assert_true(f->c.ps[0].resolved);
	assert_int_equal(f->c.ps[0].ip, 0x7f000001);
	assert_true(f->c.ps_data[0].resolved);
	assert_int_equal(f->c.ps_data[0].ip, 0x7f000001);
	assert_int_equal(f->c.ps_data[0].port, 6666);
	assert_int_equal(f->c.worker[1].ip, 0x7f000001);
	assert_int_equal(f->c.self_data.ip, 0x7f000003);
	/* a worker does not resolve the other workers */
	assert_false(f->c.worker[0].resolved);
	assert_int_equal(count(f->log, "resolved "), 1);
	assert_int_equal(count(f->log, "resolved LOCALHOST -> 127.0.0.1 (--workers[1])\n") +
			 count(f->log, "resolved localhost -> 127.0.0.1 (--ps[0])\n"), 1);
}

/* A name that does not resolve: retried until wait_timeout_s, refused naming its source. */
static void test_addr_unresolvable_name_refused_naming_source(void **state)
{
	struct fx *f = *state;
	const char *a1[] = { "t", "--role=worker", "--ps=" NOHOST ":4444", "--num-workers=1",
			     "--protocol=kernel", "--wait-timeout=1", "--retry-interval=1" };
	char *tf[] = { "TF_CONFIG={\"cluster\":{\"ps\":[\"127.0.0.1:1\",\"" NOHOST ":2\"],"
		       "\"worker\":[\"127.0.0.1:3\"]},\"task\":{\"type\":\"worker\",\"index\":0}}",
		       "WHARF_PROTOCOL=kernel", "WHARF_WAIT_TIMEOUT_S=1", NULL };
	char *none[] = { NULL };
	const char *a2[] = { "t", "--wait-timeout=1" };
	char map[300];
	const char *a3[] = { "t", "--role=ps", "--ps=127.0.0.1:4444", "--num-workers=1",
			     "--wait-timeout=1", map };
	struct timespec t0, t1;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(load(f, none, 7, a1), -EHOSTUNREACH);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_non_null(strstr(f->err, "--ps[0]: host name '" NOHOST "' does not resolve"));
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 900 && ms < 10000); /* retried for --wait-timeout=1 */
	assert_non_null(strstr(f->log, "not resolved yet"));
	assert_int_equal(load(f, tf, 2, a2), -EHOSTUNREACH);
	assert_non_null(strstr(f->err, "TF_CONFIG cluster.ps[1]: host name '" NOHOST "'"));
	/* the data address: its .endpoint_map line */
	snprintf(map, sizeof(map), "--endpoint-map=%s",
		 write_file(f, "m", "127.0.0.1:4444=" NOHOST ":6666\n"));
	assert_int_equal(load(f, none, 6, a3), -EHOSTUNREACH);
	assert_non_null(strstr(f->err, "/m, this node's data address: host name '" NOHOST "'"));
	/* wharf-ctl's single resolution: no retry */
	struct ps_endpoint ep = { .host = NOHOST, .port = 1 };
	assert_int_equal(ps_endpoint_resolve(&ep, &(struct ps_resolver){ ps_resolve_system, NULL,
			 NULL }, "HOST:PORT", f->err, sizeof(f->err)), -EHOSTUNREACH);
	assert_non_null(strstr(f->err, "HOST:PORT: host name"));
}

/* Kubeflow's PaddleJob names the servers by service, POD_IP is an address. */
static void test_addr_paddle_pserver_list_of_names(void **state)
{
	struct fx *f = *state;
	char *by_name[] = { "PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.2:36000,localhost:36000",
			    "TRAINING_ROLE=PSERVER", "POD_IP=127.0.0.1", "PADDLE_PORT=36000",
			    "PADDLE_TRAINERS_NUM=1", "WHARF_PROTOCOL=kernel", NULL };
	char *absent[] = { "PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.2:36000,localhost:36000",
			   "TRAINING_ROLE=PSERVER", "POD_IP=127.0.0.9", "PADDLE_PORT=36000",
			   "PADDLE_TRAINERS_NUM=1", "WHARF_PROTOCOL=kernel", NULL };
	const char *argv[] = { "t" };

	assert_int_equal(load(f, by_name, 1, argv), 0);
	assert_int_equal(f->c.role, PS_ROLE_PS);
	assert_int_equal(f->c.task_index, 1);
	assert_int_equal(f->c.self_data.ip, 0x7f000001);
	assert_int_equal(load(f, absent, 1, argv), -EINVAL);
	assert_non_null(strstr(f->err, "POD_IP:PADDLE_PORT 127.0.0.9:36000 is not in "
				       "PADDLE_PSERVERS_IP_PORT_LIST"));
}

/* --data-prefix / data_prefix / WHARF_DATA_PREFIX and the gateway: precedence and checks. */
static void test_addr_data_prefix_and_gateway_three_spellings(void **state)
{
	struct fx *f = *state;
	char cfg[300], map[300];
	const char *base[] = { "t", "--role=worker", "--ps=127.0.0.1:4444", "--num-workers=1",
			       "--data-addr=10.9.0.5", map, cfg };
	const char *flags[] = { "t", "--role=worker", "--ps=127.0.0.1:4444", "--num-workers=1",
				"--data-addr=10.9.0.5", map, cfg, "--data-prefix=16",
				"--data-gateway=localhost" };
	char *env[] = { "WHARF_DATA_PREFIX=20", "WHARF_DATA_GATEWAY=10.9.15.254", NULL };
	char *none[] = { NULL };

	snprintf(map, sizeof(map), "--endpoint-map=%s",
		 write_file(f, "em", "127.0.0.1:4444=10.9.1.1:6666\n"));
	snprintf(cfg, sizeof(cfg), "--config=%s", write_file(f, "c.json",
		 "{\"data_prefix\": 22, \"data_gateway\": \"10.9.3.254\", \"protocol\": \"dpdk\"}"));
	assert_int_equal(load(f, none, 7, base), 0);
	assert_int_equal(f->c.data_prefix, 22);
	assert_int_equal(f->c.data_gateway.ip, 0x0a0903fe);
	assert_int_equal(f->c.origin[PS_F_DATA_PREFIX], PS_SRC_FILE);
	assert_int_equal(load(f, env, 7, base), 0);
	assert_int_equal(f->c.data_prefix, 20);
	assert_int_equal(f->c.data_gateway.ip, 0x0a090ffe);
	assert_int_equal(f->c.origin[PS_F_DATA_GATEWAY], PS_SRC_ENV_KNOBS);
	/* flags win; the gateway is checked against the subnet: localhost is not on 10.9/16 */
	assert_int_equal(load(f, env, 9, flags), -EINVAL);
	assert_non_null(strstr(f->err, "data gateway localhost (--data-gateway) is not on this "
				       "node's data subnet 10.9.0.0/16"));
	flags[8] = "--data-gateway=10.9.0.5";
	assert_int_equal(load(f, env, 9, flags), -EINVAL);
	assert_non_null(strstr(f->err, "own data address"));
	flags[8] = "--data-gateway=none";
	assert_int_equal(load(f, env, 9, flags), 0);
	assert_int_equal(f->c.data_prefix, 16);
	assert_false(f->c.data_gateway.resolved);
	/* without any: /24, no gateway */
	snprintf(cfg, sizeof(cfg), "--protocol=dpdk");
	assert_int_equal(load(f, none, 7, base), 0);
	assert_int_equal(f->c.data_prefix, 24);
	assert_false(f->c.data_gateway.resolved);
}

static void expect_refused(struct fx *f, char **envp, int argc, const char **argv,
			   const char *source)
{
	assert_int_equal(load(f, envp, argc, argv), -EINVAL);
	if (strstr(f->err, source) == NULL)
		fail_msg("'%s' does not name %s", f->err, source);
}

static void test_addr_data_knobs_bad_values_refused(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char arg[300];
	const char *a[] = { "t", "--role=ps", "--ps=127.0.0.1:1", "--num-workers=1", arg };
	static const char *const bad_flags[][2] = {
		{ "--data-prefix=0", "--data-prefix" }, { "--data-prefix=33", "--data-prefix" },
		{ "--data-prefix=x", "--data-prefix" }, { "--data-gateway=10.0.0.1:80", "--data-gateway" },
		{ "--data-gateway=10.1", "--data-gateway" }, { "--data-iface=a/b", "--data-iface" },
		{ "--data-iface=0123456789abcdef", "--data-iface" }, { "--data-iface=", "--data-iface" },
	};
	static const char *const bad_env[][2] = {
		{ "WHARF_DATA_PREFIX=40", "WHARF_DATA_PREFIX" },
		{ "WHARF_DATA_GATEWAY=-", "WHARF_DATA_GATEWAY" },
		{ "WHARF_DATA_IFACE=net 1", "WHARF_DATA_IFACE" },
	};
	static const char *const bad_json[][2] = {
		{ "{\"data_prefix\": 0}", "data_prefix" }, { "{\"data_prefix\": \"24\"}", "data_prefix" },
		{ "{\"data_gateway\": 7}", "data_gateway" }, { "{\"data_iface\": \"a:b\"}", "data_iface" },
	};
	char *env[2] = { NULL, NULL };
	size_t i;

	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
		snprintf(arg, sizeof(arg), "%s", bad_flags[i][0]);
		expect_refused(f, none, 5, a, bad_flags[i][1]);
	}
	snprintf(arg, sizeof(arg), "--protocol=dpdk");
	for (i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		env[0] = (char *)bad_env[i][0];
		expect_refused(f, env, 5, a, bad_env[i][1]);
	}
	for (i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
		snprintf(arg, sizeof(arg), "--config=%s", write_file(f, "b.json", bad_json[i][0]));
		expect_refused(f, none, 5, a, bad_json[i][1]);
	}
}

/* The loopback as the data interface: its address and /8, no gateway route. */
static void test_addr_data_iface_gives_address_and_prefix(void **state)
{
	struct fx *f = *state;
	char *none[] = { NULL };
	char *env[] = { "WHARF_DATA_IFACE=lo", NULL };
	const char *a[] = { "t", "--role=ps", "--ps=127.0.0.1:4444", "--num-workers=1",
			    "--protocol=dpdk", "--data-iface=lo" };
	const char *a_addr[] = { "t", "--role=ps", "--ps=127.0.0.1:4444", "--num-workers=1",
				 "--protocol=dpdk", "--data-addr=127.0.0.9:7000", "--data-prefix=30" };
	const char *a_bad[] = { "t", "--role=ps", "--ps=127.0.0.1:4444", "--num-workers=1",
				"--protocol=dpdk", "--data-iface=wharfnosuch0" };
	const char *a_none[] = { "t", "--role=ps", "--ps=127.0.0.1:4444", "--num-workers=1",
				 "--protocol=dpdk" };
	uint32_t ip, gw;
	unsigned prefix;

	assert_int_equal(ps_iface_ipv4("lo", &ip, &prefix, &gw, f->err, sizeof(f->err)), 0);
	assert_int_equal(ip, 0x7f000001);
	assert_int_equal(prefix, 8);
	assert_int_equal(gw, 0);
	assert_int_equal(load(f, none, 6, a), 0);
	assert_int_equal(f->c.self_data.ip, 0x7f000001);
	assert_int_equal(f->c.self_data.port, 4444); /* the control port */
	assert_int_equal(f->c.data_prefix, 8);
	assert_non_null(strstr(f->log, "data plane 127.0.0.1:4444/8, gateway none (interface lo "
				       "from --data-iface)"));
	/* an address given beats the interface's; an explicit prefix beats its /8 */
	assert_int_equal(load(f, env, 7, a_addr), 0);
	assert_int_equal(f->c.self_data.ip, 0x7f000009);
	assert_int_equal(f->c.self_data.port, 7000);
	assert_int_equal(f->c.data_prefix, 30);
	assert_int_equal(load(f, none, 6, a_bad), -ENODEV);
	assert_non_null(strstr(f->err, "--data-iface: interface wharfnosuch0: no such interface"));
	assert_int_equal(load(f, none, 5, a_none), -EINVAL);
	assert_non_null(strstr(f->err, "--data-addr or --data-iface"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr_endpoint_grammar_names_and_literals),
		cmocka_unit_test_setup_teardown(test_addr_names_resolved_once_and_logged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_addr_unresolvable_name_refused_naming_source, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_addr_paddle_pserver_list_of_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_addr_data_prefix_and_gateway_three_spellings, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_addr_data_knobs_bad_values_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_addr_data_iface_gives_address_and_prefix, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
