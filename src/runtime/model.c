/* SPDX-License-Identifier: MIT */
/* kis-runtime: config.json read into kis's own model of a container. Only
 * what the model holds goes on to crun, bwrap or the guest.
 *
 * Theory of operation (house rule 15, "parse, then act on what you
 * parsed"). A bundle's config.json is hostile input: whoever writes a pod
 * spec or a bundle by hand writes it, and crun, bwrap and QEMU run as the
 * host's root. So it is not filtered, it is translated:
 *
 *  1. copy: a new document is built from a schema of the fields kis
 *     models (the runtime spec's config.md and config-linux.md, the
 *     fields a runtime needs and nothing else), each checked for its JSON
 *     type. A field the schema lacks is refused by name: a field a future
 *     spec adds, or one crun alone reads, never passes through unseen.
 *  2. namespaces: one entry per type (a second is invalid_profile, never
 *     "the last one wins"); a path is opened once, must be a namespace of
 *     that type and not the runtime's own (the host's), and is held by fd
 *     until crun joins it (/proc/self/fd/N), so a pid reused meanwhile
 *     joins nothing else.
 *  3. mounts: a bind, or one of the kernel file systems a container owns
 *     (tmpfs, proc, sysfs, devpts, mqueue, cgroup, cgroup2), each with the
 *     options that type takes; anything else (overlay, a block device,
 *     "none" with odd options) is refused by name.
 *  4. host paths (root.path and every bind's source): resolved once,
 *     relative to the bundle directory, with no symbolic link followed on
 *     the way (openat2(2) RESOLVE_NO_SYMLINKS), checked against the host's
 *     system paths, and held open by fd from the check to the mount.
 *  5. hooks: they run on the host as root, so only with the named hatch
 *     run.kis.allow-hooks=true.
 * The tiers then work on the model's document alone (policy.c's defaults,
 * host_plan.c, mvm.c). */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/nsfs.h>
#include <linux/openat2.h>

#include "runtime/runtime.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

/* ------------------------------------------------------------ schema */

enum ftype {
	F_STR,    /* a string */
	F_INT,    /* an integer */
	F_UINT,   /* an integer >= 0 */
	F_BOOL,
	F_OBJ,    /* an object of the fields in sub */
	F_ARR,    /* an array of objects of the fields in sub */
	F_STRS,   /* an array of strings */
	F_UINTS,  /* an array of integers >= 0 */
	F_MAP,    /* an object of strings to strings (annotations, sysctl) */
};

struct field {
	const char *name;
	enum ftype t;
	const struct field *sub; /* F_OBJ, F_ARR: NULL-terminated */
};

#define END {NULL, F_STR, NULL}

static const struct field f_root[] = {{"path", F_STR, NULL}, {"readonly", F_BOOL, NULL}, END};
static const struct field f_mount[] = {
	{"destination", F_STR, NULL}, {"type", F_STR, NULL},
	{"source", F_STR, NULL},      {"options", F_STRS, NULL}, END};
static const struct field f_console[] = {{"height", F_UINT, NULL}, {"width", F_UINT, NULL}, END};
static const struct field f_rlimit[] = {
	{"type", F_STR, NULL}, {"soft", F_UINT, NULL}, {"hard", F_UINT, NULL}, END};
static const struct field f_caps[] = {
	{"bounding", F_STRS, NULL},    {"effective", F_STRS, NULL}, {"inheritable", F_STRS, NULL},
	{"permitted", F_STRS, NULL},   {"ambient", F_STRS, NULL},   END};
static const struct field f_user[] = {
	{"uid", F_UINT, NULL}, {"gid", F_UINT, NULL}, {"umask", F_UINT, NULL},
	{"additionalGids", F_UINTS, NULL}, END};
/* Not modelled, so refused: scheduler (a real-time policy starves the
 * host), ioPriority, execCPUAffinity, commandLine (Windows). */
static const struct field f_process[] = {
	{"terminal", F_BOOL, NULL},      {"consoleSize", F_OBJ, f_console},
	{"cwd", F_STR, NULL},            {"env", F_STRS, NULL},
	{"args", F_STRS, NULL},          {"rlimits", F_ARR, f_rlimit},
	{"apparmorProfile", F_STR, NULL}, {"capabilities", F_OBJ, f_caps},
	{"noNewPrivileges", F_BOOL, NULL}, {"oomScoreAdj", F_INT, NULL},
	{"selinuxLabel", F_STR, NULL},   {"user", F_OBJ, f_user}, END};
static const struct field f_hook[] = {
	{"path", F_STR, NULL}, {"args", F_STRS, NULL}, {"env", F_STRS, NULL},
	{"timeout", F_INT, NULL}, END};
static const struct field f_hooks[] = {
	{"prestart", F_ARR, f_hook},        {"createRuntime", F_ARR, f_hook},
	{"createContainer", F_ARR, f_hook}, {"startContainer", F_ARR, f_hook},
	{"poststart", F_ARR, f_hook},       {"poststop", F_ARR, f_hook}, END};
static const struct field f_ns[] = {{"type", F_STR, NULL}, {"path", F_STR, NULL}, END};
static const struct field f_idmap[] = {
	{"containerID", F_UINT, NULL}, {"hostID", F_UINT, NULL}, {"size", F_UINT, NULL}, END};
static const struct field f_device[] = {
	{"type", F_STR, NULL},  {"path", F_STR, NULL},     {"major", F_INT, NULL},
	{"minor", F_INT, NULL}, {"fileMode", F_UINT, NULL}, {"uid", F_UINT, NULL},
	{"gid", F_UINT, NULL},  END};
static const struct field f_devrule[] = {
	{"allow", F_BOOL, NULL}, {"type", F_STR, NULL},   {"major", F_INT, NULL},
	{"minor", F_INT, NULL},  {"access", F_STR, NULL}, END};
static const struct field f_memory[] = {
	{"limit", F_INT, NULL},      {"reservation", F_INT, NULL},   {"swap", F_INT, NULL},
	{"kernel", F_INT, NULL},     {"kernelTCP", F_INT, NULL},     {"swappiness", F_UINT, NULL},
	{"disableOOMKiller", F_BOOL, NULL}, {"useHierarchy", F_BOOL, NULL},
	{"checkBeforeUpdate", F_BOOL, NULL}, END};
static const struct field f_cpu[] = {
	{"shares", F_UINT, NULL},         {"quota", F_INT, NULL},   {"burst", F_UINT, NULL},
	{"period", F_UINT, NULL},         {"realtimeRuntime", F_INT, NULL},
	{"realtimePeriod", F_UINT, NULL}, {"cpus", F_STR, NULL},    {"mems", F_STR, NULL},
	{"idle", F_INT, NULL},            END};
static const struct field f_pids[] = {{"limit", F_INT, NULL}, END};
static const struct field f_wdev[] = {
	{"major", F_INT, NULL}, {"minor", F_INT, NULL}, {"weight", F_UINT, NULL},
	{"leafWeight", F_UINT, NULL}, END};
static const struct field f_tdev[] = {
	{"major", F_INT, NULL}, {"minor", F_INT, NULL}, {"rate", F_UINT, NULL}, END};
static const struct field f_blkio[] = {
	{"weight", F_UINT, NULL},
	{"leafWeight", F_UINT, NULL},
	{"weightDevice", F_ARR, f_wdev},
	{"throttleReadBpsDevice", F_ARR, f_tdev},
	{"throttleWriteBpsDevice", F_ARR, f_tdev},
	{"throttleReadIOPSDevice", F_ARR, f_tdev},
	{"throttleWriteIOPSDevice", F_ARR, f_tdev},
	END};
static const struct field f_huge[] = {{"pageSize", F_STR, NULL}, {"limit", F_UINT, NULL}, END};
static const struct field f_prio[] = {{"name", F_STR, NULL}, {"priority", F_UINT, NULL}, END};
static const struct field f_netres[] = {
	{"classID", F_UINT, NULL}, {"priorities", F_ARR, f_prio}, END};
/* rdma is not modelled (refused); unified is the v2 key/value form. */
static const struct field f_resources[] = {
	{"devices", F_ARR, f_devrule},     {"memory", F_OBJ, f_memory},
	{"cpu", F_OBJ, f_cpu},             {"pids", F_OBJ, f_pids},
	{"blockIO", F_OBJ, f_blkio},       {"hugepageLimits", F_ARR, f_huge},
	{"network", F_OBJ, f_netres},      {"unified", F_MAP, NULL}, END};
static const struct field f_scarg[] = {
	{"index", F_UINT, NULL}, {"value", F_UINT, NULL}, {"valueTwo", F_UINT, NULL},
	{"op", F_STR, NULL}, END};
static const struct field f_syscall[] = {
	{"names", F_STRS, NULL}, {"action", F_STR, NULL}, {"errnoRet", F_UINT, NULL},
	{"args", F_ARR, f_scarg}, END};
/* listenerPath is not modelled: crun would connect to a host socket the
 * bundle names and hand it the container's seccomp descriptor. */
static const struct field f_seccomp[] = {
	{"defaultAction", F_STR, NULL}, {"defaultErrnoRet", F_UINT, NULL},
	{"architectures", F_STRS, NULL}, {"flags", F_STRS, NULL},
	{"syscalls", F_ARR, f_syscall}, END};
static const struct field f_personality[] = {{"domain", F_STR, NULL}, {"flags", F_STRS, NULL}, END};
/* Not modelled: intelRdt (a host resource's control group), timeOffsets,
 * memoryPolicy, netDevices (moves a host interface in). */
static const struct field f_linux[] = {
	{"namespaces", F_ARR, f_ns},        {"uidMappings", F_ARR, f_idmap},
	{"gidMappings", F_ARR, f_idmap},    {"devices", F_ARR, f_device},
	{"cgroupsPath", F_STR, NULL},       {"resources", F_OBJ, f_resources},
	{"sysctl", F_MAP, NULL},            {"seccomp", F_OBJ, f_seccomp},
	{"rootfsPropagation", F_STR, NULL}, {"maskedPaths", F_STRS, NULL},
	{"readonlyPaths", F_STRS, NULL},    {"mountLabel", F_STR, NULL},
	{"personality", F_OBJ, f_personality}, END};
static const struct field f_config[] = {
	{"ociVersion", F_STR, NULL}, {"root", F_OBJ, f_root},
	{"mounts", F_ARR, f_mount},  {"process", F_OBJ, f_process},
	{"hostname", F_STR, NULL},   {"domainname", F_STR, NULL},
	{"hooks", F_OBJ, f_hooks},   {"annotations", F_MAP, NULL},
	{"linux", F_OBJ, f_linux},   END};

static const char *type_word(enum ftype t)
{
	switch (t) {
	case F_STR: return "a string";
	case F_INT: return "an integer";
	case F_UINT: return "an integer of at least 0";
	case F_BOOL: return "true or false";
	case F_OBJ: return "an object";
	case F_ARR: return "an array of objects";
	case F_STRS: return "an array of strings";
	case F_UINTS: return "an array of integers of at least 0";
	case F_MAP: return "an object of strings";
	default: return "?";
	}
}

static bool is_uint(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0;
}

static int copy_obj(json_t *src, const struct field *schema, const char *where, json_t **out,
		    struct kis_error **err);

/* One value of type t at `where`; *out a new reference. */
static int copy_value(json_t *v, const struct field *f, const char *where, json_t **out,
		      struct kis_error **err)
{
	*out = NULL;
	bool ok;
	switch (f->t) {
	case F_STR: ok = json_is_string(v); break;
	case F_INT: ok = json_is_integer(v); break;
	case F_UINT: ok = is_uint(v); break;
	case F_BOOL: ok = json_is_boolean(v); break;
	case F_OBJ: return copy_obj(v, f->sub, where, out, err);
	case F_ARR:
	case F_STRS:
	case F_UINTS:
	case F_MAP:
	default: ok = true; break;
	}
	if (f->t == F_ARR || f->t == F_STRS || f->t == F_UINTS) {
		if (!json_is_array(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s is not %s", where,
					     type_word(f->t));
		json_t *arr = json_array();
		if (!arr)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			char w[300];
			if (snprintf(w, sizeof(w), "%s[%zu]", where, i) >= (int)sizeof(w))
				w[sizeof(w) - 1] = '\0';
			json_t *c = NULL;
			if (f->t == F_ARR) {
				if (copy_obj(e, f->sub, w, &c, err) < 0) {
					json_decref(arr);
					return -1;
				}
			} else if ((f->t == F_STRS && !json_is_string(e)) ||
				   (f->t == F_UINTS && !is_uint(e))) {
				json_decref(arr);
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s is not %s", w,
						     f->t == F_STRS ? "a string"
								    : "an integer of at least 0");
			} else {
				c = json_copy(e);
			}
			if (!c || json_array_append_new(arr, c) < 0) {
				json_decref(arr);
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
			}
		}
		*out = arr;
		return 0;
	}
	if (f->t == F_MAP) {
		if (!json_is_object(v))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s is not %s", where,
					     type_word(f->t));
		const char *k;
		json_t *e;
		json_object_foreach(v, k, e)
			if (!json_is_string(e))
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "%s.%s is not a string", where, k);
		*out = json_copy(v);
		return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	}
	if (!ok)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s is not %s", where,
				     type_word(f->t));
	*out = json_copy(v);
	return *out ? 0 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
}

static int copy_obj(json_t *src, const struct field *schema, const char *where, json_t **out,
		    struct kis_error **err)
{
	*out = NULL;
	if (!json_is_object(src))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "%s is not an object",
				     *where ? where : "config.json");
	json_t *dst = json_object();
	if (!dst)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
	const char *k;
	json_t *v;
	json_object_foreach(src, k, v) {
		const struct field *f = schema;
		while (f->name && strcmp(f->name, k) != 0)
			f++;
		char w[300];
		if (snprintf(w, sizeof(w), "%s%s%s", where, *where ? "." : "", k) >= (int)sizeof(w))
			w[sizeof(w) - 1] = '\0';
		if (!f->name) {
			json_decref(dst);
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s: kis-runtime does not model this field, so it is "
					     "refused rather than handed to the runtime unchecked",
					     w);
		}
		/* null is "absent" in the spec's Go types */
		if (json_is_null(v))
			continue;
		json_t *c = NULL;
		if (copy_value(v, f, w, &c, err) < 0 || json_object_set_new(dst, k, c) < 0) {
			json_decref(dst);
			return *err ? -1 : kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config.json");
		}
	}
	*out = dst;
	return 0;
}

/* -------------------------------------------------------- host paths */

/* Host paths that no bind and no root.path may be, lie under or contain:
 * the whole host, its kernel interfaces, its programs and configuration
 * (a writable bind of them is the host's root), and kis's own store. */
static const char *const sys_hard[] = {
	"/",    "/proc", "/sys",   "/dev",   "/boot",  "/etc",         "/usr", "/bin",
	"/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var/lib/kis", "/var/spool/cron",
};
/* Host paths that hold other users' and daemons' things (a daemon's
 * socket under /run is its control: containerd.sock, docker.sock, the
 * system bus): refused like the above, except beneath the bundle's own
 * directory or beneath a container engine's per-container directories,
 * where podman and containerd put the files they bind into a container
 * (hosts, resolv.conf, hostname, the pod's shm). */
static const char *const sys_soft[] = {"/run", "/root", "/home", "/var/run"};
static const char *const engine_dirs[] = {
	"/run/containers/storage/",              /* podman's runroot (userdata) */
	"/run/libpod/",                          /* podman's tmpdir */
	"/run/containerd/io.containerd.grpc.v1.cri/", /* CRI: sandboxes' shm */
	"/run/containerd/io.containerd.runtime.v2.task/", /* containerd's bundles */
};

/* a is b, or lies under it */
static bool under(const char *a, const char *b)
{
	size_t n = strlen(b);
	if (n == 1 && b[0] == '/')
		return a[0] == '/';
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* Absolute or relative, with no '.', '..' or empty component (one
 * trailing '/' is allowed: "/data/" is "/data"). */
static bool normal_path(const char *p)
{
	if (!p || !*p)
		return false;
	const char *c = p[0] == '/' ? p + 1 : p;
	if (!*c)
		return p[0] == '/';
	for (;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e || !e[1])
			return true;
		c = e + 1;
	}
}

/* The one rule for a host path (abs: absolute, normal, no link on the
 * way); what names it in a message. 0 allowed. */
static int host_path_allowed(const struct krt_model *m, const char *abs, int fd, const char *what,
			     const char *given, struct kis_error **err)
{
	const char *extra[2] = {m->state_root, m->store_root};
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "%s '%s'", what, given);
	for (size_t k = 0; k < ARRAY_SIZE(sys_hard) + ARRAY_SIZE(extra) + ARRAY_SIZE(sys_soft);
	     k++) {
		bool soft = k >= ARRAY_SIZE(sys_hard) + ARRAY_SIZE(extra);
		const char *s = k < ARRAY_SIZE(sys_hard) ? sys_hard[k]
			      : !soft ? extra[k - ARRAY_SIZE(sys_hard)]
				      : sys_soft[k - ARRAY_SIZE(sys_hard) - ARRAY_SIZE(extra)];
		if (!s || !*s)
			continue;
		/* the same directory under another name (a bind of / elsewhere) */
		struct stat ss;
		bool same = stat(s, &ss) == 0 && ss.st_dev == st.st_dev && ss.st_ino == st.st_ino;
		bool is = strcmp(abs, s) == 0 || same;
		bool contains = under(s, abs);
		bool below = strcmp(s, "/") != 0 && under(abs, s);
		if (below && soft) {
			if (m->bundle && under(abs, m->bundle) && strcmp(abs, m->bundle) != 0)
				below = false;
			for (size_t e = 0; below && e < ARRAY_SIZE(engine_dirs); e++)
				if (strncmp(abs, engine_dirs[e], strlen(engine_dirs[e])) == 0)
					below = false;
		}
		if (is || contains || below)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "%s '%s': the host's %s %s never reaches a container "
					     "(see kis-runtime in the README: what a bind may name)",
					     what, given, s,
					     is ? "itself" : contains ? "(which this path holds)"
								: "and what lies under it");
	}
	return 0;
}

/* Resolve p (relative: to the bundle) with no symbolic link on the way,
 * check it, hold it (O_PATH). */
static int host_path(struct krt_model *m, const char *p, const char *what,
		     struct krt_hostpath *out, struct kis_error **err)
{
	out->fd = -1;
	out->path = NULL;
	if (!normal_path(p))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "%s '%s' is not a normal path (no '.', '..' or empty component)",
				     what, p ? p : "");
	_cleanup_free_ char *abs = NULL;
	if (p[0] == '/')
		abs = strdup(p);
	else if (!m->bundle)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "%s '%s' is relative and the bundle directory is unknown", what, p);
	else if (asprintf(&abs, "%s%s%s", m->bundle, strcmp(m->bundle, "/") ? "/" : "", p) < 0)
		abs = NULL;
	if (!abs)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s", what);
	size_t l = strlen(abs);
	if (l > 1 && abs[l - 1] == '/')
		abs[l - 1] = '\0';
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, abs, &how, sizeof(how));
	if (fd < 0 && errno == ELOOP)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "%s '%s' passes a symbolic link on the host; name the path it "
				     "leads to",
				     what, p);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, errno, "%s '%s' cannot be opened",
				     what, p);
	if (host_path_allowed(m, abs, fd, what, p, err) < 0) {
		close(fd);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return kis_error_set(err, KIS_E_INTERNAL, e, "%s '%s'", what, p);
	}
	out->fd = fd;
	out->dir = S_ISDIR(st.st_mode);
	out->path = steal_ptr(abs);
	return 0;
}

static void hostpath_release(struct krt_hostpath *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	free(h->path);
	h->path = NULL;
}

/* -------------------------------------------------------- namespaces */

static const struct {
	const char *type;  /* linux.namespaces[].type */
	const char *procns;
	int clone;
	bool by_path;      /* may be joined by path (a pod's shared ones) */
} ns_types[] = {
	{"pid", "pid", CLONE_NEWPID, true},       {"network", "net", CLONE_NEWNET, true},
	{"ipc", "ipc", CLONE_NEWIPC, true},       {"uts", "uts", CLONE_NEWUTS, true},
	{"mount", "mnt", CLONE_NEWNS, false},     {"user", "user", CLONE_NEWUSER, false},
	{"cgroup", "cgroup", CLONE_NEWCGROUP, true}, {"time", "time", CLONE_NEWTIME, false},
};

/* fd's namespace is the one of /proc/<who>/ns/<procns> */
static bool same_ns(int fd, const char *who, const char *procns)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%s/ns/%s", who, procns);
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int model_namespaces(struct krt_model *m, struct kis_error **err)
{
	json_t *nss = json_object_get(json_object_get(m->doc, "linux"), "namespaces");
	size_t i;
	json_t *n;
	json_array_foreach(nss, i, n) {
		const char *t = json_string_value(json_object_get(n, "type"));
		size_t k;
		for (k = 0; t && k < ARRAY_SIZE(ns_types); k++)
			if (strcmp(t, ns_types[k].type) == 0)
				break;
		if (!t || k == ARRAY_SIZE(ns_types))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.namespaces[%zu].type '%s': one of pid, network, "
					     "ipc, uts, mount, user, cgroup, time",
					     i, t ? t : "");
		/* runtime-spec config-linux.md: duplicate namespace types are
		 * an error; checked before any path is opened */
		for (size_t j = i + 1; j < json_array_size(nss); j++) {
			const char *tj = json_string_value(
				json_object_get(json_array_get(nss, j), "type"));
			if (tj && strcmp(tj, t) == 0)
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "linux.namespaces[%zu]: a second '%s' entry "
						     "(the first is [%zu]); each type is given once",
						     j, t, i);
		}
	}
	json_array_foreach(nss, i, n) {
		const char *t = json_string_value(json_object_get(n, "type"));
		const char *path = json_string_value(json_object_get(n, "path"));
		size_t k;
		for (k = 0; k < ARRAY_SIZE(ns_types); k++)
			if (strcmp(t, ns_types[k].type) == 0)
				break;
		if (!path)
			continue;
		if (!*path) {
			json_object_del(n, "path");
			continue;
		}
		if (!ns_types[k].by_path)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "linux.namespaces[%zu]: the '%s' namespace is the "
					     "container's own, never joined by path ('%s')",
					     i, t, path);
		if (path[0] != '/')
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.namespaces[%zu].path '%s' is not absolute", i, path);
		/* /proc/PID/ns/X is a magic link: followed, and then the file
		 * itself is checked, and held */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, errno,
					     "linux.namespaces[%zu].path '%s' cannot be opened", i,
					     path);
		m->ns_fd[k] = fd;
		struct statfs sf;
		if (fstatfs(fd, &sf) < 0 || sf.f_type != NSFS_MAGIC ||
		    ioctl(fd, NS_GET_NSTYPE) != ns_types[k].clone)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.namespaces[%zu].path '%s' is not a '%s' namespace",
					     i, path, t);
		if (same_ns(fd, "self", ns_types[k].procns) || same_ns(fd, "1", ns_types[k].procns))
			return kis_error_set(err, strcmp(t, "network") == 0
							  ? KIS_E_ESCAPE_HATCH_FORBIDDEN
							  : KIS_E_PROFILE_UNSATISFIABLE,
					     0,
					     "linux.namespaces[%zu].path '%s' is the host's own '%s' "
					     "namespace%s",
					     i, path, t,
					     strcmp(t, "network") == 0
						     ? ": leave the entry out and set the annotation "
						       KRT_ANN_NET_HOST "=true"
						     : ", which the container tier never shares");
	}
	return 0;
}

int krt_model_ns_fd(const struct krt_model *m, const char *type, int *clone)
{
	for (size_t k = 0; k < ARRAY_SIZE(ns_types); k++)
		if (strcmp(type, ns_types[k].type) == 0) {
			*clone = ns_types[k].clone;
			return m->ns_fd[k];
		}
	return -1;
}

/* ------------------------------------------------------------ mounts */

/* Options every mount may carry (mount(8)'s generic ones, the
 * propagation kinds that send nothing back to the host) and those each
 * type adds. */
static const char *const opt_common[] = {
	"ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "relatime", "norelatime",
	"strictatime", "nostrictatime", "noatime", "atime", "nodiratime", "diratime", "private",
	"rprivate", "slave", "rslave", "unbindable", "runbindable", "sync", "async", "lazytime",
	"nolazytime", "defaults", NULL};
static const char *const opt_bind[] = {"bind", "rbind", "rro", "rrw", "nosymfollow", NULL};
static const char *const opt_tmpfs[] = {"mode=", "size=", "nr_inodes=", "nr_blocks=", "uid=",
					"gid=", "tmpcopyup", "noswap", NULL};
static const char *const opt_devpts[] = {"newinstance", "ptmxmode=", "mode=", "gid=", "uid=",
					 "max=", NULL};
static const char *const opt_proc[] = {"hidepid=", "subset=", "gid=", NULL};
static const char *const opt_none[] = {NULL};

static const struct {
	const char *type;
	const char *const *opts;
	const char *only_at; /* the one place a kernel file system may go */
} mount_types[] = {
	{"tmpfs", opt_tmpfs, NULL},   {"proc", opt_proc, "/proc"},
	{"sysfs", opt_none, "/sys"},  {"devpts", opt_devpts, NULL},
	{"mqueue", opt_none, "/dev/mqueue"}, {"cgroup", opt_none, "/sys/fs/cgroup"},
	{"cgroup2", opt_none, "/sys/fs/cgroup"},
};

static bool opt_in(const char *o, const char *const *list)
{
	for (size_t i = 0; list[i]; i++) {
		size_t n = strlen(list[i]);
		if (list[i][n - 1] == '=' ? strncmp(o, list[i], n) == 0 : strcmp(o, list[i]) == 0)
			return true;
	}
	return false;
}

static int model_mount(struct krt_model *m, json_t *mt, size_t i, struct kis_error **err)
{
	const char *dst = json_string_value(json_object_get(mt, "destination"));
	const char *type = json_string_value(json_object_get(mt, "type"));
	const char *src = json_string_value(json_object_get(mt, "source"));
	json_t *opts = json_object_get(mt, "options");
	if (!dst || dst[0] != '/' || !normal_path(dst))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "mounts[%zu].destination '%s' is not a normal absolute path "
				     "(no '.', '..' or empty component)",
				     i, dst ? dst : "");
	bool bind = type && strcmp(type, "bind") == 0;
	size_t j;
	json_t *o;
	json_array_foreach(opts, j, o)
		bind = bind || strcmp(json_string_value(o), "bind") == 0 ||
		       strcmp(json_string_value(o), "rbind") == 0;
	const char *const *typed = NULL;
	if (bind) {
		/* MS_BIND ignores the type: a type beside it names nothing */
		if (type && strcmp(type, "bind") != 0 && strcmp(type, "none") != 0)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "mounts[%zu]: a bind of type '%s'; a bind's type is "
					     "'bind' or 'none'",
					     i, type);
		typed = opt_bind;
	} else {
		for (size_t k = 0; type && k < ARRAY_SIZE(mount_types); k++) {
			if (strcmp(type, mount_types[k].type) != 0)
				continue;
			typed = mount_types[k].opts;
			/* a second proc elsewhere would bypass the read-only and
			 * masked paths kept on /proc, a second sysfs those of /sys */
			if (mount_types[k].only_at && strcmp(dst, mount_types[k].only_at) != 0)
				return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						     "mounts[%zu]: a %s mount at '%s': the container's "
						     "only %s is at %s",
						     i, type, dst, type, mount_types[k].only_at);
		}
		if (!typed)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "mounts[%zu] at '%s' is of type '%s': a container mounts "
					     "only binds and its own tmpfs, proc, sysfs, devpts, mqueue, "
					     "cgroup and cgroup2 (no overlay, no block device)",
					     i, dst, type ? type : "(none)");
	}
	json_array_foreach(opts, j, o) {
		const char *s = json_string_value(o);
		if (strcmp(s, "shared") == 0 || strcmp(s, "rshared") == 0)
			/* a shared mount sends the container's mounts back to the
			 * host's table (mount_namespaces(7), MS_SHARED) */
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "mounts[%zu].options '%s': propagation back to the host "
					     "is refused",
					     i, s);
		if (!opt_in(s, opt_common) && !opt_in(s, typed))
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
					     "mounts[%zu].options '%s': not an option a %s mount "
					     "takes here",
					     i, s, bind ? "bind" : type);
	}
	if (!bind) {
		/* a kernel file system's source is only its name */
		if (json_object_set_new(mt, "source", json_string(type)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
		return 0;
	}
	if (!src)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "mounts[%zu].source is missing",
				     i);
	if (json_object_set_new(mt, "type", json_string("bind")) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
	char what[48];
	snprintf(what, sizeof(what), "mounts[%zu].source", i);
	return host_path(m, src, what, &m->binds[i], err);
}

/* ------------------------------------------------------------ the rest */

static int model_cgroups_path(json_t *linux_, struct kis_error **err)
{
	const char *p = json_string_value(json_object_get(linux_, "cgroupsPath"));
	if (!p)
		return 0;
	/* cgroupfs: a path under the cgroup root; systemd: slice:prefix:name.
	 * Neither may climb: '..' would put the container in any cgroup of
	 * the host's (outside its limits, or in another container's). */
	bool ok = *p && !strstr(p, "//");
	for (const char *c = p; ok && *c;) {
		const char *e = c + strcspn(c, "/:");
		size_t n = (size_t)(e - c);
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			ok = false;
		c = *e ? e + 1 : e;
	}
	if (!ok)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "linux.cgroupsPath '%s': no '.', '..' or empty component", p);
	return 0;
}

static bool annotation_true(json_t *doc, const char *key)
{
	const char *s = json_string_value(json_object_get(json_object_get(doc, "annotations"), key));
	return s && strcmp(s, "true") == 0;
}

void krt_model_init(struct krt_model *m)
{
	memset(m, 0, sizeof(*m));
	m->root.fd = -1;
	for (size_t k = 0; k < ARRAY_SIZE(m->ns_fd); k++)
		m->ns_fd[k] = -1;
}

void krt_model_release(struct krt_model *m)
{
	json_decref(m->doc);
	m->doc = NULL;
	hostpath_release(&m->root);
	for (size_t i = 0; i < m->n_binds; i++)
		hostpath_release(&m->binds[i]);
	free(m->binds);
	m->binds = NULL;
	m->n_binds = 0;
	for (size_t k = 0; k < ARRAY_SIZE(m->ns_fd); k++) {
		if (m->ns_fd[k] >= 0)
			close(m->ns_fd[k]);
		m->ns_fd[k] = -1;
	}
	free(m->bundle);
	m->bundle = NULL;
}

int krt_model_read(json_t *raw, const char *bundle, const char *state_root,
		   const char *store_root, struct krt_model *m, struct kis_error **err)
{
	krt_model_init(m);
	m->state_root = state_root;
	m->store_root = store_root;
	if (bundle) {
		char real[PATH_MAX];
		if (!realpath(bundle, real))
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno,
					     "cannot resolve bundle '%s'", bundle);
		m->bundle = strdup(real);
		if (!m->bundle)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "bundle");
	}
	TRY(copy_obj(raw, f_config, "", &m->doc, err));
	json_t *linux_ = json_object_get(m->doc, "linux");
	TRY(model_namespaces(m, err));
	TRY(model_cgroups_path(linux_, err));
	/* hooks run on the host as root with every capability (runtime-spec
	 * config.md "POSIX-platform Hooks"): only with the named hatch */
	json_t *hooks = json_object_get(m->doc, "hooks");
	const char *hk;
	json_t *hv;
	json_object_foreach(hooks, hk, hv) {
		if (!json_array_size(hv) || annotation_true(m->doc, KRT_ANN_HOOKS))
			continue;
		return kis_error_set(err, KIS_E_ESCAPE_HATCH_FORBIDDEN, 0,
				     "hooks.%s: a hook runs on the host as root; it needs the "
				     "annotation %s=true",
				     hk, KRT_ANN_HOOKS);
	}
	json_t *root = json_object_get(m->doc, "root");
	const char *rp = json_string_value(json_object_get(root, "path"));
	if (!rp)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "root.path is missing");
	TRY(host_path(m, rp, "root.path", &m->root, err));
	if (!m->root.dir)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "root.path '%s' is not a directory",
				     rp);
	/* the checked path, absolute: what every tier reads from here on */
	if (json_object_set_new(root, "path", json_string(m->root.path)) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "root.path");
	json_t *mounts = json_object_get(m->doc, "mounts");
	m->n_binds = json_array_size(mounts);
	m->binds = calloc(m->n_binds ? m->n_binds : 1, sizeof(*m->binds));
	if (!m->binds)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
	for (size_t i = 0; i < m->n_binds; i++)
		m->binds[i].fd = -1;
	size_t i;
	json_t *mt;
	json_array_foreach(mounts, i, mt) {
		TRY(model_mount(m, mt, i, err));
		/* every tier sees the checked path of a bind's source */
		if (m->binds[i].fd >= 0 &&
		    json_object_set_new(mt, "source", json_string(m->binds[i].path)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
	}
	return 0;
}

/* ------------------------------------------------- handing it to crun */

int krt_model_hold_fds(struct krt_model *m, int min_fd, struct kis_error **err)
{
	/* a joined namespace: crun opens /proc/self/fd/N, the one held since
	 * the check, not the path again (a pid reused meanwhile) */
	json_t *nss = json_object_get(json_object_get(m->doc, "linux"), "namespaces");
	for (size_t k = 0; k < ARRAY_SIZE(m->ns_fd); k++) {
		if (m->ns_fd[k] < 0)
			continue;
		/* above every fd the caller preserves, and inherited by crun
		 * (no CLOEXEC); crun closes it in the container (fds past
		 * --preserve-fds, as the config's memfd) */
		int hi = fcntl(m->ns_fd[k], F_DUPFD, min_fd);
		if (hi < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "dup namespace fd");
		close(m->ns_fd[k]);
		m->ns_fd[k] = hi;
		char p[40];
		snprintf(p, sizeof(p), "/proc/self/fd/%d", hi);
		size_t i;
		json_t *n;
		json_array_foreach(nss, i, n)
			if (strcmp(json_string_value(json_object_get(n, "type")), ns_types[k].type) == 0 &&
			    json_object_set_new(n, "path", json_string(p)) < 0)
				return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "namespaces");
	}
	return 0;
}

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

/* A detached copy of what h holds (open_tree(2) OPEN_TREE_CLONE, Linux
 * 5.2): unlike mount(2) of /proc/self/fd/N, it can be attached in another
 * mount namespace than the one the fd was opened in. */
static int clone_tree(const struct krt_hostpath *h, struct kis_error **err)
{
	int t = (int)syscall(SYS_open_tree, h->fd, "",
			     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (t < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot take '%s'", h->path);
	return t;
}

static int stage_one(int stage_fd, const char *name, const struct krt_hostpath *h, int tree,
		     struct kis_error **err)
{
	if (h->dir ? mkdirat(stage_fd, name, 0700) < 0
		   : mknodat(stage_fd, name, S_IFREG | 0600, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "staging '%s'", name);
	if (syscall(SYS_move_mount, tree, "", stage_fd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stage '%s'", h->path);
	return 0;
}

int krt_model_stage(struct krt_model *m, const char *stage_dir, struct kis_error **err)
{
	/* each source cloned where its fd was opened, before the new
	 * namespace */
	int *trees = calloc(m->n_binds ? m->n_binds : 1, sizeof(*trees));
	if (!trees)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "stage");
	int r = 0;
	for (size_t i = 0; i < m->n_binds; i++)
		trees[i] = -1;
	for (size_t i = 0; r == 0 && i < m->n_binds; i++)
		if (m->binds[i].fd >= 0 && (trees[i] = clone_tree(&m->binds[i], err)) < 0)
			r = -1;
	/* our own mount namespace, whose changes reach nobody (MS_SLAVE):
	 * crun's container namespace is made from it */
	if (r == 0 && (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0))
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "a mount namespace for crun");
	if (r == 0 && mkdir(stage_dir, 0700) < 0 && errno != EEXIST)
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", stage_dir);
	int dfd = r == 0 ? open(stage_dir, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (r == 0 && dfd < 0)
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", stage_dir);
	char p[40];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", dfd);
	if (r == 0 && mount("kis-stage", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") < 0)
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot mount a tmpfs on '%s'",
				  stage_dir);
	int sfd = r == 0 ? open(stage_dir, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (r == 0 && sfd < 0)
		r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", stage_dir);
	json_t *mounts = json_object_get(m->doc, "mounts");
	for (size_t i = 0; r == 0 && i < m->n_binds; i++) {
		if (trees[i] < 0)
			continue;
		char name[32];
		snprintf(name, sizeof(name), "m%zu", i);
		_cleanup_free_ char *sp = NULL;
		if (stage_one(sfd, name, &m->binds[i], trees[i], err) < 0)
			r = -1;
		else if (asprintf(&sp, "%s/%s", stage_dir, name) < 0 ||
			 json_object_set_new(json_array_get(mounts, i), "source", json_string(sp)) < 0)
			r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "mounts");
	}
	for (size_t i = 0; i < m->n_binds; i++)
		if (trees[i] >= 0)
			close(trees[i]);
	free(trees);
	if (dfd >= 0)
		close(dfd);
	if (sfd >= 0)
		close(sfd);
	return r;
}

int krt_model_process(json_t *raw, json_t **out, struct kis_error **err)
{
	return copy_obj(raw, f_process, "process", out, err);
}

int krt_model_features(json_t *mount_options, json_t *namespaces)
{
	/* each option once, as features.md lists them (a "mode=" as "mode") */
	const char *const *lists[] = {opt_common, opt_bind, opt_tmpfs, opt_devpts, opt_proc};
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
		for (size_t i = 0; lists[l][i]; i++) {
			char o[32];
			snprintf(o, sizeof(o), "%s", lists[l][i]);
			size_t n = strlen(o);
			if (n && o[n - 1] == '=')
				o[n - 1] = '\0';
			bool have = false;
			size_t k;
			json_t *e;
			json_array_foreach(mount_options, k, e)
				have = have || strcmp(json_string_value(e), o) == 0;
			if (!have && json_array_append_new(mount_options, json_string(o)) < 0)
				return -1;
		}
	for (size_t k = 0; k < ARRAY_SIZE(ns_types); k++)
		if (json_array_append_new(namespaces, json_string(ns_types[k].type)) < 0)
			return -1;
	return 0;
}
