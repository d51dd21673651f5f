/* SPDX-License-Identifier: MIT */
/* kis-runtime: the OCI runtime command line (as runc and crun speak it) in
 * front of kis's tiers; global flags, the verb table, exit statuses.
 *
 * Theory of operation. An engine (podman's conmon, containerd's runc v2
 * shim, a Kubernetes RuntimeClass through either) runs this binary once per
 * verb, as it would run runc. There is no daemon of ours: every verb
 * checks what it is given and then becomes crun (execve), so the
 * processes, fds, terminal (--console-socket) and state directory (--root)
 * the engine sees are exactly crun's, and `state` is crun's OCI state.
 *
 *   create/run: config.json is read, the tier chosen from the annotation
 *     run.kis.tier (container when absent), checked against what that tier
 *     enforces (policy.c: a refusal is named, logged, exit 125), normalised
 *     to kis's defaults (seccomp, masked paths, memory/pids/rlimits), and
 *     handed to crun as a sealed memfd (--config /proc/self/fd/N), so the
 *     engine's bundle is never rewritten.
 *   exec: --process FILE (or --cap) checked the same way, then crun exec.
 *   start, state, kill, delete, ps, pause, resume, list: crun's.
 *   features: ours (what this policy allows), per runtime-spec features.md.
 * Each crun runs in a mount namespace of its own on a hybrid cgroup host
 * (crun 1.8 refuses v1 controllers beside a v2 mount; backends/oci/crun.c).
 * run.kis.tier host is bubblewrap instead (host_plan.c: what of the bundle
 * bwrap enforces; host.c: the lifecycle, ours,
 * kept under <root>/kis-host/); run.kis.tier microvm is a kis microvm
 * session (mvm.c: create boots the guest on the rootfs, start execs the
 * process in it), kept under <root>/kis-microvm/. */
#include "core/util.h"

#include <string.h>
#include <sys/stat.h>

#include "runtime/runtime.h"

#define KRT_VERSION "0.1.0"
#define KRT_DEFAULT_ROOT "/run/kis-runtime"

static const struct {
	const char *name;
	krt_verb_fn fn;
} verbs[] = {
	{"create", krt_cmd_create},       {"run", krt_cmd_run},
	{"exec", krt_cmd_exec},           {"features", krt_cmd_features},
	{"start", krt_cmd_passthrough},   {"state", krt_cmd_passthrough},
	{"kill", krt_cmd_passthrough},    {"delete", krt_cmd_passthrough},
	{"ps", krt_cmd_passthrough},      {"pause", krt_cmd_passthrough},
	{"resume", krt_cmd_passthrough},  {"list", krt_cmd_passthrough},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kis-runtime [--root DIR] [--log FILE] [--log-format text|json] "
		   "[--log-level error|warn|info|debug] [--debug] "
		   "[--systemd-cgroup] [--kis-guest-dir DIR] VERB [FLAGS] ID\n"
		   "verbs: create start state kill delete run exec ps features pause resume "
		   "list\n"
		   "the tier comes from config.json's annotation run.kis.tier (container)\n");
}

/* Match --name, --name=V, -name (Go's form); *val gets V or the next arg. */
static int global_flag(char **argv, int argc, int *i, const char *name, bool has_value,
		       const char **val)
{
	const char *a = argv[*i];
	const char *n = a[0] == '-' ? a + 1 + (a[1] == '-') : NULL;
	size_t len = strlen(name);
	if (!n || strncmp(n, name, len) != 0 || (n[len] != '\0' && n[len] != '='))
		return 0;
	if (!has_value)
		return n[len] == '\0' || strcmp(n + len, "=true") == 0 ? 1 : 2;
	if (n[len] == '=') {
		*val = n + len + 1;
		return 1;
	}
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 1;
}

static int parse_globals(int argc, char **argv, struct krt_globals *g, int *verb_at,
			 struct kis_error **err)
{
	memset(g, 0, sizeof(*g));
	/* kis-runtime-<tier> (a link made by make install) pins the tier: an
	 * operator's RuntimeClass names the binary, the pod cannot move it */
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	g->pinned_tier = strncmp(base, "kis-runtime-", 12) == 0 ? krt_tier_parse(base + 12) : -1;
	if (strncmp(base, "kis-runtime-", 12) == 0 && g->pinned_tier < 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "'%s': kis-runtime-<tier> names container, host or microvm",
				     base);
	int i;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *v = NULL;
		int m;
		if ((m = global_flag(argv, argc, &i, "root", true, &v)) != 0)
			g->root = v;
		else if ((m = global_flag(argv, argc, &i, "log", true, &v)) != 0)
			g->log = v;
		else if ((m = global_flag(argv, argc, &i, "log-level", true, &v)) != 0)
			g->log_level = v;
		else if ((m = global_flag(argv, argc, &i, "log-format", true, &v)) != 0) {
			if (m > 0 && strcmp(v, "json") != 0 && strcmp(v, "text") != 0)
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "--log-format '%s': text or json", v);
			g->log_json = m > 0 && strcmp(v, "json") == 0;
		} else if ((m = global_flag(argv, argc, &i, "systemd-cgroup", false, &v)) != 0)
			g->systemd_cgroup = m == 1;
		else if ((m = global_flag(argv, argc, &i, "cgroup-manager", true, &v)) != 0) {
			if (m > 0 && strcmp(v, "systemd") == 0)
				g->systemd_cgroup = true;
			else if (m > 0 && strcmp(v, "cgroupfs") != 0)
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "--cgroup-manager '%s': cgroupfs or systemd",
						     v);
		} else if ((m = global_flag(argv, argc, &i, "kis-guest-dir", true, &v)) != 0) {
			/* kis's own: where the microvm tier's guest kernel is (else
			 * $KIS_MICROVM_GUEST_DIR, else the system location that
			 * make install fills); podman's conmon hands the runtime
			 * no environment of the caller's, so a flag carries it */
			if (m > 0 && (v[0] != '/' || setenv("KIS_MICROVM_GUEST_DIR", v, 1) < 0))
				return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
						     "--kis-guest-dir '%s': an absolute path", v);
		} else if ((m = global_flag(argv, argc, &i, "debug", false, &v)) != 0)
			g->debug = m == 1;
		else if ((m = global_flag(argv, argc, &i, "rootless", true, &v)) != 0) {
			/* kis-runtime runs as root; a rootless engine is not supported */
			if (m > 0 && strcmp(v, "false") != 0 && strcmp(v, "auto") != 0)
				return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						     "--rootless '%s': kis-runtime runs containers "
						     "as root only",
						     v);
		} else
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "unknown global flag '%s'", argv[i]);
		if (m < 0)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "global flag '%s' needs a value", argv[i]);
	}
	/* runc's --systemd-cgroup makes the container's cgroup a systemd scope:
	 * only where systemd runs (sd_booted(3) tests this directory) */
	struct stat st;
	if (g->systemd_cgroup && stat("/run/systemd/system", &st) < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "--systemd-cgroup: systemd is not the init of this host "
				     "(no /run/systemd/system); use the cgroupfs manager");
	/* a state directory of our own by default: containers kis-runtime made
	 * are not mixed with those of a crun run directly (/run/crun) */
	if (!g->root)
		g->root = KRT_DEFAULT_ROOT;
	*verb_at = i;
	return 0;
}

int main(int argc, char **argv)
{
	struct krt_globals g;
	struct kis_error *err = NULL;
	int at = 0;
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0 ||
			  strcmp(argv[1], "version") == 0)) {
		printf("kis-runtime version %s\nspec: 1.1.0\n", KRT_VERSION);
		return 0;
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (parse_globals(argc, argv, &g, &at, &err) < 0 || krt_log_setup(&g, &err) < 0) {
		krt_log_error(&g, err);
		kis_error_free(err);
		return KRT_EXIT_REFUSED;
	}
	if (at >= argc) {
		usage(stderr);
		return KRT_EXIT_REFUSED;
	}
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
		if (strcmp(argv[at], verbs[i].name) != 0)
			continue;
		int r = verbs[i].fn(&g, argc - at, argv + at, &err);
		if (r >= 0)
			return r;
		krt_log_error(&g, err);
		kis_error_free(err);
		return KRT_EXIT_REFUSED;
	}
	kis_error_set(&err, KIS_E_INVALID_ARGUMENT, 0,
		      "verb '%s' is not supported by kis-runtime (update, checkpoint and "
		      "restore could undo its checks)",
		      argv[at]);
	krt_log_error(&g, err);
	kis_error_free(err);
	return KRT_EXIT_REFUSED;
}
