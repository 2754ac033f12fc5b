/*
 * test_args.c — the tools' command-line helpers (wc_args.c): integers in a range with
 * their edges, junk, empty strings, signs and overflow; seconds; --ip A.B.C.D/LEN; the
 * refusal line with exit status 2, which scripts grep; and which --help is the tool's.
 * The wc_arg_* functions are called in process with stderr captured; the exiting
 * wc_parse_* / wc_bad_arg run in a child. A refusal is an ERROR log line of wharf.wc: its
 * prefix (time, level, type) is checked, then the message after it.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "apps/common/wc_args.h"

#define T "wharf-t"

/* The message of a refusal's log line ("" stays ""), after checking the line's prefix. */
static const char *unprefixed(const char *line)
{
	static const char *const re = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
				      "[0-9]{3}Z ERROR wharf\\.wc: ";
	regex_t r;
	regmatch_t m;

	if (line[0] == '\0')
		return line;
	assert_int_equal(regcomp(&r, re, REG_EXTENDED), 0);
	if (regexec(&r, line, 1, &m, 0) != 0)
		fail_msg("\"%s\" does not start with /%s/", line, re);
	regfree(&r);
	return line + m.rm_eo;
}

/* stderr diverted to a temporary file between cap_begin and cap_end. */
struct cap {
	FILE *tmp;
	int saved;
	char text[512];
};

static void cap_begin(struct cap *c)
{
	fflush(stderr);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), STDERR_FILENO) >= 0);
}

static const char *cap_end(struct cap *c)
{
	size_t n;

	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
	close(c->saved);
	rewind(c->tmp);
	n = fread(c->text, 1, sizeof(c->text) - 1, c->tmp);
	c->text[n] = '\0';
	fclose(c->tmp);
	return unprefixed(c->text);
}

/* wc_arg_u64 on s; returns its rc, *out starts at a sentinel so an untouched one shows. */
static int u64(const char *s, int base, uint64_t lo, uint64_t hi, uint64_t *out, char *msg,
	       size_t msglen)
{
	struct cap c;
	int rc;

	*out = 0xdeadbeefull;
	cap_begin(&c);
	rc = wc_arg_u64(T, "--n", s, base, lo, hi, out);
	snprintf(msg, msglen, "%s", cap_end(&c));
	return rc;
}

static void expect_u64(const char *s, int base, uint64_t lo, uint64_t hi, uint64_t want)
{
	uint64_t v;
	char msg[512];

	assert_int_equal(u64(s, base, lo, hi, &v, msg, sizeof(msg)), 0);
	assert_true(v == want);
	assert_string_equal(msg, "");
}

static void refuse_u64(const char *s, int base, uint64_t lo, uint64_t hi)
{
	uint64_t v;
	char msg[512], want[512];

	assert_int_equal(u64(s, base, lo, hi, &v, msg, sizeof(msg)), -EINVAL);
	assert_true(v == 0xdeadbeefull);
	snprintf(want, sizeof(want), T ": --n: expected an integer %llu..%llu, got '%s'\n",
		 (unsigned long long)lo, (unsigned long long)hi, s);
	assert_string_equal(msg, want);
}

static void test_args_u64_accepts_range_edges(void **state)
{
	(void)state;
	expect_u64("1", 10, 1, 65535, 1);
	expect_u64("65535", 10, 1, 65535, 65535);
	expect_u64("0", 10, 0, 0, 0);
	expect_u64("18446744073709551615", 10, 0, UINT64_MAX, UINT64_MAX);
	expect_u64("576", 10, 576, 9000, 576);
}

static void test_args_u64_refuses_outside_range(void **state)
{
	(void)state;
	refuse_u64("0", 10, 1, 65535);
	refuse_u64("65536", 10, 1, 65535);
	refuse_u64("575", 10, 576, 9000);
	refuse_u64("9001", 10, 576, 9000);
	refuse_u64("1", 10, 0, 0);
}

static void test_args_u64_refuses_junk_and_empty(void **state)
{
	(void)state;
	refuse_u64("", 10, 0, 100);
	refuse_u64("x", 10, 0, 100);
	refuse_u64("12x", 10, 0, 100);
	refuse_u64("1.5", 10, 0, 100);
	refuse_u64("1 ", 10, 0, 100);
	refuse_u64("0x", 0, 0, 100);
	refuse_u64("08", 0, 0, 100); /* base 0: octal, and 8 is no octal digit */
}

static void test_args_u64_refuses_signs_and_blanks(void **state)
{
	(void)state;
	/* strtoull would turn "-1" and " -1" into UINT64_MAX, inside this range. */
	refuse_u64("-1", 10, 0, UINT64_MAX);
	refuse_u64(" -1", 10, 0, UINT64_MAX);
	refuse_u64("-0", 10, 0, UINT64_MAX);
	refuse_u64("+1", 10, 0, UINT64_MAX);
	refuse_u64(" 1", 10, 0, UINT64_MAX);
}

static void test_args_u64_refuses_overflow(void **state)
{
	(void)state;
	refuse_u64("18446744073709551616", 10, 0, UINT64_MAX);
	refuse_u64("99999999999999999999999", 10, 0, UINT64_MAX);
	refuse_u64("0x10000000000000000", 0, 0, UINT64_MAX);
	refuse_u64("4294967296", 10, 0, UINT32_MAX);
}

static void test_args_u64_base_decides_prefixes(void **state)
{
	(void)state;
	expect_u64("0x10", 0, 0, 100, 16);
	expect_u64("010", 0, 0, 100, 8);
	expect_u64("0xffffffffffffffff", 0, 0, UINT64_MAX, UINT64_MAX);
	expect_u64("010", 10, 0, 100, 10);
	refuse_u64("0x10", 10, 0, 100);
}

static void test_args_seconds_accepts_and_refuses(void **state)
{
	static const char *bad[] = { "0", "-1", "0.0", "86400.5", "1e9", "nan", "inf", "", "2x", "x" };
	struct cap c;
	double v;
	char want[256];
	size_t i;

	(void)state;
	assert_int_equal(wc_arg_seconds(T, "--seconds", "86400", &v), 0);
	assert_true(v == 86400.0);
	assert_int_equal(wc_arg_seconds(T, "--seconds", "0.001", &v), 0);
	assert_true(v == 0.001);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = -7;
		cap_begin(&c);
		assert_int_equal(wc_arg_seconds(T, "--seconds", bad[i], &v), -EINVAL);
		snprintf(want, sizeof(want),
			 T ": --seconds: expected a number of seconds in (0, 86400], got '%s'\n", bad[i]);
		assert_string_equal(cap_end(&c), want);
		assert_true(v == -7);
	}
}

static void test_args_ip_prefix_accepts_and_refuses(void **state)
{
	static const char *bad[] = { "10.1.2.3", "10.1.2.3/0", "10.1.2.3/33", "256.1.2.3/8",
				     "1.2.3.4/8x", "1.2.3/8", "", "/24", "1.2.3.4/" };
	struct cap c;
	uint32_t ip;
	uint8_t len;
	char want[256];
	size_t i;

	(void)state;
	assert_int_equal(wc_arg_ip_prefix(T, "--ip", "10.1.2.3/24", &ip, &len), 0);
	assert_true(ip == 0x0a010203u);
	assert_int_equal(len, 24);
	assert_int_equal(wc_arg_ip_prefix(T, "--ip", "198.18.0.1/32", &ip, &len), 0);
	assert_int_equal(len, 32);
	assert_int_equal(wc_arg_ip_prefix(T, "--ip", "1.2.3.4/1", &ip, &len), 0);
	assert_int_equal(len, 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ip = 7;
		len = 7;
		cap_begin(&c);
		assert_int_equal(wc_arg_ip_prefix(T, "--ip", bad[i], &ip, &len), -EINVAL);
		snprintf(want, sizeof(want),
			 T ": --ip: expected A.B.C.D/LEN with a dotted IPv4 address and LEN 1..32, "
			   "got '%s'\n", bad[i]);
		assert_string_equal(cap_end(&c), want);
		assert_int_equal(ip, 7);
		assert_int_equal(len, 7);
	}
}

enum child_call { CALL_BAD_ARG, CALL_BAD_ARG_NULL, CALL_PARSE_U64, CALL_PARSE_SECONDS,
		  CALL_PARSE_IP };

/* Runs one exiting helper in a child; returns its exit status and what it wrote to stderr. */
static int run_child(enum child_call call, char *out, size_t outlen)
{
	int fd[2], status;
	ssize_t n;
	size_t got = 0;
	pid_t pid;
	uint32_t ip;
	uint8_t len;

	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], STDERR_FILENO);
		switch (call) {
		case CALL_BAD_ARG: wc_bad_arg(T, "--x", "what it wants", "g");
		case CALL_BAD_ARG_NULL: wc_bad_arg(T, "--port", "required", NULL);
		case CALL_PARSE_U64: wc_parse_u64(T, "--port", "x", 10, 1, 65535); break;
		case CALL_PARSE_SECONDS: wc_parse_seconds(T, "--seconds", "0"); break;
		case CALL_PARSE_IP: wc_parse_ip_prefix(T, "--ip", "1.2.3.4", &ip, &len); break;
		}
		_exit(99); /* an exiting helper that returned */
	}
	close(fd[1]);
	while (got + 1 < outlen && (n = read(fd[0], out + got, outlen - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	memmove(out, unprefixed(out), strlen(unprefixed(out)) + 1);
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_args_bad_arg_exits_2_with_one_line(void **state)
{
	char msg[512];

	(void)state;
	assert_int_equal(run_child(CALL_BAD_ARG, msg, sizeof(msg)), 2);
	assert_string_equal(msg, T ": --x: what it wants, got 'g'\n");
	assert_int_equal(run_child(CALL_BAD_ARG_NULL, msg, sizeof(msg)), 2);
	assert_string_equal(msg, T ": --port: required, got ''\n");
}

static void test_args_parse_exits_2_on_refusal(void **state)
{
	char msg[512];

	(void)state;
	assert_int_equal(run_child(CALL_PARSE_U64, msg, sizeof(msg)), 2);
	assert_string_equal(msg, T ": --port: expected an integer 1..65535, got 'x'\n");
	assert_int_equal(run_child(CALL_PARSE_SECONDS, msg, sizeof(msg)), 2);
	assert_string_equal(msg, T ": --seconds: expected a number of seconds in (0, 86400], got '0'\n");
	assert_int_equal(run_child(CALL_PARSE_IP, msg, sizeof(msg)), 2);
	assert_string_equal(msg, T ": --ip: expected A.B.C.D/LEN with a dotted IPv4 address and "
				 "LEN 1..32, got '1.2.3.4'\n");
}

static void test_args_parse_returns_value_when_valid(void **state)
{
	uint32_t ip = 0;
	uint8_t len = 0;

	(void)state;
	assert_true(wc_parse_u64(T, "--port", "7300", 10, 1, 65535) == 7300);
	assert_true(wc_parse_u64(T, "--seed", "0x2a", 0, 0, UINT64_MAX) == 42);
	assert_true(wc_parse_seconds(T, "--seconds", "2.5") == 2.5);
	wc_parse_ip_prefix(T, "--ip", "127.0.0.1/8", &ip, &len);
	assert_true(ip == 0x7f000001u);
	assert_int_equal(len, 8);
}

/* Only an app's own --help (after "--") counts; before it, --help is EAL's to answer. */
static void test_args_help_wanted_only_after_dashdash(void **state)
{
	char *app[] = {"wharf-t", "-l", "0", "--", "--tx", "--help", NULL};
	char *app_short[] = {"wharf-t", "--", "-h", NULL};
	char *eal[] = {"wharf-t", "--help", "--", "--tx", NULL};
	char *no_dd[] = {"wharf-t", "--help", NULL};
	char *none[] = {"wharf-t", "--", "--tx", "--helpful", NULL};
	char *value[] = {"wharf-t", "--", "--", "--help", NULL};

	(void)state;
	assert_true(wc_args_help_wanted(6, app));
	assert_true(wc_args_help_wanted(3, app_short));
	assert_false(wc_args_help_wanted(4, eal));
	assert_false(wc_args_help_wanted(2, no_dd));
	assert_false(wc_args_help_wanted(4, none));
	assert_true(wc_args_help_wanted(4, value));
	assert_false(wc_args_help_wanted(1, no_dd));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args_u64_accepts_range_edges),
		cmocka_unit_test(test_args_u64_refuses_outside_range),
		cmocka_unit_test(test_args_u64_refuses_junk_and_empty),
		cmocka_unit_test(test_args_u64_refuses_signs_and_blanks),
		cmocka_unit_test(test_args_u64_refuses_overflow),
		cmocka_unit_test(test_args_u64_base_decides_prefixes),
		cmocka_unit_test(test_args_seconds_accepts_and_refuses),
		cmocka_unit_test(test_args_ip_prefix_accepts_and_refuses),
		cmocka_unit_test(test_args_bad_arg_exits_2_with_one_line),
		cmocka_unit_test(test_args_parse_exits_2_on_refusal),
		cmocka_unit_test(test_args_parse_returns_value_when_valid),
		cmocka_unit_test(test_args_help_wanted_only_after_dashdash),
	};

	return cmocka_run_group_tests_name("args", tests, NULL, NULL);
}
