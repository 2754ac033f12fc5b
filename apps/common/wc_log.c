/*
 * wc_log.c — apps/common's log type, "wharf.wc" (dpdk_net/dn_log.h), which WC_LOG (wc_pvt.h)
 * logs to: the tools' flag refusals. Each line keeps the process name after the prefix
 * ("... ERR wharf.wc: wharf-perf: --rate: ..."): several processes often share one terminal.
 */
#include "apps/common/wc_pvt.h"

DN_LOG_REGISTER(wc_logtype, "wharf.wc")
