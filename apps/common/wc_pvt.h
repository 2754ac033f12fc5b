/*
 * wc_pvt.h — internals shared by apps/common's source files (not for executables).
 */
#ifndef WHARF_WC_PVT_H
#define WHARF_WC_PVT_H

#include <stddef.h>

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
	c->set |= 1u << f;
}

static inline int wc_has(const struct wc_cluster *c, enum wc_field f)
{
	return (c->set >> f) & 1u;
}

_Static_assert(WC_F_COUNT <= 32, "set is a 32-bit mask");

#endif
