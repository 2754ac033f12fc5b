/*
 * test_log.c — ps_core's lines through rte_log, without EAL: a checkpoint's DEBUG line is
 * filtered at the default level and shown, with its time, level and "wharf.ps" prefix, once
 * wharf.ps is set to debug (the spec WHARF_LOG_LEVEL and --log-level take).
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
#include <unistd.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

static char path[256];
static char *cap_buf;
static size_t cap_len;
static FILE *cap;

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/tmp/ps_log_test_%d.ckpt", (int)getpid());
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
	unlink(path);
	return 0;
}

static const char *captured(void)
{
	fflush(cap);
	return cap_len ? cap_buf : "";
}

static void save_one(void)
{
	struct ps_table_config t = pt_table(1, 2, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t rows = 99;
	char err[256] = "";

	assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	assert_int_equal(ps_save(c->h[0], path, &rows, err, sizeof(err)), 0);
	assert_int_equal(rows, 0);
	pt_cluster_destroy(c);
}

static void test_log_ps_debug_line_only_at_debug(void **state)
{
	char err[256] = "", re[600];
	regex_t r;

	(void)state;
	assert_int_equal(rte_log_get_level(ps_logtype), RTE_LOG_INFO);
	save_one();
	assert_null(strstr(captured(), "written"));
	assert_int_equal(dn_log_set_levels("wharf.ps:debug", "test", err, sizeof(err)), 0);
	save_one();
	snprintf(re, sizeof(re), "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		 "DEBUG wharf\\.ps: ps_save: checkpoint %s written: generation 0, 0 rows, [0-9]+ "
		 "bytes$", path);
	assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
	if (regexec(&r, captured(), 0, NULL, 0) != 0)
		fail_msg("\"%s\" has no line /%s/", captured(), re);
	regfree(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_log_ps_debug_line_only_at_debug, setup, teardown),
	};
	return cmocka_run_group_tests_name("ps_log", tests, NULL, NULL);
}
