/*
 * wc_log.c — apps/common's log type, "wharf.wc" (dpdk_net/dn_log.h), which WC_LOG (wc_pvt.h)
 * logs to: the PS glue's serving, checkpoint, wait and reconnect lines, and the tools' flag
 * refusals. Each line keeps the process name after the prefix ("... INFO wharf.wc: wharf-psd:
 * ps 0 serving ..."): several processes often share one terminal or log file.
 */
#include "apps/common/wc_pvt.h"

DN_LOG_REGISTER(wc_logtype, "wharf.wc")
