/*
 * ps_config_pvt.h — internals of the PS network side shared by its configuration, control and
 * node sources (ps_config.c, ps_cfg_*.c, ps_net*.c, ps_fleet.c): error lines, file readers,
 * which source set a field, host-name resolution.
 */
#ifndef WHARF_PS_CONFIG_PVT_H
#define WHARF_PS_CONFIG_PVT_H

#include <stddef.h>
#include <stdint.h>

#include "ps_core/ps_config.h"
#include "ps_core/ps_pvt.h" /* PS_LOG, ps_core's log type "wharf.ps" */

/* Write one formatted line into err (when err is not NULL) and return rc. */
int ps_errf_rc(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Read a whole (small) text file into a NUL-terminated heap buffer; caller frees. */
int ps_read_text(const char *path, size_t max, char **out, char *err, size_t errlen);

/* 1 when path exists and is a directory. */
int ps_is_dir(const char *path);

/* Mark a field as set by this partial source. */
static inline void ps_mark(struct ps_cluster *c, enum ps_field f)
{
	c->set |= UINT64_C(1) << f;
}

static inline int ps_has(const struct ps_cluster *c, enum ps_field f)
{
	return (c->set >> f) & 1u;
}

_Static_assert(PS_F_COUNT <= 64, "set is a 64-bit mask");

/* The flag, key or variable a field came from, for messages ("--ps", "TF_CONFIG cluster.ps"). */
const char *ps_field_source(const struct ps_cluster *c, enum ps_field f, char *buf, size_t len);

/* ---- host names to resolve (ps_resolve.c) ---- */

struct ps_rname {
	struct ps_endpoint *ep;
	char what[PS_PATH_LEN + 64]; /* its source, for the log and errors */
};

struct ps_rlist {
	struct ps_rname *v;
	unsigned n, cap;
};

/* Adds ep (its host a literal or a name) under the source label what. -ENOMEM. */
int ps_rlist_add(struct ps_rlist *l, struct ps_endpoint *ep, const char *what);
/*
 * Resolves every entry: a literal at once, a name through r->lookup, each distinct name
 * once (logged "resolved NAME -> ADDRESS (what)"). Names that fail are retried every
 * retry_s seconds until wait_s have passed, then the first is refused naming its source.
 */
int ps_rlist_resolve(struct ps_rlist *l, const struct ps_resolver *r, unsigned wait_s,
		     unsigned retry_s, char *err, size_t errlen);
void ps_rlist_free(struct ps_rlist *l);
/* One formatted line to r->log (when there is one). */
void ps_logf(const struct ps_resolver *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The addresses a node uses, resolved, and its data plane (ps_cfg_addr.c); finalize's tail. */
int ps_cfg_addr_task(struct ps_cluster *c, const struct ps_resolver *r, char *err, size_t errlen);
int ps_cfg_addr_node(struct ps_cluster *c, const struct ps_resolver *r, char *err, size_t errlen);

/*
 * The control token of the configuration (ps_net_auth.c), for ps_cluster_finalize: the
 * file a flag names, else WHARF_CTL_TOKEN, else the file of WHARF_CTL_TOKEN_FILE or the JSON
 * key, read into c->ctl_token ("" when none: the node makes its own); and c->run_dir.
 */
int ps_ctl_token_config(struct ps_cluster *c, char *const envp[], char *err, size_t errlen);

#endif
