/*
 * ps_role.c — a fleet-like role API (after Paddle's role maker): one program reads its
 * environment and becomes a worker or a server. Called once at start-up by apps (train,
 * psd); apps/common has the full cluster parsers and may fill struct ps_role itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_pvt.h"

static int env_u32(const char *name, uint32_t *out, bool required, char *err, size_t errlen)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v) {
		if (!required)
			return 0;
		ps_errf(err, errlen, "%s is not set", name);
		return -EINVAL;
	}
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || x > UINT32_MAX || v[0] == '-') {
		ps_errf(err, errlen, "%s=\"%s\" is not a non-negative integer", name, v);
		return -EINVAL;
	}
	*out = (uint32_t)x;
	return 0;
}

/* Entries of a comma-separated "ip:port,ip:port" list; index of `self` in it, if found. */
static int parse_list(const char *list, const char *self, uint32_t *n, int *self_idx,
		      char *err, size_t errlen)
{
	const char *p = list;
	size_t slen = self ? strlen(self) : 0;

	*n = 0;
	*self_idx = -1;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == 0 || !memchr(p, ':', len)) {
			ps_errf(err, errlen, "PADDLE_PSERVERS_IP_PORT_LIST entry %u (\"%.*s\") is not "
				"ip:port", *n, (int)len, p);
			return -EINVAL;
		}
		if (self && len == slen && memcmp(p, self, len) == 0)
			*self_idx = (int)*n;
		(*n)++;
		p += len + (e ? 1 : 0);
		if (e && !*p) {
			ps_errf(err, errlen, "PADDLE_PSERVERS_IP_PORT_LIST ends with a comma");
			return -EINVAL;
		}
	}
	return 0;
}

int ps_role_from_env(struct ps_role *r, char *err, size_t errlen)
{
	const char *role = getenv("TRAINING_ROLE"), *list = getenv("PADDLE_PSERVERS_IP_PORT_LIST");
	const char *ip = getenv("POD_IP"), *port = getenv("PADDLE_PORT");
	char self[300];
	int idx, rc;

	memset(r, 0, sizeof(*r));
	if (!role || (strcmp(role, "TRAINER") && strcmp(role, "PSERVER"))) {
		ps_errf(err, errlen, "TRAINING_ROLE=\"%s\": expected TRAINER or PSERVER",
			role ? role : "(unset)");
		return -EINVAL;
	}
	r->kind = strcmp(role, "PSERVER") == 0 ? PS_ROLE_SERVER : PS_ROLE_WORKER;
	if (!list || !*list) {
		ps_errf(err, errlen, "PADDLE_PSERVERS_IP_PORT_LIST is not set");
		return -EINVAL;
	}
	if ((rc = env_u32("PADDLE_TRAINERS_NUM", &r->n_workers, true, err, errlen)) < 0)
		return rc;
	if (r->n_workers == 0) {
		ps_errf(err, errlen, "PADDLE_TRAINERS_NUM must be at least 1");
		return -EINVAL;
	}
	if (r->kind == PS_ROLE_WORKER) {
		if ((rc = env_u32("PADDLE_TRAINER_ID", &r->id, true, err, errlen)) < 0)
			return rc;
		if (r->id >= r->n_workers) {
			ps_errf(err, errlen, "PADDLE_TRAINER_ID=%u but PADDLE_TRAINERS_NUM=%u",
				r->id, r->n_workers);
			return -EINVAL;
		}
		return parse_list(list, NULL, &r->n_servers, &idx, err, errlen);
	}
	if (!ip || !port) {
		ps_errf(err, errlen, "a PSERVER needs POD_IP and PADDLE_PORT");
		return -EINVAL;
	}
	snprintf(self, sizeof(self), "%s:%s", ip, port);
	if ((rc = parse_list(list, self, &r->n_servers, &idx, err, errlen)) < 0)
		return rc;
	if (idx < 0) {
		ps_errf(err, errlen, "%s is not in PADDLE_PSERVERS_IP_PORT_LIST", self);
		return -EINVAL;
	}
	r->id = (uint32_t)idx;
	return 0;
}

int ps_role_server_config(const struct ps_role *r, struct ps_server_config *cfg)
{
	if (r->kind != PS_ROLE_SERVER)
		return -EINVAL;
	cfg->server_id = r->id;
	cfg->n_servers = r->n_servers;
	cfg->n_workers = r->n_workers;
	return 0;
}

int ps_role_client_config(const struct ps_role *r, struct ps_client_config *cfg)
{
	if (r->kind != PS_ROLE_WORKER)
		return -EINVAL;
	cfg->worker_id = r->id;
	cfg->n_servers = r->n_servers;
	return 0;
}
