/* SPDX-License-Identifier: MIT */
/* A WASI test program, built at test time with clang --target=wasm32-wasi
 * and wasi-libc: `wasitest.wasm CMD ARGS`, one command per behaviour. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wasi/api.h>

static int64_t now_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Raw path_open beneath the preopen (fd 3), bypassing libc's path mapping. */
static int raw_open(const char *path, uint32_t lookup, __wasi_rights_t rights, __wasi_fd_t *fd)
{
	return __wasi_path_open(3, lookup, path, 0, rights, 0, 0, fd);
}

/* Read a file's first bytes; "-" when it cannot be opened. */
static const char *slurp(const char *path)
{
	static char buf[64];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return "-";
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return buf;
}

static int cmd_files(void)
{
	if (mkdir("d", 0755) < 0)
		return perror("mkdir"), 2;
	FILE *f = fopen("d/a.txt", "w");
	if (!f)
		return perror("fopen w"), 2;
	fprintf(f, "alpha\n");
	fclose(f);
	if (rename("d/a.txt", "d/b.txt") < 0)
		return perror("rename"), 2;
	printf("read=%s\n", slurp("d/b.txt"));
	struct stat st;
	if (stat("d/b.txt", &st) < 0)
		return perror("stat"), 2;
	printf("size=%lld\n", (long long)st.st_size);
	f = fopen("d/b.txt", "a");
	fprintf(f, "beta\n");
	fclose(f);
	stat("d/b.txt", &st);
	printf("size2=%lld\n", (long long)st.st_size);
	if (symlink("b.txt", "d/l") < 0)
		return perror("symlink"), 2;
	char t[64] = {0};
	ssize_t n = readlink("d/l", t, sizeof(t) - 1);
	printf("readlink=%.*s via=%s\n", (int)(n < 0 ? 0 : n), t, slurp("d/l"));
	if (link("d/b.txt", "d/hard") < 0)
		return perror("link"), 2;
	stat("d/hard", &st);
	printf("nlink=%d\n", (int)st.st_nlink);
	int names = 0;
	DIR *dir = opendir("d");
	struct dirent *e;
	while (dir && (e = readdir(dir)))
		if (e->d_name[0] != '.')
			names++;
	closedir(dir);
	printf("entries=%d\n", names);
	unlink("d/l");
	unlink("d/hard");
	f = fopen("kept.txt", "w");
	fprintf(f, "from the module\n");
	fclose(f);
	printf("rmdir_nonempty=%s\n", rmdir("d") < 0 ? strerror(errno) : "ok");
	unlink("d/b.txt");
	printf("rmdir=%s\n", rmdir("d") < 0 ? strerror(errno) : "ok");
	return 0;
}

static int cmd_args(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		printf("arg%d=%s\n", i, argv[i]);
	extern char **environ;
	for (char **e = environ; *e; e++)
		printf("env=%s\n", *e);
	return 0;
}

static int cmd_clock(void)
{
	int64_t m0 = now_ms(CLOCK_MONOTONIC), r0 = now_ms(CLOCK_REALTIME);
	struct timespec d = {0, 50 * 1000000};
	nanosleep(&d, NULL); /* poll_oneoff on a relative clock */
	int64_t dm = now_ms(CLOCK_MONOTONIC) - m0;
	printf("slept_ok=%d realtime_sane=%d\n", dm >= 50 && dm < 2000, r0 > 1600000000000ll);
	return 0;
}

static int cmd_random(void)
{
	unsigned char a[32] = {0}, b[32] = {0};
	getentropy(a, sizeof(a));
	getentropy(b, sizeof(b));
	int zero = 1;
	for (int i = 0; i < 32; i++)
		zero &= a[i] == 0;
	printf("random_ok=%d\n", !zero && memcmp(a, b, 32) != 0);
	return 0;
}

static int cmd_cat(void)
{
	char buf[4096];
	ssize_t n;
	while ((n = read(0, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	return 0;
}

/* Each escape prints "NAME=refused" or "NAME=ESCAPED:<what was read>". */
static void verdict(const char *name, const char *got)
{
	int leaked = strcmp(got, "-") != 0 && strstr(got, "SECRET") != NULL;
	printf("%s=%s%s\n", name, leaked ? "ESCAPED:" : "refused", leaked ? got : "");
}

static int cmd_escape(void)
{
	/* `..` out of the preopen, through libc and raw. */
	verdict("dotdot", slurp("../outside/secret.txt"));
	__wasi_fd_t fd;
	int e = raw_open("../outside/secret.txt", 0, __WASI_RIGHTS_FD_READ, &fd);
	printf("dotdot_raw=%d\n", e);
	/* An absolute path at the WASI level. */
	e = raw_open("/etc/passwd", 0, __WASI_RIGHTS_FD_READ, &fd);
	printf("absolute_raw=%d\n", e);
	/* Symlinks planted on the host, absolute and relative. */
	verdict("host_abs_link", slurp("abs_link"));
	verdict("host_rel_link", slurp("rel_link"));
	verdict("host_dir_link", slurp("dir_link/secret.txt"));
	/* Symlinks the module makes. */
	const char *rel = getenv("REL_SECRET");
	printf("make_rel_link=%s\n", rel && symlink(rel, "my_rel") == 0 ? "made" : "failed");
	verdict("own_rel_link", slurp("my_rel"));
	e = __wasi_path_symlink("/etc/passwd", 3, "my_abs");
	printf("make_abs_link=%d\n", e);
	/* A hard link of something outside, through a planted link, followed. */
	e = __wasi_path_link(3, __WASI_LOOKUPFLAGS_SYMLINK_FOLLOW, "abs_link", 3, "hard_out");
	printf("hardlink_follow=%d\n", e);
	e = __wasi_path_link(3, 0, "../outside/secret.txt", 3, "hard_out2");
	printf("hardlink_dotdot=%d\n", e);
	/* Rename out. */
	FILE *f = fopen("mine.txt", "w");
	fputs("mine\n", f);
	fclose(f);
	e = __wasi_path_rename(3, "mine.txt", 3, "../mine.txt");
	printf("rename_out=%d\n", e);
	e = __wasi_path_rename(3, "mine.txt", 3, "dir_link/mine.txt");
	printf("rename_via_link=%d\n", e);
	/* Stat and directory listing through a planted link. */
	__wasi_filestat_t fs;
	e = __wasi_path_filestat_get(3, __WASI_LOOKUPFLAGS_SYMLINK_FOLLOW, "abs_link", &fs);
	printf("stat_follow=%d\n", e);
	e = __wasi_path_create_directory(3, "../made_outside");
	printf("mkdir_out=%d\n", e);
	e = __wasi_path_unlink_file(3, "../outside/secret.txt");
	printf("unlink_out=%d\n", e);
	return 0;
}

/* A trailing slash makes the kernel follow the last component: each call
 * given "dir_link/" (a planted link to a host directory) must walk it
 * beneath the preopen, and refuse, or answer as for the link itself
 * (ENOTDIR), never touch the directory outside. */
static int cmd_slash(void)
{
	char buf[64];
	__wasi_size_t used = 0;
	__wasi_fd_t fd;
	printf("slash_times=%d\n",
	       __wasi_path_filestat_set_times(3, 0, "dir_link/", 0, 0,
					      __WASI_FSTFLAGS_ATIM | __WASI_FSTFLAGS_MTIM));
	printf("slash_readlink=%d\n",
	       __wasi_path_readlink(3, "dir_link/", (uint8_t *)buf, sizeof(buf), &used));
	printf("slash_unlink=%d\n", __wasi_path_unlink_file(3, "dir_link/"));
	printf("slash_rmdir=%d\n", __wasi_path_remove_directory(3, "dir_link/"));
	printf("slash_link=%d\n", __wasi_path_link(3, 0, "dir_link/", 3, "hl"));
	printf("slash_rename=%d\n", __wasi_path_rename(3, "dir_link/", 3, "moved"));
	printf("slash_open=%d\n", raw_open("dir_link/", 0, __WASI_RIGHTS_FD_READDIR, &fd));
	__wasi_filestat_t fs;
	printf("slash_stat=%d\n", __wasi_path_filestat_get(3, 0, "dir_link/", &fs));
	/* and on the module's own file: Linux's errors */
	FILE *f = fopen("plain.txt", "w");
	fclose(f);
	printf("file_unlink=%d\n", __wasi_path_unlink_file(3, "plain.txt/"));
	printf("file_rename=%d\n", __wasi_path_rename(3, "plain.txt", 3, "other/"));
	printf("file_symlink=%d\n", __wasi_path_symlink("x", 3, "plain.txt/"));
	printf("new_symlink=%d\n", __wasi_path_symlink("x", 3, "new/"));
	printf("file_link=%d\n", __wasi_path_link(3, 0, "plain.txt/", 3, "hl2"));
	printf("file_still=%d\n", access("plain.txt", F_OK) == 0);
	return 0;
}

/* With no preopen (wasm.preopen none) fd 3 is not open, and libc finds no
 * directory to open a relative path in. */
static int cmd_nopreopen(void)
{
	__wasi_prestat_t ps;
	printf("prestat3=%d\n", __wasi_fd_prestat_get(3, &ps));
	__wasi_fdstat_t st;
	printf("fdstat3=%d\n", __wasi_fd_fdstat_get(3, &st));
	int fd = open("wasitest.wasm", O_RDONLY);
	printf("open=%s\n", fd < 0 ? strerror(errno) : "opened");
	return 0;
}

/* Open sw/secret.txt over and over while the host swaps `sw` between a
 * directory and a symlink that climbs out. */
static int cmd_race(int n)
{
	int leaks = 0, opened = 0, inside = 0;
	for (int i = 0; i < n; i++) {
		__wasi_fd_t fd;
		if (__wasi_path_open(3, __WASI_LOOKUPFLAGS_SYMLINK_FOLLOW, "sw/secret.txt", 0,
				     __WASI_RIGHTS_FD_READ, 0, 0, &fd) != 0)
			continue;
		opened++;
		char buf[16] = {0};
		__wasi_iovec_t iov = {(uint8_t *)buf, sizeof(buf) - 1};
		__wasi_size_t got = 0;
		if (__wasi_fd_read(fd, &iov, 1, &got) != 0)
			got = 0;
		if (__wasi_fd_close(fd) != 0)
			return 2;
		if (strstr(buf, "SECRET"))
			leaks++;
		else if (strstr(buf, "inside"))
			inside++;
	}
	printf("opened=%d inside=%d leaks=%d\n", opened, inside, leaks);
	return leaks ? 1 : 0;
}

/* The raw import: libc's wrapper would strlen the path in the guest. */
int32_t raw_path_open(int32_t fd, int32_t dirflags, int32_t path, int32_t len, int32_t oflags,
		      int64_t base, int64_t inh, int32_t fdflags, int32_t out)
	__attribute__((__import_module__("wasi_snapshot_preview1"), __import_name__("path_open")));

static int cmd_badptr(void)
{
	/* An iovec whose buffer lies past the end of linear memory. */
	__wasi_ciovec_t iov = {(const uint8_t *)0xfffff000u, 4096};
	__wasi_size_t n = 0;
	printf("write_oob=%d\n", __wasi_fd_write(1, &iov, 1, &n));
	/* The iovec array itself out of bounds. */
	printf("iovs_oob=%d\n", __wasi_fd_write(1, (const __wasi_ciovec_t *)0xfffffff8u, 4, &n));
	/* A result pointer out of bounds. */
	printf("result_oob=%d\n",
	       __wasi_fd_write(1, &iov, 0, (__wasi_size_t *)0xfffffffeu));
	/* A path out of bounds. */
	__wasi_fd_t fd;
	printf("path_oob=%d\n", raw_path_open(3, 0, (int32_t)0xfffffff0u, 64, 0, 0, 0, 0,
					       (int32_t)(uintptr_t)&fd));
	/* A length that wraps. */
	char b[4];
	printf("random_wrap=%d\n", __wasi_random_get((uint8_t *)b, 0xffffffffu));
	printf("still_running=1\n");
	return 0;
}

/* Gone from newer wasi-libc headers; still in the preview1 ABI. */
int32_t raw_proc_raise(int32_t sig)
	__attribute__((__import_module__("wasi_snapshot_preview1"), __import_name__("proc_raise")));

static int cmd_rights(void)
{
	FILE *f = fopen("r.txt", "w");
	fputs("data\n", f);
	fclose(f);
	__wasi_fd_t fd;
	int e = raw_open("r.txt", 0, __WASI_RIGHTS_FD_READ, &fd);
	printf("open_ro=%d\n", e);
	__wasi_ciovec_t iov = {(const uint8_t *)"x", 1};
	__wasi_size_t n = 0;
	printf("write_ro=%d\n", __wasi_fd_write(fd, &iov, 1, &n));
	printf("seek_ro=%d\n", __wasi_fd_seek(fd, 1, __WASI_WHENCE_SET, &(__wasi_filesize_t){0}));
	printf("widen=%d\n", __wasi_fd_fdstat_set_rights(fd, __WASI_RIGHTS_FD_READ |
							       __WASI_RIGHTS_FD_WRITE, 0));
	printf("narrow=%d\n", __wasi_fd_fdstat_set_rights(fd, 0, 0));
	char buf[8];
	__wasi_iovec_t riov = {(uint8_t *)buf, sizeof(buf)};
	printf("read_narrowed=%d\n", __wasi_fd_read(fd, &riov, 1, &n));
	/* A directory opened with only readdir cannot create files. */
	__wasi_fd_t d;
	e = __wasi_path_open(3, 0, ".", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_FD_READDIR |
			     __WASI_RIGHTS_PATH_OPEN, __WASI_RIGHTS_FD_READ, 0, &d);
	printf("open_dir=%d\n", e);
	e = __wasi_path_open(d, 0, "new.txt", __WASI_OFLAGS_CREAT, __WASI_RIGHTS_FD_READ, 0, 0, &fd);
	printf("create_in_ro_dir=%d\n", e);
	e = __wasi_path_open(d, 0, "r.txt", 0, __WASI_RIGHTS_FD_WRITE, 0, 0, &fd);
	printf("inherit_beyond=%d\n", e);
	printf("sock_shutdown=%d proc_raise=%d\n",
	       __wasi_sock_shutdown(1, __WASI_SDFLAGS_WR), raw_proc_raise(15));
	return 0;
}

static int cmd_poll(void)
{
	__wasi_subscription_t s = {.userdata = 42, .u = {.tag = __WASI_EVENTTYPE_CLOCK}};
	s.u.u.clock.id = __WASI_CLOCKID_MONOTONIC;
	s.u.u.clock.timeout = 30 * 1000000ull;
	__wasi_event_t ev;
	__wasi_size_t n = 0;
	int64_t t0 = now_ms(CLOCK_MONOTONIC);
	int e = __wasi_poll_oneoff(&s, &ev, 1, &n);
	int64_t dt = now_ms(CLOCK_MONOTONIC) - t0;
	printf("poll=%d n=%lu userdata=%llu type=%d waited=%d\n", e, n,
	       (unsigned long long)ev.userdata, ev.type, dt >= 30);
	return 0;
}

/* The fd_* calls the other commands do not reach. */
static int cmd_misc(void)
{
	int fd = open("m.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return perror("open"), 2;
	printf("pwrite=%d\n", (int)pwrite(fd, "0123456789", 10, 5));
	char b[16] = {0};
	printf("pread=%d:%.4s\n", (int)pread(fd, b, 4, 7), b);
	printf("seek_end=%lld tell=%lld\n", (long long)lseek(fd, 0, SEEK_END),
	       (long long)lseek(fd, 0, SEEK_CUR));
	printf("allocate=%d\n", posix_fallocate(fd, 0, 100));
	printf("advise=%d\n", posix_fadvise(fd, 0, 10, POSIX_FADV_SEQUENTIAL));
	printf("sync=%d datasync=%d\n", fsync(fd), fdatasync(fd));
	printf("truncate=%d\n", ftruncate(fd, 3));
	struct stat st;
	fstat(fd, &st);
	printf("size=%lld\n", (long long)st.st_size);
	struct timespec ts[2] = {{1000000000, 0}, {1200000000, 500}};
	printf("futimens=%d\n", futimens(fd, ts));
	fstat(fd, &st);
	printf("mtime=%lld\n", (long long)st.st_mtim.tv_sec);
	ts[1].tv_sec = 1300000000;
	printf("utimensat=%d\n", utimensat(AT_FDCWD, "m.bin", ts, 0));
	stat("m.bin", &st);
	printf("mtime2=%lld\n", (long long)st.st_mtim.tv_sec);
	int fd2 = open("m.bin", O_RDONLY);
	printf("renumber=%d\n", __wasi_fd_renumber(fd2, fd));
	printf("read_after=%d\n", (int)read(fd, b, 3));
	int fl = fcntl(fd, F_GETFL);
	printf("setfl=%d\n", fcntl(fd, F_SETFL, fl | O_NONBLOCK));
	printf("close=%d close_again=%d\n", close(fd), close(fd));
	printf("unlink=%d\n", unlink("m.bin"));
	return 0;
}

static int cmd_flood(void)
{
	static char line[4096];
	memset(line, 'x', sizeof(line) - 1);
	for (;;)
		puts(line);
}

static volatile int sink;
static char *volatile keep;
#pragma clang diagnostic ignored "-Winfinite-recursion"
static int deep(int n)
{
	volatile char pad[256];
	pad[0] = (char)n;
	return deep(n + 1) + pad[0];
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "hello";
	if (!strcmp(c, "hello"))
		return puts("hello from wasm"), 0;
	if (!strcmp(c, "args"))
		return cmd_args(argc, argv);
	if (!strcmp(c, "files"))
		return cmd_files();
	if (!strcmp(c, "clock"))
		return cmd_clock();
	if (!strcmp(c, "random"))
		return cmd_random();
	if (!strcmp(c, "cat"))
		return cmd_cat();
	if (!strcmp(c, "exit"))
		return atoi(argc > 2 ? argv[2] : "0");
	if (!strcmp(c, "escape"))
		return cmd_escape();
	if (!strcmp(c, "slash"))
		return cmd_slash();
	if (!strcmp(c, "nopreopen"))
		return cmd_nopreopen();
	if (!strcmp(c, "race"))
		return cmd_race(argc > 2 ? atoi(argv[2]) : 1000);
	if (!strcmp(c, "badptr"))
		return cmd_badptr();
	if (!strcmp(c, "rights"))
		return cmd_rights();
	if (!strcmp(c, "poll"))
		return cmd_poll();
	if (!strcmp(c, "bigfile")) { /* write N KiB, report how it ended */
		int fd = open("big.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		static char kib[1024];
		long n = argc > 2 ? atol(argv[2]) : 0, i;
		for (i = 0; i < n; i++)
			if (write(fd, kib, sizeof(kib)) != (ssize_t)sizeof(kib))
				break;
		printf("wrote=%ld errno=%s\n", i, i < n ? strerror(errno) : "none");
		return 0;
	}
	if (!strcmp(c, "mount")) {
		/* the matrix's mounts row: argv[2] a read-only mount, argv[3] a
		 * read-write one (seen before: a session's earlier exec wrote it) */
		const char *ro = argc > 3 ? argv[2] : "/data", *rw = argc > 3 ? argv[3] : "/rw";
		char p[512];
		struct stat st;
		printf("ro_read=%s\n", stat(ro, &st) == 0 && S_ISDIR(st.st_mode) ? "yes" : "no");
		snprintf(p, sizeof(p), "%s/kis-matrix-w", ro);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = errno;
		printf("ro_write=%s\n", fd >= 0 ? "ok" : e == EROFS ? "EROFS" : e == EACCES ? "EACCES" :
#ifdef ENOTCAPABLE
		       e == ENOTCAPABLE ? "ENOTCAPABLE" :
#endif
		       e == EPERM ? "EPERM" : "EOTHER");
		snprintf(p, sizeof(p), "%s/kis-matrix-m.txt", rw);
		printf("rw_seen=%s\n", stat(p, &st) == 0 ? "yes" : "no");
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		printf("rw_write=%s\n", fd >= 0 && write(fd, "m\n", 2) == 2 && close(fd) == 0 ? "ok" : "no");
		return 0;
	}
	if (!strcmp(c, "nofile")) { /* open N descriptors, report how many opened */
		long n = argc > 2 ? atol(argv[2]) : 0, i;
		for (i = 0; i < n; i++)
			if (open("nofile.txt", O_WRONLY | O_CREAT, 0644) < 0)
				break;
		printf("opened=%ld errno=%s\n", i, i == n ? "none" : errno == EMFILE ? "EMFILE" :
						      strerror(errno));
		return 0;
	}
	if (!strcmp(c, "env")) { /* NAME's value, or "unset" */
		const char *v = argc > 2 ? getenv(argv[2]) : NULL;
		return printf("%s\n", v ? v : "unset"), 0;
	}
	if (!strcmp(c, "misc"))
		return cmd_misc();
	if (!strcmp(c, "flood"))
		return cmd_flood();
	if (!strcmp(c, "recurse"))
		return sink = deep(0), 0;
	if (!strcmp(c, "malloc")) {
		size_t total = 0;
		char *p;
		while ((p = malloc(1 << 20)) != NULL) {
			keep = p; /* escapes, so the allocation is not optimised away */
			total += 1 << 20;
		}
		printf("allocated=%zu\n", total);
		return 3;
	}
	if (!strcmp(c, "spin"))
		for (;;)
			sink++;
	fprintf(stderr, "unknown command %s\n", c);
	return 64;
}
