/*
 * wc_testlib.h — what apps/common's tests share: a check for a file that `make deps`
 * installs (Debian's dataset-fashion-mnist). Include after <cmocka.h>.
 */
#ifndef WHARF_WC_TESTLIB_H
#define WHARF_WC_TESTLIB_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Returns when path is readable. Else the test is skipped, saying what is missing (the
 * runner counts it as skipped, never as passed), or fails when WHARF_TEST_DEPS=1: `make
 * test` sets it after `make deps` installed pkg, so a missing file there is a broken
 * install, not a reason to skip.
 */
static inline void wc_test_need_file(const char *path, const char *pkg)
{
	const char *deps = getenv("WHARF_TEST_DEPS");

	if (access(path, R_OK) == 0)
		return;
	if (deps != NULL && strcmp(deps, "1") == 0)
		fail_msg("%s missing, though make deps installs %s (WHARF_TEST_DEPS=1)", path, pkg);
	print_message("SKIP: %s missing (make deps installs %s)\n", path, pkg);
	skip();
}

#endif
