/* SPDX-License-Identifier: MIT */
/* `kis sandbox run`: clone (--base) or use (--workspace) a workspace and run
 * one command; streams live, or the whole result as JSON with --json. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "flags.h"
#include "session_io.h"

static int cancel_pipe[2] = {-1, -1};
/* The first signal that cancelled the run: the run reports it. */
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	int saved = errno;
	if (!got_signal)
		got_signal = sig;
	if (cancel_pipe[1] >= 0) {
		unsigned char b = (unsigned char)sig;
		ssize_t r = write(cancel_pipe[1], &b, 1);
		(void)r;
	}
	errno = saved;
}

static void help(void)
{
	puts("Usage: kis sandbox run [OPTIONS] -- COMMAND [ARG...]\n\n"
	     "Run one command in a fresh sandbox and report how it ended. Without --json\n"
	     "the command's streams pass through live and kis exits with the command's\n"
	     "status: its own exit code, 126 if it could not be executed, 127 if not\n"
	     "found, 128+N if killed by signal N, 125 if the engine refused or failed.\n\n"
	     "Deny-all by default: no network, the safe default limits. The process tier\n"
	     "runs unconfined and is never chosen automatically.\n\n"
	     "Options:");
	cli_profile_flags_help(stdout);
	puts("\nExamples:\n"
	     "  kis sandbox run --tier process --allow-process-tier -- echo hello\n"
	     "  kis sandbox run --json --timeout 2s --allow-process-tier --tier process -- sleep 5");
}

int cmd_run(int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		help();
		return 0;
	}
	/* SIGINT/SIGTERM/SIGHUP cancel the run (reason 'cancelled', status
	 * 128+N), from the first thing the verb does: a signal before the run
	 * starts is seen at its first check. A broken stdout must not kill
	 * the engine mid-run. */
	if (pipe2(cancel_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return cli_fail(NULL);
	/* SA_RESTART: a blocking read or write of the engine's (a VM's
	 * control socket, a crun pipe) is resumed rather than failed with
	 * EINTR half-way through an exchange; poll(2) is never restarted, so
	 * the loops that wait see the cancel fd at once (signal(7)). */
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct cli_opts o = {0};
	kis_profile_init(&o.profile);
	int rc = cli_parse_profile_flags("run", argc, argv, &o);
	if (rc) {
		kis_profile_release(&o.profile);
		return rc;
	}
	if (o.cmd_index >= argc) {
		kis_profile_release(&o.profile);
		return cli_usage_error("run", "no command: give it after '--'");
	}

	struct kis_run_options ro = {
		.io = {.stdin_fd = STDIN_FILENO, .capture = o.json, .stdout_fd = STDOUT_FILENO,
		       .stderr_fd = STDERR_FILENO, .cancel_fd = cancel_pipe[0]},
		.dry_run = o.dry_run,
		.store_root = o.store_root,
		.resize_fd = -1,
		.tty_fd = -1,
		.progress = cli_progress_line,
	};
	struct cli_term term = {0};
	if (o.profile.tty.enabled && !o.dry_run) {
		/* the run is a one-exec session: signals and resizes are forwarded */
		cli_term_setup(&term, true);
		ro.io.cancel_fd = term.sig_pipe[0];
		ro.resize_fd = term.winch_pipe[0];
		ro.tty_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
	}
	struct kis_result res;
	kis_result_init(&res);
	struct kis_error *err = NULL;
	char *plan = NULL;
	/* only a workspace this run cloned and kept is news: one named with
	 * --workspace is the caller's and stays (issue 19) */
	bool say_kept = o.profile.base && o.profile.keep;
	int r = kis_run(&o.profile, argv + o.cmd_index, &ro, &res, &plan, &err);
	cli_term_restore(&term);
	kis_profile_release(&o.profile);
	if (r < 0 && got_signal && !o.dry_run) {
		/* The signal came first: what the interrupted setup failed with
		 * (a VM's QMP answering EINTR, a snapshot's restore cut short) is
		 * its consequence. The run was cancelled, 128+N, as on every
		 * tier, never `internal` 125 (issue 40 item 8); the error is
		 * kept in the detail. */
		char *e = kis_error_format(err);
		kis_error_free(err);
		err = NULL;
		free(res.detail);
		res.detail = NULL;
		if (asprintf(&res.detail, "the run was cancelled by signal %d during its setup%s%s%s",
			     (int)got_signal, e ? " (then: " : "", e ? e : "", e ? ")" : "") < 0)
			res.detail = NULL;
		free(e);
		r = 0;
	}
	if (r < 0) {
		kis_result_release(&res);
		return cli_fail(err);
	}
	if (o.dry_run) {
		/* the plan: under --json in the writer's format (README) */
		int pr = o.json ? cli_print_json_text(plan ? plan : "{}") :
				  printf("%s\n", plan ? plan : "{}") < 0;
		free(plan);
		kis_result_release(&res);
		return pr;
	}
	if (got_signal) {
		/* However far the run got, a signal ended it: cancelled, and the
		 * status of a process ended by that signal, 128+N, never the
		 * command's 0 (the agent may have reported its killed command
		 * as it saw it). */
		res.reason = KIS_REASON_CANCELLED;
		res.signal = got_signal;
		res.exit_code = -1;
		if (!res.detail) {
			char d[64];
			snprintf(d, sizeof(d), "the run was cancelled by signal %d", (int)got_signal);
			res.detail = strdup(d);
		}
	}
	int status = kis_result_exit_status(&res);
	if (o.json)
		cli_print_result(&res, NULL);
	else
		cli_say_ending(&res);
	if (say_kept && res.workspace && res.workspace_kept && !o.json)
		fprintf(stderr, "kis: workspace %s kept\n", res.workspace);
	kis_result_release(&res);
	return status;
}
