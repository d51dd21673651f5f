/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the OCI runtime front's reading of a bundle's
 * config.json (src/runtime/model.c, policy.c, host_plan.c). podman,
 * containerd or Kubernetes write that file, but much of it comes from an
 * image, a pod spec or a hand, which nobody vetted: a field of the wrong
 * JSON type, a huge number, a missing object must each end in a named
 * refusal, never a crash or a leak. The input is parsed by jansson, then
 * translated into kis's model and taken as far as the policy lets it go:
 * the tier, the container policy (which fills in defaults), bubblewrap's
 * plan; and, as an exec's process.json, the process model and policy.
 *
 * What the model promises is asserted on every input it accepts: no
 * namespace type survives twice, and no host path it hands on (root.path,
 * a bind's source) is or lies under the host's system paths. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kis/error.h"
#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int under(const char *a, const char *b)
{
	size_t n = strlen(b);
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

static void assert_host_path(const char *p)
{
	static const char *const sys[] = {"/etc", "/proc", "/sys", "/dev", "/usr", "/boot",
					  "/root", "/bin", "/sbin", "/lib", "/var/lib/kis"};
	if (!p || p[0] != '/' || strcmp(p, "/") == 0 || strstr(p, "/../") || strstr(p, "/./"))
		abort();
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (under(p, sys[i]))
			abort();
}

static void assert_model(const struct krt_model *m)
{
	json_t *nss = json_object_get(json_object_get(m->doc, "linux"), "namespaces");
	for (size_t i = 0; i < json_array_size(nss); i++)
		for (size_t j = i + 1; j < json_array_size(nss); j++)
			if (json_equal(json_object_get(json_array_get(nss, i), "type"),
				       json_object_get(json_array_get(nss, j), "type")))
				abort();
	assert_host_path(m->root.path);
	if (strcmp(json_string_value(json_object_get(json_object_get(m->doc, "root"), "path")),
		   m->root.path) != 0)
		abort();
	for (size_t i = 0; i < m->n_binds; i++)
		if (m->binds[i].fd >= 0)
			assert_host_path(m->binds[i].path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *config = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
	if (!config)
		return 0;
	struct kis_error *err = NULL;
	enum krt_tier tier;
	struct krt_model m;
	krt_model_init(&m);
	if (krt_policy_tier(config, -1, &tier, &err) == 0 &&
	    krt_model_read(config, ".", "/run/kis-runtime", "/var/lib/kis/sandbox", &m, &err) == 0) {
		assert_model(&m);
		if (krt_policy_container(m.doc, &err) == 0) {
			struct krt_host_plan p = {0};
			(void)krt_host_plan(&m, false, &p, &err);
			krt_host_plan_release(&p);
		}
	}
	krt_model_release(&m);
	kis_error_free(err);
	err = NULL;
	json_t *proc = NULL;
	if (krt_model_process(config, &proc, &err) == 0)
		(void)krt_policy_process(proc, "process.json", &err);
	json_decref(proc);
	kis_error_free(err);
	json_decref(config);
	return 0;
}
