/*
 * test_ctl.c — the control plane's locks (ps_net_auth.c, ps_net.c): the token (its
 * checks, a made one's private file, where it comes from and in what order, the constant-time
 * compare), the paths "save PATH" may name, and a live PS over protocol=kernel on 127.0.0.1
 * (a server fleet in a thread): health without a token, status/save/shutdown refused without
 * it or with a wrong one, save confined to the checkpoint's directory, a connection that sent
 * a data request refused a control command and one that sent a command refused data, and
 * ps_fleet_stop_servers finding the token the server made.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "transport/tl_wire.h"

#include "ps_core/ps_fleet.h"
#include "ps_core/ps_net.h"

#define TOK_A "0123456789abcdef-token-A"
#define DIM 2

struct fx {
	char dir[64], run[96], err[512];
	unsigned port;
	char env[12][PS_PATH_LEN + 64];
	char *envp[13];
	unsigned n_env;
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/wc_ctl_test_%d", (int)getpid());
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	if (mkdir(f->dir, 0755) != 0)
		return -1;
	snprintf(f->run, sizeof(f->run), "%s/run", f->dir);
	/* A port of our own: other engineers' tests run on this machine at the same time. */
	f->port = 39000 + (unsigned)(getpid() % 8000);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void env_add(struct fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void env_add(struct fx *f, const char *fmt, ...)
{
	va_list ap;

	assert_true(f->n_env < 12);
	va_start(ap, fmt);
	vsnprintf(f->env[f->n_env], sizeof(f->env[0]), fmt, ap);
	va_end(ap);
	f->envp[f->n_env] = f->env[f->n_env];
	f->n_env++;
	f->envp[f->n_env] = NULL;
}

static void put_file(const char *path, const char *text, mode_t mode)
{
	FILE *o = fopen(path, "w");

	assert_non_null(o);
	fputs(text, o);
	fclose(o);
	chmod(path, mode);
}

/* ---- the token */

static void test_ctl_token_check_and_read(void **state)
{
	struct fx *f = *state;
	char p[256], tok[PS_CTL_TOKEN_MAX + 1];

	assert_int_equal(ps_ctl_token_check(TOK_A, "x", f->err, sizeof(f->err)), 0);
	assert_int_equal(ps_ctl_token_check("short", "x", f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "16..256"));
	assert_int_equal(ps_ctl_token_check("0123456789 abcdefgh", "x", f->err, sizeof(f->err)),
			 -EINVAL);
	assert_non_null(strstr(f->err, "0x20"));
	snprintf(p, sizeof(p), "%s/tok", f->dir);
	put_file(p, TOK_A "\n", 0600);                /* echo's newline goes */
	assert_int_equal(ps_ctl_token_read(p, tok, sizeof(tok), "t", f->err, sizeof(f->err)), 0);
	assert_string_equal(tok, TOK_A);
	put_file(p, "two words and more\n", 0600);
	assert_int_equal(ps_ctl_token_read(p, tok, sizeof(tok), "t", f->err, sizeof(f->err)),
			 -EINVAL);
	assert_non_null(strstr(f->err, p));           /* the file is named */
	unlink(p);
	assert_int_equal(ps_ctl_token_read(p, tok, sizeof(tok), "t", f->err, sizeof(f->err)),
			 -ENOENT);
}

/* A made token: 64 hex digits, a 0600 file in a 0700 run directory; a shared one refused. */
static void test_ctl_token_made_private_and_found(void **state)
{
	struct fx *f = *state;
	struct ps_endpoint ep = { .host = "127.0.0.1", .port = 4444 };
	char tok[PS_CTL_TOKEN_MAX + 1], tok2[PS_CTL_TOKEN_MAX + 1], path[PS_PATH_LEN + 96];
	char src[PS_PATH_LEN + 96];
	struct stat st;

	assert_int_equal(ps_ctl_token_make(f->run, &ep, tok, sizeof(tok), path, sizeof(path),
					   f->err, sizeof(f->err)), 0);
	assert_int_equal(strlen(tok), 64);
	assert_int_equal(strspn(tok, "0123456789abcdef"), 64);
	assert_int_equal(stat(f->run, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_non_null(strstr(path, "/ctl-127.0.0.1-4444.token"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* a client with the same run directory finds it by the endpoint */
	env_add(f, "WHARF_RUNTIME_DIR=%s", f->run);
	assert_int_equal(ps_ctl_token_find(NULL, f->envp, &ep, tok2, sizeof(tok2), src, sizeof(src),
					   f->err, sizeof(f->err)), 0);
	assert_string_equal(tok2, tok);
	/* another endpoint: no token, and that is not an error (health needs none) */
	ep.port = 4445;
	assert_int_equal(ps_ctl_token_find(NULL, f->envp, &ep, tok2, sizeof(tok2), src, sizeof(src),
					   f->err, sizeof(f->err)), 0);
	assert_string_equal(tok2, "");
	/* the variable comes before the run directory's file */
	env_add(f, "WHARF_CTL_TOKEN=%s", TOK_A);
	ep.port = 4444;
	assert_int_equal(ps_ctl_token_find(NULL, f->envp, &ep, tok2, sizeof(tok2), src, sizeof(src),
					   f->err, sizeof(f->err)), 0);
	assert_string_equal(tok2, TOK_A);
	/* unmake leaves a file that holds another token (a newer node's) */
	put_file(path, TOK_A, 0600);
	ps_ctl_token_unmake(path, tok);
	assert_int_equal(access(path, F_OK), 0);
	ps_ctl_token_unmake(path, TOK_A);
	assert_int_equal(access(path, F_OK), -1);
	/* a run directory others can read is refused, so is a link to one */
	chmod(f->run, 0755);
	assert_int_equal(ps_ctl_token_make(f->run, &ep, tok, sizeof(tok), path, sizeof(path),
					   f->err, sizeof(f->err)), -EPERM);
	assert_non_null(strstr(f->err, "not private"));
	chmod(f->run, 0700);
	snprintf(path, sizeof(path), "%s/link", f->dir);
	assert_int_equal(symlink(f->run, path), 0);
	assert_int_equal(ps_ctl_token_make(path, &ep, tok, sizeof(tok), path + 0, sizeof(path),
					   f->err, sizeof(f->err)), -EPERM);
}

/* Where a node's token comes from, through the configuration: flag > variable > file keys. */
static int load(struct fx *f, const char *extra, struct ps_cluster *c)
{
	char *av[12] = { "t", "--role", "ps", "--ps", "127.0.0.1:4444", "--workers",
			 "127.0.0.1:5555", "--protocol", "kernel" };
	int ac = 9;
	bool help;

	if (extra != NULL) {
		av[ac++] = "--ctl-token-file";
		av[ac++] = (char *)extra;
	}
	return ps_config_load(ac, av, NULL, f->envp, c, &help, f->err, sizeof(f->err));
}

static void test_ctl_token_sources_in_order(void **state)
{
	struct fx *f = *state;
	struct ps_cluster *c = malloc(sizeof(*c));
	char fa[128], fb[256], cfg[128];

	assert_non_null(c);
	snprintf(fa, sizeof(fa), "%s/a", f->dir);
	snprintf(fb, sizeof(fb), "%s/b", f->dir);
	snprintf(cfg, sizeof(cfg), "%s/cfg.json", f->dir);
	put_file(fa, "from-the-flag-file-0001\n", 0600);
	put_file(fb, "from-the-env-file-00002", 0600);
	f->n_env = 0;
	f->envp[0] = NULL;
	env_add(f, "WHARF_RUNTIME_DIR=%s", f->run);
	assert_int_equal(load(f, NULL, c), 0);      /* none: the node will make one */
	assert_string_equal(c->ctl_token, "");
	assert_string_equal(c->run_dir, f->run);
	env_add(f, "WHARF_CTL_TOKEN_FILE=%s", fb);
	assert_int_equal(load(f, NULL, c), 0);
	assert_string_equal(c->ctl_token, "from-the-env-file-00002");
	env_add(f, "WHARF_CTL_TOKEN=%s", TOK_A);    /* the variable beats the variable's file */
	assert_int_equal(load(f, NULL, c), 0);
	assert_string_equal(c->ctl_token, TOK_A);
	assert_int_equal(load(f, fa, c), 0);        /* the flag beats both */
	assert_string_equal(c->ctl_token, "from-the-flag-file-0001");
	assert_non_null(strstr(c->ctl_token_src, "--ctl-token-file"));
	/* the JSON key, and bad tokens refused naming their source */
	f->n_env = 0;
	f->envp[0] = NULL;
	snprintf(fb, sizeof(fb), "{\"ctl_token_file\": \"%s\"}", fa);
	put_file(cfg, fb, 0644);
	{
		char *av[] = { "t", "--role", "ps", "--ps", "127.0.0.1:4444", "--workers",
			       "127.0.0.1:5555", "--protocol", "kernel", "--config", cfg };
		bool help;
		if (ps_config_load(11, av, NULL, f->envp, c, &help, f->err, sizeof(f->err)) != 0)
			fail_msg("%s", f->err);
		assert_string_equal(c->ctl_token, "from-the-flag-file-0001");
		assert_non_null(strstr(c->ctl_token_src, "ctl_token_file"));
	}
	env_add(f, "WHARF_CTL_TOKEN=too short");
	assert_int_equal(load(f, NULL, c), -EINVAL);
	assert_non_null(strstr(f->err, "WHARF_CTL_TOKEN"));
	f->n_env = 0;
	f->envp[0] = NULL;
	snprintf(fb, sizeof(fb), "%s/missing", f->dir);
	assert_int_equal(load(f, fb, c), -ENOENT);
	assert_non_null(strstr(f->err, "--ctl-token-file"));
	free(c);
}

static void test_ctl_token_equal_compares_every_byte(void **state)
{
	(void)state;
	assert_true(ps_ctl_token_equal(TOK_A, strlen(TOK_A), TOK_A, strlen(TOK_A)));
	assert_false(ps_ctl_token_equal("0123456789abcdef-token-B", 24, TOK_A, strlen(TOK_A)));
	assert_false(ps_ctl_token_equal(TOK_A, strlen(TOK_A) - 1, TOK_A, strlen(TOK_A)));
	assert_false(ps_ctl_token_equal(TOK_A "x", strlen(TOK_A) + 1, TOK_A, strlen(TOK_A)));
	assert_false(ps_ctl_token_equal("", 0, TOK_A, strlen(TOK_A)));
}

/* ---- save paths */

static void expect_target(struct fx *f, const char *ckpt, const char *wal, const char *path,
			  int rc, const char *want)
{
	char out[2 * PS_PATH_LEN + 2] = "";

	f->err[0] = '\0';
	if (ps_ctl_save_target(ckpt, wal, path, out, sizeof(out), f->err, sizeof(f->err)) != rc)
		fail_msg("save %s: expected %d, got \"%s\" / \"%s\"", path, rc, out, f->err);
	if (rc == 0 && strcmp(out, want) != 0)
		fail_msg("save %s: wrote to %s, expected %s", path, out, want);
	if (rc != 0 && want != NULL && strstr(f->err, want) == NULL)
		fail_msg("save %s: \"%s\" does not say \"%s\"", path, f->err, want);
}

static void test_ctl_save_only_under_checkpoint_dir(void **state)
{
	struct fx *f = *state;
	char d[128], ck[160], wal[160], want[PATH_MAX + 16], p[256], real[PATH_MAX];

	snprintf(d, sizeof(d), "%s/ck", f->dir);
	assert_int_equal(mkdir(d, 0755), 0);
	assert_non_null(realpath(d, real));
	snprintf(ck, sizeof(ck), "%s/ps0.ckpt", d);
	snprintf(wal, sizeof(wal), "%s/ps0.ckpt.wal", d);
	assert_int_equal(mkdir(wal, 0755), 0);
	snprintf(p, sizeof(p), "%s/sub", d);
	assert_int_equal(mkdir(p, 0755), 0);

	snprintf(want, sizeof(want), "%s/snap", real);
	expect_target(f, ck, wal, "snap", 0, want);             /* relative to the directory */
	snprintf(p, sizeof(p), "%s/snap", d);
	expect_target(f, ck, wal, p, 0, want);                   /* absolute, inside */
	snprintf(want, sizeof(want), "%s/sub/snap", real);
	expect_target(f, ck, wal, "sub/snap", 0, want);
	expect_target(f, ck, wal, "ps0.ckpt", 0, ck);            /* the checkpoint itself */
	expect_target(f, ck, wal, "/etc/passwd", -EPERM, "outside the checkpoint directory");
	snprintf(p, sizeof(p), "%s/elsewhere", f->dir);
	expect_target(f, ck, wal, p, -EPERM, "outside");
	expect_target(f, ck, wal, "../snap", -EPERM, "\"..\"");
	expect_target(f, ck, wal, "sub/../../snap", -EPERM, "\"..\"");
	snprintf(p, sizeof(p), "%s/sub/..", d);
	expect_target(f, ck, wal, p, -EPERM, "\"..\"");
	expect_target(f, ck, wal, "ps0.ckpt.wal/wal.floor", -EPERM, "write-ahead log");
	expect_target(f, ck, wal, "nodir/snap", -ENOENT, "directory");
	expect_target(f, ck, wal, "sub/", -EINVAL, "file name");
	snprintf(p, sizeof(p), "%s/out", d);                     /* a link out of the directory */
	assert_int_equal(symlink(f->dir, p), 0);
	expect_target(f, ck, wal, "out/snap", -EPERM, "outside");
	expect_target(f, "", NULL, "snap", -EPERM, "--ckpt");    /* no checkpoint: no save PATH */
}

/* ---- a live server over protocol=kernel */

struct srv_arg {
	struct ps_fleet *fl;
	int rc;
};

static void *server_main(void *p)
{
	struct srv_arg *a = p;

	a->rc = ps_fleet_run_server(a->fl);
	return NULL;
}

static void paddle_env(struct fx *f, const char *role)
{
	f->n_env = 0;
	env_add(f, "TRAINING_ROLE=%s", role);
	env_add(f, "PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:%u", f->port);
	env_add(f, "POD_IP=127.0.0.1");
	env_add(f, "PADDLE_PORT=%u", f->port);
	env_add(f, "PADDLE_TRAINERS_NUM=1");
	env_add(f, "PADDLE_TRAINER_ID=0");
	env_add(f, "WHARF_PROTOCOL=kernel");
	env_add(f, "WHARF_WAIT_TIMEOUT_S=10");
	env_add(f, "WHARF_RUNTIME_DIR=%s", f->run);
}

static int raw_connect(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 100; i++) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		usleep(50000);
	}
	fail_msg("cannot connect to the server on port %u", port);
	return -1;
}

/* Sends one message; reads one back (type and body text into out). */
static uint8_t raw_round(int fd, uint8_t type, const void *body, uint32_t len, char *out,
			 size_t outlen)
{
	static uint8_t buf[1 << 16];
	struct tl_msg_hdr h = { .type = type, .aux = PS_ELEM_F32, .body_len = len, .req_id = 7,
				.key_count = type == PS_T_PULL ? 1 : 0, .dim = type == PS_T_PULL ? DIM : 0 };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t have = 0;

	tl_msg_hdr_encode(buf, &h);
	memcpy(buf + TL_MSG_HDR_LEN, body, len);
	assert_int_equal(send(fd, buf, TL_MSG_HDR_LEN + len, 0), (ssize_t)(TL_MSG_HDR_LEN + len));
	while (poll(&p, 1, 3000) > 0) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - have);
		assert_true(r > 0);
		have += (size_t)r;
		if (have < TL_MSG_HDR_LEN)
			continue;
		assert_int_equal(tl_msg_hdr_decode(buf, 1u << 20, &h), 0);
		if (have < TL_MSG_HDR_LEN + h.body_len)
			continue;
		if (h.body_len >= outlen)
			h.body_len = (uint32_t)outlen - 1;
		memcpy(out, buf + TL_MSG_HDR_LEN, h.body_len);
		out[h.body_len] = '\0';
		return h.type;
	}
	fail_msg("no reply to message type %u", type);
	return 0;
}

static void ctl(struct fx *f, const char *tok, const char *cmd, const char *want)
{
	struct ps_endpoint ep = { .host = "127.0.0.1", .port = (uint16_t)f->port };
	char out[PS_CTL_MAX];

	assert_int_equal(ps_ctl_request(&ep, tok, cmd, 3000, out, sizeof(out), f->err,
					sizeof(f->err)), 0);
	if (strncmp(out, want, strlen(want)) != 0 && strstr(out, want) == NULL)
		fail_msg("%s (token %s): \"%.200s\", expected \"%s\"", cmd, tok ? tok : "none", out,
			 want);
}

static void test_ctl_live_server_locked(void **state)
{
	struct fx *f = *state;
	struct ps_model_tables mt;
	struct ps_table_config t;
	struct ps_fleet *srv = NULL, *wk = NULL;
	struct srv_arg a = { NULL, -1 };
	struct ps_endpoint ep = { .host = "127.0.0.1" };
	char tok[PS_CTL_TOKEN_MAX + 1], path[PS_PATH_LEN + 96], ck[128], cmd[300], out[4096];
	char *argv[] = { "test_ctl", "--", "--mode", "async" };
	uint8_t key[8];
	pthread_t th;
	int fd;

	ps_model_tables_init(&mt);
	ps_model_table_defaults(&t);
	t.dim = DIM;
	assert_int_equal(ps_model_tables_add(&mt, &t, "t", NULL, 0), 0);
	paddle_env(f, "PSERVER");
	assert_int_equal(ps_fleet_init(4, argv, f->envp, &srv, f->err, sizeof(f->err)), 0);
	snprintf(ck, sizeof(ck), "%s/ck", f->dir);
	assert_int_equal(mkdir(ck, 0755), 0);
	snprintf(ck, sizeof(ck), "%s/ck/ps0.ckpt", f->dir);
	assert_int_equal(ps_fleet_set_checkpoints(srv, ck, NULL), 0);
	assert_int_equal(ps_fleet_init_server(srv, &mt), 0);
	a.fl = srv;
	assert_int_equal(pthread_create(&th, NULL, server_main, &a), 0);
	ep.port = (uint16_t)f->port;
	ps_ctl_token_path(f->run, &ep, path, sizeof(path));
	for (int i = 0; i < 100 && access(path, R_OK) != 0; i++)
		usleep(50000);
	assert_int_equal(ps_ctl_token_read(path, tok, sizeof(tok), "t", f->err, sizeof(f->err)), 0);
	/* The token is made before the server listens: wait for it as a readiness probe does. */
	for (int i = 0; i < 100 && ps_ctl_request(&ep, NULL, "health", 3000, out, sizeof(out),
						  f->err, sizeof(f->err)) != 0; i++)
		usleep(50000);

	ctl(f, NULL, "health", "ok ready ps 0");                /* a probe needs no token */
	ctl(f, NULL, "status", "error status: no control token given");
	ctl(f, TOK_A, "status", "error status: wrong control token");
	ctl(f, NULL, "shutdown", "error shutdown: no control token");
	ctl(f, tok, "status", "ok status");
	/* absolute paths into this test's directory only, whatever a broken check would do */
	snprintf(cmd, sizeof(cmd), "save %s/ck/../x", f->dir);
	ctl(f, tok, cmd, "\"..\" is not allowed");
	snprintf(cmd, sizeof(cmd), "save %s/x", f->dir);
	ctl(f, tok, cmd, "outside the checkpoint directory");
	ctl(f, NULL, "save snap", "no control token");
	ctl(f, tok, "save snap", "ok saved");
	snprintf(path, sizeof(path), "%s/ck/snap", f->dir);
	assert_int_equal(access(path, R_OK), 0);
	snprintf(path, sizeof(path), "%s/x", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	ctl(f, tok, "status", "refused 4");                     /* every token refusal counted */

	/* A connection that sent a data request: no control command on it, even with the token. */
	fd = raw_connect(f->port);
	tl_st64(key, 5);
	assert_int_equal(raw_round(fd, PS_T_PULL, key, 8, out, sizeof(out)), PS_T_PULL_R);
	snprintf(cmd, sizeof(cmd), "token %s\nshutdown", tok);
	assert_int_equal(raw_round(fd, PS_T_CTL, cmd, (uint32_t)strlen(cmd), out, sizeof(out)),
			 PS_T_CTL_R);
	assert_non_null(strstr(out, "control endpoint only"));
	close(fd);
	/* And one that sent a command: no data request on it. */
	fd = raw_connect(f->port);
	assert_int_equal(raw_round(fd, PS_T_CTL, "health", 6, out, sizeof(out)), PS_T_CTL_R);
	assert_int_equal(raw_round(fd, PS_T_PULL, key, 8, out, sizeof(out)), TL_TYPE_ERROR);
	assert_non_null(strstr(out + 4, "data requests go to the data endpoint"));
	close(fd);
	ctl(f, NULL, "health", "ok ready");                     /* still serving */

	/* The fleet's stop finds the token the server made, as wharf-ctl does. */
	paddle_env(f, "TRAINER");
	assert_int_equal(ps_fleet_init(4, argv, f->envp, &wk, f->err, sizeof(f->err)), 0);
	assert_int_equal(ps_fleet_stop_servers(wk, 3000), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.rc, 0);
	ps_ctl_token_path(f->run, &ep, path, sizeof(path));
	assert_int_equal(access(path, F_OK), -1);               /* its file went with it */
	ps_fleet_destroy(wk);
	ps_fleet_destroy(srv);
	ps_model_tables_free(&mt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ctl_token_check_and_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_token_made_private_and_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_token_sources_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_token_equal_compares_every_byte, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ctl_save_only_under_checkpoint_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ctl_live_server_locked, setup, teardown),
	};

	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
