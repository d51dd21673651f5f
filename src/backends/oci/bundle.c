/* SPDX-License-Identifier: MIT */
/* config.json of the oci backend, following the OCI runtime specification
 * (config.md, config-linux.md) with runc's defaults for masked paths. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/host/common.h"
#include "backends/oci/bundle.h"
#include "confine/confine.h"
#include "confine/sysview.h"
#include "core/log.h"
#include "core/tree.h"

/* What of the host root: host shows: src/confine/sysview.c, shared with the
 * other tiers. maskedPaths also covers the /etc secrets, as on bubblewrap:
 * the sandbox's root is a host id of its own block (userns_path), so DAC
 * already refuses it what root owns 0600, and the masks stay as a second
 * wall (and the only one for a rootless engine's own files); missing paths
 * are skipped by the runtime. */
static json_t *strs(const char *const *v, size_t n);

static json_t *masked_paths(void)
{
	json_t *a = strs(kis_sysview_masked, kis_sysview_n_masked);
	for (size_t i = 0; a && i < kis_sysview_n_etc_hidden; i++) {
		char p[256];
		snprintf(p, sizeof(p), "/etc/%s", kis_sysview_etc_hidden[i]);
		if (json_array_append_new(a, json_string(p)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The only devices: config-linux.md "Default Devices" (null, zero, full,
 * random, urandom, tty, ptmx) which the runtime creates in the /dev tmpfs;
 * the device cgroup allows those and the pseudo-terminals, nothing else. */
static const struct {
	int major, minor; /* -1: any */
} dev_allow[] = {{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}, {136, -1}};

static int add(json_t *arr, json_t *v)
{
	return v ? json_array_append_new(arr, v) : -1;
}

static json_t *strs(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *strv(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return strs((const char *const *)v, n);
}

static json_t *mount_entry(const char *dst, const char *type, const char *src,
			   const char *const *opts, size_t n)
{
	kis_debug("mount %s %s at %s (container config)", type, src, dst);
	return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src,
			 "options", strs(opts, n));
}

static bool is_real_dir(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int build_mounts(const struct kis_oci_spec *s, json_t *m)
{
	static const char *const proc_o[] = {"nosuid", "noexec", "nodev"};
	static const char *const dev_o[] = {"nosuid", "strictatime", "mode=755", "size=65536k"};
	static const char *const pts_o[] = {"nosuid", "noexec", "newinstance", "ptmxmode=0666",
					    "mode=0620"};
	static const char *const shm_o[] = {"nosuid", "noexec", "nodev", "mode=1777",
					    "size=65536k"};
	static const char *const mq_o[] = {"nosuid", "noexec", "nodev"};
	static const char *const sys_o[] = {"nosuid", "noexec", "nodev", "ro"};
	static const char *const tmp_o[] = {"nosuid", "nodev", "mode=1777"};
	static const char *const sysro_o[] = {"bind", "ro", "nosuid", "nodev"};
	static const char *const ws_o[] = {"rbind", "rw", "nosuid", "nodev"};
	static const char *const agent_o[] = {"bind", "ro", "nosuid", "nodev"};
	int r = 0;
	r |= add(m, mount_entry("/proc", "proc", "proc", proc_o, ARRAY_SIZE(proc_o)));
	r |= add(m, mount_entry("/dev", "tmpfs", "tmpfs", dev_o, ARRAY_SIZE(dev_o)));
	r |= add(m, mount_entry("/dev/pts", "devpts", "devpts", pts_o, ARRAY_SIZE(pts_o)));
	r |= add(m, mount_entry("/dev/shm", "tmpfs", "shm", shm_o, ARRAY_SIZE(shm_o)));
	r |= add(m, mount_entry("/dev/mqueue", "mqueue", "mqueue", mq_o, ARRAY_SIZE(mq_o)));
	/* sysfs read-only; with the host's network namespace a fresh sysfs
	 * cannot be mounted (it is tied to the netns), crun then binds it. */
	r |= add(m, mount_entry("/sys", "sysfs", "sysfs", sys_o, ARRAY_SIZE(sys_o)));
	/* /tmp on tmpfs: its pages are charged to the container's memory cgroup */
	char tmp_size[48];
	snprintf(tmp_size, sizeof(tmp_size), "size=%llu",
		 (unsigned long long)(s->limits->memory_bytes ? s->limits->memory_bytes : 1ull << 30));
	const char *tmpo[ARRAY_SIZE(tmp_o) + 1];
	memcpy(tmpo, tmp_o, sizeof(tmp_o));
	tmpo[ARRAY_SIZE(tmp_o)] = tmp_size;
	r |= add(m, mount_entry("/tmp", "tmpfs", "tmpfs", tmpo, ARRAY_SIZE(tmpo)));
	if (s->root == KIS_ROOT_HOST) {
		for (size_t i = 0; i < kis_sysview_n_dirs; i++)
			if (is_real_dir(kis_sysview_dirs[i]))
				r |= add(m, mount_entry(kis_sysview_dirs[i], "bind", kis_sysview_dirs[i], sysro_o,
							ARRAY_SIZE(sysro_o)));
		if (s->workspace)
			r |= add(m, mount_entry("/workspace", "bind", s->workspace, ws_o,
						ARRAY_SIZE(ws_o)));
		/* the profile's mounts (issue 21): a plain bind (no submounts)
		 * of the staged tree, read-only for a base or when asked */
		static const char *const mro_o[] = {"bind", "ro", "nosuid", "nodev"};
		static const char *const mrw_o[] = {"bind", "rw", "nosuid", "nodev"};
		for (size_t i = 0; i < s->n_mounts; i++)
			r |= add(m, mount_entry(s->mounts[i].target, "bind", s->mounts[i].source,
						s->mounts[i].ro ? mro_o : mrw_o, ARRAY_SIZE(mro_o)));
		/* over the host's: the sandbox's resolver is pasta's forwarder */
		if (s->net == KIS_NET_EGRESS)
			r |= add(m, mount_entry("/etc/resolv.conf", "bind",
						s->resolv_conf ? s->resolv_conf : "<bundle>/resolv.conf",
						sysro_o, ARRAY_SIZE(sysro_o)));
	}
	r |= add(m, mount_entry(KIS_OCI_AGENT_PATH, "bind", s->agent, agent_o,
				ARRAY_SIZE(agent_o)));
	return r ? -1 : 0;
}

static json_t *build_namespaces(const struct kis_oci_spec *s)
{
	static const char *const ns[] = {"pid", "mount", "ipc", "uts", "cgroup"};
	json_t *a = json_array();
	for (size_t i = 0; a && i < ARRAY_SIZE(ns); i++)
		add(a, json_pack("{s:s}", "type", ns[i]));
	/* host networking is the hatch: no network namespace at all; egress
	 * joins the one the engine made (src/net/egress.c) */
	if (a && s->net == KIS_NET_EGRESS)
		add(a, json_pack("{s:s, s:s}", "type", "network", "path",
				 s->netns_path ? s->netns_path : "<the engine's network namespace>"));
	else if (a && s->net != KIS_NET_HOST)
		add(a, json_pack("{s:s}", "type", "network"));
	/* the engine as root: the sandbox's own namespace, made and mapped
	 * before crun starts (config-linux.md "namespaces": with a path the
	 * runtime joins it and writes no mappings) */
	if (a && s->userns_path)
		add(a, json_pack("{s:s, s:s}", "type", "user", "path", s->userns_path));
	else if (a && s->user_ns)
		add(a, json_pack("{s:s}", "type", "user"));
	return a;
}

static json_t *build_resources(const struct kis_oci_spec *s)
{
	json_t *devs = json_array();
	add(devs, json_pack("{s:b, s:s}", "allow", 0, "access", "rwm"));
	for (size_t i = 0; devs && i < ARRAY_SIZE(dev_allow); i++) {
		json_t *d = json_pack("{s:b, s:s, s:s, s:I}", "allow", 1, "type", "c", "access", "rwm",
				      "major", (json_int_t)dev_allow[i].major);
		if (d && dev_allow[i].minor >= 0)
			json_object_set_new(d, "minor", json_integer(dev_allow[i].minor));
		add(devs, d);
	}
	const struct kis_limits *l = s->limits;
	json_t *r = json_pack("{s:o}", "devices", devs);
	/* each limit a cgroup binds, as OCI's linux.resources.<key>.limit
	 * (confine.h, kis_cgroup_oci_keys) */
	const struct kis_cgroup_oci_key *res = kis_cgroup_oci_keys;
	for (size_t i = 0; r && i < ARRAY_SIZE(kis_cgroup_oci_keys); i++) {
		uint64_t v = kis_limit_get(l, res[i].index);
		if (!v)
			continue;
		/* pids is the command's: the engine's own processes in the
		 * container (the agent, a worker) come on top */
		if (res[i].index == KIS_LIMIT_I_PIDS)
			v += s->engine_pids;
		json_t *o = json_pack("{s:I}", "limit", (json_int_t)v);
		/* swap = limit: memory plus swap capped at the same value (v1
		 * memory.memsw.limit_in_bytes; crun writes memory.swap.max = 0
		 * on v2), so the limit cannot be dodged by swapping. */
		if (o && res[i].index == KIS_LIMIT_I_MEMORY)
			json_object_set_new(o, "swap", json_integer((json_int_t)v));
		json_object_set_new(r, res[i].key, o);
	}
	return r;
}

static json_t *build_process(const struct kis_oci_spec *s)
{
	const struct kis_limits *l = s->limits;
	/* The container's rlimits are a backstop: the agent gives each command
	 * the exact file_bytes and open_files (src/exec/spawn.c). They have a
	 * floor because crun applies them before it writes out and loads the
	 * compiled seccomp filter (a file of a few KiB: a tiny RLIMIT_FSIZE
	 * truncates it and the load fails with EINVAL), and the agent itself
	 * needs a few descriptors. */
	json_int_t fsize = (json_int_t)(l->file_bytes > (1u << 20) ? l->file_bytes : (1u << 20));
	json_int_t nofile = (json_int_t)(l->open_files > 64 ? l->open_files : 64);
	/* No capabilities in any set (config.md "capabilities"). */
	json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
				 "inheritable", "permitted", "ambient");
	json_t *rl = json_pack("[{s:s, s:I, s:I}, {s:s, s:I, s:I}, {s:s, s:i, s:i}]", "type",
			       "RLIMIT_NOFILE", "hard", nofile, "soft", nofile, "type",
			       "RLIMIT_FSIZE", "hard", fsize, "soft", fsize, "type",
			       "RLIMIT_CORE", "hard", 0, "soft", 0);
	/* Rootless, no cgroup binds memory and pids: the documented fallbacks
	 * (issue 40 item 1). crun sets them inside the container's user
	 * namespace, where RLIMIT_NPROC counts only that namespace's
	 * threads of the uid (the kernel's ucounts are per namespace), so
	 * pids plus the engine's own is exact; RLIMIT_DATA binds each
	 * process's private writable memory, not the sandbox's total. */
	if (rl && s->no_cgroup && l->pids)
		json_array_append_new(rl, json_pack("{s:s, s:I, s:I}", "type", "RLIMIT_NPROC", "hard",
						    (json_int_t)(l->pids + s->engine_pids), "soft",
						    (json_int_t)(l->pids + s->engine_pids)));
	if (rl && s->no_cgroup && l->memory_bytes)
		json_array_append_new(rl, json_pack("{s:s, s:I, s:I}", "type", "RLIMIT_DATA", "hard",
						    (json_int_t)l->memory_bytes, "soft",
						    (json_int_t)l->memory_bytes));
	return json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:o, s:b}", "terminal", 0, "user",
			 "uid", 0, "gid", 0, "args", strv(s->args), "env", strv(s->env), "cwd",
			 s->cwd ? s->cwd : "/", "capabilities", caps, "rlimits", rl,
			 "noNewPrivileges", 1);
}

/* RFC 4648 section 4, with padding: what crun decodes. */
static char *base64(const uint8_t *in, size_t n)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? abc[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* The policy compiled, for crun's annotation run.oci.seccomp_bpf_data
 * (crun(1): base64 of the program handed to seccomp(SECCOMP_SET_MODE_FILTER),
 * linux.seccomp then ignored): crun skips its libseccomp compile of the
 * JSON, 5.6 ms a start here (docs/performance.md). The program is the host
 * tier's cached one for the same options (kis_host_seccomp_fd), so both
 * tiers load one filter. No linux.seccomp beside it: crun ignores it, and
 * building and writing its JSON cost kis ~0.6 ms of CPU a start. That a
 * filter is in force is not left to the runtime: the agent is started with
 * --require-seccomp and serves nothing unless it runs under one. */
static json_t *seccomp_annotation(const struct kis_seccomp_opts *so, struct kis_error **err)
{
	int fd = -1;
	if (kis_host_seccomp_fd(so, &fd, err) < 0)
		return NULL;
	struct stat st;
	uint8_t buf[8 * 4096];
	ssize_t n = fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (off_t)sizeof(buf) ?
			    -1 : RETRY_EINTR(pread(fd, buf, (size_t)st.st_size, 0));
	int e = errno;
	close(fd);
	if (n != (ssize_t)st.st_size) {
		kis_error_set(err, KIS_E_INTERNAL, n < 0 ? e : EIO, "cannot read the seccomp program");
		return NULL;
	}
	char *b64 = base64(buf, (size_t)n);
	json_t *a = b64 ? json_pack("{s:s}", "run.oci.seccomp_bpf_data", b64) : NULL;
	free(b64);
	if (!a)
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build config.json");
	return a;
}

/* config-linux.md "User namespace mappings": 0 onto own, then range ids
 * 1..range onto 1..range of crun's namespace (none when range is 0). */
static json_t *id_mappings(json_int_t own, json_int_t range)
{
	json_t *a = json_pack("[{s:i, s:I, s:i}]", "containerID", 0, "hostID", own, "size", 1);
	if (a && range > 0)
		add(a, json_pack("{s:i, s:i, s:I}", "containerID", 1, "hostID", 1, "size", range));
	return a;
}

int kis_oci_config_build(const struct kis_oci_spec *s, json_t **out, struct kis_error **err)
{
	json_t *mounts = json_array();
	struct kis_seccomp_opts so = {.net = s->net, .allow_sysv_ipc = true};
	json_t *ann = seccomp_annotation(&so, err);
	if (!ann) {
		json_decref(mounts);
		return -1;
	}
	if (!mounts || build_mounts(s, mounts) < 0) {
		json_decref(mounts);
		json_decref(ann);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build config.json");
	}
	json_t *lnx = json_pack(
		"{s:o, s:o, s:s, s:o, s:o}", "namespaces", build_namespaces(s), "resources",
		build_resources(s), "cgroupsPath", s->cgroups_path, "maskedPaths",
		masked_paths(), "readonlyPaths", strs(kis_sysview_readonly, kis_sysview_n_readonly));
	/* rootless: no cgroup is the user's to write (the probe took memory
	 * and pids out of what this backend enforces): nothing is asked that
	 * crun would have to skip */
	if (lnx && s->no_cgroup) {
		json_object_del(lnx, "cgroupsPath");
		json_object_del(lnx, "resources");
	}
	if (lnx && s->user_ns) {
		/* 0, the caller; with a subordinate range, 1.. its ids as a
		 * second extent: the kernel maps each extent of a child's map
		 * into one extent of the parent's (map_id_range_down), and
		 * crun's namespace has the caller and the range as two */
		json_int_t n = s->id_count > 1 ? (json_int_t)s->id_count - 1 : 0;
		json_object_set_new(lnx, "uidMappings", id_mappings((json_int_t)s->host_uid, n));
		json_object_set_new(lnx, "gidMappings", id_mappings((json_int_t)s->host_gid, n));
	}
	/* root:host: the skeleton is read-only, writes go to /workspace and
	 * /tmp; root:workspace: the cloned OS image is the writable root. */
	json_t *cfg = lnx ? json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o, s:o}", "ociVersion",
					"1.0.2", "process", build_process(s), "root", "path",
					s->rootfs, "readonly", s->root == KIS_ROOT_HOST, "hostname",
					"kis", "mounts", mounts, "linux", lnx, "annotations", ann)
			    : NULL;
	if (!cfg) {
		if (!lnx) {
			json_decref(mounts);
			json_decref(ann);
		}
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot build config.json");
	}
	*out = cfg;
	return 0;
}

int kis_oci_rootfs_skeleton(int rfd, struct kis_error **err)
{
	static const char *const dirs[] = {"proc", "dev", "sys", "tmp", "workspace", ".kis"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (mkdirat(rfd, dirs[i], 0755) < 0 && errno != EEXIST)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s' in the rootfs",
					     dirs[i]);
	/* the agent's bind mount needs a file to cover */
	int fd = openat(rfd, ".kis/agent", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0755);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create the agent mount point");
	close(fd);
	for (size_t i = 0; i < kis_sysview_n_dirs; i++) {
		const char *name = kis_sysview_dirs[i] + 1;
		struct stat st;
		if (lstat(kis_sysview_dirs[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			char target[256];
			ssize_t n = readlink(kis_sysview_dirs[i], target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (symlinkat(target, rfd, name) < 0 && errno != EEXIST)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot mirror '%s' in the rootfs", kis_sysview_dirs[i]);
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdirat(rfd, name, 0755) < 0 && errno != EEXIST)
				return kis_error_set(err, KIS_E_INTERNAL, errno,
						     "cannot create '%s' in the rootfs", name);
		}
	}
	return 0;
}

/* The host's layout the skeleton mirrors (kis_oci_rootfs_skeleton): each
 * system directory as "d", "l<target>" or "-" (absent), hashed (64-bit
 * FNV-1a) into the shared skeleton's name, so a host whose layout changed
 * gets a new one and never a stale view. */
static uint64_t layout_hash(void)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char rec[300];
	/* the skeleton's own entries: a change of them is a new name too */
	const char *fixed = "proc dev sys tmp workspace .kis .kis/agent v1";
	for (const char *c = fixed; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	for (size_t i = 0; i < kis_sysview_n_dirs; i++) {
		struct stat st;
		int n;
		if (lstat(kis_sysview_dirs[i], &st) < 0) {
			n = snprintf(rec, sizeof(rec), "%s -", kis_sysview_dirs[i]);
		} else if (S_ISLNK(st.st_mode)) {
			char t[256];
			ssize_t k = readlink(kis_sysview_dirs[i], t, sizeof(t) - 1);
			t[k > 0 ? k : 0] = '\0';
			n = snprintf(rec, sizeof(rec), "%s l%s", kis_sysview_dirs[i], t);
		} else {
			n = snprintf(rec, sizeof(rec), "%s %c", kis_sysview_dirs[i],
				     S_ISDIR(st.st_mode) ? 'd' : '-');
		}
		for (int j = 0; j < n && j < (int)sizeof(rec); j++)
			h = (h ^ (unsigned char)rec[j]) * 0x100000001b3ull;
	}
	return h;
}

/* Ours, a directory, no link, 0755 exactly: written by no one else. */
static bool skeleton_ok(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 07777) == 0755;
}

int kis_oci_shared_rootfs(char *out, size_t len, bool make, struct kis_error **err)
{
	const char *rd = kis_oci_run_dir();
	if (!rd)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "no runtime directory for crun");
	if ((size_t)snprintf(out, len, "%s/rootfs-%016llx", rd, (unsigned long long)layout_hash()) >=
	    len)
		return kis_error_set(err, KIS_E_INTERNAL, ENAMETOOLONG, "rootfs path");
	if (!make || skeleton_ok(out))
		return 0;
	/* made once: under a name of our own, then renamed into place; an
	 * engine beside us that made it first wins, ours goes */
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", out, (int)getpid());
	_cleanup_close_ int dfd = open(rd, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	const char *tname = strrchr(tmp, '/') + 1;
	if (dfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", rd);
	kis_tree_remove_quiet(dfd, tname); /* a killed engine's, of this pid */
	if (mkdirat(dfd, tname, 0755) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create '%s'", tmp);
	int r = -1, e = 0;
	struct kis_error *e2 = NULL;
	int rfd = openat(dfd, tname, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	/* mkdir's mode is masked by the umask: the exact mode, as checked */
	if (rfd >= 0 && fchmod(rfd, 0755) == 0 && kis_oci_rootfs_skeleton(rfd, &e2) == 0)
		r = renameat(dfd, tname, dfd, strrchr(out, '/') + 1);
	e = errno;
	if (rfd >= 0)
		close(rfd);
	if (r < 0)
		kis_tree_remove_quiet(dfd, tname);
	if (skeleton_ok(out)) {
		kis_error_free(e2);
		return 0;
	}
	if (e2) {
		if (err)
			*err = e2;
		else
			kis_error_free(e2);
		return -1;
	}
	return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make the rootfs '%s'", out);
}
