/* SPDX-License-Identifier: MIT */
/* kis-runtime exec: a process in a running container, from --process FILE
 * or from arguments, with its capabilities checked as create's are. */
#include "core/util.h"

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

static json_t *load_process(const char *path, struct kis_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno, "cannot open '%s'", path);
		return NULL;
	}
	json_error_t je;
	json_t *proc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	if (!proc || !json_is_object(proc)) {
		kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "'%s': %s", path,
			      proc ? "not an object" : je.text);
		json_decref(proc);
		return NULL;
	}
	json_t *model = NULL;
	int r = krt_model_process(proc, &model, err);
	json_decref(proc);
	if (r < 0 || krt_policy_process(model, "process", err) < 0) {
		json_decref(model);
		return NULL;
	}
	return model;
}

/* exec into a host-tier container: the process from --process, or the
 * container's own with the arguments and flags over it. */
static int host_exec(const struct krt_globals *g, const struct krt_parsed *p,
		     struct kis_error **err)
{
	const char *id = p->pos.v[0];
	bool mvm = krt_mvm_owns(g, id);
	json_t *proc = p->process ? load_process(p->process, err)
		       : mvm      ? krt_mvm_base_process(g, id)
				  : krt_host_base_process(g, id);
	if (!proc)
		return *err ? -1
			    : kis_error_set(err, KIS_E_NOT_FOUND, 0, "container '%s' has no process",
					    id);
	/* a host-tier container's own process, read back from its
	 * state.json: its capabilities checked again as a --process file's
	 * are (the microvm tier's bound nothing on the host: the guest is
	 * the boundary) */
	int r = p->process || mvm ? 0 : krt_policy_process(proc, "state.json's process", err);
	if (!p->process && r >= 0) {
		json_t *args = json_array();
		for (size_t i = 1; args && i < p->pos.n; i++)
			json_array_append_new(args, json_string(p->pos.v[i]));
		json_object_set_new(proc, "args", args);
		json_object_set_new(proc, "terminal", json_boolean(krt_parsed_has(p, "tty")));
		const char *cwd = krt_parsed_value(p, "cwd");
		if (cwd)
			json_object_set_new(proc, "cwd", json_string(cwd));
		json_t *env = json_object_get(proc, "env");
		json_t *caps = json_object_get(proc, "capabilities");
		for (size_t i = 0; i + 1 < p->pass.n && r >= 0; i++) {
			const char *f = p->pass.v[i], *v = p->pass.v[i + 1];
			if (strcmp(f, "--env") == 0 && json_is_array(env))
				json_array_append_new(env, json_string(v));
			else if (strcmp(f, "--cap") == 0 && json_is_object(caps))
				json_array_append_new(json_object_get(caps, "bounding"),
						      json_string(v));
			else if (strcmp(f, "--user") == 0 && strcmp(v, "0") != 0 &&
				 strcmp(v, "0:0") != 0)
				r = kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
						  "exec --user '%s': the %s tier runs as root "
						  "only (run.kis.tier '%s')",
						  v, mvm ? "microvm" : "host", mvm ? "microvm" : "host");
		}
	}
	struct krt_host_opts ho = {
		.pid_file = krt_parsed_value(p, "pid-file"),
		.console_socket = krt_parsed_value(p, "console-socket"),
		.preserve_fds = p->preserve_fds,
		.detach = krt_parsed_has(p, "detach"),
	};
	if (r >= 0)
		r = mvm ? krt_mvm_exec(g, id, proc, &ho, err) : krt_host_exec(g, id, proc, &ho, err);
	json_decref(proc);
	return r;
}

int krt_cmd_exec(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	struct krt_parsed p;
	int r = krt_parse(exec_opts, argc, argv, &p, err);
	struct kis_argv a = {0};
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
	if (krt_valid_id(p.pos.v[0], err) < 0)
		goto out;
	if (krt_host_owns(g, p.pos.v[0]) || krt_mvm_owns(g, p.pos.v[0])) {
		r = host_exec(g, &p, err);
		goto out;
	}
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
		json_t *raw = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
		if (!raw || !json_is_object(raw)) {
			kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "'%s': %s", p.process,
				      raw ? "not an object" : je.text);
			json_decref(raw);
			goto out;
		}
		/* only the modelled fields reach crun */
		int mr = krt_model_process(raw, &proc, err);
		json_decref(raw);
		if (mr < 0 || krt_policy_process(proc, "process", err) < 0)
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
	kis_argv_release(&a);
	krt_parsed_release(&p);
	return r < 0 ? -1 : r;
}
