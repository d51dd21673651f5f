/* SPDX-License-Identifier: MIT */
/* The size of a command: its argv and environment against the one limit
 * kis takes on every tier (src/core/argv.c). */
#ifndef KIS_CORE_ARGV_H
#define KIS_CORE_ARGV_H

#include <stddef.h>

#include "kis/error.h"

/* The most argv + environment kis passes to a command, counted as
 * execve(2) counts it (each string with its NUL, and a pointer each). */
#define KIS_ARGV_MAX_BYTES (1u << 20)
/* The most one string may be: the kernel's MAX_ARG_STRLEN (32 pages),
 * its NUL included. */
#define KIS_ARG_MAX_STRLEN (32u * 4096u)

/* Refuse (KIS_E_INVALID_ARGUMENT, naming the limit) a command whose argv
 * and environments (any may be NULL; NULL-terminated) pass either limit. */
int kis_command_size_check(char *const *argv, char *const *env, char *const *env_add,
			   struct kis_error **err);

#endif
