/*
 * wc_pvt.h — internals shared by apps/common's source files (not for executables).
 */
#ifndef WHARF_WC_PVT_H
#define WHARF_WC_PVT_H

#include <stddef.h>
#include <stdint.h>

#include "apps/common/wc_config.h"
#include "dpdk_net/dn_log.h"

/* apps/common's log type, "wharf.wc" (wc_log.c). */
extern int wc_logtype;
#define WC_LOG(lvl, ...) WLOG(wc_logtype, lvl, __VA_ARGS__)

/* Write one formatted line into err (when err is not NULL) and return rc. */
int wc_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Read a whole (small) text file into a NUL-terminated heap buffer; caller frees. */
int wc_read_text(const char *path, size_t max, char **out, char *err, size_t errlen);

/* 1 when path exists and is a directory. */
int wc_is_dir(const char *path);

/* Mark a field as set by this partial source. */
static inline void wc_mark(struct wc_cluster *c, enum wc_field f)
{
	c->set |= UINT64_C(1) << f;
}

static inline int wc_has(const struct wc_cluster *c, enum wc_field f)
{
	return (c->set >> f) & 1u;
}

_Static_assert(WC_F_COUNT <= 64, "set is a 64-bit mask");

/* The flag, key or variable a field came from, for messages ("--ps", "TF_CONFIG cluster.ps"). */
const char *wc_field_source(const struct wc_cluster *c, enum wc_field f, char *buf, size_t len);

/* ---- host names to resolve (wc_resolve.c) ---- */

struct wc_rname {
	struct wc_endpoint *ep;
	char what[WC_PATH_LEN + 64]; /* its source, for the log and errors */
};

struct wc_rlist {
	struct wc_rname *v;
	unsigned n, cap;
};

/* Adds ep (its host a literal or a name) under the source label what. -ENOMEM. */
int wc_rlist_add(struct wc_rlist *l, struct wc_endpoint *ep, const char *what);
/*
 * Resolves every entry: a literal at once, a name through r->lookup, each distinct name
 * once (logged "resolved NAME -> ADDRESS (what)"). Names that fail are retried every
 * retry_s seconds until wait_s have passed, then the first is refused naming its source.
 */
int wc_rlist_resolve(struct wc_rlist *l, const struct wc_resolver *r, unsigned wait_s,
		     unsigned retry_s, char *err, size_t errlen);
void wc_rlist_free(struct wc_rlist *l);
/* One formatted line to r->log (when there is one). */
void wc_logf(const struct wc_resolver *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The addresses a node uses, resolved, and its data plane (wc_cfg_addr.c); finalize's tail. */
int wc_cfg_addr_task(struct wc_cluster *c, const struct wc_resolver *r, char *err, size_t errlen);
int wc_cfg_addr_node(struct wc_cluster *c, const struct wc_resolver *r, char *err, size_t errlen);

/*
 * The control token of the configuration (wc_psnet_auth.c), for wc_cluster_finalize: the
 * file a flag names, else WHARF_CTL_TOKEN, else the file of WHARF_CTL_TOKEN_FILE or the JSON
 * key, read into c->ctl_token ("" when none: the node makes its own); and c->run_dir.
 */
int wc_ctl_token_config(struct wc_cluster *c, char *const envp[], char *err, size_t errlen);

#endif
