/* SPDX-License-Identifier: MIT */
/* Test seams (house rule 17): an environment variable the behaviour tests
 * set exists only in the test build; what ships never reads it. */
#ifndef KIS_TEST_HOOK_H
#define KIS_TEST_HOOK_H

#include <stdlib.h>

/* KIS_TEST_GETENV("NAME"): getenv(NAME) in the test build (build/test/,
 * objects compiled with -DKIS_TEST_BUILD, never installed: the Makefile's
 * test-build target), NULL in the release build, where the name is not
 * even in the binary (tests/integration/test_shipped.py checks with the
 * binaries' strings). A seam that replaces a program (the VMM, crun,
 * bubblewrap, the agent), lifts a confinement (the VMM's seccomp filter,
 * the guest's test commands) or stops a run at a point goes through this
 * macro and no other way. The Makefile finds the files to build twice by
 * this macro's name. */
#ifdef KIS_TEST_BUILD
#define KIS_TEST_GETENV(name) getenv(name)
#else
#define KIS_TEST_GETENV(name) ((const char *)NULL)
#endif

#endif
