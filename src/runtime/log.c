/* SPDX-License-Identifier: MIT */
/* kis-runtime: reporting a refusal or failure once, on stderr and in the
 * --log file in the format runc and crun write (what the engines read). */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"

void krt_now(char out[KRT_STAMP_LEN])
{
	/* RFC 3339 in UTC with nanoseconds, as runc and crun write the state's
	 * "created" (runtime-spec runtime.md "State") and their logs */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[48];
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, KRT_STAMP_LEN, "%s.%09ldZ", when, ts.tv_nsec);
}

void krt_log_error(const struct krt_globals *g, const struct kis_error *e)
{
	_cleanup_free_ char *msg = kis_error_format(e);
	const char *m = msg ? msg : "internal: out of memory";
	fprintf(stderr, "kis-runtime: %s\n", m);
	if (!g || !g->log)
		return;
	/* the log is the engine's file (containerd's log.json, conmon's):
	 * appended to, never followed through a symlink */
	_cleanup_close_ int fd =
		open(g->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	char stamp[KRT_STAMP_LEN];
	krt_now(stamp);
	_cleanup_free_ char *line = NULL;
	if (g->log_json) {
		json_t *o = json_pack("{s:s,s:s,s:s}", "level", "error", "msg", m, "time", stamp);
		line = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
	} else if (asprintf(&line, "%s error: %s", stamp, m) < 0) {
		line = NULL;
	}
	if (!line)
		return;
	size_t len = strlen(line);
	/* one write per line: concurrent writers do not interleave (O_APPEND) */
	_cleanup_free_ char *nl = malloc(len + 2);
	if (!nl)
		return;
	memcpy(nl, line, len);
	nl[len] = '\n';
	if (write(fd, nl, len + 1) < 0)
		return;
}
