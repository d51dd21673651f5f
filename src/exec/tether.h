/* SPDX-License-Identifier: MIT */
/* Internal: a process that may outlive the engine (a session's agent, its
 * VMM, pasta, a container) tied to it until it is handed over, by a
 * watcher of the current record's tether (core/record.h). */
#ifndef KIS_EXEC_TETHER_H
#define KIS_EXEC_TETHER_H

#include <stdbool.h>
#include <sys/types.h>

#include "kis/error.h"

/* In a process just forked from the engine (pid engine), before it starts
 * what it will watch: become the child subreaper of everything it starts
 * (prctl(2) PR_SET_CHILD_SUBREAPER: what a killed process leaves orphaned
 * comes to us, not to init, so it can be killed in turn) and take a pidfd
 * of the engine. Returns the pidfd (-1 where pidfd_open(2) is missing: the
 * tether's end of file alone then tells), or -2 when the engine has
 * already gone: its parent is another (getppid(2) after the pidfd, so no
 * death falls between the two). */
int kis_tether_prepare(pid_t engine);

/* Never returns. In that process, once child is started: close every
 * descriptor but the tether and the pidfd (a watcher holds no lock, pipe
 * or terminal of the engine's), wait until the engine hands over (a byte
 * in the tether: exit) or dies or ends without a handover (the tether's
 * end of file, or the pidfd readable: kill child and everything it left,
 * then exit). SIGPIPE is ignored from the call on. */
__attribute__((noreturn)) void kis_tether_watch(int tether, int engine_pidfd, pid_t child);

/* A guard for what the engine starts but does not parent (crun's detached
 * container): a process of ours that waits on the current record's tether
 * as a watcher does and, abandoned, calls on_abandon(arg) (in the guard:
 * a copy of the engine, single-threaded, its descriptors closed but the
 * standard ones on /dev/null) before it exits. Without a current record:
 * nothing (0). */
int kis_tether_guard(void (*on_abandon)(void *arg), void *arg, struct kis_error **err);

#endif
