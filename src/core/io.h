/* SPDX-License-Identifier: MIT */
/* Small shared helpers: whole writes, captured streams, NULL-terminated
 * string vectors (argv, envp), used by engine, backends and agent alike. */
#ifndef KIS_CORE_IO_H
#define KIS_CORE_IO_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "kis/result.h"

/* Write all n bytes, retrying on EINTR and short writes. 0, or -1 + errno
 * (a reader that went away is the caller's to judge). */
int kis_write_all(int fd, const void *buf, size_t n);
/* The directory of the running executable (/proc/self/exe, read once a
 * process), or NULL when it cannot be read. */
const char *kis_exe_dir(void);
/* kis-helper, the dynamic half of the static CLI (src/helper/main.c): its
 * path into out, 0, or -1 if it is nowhere; and where install puts it. */
int kis_helper_path(char *out, size_t len);
const char *kis_helper_installed(void);
/* Exactly n bytes: 0, or -1 with errno (EPIPE at an early end of file). */
int kis_read_all(int fd, void *buf, size_t n);
/* Append to a captured stream, keeping it NUL-terminated. -1 on ENOMEM. */
int kis_stream_append(struct kis_stream *s, const void *buf, size_t n);

/* A private anonymous read-write mapping of at least len bytes, the first
 * len made present in one call (a page first written is a fault each, one
 * populated ~1 us here). One of KIS_MAP_HUGE_MIN bytes or more starts on
 * a 2 MiB boundary, is rounded up to whole 2 MiB and advised
 * MADV_HUGEPAGE: under this machine's hypervisor a 4 KiB page first
 * touched by a process costs ~5-12 us, a huge page about as much once.
 * *map_len is what to munmap. MAP_FAILED with errno on failure. */
#define KIS_MAP_HUGE_MIN ((size_t)512 << 10)
void *kis_map_populated(size_t len, size_t *map_len);

/* A directory stream on a duplicate of fd, which stays the caller's; NULL
 * with errno set on failure. */
DIR *kis_opendir_dup(int fd);

/* A process's start time (proc(5), /proc/PID/stat field 22, in clock
 * ticks since boot): with the pid it names one process even after the pid
 * is reused. 0 when the process is gone. */
unsigned long long kis_proc_starttime(pid_t pid);

/* CLOCK_MONOTONIC in milliseconds: the one clock of every deadline and
 * wall-time measure of the engine. */
uint64_t kis_monotonic_ms(void);

/* A NULL-terminated argument vector being built: the one argv builder
 * (issue 20). A failed allocation is remembered (oom) and makes every
 * later add a no-op, so the caller checks once, at the end. */
struct kis_argv {
	char **v;
	size_t n, cap;
	bool oom;
};
void kis_argv_add(struct kis_argv *a, const char *s);
void kis_argv_release(struct kis_argv *a);

void kis_strv_free(char **v);
/* A deep copy; NULL on ENOMEM. */
char **kis_strv_dup(char *const *v);
/* Append a copy of s to *v (holding *n strings). -1 on ENOMEM. */
int kis_strv_push(char ***v, size_t *n, const char *s);
/* A JSON array of the strings. */
json_t *kis_strv_json(char *const *v);

#endif
