/* SPDX-License-Identifier: MIT */
/* limits.disk_bytes on the store's own filesystem: a project quota per
 * workspace, its usage read back for the disk_limit verdict.
 *
 * Theory: a project quota (quotactl(2) with PRJQUOTA) counts every block
 * written under a directory tree whose inodes carry one project id; the
 * id is inherited by what is created below a directory marked
 * FS_XFLAG_PROJINHERIT (ioctl_xfs_fsgetxattr(2)). Each workspace's
 * writable tree (the overlay's upper, or the tree itself for reflink and
 * copy clones) gets its own id, derived from the workspace id, and a hard
 * block limit of disk_bytes: a write past it fails with EDQUOT.
 * quotactl_fd(2) (Linux 5.14) addresses the filesystem by a descriptor,
 * so no block device is looked up. XFS enforces project limits on every
 * writer; ext4 (and the generic quota code) lets a task with
 * CAP_SYS_RESOURCE past a hard limit (ignore_hardlimit in
 * fs/quota/dquot.c), which the callers must weigh for a command that
 * keeps that capability. */
#include "core/util.h"

#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "core/io.h"
#include "kis/id.h"
#include "kis/store.h"
#include "store/store_internal.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

static int quotactl_fd_(int fd, unsigned cmd, int id, void *addr)
{
	return (int)syscall(SYS_quotactl_fd, fd, cmd, id, addr);
}

/* Project ids from 2^24 up: clear of the small ids an administrator
 * hands out by hand (projid(5)); FNV-1a of the workspace id. */
static uint32_t project_of(const char *ws_id)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)ws_id; *p; p++)
		h = (h ^ *p) * 16777619u;
	return (1u << 24) + h % ((1u << 31) - (1u << 24));
}

int store_quota_probe(int fd, struct store_quota_info *qi)
{
	memset(qi, 0, sizeof(*qi));
	struct statfs sf;
	memset(&sf, 0, sizeof(sf));
	if (fstatfs(fd, &sf) == 0)
		qi->xfs = sf.f_type == XFS_SUPER_MAGIC;
	struct fs_quota_stat qs;
	memset(&qs, 0, sizeof(qs));
	if (quotactl_fd_(fd, QCMD(Q_XGETQSTAT, PRJQUOTA), 0, &qs) < 0) {
		/* ENOSYS: no quota support on this filesystem (no s_qcop);
		 * ESRCH: quotas supported, project quotas not turned on */
		snprintf(qi->why, sizeof(qi->why), "the store's filesystem (%s) keeps no project "
			 "quotas (%s)", qi->xfs ? "xfs" : sf.f_type == EXT4_SUPER_MAGIC ? "ext4" :
			 "not xfs or ext4", errno == ESRCH ? "not mounted with prjquota" :
			 strerror(errno));
		return 0;
	}
	if (!(qs.qs_flags & FS_QUOTA_PDQ_ENFD)) {
		snprintf(qi->why, sizeof(qi->why), "the store's filesystem accounts project "
			 "quotas but does not enforce them");
		return 0;
	}
	qi->enforced = true;
	return 1;
}

/* Give inode fd the project id (and, to a directory, inheritance). */
static int set_project(int fd, uint32_t proj, bool dir)
{
	struct fsxattr fx;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0)
		return -1;
	if (fx.fsx_projid == proj && (!dir || (fx.fsx_xflags & FS_XFLAG_PROJINHERIT)))
		return 0;
	fx.fsx_projid = proj;
	if (dir)
		fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fx);
}

/* Everything already in the tree joins the project, so it counts; links
 * are never followed (O_NOFOLLOW), and only directories and regular files
 * can carry the attribute through an open descriptor. */
static int mark_tree(int dfd, uint32_t proj, dev_t dev, int depth)
{
	if (set_project(dfd, proj, true) < 0)
		return -1;
	if (depth > 512) {
		errno = ELOOP;
		return -1;
	}
	DIR *d = kis_opendir_dup(dfd);
	if (!d)
		return -1;
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_type != DT_DIR && e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
			continue;
		int fd = openat(dirfd(d), e->d_name,
				O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0) {
			if (errno == ELOOP || errno == ENXIO || errno == ENOENT)
				continue; /* a link, a socket, gone meanwhile */
			r = -1;
			break;
		}
		struct stat st;
		if (fstat(fd, &st) < 0 || st.st_dev != dev)
			; /* a mount below (the overlay at merged/): not ours to mark */
		else if (S_ISDIR(st.st_mode))
			r = mark_tree(fd, proj, dev, depth + 1);
		else if (S_ISREG(st.st_mode))
			r = set_project(fd, proj, false);
		close(fd);
	}
	closedir(d);
	return r;
}

int store_quota_set(int fd, const char *ws_id, uint64_t bytes, struct kis_error **err)
{
	uint32_t proj = project_of(ws_id);
	struct stat st;
	if (fstat(fd, &st) < 0 || mark_tree(fd, proj, st.st_dev, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot give workspace '%s' its project quota id", ws_id);
	struct if_dqblk q;
	memset(&q, 0, sizeof(q));
	/* limits in quota blocks of QIF_DQBLKSIZE (1 KiB), rounded up */
	q.dqb_bhardlimit = (bytes + QIF_DQBLKSIZE - 1) / QIF_DQBLKSIZE;
	q.dqb_bsoftlimit = 0;
	q.dqb_valid = QIF_BLIMITS;
	if (quotactl_fd_(fd, QCMD(Q_SETQUOTA, PRJQUOTA), (int)proj, &q) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot set the disk quota of workspace '%s'", ws_id);
	return 0;
}

int store_quota_get(int fd, const char *ws_id, uint64_t *used, uint64_t *limit)
{
	struct if_dqblk q;
	memset(&q, 0, sizeof(q));
	if (quotactl_fd_(fd, QCMD(Q_GETQUOTA, PRJQUOTA), (int)project_of(ws_id), &q) < 0)
		return -1;
	*used = q.dqb_curspace;
	*limit = q.dqb_bhardlimit * QIF_DQBLKSIZE;
	return 0;
}

int kis_store_disk_quota(struct kis_store *s, bool *binds_root, char *why, size_t n)
{
	struct store_quota_info qi;
	int r = store_quota_probe(s->ws_fd, &qi);
	if (binds_root)
		*binds_root = qi.xfs;
	if (why && n)
		snprintf(why, n, "%s", qi.why);
	if (r == 1)
		return 1;
	/* no project quotas: a disk image of the limit's size, which binds
	 * every writer (no quota for CAP_SYS_RESOURCE to pass) */
	char w2[200];
	r = store_disk_probe(w2, sizeof(w2));
	if (r == 1 && binds_root)
		*binds_root = true;
	if (r == 0 && why && n)
		snprintf(why, n, "%s", w2);
	return r;
}

/* The whole workspace directory joins the project: overlayfs prepares a
 * copy-up in work/ and renames it into upper/, and both XFS and ext4
 * refuse a rename into a PROJINHERIT directory of another project (EXDEV). */
int kis_workspace_disk_limit(struct kis_store *s, const char *id, uint64_t bytes, bool asked,
			     struct kis_error **err)
{
	TRY(kis_id_validate(id, "workspace id", err));
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0)
		return kis_error_set(err, KIS_E_NOT_FOUND, errno, "no workspace '%s'", id);
	struct store_quota_info qi;
	if (store_quota_probe(d, &qi) == 1) {
		TRY(store_quota_set(d, id, bytes, err));
		return 1;
	}
	char why[200];
	if (store_disk_probe(why, sizeof(why)) <= 0)
		return 0;
	int r = store_disk_limit(s, d, id, bytes, asked, err);
	if (r == 2) /* a new image: the overlay moves its upper layer there */
		r = kis_workspace_refresh(s, id, err) < 0 ? -1 : 1;
	return r;
}

int kis_workspace_disk_usage(struct kis_store *s, const char *id, uint64_t *used, uint64_t *limit)
{
	if (kis_id_validate(id, "workspace id", NULL) < 0)
		return -1;
	_cleanup_close_ int d = store_opendir(s->ws_fd, id);
	if (d < 0)
		return -1;
	if (store_disk_usage(d, used, limit) == 0)
		return 0;
	return store_quota_get(d, id, used, limit);
}

void kis_store_set_clone_disk(struct kis_store *s, uint64_t bytes, bool scratch)
{
	s->clone_disk_scratch = scratch;
	struct store_quota_info qi;
	char why[200];
	/* only where images are what binds: project quotas need none */
	s->clone_disk_bytes = bytes && store_quota_probe(s->ws_fd, &qi) != 1 &&
				      store_disk_probe(why, sizeof(why)) == 1 ? bytes : 0;
}

const char *kis_store_disk_how(struct kis_store *s)
{
	struct store_quota_info qi;
	char why[200];
	if (store_quota_probe(s->ws_fd, &qi) == 1)
		return "quota";
	return store_disk_probe(why, sizeof(why)) == 1 ? "image" : NULL;
}
