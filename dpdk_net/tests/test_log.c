/*
 * test_log.c — the logging facility (dn_log.h) without EAL, as the kernel transport and
 * ps_core use it: a line's timestamp, level and type prefix; the level filter and the
 * "pattern:level" specs that move it (dn_log_set_levels, dn_log_check_levels, WHARF_LOG_LEVEL
 * at registration),
 * bad specs refused whole; long and newline-ended messages. Lines are captured through
 * rte_openlog_stream into a memory stream.
 */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "dpdk_net/dn_pvt.h"

static char *cap_buf;
static size_t cap_len;
static FILE *cap;

static int setup(void **state)
{
	(void)state;
	cap = open_memstream(&cap_buf, &cap_len);
	if (cap == NULL)
		return -1;
	rte_openlog_stream(cap);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rte_openlog_stream(NULL);
	fclose(cap);
	free(cap_buf);
	cap_buf = NULL;
	unsetenv("WHARF_LOG_LEVEL");
	rte_log_set_level_pattern("wharf.*", RTE_LOG_INFO);
	return 0;
}

/* What was logged since setup. */
static const char *captured(void)
{
	fflush(cap);
	return cap_len ? cap_buf : "";
}

static void assert_matches(const char *text, const char *re)
{
	regex_t r;

	assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
	if (regexec(&r, text, 0, NULL, 0) != 0)
		fail_msg("\"%s\" does not match /%s/", text, re);
	regfree(&r);
}

/* "2026-11-26T07:52:01.123Z INFO wharf.dn: ...", the time this second or the one before. */
static void test_log_line_has_utc_time_level_and_type(void **state)
{
	const char *line;
	struct tm tm = { 0 };
	time_t before = time(NULL), at;

	(void)state;
	DN_LOG(INFO, "port %u up", 3u);
	line = captured();
	assert_matches(line, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
			     "INFO wharf\\.dn: port 3 up\n$");
	assert_non_null(strptime(line, "%Y-%m-%dT%H:%M:%S", &tm));
	at = timegm(&tm);
	assert_true(at >= before - 1 && at <= time(NULL));
}

static void test_log_debug_hidden_until_its_type_is_set_to_debug(void **state)
{
	char err[256];

	(void)state;
	DN_LOG(DEBUG, "hidden");
	DN_LOG(WARNING, "shown");
	assert_matches(captured(), "^[^ ]+ WARNING wharf\\.dn: shown\n$");
	assert_int_equal(dn_log_set_levels("wharf.tl:debug", "test", err, sizeof(err)), 0);
	DN_LOG(DEBUG, "still hidden: another type");
	assert_int_equal(dn_log_set_levels(" wharf.d*:DEBUG , wharf.tl:7", "test", err, sizeof(err)), 0);
	DN_LOG(DEBUG, "now shown");
	assert_null(strstr(captured(), "hidden"));
	assert_matches(captured(), "^[^ ]+ DEBUG wharf\\.dn: now shown$");
	assert_int_equal(rte_log_get_level(dn_logtype), RTE_LOG_DEBUG);
	assert_int_equal(dn_log_set_levels("wharf.dn:error", "test", err, sizeof(err)), 0);
	DN_LOG(WARNING, "quiet now");
	assert_null(strstr(captured(), "quiet now"));
}

static void expect_refused(const char *spec, const char *words)
{
	char err[256] = "";

	assert_int_equal(dn_log_set_levels(spec, "--log-spec", err, sizeof(err)), -EINVAL);
	if (strstr(err, words) == NULL || strncmp(err, "--log-spec: ", 12) != 0)
		fail_msg("error \"%s\" does not name its source and \"%s\"", err, words);
	assert_null(strchr(err, '\n'));
}

/* A bad entry voids the whole spec: the good entries before it change nothing either. */
static void test_log_bad_specs_refused_whole(void **state)
{
	(void)state;
	expect_refused("wharf.dn:debug,wharf.tl=info", "'wharf.tl=info' is not pattern:level");
	assert_int_equal(rte_log_get_level(dn_logtype), RTE_LOG_INFO);
	expect_refused("wharf.dn:loud", "'wharf.dn:loud'");
	expect_refused(":debug", "':debug'");
	expect_refused("wharf.dn:0", "'wharf.dn:0'");
	expect_refused("wharf.dn:9", "'wharf.dn:9'");
	expect_refused("wharf.dn:", "'wharf.dn:'");
	expect_refused("wharf.dn", "'wharf.dn'");
	char big[300];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_refused(big, "is longer than");
	assert_int_equal(rte_log_get_level(dn_logtype), RTE_LOG_INFO);
}

/* WHARF_LOG_LEVEL is applied to each type as it registers, matching entries only. */
static void test_log_env_sets_level_at_registration(void **state)
{
	char err[256] = "";
	int a, b;

	(void)state;
	setenv("WHARF_LOG_LEVEL", "wharf.envtest.*:debug,wharf.envtest.b:warning", 1);
	assert_int_equal(dn_log_check_levels(getenv("WHARF_LOG_LEVEL"), "WHARF_LOG_LEVEL", err,
					     sizeof(err)), 0);
	a = dn_log_register("wharf.envtest.a");
	b = dn_log_register("wharf.envtest.b");
	assert_int_equal(rte_log_get_level(a), RTE_LOG_DEBUG);
	assert_int_equal(rte_log_get_level(b), RTE_LOG_WARNING); /* the later entry wins */
	assert_int_equal(dn_log_register("wharf.envtest.a"), a);
	WLOG(a, DEBUG, "from a");
	assert_matches(captured(), "^[^ ]+ DEBUG wharf\\.envtest\\.a: from a$");
}

/* A bad variable is reported once, with its name, and ignored: the type keeps INFO. */
static void test_log_env_bad_value_reported_and_ignored(void **state)
{
	char err[256] = "";
	int t;

	(void)state;
	setenv("WHARF_LOG_LEVEL", "wharf.envbad:debug,wharf.envbad", 1);
	assert_int_equal(dn_log_check_levels(getenv("WHARF_LOG_LEVEL"), "WHARF_LOG_LEVEL", err,
					     sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "WHARF_LOG_LEVEL: 'wharf.envbad' is not pattern:level"));
	t = dn_log_register("wharf.envbad");
	assert_int_equal(rte_log_get_level(t), RTE_LOG_INFO);
	dn_log_register("wharf.envbad2");
	assert_matches(captured(), "^[^ ]+ ERROR wharf\\.envbad: WHARF_LOG_LEVEL: 'wharf.envbad' is "
				   "not pattern:level .*; WHARF_LOG_LEVEL ignored\n$");
	assert_ptr_equal(strchr(captured(), '\n'), captured() + strlen(captured()) - 1);
}

/* Past the stack buffer the message is still whole; a trailing newline is not doubled. */
static void test_log_long_and_newline_ended_messages_one_line_each(void **state)
{
	static char big[5000];
	const char *out, *p;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 2] = 'y';
	DN_LOG(INFO, "%s", big);
	DN_LOG(ERR, "ends with a newline\n");
	out = captured();
	p = strstr(out, "wharf.dn: x");
	assert_non_null(p);
	p += strlen("wharf.dn: ");
	assert_int_equal(strspn(p, "x"), sizeof(big) - 2);
	assert_memory_equal(p + sizeof(big) - 2, "y\n", 2);
	assert_matches(out, "^[^ ]+ ERROR wharf\\.dn: ends with a newline\n$");
	assert_null(strstr(out, "\n\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_log_line_has_utc_time_level_and_type, setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_debug_hidden_until_its_type_is_set_to_debug,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_bad_specs_refused_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_env_sets_level_at_registration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_env_bad_value_reported_and_ignored, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_log_long_and_newline_ended_messages_one_line_each,
						setup, teardown),
	};
	return cmocka_run_group_tests_name("dn_log", tests, NULL, NULL);
}
