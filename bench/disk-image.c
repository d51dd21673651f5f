/* SPDX-License-Identifier: MIT */
/* Where a workspace's disk image costs a run its time (issue 41): the life
 * of one image as src/store/disk.c lives it (sparse copy of a template,
 * LOOP_CONFIGURE with autoclear, ext4 mount, upper/ and work/, an overlay
 * mount and unmount, the ext4 unmount, the unlink), each phase timed, N
 * times; medians printed beside an overlay on DIR's own filesystem with no
 * image. Templates: "spread" (mke2fs as the store made them before: backup
 * superblocks and metadata over the image) and "packed" (as now), the
 * packed one also mounted barrier=0 (a run's scratch clone). Root only.
 * Usage: cc -O2 -o build/bench/disk-image bench/disk-image.c
 *        build/bench/disk-image DIR [N]     (DIR on the store's filesystem) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { COPY, LOOP, MOUNT, DIRS, OVL_MOUNT, OVL_UMOUNT, EXT4_UMOUNT, UNLINK, NPHASE };
static const char *const phase[NPHASE] = {"copy", "loop", "mount", "mkdirs",
					  "ovl_mount", "ovl_umount", "ext4_umount", "unlink"};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "disk-image: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void mkfs(const char *img, int packed)
{
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 8320ll << 20) < 0)
		die(img);
	close(fd);
	pid_t p = fork();
	if (p == 0) {
		if (packed)
			execl("/usr/sbin/mke2fs", "mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m",
			      "0", "-G", "1024", "-O", "^resize_inode,sparse_super2", "-E",
			      "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0,num_backup_sb=0,"
			      "packed_meta_blocks=1",
			      img, (char *)NULL);
		else
			execl("/usr/sbin/mke2fs", "mke2fs", "-q", "-F", "-t", "ext4", "-m", "0", "-O",
			      "^resize_inode", "-E",
			      "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0", img,
			      (char *)NULL);
		_exit(127);
	}
	int st;
	if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("mke2fs");
}

/* only the data extents (SEEK_DATA/SEEK_HOLE), as disk.c's copy_sparse */
static void copy_sparse(const char *from, const char *to)
{
	int s = open(from, O_RDONLY | O_CLOEXEC), d = open(to, O_RDWR | O_CREAT | O_TRUNC, 0600);
	struct stat st;
	if (s < 0 || d < 0 || fstat(s, &st) < 0)
		die("copy");
	for (off_t pos = 0; pos < st.st_size;) {
		off_t a = lseek(s, pos, SEEK_DATA);
		if (a < 0)
			break;
		off_t h = lseek(s, a, SEEK_HOLE);
		for (loff_t in = a, out = a; in < h;)
			if (copy_file_range(s, &in, d, &out, (size_t)(h - in), 0) <= 0)
				die("copy_file_range");
		pos = h;
	}
	if (ftruncate(d, st.st_size) < 0)
		die("ftruncate");
	close(s);
	close(d);
}

/* one configuration, n lives; tmpl NULL: an overlay on dir's filesystem */
static void measure(const char *label, const char *dir, const char *tmpl, const char *opts, int n)
{
	double *v[NPHASE];
	for (int k = 0; k < NPHASE; k++)
		if (!(v[k] = calloc((size_t)n, sizeof(double))))
			die("calloc");
	char w[4096], disk[4200], img[4200], merged[4200], lower[4200], up[4300], wk[4300];
	snprintf(w, sizeof(w), "%s/w", dir);
	snprintf(disk, sizeof(disk), "%s/disk", w);
	snprintf(img, sizeof(img), "%s/disk.img", w);
	snprintf(merged, sizeof(merged), "%s/merged", w);
	snprintf(lower, sizeof(lower), "%s/lower", dir);
	snprintf(up, sizeof(up), "%s/upper", disk);
	snprintf(wk, sizeof(wk), "%s/work", disk);
	mkdir(lower, 0755);
	for (int i = 0; i < n; i++) {
		if (mkdir(w, 0755) < 0 || mkdir(disk, 0755) < 0 || mkdir(merged, 0755) < 0)
			die(w);
		double t[NPHASE + 1];
		t[COPY] = now_ms();
		if (tmpl) {
			copy_sparse(tmpl, img);
			t[LOOP] = now_ms();
			int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
			int f = open(img, O_RDWR | O_CLOEXEC), l = -1;
			char src[64];
			/* another process may take the device between GET_FREE
			 * and CONFIGURE (EBUSY): ask again, as disk.c does */
			for (int tries = 0; tries < 16 && l < 0; tries++) {
				int nr = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
				char dev[32];
				snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
				l = open(dev, O_RDWR | O_CLOEXEC);
				struct loop_config lc;
				memset(&lc, 0, sizeof(lc));
				lc.fd = (unsigned)f;
				lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
				if (l >= 0 && f >= 0 && ioctl(l, LOOP_CONFIGURE, &lc) < 0) {
					if (errno != EBUSY)
						die("LOOP_CONFIGURE");
					close(l);
					l = -1;
				}
			}
			if (l < 0 || f < 0)
				die("no loop device");
			close(f);
			close(ctl);
			t[MOUNT] = now_ms();
			snprintf(src, sizeof(src), "/proc/self/fd/%d", l);
			if (mount(src, disk, "ext4", MS_NOSUID | MS_NODEV, opts) < 0)
				die("mount ext4");
			close(l); /* the mount holds the device now */
		} else {
			t[LOOP] = t[MOUNT] = now_ms();
		}
		t[DIRS] = now_ms();
		if (mkdir(up, 0755) < 0 || mkdir(wk, 0755) < 0)
			die(up);
		t[OVL_MOUNT] = now_ms();
		char o[16384];
		snprintf(o, sizeof(o), "lowerdir=%s,upperdir=%s,workdir=%s%s", lower, up, wk,
			 tmpl ? ",xino=on" : "");
		if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, o) < 0)
			die("mount overlay");
		t[OVL_UMOUNT] = now_ms();
		if (umount(merged) < 0)
			die("umount overlay");
		t[EXT4_UMOUNT] = now_ms();
		if (tmpl && umount(disk) < 0)
			die("umount ext4");
		t[UNLINK] = now_ms();
		if (tmpl && unlink(img) < 0)
			die("unlink");
		char ww[4400];
		snprintf(ww, sizeof(ww), "%s/work", wk);
		rmdir(ww);
		rmdir(wk);
		rmdir(up);
		t[NPHASE] = now_ms();
		for (int k = 0; k < NPHASE; k++)
			v[k][i] = t[k + 1] - t[k];
		rmdir(disk);
		rmdir(merged);
		rmdir(w);
	}
	double total = 0;
	printf("%-28s", label);
	for (int k = 0; k < NPHASE; k++) {
		qsort(v[k], (size_t)n, sizeof(double), cmp_double);
		printf(" %s=%.1f", phase[k], v[k][n / 2]);
		total += v[k][n / 2];
		free(v[k]);
	}
	printf("  total=%.1f ms\n", total);
}

int main(int argc, char **argv)
{
	if (argc < 2 || geteuid() != 0) {
		fprintf(stderr, "usage (root): disk-image DIR [N]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 15;
	if (n < 1 || n > 10000)
		n = 15;
	char spread[4096], packed[4096];
	snprintf(spread, sizeof(spread), "%s/spread.img", argv[1]);
	snprintf(packed, sizeof(packed), "%s/packed.img", argv[1]);
	mkfs(spread, 0);
	mkfs(packed, 1);
	printf("medians of %d lives of an 8 GiB image (ms)\n", n);
	measure("no image (overlay on DIR)", argv[1], NULL, NULL, n);
	measure("spread template", argv[1], spread, "errors=remount-ro", n);
	measure("packed template", argv[1], packed, "errors=remount-ro", n);
	measure("packed, barrier=0", argv[1], packed, "errors=remount-ro,barrier=0", n);
	unlink(spread);
	unlink(packed);
	char lower[4200];
	snprintf(lower, sizeof(lower), "%s/lower", argv[1]);
	rmdir(lower);
	return 0;
}
