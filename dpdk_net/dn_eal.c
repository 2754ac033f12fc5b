/*
 * dn_eal.c — EAL bring-up from argv and small helpers every wharf executable needs.
 *
 * Apps call dn_eal_init(argc, argv) first; it consumes the EAL part of argv (everything
 * before "--") and reports failures with rte_errno's reason instead of exiting, so the
 * caller decides what to do (apps/ may exit; libraries never do). EAL's own lines and wharf's
 * (dn_log.h) go to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "dpdk_net/dn_pvt.h"

static const char *const drop_names[DN_DROP_MAX] = {
#define DN_X(n, s) [DN_DROP_##n] = s,
	DN_DROP_REASONS(DN_X)
#undef DN_X
};

const char *dn_drop_name(enum dn_drop d)
{
	return (unsigned)d < DN_DROP_MAX ? drop_names[d] : "unknown";
}

int dn_eal_init(int argc, char **argv, char *err, size_t errlen)
{
	int ret;

	/*
	 * rte_eal_init's default log stream writes each line to stderr and to syslog; pin stderr
	 * alone (where the lines before EAL went too), unless the caller opened another stream.
	 */
	if (rte_log_get_stream() == stderr)
		rte_openlog_stream(stderr);
	ret = rte_eal_init(argc, argv);

	if (ret < 0) {
		int e = rte_errno ? rte_errno : EINVAL;
		snprintf(err, errlen, "EAL init failed: %s", rte_strerror(e));
		return -e;
	}
	return ret;
}

void dn_eal_fini(void)
{
	if (dn_port_keeps_eal())
		return; /* a port left open until exit still points into EAL's memory */
	rte_eal_cleanup();
}

int dn_parse_ipv4(const char *s, uint32_t *ip, uint8_t *prefix_len)
{
	unsigned a, b, c, d, len = 32;
	char tail;
	int n;

	if (s == NULL)
		return -EINVAL;
	n = sscanf(s, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &len, &tail);
	if (n != 4 && n != 5)
		return -EINVAL;
	if (n == 4 && strchr(s, '/') != NULL)
		return -EINVAL;
	/* sscanf stops at the first non-matching byte; make sure nothing trails "a.b.c.d". */
	if (n == 4 && sscanf(s, "%*u.%*u.%*u.%*u%c", &tail) == 1)
		return -EINVAL;
	if (a > 255 || b > 255 || c > 255 || d > 255 || len > 32)
		return -EINVAL;
	*ip = a << 24 | b << 16 | c << 8 | d;
	if (prefix_len != NULL)
		*prefix_len = (uint8_t)len;
	else if (n == 5)
		return -EINVAL;
	return 0;
}
