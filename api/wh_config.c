/*
 * wh_config.c — wharf_config: the cluster a library user's process belongs to, read from the
 * same sources as the wharf executables (ps_config_load), and the EAL arguments its DPDK
 * transport starts with (WHARF_EAL_ARGS, else the cluster file's eal_args, unless
 * wharf_config_set_eal gives them).
 *
 * Call chain: wharf_config_load -> ps_config_load (flags, file, DeepRec knobs, Paddle,
 *   TF_CONFIG, .endpoint_map) -> wharf_server_run / wharf_client_open read wh_cfg_*.
 * Start-up only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/wh_config.h"
#include "api/wh_pvt.h"

extern char **environ;

#define WH_EAL_MAX_ARGS 64

static void eal_free(struct wharf_config *c)
{
	free(c->eal_buf);
	free(c->eal_argv);
	c->eal_buf = NULL;
	c->eal_argv = NULL;
	c->eal_argc = 0;
}

/* argv[0] is a program name, then the words of s split at blanks. */
static int eal_split(struct wharf_config *c, const char *s, const char *what)
{
	char *buf, *tok, *save = NULL;
	char **v;
	int n = 1;

	if (strlen(s) > 8192)
		return wh_errf(-E2BIG, "%s: longer than 8192 bytes", what);
	buf = malloc(strlen(s) + sizeof("wharf") + 1);
	v = calloc(WH_EAL_MAX_ARGS + 2, sizeof(*v));
	if (buf == NULL || v == NULL) {
		free(buf);
		free(v);
		return wh_errf(-ENOMEM, "out of memory");
	}
	memcpy(buf, "wharf", sizeof("wharf"));
	v[0] = buf;
	strcpy(buf + sizeof("wharf"), s);
	for (tok = strtok_r(buf + sizeof("wharf"), " \t\n", &save); tok != NULL;
	     tok = strtok_r(NULL, " \t\n", &save)) {
		if (n > WH_EAL_MAX_ARGS) {
			free(buf);
			free(v);
			return wh_errf(-E2BIG, "%s: more than %u arguments", what, WH_EAL_MAX_ARGS);
		}
		v[n++] = tok;
	}
	eal_free(c);
	c->eal_buf = buf;
	c->eal_argv = v;
	c->eal_argc = n;
	return 0;
}

int wharf_config_load(int argc, const char *const *argv, const char *const *envp,
		      struct wharf_config **out)
{
	char *const *env = envp != NULL ? (char *const *)envp : environ;
	struct wharf_config *c;
	char **av, err[1024];
	bool help = false;
	int i, rc;

	*out = NULL;
	if (argc < 0 || (argc > 0 && argv == NULL))
		return wh_errf(-EINVAL, "wharf_config_load: argc %d with argv %p", argc,
			       (const void *)argv);
	c = calloc(1, sizeof(*c));
	av = calloc((size_t)argc + 2, sizeof(*av));
	if (c == NULL || av == NULL) {
		free(c);
		free(av);
		return wh_errf(-ENOMEM, "out of memory");
	}
	av[0] = (char *)"wharf";
	for (i = 0; i < argc; i++) {
		if (argv[i] == NULL) {
			rc = wh_errf(-EINVAL, "cluster argument %d is NULL", i);
			goto out_free;
		}
		av[i + 1] = (char *)argv[i];
	}
	rc = ps_config_load(argc + 1, av, NULL, env, &c->cl, &help, err, sizeof(err));
	if (rc == 0 && help)
		rc = wh_errf(-EINVAL, "--help is for the executables; the library takes cluster flags only");
	else if (rc != 0)
		rc = wh_errf(rc, "%s", err);
	/* WHARF_EAL_ARGS, else the --config file's eal_args (checked as they were read). */
	if (rc == 0)
		rc = eal_split(c, c->cl.eal_args, "EAL arguments");
	if (rc != 0)
		goto out_free;
	free(av);
	*out = c;
	return 0;
out_free:
	eal_free(c);
	free(c);
	free(av);
	return rc;
}

int wharf_config_set_eal(struct wharf_config *c, const char *eal_args)
{
	if (c == NULL || eal_args == NULL)
		return wh_errf(-EINVAL, "wharf_config_set_eal: NULL argument");
	return eal_split(c, eal_args, "EAL arguments");
}

enum wharf_role wharf_config_role(const struct wharf_config *c)
{
	return c->cl.role == PS_ROLE_PS ? WHARF_ROLE_SERVER : WHARF_ROLE_WORKER;
}

uint32_t wharf_config_index(const struct wharf_config *c) { return c->cl.task_index; }
uint32_t wharf_config_servers(const struct wharf_config *c) { return c->cl.n_ps; }
uint32_t wharf_config_workers(const struct wharf_config *c) { return c->cl.n_workers; }
uint32_t wharf_config_geo_k(const struct wharf_config *c) { return c->cl.geo_k; }

enum wharf_mode wharf_config_mode(const struct wharf_config *c)
{
	return c->cl.mode == PS_JOB_SYNC ? WHARF_MODE_SYNC :
	       c->cl.mode == PS_JOB_GEO ? WHARF_MODE_GEO : WHARF_MODE_ASYNC;
}

const char *wharf_config_protocol(const struct wharf_config *c)
{
	return ps_protocol_name(c->cl.protocol);
}

void wharf_config_free(struct wharf_config *c)
{
	if (c == NULL)
		return;
	eal_free(c);
	free(c);
}
