/* SPDX-License-Identifier: MIT */
/* The VMM's jail, after Firecracker's jailer: QEMU (or a stand-in) runs as a
 * per-VM unprivileged uid, without capabilities, in new namespaces, on a root
 * holding only its files, under seccomp, in a cgroup, with rlimits.
 *
 * For an ordinary user (issue 17) the same jail is built inside a user
 * namespace the user owns: clone(2) with CLONE_NEWUSER beside the mount,
 * pid, ipc, uts and network namespaces, which are then that namespace's
 * (user_namespaces(7): the creator has every capability in it, none in the
 * initial one). The child maps the user's own uid and gid onto themselves,
 * one id each (setgroups denied first, as an unprivileged map requires), so
 * QEMU runs as the user's uid, a stranger to every other; it mounts its
 * root, pivots, drops every capability (bounding set included), sets
 * no_new_privs and seccomp as the root-made jail does. What it cannot have
 * is the cgroup: without a delegated subtree the user may write none, so
 * the VMM's memory is bounded by RLIMIT_AS (guest RAM plus the overhead the
 * cgroup would have allowed, plus TCG's code buffer) and its tasks by
 * RLIMIT_NPROC, counted per user namespace since Linux 5.14 (ucounts), so
 * it bounds the VM's own tasks, not the user's. */
#include "core/util.h"
#include "core/log.h"
#include "core/record.h"

#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "backends/microvm/vm.h"
#include "store/locks.h"
#include "confine/confine.h"
#include "exec/tether.h"
#include "exec/tool.h"
#include "kis/backend.h"

/* Where the jail's root is built, in the child's own mount namespace only:
 * an empty directory the parent makes in the VM's private directory. */
#define JAIL_DIR "jail"

/* ---- the VMM's files ---- */

static int add_file(struct kis_mvm_jail *j, const char *src, const char *dst)
{
	char real[PATH_MAX];
	if (!realpath(src, real))
		return 0; /* absent: the VMM copes or says so in its log */
	char **s2 = realloc(j->src, (j->nfiles + 1) * sizeof(char *));
	if (!s2)
		return -1;
	j->src = s2;
	char **d2 = realloc(j->dst, (j->nfiles + 1) * sizeof(char *));
	if (!d2)
		return -1;
	j->dst = d2;
	/* Debian's merged /usr: the loader's /lib/... is /usr/lib/... (the
	 * jail has the same /lib -> usr/lib links) */
	char norm[PATH_MAX];
	if (!strncmp(dst, "/lib/", 5) || !strncmp(dst, "/lib64/", 7) || !strncmp(dst, "/bin/", 5))
		snprintf(norm, sizeof(norm), "/usr%s", dst);
	else
		snprintf(norm, sizeof(norm), "%s", dst);
	j->src[j->nfiles] = strdup(real);
	j->dst[j->nfiles] = strdup(norm);
	j->nfiles++;
	return j->src[j->nfiles - 1] && j->dst[j->nfiles - 1] && strncmp(norm, "/usr/", 5) == 0 ? 0 : -1;
}

/* The shared objects the dynamic loader maps for bin: `ld.so --list`
 * (no shell), kept in cache_dir/vmm-files-<ino>-<mtime>, one path a line.
 * A static binary has none. */
static int vmm_libs(const char *bin, const char *cache_dir, char ***out, size_t *n)
{
	static const char loader[] = "/lib64/ld-linux-x86-64.so.2";
	*out = NULL;
	*n = 0;
	struct stat sb;
	if (stat(bin, &sb) < 0)
		return -1;
	char cpath[4300];
	snprintf(cpath, sizeof(cpath), "%s/vmm-files-%lx-%lx", cache_dir ? cache_dir : "/nonexistent",
		 (unsigned long)sb.st_ino, (unsigned long)sb.st_mtim.tv_sec);
	FILE *f = fopen(cpath, "re");
	char *text = NULL;
	size_t tlen = 0;
	if (f) {
		FILE *m = open_memstream(&text, &tlen);
		int ch;
		while (m && (ch = fgetc(f)) != EOF)
			fputc(ch, m);
		if (m)
			fclose(m);
		fclose(f);
	} else {
		char *const argv[] = {(char *)loader, "--list", (char *)bin, NULL};
		bool ok = false;
		_cleanup_free_ char *list = kis_tool_output(argv, &ok);
		FILE *m = open_memstream(&text, &tlen);
		char *save = NULL;
		for (char *line = list && m ? strtok_r(list, "\n", &save) : NULL; line;
		     line = strtok_r(NULL, "\n", &save)) {
			/* "\tlibX.so.1 => /lib/.../libX.so.1 (0x...)" or
			 * "\t/lib64/ld-linux-x86-64.so.2 (0x...)" */
			char *arrow = strstr(line, "=> ");
			char *path = arrow ? arrow + 3 : line + strspn(line, " \t");
			if (path[0] != '/')
				continue;
			path[strcspn(path, " (")] = '\0';
			fprintf(m, "%s\n", path);
		}
		if (m)
			fclose(m);
		/* a static binary: the loader refuses it, the list is empty */
		if (ok && text && cache_dir) {
			char tmp[4400];
			snprintf(tmp, sizeof(tmp), "%s.%d", cpath, (int)getpid());
			FILE *w = fopen(tmp, "we");
			if (w) {
				fputs(text, w);
				if (fclose(w) == 0 && rename(tmp, cpath) < 0)
					unlink(tmp);
			}
		}
	}
	size_t cap = 0;
	for (char *save = NULL, *t = text ? strtok_r(text, "\n", &save) : NULL; t;
	     t = strtok_r(NULL, "\n", &save)) {
		if (*n + 1 >= cap) {
			cap = cap ? cap * 2 : 64;
			char **g = realloc(*out, cap * sizeof(char *));
			if (!g)
				break;
			*out = g;
		}
		(*out)[(*n)++] = strdup(t);
	}
	free(text);
	return 0;
}

static int vmm_files(struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c)
{
	char **libs = NULL;
	size_t nl = 0;
	int r = vmm_libs(c->vmm, c->cache_dir, &libs, &nl);
	for (size_t i = 0; r == 0 && i < nl; i++)
		r = libs[i] ? add_file(j, libs[i], libs[i]) : -1;
	for (size_t i = 0; i < nl; i++)
		free(libs[i]);
	free(libs);
	if (r < 0)
		return -1;
	if (!c->vmm_outside_usr && add_file(j, c->vmm, c->vmm) < 0)
		return -1;
	/* QEMU's modules (Debian builds TCG as one) and its firmware
	 * (microvm's qboot.rom): directories of QEMU's own, read-only */
	if (strstr(c->vmm, "qemu-system") && (add_file(j, "/usr/lib/x86_64-linux-gnu/qemu",
						       "/usr/lib/x86_64-linux-gnu/qemu") < 0 ||
					      add_file(j, "/usr/share/qemu", "/usr/share/qemu") < 0))
		return -1;
	return 0;
}

static int jail_cgroup_name(char *buf, size_t n)
{
	/* unique among live VMs: the run's sandbox id (which the sweep of a
	 * killed run knows its cgroups by: engine/owner.c) and a counter, or,
	 * outside a run, the engine's pid and the counter */
	static unsigned seq;
	const char *owner = kis_owner_id();
	if (owner)
		return snprintf(buf, n, "%s-vmm%u", owner, ++seq);
	return snprintf(buf, n, "mvm-%d-%u", (int)getpid(), ++seq);
}

static long read_sysctl(const char *path, long dflt)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	long v = dflt;
	if (f && fscanf(f, "%ld", &v) != 1)
		v = dflt;
	return v;
}

bool kis_mvm_jail_rootless(void)
{
	return geteuid() != 0;
}

bool kis_mvm_jail_possible(char *why, size_t n)
{
	if (kis_mvm_jail_rootless()) {
		/* the jail in a user namespace of the user's own: the host must
		 * let an ordinary user make one */
		if (read_sysctl("/proc/sys/user/max_user_namespaces", 1) == 0 ||
		    read_sysctl("/proc/sys/kernel/unprivileged_userns_clone", 1) == 0) {
			snprintf(why, n, "the VMM's jail for an ordinary user is a user namespace of "
				 "its own, and unprivileged user namespaces are off here "
				 "(user.max_user_namespaces, kernel.unprivileged_userns_clone)");
			return false;
		}
		return true;
	}
	char cw[200] = "";
	unsigned have = kis_cgroup_probe(cw, sizeof(cw));
	if ((have & (KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS)) != (KIS_LIMIT_MEMORY | KIS_LIMIT_PIDS)) {
		snprintf(why, n, "the VMM's jail needs memory and pids cgroups: %s", cw);
		return false;
	}
	return true;
}

int kis_mvm_jail_prepare(struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c,
			 struct kis_error **err)
{
	memset(j, 0, sizeof(*j));
	j->seccomp_fd = -1;
	j->rootless = kis_mvm_jail_rootless();
	if (j->rootless) {
		/* no cgroup is the user's to write: rlimits instead (top of file) */
		j->host_uid = getuid();
		j->host_gid = getgid();
		j->as_bytes = (((uint64_t)c->mem_mib + KIS_MVM_VMM_OVERHEAD_MIB + KIS_MVM_TB_MIB) << 20) +
			      KIS_MVM_VMM_AS_SLACK;
		goto files;
	}
	char name[64];
	jail_cgroup_name(name, sizeof(name));
	struct kis_limits lim = {
		.memory_bytes = ((uint64_t)c->mem_mib + KIS_MVM_VMM_OVERHEAD_MIB) << 20,
		.pids = KIS_MVM_VMM_PIDS,
	};
	struct kis_error *e2 = NULL;
	if (kis_cgroup_create(name, &lim, 0, &j->cg, &e2) < 0) {
		int r = kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				      "microvm: no cgroup for the VMM's jail (memory and pids "
				      "limits): %s",
				      e2 ? e2->message : "?");
		kis_error_free(e2);
		return r;
	}
	/* v1: memory and pids leaves both; v2: the one leaf has both */
	if (!j->cg->dirs[0] || (j->cg->mode == KIS_CG_V1 && !j->cg->dirs[1])) {
		kis_mvm_jail_release(j);
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "microvm: no memory and pids cgroups for the VMM's jail");
	}
files:
	kis_mvm_trace("jail: cgroup made");
	if (vmm_files(j, c) < 0) {
		kis_mvm_jail_release(j);
		return kis_error_set(err, KIS_E_INTERNAL, errno ? errno : ENOMEM,
				     "microvm: cannot list the VMM's files for its jail");
	}
	/* the project's policy (net off: AF_UNIX sockets only; QEMU makes none,
	 * its sockets are the fds it is given) under QEMU's own -sandbox */
	kis_mvm_trace("jail: file list");
	struct kis_seccomp_opts so = {.net = KIS_NET_OFF, .allow_sysv_ipc = false};
	if (kis_seccomp_export_bpf_fd(&so, &j->seccomp_fd, err) < 0) {
		kis_mvm_jail_release(j);
		return -1;
	}
	kis_mvm_trace("jail: seccomp program");
	return 0;
}

void kis_mvm_jail_release(struct kis_mvm_jail *j)
{
	if (j->seccomp_fd >= 0)
		close(j->seccomp_fd);
	j->seccomp_fd = -1;
	if (j->cg) {
		struct kis_error *e = NULL;
		kis_cgroup_destroy(j->cg, &e);
		kis_error_free(e);
	}
	j->cg = NULL;
	for (size_t i = 0; i < j->nfiles; i++) {
		free(j->src[i]);
		free(j->dst[i]);
	}
	free(j->src);
	free(j->dst);
	j->src = j->dst = NULL;
	j->nfiles = 0;
}

/* ---- the child: no allocation, errors as a message on report_fd ---- */

static void __attribute__((noreturn)) child_fail(int fd, const char *what)
{
	char msg[256];
	int e = errno;
	int k = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(e));
	if (k > 0)
		(void)!write(fd, msg, (size_t)k < sizeof(msg) ? (size_t)k : sizeof(msg) - 1);
	_exit(126);
}

/* An empty file (or directory) at `at` inside the new root, then src bound
 * on it with flags (MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC; 0: the
 * caller sets them later). */
static int bind_into(const char *root, const char *at, const char *src, bool dir,
		     unsigned long flags)
{
	char tgt[4200];
	snprintf(tgt, sizeof(tgt), "%s/%s", root, at);
	if (dir) {
		if (mkdir(tgt, 0755) < 0 && errno != EEXIST)
			return -1;
	} else {
		int fd = open(tgt, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		close(fd);
	}
	if (mount(src, tgt, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	/* a bind mount takes its flags only from a remount (mount(2), "Creating
	 * a bind mount": MS_RDONLY etc. are ignored on the first call) */
	return flags ? mount(NULL, tgt, NULL, MS_REMOUNT | MS_BIND | flags, NULL) : 0;
}

static void __attribute__((noreturn)) jail_child(const struct kis_mvm_jail *j,
						 const struct kis_mvm_jail_cfg *c, int go_fd,
						 int report_fd)
{
	/* the passed fds above the target range first, then into place at 3.. */
	int hi[KIS_MVM_MAX_FDS];
	if (c->nfds > KIS_MVM_MAX_FDS)
		_exit(125);
	go_fd = fcntl(go_fd, F_DUPFD_CLOEXEC, 64);
	report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, 64);
	for (int i = 0; i < c->nfds; i++)
		hi[i] = fcntl(c->fds[i], F_DUPFD_CLOEXEC, 64);
	int scfd = j->seccomp_fd >= 0 ? fcntl(j->seccomp_fd, F_DUPFD_CLOEXEC, 64) : -1;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	int lg = c->log_fd >= 0 ? fcntl(c->log_fd, F_DUPFD_CLOEXEC, 64) : -1;
	if (go_fd < 0 || report_fd < 0 || nul < 0 || dup2(nul, 0) < 0 ||
	    dup2(lg >= 0 ? lg : nul, 1) < 0 || dup2(lg >= 0 ? lg : nul, 2) < 0)
		_exit(125);
	for (int i = 0; i < c->nfds; i++)
		if (hi[i] < 0 || dup2(hi[i], 3 + i) < 0)
			_exit(125);
	/* wait for the parent: cgroup attached, uid given */
	uint32_t uid = 0;
	if (RETRY_EINTR(read(go_fd, &uid, sizeof(uid))) != (ssize_t)sizeof(uid) || uid == 0)
		_exit(125);
	close(go_fd);
	/* rootless: our user namespace maps the user's own ids onto
	 * themselves, written by us (user_namespaces(7): one line, the
	 * writer's own euid; gid_map only once setgroups is denied) */
	if (j->rootless &&
	    kis_userns_map_self(j->host_uid, j->host_uid, j->host_gid, j->host_gid) < 0)
		child_fail(report_fd, "cannot map the user's ids in the VMM's user namespace");
	/* no transparent huge pages for the guest's RAM: QEMU asks for them
	 * (MADV_HUGEPAGE), and a restored guest's scattered pages would each
	 * fault in 2 MiB, the whole RAM resident for a guest using a tenth */
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
		child_fail(report_fd, "PR_SET_THP_DISABLE");
	if (sethostname("kis-vm", 6) < 0)
		child_fail(report_fd, "sethostname");
	/* our mounts stay ours: nothing propagates back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(report_fd, "cannot make the mount namespace private");
	char root[4200];
	snprintf(root, sizeof(root), "%s/" JAIL_DIR, c->dir);
	if (mount("kis-vm", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=256k,nr_inodes=512") <
	    0)
		child_fail(report_fd, "cannot mount the jail's root");
	const unsigned long RO = MS_RDONLY | MS_NOSUID | MS_NODEV;
	/* the VMM's own files only, each read-only at its own path (its
	 * binary, libraries, loader, QEMU's modules and firmware), under
	 * Debian's merged-/usr links */
	static const char *const links[][2] = {{"lib", "usr/lib"}, {"lib64", "usr/lib64"},
					       {"bin", "usr/bin"}};
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		char lp[4300];
		snprintf(lp, sizeof(lp), "%s/%s", root, links[i][0]);
		if (symlink(links[i][1], lp) < 0)
			child_fail(report_fd, "jail links");
	}
	/* /usr is a mount of its own: its flags then cover exactly the VMM's files */
	char usr[4300];
	snprintf(usr, sizeof(usr), "%s/usr", root);
	if (mkdir(usr, 0755) < 0 ||
	    mount("kis-vmm", usr, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=256") < 0)
		child_fail(report_fd, "cannot mount the jail's /usr");
	for (size_t i = 0; i < j->nfiles; i++) {
		char dp[4300];
		snprintf(dp, sizeof(dp), "%s%s", root, j->dst[i]);
		/* its parent directories in the tmpfs */
		for (char *q = dp + strlen(root) + 1; (q = strchr(q, '/')); q++) {
			*q = '\0';
			int mr = mkdir(dp, 0755);
			*q = '/';
			if (mr < 0 && errno != EEXIST)
				child_fail(report_fd, "jail directories");
		}
		struct stat ss;
		bool dir = stat(j->src[i], &ss) == 0 && S_ISDIR(ss.st_mode);
		/* flags below, for the whole /usr at once */
		if (bind_into(root, j->dst[i] + 1, j->src[i], dir, 0) < 0)
			child_fail(report_fd, "cannot bind the VMM's files into the jail");
	}
	/* one mount_setattr(2) over /usr and every bind under it, instead of a
	 * remount each: read-only, no setuid, no devices */
	struct mount_attr ma = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	if (syscall(SYS_mount_setattr, AT_FDCWD, usr, AT_RECURSIVE, &ma, sizeof(ma)) < 0)
		child_fail(report_fd, "cannot make the VMM's files read-only");
	char p[4300];
	snprintf(p, sizeof(p), "%s/vm", root);
	if (mkdir(p, 0755) < 0)
		child_fail(report_fd, "jail /vm");
	if (bind_into(root, "vm/vmlinuz", c->kernel, false, RO | MS_NOEXEC) < 0 ||
	    bind_into(root, "vm/initrd", c->initrd, false, RO | MS_NOEXEC) < 0)
		child_fail(report_fd, "cannot bind the guest kernel into the jail");
	if (c->vmm_outside_usr && bind_into(root, "vm/vmm", c->vmm, false, RO) < 0)
		child_fail(report_fd, "cannot bind the VMM into the jail");
	if (c->mem_file && bind_into(root, "vm/mem", c->mem_file, false,
				     (c->mem_rw ? 0 : MS_RDONLY) | MS_NOSUID | MS_NODEV | MS_NOEXEC) < 0)
		child_fail(report_fd, "cannot bind the guest memory into the jail");
	snprintf(p, sizeof(p), "%s/dev", root);
	if (mkdir(p, 0755) < 0)
		child_fail(report_fd, "jail /dev");
	/* the nodes QEMU opens: /dev/null for its standard input, urandom for
	 * glib; /dev/kvm only when the VM runs on KVM */
	static const char *const devs[] = {"null", "zero", "urandom", "random"};
	for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
		char at[32], src[32];
		snprintf(at, sizeof(at), "dev/%s", devs[i]);
		snprintf(src, sizeof(src), "/dev/%s", devs[i]);
		if (bind_into(root, at, src, false, MS_NOSUID | MS_NOEXEC) < 0)
			child_fail(report_fd, "cannot bind a device node into the jail");
	}
	if (c->kvm && bind_into(root, "dev/kvm", "/dev/kvm", false, MS_NOSUID | MS_NOEXEC) < 0)
		child_fail(report_fd, "cannot bind /dev/kvm into the jail");
	if (c->proc) {
		/* a procfs of the VM's own pid namespace, pids only (proc(5)
		 * subset=pid: no /proc/sys, no kernel files), for QEMU to reopen
		 * an fd it was given by path (/proc/self/fd/N) */
		snprintf(p, sizeof(p), "%s/proc", root);
		if (mkdir(p, 0555) < 0 ||
		    mount("proc", p, "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "subset=pid,hidepid=invisible") < 0)
			child_fail(report_fd, "cannot mount the jail's /proc");
	}
	/* pivot_root(2) with new_root == put_old: the old root ends up stacked
	 * under the new one, and a lazy unmount of "." drops it */
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(report_fd, "pivot_root into the jail");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail(report_fd, "cannot drop the host's root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_fail(report_fd, "cannot make the jail's root read-only");
	/* rlimits of our own (not kis_set_rlimits: the VMM lives as long as
	 * the VM, so no CPU-time backstop, and it writes no file by size):
	 * RLIMIT_NPROC counts the tasks of the real uid, this VM's uid alone;
	 * nofile covers QEMU's fds with room; no core dump of guest memory */
	static const struct {
		int res;
		rlim_t v;
	} rl[] = {{RLIMIT_NPROC, KIS_MVM_VMM_PIDS}, {RLIMIT_NOFILE, 1024}, {RLIMIT_CORE, 0}};
	for (size_t i = 0; i < ARRAY_SIZE(rl); i++) {
		struct rlimit l = {rl[i].v, rl[i].v};
		if (setrlimit(rl[i].res, &l) < 0)
			child_fail(report_fd, "setrlimit");
	}
	/* rootless: the address space in place of the memory cgroup */
	struct rlimit as = {j->as_bytes, j->as_bytes};
	if (j->rootless && setrlimit(RLIMIT_AS, &as) < 0)
		child_fail(report_fd, "setrlimit(RLIMIT_AS)");
	int keep[KIS_MVM_MAX_FDS + 1];
	size_t nk = 0;
	for (int i = 0; i < c->nfds; i++)
		keep[nk++] = 3 + i;
	keep[nk++] = report_fd;
	/* rootless: already the user's uid, the only one mapped; the
	 * capabilities the namespace gave us go all the same (bounding set,
	 * permitted, effective, ambient; securebits locked) */
	struct kis_harden_opts ho = {.limits = NULL, .keep_fds = keep, .n_keep = nk,
				     .set_user = !j->rootless, .uid = uid, .gid = uid};
	struct kis_error *e = NULL;
	if (kis_harden_self(&ho, &e) < 0) {
		errno = e ? e->sys_errno : 0;
		child_fail(report_fd, e ? e->message : "harden");
	}
	/* A one-shot run's VMM dies with its engine. Set here, after the
	 * switch of user: a change of credentials clears the parent-death
	 * signal (prctl(2)). We are pid 1 of our namespace (getppid() is 0),
	 * so an engine that died before this line shows on report_fd, the
	 * write end of a pipe whose read end was the engine's: with no reader
	 * left the kernel reports POLLERR there (fs/pipe.c pipe_poll), never
	 * a hang-up, which is a reader's. */
	if (!c->detach) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct pollfd pp = {.fd = report_fd, .events = POLLOUT};
		if (poll(&pp, 1, 0) > 0 && (pp.revents & (POLLERR | POLLHUP)))
			_exit(125);
	}
	/* report_fd is close-on-exec: EOF at a successful execve */
	if (!c->no_seccomp && scfd >= 0 && kis_seccomp_load_bpf_fd(scfd, &e) < 0) {
		errno = e ? e->sys_errno : 0;
		child_fail(report_fd, e ? e->message : "seccomp");
	}
	static char *const envp[] = {"PATH=/usr/bin", NULL};
	execve(c->vmm_outside_usr ? "/vm/vmm" : c->vmm, c->argv, envp);
	child_fail(report_fd, "cannot execute the VMM in its jail");
}

/* Clone the jailed child, give it its cgroup and uid, wait for its execve.
 * Runs in the engine (a run) or in the detaching middle process (a
 * session); errors as text in why. */
static pid_t jail_launch(const struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c,
			 char *why, size_t n)
{
	int go[2], rep[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return snprintf(why, n, "pipe: %s", strerror(errno)), -1;
	if (pipe2(rep, O_CLOEXEC) < 0) {
		close(go[0]);
		close(go[1]);
		return snprintf(why, n, "pipe: %s", strerror(errno)), -1;
	}
	/* a raw clone with namespace flags and no stack: a fork whose child
	 * is pid 1 of a new pid namespace with its own mount, ipc, uts and
	 * (empty) network namespaces */
	unsigned long ns = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
	if (j->rootless)
		ns |= CLONE_NEWUSER; /* the others are then this namespace's */
	long p = syscall(SYS_clone, ns | SIGCHLD, NULL, NULL, NULL, 0);
	if (p == 0) {
		kis_store_locks_drop(); /* a run's: an engine's locks until the execve */
		close(go[1]);
		close(rep[0]);
		jail_child(j, c, go[0], rep[1]);
	}
	close(go[0]);
	close(rep[1]);
	if (p < 0) {
		snprintf(why, n, "cannot make the VMM's namespaces: %s", strerror(errno));
		close(go[1]);
		close(rep[0]);
		return -1;
	}
	pid_t pid = (pid_t)p;
	/* (a session's: traced from the middle process, same clock) */
	kis_mvm_trace("jail: cloned into its namespaces");
	struct kis_error *e = NULL;
	uint32_t uid = j->rootless ? (uint32_t)j->host_uid : KIS_MVM_UID_BASE + (uint32_t)pid;
	if (j->cg && kis_cgroup_attach(j->cg, pid, &e) < 0) {
		snprintf(why, n, "%s", e ? e->message : "cgroup");
		kis_error_free(e);
		uid = 0; /* the child exits */
	}
	(void)!write(go[1], &uid, sizeof(uid));
	close(go[1]);
	kis_mvm_trace("jail: cgroup attached, uid sent");
	char msg[256];
	ssize_t k = RETRY_EINTR(read(rep[0], msg, sizeof(msg) - 1));
	close(rep[0]);
	if (uid == 0 || k > 0) {
		if (k > 0) {
			msg[k] = '\0';
			snprintf(why, n, "the VMM's jail: %s", msg);
		}
		kill(pid, SIGKILL);
		int st;
		RETRY_EINTR(waitpid(pid, &st, 0));
		return -1;
	}
	kis_log_argv(KIS_LOG_DEBUG, c->argv, "VMM %s started in its jail, pid %d", c->vmm, (int)pid);
	return pid;
}

int kis_mvm_jail_spawn(const struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c,
		       pid_t *pid, struct kis_error **err)
{
	char why[300] = "";
	if (!c->detach) {
		pid_t p = jail_launch(j, c, why, sizeof(why));
		if (p < 0)
			return kis_error_set(err, KIS_E_INTERNAL, 0, "microvm: %s", why);
		*pid = p;
		return 0;
	}
	/* a session: a middle process leaves our session, launches, reports
	 * the VMM's pid (or why not) and exits, so the VMM is init's child.
	 * Inside a create (core/record.h) the VMM is the creator's until the
	 * session is published: the middle stays as its watcher and kills
	 * it if the engine dies first (exec/tether.h), at any point, also
	 * while the jail is still being built. */
	int tether = kis_owner_active() ? kis_owner_tether() : -1;
	if (kis_owner_active() && tether < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot tie the VMM to the engine");
	pid_t engine = getpid();
	int sp[2];
	if (pipe2(sp, O_CLOEXEC) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "pipe");
	pid_t m = fork();
	if (m < 0) {
		close(sp[0]);
		close(sp[1]);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	}
	if (m == 0) {
		/* The store's locks are the engine's, never the watcher's: held
		 * here, an engine killed meanwhile would leave its session
		 * "being created" for as long as the launch below takes. What
		 * it starts is the tether's to end (exec/tether.h). */
		kis_store_locks_drop();
		kis_test_pause("vmm-launch");
		close(sp[0]);
		setsid();
		/* an engine gone meanwhile must not kill us by SIGPIPE before
		 * we are watching: the pidfd taken first tells of its death */
		signal(SIGPIPE, SIG_IGN);
		int pfd = tether >= 0 ? kis_tether_prepare(engine) : -1;
		if (pfd == -2)
			_exit(1); /* the engine is gone already: start nothing */
		pid_t p = jail_launch(j, c, why, sizeof(why));
		int32_t v = p;
		(void)!write(sp[1], &v, sizeof(v));
		if (p < 0)
			(void)!write(sp[1], why, strlen(why));
		if (p < 0 || tether < 0)
			_exit(p < 0);
		close(sp[1]);
		kis_tether_watch(tether, pfd, p);
	}
	close(sp[1]);
	char buf[4 + 300];
	ssize_t k = RETRY_EINTR(read(sp[0], buf, sizeof(buf) - 1));
	close(sp[0]);
	int32_t v = -1;
	if (k >= 4)
		memcpy(&v, buf, 4);
	if (tether < 0 || v <= 0) {
		int st;
		RETRY_EINTR(waitpid(m, &st, 0));
	} else {
		kis_owner_tether_watcher(m); /* reaped when the tether ends */
	}
	if (v <= 0) {
		buf[k > 4 ? k : 4] = '\0';
		return kis_error_set(err, KIS_E_INTERNAL, 0, "microvm: %s",
				     k > 4 ? buf + 4 : "cannot start the VMM");
	}
	*pid = v;
	return 0;
}

/* ---- the cgroup across the engine's lifetime ---- */

int kis_mvm_cgroup_save(const char *dir, const struct kis_cgroup *cg, struct kis_error **err)
{
	if (!cg)
		return 0; /* rootless: no cgroup (kis_mvm_jail_rootless) */
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record the VMM's cgroup");
	return kis_cgroup_save(dfd, "vmm.cgroup", cg, err);
}

/* The VMM's cgroup as kis_mvm_cgroup_save wrote it in the directory dfd,
 * or NULL (the record's format and checks: confine/cgroup.c). */
static struct kis_cgroup *cgroup_load(int dfd)
{
	return kis_cgroup_load(dfd, "vmm.cgroup");
}

int kis_mvm_cgroup_join(const char *dir, pid_t pid, struct kis_error **err)
{
	_cleanup_close_ int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	struct kis_cgroup *cg = cgroup_load(dfd);
	if (!cg)
		return kis_error_set(err, KIS_E_INTERNAL, errno ? errno : ENOENT,
				     "the VMM's cgroup is not recorded");
	int r = kis_cgroup_attach(cg, pid, err);
	kis_cgroup_free(cg);
	return r;
}

void kis_mvm_cgroup_drop(const char *dir)
{
	if (!dir)
		return;
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct kis_cgroup *cg = cgroup_load(dfd);
	if (cg) {
		struct kis_error *e = NULL;
		kis_cgroup_destroy(cg, &e);
		kis_error_free(e);
		unlinkat(dfd, "vmm.cgroup", 0);
	}
}
