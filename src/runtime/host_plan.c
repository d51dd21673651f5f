/* SPDX-License-Identifier: MIT */
/* kis-runtime at the host tier, the plan: which fields of a bundle
 * bubblewrap enforces and how (bwrap's argv), and the refusal of the rest. */
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/common.h"
#include "confine/confine.h"
#include "kis/profile.h"
#include "runtime/runtime.h"
#include "core/test_hook.h"

static const char *bwrap_path(void)
{
	static const char *const cands[] = {"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"};
	return kis_find_tool(KIS_TEST_GETENV("KIS_BWRAP"), cands, ARRAY_SIZE(cands));
}


void krt_host_plan_release(struct krt_host_plan *p)
{
	kis_argv_release(&p->bwrap);
}

int krt_host_refuse(struct kis_error **err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0, "%s (run.kis.tier 'host')", msg);
}

/* Mount options bwrap applies by itself (its binds and tmpfs are nosuid,
 * nodev; exec is a mount's default, mount(8)) or that change nothing here. */
static bool option_known(const char *o)
{
	static const char *const ok[] = {"bind", "rbind", "ro", "rw", "nosuid", "nodev", "exec",
					 "private", "rprivate", "slave", "rslave",
					 "relatime", "strictatime", "noatime"};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (strcmp(o, ok[i]) == 0)
			return true;
	return strncmp(o, "mode=", 5) == 0 || strncmp(o, "size=", 5) == 0;
}

static int plan_mount(json_t *m, size_t i, int src_fd, bool sysfs_before, struct kis_argv *a,
		      struct kis_error **err)
{
	const char *dst = json_string_value(json_object_get(m, "destination"));
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *src = json_string_value(json_object_get(m, "source"));
	if (!dst || dst[0] != '/')
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "mounts[%zu].destination is not an absolute path", i);
	bool ro = false, bind = krt_mount_is_bind(m);
	const char *mode = NULL, *size = NULL, *bad = NULL;
	/* the /dev family is bwrap's --dev (null, zero, full, random, urandom,
	 * tty, a devpts of its own) and --mqueue: their options are bwrap's;
	 * noexec on /dev/shm would not stop memfd_create(2) anyway */
	bool devfam = strcmp(dst, "/dev") == 0 || strcmp(dst, "/dev/pts") == 0 ||
		      strcmp(dst, "/dev/shm") == 0 || strcmp(dst, "/dev/mqueue") == 0;
	/* bwrap's --proc is nosuid, noexec, nodev (bubblewrap.c, its proc
	 * mount): the options podman and crun spec give a proc are those */
	if (type && strcmp(type, "proc") == 0)
		devfam = true;
	json_t *o;
	size_t j;
	json_array_foreach(json_object_get(m, "options"), j, o) {
		const char *s = json_string_value(o);
		if (!s)
			continue;
		if (strcmp(s, "ro") == 0)
			ro = true;
		if (strncmp(s, "mode=", 5) == 0)
			mode = s + 5;
		if (strncmp(s, "size=", 5) == 0)
			size = s + 5;
		if (!devfam && !option_known(s) && !bad)
			bad = s;
	}
	/* sysfs at /sys and cgroup at /sys/fs/cgroup (the model allows them
	 * only there), which the CRI plugin asks of every container:
	 * bubblewrap mounts no sysfs, and a bind of the host's would show
	 * the host's network devices (a sysfs shows the network namespace
	 * of its mounter) and its cgroup tree. The host tier gives an empty
	 * read-only /sys, with /sys/fs/cgroup in it (a mount point for the
	 * cgroup entry, empty too): a program finds no sysfs, as under kis's
	 * own host tier, and nothing of the host's. */
	if (type && strcmp(type, "sysfs") == 0 && strcmp(dst, "/sys") == 0) {
		TRY(krt_argv_push2(a, "--perms", "0555", err));
		TRY(krt_argv_push2(a, "--tmpfs", "/sys", err));
		TRY(krt_argv_push2(a, "--perms", "0555", err));
		TRY(krt_argv_push2(a, "--dir", "/sys/fs", err));
		TRY(krt_argv_push2(a, "--perms", "0555", err));
		TRY(krt_argv_push2(a, "--dir", "/sys/fs/cgroup", err));
		return krt_argv_push2(a, "--remount-ro", "/sys", err);
	}
	if (type && (strcmp(type, "cgroup") == 0 || strcmp(type, "cgroup2") == 0) &&
	    strcmp(dst, "/sys/fs/cgroup") == 0) {
		if (!sysfs_before)
			return krt_host_refuse(err, "mounts[%zu] type '%s' at '%s' without a sysfs at "
					   "/sys before it: the host tier shows no cgroup tree",
				      i, type, dst);
		return 0; /* the empty directory the sysfs entry made */
	}
	static const char *const types[] = {"bind", "proc", "tmpfs", "devpts", "mqueue"};
	bool type_ok = bind;
	for (size_t k = 0; type && k < ARRAY_SIZE(types); k++)
		type_ok = type_ok || strcmp(type, types[k]) == 0;
	if (type && !type_ok)
		return krt_host_refuse(err, "mounts[%zu] type '%s' at '%s': bubblewrap cannot mount one of "
				   "the container's own",
			      i, type, dst);
	if (bad)
		return krt_host_refuse(err, "mounts[%zu].options '%s': bubblewrap cannot apply it", i, bad);
	if (bind) {
		if (!src)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "mounts[%zu].source is missing", i);
		/* the source held since the model checked it (bwrap binds
		 * /proc/self/fd/N and closes N before the process runs) */
		if (src_fd < 0)
			return kis_error_set(err, KIS_E_INTERNAL, 0, "mounts[%zu]: no held source", i);
		char num[16];
		snprintf(num, sizeof(num), "%d", src_fd);
		TRY(krt_argv_push(a, ro ? "--ro-bind-fd" : "--bind-fd", err));
		return krt_argv_push2(a, num, dst, err);
	}
	if (!type)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "mounts[%zu].type is missing", i);
	if (strcmp(type, "proc") == 0)
		return krt_argv_push2(a, "--proc", dst, err);
	if (strcmp(dst, "/dev") == 0 && strcmp(type, "tmpfs") == 0)
		return krt_argv_push2(a, "--dev", dst, err);
	if (strcmp(dst, "/dev/pts") == 0 && strcmp(type, "devpts") == 0)
		return 0; /* made by --dev */
	if (strcmp(type, "mqueue") == 0)
		return krt_argv_push2(a, "--mqueue", dst, err);
	if (strcmp(type, "tmpfs") == 0) {
		if (mode)
			TRY(krt_argv_push2(a, "--perms", mode, err));
		if (size) {
			uint64_t bytes = 0;
			struct kis_error *e = NULL;
			if (kis_parse_size(size, &bytes, &e) < 0) {
				kis_error_free(e);
				return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
						     "mounts[%zu] size='%s' is not a size", i, size);
			}
			char b[32];
			snprintf(b, sizeof(b), "%llu", (unsigned long long)bytes);
			TRY(krt_argv_push2(a, "--size", b, err));
		}
		TRY(krt_argv_push2(a, "--tmpfs", dst, err));
		return ro ? krt_argv_push2(a, "--remount-ro", dst, err) : 0;
	}
	/* devpts away from /dev/pts */
	return krt_host_refuse(err, "mounts[%zu] type '%s' at '%s': bubblewrap mounts a devpts only at "
			   "/dev/pts",
		      i, type, dst);
}

/* The bundle's masked and read-only paths inside the container's /proc
 * (the host's /proc says which exist: the same kernel makes both); paths
 * elsewhere are under file systems the host tier does not mount. Masked
 * ones come after the read-only binds: a mask inside /proc/sys stays. */
static int plan_proc_view(json_t *linux_, struct kis_argv *a, struct kis_error **err)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(linux_, "readonlyPaths"), i, e) {
		const char *p = json_string_value(e);
		struct stat st;
		/* bwrap's --remount-ro needs a mount point and its binds take
		 * their source from the host: the host's own (read-only) view
		 * of these, as kis's bubblewrap backend shows them. Writable,
		 * /proc/sys would take writes from uid 0 with no capability. */
		if (p && strncmp(p, "/proc/", 6) == 0 && lstat(p, &st) == 0) {
			TRY(krt_argv_push(a, "--ro-bind", err));
			TRY(krt_argv_push2(a, p, p, err));
		}
	}
	json_array_foreach(json_object_get(linux_, "maskedPaths"), i, e) {
		const char *p = json_string_value(e);
		struct stat st;
		if (!p || strncmp(p, "/proc/", 6) != 0 || lstat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			TRY(krt_argv_push2(a, "--tmpfs", p, err));
			TRY(krt_argv_push2(a, "--remount-ro", p, err));
		} else {
			TRY(krt_argv_push(a, "--ro-bind", err));
			TRY(krt_argv_push2(a, "/dev/null", p, err));
		}
	}
	return 0;
}

/* ---- the paths bwrap resolves inside the container ----
 *
 * bwrap resolves a mount's destination under its new root before
 * pivot_root(2), where the host's root is one '..' or one absolute link
 * away, and --chdir after it while it still holds an fd of the host's
 * /proc (its /proc/self/fd/N: CVE-2024-21626's kind of escape). So every
 * such path of the bundle must be normal, and bwrap's walk of it must meet
 * no symbolic link in the image and never bwrap's own /dev links (fd,
 * stdin, stdout, stderr, core, ptmx, which lead into /proc); it may not go
 * on inside a bound directory, whose contents another container sharing
 * it could change after the check. The check reads the image with
 * openat2(2) RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS before bwrap starts;
 * nothing of the container runs yet that could change the image. */

/* Absolute, with no '.', '..' or empty component (nor a trailing '/'). */
static bool normal_inner_path(const char *p)
{
	if (!p || p[0] != '/')
		return false;
	if (!p[1])
		return true;
	for (const char *c = p + 1;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e)
			return true;
		c = e + 1;
	}
}

enum inner_fs { FS_BIND, FS_FRESH, FS_DEV, FS_PSEUDO };

static enum inner_fs mount_fs(json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *dst = json_string_value(json_object_get(m, "destination"));
	if (krt_mount_is_bind(m))
		return FS_BIND;
	if (type && strcmp(type, "tmpfs") == 0)
		return dst && strcmp(dst, "/dev") == 0 ? FS_DEV : FS_FRESH;
	/* the host tier's sysfs and cgroup are an empty tmpfs (plan_mount) */
	if (type && (strcmp(type, "sysfs") == 0 || strcmp(type, "cgroup") == 0 ||
		     strcmp(type, "cgroup2") == 0))
		return FS_FRESH;
	return FS_PSEUDO; /* proc, mqueue, devpts */
}

/* bwrap's --dev makes these links, into /proc or within /dev */
static bool dev_link(const char *rest)
{
	static const char *const links[] = {"fd", "stdin", "stdout", "stderr", "core", "ptmx"};
	size_t n = strcspn(rest, "/");
	for (size_t i = 0; i < ARRAY_SIZE(links); i++)
		if (strlen(links[i]) == n && strncmp(rest, links[i], n) == 0)
			return true;
	return false;
}

/* what ('mounts[3].destination', 'process.cwd') at p, walked by bwrap in the
 * tree the root and mounts[0..upto) make: 0 when no link can divert it. */
static int check_inner_walk(json_t *config, int root_fd, size_t upto, bool cwd, const char *what,
			    const char *p, struct kis_error **err)
{
	if (!normal_inner_path(p))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
				     "%s '%s' is not a normal absolute path (no '.', '..', empty or "
				     "trailing component)",
				     what, p ? p : "");
	json_t *mounts = json_object_get(config, "mounts");
	json_t *over = NULL;
	size_t olen = 0, oi = 0;
	for (size_t k = 0; k < upto && k < json_array_size(mounts); k++) {
		json_t *m = json_array_get(mounts, k);
		const char *d = json_string_value(json_object_get(m, "destination"));
		if (!d)
			continue;
		size_t l = strcmp(d, "/") == 0 ? 0 : strlen(d);
		if (strncmp(p, d, l) == 0 && (p[l] == '/' || p[l] == '\0') && (!over || l >= olen)) {
			over = m;
			olen = l;
			oi = k;
		}
	}
	const char *rest = p + olen;
	while (*rest == '/')
		rest++;
	if (over) {
		enum inner_fs fs = mount_fs(over);
		const char *d = json_string_value(json_object_get(over, "destination"));
		/* a working directory in /dev or a pseudo file system (/proc)
		 * has nothing to work on and everything to reach */
		if (fs == FS_PSEUDO || (fs == FS_DEV && (cwd || dev_link(rest))))
			return krt_host_refuse(err, "%s '%s' lies in mounts[%zu] ('%s'), where "
					   "bubblewrap's walk could follow a link out of the "
					   "container",
				      what, p, oi, d);
		if (fs != FS_BIND || !*rest)
			return 0; /* a fresh tmpfs holds no link; a mount point is no link */
		/* A bound directory may be another container's too (a volume,
		 * a pod's emptyDir), which can put a link in the walk's way
		 * between this check and bwrap's walk, and create leaves time
		 * until start: refused, not checked. */
		return krt_host_refuse(err, "%s '%s' lies inside the bound directory of mounts[%zu] "
				   "('%s'), whose contents can change before bubblewrap walks them: "
				   "use the mount's destination itself, or a directory of the image",
			      what, p, oi, d);
	}
	const char *root = json_string_value(json_object_get(json_object_get(config, "root"), "path"));
	_cleanup_close_ int dirfd = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, errno, "root.path '%s' cannot be opened",
				     root ? root : "");
	if (!*rest)
		return 0;
	int link = kis_walk_meets_link(dirfd, rest);
	if (link == 1)
		return krt_host_refuse(err, "%s '%s' passes a symbolic link in the image: bubblewrap "
				   "would follow it before the container is whole; name the path it "
				   "leads to",
			      what, p);
	if (link < 0)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, errno, "%s '%s' cannot be looked up",
				     what, p);
	return 0;
}

/* Every mount's destination against the mounts before it, and the
 * working directory against them all. */
static int check_inner_paths(json_t *config, int root_fd, struct kis_error **err)
{
	json_t *mounts = json_object_get(config, "mounts");
	json_t *m;
	size_t i;
	json_array_foreach(mounts, i, m) {
		char what[48];
		snprintf(what, sizeof(what), "mounts[%zu].destination", i);
		TRY(check_inner_walk(config, root_fd, i, false, what,
				     json_string_value(json_object_get(m, "destination")), err));
	}
	const char *cwd = json_string_value(json_object_get(json_object_get(config, "process"), "cwd"));
	return check_inner_walk(config, root_fd, json_array_size(mounts), true, "process.cwd",
				cwd && *cwd ? cwd : "/", err);
}

/* The namespaces. bwrap makes the pid, mount and cgroup ones in the
 * child it clones; ipc, uts and network are entered here, by the process
 * create forks, before it becomes bwrap (host.c): that process's pid is
 * the one the engine gets, and a pod's app containers join the sandbox's
 * namespaces by /proc/<that pid>/ns/X (containerd's CRI plugin), which
 * must then be the container's, not the host's the bwrap parent stays in.
 *
 * Joined by path (network, ipc, uts): setns(2) into the fd the model
 * holds since it checked it (an nsfs file of that type, never the
 * runtime's own nor pid 1's: model.c), not the path again. The process
 * is uid 0 of the host's user namespace, so setns passes for a namespace
 * owned by any user namespace (CAP_SYS_ADMIN there); bwrap, run by real
 * uid 0, makes no user namespace of its own (no --unshare-user), and the
 * process keeps only the bundle's capabilities (--cap-drop ALL, --cap-add)
 * over the joined namespaces, as crun's without a user namespace. pid,
 * cgroup, mount, user and time are not joined: a pid namespace joined in
 * the child would hold bwrap's child, not bwrap, and the pid the engine
 * knows is bwrap's, so a path to it names the host's (refused by the
 * model); the others are the container's own. */
static int plan_namespaces(const struct krt_model *mo, json_t *config, struct krt_host_plan *p,
			   struct kis_error **err)
{
	json_t *linux_ = json_object_get(config, "linux");
	bool cgroup = false, net = false, net_joined = false, uts_joined = false;
	json_t *n;
	size_t i;
	json_array_foreach(json_object_get(linux_, "namespaces"), i, n) {
		const char *t = json_string_value(json_object_get(n, "type"));
		const char *path = json_string_value(json_object_get(n, "path"));
		if (!t)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.namespaces[%zu].type is missing", i);
		bool joinable = strcmp(t, "network") == 0 || strcmp(t, "ipc") == 0 ||
				strcmp(t, "uts") == 0;
		if (path && *path && !joinable)
			return krt_host_refuse(err, "linux.namespaces[%zu] '%s' joins '%s': the host "
					   "tier joins only a network, ipc or uts namespace by path "
					   "(bubblewrap's child, not the pid the engine knows, is in "
					   "the container's pid namespace)",
				      i, t, path);
		if (strcmp(t, "user") == 0 || strcmp(t, "time") == 0)
			return krt_host_refuse(err, "linux.namespaces[%zu] '%s': the host tier makes no "
					   "%s namespace from a bundle",
				      i, t, t);
		if (strcmp(t, "cgroup") == 0)
			cgroup = true;
		if (!joinable)
			continue;
		int clone = 0;
		if (path && *path) {
			int fd = krt_model_ns_fd(mo, t, &clone);
			/* the model opened and checked every path it kept */
			if (fd < 0 || p->n_join == KRT_HOST_MAX_JOIN)
				return kis_error_set(err, KIS_E_INTERNAL, 0,
						     "linux.namespaces[%zu] '%s': no held namespace", i,
						     t);
			p->join_fd[p->n_join] = fd;
			p->join_clone[p->n_join++] = clone;
			net_joined = net_joined || clone == CLONE_NEWNET;
			uts_joined = uts_joined || clone == CLONE_NEWUTS;
		} else {
			krt_model_ns_fd(mo, t, &clone);
			p->unshare |= clone;
		}
		net = net || strcmp(t, "network") == 0;
	}
	/* pid, mount, ipc, uts (and network without the hatch) were required
	 * by krt_policy_container already */
	TRY(krt_argv_push(&p->bwrap, "--unshare-pid", err));
	if (cgroup)
		TRY(krt_argv_push(&p->bwrap, "--unshare-cgroup", err));
	p->lo_up = (p->unshare & CLONE_NEWNET) != 0; /* what bwrap's --unshare-net did */
	const char *host = json_string_value(json_object_get(config, "hostname"));
	/* a hostname set in a joined uts namespace would be the pod's (the
	 * sandbox's to set): runc refuses it without a uts namespace of the
	 * container's own, and so does this tier */
	if (host && uts_joined)
		return krt_host_refuse(err, "hostname '%s': the uts namespace is joined by path, "
				   "whose name is not this container's to set",
			      host);
	p->hostname = host;
	/* Network off (a namespace of its own, with only lo): kis's filter
	 * allows AF_UNIX sockets only. A joined network namespace is the
	 * pod's network (CNI's), which the namespace bounds: every family, as
	 * with the host's network under the hatch. */
	p->net = net && !net_joined ? KIS_NET_OFF : KIS_NET_HOST;
	return 0;
}

static int plan_process(json_t *proc, struct krt_host_plan *p, struct kis_error **err)
{
	if (!json_is_object(proc))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process is missing");
	json_t *user = json_object_get(proc, "user");
	json_int_t uid = json_integer_value(json_object_get(user, "uid"));
	json_int_t gid = json_integer_value(json_object_get(user, "gid"));
	if (uid != 0 || gid != 0 || json_object_get(user, "username"))
		return krt_host_refuse(err, "process.user: the host tier runs the process as the root of "
				   "the host's user namespace only (uid 0, gid 0)");
	/* the CRI plugin always lists the primary group again (additionalGids
	 * [0]): group 0 is taken, any other group of the host's is refused
	 * (no user namespace maps it), and the process gets exactly these
	 * groups, not the runtime's (setgroups(2) in host.c) */
	json_t *g;
	size_t gi;
	json_array_foreach(json_object_get(user, "additionalGids"), gi, g) {
		if (!json_is_integer(g) || json_integer_value(g) != 0)
			return krt_host_refuse(err, "process.user.additionalGids[%zu]: the host tier "
					   "gives the process group 0 only",
				      gi);
		p->groups_root = true;
	}
	static const char *const unsupported[] = {"apparmorProfile", "selinuxLabel",
						  "ioPriority", "scheduler", "execCPUAffinity"};
	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
		if (json_object_get(proc, unsupported[i]))
			return krt_host_refuse(err, "process.%s: bubblewrap cannot apply it", unsupported[i]);
	/* one set for all: bwrap's --cap-add gives each cap to every set */
	json_t *caps = json_object_get(proc, "capabilities");
	json_t *bounding = json_object_get(caps, "bounding");
	const char *set;
	json_t *list;
	json_object_foreach(caps, set, list) {
		if (strcmp(set, "ambient") == 0 || strcmp(set, "inheritable") == 0) {
			/* the process is uid 0: at execve it gets the bounding
			 * set whatever these hold (capabilities(7), "Capabilities
			 * and execution of programs by root"), so a subset of
			 * bounding is what it would have anyway */
			json_t *c;
			size_t k;
			json_array_foreach(list, k, c) {
				bool in = false;
				json_t *b;
				size_t j;
				json_array_foreach(bounding, j, b)
					in = in || json_equal(b, c);
				if (!in)
					return krt_host_refuse(err, "process.capabilities.%s names '%s', "
							   "which bounding does not",
						      set, json_string_value(c));
			}
			continue;
		}
		if (!json_equal(list, bounding))
			return krt_host_refuse(err, "process.capabilities.%s differs from bounding: "
					   "bubblewrap gives one set",
				      set);
	}
	TRY(krt_argv_push2(&p->bwrap, "--cap-drop", "ALL", err));
	json_t *c;
	size_t i;
	json_array_foreach(bounding, i, c)
		TRY(krt_argv_push2(&p->bwrap, "--cap-add", json_string_value(c), err));
	TRY(krt_argv_push(&p->bwrap, "--clearenv", err));
	json_array_foreach(json_object_get(proc, "env"), i, c) {
		const char *kv = json_string_value(c);
		const char *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv)
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "process.env[%zu] is not KEY=VALUE", i);
		_cleanup_free_ char *k = strndup(kv, (size_t)(eq - kv));
		if (!k)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "env");
		TRY(krt_argv_push(&p->bwrap, "--setenv", err));
		TRY(krt_argv_push2(&p->bwrap, k, eq + 1, err));
	}
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	TRY(krt_argv_push2(&p->bwrap, "--chdir", cwd && *cwd ? cwd : "/", err));
	p->args = json_object_get(proc, "args");
	if (!json_array_size(p->args))
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "process.args is empty");
	p->rlimits = json_object_get(proc, "rlimits");
	p->terminal = json_is_true(json_object_get(proc, "terminal"));
	json_t *adj = json_object_get(proc, "oomScoreAdj");
	p->has_oom_adj = json_is_integer(adj);
	p->oom_score_adj = (int)json_integer_value(adj);
	return 0;
}

/* The index in confine.h's kis_cgroup_oci_keys (linux.resources.<key>.limit
 * of each limit a cgroup binds, the table the container tier writes them
 * from) of key k, or -1. */
static int res_limit(const char *k)
{
	for (size_t i = 0; i < ARRAY_SIZE(kis_cgroup_oci_keys); i++)
		if (!strcmp(k, kis_cgroup_oci_keys[i].key))
			return (int)i;
	return -1;
}

/* linux.resources.cpu: the quota, period and shares go to a group of the
 * container's in the cpu controller (v1 cpu.cfs_quota_us, cpu.cfs_period_us,
 * cpu.shares; v2 cpu.max, cpu.weight), as runc and crun write them. A
 * quota or period is a bound: where this host has no cpu controller it is
 * refused. Shares are a weight among siblings under contention, no bound:
 * the CRI plugin gives every sandbox one (2), so without a cpu controller
 * they are taken unapplied. A CPU set or a realtime budget is refused. */
static int plan_cpu(json_t *cpu, struct krt_host_plan *p, struct kis_error **err)
{
	const char *ck;
	json_t *cv;
	json_object_foreach(cpu, ck, cv) {
		bool quota = !strcmp(ck, "quota"), period = !strcmp(ck, "period");
		if (!quota && !period && strcmp(ck, "shares"))
			return krt_host_refuse(err, "linux.resources.cpu.%s: the host tier binds "
					   "cpu.quota, cpu.period and cpu.shares only", ck);
		if (!json_is_integer(cv))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.resources.cpu.%s is not an integer", ck);
		json_int_t x = json_integer_value(cv);
		/* quota -1 (or 0): no bound, a new group's own value */
		if (quota && x > 0 &&
		    ((uint64_t)x < KIS_CPU_QUOTA_MIN_US || (uint64_t)x > KIS_CPU_QUOTA_MAX_US))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.resources.cpu.quota %lld is outside the "
					     "kernel's %llu..%llu us (sched-bwc.rst); -1 is none",
					     (long long)x, KIS_CPU_QUOTA_MIN_US, KIS_CPU_QUOTA_MAX_US);
		if (period && x != 0 &&
		    ((uint64_t)x < KIS_CPU_PERIOD_MIN_US || (uint64_t)x > KIS_CPU_PERIOD_MAX_US))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.resources.cpu.period %lld is outside the "
					     "kernel's %llu..%llu us (sched-bwc.rst)",
					     (long long)x, KIS_CPU_PERIOD_MIN_US, KIS_CPU_PERIOD_MAX_US);
		if (!quota && !period && x != 0 && (x < 2 || x > 262144))
			return kis_error_set(err, KIS_E_INVALID_PROFILE, 0,
					     "linux.resources.cpu.shares %lld is outside "
					     "2..262144", (long long)x);
		uint64_t *slot = quota ? &p->cpu_quota_us : period ? &p->cpu_period_us
								  : &p->cpu_shares;
		*slot = x > 0 ? (uint64_t)x : 0;
	}
	char why[160];
	if ((p->cpu_quota_us || p->cpu_period_us || p->cpu_shares) &&
	    !kis_cgroup_cpu_available(why, sizeof(why))) {
		if (p->cpu_quota_us || p->cpu_period_us)
			return krt_host_refuse(err, "linux.resources.cpu.%s: %s",
					       p->cpu_quota_us ? "quota" : "period", why);
		p->cpu_shares = 0; /* a weight, taken unapplied */
	}
	return 0;
}

static int plan_resources(json_t *res, struct krt_host_plan *p, struct kis_error **err)
{
	const char *k;
	json_t *v;
	char keys[128] = "";
	for (size_t i = 0, o = 0; i < ARRAY_SIZE(kis_cgroup_oci_keys) && o < sizeof(keys); i++)
		o += (size_t)snprintf(keys + o, sizeof(keys) - o, "%s%s",
				      !i ? "" : i + 1 < ARRAY_SIZE(kis_cgroup_oci_keys) ? ", " : " and ",
				      kis_cgroup_oci_keys[i].key);
	json_object_foreach(res, k, v) {
		if (strcmp(k, "devices") == 0)
			continue; /* bwrap's --dev holds only the harmless devices */
		if (res_limit(k) >= 0) {
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv) {
				if (strcmp(mk, "limit") != 0 &&
				    !(strcmp(mk, "swap") == 0 && json_equal(mv, json_object_get(
									v, "limit"))))
					return krt_host_refuse(err, "linux.resources.%s.%s: the host tier "
							   "enforces %s.limit only",
						      k, mk, k);
			}
			continue;
		}
		if (strcmp(k, "cpu") == 0) {
			TRY(plan_cpu(v, p, err));
			continue;
		}
		if ((json_is_object(v) && !json_object_size(v)) ||
		    (json_is_array(v) && !json_array_size(v)))
			continue;
		return krt_host_refuse(err, "linux.resources.%s: the host tier enforces %s only",
			      k, keys);
	}
	for (size_t i = 0; i < ARRAY_SIZE(kis_cgroup_oci_keys); i++) {
		json_int_t x = json_integer_value(
		    json_object_get(json_object_get(res, kis_cgroup_oci_keys[i].key), "limit"));
		*kis_limit_slot(&p->limits, kis_cgroup_oci_keys[i].index) = x > 0 ? (uint64_t)x : 0;
	}
	return 0;
}

/* config has been through krt_policy_container (its refusals and
 * defaults), which also put kis's seccomp JSON in place of an absent one:
 * had_seccomp says whether the bundle brought its own. */
int krt_host_plan(const struct krt_model *mo, bool had_seccomp, struct krt_host_plan *p,
		  struct kis_error **err)
{
	json_t *config = mo->doc;
	memset(p, 0, sizeof(*p));
	const char *bwrap = bwrap_path();
	if (!bwrap)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "run.kis.tier 'host' needs bubblewrap: install Debian's bubblewrap");
	if (had_seccomp)
		return krt_host_refuse(err, "linux.seccomp: the host tier applies kis's own filter, not a "
				   "bundle's");
	json_t *linux_ = json_object_get(config, "linux");
	static const char *const unsupported[] = {"sysctl", "uidMappings", "gidMappings",
						  "intelRdt", "personality", "mountLabel"};
	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
		if (json_object_get(linux_, unsupported[i]))
			return krt_host_refuse(err, "linux.%s: bubblewrap cannot apply it", unsupported[i]);
	if (json_array_size(json_object_get(linux_, "devices")))
		return krt_host_refuse(err, "linux.devices: the host tier gives only null, zero, full, "
				   "random, urandom and tty");
	if (json_object_size(json_object_get(config, "hooks")))
		return krt_host_refuse(err, "hooks: the host tier runs no hooks");
	TRY(krt_argv_push(&p->bwrap, bwrap, err));
	TRY(plan_namespaces(mo, config, p, err));
	TRY(krt_argv_push(&p->bwrap, "--as-pid-1", err));
	TRY(plan_process(json_object_get(config, "process"), p, err));
	TRY(plan_resources(json_object_get(linux_, "resources"), p, err));
	/* the container's group where the engine asks for it (cgroupfs: a
	 * path from the hierarchy's root, as runc reads it); a systemd
	 * slice:prefix:name or a relative path: kis's own place for it */
	p->cgroups_path = krt_cgroups_path(config);
	json_t *root = json_object_get(config, "root");
	/* the root held since the model checked it: whatever root.path
	 * names by now, bwrap binds that directory */
	char num[16];
	snprintf(num, sizeof(num), "%d", mo->root.fd);
	/* a read-only root is bound writable and made read-only once every
	 * mount is in place (--remount-ro /, below): bwrap makes a missing
	 * mount point (the CRI plugin's /etc/resolv.conf in an image that
	 * has none) in the root, as crun does before its final remount */
	bool root_ro = json_is_true(json_object_get(root, "readonly"));
	TRY(krt_argv_push(&p->bwrap, "--bind-fd", err));
	TRY(krt_argv_push2(&p->bwrap, num, "/", err));
	json_t *m;
	size_t i;
	bool sysfs = false;
	json_array_foreach(json_object_get(config, "mounts"), i, m) {
		TRY(plan_mount(m, i, i < mo->n_binds ? mo->binds[i].fd : -1, sysfs, &p->bwrap, err));
		const char *type = json_string_value(json_object_get(m, "type"));
		sysfs = sysfs || (type && strcmp(type, "sysfs") == 0);
	}
	TRY(check_inner_paths(config, mo->root.fd, err));
	TRY(plan_proc_view(linux_, &p->bwrap, err));
	if (root_ro)
		TRY(krt_argv_push2(&p->bwrap, "--remount-ro", "/", err));
	/* no TIOCSTI into a terminal the engine gave (a pty of the container's
	 * own is its session's controlling terminal instead) */
	if (!p->terminal)
		TRY(krt_argv_push(&p->bwrap, "--new-session", err));
	return 0;
}

