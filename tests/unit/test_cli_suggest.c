/* SPDX-License-Identifier: MIT */
/* Unit tests of the CLI's "did you mean" (src/cli/suggest.c, built in here:
 * the CLI is not part of the library): the typos issue 43 names are found,
 * a word far from every candidate or tied between two gets none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../src/cli/suggest.c"

static const char *const verbs[] = {"backends", "run", "create", "exec", "shell", "session",
				    "base", "clone", "destroy", "workspace", "gc", "guest"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_typos_of_issue_43_are_found(void **state)
{
	(void)state;
	static const char *const top[] = {"--version", "--help", "sandbox"};
	assert_string_equal(cli_suggest("--versoin", top, N(top)), "--version");
	assert_string_equal(cli_suggest("rnu", verbs, N(verbs)), "run");
	assert_string_equal(cli_suggest("destory", verbs, N(verbs)), "destroy");
	char buf[128];
	assert_string_equal(cli_suggest_list("contianer", "auto|process|wasm|host|container|microvm",
					     buf, sizeof(buf)),
			    "container");
	assert_string_equal(cli_suggest_list("egres", "off|loopback|egress|host", buf, sizeof(buf)),
			    "egress");
}

static void test_far_or_tied_words_get_no_suggestion(void **state)
{
	(void)state;
	assert_null(cli_suggest("frobnicate", verbs, N(verbs)));
	/* one edit from each of two candidates: name neither */
	static const char *const two[] = {"ab", "cb"};
	assert_null(cli_suggest("xb", two, N(two)));
	/* an exact match is no typo */
	assert_null(cli_suggest("run", verbs, N(verbs)));
	char buf[8];
	assert_null(cli_suggest_list("a", "a-list-longer-than-buf", buf, sizeof(buf)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_typos_of_issue_43_are_found),
		cmocka_unit_test(test_far_or_tied_words_get_no_suggestion),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
