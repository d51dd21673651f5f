/* SPDX-License-Identifier: MIT */
/* kis-runtime: reporting a refusal or failure once, on stderr and in the
 * --log file in the format runc and crun write (what the engines read). */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
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

/* One line of the --log file in its format: {"level","msg","time"} (json)
 * or "TIME LEVEL: msg" (text), in one write (O_APPEND: concurrent
 * writers do not interleave), never through a symbolic link. */
static void log_line(const struct krt_globals *g, const char *level, const char *m)
{
	_cleanup_close_ int fd =
		open(g->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	char stamp[KRT_STAMP_LEN];
	krt_now(stamp);
	_cleanup_free_ char *line = NULL;
	if (g->log_json) {
		json_t *o = json_pack("{s:s,s:s,s:s}", "level", level, "msg", m, "time", stamp);
		line = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
	} else if (asprintf(&line, "%s %s: %s", stamp, level, m) < 0) {
		line = NULL;
	}
	if (!line)
		return;
	size_t len = strlen(line);
	_cleanup_free_ char *nl = malloc(len + 2);
	if (!nl)
		return;
	memcpy(nl, line, len);
	nl[len] = '\n';
	if (write(fd, nl, len + 1) < 0)
		return;
}

void krt_log_error(const struct krt_globals *g, const struct kis_error *e)
{
	_cleanup_free_ char *msg = kis_error_format(e);
	const char *m = msg ? msg : "internal: out of memory";
	fprintf(stderr, "kis-runtime: %s\n", m);
	/* the log is the engine's file (containerd's log.json, conmon's) */
	if (g && g->log)
		log_line(g, "error", m);
}

/* The sink's globals: the process's one (main's), set once */
static const struct krt_globals *sink_g;

static void to_log(enum kis_log_level l, const char *msg)
{
	/* runc's and logrus's names; the engines read only "error" lines */
	log_line(sink_g, l == KIS_LOG_WARN ? "warning" : kis_log_level_name(l), msg);
}

int krt_log_setup(const struct krt_globals *g, struct kis_error **err)
{
	const char *what = "--log-level", *v = g->log_level;
	if (!v && g->debug) {
		v = "debug";
		what = "--debug";
	}
	TRY(kis_log_configure(v, what, KIS_LOG_WARN, err));
	if (g->log) {
		sink_g = g;
		kis_log_set_sink(to_log);
	}
	return 0;
}
