/* SPDX-License-Identifier: MIT */
/* Path semantics, built twice from this one source: natively (gcc, run in a
 * scratch directory) and for wasm32-wasi (run through the wasm tier, where
 * the same relative names go to the preopen). Each line is one call on a
 * fresh tree and what it left; the test compares the two outputs, so a
 * WASI answer that is not Linux's shows as a differing line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* errno by name: WASI and Linux number them differently. */
static const char *ename(int e)
{
	static const struct {
		int e;
		const char *n;
	} t[] = {
		{EACCES, "EACCES"}, {EBADF, "EBADF"}, {EBUSY, "EBUSY"}, {EEXIST, "EEXIST"},
		{EINVAL, "EINVAL"}, {EISDIR, "EISDIR"}, {ELOOP, "ELOOP"}, {EMLINK, "EMLINK"},
		{ENOENT, "ENOENT"}, {ENOTDIR, "ENOTDIR"}, {ENOTEMPTY, "ENOTEMPTY"},
		{EPERM, "EPERM"}, {EXDEV, "EXDEV"}, {ENOTSUP, "ENOTSUP"}, {ENOTTY, "ENOTTY"},
		{ESPIPE, "ESPIPE"},
#ifdef ENOTCAPABLE
		{ENOTCAPABLE, "ENOTCAPABLE"},
#endif
	};
	static char other[32];
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].e == e)
			return t[i].n;
	snprintf(other, sizeof(other), "errno%d", e);
	return other;
}

/* Every name a call may make or leave. */
static const char *const names[] = {"f", "d", "e", "lf", "ld", "dl", "n", "new"};

static void rm_all(void)
{
	char in[32];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		/* a rename may have moved d, and its `inner`, to any name */
		snprintf(in, sizeof(in), "%s/inner", names[i]);
		unlink(in);
		if (unlink(names[i]) < 0)
			rmdir(names[i]);
	}
	unlink("nothing");
}

/* f: a file; d: a directory holding `inner`; e: an empty directory;
 * lf, ld: links to f and d; dl: a dangling link. */
static void fresh(void)
{
	rm_all();
	int fd = open("f", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, "f\n", 2) != 2)
			perror("write");
		close(fd);
	}
	mkdir("d", 0755);
	mkdir("e", 0755);
	fd = open("d/inner", O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	if (symlink("f", "lf") < 0 || symlink("d", "ld") < 0 || symlink("nothing", "dl") < 0)
		perror("symlink");
}

/* What the tree holds after a call: each name's type (F file, D directory,
 * L link, - absent), d's `inner`, and whether `nothing` was made. */
static void state(char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && k + 8 < cap; i++) {
		struct stat st;
		char c = '-';
		if (lstat(names[i], &st) == 0)
			c = S_ISLNK(st.st_mode) ? 'L' : S_ISDIR(st.st_mode) ? 'D' : 'F';
		k += (size_t)snprintf(out + k, cap - k, "%s%c ", names[i], c);
	}
	struct stat st;
	snprintf(out + k, cap - k, "inner%c nothing%c", lstat("d/inner", &st) == 0 ? '+' : '-',
		 lstat("nothing", &st) == 0 ? '+' : '-');
}

static void report(const char *what, int r)
{
	char s[128];
	int e = errno;
	state(s, sizeof(s));
	printf("%-28s %-10s | %s\n", what, r < 0 ? ename(e) : "ok", s);
}

static const char *const paths[] = {
	"f", "f/", "d", "d/", "e/", "lf", "lf/", "ld", "ld/", "dl", "dl/", "n", "n/",
	"f/.", "d/.", "d//", "ld//", "f/..", "d/inner/",
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

#define ONE(label, call)                    \
	do {                                \
		fresh();                    \
		errno = 0;                  \
		int r_ = (call);            \
		report(label, r_ < 0 ? -1 : 0); \
		if (r_ > 2)                 \
			close(r_);          \
	} while (0)

/* Calls on descriptors and whole files, each on a fresh tree. */
static void fd_calls(void)
{
	char b[64];
	struct stat st;
	int fd;

	fresh();
	fd = open("d", O_RDONLY | O_DIRECTORY);
	errno = 0;
	report("read a directory", (int)read(fd, b, sizeof(b)));
	close(fd);

	fresh();
	fd = open("f", O_RDWR);
	errno = 0;
	report("lseek -1", (int)lseek(fd, -1, SEEK_SET));
	report("lseek past the end", (int)lseek(fd, 100, SEEK_SET) == 100 ? 0 : -1);
	report("pread past the end", (int)pread(fd, b, sizeof(b), 1000));
	printf("%-28s %d\n", "pread past the end, bytes", (int)pread(fd, b, sizeof(b), 1000));
	report("pwrite at 10", (int)pwrite(fd, "xy", 2, 10));
	fstat(fd, &st);
	printf("%-28s %lld\n", "size after pwrite at 10", (long long)st.st_size);
	report("ftruncate 1", ftruncate(fd, 1));
	fstat(fd, &st);
	printf("%-28s %lld\n", "size after ftruncate 1", (long long)st.st_size);
	report("ftruncate -1", ftruncate(fd, -1));
	close(fd);

	fresh();
	fd = open("f", O_WRONLY | O_APPEND);
	lseek(fd, 0, SEEK_SET);
	report("append after lseek 0", (int)write(fd, "zz", 2));
	fstat(fd, &st);
	printf("%-28s %lld\n", "size after append", (long long)st.st_size);
	close(fd);

	fresh();
	fd = open("f", O_WRONLY | O_TRUNC);
	fstat(fd, &st);
	printf("%-28s %lld\n", "size after O_TRUNC", (long long)st.st_size);
	close(fd);

	const char *names3[] = {"f", "f/", "d", "ld/", "n", "dl"};
	for (size_t i = 0; i < sizeof(names3) / sizeof(names3[0]); i++) {
		char l[64];
		snprintf(l, sizeof(l), "truncate %s 1", names3[i]);
		fresh();
		errno = 0;
		report(l, truncate(names3[i], 1));
		snprintf(l, sizeof(l), "access %s", names3[i]);
		fresh();
		errno = 0;
		report(l, access(names3[i], F_OK));
		snprintf(l, sizeof(l), "create-dir %s", names3[i]);
		fresh();
		errno = 0;
		fd = open(names3[i], O_RDONLY | O_CREAT | O_DIRECTORY, 0644);
		report(l, fd);
		if (fd >= 0)
			close(fd);
	}

	fresh();
	fd = open("d", O_RDONLY | O_DIRECTORY);
	errno = 0;
	report("lseek a directory", (int)lseek(fd, 0, SEEK_SET));
	report("fstat a directory", fstat(fd, &st));
	report("fsync a directory", fsync(fd));
	report("fdatasync a directory", fdatasync(fd));
	report("write a directory", (int)write(fd, "x", 1));
	report("ftruncate a directory", ftruncate(fd, 0));
	close(fd);

	fresh();
	fd = open("f", O_RDONLY);
	errno = 0;
	report("write a read-only file", (int)write(fd, "x", 1));
	report("ftruncate a read-only file", ftruncate(fd, 0));
	report("fdatasync a read-only file", fdatasync(fd));
	report("isatty a file", isatty(fd) ? 0 : -1);
	close(fd);
	fd = open("f", O_WRONLY);
	errno = 0;
	report("read a write-only file", (int)read(fd, b, 1));
	report("fcntl O_APPEND", fcntl(fd, F_SETFL, O_APPEND));
	report("write after O_APPEND", (int)write(fd, "q", 1));
	fstat(fd, &st);
	printf("%-28s %lld\n", "size after fcntl O_APPEND", (long long)st.st_size);
	close(fd);
	errno = 0;
	report("close a closed fd", close(fd));
	report("fstat a closed fd", fstat(fd, &st));

	/* a directory's names, in any order */
	fresh();
	DIR *dir = opendir("d");
	struct dirent *e;
	int dots = 0, inner = 0, other = 0;
	while (dir && (e = readdir(dir)))
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			dots++;
		else if (!strcmp(e->d_name, "inner") && e->d_type == DT_REG)
			inner++;
		else
			other++;
	if (dir)
		closedir(dir);
	printf("%-28s dots=%d inner=%d other=%d\n", "readdir d", dots, inner, other);
}

int main(void)
{
	char l[64];
	struct stat st;
	char buf[32];
	const struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
	for (size_t i = 0; i < NPATHS; i++) {
		const char *p = paths[i];
		snprintf(l, sizeof(l), "unlink %s", p);
		ONE(l, unlink(p));
		snprintf(l, sizeof(l), "rmdir %s", p);
		ONE(l, rmdir(p));
		snprintf(l, sizeof(l), "mkdir %s", p);
		ONE(l, mkdir(p, 0755));
		snprintf(l, sizeof(l), "open %s", p);
		ONE(l, open(p, O_RDONLY));
		snprintf(l, sizeof(l), "open-dir %s", p);
		ONE(l, open(p, O_RDONLY | O_DIRECTORY));
		snprintf(l, sizeof(l), "open-nofollow %s", p);
		ONE(l, open(p, O_RDONLY | O_NOFOLLOW));
		snprintf(l, sizeof(l), "create %s", p);
		ONE(l, open(p, O_WRONLY | O_CREAT, 0644));
		snprintf(l, sizeof(l), "create-excl %s", p);
		ONE(l, open(p, O_WRONLY | O_CREAT | O_EXCL, 0644));
		snprintf(l, sizeof(l), "stat %s", p);
		ONE(l, stat(p, &st));
		snprintf(l, sizeof(l), "lstat %s", p);
		ONE(l, lstat(p, &st));
		snprintf(l, sizeof(l), "readlink %s", p);
		ONE(l, (int)readlink(p, buf, sizeof(buf)));
		snprintf(l, sizeof(l), "utimens %s", p);
		ONE(l, utimensat(AT_FDCWD, p, ts, 0));
		snprintf(l, sizeof(l), "utimens-nofollow %s", p);
		ONE(l, utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW));
		snprintf(l, sizeof(l), "symlink x %s", p);
		ONE(l, symlink("x", p));
		snprintf(l, sizeof(l), "link f %s", p);
		ONE(l, link("f", p));
		snprintf(l, sizeof(l), "link %s new", p);
		ONE(l, link(p, "new"));
		snprintf(l, sizeof(l), "rename %s new", p);
		ONE(l, rename(p, "new"));
		snprintf(l, sizeof(l), "rename %s new/", p);
		ONE(l, rename(p, "new/"));
		snprintf(l, sizeof(l), "rename f %s", p);
		ONE(l, rename("f", p));
		snprintf(l, sizeof(l), "rename e %s", p);
		ONE(l, rename("e", p));
		snprintf(l, sizeof(l), "rename e/ %s", p);
		ONE(l, rename("e/", p));
	}
	fd_calls();
	rm_all();
	return 0;
}
