/* SPDX-License-Identifier: MIT */
/* Internal: the child side of kis_exec_run and its report message. */
#ifndef KIS_SPAWN_H
#define KIS_SPAWN_H

#include <stdint.h>

#include "exec/exec.h"

#define KIS_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* EXEC and CWD are the command's setup_failed (the message names the
 * program or the directory); SETUP is the engine's error. */
enum kis_child_stage { KIS_CHILD_SETUP = 1, KIS_CHILD_EXEC = 2, KIS_CHILD_CWD = 3 };

/* One datagram from the child: why it could not become the command. */
struct kis_child_msg {
	int32_t stage;
	int32_t sys_errno;
	int32_t code;
	char message[244];
};

void kis_child_report(int fd, enum kis_child_stage stage, int sys_errno, enum kis_errc code,
		      const char *msg);
/* execve argv[0] searched in envp's PATH; returns only on failure. */
int kis_exec_search(char *const *argv, char *const *envp);
/* Start fn(arg) in a child process and return its pid (-1 and errno on
 * failure). shared_vm: the child borrows our memory until it execs or
 * exits (clone(2) CLONE_VM | CLONE_VFORK, the way posix_spawn(3) starts a
 * program) and we wait meanwhile; otherwise it is a fork(2). Only for a
 * child whose work before exec is system calls on its own locals and on
 * data prepared before (struct kis_spawn.vfork_ok). */
pid_t kis_spawn_clone(int (*fn)(void *), void *arg, bool shared_vm);
/* Never returns. */
void kis_child_main(const struct kis_spawn *sp, int report_fd, int out_fd, int err_fd)
	__attribute__((noreturn));

#endif
