/* SPDX-License-Identifier: MIT */
/* kis-runtime: kis's policy over an OCI config.json: what the container
 * tier refuses (named), and the deny-all defaults it fills in. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "backends/oci/bundle.h"
#include "confine/confine.h"
#include "confine/sysview.h"
#include "kis/profile.h"
#include "runtime/runtime.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* The capabilities a container may hold: the default set of Docker,
 * containerd and podman (moby's oci/caps/defaults.go lists the same 14).
 * Anything else (CAP_SYS_ADMIN, CAP_NET_ADMIN, ... as --privileged asks)
 * is refused: the container tier promises a boundary those caps undo. */
const char *const krt_allowed_caps[] = {
	"CAP_AUDIT_WRITE", "CAP_CHOWN",  "CAP_DAC_OVERRIDE",     "CAP_FOWNER",
	"CAP_FSETID",      "CAP_KILL",   "CAP_MKNOD",            "CAP_NET_BIND_SERVICE",
	"CAP_NET_RAW",     "CAP_SETFCAP", "CAP_SETGID",          "CAP_SETPCAP",
	"CAP_SETUID",      "CAP_SYS_CHROOT",
};
const size_t krt_n_allowed_caps = ARRAY_SIZE(krt_allowed_caps);

/* Namespaces the container tier always has of its own (runtime-spec
 * config-linux.md "Namespaces": an absent type means the runtime's, i.e.
 * the host's). A path naming the host's own namespace is the same thing. */
static const struct {
	const char *type;   /* linux.namespaces[].type */
	const char *procns; /* /proc/self/ns/<this> */
} required_ns[] = {
	{"pid", "pid"}, {"mount", "mnt"}, {"ipc", "ipc"}, {"uts", "uts"}, {"network", "net"},
};

/* linux.resources members and the cgroup controller that enforces each:
 * on v1 its hierarchy under /sys/fs/cgroup, on v2 its name in
 * cgroup.controllers. crun skips a member whose controller is absent (and
 * on a hybrid host crun sees only v1, so hugetlb on the v2 mount is
 * absent): refused here instead of run without it. */
static const struct {
	const char *member;
	const char *v1;
	const char *v2; /* NULL: no v2 controller */
} res_controllers[] = {
	{"memory", "memory", "memory"}, {"pids", "pids", "pids"},
	{"cpu", "cpu", "cpu"},          {"blockIO", "blkio", "io"},
	{"hugepageLimits", "hugetlb", "hugetlb"}, {"network", "net_cls", NULL},
	{"rdma", "rdma", "rdma"},
};

/* Character devices a container may read and write: those runc and crun
 * create in every container, the pseudo-terminals and tun (usable only
 * with CAP_NET_ADMIN, which no container holds). Anything else (a disk,
 * /dev/mem, /dev/kvm, fuse) gives the host's hardware or kernel to it:
 * `--device` and cgroup rules that open them are refused. minor -1: any. */
static const struct {
	long major, minor;
	const char *name;
} harmless_devs[] = {
	{1, 3, "null"}, {1, 5, "zero"}, {1, 7, "full"}, {1, 8, "random"}, {1, 9, "urandom"},
	{5, 0, "tty"},  {5, 1, "console"}, {5, 2, "ptmx"}, {136, -1, "pts"}, {10, 200, "net/tun"},
};

static bool dev_harmless(const char *type, long major, long minor)
{
	if (!type || strcmp(type, "c") != 0 || major < 0)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(harmless_devs); i++)
		if (harmless_devs[i].major == major &&
		    (harmless_devs[i].minor == -1 || harmless_devs[i].minor == minor) &&
		    (minor >= 0 || harmless_devs[i].minor == -1))
			return true;
	return false;
}

static long int_or(json_t *o, const char *k, long dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

static int check_devices(json_t *linux_, struct kis_error **err)
{
	json_t *d;
	size_t i;
	json_array_foreach(json_object_get(linux_, "devices"), i, d) {
		const char *type = json_string_value(json_object_get(d, "type"));
		const char *path = json_string_value(json_object_get(d, "path"));
		long major = int_or(d, "major", -1), minor = int_or(d, "minor", -1);
		if (!dev_harmless(type, major, minor))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.devices[%zu] '%s' (%s %ld:%ld): the container "
					     "tier gives no host device but null, zero, full, "
					     "random, urandom, tty, console, ptmx, pts and tun",
					     i, path ? path : "", type ? type : "?", major, minor);
	}
	json_array_foreach(json_object_get(json_object_get(linux_, "resources"), "devices"), i, d) {
		if (!json_is_true(json_object_get(d, "allow")))
			continue;
		const char *access = json_string_value(json_object_get(d, "access"));
		/* an absent access is "rwm" (config-linux.md, "Allowed Device
		 * List"); "m" alone makes nodes, it opens none */
		if (access && !strchr(access, 'r') && !strchr(access, 'w'))
			continue;
		const char *type = json_string_value(json_object_get(d, "type"));
		long major = int_or(d, "major", -1), minor = int_or(d, "minor", -1);
		if (!dev_harmless(type ? type : "a", major, minor))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.resources.devices[%zu] allows '%s' on %s %ld:%ld: "
					     "only the devices the container tier gives may be opened",
					     i, access ? access : "rwm", type ? type : "a", major, minor);
	}
	return 0;
}

/* Sysctls a container may set: only those its own namespaces hold (the
 * IPC namespace's kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*; the
 * network namespace's net.*, where it has one of its own); any other is
 * the host's kernel. */
static int check_sysctl(json_t *linux_, int net_kind, struct kis_error **err)
{
	static const char *const ipc_ns[] = {"kernel.shm", "kernel.msg", "kernel.sem",
					     "fs.mqueue."};
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(linux_, "sysctl"), k, v) {
		bool ok = strncmp(k, "net.", 4) == 0 && net_kind != 3;
		for (size_t i = 0; !ok && i < ARRAY_SIZE(ipc_ns); i++)
			ok = strncmp(k, ipc_ns[i], strlen(ipc_ns[i])) == 0;
		if (!ok)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.sysctl '%s': not one of the container's own "
					     "namespaces (ipc: kernel.shm*, kernel.msg*, kernel.sem, "
					     "fs.mqueue.*; network: net.*)",
					     k);
	}
	const char *prop = json_string_value(json_object_get(linux_, "rootfsPropagation"));
	if (prop && (strcmp(prop, "shared") == 0 || strcmp(prop, "rshared") == 0))
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "linux.rootfsPropagation '%s': propagation back to the host "
				     "is refused",
				     prop);
	return 0;
}

int krt_policy_cap(const char *cap, const char *where, struct kis_error **err)
{
	for (size_t i = 0; i < krt_n_allowed_caps; i++) {
		if (strcasecmp(cap, krt_allowed_caps[i]) == 0 ||
		    (strncasecmp(cap, "CAP_", 4) != 0 &&
		     strcasecmp(cap, krt_allowed_caps[i] + 4) == 0))
			return 0;
	}
	return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
			     "%s names '%s': the container tier grants only the default "
			     "capabilities (see kis-runtime features)",
			     where, cap);
}

int krt_policy_process(json_t *process, const char *where, struct kis_error **err)
{
	json_t *caps = json_object_get(process, "capabilities");
	if (!caps)
		return 0;
	if (!json_is_object(caps))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s.capabilities is not an object",
				     where);
	const char *set;
	json_t *list;
	json_object_foreach(caps, set, list) {
		size_t i;
		json_t *c;
		char field[96];
		snprintf(field, sizeof(field), "%s.capabilities.%s", where, set);
		json_array_foreach(list, i, c) {
			if (!json_is_string(c))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "%s[%zu] is not a string", field, i);
			TRY(krt_policy_cap(json_string_value(c), field, err));
		}
	}
	return 0;
}

static const char *const tier_names[] = {
	[KRT_TIER_CONTAINER] = "container",
	[KRT_TIER_MICROVM] = "microvm",
	[KRT_TIER_HOST] = "host",
};

const char *krt_tier_name(enum krt_tier t)
{
	return (size_t)t < ARRAY_SIZE(tier_names) ? tier_names[t] : "?";
}

int krt_tier_parse(const char *s)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(tier_names); i++)
		if (strcmp(s, tier_names[i]) == 0)
			return (int)i;
	return -1;
}

int krt_policy_tier(json_t *config, int pinned, enum krt_tier *out, struct kis_error **err)
{
	*out = pinned >= 0 ? (enum krt_tier)pinned : KRT_TIER_CONTAINER;
	json_t *ann = json_object_get(config, "annotations");
	const char *k;
	json_t *v;
	json_object_foreach(ann, k, v) {
		if (strncmp(k, KRT_ANN_PREFIX, strlen(KRT_ANN_PREFIX)) != 0)
			continue;
		const char *s = json_string_value(v);
		if (!s)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "annotations.%s is not a string", k);
		if (strcmp(k, KRT_ANN_TIER) == 0) {
			int t = krt_tier_parse(s);
			if (t < 0)
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "annotations.%s '%s': one of container, "
						     "microvm, host",
						     k, s);
			/* whoever writes the pod's annotations does not choose a
			 * weaker (or any other) tier than the operator's binary */
			if (pinned >= 0 && t != pinned)
				return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						     "annotations.%s '%s': this runtime is "
						     "kis-runtime-%s, pinned to the '%s' tier",
						     k, s, krt_tier_name((enum krt_tier)pinned),
						     krt_tier_name((enum krt_tier)pinned));
			*out = (enum krt_tier)t;
		} else if (strcmp(k, KRT_ANN_NET_HOST) == 0 || strcmp(k, KRT_ANN_HOOKS) == 0) {
			if (strcmp(s, "true") != 0 && strcmp(s, "false") != 0)
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "annotations.%s '%s': true or false", k, s);
		} else {
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "annotations.%s: unknown kis annotation (known: %s, %s, %s)",
					     k, KRT_ANN_TIER, KRT_ANN_NET_HOST, KRT_ANN_HOOKS);
		}
	}
	return 0;
}

static bool net_host_allowed(json_t *config)
{
	const char *s = json_string_value(
		json_object_get(json_object_get(config, "annotations"), KRT_ANN_NET_HOST));
	return s && strcmp(s, "true") == 0;
}

/* Is path the namespace the runtime itself is in (the host's)? 1 yes,
 * 0 no, -1 when it cannot be told: refused, as it could be the host's. */
static int is_own_ns(const char *path, const char *procns)
{
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/ns/%s", procns);
	struct stat a, b;
	if (stat(path, &a) < 0 || stat(self, &b) < 0)
		return -1;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* 1: the container has its own network namespace with no path (nothing
 * but its loopback); 2: one joined by path (an engine's network). */
static int check_namespaces(json_t *config, int *net_kind, struct kis_error **err)
{
	json_t *nss = json_object_get(json_object_get(config, "linux"), "namespaces");
	*net_kind = 0;
	for (size_t r = 0; r < ARRAY_SIZE(required_ns); r++) {
		json_t *found = NULL, *n;
		size_t i;
		json_array_foreach(nss, i, n) {
			const char *t = json_string_value(json_object_get(n, "type"));
			if (t && strcmp(t, required_ns[r].type) == 0)
				found = n;
		}
		bool is_net = strcmp(required_ns[r].type, "network") == 0;
		const char *path = found ? json_string_value(json_object_get(found, "path")) : NULL;
		int own = path ? is_own_ns(path, required_ns[r].procns) : 0;
		if (own < 0)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, errno,
					     "linux.namespaces: the '%s' namespace at '%s' cannot "
					     "be checked against the host's",
					     required_ns[r].type, path);
		bool host = !found || own == 1;
		if (host && is_net) {
			if (net_host_allowed(config)) {
				*net_kind = 3;
				continue;
			}
			return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0,
					     "linux.namespaces: the container shares the host's "
					     "network namespace, which needs the annotation "
					     "%s=true",
					     KRT_ANN_NET_HOST);
		}
		if (host)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.namespaces: the container shares the host's "
					     "'%s' namespace; the container tier always has its own",
					     required_ns[r].type);
		if (is_net)
			*net_kind = path && *path ? 2 : 1;
	}
	return 0;
}

bool krt_mount_is_bind(json_t *m)
{
	/* the model writes every bind's type as "bind" (model.c) */
	const char *type = json_string_value(json_object_get(m, "type"));
	return type && strcmp(type, "bind") == 0;
}

static bool controller_present(const char *v1, const char *v2)
{
	int layout = kis_oci_cgroup_layout();
	if (layout == 1 || layout == 3) {
		char p[96];
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s", v1);
		struct statfs sf;
		return statfs(p, &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC;
	}
	if (layout != 2 || !v2)
		return false;
	_cleanup_fclose_ FILE *f = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
	char line[512];
	if (!f || !fgets(line, sizeof(line), f))
		return false;
	for (char *save = NULL, *t = strtok_r(line, " \n", &save); t;
	     t = strtok_r(NULL, " \n", &save))
		if (strcmp(t, v2) == 0)
			return true;
	return false;
}

static int check_resources(json_t *res, struct kis_error **err)
{
	const char *k;
	json_t *v;
	json_object_foreach(res, k, v) {
		if (strcmp(k, "devices") == 0)
			continue; /* the device list: enforced on every layout */
		if (strcmp(k, "unified") == 0) {
			if (json_object_size(v) && kis_oci_cgroup_layout() != 2)
				return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						     "linux.resources.unified needs cgroup v2; "
						     "this host has v1 controllers");
			continue;
		}
		bool empty = (json_is_object(v) && json_object_size(v) == 0) ||
			     (json_is_array(v) && json_array_size(v) == 0) || json_is_null(v);
		if (empty)
			continue;
		size_t r;
		for (r = 0; r < ARRAY_SIZE(res_controllers); r++)
			if (strcmp(k, res_controllers[r].member) == 0)
				break;
		if (r == ARRAY_SIZE(res_controllers))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.resources.%s: not enforced by the container tier",
					     k);
		if (!controller_present(res_controllers[r].v1, res_controllers[r].v2))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.resources.%s: the '%s' cgroup controller is not "
					     "available to crun on this host",
					     k, res_controllers[r].v1);
	}
	return 0;
}

/* obj[key] as an object, made when absent. */
static json_t *child(json_t *obj, const char *key, struct kis_error **err)
{
	json_t *c = json_object_get(obj, key);
	if (json_is_object(c))
		return c;
	if (c) {
		kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "'%s' is not an object", key);
		return NULL;
	}
	c = json_object();
	if (!c || json_object_set_new(obj, key, c) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
		return NULL;
	}
	return c;
}

/* A limit that is absent, 0 or negative (-1 is "unlimited" in the
 * runtime spec) takes kis's safe default: unset never means unlimited. */
static int default_limit(json_t *obj, const char *key, uint64_t def, struct kis_error **err)
{
	json_t *v = json_object_get(obj, key);
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return 0;
	if (json_object_set_new(obj, key, json_integer((json_int_t)def)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	return 0;
}

static int default_rlimit(json_t *process, const char *type, uint64_t def, struct kis_error **err)
{
	json_t *rl = json_object_get(process, "rlimits");
	if (!rl) {
		rl = json_array();
		if (!rl || json_object_set_new(process, "rlimits", rl) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	}
	json_t *r;
	size_t i;
	json_array_foreach(rl, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));
		if (t && strcmp(t, type) == 0)
			return 0;
	}
	if (json_array_append_new(rl, json_pack("{s:s,s:I,s:I}", "type", type, "hard",
						  (json_int_t)def, "soft", (json_int_t)def)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	return 0;
}

/* Add each of table[] missing from linux.<key>. */
static int union_paths(json_t *linux_, const char *key, const char *const *table, size_t n,
		       struct kis_error **err)
{
	json_t *arr = json_object_get(linux_, key);
	if (!arr) {
		arr = json_array();
		if (!arr || json_object_set_new(linux_, key, arr) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	}
	for (size_t t = 0; t < n; t++) {
		bool have = false;
		json_t *e;
		size_t i;
		json_array_foreach(arr, i, e) {
			const char *s = json_string_value(e);
			if (s && strcmp(s, table[t]) == 0)
				have = true;
		}
		if (!have && json_array_append_new(arr, json_string(table[t])) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	}
	return 0;
}

int krt_policy_container(json_t *config, struct kis_error **err)
{
	if (!json_is_object(config))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "config.json is not an object");
	json_t *process = json_object_get(config, "process");
	if (process && !json_is_object(process))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process is not an object");
	/* ---- refusals: what the container tier will not run ---- */
	int net_kind = 0;
	TRY(check_namespaces(config, &net_kind, err));
	if (process)
		TRY(krt_policy_process(process, "process", err));
	TRY(check_devices(json_object_get(config, "linux"), err));
	TRY(check_sysctl(json_object_get(config, "linux"), net_kind, err));

	/* ---- defaults: an unset field means denied, not inherited ---- */
	json_t *linux_ = child(config, "linux", err);
	if (!linux_)
		return -1;
	if (process) {
		/* prctl(PR_SET_NO_NEW_PRIVS): no setuid gain inside */
		if (json_object_set_new(process, "noNewPrivileges", json_true()) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
		TRY(default_rlimit(process, "RLIMIT_NOFILE", KIS_LIMIT_DEFAULT(OPEN_FILES), err));
		TRY(default_rlimit(process, "RLIMIT_FSIZE", KIS_LIMIT_DEFAULT(FILE), err));
	}
	if (!json_object_get(linux_, "seccomp")) {
		/* the policy of every native kis tier; with no network of its
		 * own beyond loopback, only AF_UNIX sockets (as network off) */
		struct kis_seccomp_opts so = {
			.net = net_kind == 1 ? KIS_NET_OFF : KIS_NET_EGRESS,
			.allow_sysv_ipc = true,
		};
		json_t *sc = NULL;
		TRY(kis_seccomp_to_oci_json(&so, &sc, err));
		if (json_object_set_new(linux_, "seccomp", sc) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	}
	TRY(union_paths(linux_, "maskedPaths", kis_sysview_masked, kis_sysview_n_masked, err));
	TRY(union_paths(linux_, "readonlyPaths", kis_sysview_readonly, kis_sysview_n_readonly, err));
	json_t *res = child(linux_, "resources", err);
	json_t *mem = res ? child(res, "memory", err) : NULL;
	json_t *pids = mem ? child(res, "pids", err) : NULL;
	if (!pids)
		return -1;
	TRY(default_limit(mem, "limit", KIS_LIMIT_DEFAULT(MEMORY), err));
	TRY(default_limit(pids, "limit", KIS_LIMIT_DEFAULT(PIDS), err));
	/* last: the defaults above need their controllers too */
	TRY(check_resources(res, err));
	return 0;
}
