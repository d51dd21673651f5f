/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the OCI runtime front's reading of a bundle's
 * config.json (src/runtime/policy.c, host_plan.c). podman, containerd or
 * Kubernetes write that file, but much of it comes from an image and its
 * labels, which nobody vetted: a field of the wrong JSON type, a huge
 * number, a missing object must each end in a named refusal, never a crash
 * or a leak. The input is parsed by jansson, then taken as far as the
 * policy lets it go: the tier, the container policy (which rewrites the
 * document in place), bubblewrap's plan; and, as an exec's process.json
 * (`exec --process`), the process policy. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kis/error.h"
#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *config = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
	if (!config)
		return 0;
	struct kis_error *err = NULL;
	enum krt_tier tier;
	if (krt_policy_tier(config, -1, &tier, &err) == 0 &&
	    krt_policy_container(config, ".", &err) == 0) {
		struct krt_host_plan p = {0};
		(void)krt_host_plan(config, false, &p, &err);
		krt_host_plan_release(&p);
	}
	kis_error_free(err);
	err = NULL;
	(void)krt_policy_process(config, "process.json", &err);
	kis_error_free(err);
	json_decref(config);
	return 0;
}
