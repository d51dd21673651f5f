/* SPDX-License-Identifier: MIT */
/* The microvm's workspace disk: the host workspace as an ext4 image
 * (mkfs.ext4 -d) and, after the VM stopped, the image's tree mirrored back
 * into the workspace (debugfs rdump, then copy what changed, delete what went). */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "backends/microvm_vm.h"
#include "exec/io.h"

static int run_tool_ok(char *const argv[], int max_ok, struct kis_error **err)
{
	pid_t p = fork();
	if (p < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	if (p == 0) {
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	if (RETRY_EINTR(waitpid(p, &st, 0)) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > max_ok)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "'%s' failed", argv[0]);
	return 0;
}

static int run_tool(char *const argv[], struct kis_error **err)
{
	return run_tool_ok(argv, 0, err);
}

static const char *tool(const char *name)
{
	static char buf[2][64];
	static int k;
	const char *dirs[] = {"/usr/sbin", "/sbin", "/usr/bin"};
	for (size_t i = 0; i < 3; i++) {
		char *b = buf[k];
		snprintf(b, sizeof(buf[0]), "%s/%s", dirs[i], name);
		if (access(b, X_OK) == 0) {
			k ^= 1;
			return b;
		}
	}
	return NULL;
}

static uint64_t tree_bytes(int dfd, int depth)
{
	if (depth > 64)
		return 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	uint64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sum += (uint64_t)st.st_size + 4096;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (sub >= 0)
				sum += tree_bytes(sub, depth + 1);
		}
	}
	closedir(d);
	return sum;
}

uint64_t kis_mvm_disk_size_for(const char *src_dir)
{
	uint64_t used = 0;
	if (src_dir) {
		int fd = open(src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			used = tree_bytes(fd, 0);
	}
	/* room for the command to write: twice the content and 512 MiB, in
	 * power-of-two classes so few snapshots serve every workspace (the
	 * disk's size is part of the device set a snapshot is restored with) */
	uint64_t want = used * 2 + (512ull << 20), sz = KIS_MVM_DISK_MIN;
	while (sz < want)
		sz <<= 1;
	return sz;
}

int kis_mvm_disk_make(const char *img, const char *src_dir, uint64_t disk_bytes,
		      struct kis_error **err)
{
	const char *mkfs = tool("mkfs.ext4");
	if (!mkfs)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "microvm: mkfs.ext4 is missing (Debian: e2fsprogs)");
	_cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)disk_bytes) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", img);
	/* lazy init: the image stays sparse and mkfs takes milliseconds */
	char *argv[] = {(char *)mkfs, "-q", "-F", "-t", "ext4", "-E",
			"lazy_itable_init=1,lazy_journal_init=1", "-L", "kis-ws",
			src_dir ? "-d" : "-q", (char *)(src_dir ? src_dir : "-q"), (char *)img, NULL};
	return run_tool(argv, err);
}

/* ---- mirror: make dst what src is ---- */

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st)
{
	_cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return -1;
	char tmp[300];
	snprintf(tmp, sizeof(tmp), ".kis-sync.%d", (int)getpid());
	unlinkat(ddir, tmp, 0);
	_cleanup_close_ int out = openat(ddir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
					 0600);
	if (out < 0)
		return -1;
	char buf[65536];
	ssize_t k;
	while ((k = RETRY_EINTR(read(in, buf, sizeof(buf)))) > 0)
		if (write(out, buf, (size_t)k) != k)
			return -1;
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (k < 0 || fchmod(out, st->st_mode & 07777) < 0 || futimens(out, ts) < 0 ||
	    renameat(ddir, tmp, ddir, name) < 0) {
		unlinkat(ddir, tmp, 0);
		return -1;
	}
	return 0;
}

static int mirror(int sdir, int ddir, int depth)
{
	if (depth > 256)
		return -1;
	int r = 0;
	_cleanup_close_ int sfd = dup(sdir);
	DIR *d = sfd >= 0 ? fdopendir(sfd) : NULL;
	if (!d)
		return -1;
	sfd = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || (depth == 0 && !strcmp(n, "lost+found")))
			continue;
		struct stat s, t;
		if (fstatat(sdir, n, &s, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool have = fstatat(ddir, n, &t, AT_SYMLINK_NOFOLLOW) == 0;
		if (have && (s.st_mode & S_IFMT) != (t.st_mode & S_IFMT)) {
			kis_remove_tree_at(ddir, n);
			have = false;
		}
		if (S_ISDIR(s.st_mode)) {
			if (!have && mkdirat(ddir, n, 0700) < 0) {
				r = -1;
				continue;
			}
			int a = openat(sdir, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			int b = openat(ddir, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (a < 0 || b < 0 || mirror(a, b, depth + 1) < 0)
				r = -1;
			if (b >= 0)
				(void)!fchmod(b, s.st_mode & 07777);
			if (a >= 0)
				close(a);
			if (b >= 0)
				close(b);
		} else if (S_ISREG(s.st_mode)) {
			if (have && t.st_size == s.st_size && t.st_mtim.tv_sec == s.st_mtim.tv_sec &&
			    t.st_mtim.tv_nsec == s.st_mtim.tv_nsec) {
				if ((t.st_mode & 07777) != (s.st_mode & 07777))
					(void)!fchmodat(ddir, n, s.st_mode & 07777, 0);
				continue;
			}
			if (copy_file(sdir, ddir, n, &s) < 0)
				r = -1;
		} else if (S_ISLNK(s.st_mode)) {
			char a[4096], b[4096];
			ssize_t la = readlinkat(sdir, n, a, sizeof(a) - 1);
			ssize_t lb = have ? readlinkat(ddir, n, b, sizeof(b) - 1) : -1;
			if (la < 0)
				continue;
			a[la] = '\0';
			if (lb == la && !memcmp(a, b, (size_t)la))
				continue;
			if (have)
				unlinkat(ddir, n, 0);
			if (symlinkat(a, ddir, n) < 0)
				r = -1;
		}
		/* devices, fifos and sockets made in the guest stay there */
	}
	closedir(d);
	/* what the guest removed */
	int dfd2 = dup(ddir);
	DIR *dd = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
	if (!dd) {
		if (dfd2 >= 0)
			close(dfd2);
		return -1;
	}
	while ((e = readdir(dd))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || (depth == 0 && !strcmp(n, "lost+found")))
			continue;
		struct stat s;
		if (fstatat(sdir, n, &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			kis_remove_tree_at(ddir, n);
	}
	closedir(dd);
	return r;
}

int kis_mvm_disk_sync_back(const char *img, const char *dst_dir, struct kis_error **err)
{
	const char *debugfs = tool("debugfs");
	if (!debugfs)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "debugfs is missing (Debian: e2fsprogs)");
	/* debugfs reads the filesystem as it is on disk, without the journal:
	 * what the guest committed to the journal but had not yet written
	 * home (a VM stopped without unmounting) is replayed first. e2fsck
	 * exits 1 when it changed something, which here is the point. */
	const char *fsck = tool("e2fsck");
	if (!fsck)
		return kis_error_set(err, KIS_E_INTERNAL, 0, "e2fsck is missing (Debian: e2fsprogs)");
	char *fargv[] = {(char *)fsck, "-y", "-E", "journal_only", (char *)img, NULL};
	TRY(run_tool_ok(fargv, 1, err));
	_cleanup_free_ char *tdir = NULL;
	TRY(kis_mvm_tmpdir(&tdir, err));
	_cleanup_free_ char *cmd = NULL;
	int r;
	if (asprintf(&cmd, "rdump / %s", tdir) < 0) {
		r = kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "sync");
	} else {
		/* -R takes one debugfs request (not a shell line); the path is ours */
		char *argv[] = {(char *)debugfs, "-R", cmd, (char *)img, NULL};
		r = run_tool(argv, err);
	}
	if (r == 0) {
		_cleanup_close_ int s = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_cleanup_close_ int d = open(dst_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s < 0 || d < 0 || mirror(s, d, 0) < 0)
			r = kis_error_set(err, KIS_E_INTERNAL, errno,
					  "cannot copy the guest's workspace back to '%s'", dst_dir);
	}
	kis_mvm_rmtree(tdir);
	return r;
}
