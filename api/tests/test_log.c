/*
 * test_log.c — the api layer's log type, "wharf.api": an error a call returns (its
 * wharf_errmsg text) is also a DEBUG line, hidden at the default level and shown, with its
 * time, level and type, once wharf.api is set to debug. Captured through rte_openlog_stream;
 * no EAL.
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
#include <cmocka.h>

#include "api/wh_pvt.h"

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
	rte_log_set_level_pattern("wharf.*", RTE_LOG_INFO);
	return 0;
}

static const char *captured(void)
{
	fflush(cap);
	return cap_len ? cap_buf : "";
}

static void find_fails(struct wharf_model *m, const char *name)
{
	uint32_t id;

	assert_int_equal(wharf_model_find(m, name, &id), -ENOENT);
	assert_non_null(strstr(wharf_errmsg(), name));
}

static void test_log_api_error_is_a_debug_line(void **state)
{
	struct wharf_model *m = NULL;
	char err[256] = "";
	regex_t r;

	(void)state;
	assert_int_equal(wharf_model_new(&m), 0);
	find_fails(m, "hidden");
	assert_string_equal(captured(), "");
	assert_int_equal(dn_log_set_levels("wharf.api:debug", "test", err, sizeof(err)), 0);
	find_fails(m, "shown");
	assert_int_equal(regcomp(&r, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
				     "DEBUG wharf\\.api: .*'shown'.*\n$", REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&r, captured(), 0, NULL, 0) != 0)
		fail_msg("captured \"%s\"", captured());
	regfree(&r);
	assert_null(strstr(captured(), "hidden"));
	wharf_model_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_log_api_error_is_a_debug_line, setup, teardown),
	};
	return cmocka_run_group_tests_name("api_log", tests, NULL, NULL);
}
