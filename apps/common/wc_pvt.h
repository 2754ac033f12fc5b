/*
 * wc_pvt.h — internals shared by apps/common's source files (not for executables).
 */
#ifndef WHARF_WC_PVT_H
#define WHARF_WC_PVT_H

#include <stddef.h>

#include "dpdk_net/dn_log.h"

/* apps/common's log type, "wharf.wc" (wc_log.c): the tools' flag refusals. */
extern int wc_logtype;
#define WC_LOG(lvl, ...) WLOG(wc_logtype, lvl, __VA_ARGS__)

/* Write one formatted line into err (when err is not NULL) and return rc. */
int wc_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
