/* SPDX-License-Identifier: MIT */
/* kis-runtime exec: a process in a running container, from --process FILE
 * or from arguments, with its capabilities checked as create's are. */
#include "util.h"

#include <fcntl.h>
#include <string.h>

#include "runtime/runtime.h"

/* runc exec --help and crun exec --help. --cap is checked against the
 * same list as config.json's process.capabilities. */
static const struct krt_opt exec_opts[] = {
	{"process", 'p', true, KRT_OPT_PROCESS, NULL},
	{"console-socket", 0, true, KRT_OPT_PASS, NULL},
	{"pid-file", 0, true, KRT_OPT_PASS, NULL},
	{"preserve-fds", 0, true, KRT_OPT_PRESERVE, NULL},
	{"cwd", 0, true, KRT_OPT_PASS, NULL},
	{"env", 'e', true, KRT_OPT_PASS, NULL},
	{"user", 'u', true, KRT_OPT_PASS, NULL},
	{"additional-gids", 'g', true, KRT_OPT_PASS, NULL},
	{"cap", 'c', true, KRT_OPT_CAP, NULL},
	{"process-label", 0, true, KRT_OPT_PASS, NULL},
	{"apparmor", 0, true, KRT_OPT_PASS, NULL},
	{"cgroup", 0, true, KRT_OPT_PASS, NULL},
	{"tty", 't', false, KRT_OPT_PASS, NULL},
	{"detach", 'd', false, KRT_OPT_PASS, NULL},
	{"no-new-privs", 0, false, KRT_OPT_PASS, NULL},
	{"no-subreaper", 0, false, KRT_OPT_PASS, NULL},
	{NULL, 0, false, KRT_OPT_PASS, NULL},
};

int krt_cmd_exec(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	struct krt_parsed p;
	int r = krt_parse(exec_opts, argc, argv, &p, err);
	struct krt_argv a = {0};
	json_t *proc = NULL;
	if (r < 0)
		goto out;
	r = -1;
	if (p.pos.n < 1 || (!p.process && p.pos.n < 2)) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
			      "exec takes a container id and a command, or --process FILE");
		goto out;
	}
	char procpath[64] = "";
	if (p.process) {
		/* read once, checked, and handed to crun as that same copy:
		 * nothing can change the file between the check and crun */
		_cleanup_close_ int fd = open(p.process, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0) {
			kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno, "cannot open '%s'",
				      p.process);
			goto out;
		}
		json_error_t je;
		proc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
		if (!proc || !json_is_object(proc)) {
			kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "'%s': %s", p.process,
				      proc ? "not an object" : je.text);
			goto out;
		}
		if (krt_policy_process(proc, "process", err) < 0)
			goto out;
		/* as create's process: no privilege gained through setuid */
		if (json_object_set_new(proc, "noNewPrivileges", json_true()) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "process");
			goto out;
		}
		int pfd = krt_memfd_json(proc, 3 + (int)p.preserve_fds, err);
		if (pfd < 0)
			goto out;
		snprintf(procpath, sizeof(procpath), "/proc/self/fd/%d", pfd);
	}
	if (krt_crun_begin(&a, g, err) < 0 || krt_argv_push(&a, "exec", err) < 0)
		goto out;
	for (size_t i = 0; i < p.pass.n; i++)
		if (krt_argv_push(&a, p.pass.v[i], err) < 0)
			goto out;
	/* exec with arguments: crun does not take the container's
	 * noNewPrivileges for it; ask, as create's process has it */
	if (!procpath[0] && krt_argv_push(&a, "--no-new-privs", err) < 0)
		goto out;
	if (procpath[0] &&
	    (krt_argv_push(&a, "--process", err) < 0 || krt_argv_push(&a, procpath, err) < 0))
		goto out;
	if (krt_argv_push(&a, "--", err) < 0)
		goto out;
	for (size_t i = 0; i < p.pos.n; i++)
		if (krt_argv_push(&a, p.pos.v[i], err) < 0)
			goto out;
	r = krt_crun_exec(&a, err);
out:
	json_decref(proc);
	krt_argv_release(&a);
	krt_parsed_release(&p);
	return r < 0 ? -1 : r;
}
