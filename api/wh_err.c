/*
 * wh_err.c — the calling thread's last error message (wharf_errmsg) and the library's
 * version. Every api/ function that fails sets the message through wh_set_err/wh_errf, which
 * also logs it at DEBUG on the layer's type, "wharf.api".
 */
#include <stdarg.h>
#include <stdio.h>

#include "api/wh_pvt.h"

#define WH_ERR_MAX 512

DN_LOG_REGISTER(wh_logtype, "wharf.api")

/* Per thread: a failing call on one thread never overwrites another's message. */
static _Thread_local char wh_err[WH_ERR_MAX];

#define WH_STR_(x) #x
#define WH_STR(x) WH_STR_(x)

const char *wharf_version(void)
{
	return WH_STR(WHARF_VERSION_MAJOR) "." WH_STR(WHARF_VERSION_MINOR) "."
		WH_STR(WHARF_VERSION_PATCH);
}

const char *wharf_errmsg(void)
{
	return wh_err;
}

static void wh_vset(const char *fmt, va_list ap)
{
	vsnprintf(wh_err, sizeof(wh_err), fmt, ap);
	API_LOG(DEBUG, "%s", wh_err);
}

void wh_set_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wh_vset(fmt, ap);
	va_end(ap);
}

int wh_errf(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wh_vset(fmt, ap);
	va_end(ap);
	return rc;
}
