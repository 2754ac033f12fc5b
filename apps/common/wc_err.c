/*
 * wc_err.c — wc_errf, the error-line writer of apps/common's readers (datasets, model names).
 * Kept apart from wc_log.c so the Python data module links it without DPDK's log.
 */
#include <stdarg.h>
#include <stdio.h>

#include "apps/common/wc_pvt.h"

int wc_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}
