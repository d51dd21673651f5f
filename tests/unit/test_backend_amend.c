/* SPDX-License-Identifier: MIT */
/* Tests of each backend's amend (kis/backend.h): a run plans before its
 * clone and amends that plan with the workspace and mounts it made (issue
 * 42); the amended plan must be the one a plan made with them would be. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kis/backend.h"
#include "kis/id.h"

/* The microvm is planned only where a guest is at hand (the tests' own
 * variable, as `make microvm-guest` sets it up); skipped elsewhere. */
static const char *guest(const struct kis_ctx *ctx)
{
	(void)ctx;
	const char *d = getenv("KIS_MICROVM_GUEST_DIR");
	return d && *d ? d : NULL;
}

static void no_progress(const struct kis_ctx *ctx, const char *what)
{
	(void)ctx;
	(void)what;
}

static void test_amended_plan_is_the_plan_made_with_the_workspace(void **state)
{
	(void)state;
	struct kis_ctx ctx = {.agent = "/bin/true", .agent_why = "", .guest_dir = guest,
			      .progress = no_progress};
	char *argv[] = {"prog.wasm", NULL};
	struct kis_mount pm = {.source = "w-unit", .target = "/data", .read_only = true};
	struct kis_mount_src ms = {.source = "w-unit", .target = "/data", .read_only = true,
				   .path = "/nonexistent/kis-unit/mount"};
	char id[KIS_ID_BUFSZ];
	assert_int_equal(kis_id_mint('s', id, NULL), 0);
	size_t n = 0, tried = 0;
	const struct kis_backend *const *bs = kis_backends(&n);
	for (size_t i = 0; i < n; i++) {
		const struct kis_backend *b = bs[i];
		struct kis_caps caps;
		b->probe(&ctx, &caps);
		if (!caps.present)
			continue;
		/* a run with a base: the profile says a workspace will be there */
		struct kis_profile p;
		memset(&p, 0, sizeof(p));
		p.base = "b-unit";
		p.escape_hatch.allow_process_tier = true;
		if (caps.mounts) {
			p.mounts = &pm;
			p.n_mounts = 1;
		}
		struct kis_run_request early = {.ctx = &ctx, .profile = &p, .argv = argv,
						.sandbox_id = id,
						.io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
						       .cancel_fd = -1}};
		kis_limits_resolve(&p.limits, &early.limits);
		struct kis_run_request made = early;
		made.workspace_path = "/nonexistent/kis-unit/ws";
		made.mounts = caps.mounts ? &ms : NULL;
		made.n_mounts = caps.mounts ? 1 : 0;

		struct kis_plan *a = NULL, *fresh = NULL;
		struct kis_error *err = NULL;
		if (b->plan(&caps, &early, &a, &err) < 0) {
			/* a backend this host has but that refuses the profile
			 * (an agent it cannot start here, say) has nothing to amend */
			print_message("%s: not planned here: %s\n", b->name,
				      err && err->message ? err->message : "?");
			kis_error_free(err);
			continue;
		}
		tried++;
		assert_non_null(b->amend);
		char *before = b->describe(a);
		assert_int_equal(b->amend(a, &made, &err), 0);
		assert_int_equal(b->plan(&caps, &made, &fresh, &err), 0);
		char *amended = b->describe(a), *want = b->describe(fresh);
		assert_non_null(before);
		assert_non_null(amended);
		assert_non_null(want);
		if (strcmp(amended, want))
			fail_msg("%s: the amended plan\n%s\nis not the plan made with the "
				 "workspace\n%s", b->name, amended, want);
		/* amending again (a second call) changes nothing and leaks nothing */
		assert_int_equal(b->amend(a, &made, &err), 0);
		char *again = b->describe(a);
		assert_string_equal(again, want);
		print_message("%s: amended%s\n", b->name,
			      strcmp(before, amended) ? "" : " (its description shows no workspace)");
		free(before);
		free(amended);
		free(want);
		free(again);
		b->plan_free(a);
		b->plan_free(fresh);
	}
	assert_true(tried > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_amended_plan_is_the_plan_made_with_the_workspace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
