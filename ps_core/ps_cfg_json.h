/*
 * ps_cfg_json.h — JSON readers shared by the --config file and TF_CONFIG (private).
 */
#ifndef WHARF_PS_CFG_JSON_H
#define WHARF_PS_CFG_JSON_H

#include <jansson.h>

#include "ps_core/ps_config.h"

/* Reads root's "cluster" and "task" objects (TF_CONFIG's shape) into out; src names the source. */
int ps_json_cluster_task(json_t *root, const char *src, struct ps_cluster *out, char *err,
			 size_t errlen);
/* -EINVAL naming src and path.key for the first key of obj not in allowed (NULL-terminated). */
int ps_json_known_keys(json_t *obj, const char *const *allowed, const char *src, const char *path,
		       char *err, size_t errlen);

#endif
