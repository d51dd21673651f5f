/* SPDX-License-Identifier: MIT */
/* The microvm's machinery: the guest cache and its initramfs (written here
 * as cpio newc), QEMU's argv and start, the control port, QMP. */
#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "backends/microvm/vm.h"
#include "core/record.h"
#include "core/log.h"
#include "backends/common.h"
#include "kis/store.h"
#include "core/io.h"
#include "confine/confine.h"
#include "exec/tool.h"
#include "core/test_hook.h"

/* QEMU where Debian and a local build put it; no variable names another
 * (house rule 17: what ships runs no program an environment names; the
 * tests' stand-in VMM is the test build's KIS_MICROVM_VMM). */
const char *kis_mvm_qemu_path(void)
{
	static const char *const cands[] = {"/usr/bin/qemu-system-x86_64",
					    "/usr/local/bin/qemu-system-x86_64"};
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

void kis_mvm_progress(const struct kis_mvm_guest *g, const char *what)
{
	if (g && g->ctx && g->ctx->progress)
		g->ctx->progress(g->ctx, what);
}

char *kis_mvm_guest_dir(const struct kis_ctx *ctx)
{
	/* the engine's lookup for the command's store (src/engine/guest.c) */
	const char *d = ctx && ctx->guest_dir ? ctx->guest_dir(ctx) : NULL;
	return d ? strdup(d) : NULL;
}

bool kis_mvm_guest_present(const struct kis_ctx *ctx, char *why, size_t n)
{
	if (!kis_mvm_qemu_path()) {
		snprintf(why, n, "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)");
		return false;
	}
	_cleanup_free_ char *d = kis_mvm_guest_dir(ctx);
	char p[4096];
	snprintf(p, sizeof(p), "%s/vmlinuz", d ? d : "");
	if (!d || access(p, R_OK) < 0) {
		/* the advice first: a long path is what a short buffer cuts */
		snprintf(why, n,
			 "no guest kernel: run 'kis sandbox guest fetch' (looked in "
			 "$KIS_MICROVM_GUEST_DIR, the system location, then '%s')",
			 d ? d : "the store's cache/guest");
		return false;
	}
	snprintf(p, sizeof(p), "%s/modules/load", d);
	if (access(p, R_OK) < 0) {
		snprintf(why, n, "the guest cache '%s' is incomplete: run 'kis sandbox guest fetch'", d);
		return false;
	}
	return true;
}

bool kis_mvm_guest_has_net(const struct kis_ctx *ctx)
{
	/* scripts/guest/fetch-kernel.sh writes the modules it picked (and
	 * checked, built in or not) to modules/wanted once all are there */
	_cleanup_free_ char *d = kis_mvm_guest_dir(ctx);
	char p[4096], buf[512];
	snprintf(p, sizeof(p), "%s/modules/wanted", d ? d : "");
	_cleanup_close_ int fd = d ? open(p, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (k <= 0)
		return false;
	buf[k] = '\0';
	for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (!strcmp(w, "virtio_net"))
			return true;
	return false;
}

/* ---- cpio newc (the initramfs format, Documentation/driver-api/early-userspace/buffer-format.rst) ---- */

struct cpio {
	FILE *f;
	unsigned ino;
};

static void cpio_pad(struct cpio *c)
{
	long pos = ftell(c->f);
	while (pos % 4) {
		fputc(0, c->f);
		pos++;
	}
}

static void cpio_entry(struct cpio *c, const char *name, unsigned mode, const void *data,
		       size_t len, unsigned rmaj, unsigned rmin)
{
	fprintf(c->f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ++c->ino,
		mode, 0u, 0u, 1u, 0u, len, 0u, 0u, rmaj, rmin, strlen(name) + 1, 0u);
	fwrite(name, 1, strlen(name) + 1, c->f);
	cpio_pad(c);
	if (len)
		fwrite(data, 1, len, c->f);
	cpio_pad(c);
}

static int cpio_file(struct cpio *c, const char *name, const char *src, unsigned mode)
{
	_cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -1;
	size_t off = 0;
	while (off < (size_t)st.st_size) {
		ssize_t k = RETRY_EINTR(read(fd, buf + off, (size_t)st.st_size - off));
		if (k <= 0) {
			free(buf);
			return -1;
		}
		off += (size_t)k;
	}
	cpio_entry(c, name, S_IFREG | mode, buf, off, 0, 0);
	free(buf);
	return 0;
}

/* bin/<applet> -> busybox for every applet of the guest's busybox (a static
 * binary from the host's busybox-static, run here with --list), so the guest
 * need not run `busybox --install` at every cold boot. Best effort: a guest
 * without them installs them itself. */
static void busybox_links(struct cpio *c, const char *busybox)
{
	char *const argv[] = {(char *)busybox, "--list", NULL};
	bool ok;
	_cleanup_free_ char *list = kis_tool_output(argv, &ok);
	char *save = NULL;
	for (char *name = list ? strtok_r(list, "\n", &save) : NULL; name;
	     name = strtok_r(NULL, "\n", &save)) {
		/* applet names are plain words; sh is already there */
		if (!name[0] || strlen(name) > 100 ||
		    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.[") != strlen(name) ||
		    !strcmp(name, "busybox") || !strcmp(name, "sh"))
			continue;
		char path[160];
		snprintf(path, sizeof(path), "bin/%s", name);
		cpio_entry(c, path, S_IFLNK | 0777, "busybox", 7, 0, 0);
	}
}

static int build_initramfs(const char *dir, const char *agent, const char *out,
			   struct kis_error **err)
{
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp.%d", out, (int)getpid()) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "initramfs");
	struct cpio c = {.f = fopen(tmp, "we")};
	if (!c.f)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot write '%s'", tmp);
	static const char *const dirs[] = {"bin", "dev", "lib", "lib/modules", "proc", "sys",
					   "tmp", "run", "workspace", "root", "etc", "mnt"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		cpio_entry(&c, dirs[i], S_IFDIR | (strcmp(dirs[i], "tmp") ? 0755 : 01777), NULL, 0, 0, 0);
	/* the kernel opens /dev/console for init's standard streams before
	 * devtmpfs exists (init/main.c console_on_rootfs) */
	cpio_entry(&c, "dev/console", S_IFCHR | 0600, NULL, 0, 5, 1);
	cpio_entry(&c, "bin/sh", S_IFLNK | 0777, "busybox", 7, 0, 0);
	static const char etc_passwd[] = "root:x:0:0:root:/root:/bin/sh\n";
	cpio_entry(&c, "etc/passwd", S_IFREG | 0644, etc_passwd, sizeof(etc_passwd) - 1, 0, 0);
	char src[4096];
	int r = cpio_file(&c, "init", agent, 0755);
	snprintf(src, sizeof(src), "%s/busybox", dir);
	r = r < 0 ? r : cpio_file(&c, "bin/busybox", src, 0755);
	if (r == 0)
		busybox_links(&c, src);
	snprintf(src, sizeof(src), "%s/modules/load", dir);
	r = r < 0 ? r : cpio_file(&c, "lib/modules/load", src, 0644);
	FILE *lf = r < 0 ? NULL : fopen(src, "re");
	char line[256];
	while (lf && r == 0 && fgets(line, sizeof(line), lf)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || strchr(line, '/'))
			continue;
		char name[300];
		snprintf(name, sizeof(name), "lib/modules/%s", line);
		snprintf(src, sizeof(src), "%s/modules/%s", dir, line);
		r = cpio_file(&c, name, src, 0644);
	}
	if (lf)
		fclose(lf);
	cpio_entry(&c, "TRAILER!!!", 0, NULL, 0, 0, 0);
	if (fclose(c.f) != 0 || r < 0) {
		unlink(tmp);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot build the guest initramfs");
	}
	if (rename(tmp, out) < 0) {
		unlink(tmp);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot publish '%s'", out);
	}
	return 0;
}

/* The kernel a restore hands QEMU: the guest kernel's real-mode setup
 * (its boot header, Documentation/arch/x86/boot.rst) and a page of zeros
 * in place of the 14 MiB protected-mode image. A restored guest's kernel
 * is in its RAM already, and what QEMU makes of -kernel goes to fw_cfg
 * (hw/i386/x86.c x86_load_linux), which the device state does not carry
 * and a running guest does not read again; only the option ROM that
 * -kernel adds (linuxboot_dma.bin) is a RAM block the snapshot expects,
 * and it comes with this file as with the real one. QEMU reads the whole
 * image into fresh memory at every start, a tenth of a restore's start
 * on this host. A kernel without the header (not a bzImage, protocol
 * before 2.00) gets no such file: restores use the real one. */
static int build_restore_kernel(const char *kernel, const char *out)
{
	_cleanup_close_ int fd = open(kernel, O_RDONLY | O_CLOEXEC);
	uint8_t hdr[0x280];
	if (fd < 0 || pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		return -1;
	uint32_t magic = (uint32_t)hdr[0x202] | (uint32_t)hdr[0x203] << 8 |
			 (uint32_t)hdr[0x204] << 16 | (uint32_t)hdr[0x205] << 24;
	unsigned proto = (unsigned)hdr[0x206] | (unsigned)hdr[0x207] << 8;
	if (magic != 0x53726448u /* "HdrS" */ || proto < 0x200)
		return -1;
	/* setup_sects: 0 means 4 (boot.rst), plus the boot sector */
	size_t setup = ((size_t)(hdr[0x1f1] ? hdr[0x1f1] : 4) + 1) * 512;
	_cleanup_free_ uint8_t *buf = calloc(1, setup + 4096);
	if (!buf || pread(fd, buf, setup, 0) != (ssize_t)setup)
		return -1;
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp.%d", out, (int)getpid()) < 0)
		return -1;
	_cleanup_close_ int wf = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (wf < 0)
		return -1;
	if (kis_write_all(wf, buf, setup + 4096) < 0 || rename(tmp, out) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* A new agent or kernel makes the older initramfs and snapshots useless
 * (about 100 MiB each): remove those of other stamps. A VM restoring one
 * right now keeps its open descriptor. */
static void drop_stale(const char *dir, const char *stamp)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		const char *n = e->d_name;
		const char *rest = !strncmp(n, "initramfs-", 10) ? n + 10 :
				   !strncmp(n, "snap-", 5) ? n + 5 :
				   !strncmp(n, "vmlinuz-restore-", 16) ? n + 16 : NULL;
		if (rest && strncmp(rest, stamp, strlen(stamp)))
			unlinkat(dirfd(d), n, 0);
	}
	if (d)
		closedir(d);
}

int kis_mvm_guest_open(const struct kis_ctx *ctx, struct kis_mvm_guest *g, struct kis_error **err)
{
	memset(g, 0, sizeof(*g));
	char why[512];
	if (!kis_mvm_guest_present(ctx, why, sizeof(why)))
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "microvm: %s", why);
	_cleanup_free_ char *agent = NULL;
	TRY(kis_ctx_agent(ctx, &agent, err));
	g->dir = kis_mvm_guest_dir(ctx);
	g->ctx = ctx;
	struct stat sa, sk, sm;
	char load[4096];
	snprintf(load, sizeof(load), "%s/modules/load", g->dir ? g->dir : "");
	if (!g->dir || asprintf(&g->kernel, "%s/vmlinuz", g->dir) < 0 || stat(agent, &sa) < 0 ||
	    stat(g->kernel, &sk) < 0 || stat(load, &sm) < 0) {
		kis_mvm_guest_release(g);
		return kis_error_set(err, KIS_E_INTERNAL, errno, "microvm guest cache");
	}
	/* the stamp names what the guest runs: the agent, the kernel and its
	 * module list */
	if (asprintf(&g->stamp, "%lx-%lx-%lx-%lx-d%d", (unsigned long)sa.st_size,
		     (unsigned long)sa.st_mtim.tv_sec, (unsigned long)sk.st_size,
		     (unsigned long)sm.st_mtim.tv_sec & 0xffffff, KIS_MVM_DEVSET) < 0 ||
	    asprintf(&g->initrd, "%s/initramfs-%s.cpio", g->dir, g->stamp) < 0) {
		kis_mvm_guest_release(g);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "microvm guest cache");
	}
	if (access(g->initrd, R_OK) < 0) {
		kis_mvm_progress(g, "building the microvm guest's initramfs (once per agent build)");
		if (build_initramfs(g->dir, agent, g->initrd, err) < 0) {
			kis_mvm_guest_release(g);
			return -1;
		}
		drop_stale(g->dir, g->stamp);
	}
	_cleanup_free_ char *rk = NULL;
	if (asprintf(&rk, "%s/vmlinuz-restore-%s", g->dir, g->stamp) < 0) {
		kis_mvm_guest_release(g);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "microvm guest cache");
	}
	/* best effort: without it a restore loads the whole kernel */
	if (access(rk, R_OK) == 0 || build_restore_kernel(g->kernel, rk) == 0)
		g->restore_kernel = steal_ptr(rk);
	return 0;
}

void kis_mvm_guest_release(struct kis_mvm_guest *g)
{
	free(g->dir);
	free(g->kernel);
	free(g->restore_kernel);
	free(g->initrd);
	free(g->stamp);
	memset(g, 0, sizeof(*g));
}

/* ---- sockets ---- */

static void sa_at(int dfd, const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dfd, name);
}

int kis_mvm_listen_at(int dfd, const char *name, struct kis_error **err)
{
	struct sockaddr_un sa;
	sa_at(dfd, name, &sa);
	unlinkat(dfd, name, 0);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make the socket '%s'", name);
	}
	return fd;
}

int kis_mvm_connect_at(int dfd, const char *name)
{
	struct sockaddr_un sa;
	sa_at(dfd, name, &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- QEMU ---- */

/* QEMU's argv: its fixed device set and the mounts' slots; every
 * formatted word is short (numbers, ids, fd paths) */
struct argv_b {
	char *v[192];
	int n;
	char bufs[80][512];
	int nb;
};

static void add(struct argv_b *a, const char *s)
{
	if (a->n < 191)
		a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

static const char *fmt(struct argv_b *a, const char *f, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt(struct argv_b *a, const char *f, ...)
{
	if (a->nb >= 80)
		return "";
	va_list ap;
	va_start(ap, f);
	vsnprintf(a->bufs[a->nb], sizeof(a->bufs[0]), f, ap);
	va_end(ap);
	return a->bufs[a->nb++];
}

/* The host's TSC rate in kHz. Under TCG the guest's RDTSC reads the host's
 * TSC (QEMU cpu_get_ticks uses the host's tick counter), and with neither
 * PIT nor HPET on the microvm machine the guest kernel takes the rate from
 * tsc_early_khz=: a wrong value makes the guest's clock run fast or slow.
 * Measured once against CLOCK_MONOTONIC_RAW (median of three 40 ms
 * windows) and kept in the guest cache. */
static unsigned long host_tsc_khz(const char *dir)
{
	char path[4096], buf[32] = "";
	snprintf(path, sizeof(path), "%s/tsc_khz", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		unsigned long v = k > 0 ? strtoul(buf, NULL, 10) : 0;
		if (v >= 100000 && v <= 10000000)
			return v;
	}
#if defined(__x86_64__)
	unsigned long m[3];
	for (int i = 0; i < 3; i++) {
		struct timespec a, b, d = {0, 40 * 1000 * 1000};
		clock_gettime(CLOCK_MONOTONIC_RAW, &a);
		uint64_t t0 = __builtin_ia32_rdtsc();
		nanosleep(&d, NULL);
		clock_gettime(CLOCK_MONOTONIC_RAW, &b);
		uint64_t t1 = __builtin_ia32_rdtsc();
		int64_t ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
		m[i] = ns > 0 ? (unsigned long)((t1 - t0) * 1000000 / (uint64_t)ns) : 0;
	}
	unsigned long lo = m[0] < m[1] ? m[0] : m[1], hi = m[0] < m[1] ? m[1] : m[0];
	unsigned long v = m[2] < lo ? lo : m[2] > hi ? hi : m[2];
	if (v < 100000 || v > 10000000)
		return 1000000;
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dprintf(fd, "%lu\n", v);
		close(fd);
		if (rename(tmp, path) < 0)
			unlink(tmp);
	}
	return v;
#else
	return 1000000;
#endif
}

/* The stand-in VMM of the tests: KIS_MICROVM_VMM="/path/prog arg..." runs
 * prog with those arguments instead of QEMU, in the same jail and with the
 * same fds; the probes check the jail from the VMM's position with it. */
static int stand_in_argv(const char *spec, char *buf, size_t n, char **v, int max)
{
	snprintf(buf, n, "%s", spec);
	int k = 0;
	for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && k < max - 1;
	     t = strtok_r(NULL, " ", &save))
		v[k++] = t;
	v[k] = NULL;
	return k;
}

static int open_disk(const char *path, bool rw, struct kis_error **err)
{
	int fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open the disk '%s'", path);
	return fd;
}

int kis_mvm_spawn(const struct kis_mvm_guest *g, const struct kis_mvm_cfg *c, pid_t *pid,
		  struct kis_error **err)
{
	const char *qemu = kis_mvm_qemu_path();
	if (!qemu)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0, "qemu-system-x86_64 is missing");
	if (!c->vm_dir)
		return kis_error_set(err, KIS_E_INTERNAL, EINVAL, "microvm: no directory for the jail");
	/* In the VMM the fds are: ctl 3, qmp 4, agents 5.., the disks (rw
	 * twice), then the guest RAM's memfd or the snapshot. */
	enum { FD_AGENT = 5, FD_DISK = 5 + KIS_MVM_PORTS, FD_MDISK = FD_DISK + 4,
	       FD_MEM = FD_MDISK + KIS_MVM_MOUNT_DISKS };
	struct argv_b a = {.n = 0};
	bool debug = KIS_TEST_GETENV("KIS_MICROVM_DEBUG") != NULL;
	add(&a, "qemu-system-x86_64");
	/* rtc=on: the guest kernel calibrates its clock against it; without a
	 * PIT or HPET, microvm under TCG otherwise hangs in TSC calibration.
	 * pit=off: the i8254 comes out of reset in mode 3 with count 0
	 * (hw/timer/i8254_common.c pit_reset_common), and a guest that never
	 * programs it (its LAPIC timer is the clock event; Linux 6.1 has not
	 * yet "x86/i8253: Disable PIT timer 0 when not in use") leaves QEMU's
	 * main loop waking at every edge of its square wave, every 27.5 ms
	 * (65536 / 1.193182 MHz / 2) for a masked IRQ 0: about 37 of an idle
	 * VM's 43 main-loop wakeups a second, and half its idle CPU. */
	add(&a, "-M");
	bool file_ram = c->mem_file || c->mem_fd >= 0;
	add(&a, file_ram ? "microvm,rtc=on,pit=off,memory-backend=ram" : "microvm,rtc=on,pit=off");
	add(&a, "-accel");
	/* TCG's translation buffer: QEMU reserves 1 GiB by default and fills
	 * it as it translates; a VM's working set of guest code fits in far
	 * less, and what it touches is host memory the VM holds */
	add(&a, strcmp(c->accel, "tcg") ? c->accel : fmt(&a, "tcg,tb-size=%u", KIS_MVM_TB_MIB));
	add(&a, "-m");
	add(&a, fmt(&a, "%uM", c->mem_mib));
	if (file_ram) {
		/* the guest's RAM is the memory image: shared and written through
		 * while a snapshot is made, mapped privately on restore, so every
		 * VM restored from one image shares its pages in the page cache
		 * until it writes one (copy-on-write) */
		add(&a, "-object");
		add(&a, fmt(&a, "memory-backend-file,id=ram,size=%uM,mem-path=%s,share=%s,"
			     "prealloc=off,merge=off", c->mem_mib,
			     c->mem_fd >= 0 ? fmt(&a, "/proc/self/fd/%d", FD_MEM) : "/vm/mem",
			     c->mem_share ? "on" : "off"));
	}
	if (!strcmp(c->accel, "tcg")) {
		/* ARAT (an always-running APIC timer, CPUID.6:EAX[2]): without
		 * it the kernel takes the LAPIC timer to stop in deep C-states
		 * and, with no HPET to broadcast from, never leaves periodic
		 * ticks (kernel/time/tick-oneshot.c tick_is_oneshot_available):
		 * 250 wakeups a second, about 8% of a host core per idle VM
		 * under TCG. With it an idle guest stops its tick (NO_HZ_IDLE). */
		add(&a, "-cpu");
		add(&a, "qemu64,+arat");
	}
	add(&a, "-smp");
	add(&a, fmt(&a, "%u", c->vcpus));
	add(&a, "-nodefaults");
	add(&a, "-no-user-config");
	add(&a, "-display");
	add(&a, "none");
	add(&a, "-no-reboot");
	/* QEMU's own filter on top of ours (docs: -sandbox): no obsolete
	 * calls, no setuid, no fork/exec, no scheduler or affinity changes */
	add(&a, "-sandbox");
	add(&a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	add(&a, "-serial");
	/* no console unless debugging: a guest cannot flood the host through it */
	add(&a, debug ? "stdio" : "none");
	add(&a, "-kernel");
	add(&a, "/vm/vmlinuz");
	add(&a, "-initrd");
	add(&a, "/vm/initrd");
	add(&a, "-append");
	/* tsc=reliable: with no HPET or ACPI PM timer to watch the TSC
	 * against, it would never be marked fit for high-resolution timers
	 * (CLOCK_SOURCE_MUST_VERIFY), nor the tick become one-shot */
	/* nowatchdog: the soft-lockup detector's hrtimer (every 4 s) and its
	 * stopper work wake an idle guest (kernel/watchdog.c); under TCG a
	 * stalled vCPU is the host's scheduling, not a guest bug.
	 * compaction_proactiveness=0: kcompactd then sleeps until asked,
	 * instead of waking every 500 ms (mm/compaction.c kcompactd, 6.1);
	 * both are 2.5 of an idle guest's ~8 wakeups a second. */
	add(&a, fmt(&a, "%s panic=-1 tsc_early_khz=%lu tsc=reliable nowatchdog "
		    "sysctl.vm.compaction_proactiveness=0 kis.ports=%d%s",
		    debug ? "console=ttyS0" : "quiet", host_tsc_khz(g->dir), KIS_MVM_PORTS,
		    debug ? " KIS_GUEST_DEBUG=1" : ""));
	add(&a, "-device");
	/* as many ports as we use (nr 1 control, 2.. agents; 0 is the
	 * console's, unused): the guest sets up two queues per port */
	add(&a, fmt(&a, "virtio-serial-device,max_ports=%d", 2 + KIS_MVM_PORTS));
	add(&a, "-chardev");
	add(&a, "socket,id=ctl,fd=3,server=on,wait=off");
	add(&a, "-device");
	add(&a, "virtserialport,chardev=ctl,name=kis.ctl,nr=1");
	add(&a, "-chardev");
	add(&a, "socket,id=qmp,fd=4,server=on,wait=off");
	add(&a, "-mon");
	add(&a, "chardev=qmp,mode=control");
	for (int i = 0; i < KIS_MVM_PORTS; i++) {
		add(&a, "-chardev");
		add(&a, fmt(&a, "socket,id=a%d,fd=%d,server=on,wait=off", i, FD_AGENT + i));
		add(&a, "-device");
		add(&a, fmt(&a, "virtserialport,chardev=a%d,name=kis.%d,nr=%d", i, i, 2 + i));
	}
	/* base and delta read-only (the guest cannot change them, and QEMU
	 * takes a shared lock, so VMs share one base image), rw last; the
	 * guest tells them apart by their serial (the host's word, read over
	 * virtio-blk's GET_ID: /sys/block/vdX/serial), not their order. Each
	 * is an fd the engine opened, in an fd set of its own (docs:
	 * -add-fd): the jailed VMM opens no disk by path. */
	static const char *const dname[3] = {"base", "delta", "rw"};
	int src[KIS_MVM_MAX_FDS];
	int nsrc = 0, r = -1;
	for (int i = 0; i < KIS_MVM_MAX_FDS; i++)
		src[i] = -1;
	src[nsrc++] = c->ctl_fd;
	src[nsrc++] = c->qmp_fd;
	for (int i = 0; i < KIS_MVM_PORTS; i++)
		src[nsrc++] = c->agent_fd[i];
	/* the rw disk's set holds a read-only fd too: QEMU opens it read-only
	 * first (probing, its lock fd) and takes from a set only an fd of the
	 * access mode it asks */
	int disk_fd[4] = {-1, -1, -1, -1};
	int mdisk_fd[KIS_MVM_MOUNT_DISKS];
	for (int i = 0; i < KIS_MVM_MOUNT_DISKS; i++)
		mdisk_fd[i] = -1;
	for (int i = 0; i < 4; i++) {
		if ((disk_fd[i] = open_disk(c->disk[i < 3 ? i : 2], i == 2, err)) < 0)
			goto out;
		src[nsrc++] = disk_fd[i];
		add(&a, "-add-fd");
		add(&a, fmt(&a, "fd=%d,set=%d", FD_DISK + i, i < 3 ? i + 1 : 3));
		if (i == 3)
			break;
		add(&a, "-drive");
		add(&a, fmt(&a, "if=none,id=%s,format=raw,cache=writeback,%sfile=/dev/fdset/%d",
			    dname[i], i < 2 ? "readonly=on," : "", i + 1));
		add(&a, "-device");
		add(&a, fmt(&a, "virtio-blk-device,drive=%s,serial=kis-%s", dname[i], dname[i]));
	}
	/* the mounts' slots (vm.h KIS_MVM_MOUNTS), read-only to QEMU itself:
	 * a hostile guest kernel cannot write a base through them */
	for (int i = 0; i < KIS_MVM_MOUNT_DISKS; i++) {
		if ((mdisk_fd[i] = open_disk(c->mdisk[i] ? c->mdisk[i] : c->disk[1], false, err)) < 0)
			goto out;
		src[nsrc++] = mdisk_fd[i];
		const char *role = i % 2 ? "d" : "l";
		add(&a, "-add-fd");
		add(&a, fmt(&a, "fd=%d,set=%d", FD_MDISK + i, 4 + i));
		add(&a, "-drive");
		/* node names of our own for the format node (m<i><role>f) and
		 * its file (m<i><role>p): a running VM's slot takes another
		 * image by blockdev-reopen of the format node onto a new file
		 * node (slot.c), which QEMU refuses for a node whose name it
		 * generated ("Cannot change the option 'node-name'") */
		add(&a, fmt(&a, "if=none,id=m%d%s,node-name=m%d%sf,format=raw,cache=writeback,"
			     "readonly=on,file.driver=file,file.filename=/dev/fdset/%d,"
			     "file.node-name=m%d%sp", i / 2, role, i / 2, role, 4 + i, i / 2, role));
		add(&a, "-device");
		add(&a, fmt(&a, "virtio-blk-device,drive=m%d%s,serial=kis-m%d%s", i / 2, role, i / 2,
			     role));
	}
	/* the restore's sealed memfd, reopened by QEMU through the jail's /proc */
	if (c->mem_fd >= 0)
		src[nsrc++] = c->mem_fd;
	/* The network device, in every VM (the snapshot's device set): its
	 * backend is passt's socketpair (egress; docs: -netdev stream,
	 * addr.type=fd) or a hub port alone on its hub (off, loopback). The
	 * jailed VMM opens no socket of its own for either. A fixed MAC: each
	 * VM has a link of its own. */
	add(&a, "-netdev");
	if (c->net_fd >= 0) {
		add(&a, fmt(&a, "stream,id=net0,server=off,addr.type=fd,addr.str=%d", 3 + nsrc));
		src[nsrc++] = c->net_fd;
	} else {
		add(&a, "hubport,id=net0,hubid=0");
	}
	add(&a, "-device");
	add(&a, "virtio-net-device,netdev=net0,mac=52:54:00:12:34:56");
	if (c->snap_fd >= 0 && c->ignore_shared) {
		/* x-ignore-shared is a capability QEMU 7.2 takes only over QMP,
		 * before the incoming migration starts (kis_mvm_incoming) */
		add(&a, "-incoming");
		add(&a, "defer");
	} else if (c->snap_fd >= 0) {
		/* fd: migration from an open file: no shell (exec:) needed */
		add(&a, "-incoming");
		add(&a, fmt(&a, "fd:%d", 3 + nsrc));
		src[nsrc++] = c->snap_fd;
	}
	const char *stand_in = c->stand_in ? KIS_TEST_GETENV("KIS_MICROVM_VMM") : NULL;
	char sbuf[4096];
	char *sv[32];
	struct kis_mvm_jail_cfg jc = {
		.dir = c->vm_dir, .vmm = qemu, .argv = a.v, .cache_dir = g->dir,
		.kernel = c->snap_fd >= 0 && g->restore_kernel ? g->restore_kernel : g->kernel,
		.initrd = g->initrd, .mem_file = c->mem_fd >= 0 ? NULL : c->mem_file,
		.proc = c->mem_fd >= 0, .mem_rw = c->mem_share,
		.kvm = !strcmp(c->accel, "kvm"), .mem_mib = c->mem_mib, .fds = src,
		.nfds = nsrc, .log_fd = c->log_fd, .detach = c->detach,
	};
	if (stand_in && *stand_in) {
		if (stand_in_argv(stand_in, sbuf, sizeof(sbuf), sv, 32) < 1) {
			kis_error_set(err, KIS_E_INTERNAL, EINVAL, "KIS_MICROVM_VMM is empty");
			goto out;
		}
		jc.vmm = sv[0];
		jc.argv = sv;
		jc.no_seccomp = KIS_TEST_GETENV("KIS_MICROVM_VMM_NO_SECCOMP") != NULL;
	}
	jc.vmm_outside_usr = strncmp(jc.vmm, "/usr/", 5) != 0;
#ifdef KIS_MVM_BENCH_UNJAILED
	if (kis_mvm_bench_unjailed(&jc)) {
		r = kis_mvm_bench_spawn(&jc, pid, err);
		goto out;
	}
#else
	/* Only the benchmark's own binary can run a VMM unjailed; here the
	 * switch is refused by name, never ignored, so that nobody believes a
	 * jailed figure unjailed or the other way round. */
	if (getenv(KIS_MVM_BENCH_UNJAILED_ENV)) {
		kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
			      "microvm: " KIS_MVM_BENCH_UNJAILED_ENV " is set, but this is not the "
			      "benchmark's build: a VM never runs without its jail");
		goto out;
	}
#endif
	_cleanup_free_ char *jdir = NULL;
	if (asprintf(&jdir, "%s/jail", c->vm_dir) < 0) {
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "jail");
		goto out;
	}
	if (mkdir(jdir, 0700) < 0 && errno != EEXIST) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make '%s'", jdir);
		goto out;
	}
	struct kis_mvm_jail j;
	if (kis_mvm_jail_prepare(&j, &jc, err) < 0)
		goto out;
	r = kis_mvm_jail_spawn(&j, &jc, pid, err);
	/* A session's VM outlives the engine once the session is published;
	 * until then it is the creator's to end (src/engine/owner.c). */
	if (r == 0 && c->detach)
		(void)kis_owner_note("pid", "%d %llu", (int)*pid, kis_proc_starttime(*pid));
	/* the cgroup outlives this handle: the VM's end removes it
	 * (kis_mvm_cgroup_drop) */
	if (r == 0 && kis_mvm_cgroup_save(c->vm_dir, j.cg, err) < 0) {
		kill(*pid, SIGKILL);
		r = -1;
	}
	if (r == 0) {
		kis_cgroup_free(j.cg);
		j.cg = NULL;
	}
	kis_mvm_jail_release(&j);
out:
	for (int i = 0; i < 4; i++)
		if (disk_fd[i] >= 0)
			close(disk_fd[i]);
	for (int i = 0; i < KIS_MVM_MOUNT_DISKS; i++)
		if (mdisk_fd[i] >= 0)
			close(mdisk_fd[i]);
	return r;
}

/* ---- the control port ---- */

int kis_mvm_ctl(int fd, const char *line, char *reply, size_t n, int ms)
{
	/* the line and its newline in one message: the guest reads what QEMU
	 * read from the socket at once, and a line split across two reads
	 * may meet a read of 0 between them (the port's open not yet known,
	 * src/agent/guest.c ctl_reply), which voids a partial line */
	size_t len = strlen(line);
	struct iovec iov[2] = {{.iov_base = (void *)line, .iov_len = len},
			       {.iov_base = "\n", .iov_len = 1}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)len + 1)
		return -1;
	int64_t end = (int64_t)kis_monotonic_ms() + ms;
	size_t got = 0;
	while (got + 1 < n) {
		int left = (int)(end - (int64_t)kis_monotonic_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t k = RETRY_EINTR(read(fd, reply + got, 1));
		if (k <= 0)
			return -1;
		if (reply[got] == '\n') {
			reply[got] = '\0';
			/* answers to earlier pings (sent while the guest's port was
			 * still closed) may arrive late: they are not this reply */
			if (strcmp(line, "ping") && !strcmp(reply, "pong")) {
				got = 0;
				continue;
			}
			return 0;
		}
		got++;
	}
	return -1;
}

int kis_mvm_ctl_wait(int dfd, int ms, pid_t pid)
{
	int64_t end = (int64_t)kis_monotonic_ms() + ms;
	int fd = -1;
	while ((int64_t)kis_monotonic_ms() < end) {
		if (pid > 0 && kill(pid, 0) < 0)
			break;
		/* WNOWAIT: an ended VMM stays for its owner to reap (vm_stop) */
		siginfo_t si = {0};
		if (pid > 0 && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid)
			break;
		if (fd < 0)
			fd = kis_mvm_connect_at(dfd, "ctl.sock");
		char r[64];
		/* a ping sent before the guest's port opened is lost: ask again */
		if (fd >= 0 && kis_mvm_ctl(fd, "ping", r, sizeof(r), 250) == 0 && !strcmp(r, "pong"))
			return fd;
		if (fd >= 0)
			kis_mvm_trace("ctl: no pong within 250 ms (lost, or a slow guest), ping again");
		if (fd < 0) {
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

/* ---- QMP (docs/interop/qmp-spec.rst): greeting, qmp_capabilities, commands ---- */

static int qmp_read_msg(int fd, char **out, int ms)
{
	int64_t end = (int64_t)kis_monotonic_ms() + ms;
	size_t cap = 4096, len = 0;
	char *b = malloc(cap);
	if (!b)
		return -1;
	for (;;) {
		int left = (int)(end - (int64_t)kis_monotonic_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		if (len + 2 >= cap) {
			if (cap > (1u << 20))
				break;
			char *g = realloc(b, cap *= 2);
			if (!g)
				break;
			b = g;
		}
		ssize_t k = RETRY_EINTR(read(fd, b + len, 1));
		if (k <= 0)
			break;
		if (b[len] == '\n') {
			b[len] = '\0';
			*out = b;
			return 0;
		}
		len++;
	}
	free(b);
	return -1;
}

int kis_mvm_qmp_cmd(int fd, const char *json, int send_fd, char **reply, int ms)
{
	size_t len = strlen(json);
	struct iovec iov = {.iov_base = (void *)json, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (send_fd >= 0) {
		/* getfd takes the descriptor from SCM_RIGHTS on the command */
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &send_fd, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)len)
		return -1;
	int64_t end = (int64_t)kis_monotonic_ms() + ms;
	for (;;) {
		char *m = NULL;
		int left = (int)(end - (int64_t)kis_monotonic_ms());
		if (left <= 0 || qmp_read_msg(fd, &m, left) < 0)
			return -1;
		/* events are interleaved with the reply: skip them */
		if (strstr(m, "\"return\"") || strstr(m, "\"error\"")) {
			bool ok = strstr(m, "\"error\"") == NULL;
			if (reply)
				*reply = m;
			else
				free(m);
			return ok ? 0 : -1;
		}
		free(m);
	}
}

int kis_mvm_qmp_open(int dfd, const char *name, int ms)
{
	int64_t end = (int64_t)kis_monotonic_ms() + ms;
	int fd;
	while ((fd = kis_mvm_connect_at(dfd, name)) < 0) {
		if ((int64_t)kis_monotonic_ms() > end)
			return -1;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	char *greet = NULL;
	if (qmp_read_msg(fd, &greet, (int)(end - (int64_t)kis_monotonic_ms()) + 1000) < 0 ||
	    kis_mvm_qmp_cmd(fd, "{\"execute\":\"qmp_capabilities\"}", -1, NULL, 3000) < 0) {
		free(greet);
		close(fd);
		return -1;
	}
	free(greet);
	return fd;
}

static const char ignore_shared_cmd[] =
	"{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
	"[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}";

int kis_mvm_ignore_shared(int qmp)
{
	return kis_mvm_qmp_cmd(qmp, ignore_shared_cmd, -1, NULL, 3000);
}

int kis_mvm_incoming(int dfd, int snap_fd, struct kis_error **err)
{
	int q = kis_mvm_qmp_open(dfd, "qmp.sock", 5000);
	if (q < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "the VMM's QMP does not answer");
	kis_mvm_trace("qmp: greeting and capabilities");
	int r = 0;
	if (kis_mvm_ignore_shared(q) < 0 ||
	    kis_mvm_qmp_cmd(q, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}",
			    snap_fd, NULL, 3000) < 0 ||
	    kis_mvm_qmp_cmd(q, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":"
			    "\"fd:snap\"}}", -1, NULL, 3000) < 0)
		r = kis_error_set(err, KIS_E_INTERNAL, 0, "the VMM refused the snapshot's restore");
	close(q);
	return r;
}

/* ---- temporary directories ---- */

int kis_mvm_tmpdir(char **path, struct kis_error **err)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	if (!base || access(base, W_OK) < 0)
		base = "/tmp";
	if (asprintf(path, "%s/kis-mvm.XXXXXX", base) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "tmpdir");
	if (!mkdtemp(*path)) {
		int e = errno;
		free(*path);
		*path = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot make a private directory");
	}
	/* The run's: swept by the engine's owner record should it be killed
	 * (core/record.h, engine/owner.h). mkdtemp picks the name, so the record follows it. */
	if (kis_owner_note("tmp", "%s", *path) < 0) {
		int e = errno;
		rmdir(*path);
		free(*path);
		*path = NULL;
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot record a private directory");
	}
	return 0;
}

