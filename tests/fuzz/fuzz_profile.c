/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the profile's JSON (src/core/profile.c), and the
 * round trip a session makes of it. A session of an agentless backend
 * keeps its profile as kis_profile_to_json wrote it and reads it back with
 * kis_profile_merge_json at every exec (src/engine/session.c), so a field
 * that does not survive the trip would run an exec under another profile
 * than its session's: a limit lost, or a hatch opened. For any profile the
 * merge accepts, its JSON must be accepted again, give the same profile
 * field by field (so a field the JSON drops is caught, not only one it
 * misnames) and print the same; any other input must end in a named
 * error, never a crash or a leak. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kis/error.h"
#include "kis/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_str(const char *x, const char *y)
{
	return x == y || (x && y && strcmp(x, y) == 0);
}

/* microvm.vcpus: 0 (unset) is 1, and prints as 1 */
static unsigned vcpus(const struct kis_profile *p)
{
	return p->microvm.vcpus ? p->microvm.vcpus : 1;
}

/* Every field of struct kis_profile (include/kis/profile.h). */
static bool same_profile(const struct kis_profile *a, const struct kis_profile *b)
{
	if (a->tier != b->tier || !same_str(a->backend, b->backend) ||
	    !same_str(a->base, b->base) || !same_str(a->workspace, b->workspace) ||
	    a->keep != b->keep || a->root != b->root || a->net != b->net ||
	    a->net_explicit != b->net_explicit || a->net_allow_set != b->net_allow_set ||
	    a->n_net_allow != b->n_net_allow || memcmp(&a->limits, &b->limits, sizeof(a->limits)) ||
	    a->n_env != b->n_env || !same_str(a->cwd, b->cwd) || a->n_mounts != b->n_mounts ||
	    a->tty.enabled != b->tty.enabled || a->tty.rows != b->tty.rows ||
	    a->tty.cols != b->tty.cols ||
	    a->escape_hatch.allow_process_tier != b->escape_hatch.allow_process_tier ||
	    a->escape_hatch.allow_net_host != b->escape_hatch.allow_net_host ||
	    a->microvm.accel != b->microvm.accel || vcpus(a) != vcpus(b) ||
	    a->wasm.engine != b->wasm.engine || a->wasm.preopen != b->wasm.preopen)
		return false;
	for (size_t i = 0; i < a->n_net_allow; i++) {
		const struct kis_net_dest *x = &a->net_allow[i], *y = &b->net_allow[i];
		if (x->addr != y->addr || x->prefix != y->prefix || x->port_lo != y->port_lo ||
		    x->port_hi != y->port_hi)
			return false;
	}
	for (size_t i = 0; i < a->n_env; i++)
		if (!same_str(a->env[i], b->env[i]))
			return false;
	for (size_t i = 0; i < a->n_mounts; i++)
		if (!same_str(a->mounts[i].source, b->mounts[i].source) ||
		    !same_str(a->mounts[i].target, b->mounts[i].target) ||
		    a->mounts[i].read_only != b->mounts[i].read_only)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kis_profile a, b;
	struct kis_error *err = NULL;
	kis_profile_init(&a);
	if (kis_profile_merge_json(&a, (const char *)data, size, &err) == 0) {
		char *j1 = kis_profile_to_json(&a);
		if (!j1)
			abort();
		kis_profile_init(&b);
		if (kis_profile_merge_json(&b, j1, strlen(j1), &err) < 0) {
			fprintf(stderr, "its own JSON refused: %s\n%s\n", err ? err->message : "?", j1);
			abort();
		}
		if (!same_profile(&a, &b)) {
			fprintf(stderr, "another profile after a round trip of:\n%s\n", j1);
			abort();
		}
		char *j2 = kis_profile_to_json(&b);
		if (!j2 || strcmp(j1, j2) != 0) {
			fprintf(stderr, "not the same after a round trip:\n%s\n%s\n", j1, j2);
			abort();
		}
		free(j1);
		free(j2);
		kis_profile_release(&b);
	}
	kis_error_free(err);
	kis_profile_release(&a);
	return 0;
}
