/*
 * dn_log.c — the logging facility of dn_log.h: type registration with WHARF_LOG_LEVEL,
 * level specs, and the line format (timestamp, level, type) written through rte_log.
 *
 * Call chain: <LAYER>_LOG -> WLOG (rte_log_can_log) -> dn_log -> rte_log -> the log stream.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "dpdk_net/dn_log.h"
#include "dpdk_net/dn_pvt.h"

#define LOG_ENV "WHARF_LOG_LEVEL"
#define LOG_MAX_TYPES 16
#define LOG_NAME_MAX 32
#define LOG_ENTRY_MAX 128

/*
 * Type id -> name for the line prefix (rte_log exports no such lookup). Written only by
 * dn_log_register, which runs in constructors before any thread exists; read-only after.
 */
static struct {
	int type;
	char name[LOG_NAME_MAX];
} log_names[LOG_MAX_TYPES];
static unsigned n_log_names;

/* A bad WHARF_LOG_LEVEL is reported by the first type that registers, not by every one. */
static atomic_flag env_reported = ATOMIC_FLAG_INIT;

DN_LOG_REGISTER(dn_logtype, "wharf.dn")

static const char *const level_names[] = {
	[RTE_LOG_EMERG] = "emergency", [RTE_LOG_ALERT] = "alert", [RTE_LOG_CRIT] = "critical",
	[RTE_LOG_ERR] = "error",       [RTE_LOG_WARNING] = "warning", [RTE_LOG_NOTICE] = "notice",
	[RTE_LOG_INFO] = "info",       [RTE_LOG_DEBUG] = "debug",
};

/* What a line shows: short and upper case, so it stands out from the message. */
static const char *const level_tags[] = {
	[RTE_LOG_EMERG] = "EMERG", [RTE_LOG_ALERT] = "ALERT",     [RTE_LOG_CRIT] = "CRIT",
	[RTE_LOG_ERR] = "ERROR",   [RTE_LOG_WARNING] = "WARNING", [RTE_LOG_NOTICE] = "NOTICE",
	[RTE_LOG_INFO] = "INFO",   [RTE_LOG_DEBUG] = "DEBUG",
};

static int parse_level(const char *s, uint32_t *level)
{
	char *end;
	unsigned long n;

	for (uint32_t l = RTE_LOG_EMERG; l <= RTE_LOG_DEBUG; l++)
		if (strcasecmp(s, level_names[l]) == 0) {
			*level = l;
			return 0;
		}
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	n = strtoul(s, &end, 10);
	if (*end != '\0' || n < RTE_LOG_EMERG || n > RTE_LOG_DEBUG)
		return -EINVAL;
	*level = (uint32_t)n;
	return 0;
}

typedef void (*spec_fn)(const char *pattern, uint32_t level, void *arg);

/*
 * Walks "pattern:level[,pattern:level...]" (blanks around entries allowed), calling fn for
 * each entry when fn is not NULL. Stops at the first bad entry: -EINVAL, err names it.
 */
static int spec_walk(const char *spec, const char *source, spec_fn fn, void *arg, char *err,
		     size_t errlen)
{
	const char *p = spec;

	while (*p != '\0') {
		char e[LOG_ENTRY_MAX], *colon;
		size_t n;
		uint32_t level;

		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		n = strcspn(p, ",");
		while (n > 0 && isspace((unsigned char)p[n - 1]))
			n--;
		if (n == 0)
			break;
		if (n >= sizeof(e)) {
			snprintf(err, errlen, "%s: '%.40s...' is longer than %zu bytes", source, p,
				 sizeof(e) - 1);
			return -EINVAL;
		}
		memcpy(e, p, n);
		e[n] = '\0';
		p += n;
		colon = strchr(e, ':');
		if (colon == NULL || colon == e || parse_level(colon + 1, &level) < 0) {
			snprintf(err, errlen, "%s: '%s' is not pattern:level (a type glob such as "
				 "wharf.ps or wharf.*; level emergency, alert, critical, error, warning, "
				 "notice, info, debug or 1..8)", source, e);
			return -EINVAL;
		}
		*colon = '\0';
		if (fn != NULL)
			fn(e, level, arg);
	}
	return 0;
}

static void set_pattern(const char *pattern, uint32_t level, void *arg)
{
	(void)arg;
	rte_log_set_level_pattern(pattern, level);
}

int dn_log_set_levels(const char *spec, const char *source, char *err, size_t errlen)
{
	int rc = spec_walk(spec, source, NULL, NULL, err, errlen);

	if (rc < 0)
		return rc;
	return spec_walk(spec, source, set_pattern, NULL, err, errlen);
}

int dn_log_check_levels(const char *spec, const char *source, char *err, size_t errlen)
{
	return spec_walk(spec, source, NULL, NULL, err, errlen);
}

struct env_match {
	const char *name;
	int type;
};

static void set_if_match(const char *pattern, uint32_t level, void *arg)
{
	const struct env_match *m = arg;

	if (fnmatch(pattern, m->name, 0) == 0)
		rte_log_set_level((uint32_t)m->type, level);
}

static void remember_name(int type, const char *name)
{
	for (unsigned i = 0; i < n_log_names; i++)
		if (log_names[i].type == type)
			return;
	if (n_log_names == LOG_MAX_TYPES)
		return; /* the line then says "wharf" */
	log_names[n_log_names].type = type;
	snprintf(log_names[n_log_names].name, LOG_NAME_MAX, "%s", name);
	n_log_names++;
}

int dn_log_register(const char *name)
{
	const char *env = getenv(LOG_ENV);
	struct env_match m = { .name = name };
	char err[256];

	m.type = rte_log_register_type_and_pick_level(name, RTE_LOG_INFO);
	if (m.type < 0)
		return RTE_LOGTYPE_USER1;
	remember_name(m.type, name);
	if (env == NULL)
		return m.type;
	/* All or nothing, as dn_log_set_levels: a bad entry voids the whole variable. */
	if (spec_walk(env, LOG_ENV, NULL, NULL, err, sizeof(err)) < 0) {
		if (!atomic_flag_test_and_set(&env_reported))
			dn_log(m.type, RTE_LOG_ERR, "%s; %s ignored", err, LOG_ENV);
		return m.type;
	}
	spec_walk(env, LOG_ENV, set_if_match, &m, err, sizeof(err));
	return m.type;
}

static const char *type_name(int type)
{
	for (unsigned i = 0; i < n_log_names; i++)
		if (log_names[i].type == type)
			return log_names[i].name;
	return "wharf";
}

/* "2026-11-26T07:52:01.123Z": UTC, milliseconds. */
static void stamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void dn_log(int type, uint32_t level, const char *fmt, ...)
{
	char small[512], *msg = small, ts[40];
	va_list ap, again;
	int n;

	va_start(ap, fmt);
	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	/* A long line (a connection table, a path) is formatted again into the heap; if that
	 * fails it is printed cut at the stack buffer. */
	if (n >= (int)sizeof(small) && (msg = malloc((size_t)n + 1)) != NULL)
		vsnprintf(msg, (size_t)n + 1, fmt, again);
	else if (msg == NULL)
		msg = small;
	va_end(again);
	if (n < 0)
		n = 0;
	n = (int)strnlen(msg, (size_t)n);
	while (n > 0 && msg[n - 1] == '\n')
		n--;
	if (level < RTE_LOG_EMERG || level > RTE_LOG_DEBUG)
		level = RTE_LOG_DEBUG;
	stamp(ts, sizeof(ts));
	rte_log(level, (uint32_t)type, "%s %s %s: %.*s\n", ts, level_tags[level], type_name(type),
		n, msg);
	if (msg != small)
		free(msg);
}
