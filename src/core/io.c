/* SPDX-License-Identifier: MIT */
/* Whole writes, captured streams and string vectors (see io.h). */
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include "core/io.h"

int kis_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = RETRY_EINTR(read(fd, p, n));
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = EPIPE; /* the other end went before all came */
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int kis_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = RETRY_EINTR(write(fd, p, n));
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int kis_stream_append(struct kis_stream *s, const void *buf, size_t n)
{
	if (s->len + n + 1 > s->cap) {
		/* Doubling up to 8 MiB, then 8 MiB steps: a capture costs at most
		 * 8 MiB over its size (not up to twice it), and glibc grows a block
		 * that large with mremap(2), so the steps copy nothing. */
		size_t need = s->len + n + 1, cap = s->cap ? s->cap : 4096;
		while (cap < need)
			cap += cap < ((size_t)8 << 20) ? cap : ((size_t)8 << 20);
		char *g = realloc(s->data, cap);
		if (!g)
			return -1;
		s->data = g;
		s->cap = cap;
	}
	memcpy(s->data + s->len, buf, n);
	s->len += n;
	s->data[s->len] = '\0';
	return 0;
}

void kis_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char **kis_strv_dup(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **d = calloc(n + 1, sizeof(*d));
	for (size_t i = 0; d && i < n; i++)
		if (!(d[i] = strdup(v[i]))) {
			kis_strv_free(d);
			return NULL;
		}
	return d;
}

int kis_strv_push(char ***v, size_t *n, const char *s)
{
	char **g = realloc(*v, (*n + 2) * sizeof(**v));
	if (!g)
		return -1;
	*v = g;
	if (!(g[*n] = strdup(s)))
		return -1;
	g[++*n] = NULL;
	return 0;
}

json_t *kis_strv_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

DIR *kis_opendir_dup(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir && d >= 0) {
		int e = errno;
		close(d);
		errno = e;
	}
	return dir;
}

unsigned long long kis_proc_starttime(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* field 22, counted after the ')' that ends comm (which may hold spaces) */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	int field = 2;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, NULL, 10);
}

/* CLOCK_MONOTONIC in ms: the one clock of the engine's deadlines. */
uint64_t kis_monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void kis_argv_add(struct kis_argv *a, const char *s)
{
	if (a->oom)
		return;
	if (a->n + 2 > a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		char **nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv) {
			a->oom = true;
			return;
		}
		a->v = nv;
		a->cap = nc;
	}
	if (!(a->v[a->n] = strdup(s))) {
		a->oom = true;
		return;
	}
	a->v[++a->n] = NULL;
}

void kis_argv_release(struct kis_argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

#ifndef KIS_HELPER
#define KIS_HELPER "/usr/local/lib/kis/kis-helper"
#endif

const char *kis_helper_installed(void)
{
	return KIS_HELPER;
}

/* Read once a process (readlink of /proc costs ~15 us here, and a run
 * asks several times); a fork keeps it, an exec reads it anew. */
static char exe_dir[PATH_MAX];
static pthread_once_t exe_once = PTHREAD_ONCE_INIT;

static void find_exe_dir(void)
{
	char exe[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l <= 0)
		return;
	exe[l] = 0;
	char *slash = strrchr(exe, '/');
	if (slash && slash != exe) {
		*slash = 0;
		snprintf(exe_dir, sizeof(exe_dir), "%s", exe);
	}
}

const char *kis_exe_dir(void)
{
	pthread_once(&exe_once, find_exe_dir);
	return exe_dir[0] ? exe_dir : NULL;
}

/* kis-helper beside the program (the build tree), in lib/kis beside its
 * bin (an installed tree), or where `make install` put it (fixed at build
 * time); from the program's own path, never the environment's: kis runs
 * it as whoever runs kis, root included. */
int kis_helper_path(char *out, size_t len)
{
	const char *dir = kis_exe_dir();
	if (dir) {
		snprintf(out, len, "%.4000s/kis-helper", dir);
		if (access(out, X_OK) == 0)
			return 0;
		snprintf(out, len, "%.4000s/../lib/kis/kis-helper", dir);
		if (access(out, X_OK) == 0)
			return 0;
	}
	snprintf(out, len, "%s", KIS_HELPER);
	return access(out, X_OK) == 0 ? 0 : -1;
}

void *kis_map_populated(size_t len, size_t *map_len)
{
	const size_t huge = (size_t)2 << 20;
	*map_len = len;
	if (len < KIS_MAP_HUGE_MIN)
		return mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (len > SIZE_MAX - 2 * huge) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	size_t size = (len + huge - 1) & ~(huge - 1);
	uint8_t *p = mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	if (p == MAP_FAILED)
		return p;
	uint8_t *a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + size, (size_t)(p + huge - a));
	/* advice only: without THP (or with it off) the pages are small,
	 * and MADV_POPULATE_WRITE (Linux 5.14) missing leaves them to fault
	 * in as written, as before */
	madvise(a, size, MADV_HUGEPAGE);
	madvise(a, len, MADV_POPULATE_WRITE);
	*map_len = size;
	return a;
}
