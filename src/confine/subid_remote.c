/* SPDX-License-Identifier: MIT */
/* The subordinate-id lookup of the static `kis` (linked in place of
 * subid_lib.c): libsubid is a shared object and the user's name comes from
 * NSS, neither of which a static program can load, so kis-helper (dynamic,
 * src/helper/main.c) does the lookup of subid_lib.c and prints the four
 * numbers. Only a rootless run that maps an id range asks, once. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine/confine.h"
#include "core/io.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool asked, found;
static uid_t asked_uid;
static struct kis_subids cached;

static bool ask_helper(uid_t uid, struct kis_subids *out)
{
	char path[PATH_MAX], arg[16];
	if (kis_helper_path(path, sizeof(path)) < 0)
		return false;
	snprintf(arg, sizeof(arg), "%u", (unsigned)uid);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return false;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t pid = null < 0 ? -1 : fork();
	if (pid == 0) {
		char *argv[] = {"kis-helper", "subids", arg, NULL};
		char *envp[] = {NULL};
		if (dup2(null, 0) < 0 || dup2(p[1], 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		execve(path, argv, envp);
		_exit(127);
	}
	close(p[1]);
	if (null >= 0)
		close(null);
	if (pid < 0) {
		close(p[0]);
		return false;
	}
	char buf[128];
	size_t n = 0;
	for (;;) {
		ssize_t r = RETRY_EINTR(read(p[0], buf + n, sizeof(buf) - 1 - n));
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof(buf) - 1)
			break;
	}
	buf[n] = 0;
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return false;
	struct kis_subids s;
	char end;
	if (sscanf(buf, "%lu %lu %lu %lu%c", &s.uid_start, &s.uid_count, &s.gid_start,
		   &s.gid_count, &end) != 5 || end != '\n')
		return false;
	/* the same bounds as subid_lib.c's first_range */
	if (!s.uid_count || !s.gid_count || !s.uid_start || !s.gid_start ||
	    s.uid_count > 65536 || s.gid_count > 65536 || s.uid_start + s.uid_count > 0xffffffffUL ||
	    s.gid_start + s.gid_count > 0xffffffffUL)
		return false;
	*out = s;
	return true;
}

bool kis_subids_lookup(uid_t uid, struct kis_subids *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&lock);
	if (!asked || asked_uid != uid) {
		found = ask_helper(uid, &cached);
		asked = true;
		asked_uid = uid;
	}
	bool ok = found;
	if (ok)
		*out = cached;
	pthread_mutex_unlock(&lock);
	return ok;
}
