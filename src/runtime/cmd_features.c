/* SPDX-License-Identifier: MIT */
/* kis-runtime features (runtime-spec features.md) and the verbs handed to
 * crun unchanged: start, state, kill, delete, ps, pause, resume, list. */
#include "core/util.h"

#include <string.h>
#include <sys/stat.h>

#include "backends/oci/bundle.h"
#include "runtime/runtime.h"

int krt_cmd_features(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	json_t *caps = json_array();
	for (size_t i = 0; caps && i < krt_n_allowed_caps; i++)
		json_array_append_new(caps, json_string(krt_allowed_caps[i]));
	int layout = kis_oci_cgroup_layout();
	struct stat st;
	bool systemd = stat("/run/systemd/system", &st) == 0;
	/* the mount options and namespaces are the model's (model.c): what
	 * features says a bundle may ask is what create takes */
	json_t *opts = json_array(), *nss = json_array();
	json_t *doc = NULL;
	if (caps && opts && nss && krt_model_features(opts, nss) == 0)
		doc = json_pack(
			"{s:s,s:s,s:[s,s,s,s,s,s],s:O,"
			"s:{s:O,s:O,s:{s:b,s:b,s:b,s:b},s:{s:b},s:{s:b},s:{s:b}},"
			"s:{s:s,s:s,s:s}}",
			"ociVersionMin", "1.0.0", "ociVersionMax", "1.1.0",
			/* hooks run only with run.kis.allow-hooks=true */
			"hooks", "prestart", "createRuntime", "createContainer", "startContainer",
			"poststart", "poststop",
			"mountOptions", opts,
			"linux",
			"namespaces", nss,
			"capabilities", caps,
			"cgroup", "v1", layout == 1 || layout == 3, "v2", layout == 2, "systemd",
			systemd, "systemdUser", false,
			"seccomp", "enabled", true,
			"apparmor", "enabled", false,
			"selinux", "enabled", false,
			"annotations",
			/* what kis-runtime reads, with the values it takes */
			KRT_ANN_TIER, "container,host,microvm",
			KRT_ANN_NET_HOST, "false",
			KRT_ANN_HOOKS, "false");
	json_decref(opts);
	json_decref(nss);
	json_decref(caps);
	if (!doc)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "features");
	int r = json_dumpf(doc, stdout, JSON_INDENT(2)) < 0 ? -1 : 0;
	json_decref(doc);
	putchar('\n');
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "writing features");
	return 0;
}

int krt_cmd_passthrough(const struct krt_globals *g, int argc, char **argv,
			struct kis_error **err)
{
	/* the container's id, parsed as every tier parses it; crun gets the
	 * verb's flags as given */
	struct krt_verb_args va;
	krt_verb_parse(argc, argv, &va);
	/* one rule for ids at every verb and tier: `delete -f ../victim`
	 * would otherwise be a path beside the state root to crun */
	if (va.id && krt_valid_id(va.id, err) < 0)
		return -1;
	if (va.id && krt_host_owns(g, va.id))
		return krt_host_verb(g, argc, argv, err);
	if (va.id && krt_mvm_owns(g, va.id))
		return krt_mvm_verb(g, argc, argv, err);
	struct kis_argv a = {0};
	int r = krt_crun_begin(&a, g, err);
	for (int i = 0; r >= 0 && i < argc; i++)
		r = krt_argv_push(&a, argv[i], err);
	if (r >= 0)
		r = krt_crun_exec(&a, err);
	kis_argv_release(&a);
	return r;
}
