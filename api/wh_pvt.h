/*
 * wh_pvt.h — internals of libwharf's API layer (api/), shared by its files: the model's
 * tables as the rest of the tree takes them, and the calling thread's error message.
 * Not installed; include/wharf/wharf.h is the public header.
 */
#ifndef WHARF_WH_PVT_H
#define WHARF_WH_PVT_H

#include "ps_core/ps_net.h"
#include "dpdk_net/dn_log.h"
#include "wharf/wharf.h"

/* The api layer's log type, "wharf.api" (wh_err.c). */
extern int wh_logtype;
#define API_LOG(lvl, ...) WLOG(wh_logtype, lvl, __VA_ARGS__)

/*
 * The tables of m as ps_net and ps_core take them (table i has id i; max_keys is
 * PS_MODEL_DEF_MAX_KEYS): ps_model_max_msg sizes the message buffers, ps_model_req_rows
 * says how many keys or dense rows one request may carry (split larger calls), and
 * ps_model_digest is what servers and workers compare: put it in ps_net_params's
 * model_digest on both sides (ps_net_run_server does for a server) and ps_net_connect
 * refuses a server of another model. Valid while m lives, read only.
 */
const struct ps_model_tables *wh_model_tables(const struct wharf_model *m);

/* Sets the calling thread's wharf_errmsg() text (one line, cut at 511 bytes) and logs it at
 * DEBUG on wharf.api: a program that drops an error still leaves its reason in the log. */
void wh_set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* wh_set_err, then returns rc: `return wh_errf(-EINVAL, "...", ...);` */
int wh_errf(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
