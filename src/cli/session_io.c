/* SPDX-License-Identifier: MIT */
/* Raw mode and signal plumbing for commands run in a session. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "session_io.h"

static int g_sig = -1, g_winch = -1;
static struct termios saved_tio;

static void on_sig(int sig)
{
	int e = errno;
	unsigned char b = (unsigned char)sig;
	if (g_sig >= 0)
		(void)!write(g_sig, &b, 1);
	errno = e;
}

static void on_winch(int sig)
{
	(void)sig;
	int e = errno;
	if (g_winch >= 0)
		(void)!write(g_winch, "w", 1);
	errno = e;
}

int cli_term_setup(struct cli_term *t, bool tty)
{
	memset(t, 0, sizeof(*t));
	if (pipe2(t->sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(t->winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	g_sig = t->sig_pipe[1];
	g_winch = t->winch_pipe[1];
	struct sigaction sa = {.sa_handler = on_sig};
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (tty && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		/* The terminal is the sandbox's now: every key goes through,
		 * including ^C, which the inner terminal turns into SIGINT. */
		struct termios raw = saved_tio;
		cfmakeraw(&raw);
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
			t->raw = true;
	}
	return 0;
}

void cli_term_restore(struct cli_term *t)
{
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
	t->raw = false;
}

void cli_term_exec_options(struct cli_term *t, bool tty, bool capture, struct kis_exec_options *o)
{
	o->io.stdin_fd = STDIN_FILENO;
	o->io.stdout_fd = STDOUT_FILENO;
	o->io.stderr_fd = STDERR_FILENO;
	o->io.capture = capture;
	o->io.cancel_fd = t->sig_pipe[0];
	o->tty = tty;
	o->rows = 24;
	o->cols = 80;
	o->resize_fd = tty ? t->winch_pipe[0] : -1;
	o->tty_fd = tty && isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
}
