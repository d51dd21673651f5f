/* SPDX-License-Identifier: MIT */
/* Copy-on-write guest memory: the snapshot's RAM in one sealed memfd that
 * every VM restored from it maps privately, so they share its pages. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "backends/microvm/vm.h"
#include "store/locks.h"

/* Why a memfd and not the RAM file itself: QEMU 7.2's memory-backend-file
 * opens its mem-path O_RDWR even for share=off (only 8.2's rom=off opens
 * read-only), so a VMM given the shared file could write into the RAM of
 * every later VM. A memfd sealed with F_SEAL_WRITE|SHRINK|GROW|SEAL opens
 * O_RDWR but refuses every write, shared writable mapping, truncation and
 * hole punch (memfd_create(2), "File sealing"); MAP_PRIVATE writes stay
 * allowed, copy-on-write.
 *
 * Who keeps it: the VMs themselves. QEMU keeps its mem-path fd open, so
 * while one VM of the snapshot lives, the next one's engine finds the memfd
 * in that VM's fd table (/proc/<pid>/fd) and reopens it. A hostile VMM
 * could plant a memfd of its own under our name: the engine accepts only
 * the inode it created (recorded as dev:ino beside the snapshot, in a
 * root-only file), and that inode stays alive, its number unreused, while
 * any VM maps it. With no VM alive, a new memfd is filled from the file. */
#define MEMFD_NAME "kis-guest-ram"
#define SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static bool same_inode(int fd, dev_t dev, ino_t ino, off_t size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	return fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino &&
	       st.st_size == size && seals >= 0 && (seals & SEALS) == SEALS;
}

/* A live VMM (uid in our range; rootless, the user's own uid: its jail
 * maps that uid onto itself, jail.c) holding the memfd dev:ino. */
static bool vmm_uid(uid_t u)
{
	if (kis_mvm_jail_rootless())
		return u == geteuid();
	return u >= KIS_MVM_UID_BASE && u - KIS_MVM_UID_BASE < (1u << 22);
}

static int find_live(dev_t dev, ino_t ino, off_t size)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = -1;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		struct stat ps;
		if (fstatat(dirfd(d), e->d_name, &ps, 0) < 0 || !vmm_uid(ps.st_uid))
			continue;
		char fdp[300];
		snprintf(fdp, sizeof(fdp), "%.32s/fd", e->d_name);
		int fdd = openat(dirfd(d), fdp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *fds = fdd >= 0 ? fdopendir(fdd) : NULL;
		if (!fds && fdd >= 0)
			close(fdd);
		struct dirent *f;
		while (fds && found < 0 && (f = readdir(fds))) {
			char link[128];
			ssize_t k = readlinkat(dirfd(fds), f->d_name, link, sizeof(link) - 1);
			if (k <= 0)
				continue;
			link[k] = '\0';
			if (strncmp(link, "/memfd:" MEMFD_NAME, strlen("/memfd:" MEMFD_NAME)))
				continue;
			/* the magic link reopens the VMM's open file: read-only
			 * is enough for the checks and for the jail's bind */
			int fd = openat(dirfd(fds), f->d_name, O_RDONLY | O_CLOEXEC);
			if (fd >= 0 && same_inode(fd, dev, ino, size))
				found = fd;
			else if (fd >= 0)
				close(fd);
		}
		if (fds)
			closedir(fds);
	}
	if (d)
		closedir(d);
	return found;
}

static int pwrite_all(int fd, const char *buf, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t w = RETRY_EINTR(pwrite(fd, buf, n, off));
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		buf += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Write the pages of buf[0..n) (at file offset off) that are not all
 * zeros: a page left out stays a hole of the memfd, which reads as zeros
 * (tmpfs). */
static int write_nonzero(int mfd, const char *buf, size_t n, off_t off)
{
	static const char zero[4096];
	size_t i = 0;
	while (i < n) {
		size_t pg = n - i < sizeof(zero) ? n - i : sizeof(zero);
		if (!memcmp(buf + i, zero, pg)) {
			i += pg;
			continue;
		}
		/* a run of pages with data, written at once */
		size_t j = i + pg;
		while (j < n) {
			size_t q = n - j < sizeof(zero) ? n - j : sizeof(zero);
			if (!memcmp(buf + j, zero, q))
				break;
			j += q;
		}
		if (pwrite_all(mfd, buf + i, j - i, off + (off_t)i) < 0)
			return -1;
		i = j;
	}
	return 0;
}

/* Copy the file's data extents into the memfd mfd (of the file's size),
 * holes and pages of zeros left holes. A booted guest's RAM file holds a
 * third of its data as pages of zeros (pages the guest kernel cleared,
 * init_on_alloc): 55 of 150 MiB for the standard guest, a third less to
 * copy at a restore with no VM alive, and pages the memfd never holds
 * until a guest reads them. Returns 0 or an errno. */
static int copy_into(int mfd, int src, off_t size)
{
	/* plain reads and writes: copy_file_range does not reach a memfd
	 * from another filesystem here */
	static char buf[1u << 20];
	off_t pos = 0;
	while (pos < size) {
		off_t data = lseek(src, pos, SEEK_DATA);
		if (data < 0)
			break; /* ENXIO: no data past pos */
		off_t hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			hole = size;
		while (data < hole) {
			size_t want = (size_t)(hole - data) < sizeof(buf) ? (size_t)(hole - data) :
									  sizeof(buf);
			ssize_t k = RETRY_EINTR(pread(src, buf, want, data));
			int w = k > 0 ? write_nonzero(mfd, buf, (size_t)k, data) : -1;
			if (k <= 0 || w < 0)
				return k < 0 || w < 0 ? errno : EIO;
			data += k;
		}
		pos = hole;
	}
	return 0;
}

static void write_id(const char *idp, int mfd)
{
	struct stat ms;
	char tmp[4200];
	if (fstat(mfd, &ms) < 0 || snprintf(tmp, sizeof(tmp), "%s.%d", idp, (int)getpid()) >=
					   (int)sizeof(tmp))
		return;
	int wf = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (wf < 0)
		return;
	dprintf(wf, "%llu:%llu\n", (unsigned long long)ms.st_dev, (unsigned long long)ms.st_ino);
	close(wf);
	if (rename(tmp, idp) < 0)
		unlink(tmp);
}

/* The filler: a child of the engine that copies the RAM into the memfd,
 * seals it and records it, while QEMU starts (an unsealed memfd is only
 * ever the starting VMM's, which runs no guest code before the restore,
 * and the restore waits for the seals: kis_mvm_snapshot_ram_ready). It
 * holds the lock (the inherited open file description) until it is done,
 * and dies with the engine. */
static _Noreturn void filler_main(pid_t engine, int mfd, int src, off_t size, const char *idp)
{
	/* the snapshot's lock (lf) is meant to stay held; the store's are
	 * the engine's: with them held a killed engine's session would stay
	 * "being created" until the signal below reached us */
	kis_store_locks_drop();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != engine)
		_exit(1);
	if (copy_into(mfd, src, size) != 0 || fcntl(mfd, F_ADD_SEALS, SEALS) < 0)
		_exit(1);
	write_id(idp, mfd);
	_exit(0);
}

int kis_mvm_snapshot_ram(const char *ram_path, pid_t *filler, struct kis_error **err)
{
	*filler = -1;
	_cleanup_free_ char *idp = NULL, *lockp = NULL;
	if (asprintf(&idp, "%s.id", ram_path) < 0 || asprintf(&lockp, "%s.lock", ram_path) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "ram");
	_cleanup_close_ int src = open(ram_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat rs;
	if (src < 0 || fstat(src, &rs) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", ram_path);
	/* one engine at a time finds or makes it: two memfds would split the sharing */
	_cleanup_close_ int lf = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lf < 0 || flock(lf, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock '%s'", lockp);
	char buf[64] = "";
	_cleanup_close_ int idf = open(idp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t k = idf >= 0 ? read(idf, buf, sizeof(buf) - 1) : -1;
	unsigned long long dev = 0, ino = 0;
	if (k > 0) {
		buf[k] = '\0';
		if (sscanf(buf, "%llu:%llu", &dev, &ino) == 2) {
			int fd = find_live((dev_t)dev, (ino_t)ino, rs.st_size);
			if (fd >= 0)
				return fd;
		}
	}
	_cleanup_close_ int mfd = memfd_create(MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "memfd_create");
	if (ftruncate(mfd, rs.st_size) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "memfd size");
	pid_t engine = getpid();
	pid_t p = fork();
	if (p < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot fork");
	if (p == 0)
		filler_main(engine, mfd, src, rs.st_size, idp);
	*filler = p;
	return steal_fd(&mfd);
}

int kis_mvm_snapshot_ram_ready(pid_t *filler, int memfd, struct kis_error **err)
{
	if (*filler <= 0)
		return 0;
	int st = 0;
	pid_t r = RETRY_EINTR(waitpid(*filler, &st, 0));
	*filler = -1;
	int seals = fcntl(memfd, F_GET_SEALS);
	if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || seals < 0 || (seals & SEALS) != SEALS)
		return kis_error_set(err, KIS_E_INTERNAL, r < 0 ? errno : EIO,
				     "cannot load the snapshot's RAM");
	return 0;
}

void kis_mvm_snapshot_ram_abort(pid_t *filler)
{
	if (*filler <= 0)
		return;
	kill(*filler, SIGKILL);
	int st;
	RETRY_EINTR(waitpid(*filler, &st, 0));
	*filler = -1;
}
