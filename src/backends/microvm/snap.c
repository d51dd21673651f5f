/* SPDX-License-Identifier: MIT */
/* The microvm's accelerator verdict (does KVM run this guest, measured by a
 * boot) and its snapshots (a booted guest saved by QEMU migration). */
#include "core/util.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "backends/microvm/vm.h"
#include "core/tree.h"

static void stop_vm(pid_t pid, int qmp)
{
	if (qmp >= 0)
		kis_mvm_qmp_cmd(qmp, "{\"execute\":\"quit\"}", -1, NULL, 2000);
	for (int i = 0; i < 200; i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	int st;
	RETRY_EINTR(waitpid(pid, &st, 0));
}

/* A VM of the standard device set in the private directory tdir (dfd),
 * with three unformatted disks of the standard size (the guest does not
 * touch them before cfg). */
static int boot_probe_vm(const struct kis_mvm_guest *g, const char *accel, unsigned mem_mib,
			 unsigned vcpus, const char *tdir, int dfd, const char *mem_file, pid_t *pid,
			 struct kis_error **err)
{
	char disk[3][4096];
	for (int i = 0; i < 3; i++) {
		snprintf(disk[i], sizeof(disk[i]), "%s/disk%d.img", tdir, i);
		_cleanup_close_ int df = open(disk[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (df < 0 || ftruncate(df, (off_t)KIS_MVM_DEV_BYTES) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", disk[i]);
	}
	struct kis_mvm_cfg c = {.accel = accel, .mem_mib = mem_mib, .vcpus = vcpus,
				.disk = {disk[0], disk[1], disk[2]}, .snap_fd = -1, .log_fd = -1, .net_fd = -1,
				.vm_dir = tdir, .mem_file = mem_file, .mem_fd = -1, .mem_share = true,
				.ignore_shared = mem_file != NULL};
	int fds[2 + KIS_MVM_PORTS];
	for (int i = 0; i < 2 + KIS_MVM_PORTS; i++)
		fds[i] = -1;
	int r = -1;
	fds[0] = kis_mvm_listen_at(dfd, "ctl.sock", err);
	fds[1] = fds[0] < 0 ? -1 : kis_mvm_listen_at(dfd, "qmp.sock", err);
	bool ok = fds[1] >= 0;
	for (int i = 0; ok && i < KIS_MVM_PORTS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "agent-%d.sock", i);
		ok = (fds[2 + i] = kis_mvm_listen_at(dfd, name, err)) >= 0;
	}
	if (ok) {
		c.ctl_fd = fds[0];
		c.qmp_fd = fds[1];
		for (int i = 0; i < KIS_MVM_PORTS; i++)
			c.agent_fd[i] = fds[2 + i];
		_cleanup_close_ int log = openat(dfd, "qemu.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
						 0600);
		c.log_fd = log;
		r = kis_mvm_spawn(g, &c, pid, err);
	}
	for (int i = 0; i < 2 + KIS_MVM_PORTS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

static char *cache_path(const struct kis_mvm_guest *g, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", g->dir, name) < 0)
		return NULL;
	return p;
}

const char *kis_mvm_accel_cached(const char *dir)
{
	/* without a usable /dev/kvm the answer needs no boot */
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return "tcg";
	close(fd);
	_cleanup_free_ char *path = NULL;
	if (!dir || asprintf(&path, "%s/accel", dir) < 0)
		return NULL;
	char buf[8] = "";
	_cleanup_close_ int rf = open(path, O_RDONLY | O_CLOEXEC);
	if (rf >= 0 && read(rf, buf, 3) == 3)
		return !strncmp(buf, "kvm", 3) ? "kvm" : !strncmp(buf, "tcg", 3) ? "tcg" : NULL;
	return NULL; /* unknown: kis_mvm_accel measures it */
}

int kis_mvm_accel(const struct kis_mvm_guest *g, char out[8], struct kis_error **err)
{
	const char *quick = kis_mvm_accel_cached(g->dir);
	if (quick) {
		snprintf(out, 8, "%s", quick);
		return 0;
	}
	_cleanup_free_ char *path = cache_path(g, "accel");
	if (!path)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "accel");
	char buf[16] = "";
	_cleanup_close_ int rf = open(path, O_RDONLY | O_CLOEXEC);
	if (rf >= 0 && read(rf, buf, sizeof(buf) - 1) > 0 && (!strncmp(buf, "kvm", 3) || !strncmp(buf, "tcg", 3))) {
		snprintf(out, 8, "%.3s", buf);
		return 0;
	}
	/* /dev/kvm opens; does it run a standard guest? On PVM-only hosts the
	 * guest hangs: boot under KVM and wait for the agent's pong a few
	 * seconds (a KVM boot answers well under one second). */
	_cleanup_free_ char *tdir = NULL;
	TRY(kis_mvm_tmpdir(&tdir, err));
	int dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pid_t pid = 0;
	const char *verdict = "tcg";
	if (dfd >= 0 && boot_probe_vm(g, "kvm", 128, 1, tdir, dfd, NULL, &pid, err) == 0) {
		int c = kis_mvm_ctl_wait(dfd, 4000, pid);
		if (c >= 0) {
			verdict = "kvm";
			close(c);
		}
		stop_vm(pid, -1);
		kis_mvm_cgroup_drop(tdir);
	} else {
		kis_error_free(*err);
		*err = NULL;
	}
	if (dfd >= 0)
		close(dfd);
	kis_tree_remove_path(tdir);
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.%d", path, (int)getpid()) >= 0) {
		int wf = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (wf >= 0) {
			(void)!write(wf, verdict, 3);
			close(wf);
			rename(tmp, path);
		}
	}
	snprintf(out, 8, "%s", verdict);
	return 0;
}

/* A snapshot is two files: the device state (QEMU's migration stream,
 * without RAM: x-ignore-shared skips a shared memory backend) and the
 * guest's RAM itself, which the booted VM wrote through its file-backed
 * memory (share=on). The RAM file is made in a private 0700 directory of
 * the cache (so rename publishes it on the same filesystem), writable by
 * the VM's uid only while it is made there. */
static int make_snapshot(const struct kis_mvm_guest *g, const char *accel, unsigned mem_mib,
			 unsigned vcpus, const char *final, const char *final_ram,
			 struct kis_error **err)
{
	_cleanup_free_ char *tdir = NULL;
	TRY(kis_mvm_tmpdir(&tdir, err));
	_cleanup_close_ int dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *tmp = NULL, *mkdir_p = NULL, *ram = NULL;
	pid_t pid = 0;
	int qmp = -1, r = -1, sf = -1;
	if (dfd < 0 || asprintf(&tmp, "%s.tmp.%d", final, (int)getpid()) < 0 ||
	    asprintf(&mkdir_p, "%s/.make-%d", g->dir, (int)getpid()) < 0 ||
	    asprintf(&ram, "%s/ram", mkdir_p) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "snapshot");
		goto out;
	}
	kis_tree_remove_path(mkdir_p);
	if (mkdir(mkdir_p, 0700) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", mkdir_p);
		goto out;
	}
	{
		_cleanup_close_ int rf = open(ram, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		/* 0666 inside the 0700 directory: only the jail's bind mount
		 * reaches it, and the VM's uid is known only once it runs */
		if (rf < 0 || fchmod(rf, 0666) < 0 || ftruncate(rf, (off_t)mem_mib << 20) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", ram);
			goto out;
		}
	}
	if (boot_probe_vm(g, accel, mem_mib, vcpus, tdir, dfd, ram, &pid, err) < 0)
		goto out;
	/* the agent's ready point: init done, ports open, waiting for cfg */
	int c = kis_mvm_ctl_wait(dfd, 60000, pid);
	if (c < 0) {
		kis_error_set(err, KIS_E_INTERNAL, 0, "the microvm guest did not boot (%s)", accel);
		goto out;
	}
	/* the workspace's drivers loaded before saving: every restore has them */
	char ready[32];
	if (kis_mvm_ctl(c, "prepare", ready, sizeof(ready), 30000) < 0 || strcmp(ready, "ok")) {
		close(c);
		kis_error_set(err, KIS_E_INTERNAL, 0, "the microvm guest did not prepare its drivers");
		goto out;
	}
	close(c); /* saved with the control port closed, as every restore finds it */
	qmp = kis_mvm_qmp_open(dfd, "qmp.sock", 5000);
	sf = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (qmp < 0 || sf < 0 || kis_mvm_ignore_shared(qmp) < 0 ||
	    kis_mvm_qmp_cmd(qmp, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}", sf,
			    NULL, 3000) < 0 ||
	    kis_mvm_qmp_cmd(qmp, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:snap\"}}", -1,
			    NULL, 3000) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot start saving the microvm snapshot");
		goto out;
	}
	for (int i = 0; i < 6000; i++) {
		char *rep = NULL;
		if (kis_mvm_qmp_cmd(qmp, "{\"execute\":\"query-migrate\"}", -1, &rep, 3000) < 0)
			break;
		bool done = strstr(rep, "\"completed\"") != NULL;
		bool failed = strstr(rep, "\"failed\"") != NULL || strstr(rep, "\"cancelled\"") != NULL;
		free(rep);
		if (done) {
			r = 0;
			break;
		}
		if (failed)
			break;
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (r < 0) {
		kis_error_set(err, KIS_E_INTERNAL, 0, "saving the microvm snapshot failed");
		goto out;
	}
	/* the VM ends before its RAM is published: nothing writes it after */
	stop_vm(pid, qmp);
	pid = 0;
	kis_mvm_cgroup_drop(tdir);
	{
		_cleanup_close_ int rf = open(ram, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (rf < 0 || fchmod(rf, 0600) < 0 || fsync(rf) < 0 || fsync(sf) < 0 ||
		    rename(ram, final_ram) < 0 || rename(tmp, final) < 0) {
			r = kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish the snapshot");
			goto out;
		}
	}
out:
	if (sf >= 0)
		close(sf);
	if (pid > 0)
		stop_vm(pid, qmp);
	kis_mvm_cgroup_drop(tdir);
	if (mkdir_p)
		kis_tree_remove_path(mkdir_p);
	if (qmp >= 0)
		close(qmp);
	if (tmp && r < 0)
		unlink(tmp);
	kis_tree_remove_path(tdir);
	return r;
}

static void snap_names(const struct kis_mvm_guest *g, const char *accel, unsigned mem_mib,
		       unsigned vcpus, char *name, char *ram, size_t n)
{
	snprintf(name, n, "snap-%s-%s-%um-%uc-3d.vmstate", g->stamp, accel, mem_mib, vcpus);
	snprintf(ram, n, "snap-%s-%s-%um-%uc-3d.ram", g->stamp, accel, mem_mib, vcpus);
}

char *kis_mvm_snapshot_ram_path(const struct kis_mvm_guest *g, const char *accel,
				unsigned mem_mib, unsigned vcpus)
{
	char name[256], rname[256];
	snap_names(g, accel, mem_mib, vcpus, name, rname, sizeof(name));
	return cache_path(g, rname);
}

int kis_mvm_snapshot(const struct kis_mvm_guest *g, const char *accel, unsigned mem_mib,
		     unsigned vcpus, struct kis_error **err)
{
	char name[256], rname[256];
	snap_names(g, accel, mem_mib, vcpus, name, rname, sizeof(name));
	_cleanup_free_ char *final = cache_path(g, name);
	_cleanup_free_ char *final_ram = cache_path(g, rname);
	_cleanup_free_ char *lock = cache_path(g, "snap.lock");
	if (!final || !lock || !final_ram)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "snapshot");
	int fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	/* one maker at a time; the others wait and then use its file */
	_cleanup_close_ int lf = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lf < 0 || flock(lf, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock '%s'", lock);
	fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	kis_mvm_progress(g, "booting the microvm guest once for its snapshot (once per guest and "
			    "VM size; about 30 s under TCG)");
	TRY(make_snapshot(g, accel, mem_mib, vcpus, final, final_ram, err));
	fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", final);
	return fd;
}
