/*
 * ps_epmap.c — the .endpoint_map file (DeepRec StarServer's format): one line per node,
 * "control_ip:port=data_ip:port", '#' comments and blank lines allowed.
 *
 * Call chain: ps_cluster_finalize -> ps_epmap_load -> ps_epmap_parse; the trainer and psd
 * then read data endpoints from struct ps_cluster. Start-up only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_core/ps_config_pvt.h"

#define PS_EPMAP_MAX_BYTES (1u << 20)

static void trim(const char **p, size_t *len)
{
	while (*len > 0 && (**p == ' ' || **p == '\t' || **p == '\r')) {
		(*p)++;
		(*len)--;
	}
	while (*len > 0 && ((*p)[*len - 1] == ' ' || (*p)[*len - 1] == '\t' || (*p)[*len - 1] == '\r'))
		(*len)--;
}

static int parse_line(const char *p, size_t len, const char *name, unsigned line,
		      struct ps_epmap *m, char *err, size_t errlen)
{
	const char *eq;
	const char *hash = memchr(p, '#', len);
	char what[PS_PATH_LEN + 32];
	struct ps_epmap_entry e;
	unsigned i;
	int rc;

	if (hash != NULL)
		len = (size_t)(hash - p); /* a trailing comment ends the line */
	trim(&p, &len);
	if (len == 0)
		return 0;
	eq = memchr(p, '=', len);
	if (eq == NULL)
		return ps_errf_rc(err, errlen, -EINVAL, "%s:%u: '%.*s' expected control_ip:port=data_ip:port",
			       name, line, (int)(len > 200 ? 200 : len), p);
	snprintf(what, sizeof(what), "%s:%u: control address", name, line);
	{
		const char *c = p;
		size_t clen = (size_t)(eq - p);
		const char *d = eq + 1;
		size_t dlen = len - clen - 1;

		trim(&c, &clen);
		trim(&d, &dlen);
		rc = ps_parse_endpoint(c, clen, false, &e.control, what, err, errlen);
		if (rc != 0)
			return rc;
		snprintf(what, sizeof(what), "%s:%u: data address", name, line);
		rc = ps_parse_endpoint(d, dlen, false, &e.data, what, err, errlen);
		if (rc != 0)
			return rc;
	}
	for (i = 0; i < m->n; i++)
		if (ps_endpoint_equal(&m->e[i].control, &e.control))
			return ps_errf_rc(err, errlen, -EINVAL, "%s:%u: %s:%u already mapped on line %u; "
				       "expected one line per control address", name, line,
				       e.control.host, e.control.port, m->e[i].line);
	if (m->n == sizeof(m->e) / sizeof(m->e[0]))
		return ps_errf_rc(err, errlen, -E2BIG, "%s:%u: more than %zu entries", name, line,
			       sizeof(m->e) / sizeof(m->e[0]));
	e.line = line;
	m->e[m->n++] = e;
	return 0;
}

int ps_epmap_parse(const char *text, const char *name, struct ps_epmap *out, char *err,
		   size_t errlen)
{
	struct ps_epmap *m;
	const char *p = text;
	unsigned line = 0;
	int rc = 0;

	/* Parse into a scratch map so a failure leaves *out untouched. */
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "%s: out of memory", name);
	while (*p != '\0') {
		const char *nl = strchr(p, '\n');
		size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);

		rc = parse_line(p, len, name, ++line, m, err, errlen);
		if (rc != 0 || nl == NULL)
			break;
		p = nl + 1;
	}
	if (rc == 0)
		memcpy(out, m, sizeof(*m));
	free(m);
	return rc;
}

int ps_epmap_load(const char *path, struct ps_epmap *out, char *err, size_t errlen)
{
	char *text;
	int rc;

	rc = ps_read_text(path, PS_EPMAP_MAX_BYTES, &text, err, errlen);
	if (rc != 0)
		return rc;
	rc = ps_epmap_parse(text, path, out, err, errlen);
	free(text);
	return rc;
}

const struct ps_endpoint *ps_epmap_lookup(const struct ps_epmap *m, const struct ps_endpoint *control)
{
	unsigned i;

	for (i = 0; i < m->n; i++)
		if (ps_endpoint_equal(&m->e[i].control, control))
			return &m->e[i].data;
	return NULL;
}
