/* SPDX-License-Identifier: MIT */
/* A container's host cgroup leaves, each noted in its state directory as
 * it is made, and the sweep of a killed create's: the host tier's groups
 * (host.c) and a kis-vm app's proxy leaf (mvm.c), one way for both. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "confine/confine.h"
#include "core/log.h"
#include "core/record.h"
#include "runtime/runtime.h"

/* The container's groups: confine/cgroup.c (make_leaf) notes each leaf
 * here, in its state directory, before making it; a create killed after
 * that leaves the note, which delete sweeps (krt_cgroup_sweep_noted) */
#define NOTED "cgroups.noted"

const char *krt_cgroups_path(json_t *doc)
{
	/* runc's cgroupfs driver: a path from each hierarchy's root when it
	 * begins with '/'; model.c has refused '.', '..' and empty parts */
	const char *p = json_string_value(json_object_get(json_object_get(doc, "linux"),
							  "cgroupsPath"));
	return p && p[0] == '/' && p[1] ? p : NULL;
}

int krt_cgroup_name(char *out, size_t len, struct kis_error **err)
{
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return kis_error_set(err, KIS_E_INTERNAL, errno, "getrandom");
	snprintf(out, len, "krt-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	return 0;
}

int krt_cgroup_make_noted(int dfd, const char *cgname, const struct kis_limits *lim,
			  const struct kis_cgroup_opts *o, struct kis_cgroup **out,
			  struct kis_error **err)
{
	_cleanup_close_ int fd = openat(dfd, NOTED, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
							 O_NOFOLLOW, 0600);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot make " NOTED);
	struct kis_record_sink sink;
	kis_record_init(&sink, fd, cgname);
	kis_record_push(&sink);
	/* each leaf is noted (confine/cgroup.c, make_leaf): "absent" when
	 * nothing was at its path, "cgroup" before its mkdir, "made" right
	 * after it succeeded. A leaf at a cgroupsPath may have been another's
	 * when its "cgroup" line was written (mkdir's EEXIST): the sweep
	 * kills and removes what a "made" line names; a leaf noted "absent"
	 * with no "made" (a kill during the mkdir, a v1 memory group's takes
	 * milliseconds: test_runtime.py, killed anywhere, hit it) it only
	 * removes when empty. */
	int r = kis_cgroup_create_with(cgname, lim, o, out, err);
	kis_record_pop(&sink);
	return r;
}

/* The groups NOTED names that a killed create left (or a container's
 * whole life: delete ends them here): killed and removed. Taken only
 * under /sys/fs/cgroup/ with no '..', and only a group known to be ours:
 * a "made" line names it, or its name is krt-<random> (ours by name,
 * krt_cgroup_name's), noted before its mkdir; one noted "absent" and not
 * "made" is removed only when empty. The note is a file in the
 * state directory: each path is checked as create's cgroupsPath was
 * (kis_cgroup_path_ok: no empty, "." or ".." part, no hierarchy's root)
 * before the destroy that kills what the group holds. */
void krt_cgroup_sweep_noted(int dfd)
{
	int fd = openat(dfd, NOTED, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char line[PATH_MAX + 16], made[16][PATH_MAX / 4], absent[16][PATH_MAX / 4];
	size_t n_made = 0, n_absent = 0;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		if (n > 5 && line[n - 1] == '\n' && !strncmp(line, "made ", 5) && n_made < 16 &&
		    n - 5 < sizeof(made[0])) {
			line[n - 1] = '\0';
			memcpy(made[n_made++], line + 5, n - 5); /* with its NUL */
		} else if (n > 7 && line[n - 1] == '\n' && !strncmp(line, "absent ", 7) &&
			   n_absent < 16 && n - 7 < sizeof(absent[0])) {
			line[n - 1] = '\0';
			memcpy(absent[n_absent++], line + 7, n - 7);
		}
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		/* a line cut by the kill has no newline: its mkdir never ran */
		if (n < 2 || line[n - 1] != '\n' || strncmp(line, "cgroup /sys/fs/cgroup/", 22))
			continue;
		line[n - 1] = '\0';
		char *path = line + 7;
		const char *base = strrchr(path, '/');
		bool ours = base && !strncmp(base, "/krt-", 5);
		for (size_t i = 0; !ours && i < n_made; i++)
			ours = !strcmp(made[i], path);
		if (!kis_cgroup_path_ok(path) || access(path, F_OK) < 0)
			continue;
		bool fresh = false;
		for (size_t i = 0; !ours && !fresh && i < n_absent; i++)
			fresh = !strcmp(absent[i], path);
		if (!ours) {
			/* absent before, killed before "made": most likely
			 * ours, but another's made in that instant is not
			 * ruled out, so nothing in it is killed and rmdir(2)
			 * refuses a group with a process or a child */
			if (fresh && rmdir(path) == 0)
				kis_debug("a container's empty cgroup %s: removed", path);
			continue;
		}
		struct kis_cgroup *cg = calloc(1, sizeof(*cg));
		if (!cg || !(cg->dirs[0] = strdup(path))) {
			free(cg);
			continue;
		}
		cg->mode = kis_cgroup_detect();
		kis_debug("a container's cgroup %s: removed", path);
		kis_cgroup_destroy(cg, NULL);
		/* kis's own parent goes when empty, as destroy's would */
		char *slash = strrchr(path, '/');
		if (slash) {
			*slash = '\0';
			const char *up = strrchr(path, '/');
			if (up && !strcmp(up, "/kis"))
				(void)rmdir(path);
		}
	}
	unlinkat(dfd, NOTED, 0);
}
