/*
 * dn_log.h — wharf's logging: every layer logs through rte_log with a type of its own.
 *
 * dpdk_net is the floor every layer stands on, so the facility lives here. Each layer
 * registers one type, "wharf.<layer>" (DN_LOG_REGISTER), and wraps WLOG in a macro of its own
 * (DN_LOG, TL_LOG, FZ_LOG, PS_LOG in the layers' private headers). A line reads
 *
 *   2026-11-26T07:52:01.123Z WARNING wharf.ps: ps_recover: log segment ...: torn last record ...
 *
 * UTC wall-clock time to the millisecond (lines of many hosts and of kubectl, journald or a
 * log shipper sort together), the level, the type, then the message; one line per call, the
 * newline added here (a message's own trailing newline is dropped).
 *
 * Levels. A type starts at INFO. The EAL option --log-level=wharf.ps:debug sets it in a DPDK
 * process (parsed by rte_eal_init); WHARF_LOG_LEVEL=wharf.ps:debug,wharf.tl:warning sets it in
 * any process, EAL or not: it is read as each type registers (a constructor, before main), so
 * the EAL option, applied later, wins where both name a type. rte_log needs no EAL: types
 * register, levels filter and lines print before rte_eal_init and in processes that never
 * call it (the kernel transport, ps_core's tests).
 *
 * Stream: rte_log's, stderr unless someone opened another (rte_openlog_stream; the tests do).
 * dn_eal_init pins stderr before rte_eal_init, whose default stream would also copy every
 * line to syslog.
 *
 * Threads: dn_log may be called from any thread (one fprintf per line: lines do not
 * interleave). Registration runs in constructors, before any thread exists.
 */
#ifndef WHARF_DN_LOG_H
#define WHARF_DN_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_log.h>

/*
 * WLOG(type, LEVEL, fmt, ...): LEVEL is one of EMERG ALERT CRIT ERR WARNING NOTICE INFO DEBUG.
 * The level test comes first, so a filtered line costs no formatting.
 */
#define WLOG(type, lvl, ...)                                                      \
	do {                                                                      \
		if (rte_log_can_log((uint32_t)(type), RTE_LOG_##lvl))             \
			dn_log((type), RTE_LOG_##lvl, __VA_ARGS__);               \
	} while (0)

/*
 * Defines `int var`, the type id of log type `name`, registered before main. Until then (and
 * if registration fails) var is RTE_LOGTYPE_USER1, which logs at rte_log's default level.
 */
#define DN_LOG_REGISTER(var, name)              \
	int var = RTE_LOGTYPE_USER1;            \
	RTE_INIT(var##_register)                \
	{                                       \
		var = dn_log_register(name);    \
	}

/* Registers `name` (or finds it) at INFO, then applies WHARF_LOG_LEVEL's entries that match
 * it. Returns the type id; RTE_LOGTYPE_USER1 when rte_log has no room. */
int dn_log_register(const char *name);

/* One line: timestamp, level, type name, the message. Use WLOG, which filters first. */
void dn_log(int type, uint32_t level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Applies a level spec, "pattern:level[,pattern:level...]" (pattern: a shell glob over type
 * names, as EAL's --log-level; level: emergency alert critical error warning notice info
 * debug, any case, or 1..8), to every registered type and to none if any entry is bad: then
 * -EINVAL and err says "<source>: '<entry>' ..." in one line.
 */
int dn_log_set_levels(const char *spec, const char *source, char *err, size_t errlen);

/* dn_log_set_levels' check alone: 0 when spec is well formed, else -EINVAL and err as there.
 * The constructors cannot refuse a bad WHARF_LOG_LEVEL (they log it once and ignore it);
 * a program refuses it with this (apps/common's configuration does). */
int dn_log_check_levels(const char *spec, const char *source, char *err, size_t errlen);

#endif
