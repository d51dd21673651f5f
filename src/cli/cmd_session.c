/* SPDX-License-Identifier: MIT */
/* `kis sandbox create`, `exec`, `shell` and `session list|destroy` (the first
 * three under `session` too): sessions that outlive a command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "flags.h"
#include "session_io.h"

int cmd_create(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		puts("Usage: kis sandbox create [OPTIONS]\n\n"
		     "Create a session: a sandbox that outlives its commands, with a durable\n"
		     "working directory and environment. Prints the session id. The session\n"
		     "survives this client; end it with 'kis sandbox session destroy ID'.\n\n"
		     "Options (the profile of the session):");
		cli_flags_help(stdout, CLI_V_CREATE);
		return 0;
	}
	struct cli_opts o = {0};
	kis_profile_init(&o.profile);
	int rc = cli_parse_profile_flags("create", argc, argv, &o);
	if (!rc && o.cmd_index < argc)
		rc = cli_usage_error("create", "create takes no command; use 'kis sandbox exec'");
	if (rc) {
		kis_profile_release(&o.profile);
		return rc;
	}
	struct kis_run_options ro = {.io = {.stdin_fd = -1, .cancel_fd = -1},
				     .store_root = o.store_root, .progress = cli_progress_line};
	char id[KIS_ID_BUFSZ];
	struct kis_error *err = NULL;
	if (o.dry_run) {
		/* print the plan; create and start nothing, as run --dry-run */
		char *plan = NULL;
		int r = kis_session_plan(&o.profile, &ro, &plan, &err);
		kis_profile_release(&o.profile);
		if (r < 0)
			return cli_fail(err);
		r = o.json ? cli_print_json_text(plan) : printf("%s\n", plan) < 0;
		free(plan);
		return r;
	}
	int r = kis_session_create(&o.profile, &ro, id, &err);
	kis_profile_release(&o.profile);
	if (r < 0)
		return cli_fail(err);
	if (o.json) /* an object's own id is "id" (README) */
		return cli_print_json(json_pack("{s:s}", "id", id));
	else
		printf("%s\n", id);
	return 0;
}

/* Options of exec and shell: the subset of the one flags table
 * (flags.c) that applies to one command in a session. */
static int parse_exec_flags(const char *verb, unsigned vbit, int argc, char **argv,
			    struct cli_opts *f)
{
	kis_profile_init(&f->profile);
	int rc = cli_parse_flags(verb, vbit, argc, argv, f);
	if (rc)
		return rc;
	if (!f->id)
		return cli_usage_error(verb, "which session? give its id (see 'kis sandbox session list')");
	return 0;
}

static void exec_flags_options(struct cli_opts *f, struct cli_term *t, struct kis_exec_options *o)
{
	memset(o, 0, sizeof(*o));
	cli_term_exec_options(t, f->profile.tty.enabled, f->json, o);
	o->env = NULL;
	o->cwd = f->profile.cwd;
	o->limits = f->profile.limits;
	o->store_root = f->store_root;
}

static int print_result(struct kis_result *res, bool json, const char *line)
{
	int status = kis_result_exit_status(res);
	if (json)
		cli_print_result(res, line);
	else
		cli_say_ending(res);
	fflush(stdout);
	return status;
}

int cmd_exec(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		puts("Usage: kis sandbox exec ID [OPTIONS] -- CMD...\n\n"
		     "Run a command in session ID. It starts in the session's working directory\n"
		     "and environment (as the durable shell left them); --env adds to that\n"
		     "environment for this command only. --tty gives it a real terminal inside\n"
		     "the sandbox, sized like yours and resized with it. Exit status as for run.\n"
		     "Memory and pids are the session's (set at create).\n\n"
		     "Options:");
		cli_flags_help(stdout, CLI_V_EXEC);
		return 0;
	}
	struct cli_opts f = {0};
	int rc = parse_exec_flags("exec", CLI_V_EXEC, argc, argv, &f);
	if (rc) {
		kis_profile_release(&f.profile);
		return rc;
	}
	if (f.cmd_index >= argc) {
		kis_profile_release(&f.profile);
		return cli_usage_error("exec", "no command: give it after '--'");
	}
	struct cli_term t;
	cli_term_setup(&t, f.profile.tty.enabled);
	struct kis_exec_options o;
	exec_flags_options(&f, &t, &o);
	char **argv_cmd = argv + f.cmd_index;
	o.env_add = f.profile.n_env ? f.profile.env : NULL; /* this command's own variables */
	struct kis_result res;
	kis_result_init(&res);
	struct kis_error *err = NULL;
	int r = kis_session_exec(f.id, argv_cmd, &o, &res, &err);
	cli_term_restore(&t);
	kis_profile_release(&f.profile);
	if (r < 0) {
		kis_result_release(&res);
		return cli_fail(err);
	}
	int status = print_result(&res, f.json, NULL);
	kis_result_release(&res);
	return status;
}

int cmd_shell(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		puts("Usage: kis sandbox shell ID [--tty] [--json]\n\n"
		     "A durable shell in session ID: reads lines from stdin and runs them one\n"
		     "by one with /bin/sh inside the sandbox. The working directory and the\n"
		     "exported environment a line leaves ('cd /tmp', 'export X=1') are there\n"
		     "for the next line and for later 'kis sandbox exec' commands. Each line's\n"
		     "exit status is shown on stderr when it is not 0; --json prints one result\n"
		     "per line. With --tty, an interactive shell on a real terminal instead.\n"
		     "Exits with the status of the last line.\n\n"
		     "Options:");
		cli_flags_help(stdout, CLI_V_SHELL);
		return 0;
	}
	struct cli_opts f = {0};
	int rc = parse_exec_flags("shell", CLI_V_SHELL, argc, argv, &f);
	if (!rc && f.cmd_index < argc)
		rc = cli_usage_error("shell", "shell takes no command: it reads lines from stdin");
	if (rc) {
		kis_profile_release(&f.profile);
		return rc;
	}
	struct cli_term t;
	cli_term_setup(&t, f.profile.tty.enabled);
	struct kis_exec_options o;
	exec_flags_options(&f, &t, &o);
	struct kis_error *err = NULL;
	int status = 0;
	if (f.profile.tty.enabled) {
		char *sh[] = {"/bin/sh", "-i", NULL};
		struct kis_result res;
		kis_result_init(&res);
		int r = kis_session_exec(f.id, sh, &o, &res, &err);
		cli_term_restore(&t);
		status = r < 0 ? cli_fail(err) : print_result(&res, f.json, NULL);
		kis_result_release(&res);
		kis_profile_release(&f.profile);
		return status;
	}
	o.shell = true;
	o.io.stdin_fd = -1; /* stdin carries the lines, not the lines' input */
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (!n)
			continue;
		char *one[] = {line, NULL};
		struct kis_result res;
		kis_result_init(&res);
		if (kis_session_exec(f.id, one, &o, &res, &err) < 0) {
			kis_result_release(&res);
			free(line);
			kis_profile_release(&f.profile);
			return cli_fail(err);
		}
		status = print_result(&res, f.json, line);
		if (!f.json && status)
			fprintf(stderr, "kis: exit %d\n", status);
		kis_result_release(&res);
	}
	free(line);
	kis_profile_release(&f.profile);
	return status;
}

int cmd_session(int argc, char **argv)
{
	/* the verbs that take a session have their own names too: a user
	 * who looks for them under 'session' finds them there */
	if (argc >= 2 && !strcmp(argv[1], "create"))
		return cmd_create(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "shell"))
		return cmd_shell(argc - 1, argv + 1);
	if (argc < 2 || cli_wants_help(argc, argv)) {
		puts("Usage: kis sandbox session list [--json] [--store-root DIR]\n"
		     "       kis sandbox session destroy ID [--store-root DIR]\n"
		     "       kis sandbox session create [OPTIONS]   (the same as 'kis sandbox create')\n"
		     "       kis sandbox session exec ID [OPTIONS] -- COMMAND [ARG...]   (the same as\n"
		     "                                    'kis sandbox exec')\n"
		     "       kis sandbox session shell ID [OPTIONS]   (the same as 'kis sandbox shell')\n\n"
		     "Manage sessions. 'list' shows each session's id, tier, backend, workspace,\n"
		     "creation time and state (running or stopped; ready for a session with no\n"
		     "process of its own, whose every exec is a fresh run), read from the session\n"
		     "itself.\n"
		     "'destroy' ends every process of the session and releases the workspace it\n"
		     "cloned; destroying a session that is already gone succeeds.");
		return argc < 2 ? KIS_EXIT_USAGE : 0;
	}
	if (strcmp(argv[1], "list") && strcmp(argv[1], "destroy"))
		return cli_unknown_sub("session", argv[1],
				       (const char *const[]){"list", "destroy", "create", "exec", "shell",
							     NULL});
	const char *root = NULL, *id = NULL;
	bool json = false;
	for (int i = 2; i < argc; i++) {
		int t = cli_store_flag("session", argc, argv, &i, &root);
		if (t < 0)
			return -t;
		if (t)
			continue;
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_unknown_option("session", argv[i],
						  (const char *const[]){"--store-root", NULL});
		else if (!id && !strcmp(argv[1], "destroy"))
			id = argv[i];
		else
			return cli_usage_error("session", "unexpected argument '%s'", argv[i]);
	}
	struct kis_error *err = NULL;
	if (!strcmp(argv[1], "list")) {
		char *out = NULL;
		if (kis_session_list(root, &out, &err) < 0)
			return cli_fail_store(err);
		if (json) {
			int pr = cli_print_json_text(out);
			free(out);
			return pr;
		} else {
			json_error_t je;
			json_t *a = json_loads(out, 0, &je);
			printf("%-28s %-10s %-11s %-28s %-20s %s\n", "SESSION", "TIER", "BACKEND",
			       "WORKSPACE", "CREATED", "STATE");
			size_t i;
			json_t *s;
			json_array_foreach(a, i, s) {
				const char *ws = json_string_value(json_object_get(s, "workspace"));
				printf("%-28s %-10s %-11s %-28s %-20s %s\n",
				       json_string_value(json_object_get(s, "id")),
				       json_string_value(json_object_get(s, "tier")),
				       json_string_value(json_object_get(s, "backend")), ws ? ws : "-",
				       json_string_value(json_object_get(s, "created")),
				       json_string_value(json_object_get(s, "state")));
			}
			json_decref(a);
		}
		free(out);
		return 0;
	}
	if (!id)
		return cli_usage_error("session", "destroy needs a session id");
	if (kis_session_destroy(root, id, &err) < 0)
		return cli_fail_store(err);
	/* idempotent: gone now, whether it was there or not */
	return json ? cli_print_json(json_pack("{s:s, s:b}", "id", id, "destroyed", 1)) : 0;
}
