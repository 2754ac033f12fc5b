/*
 * wh_config.h — the object behind the public struct wharf_config (wh_config.c), read by the
 * server and the client. Not installed.
 */
#ifndef WHARF_WH_CONFIG_H
#define WHARF_WH_CONFIG_H

#include "ps_core/ps_config.h"

struct wharf_config {
	struct ps_cluster cl;
	int eal_argc;      /* argv[0] = "wharf", then the EAL arguments */
	char **eal_argv;
	char *eal_buf;     /* the words eal_argv points into */
};

#endif
