/* SPDX-License-Identifier: MIT */
/* The calling thread's record of what a run is making on the host. The
 * places that make things (a cgroup, a private directory, a container,
 * QEMU) lie far below the run and take no context; they note each thing
 * here before making it, and the engine's owner (engine/owner.h) points
 * the record at its flocked records file while the run lasts, so a killed
 * run's leftovers can be swept. Without a run, noting is a no-op. */
#ifndef KIS_CORE_RECORD_H
#define KIS_CORE_RECORD_H

#include <stdbool.h>

struct kis_record_sink {
	int fd;         /* O_APPEND records file: one line per thing */
	const char *id; /* the run's sandbox id, for messages */
	struct kis_record_sink *prev;
};

/* Make s the thread's current record; a run inside a run (an exec in an
 * agentless session is a run) stacks. */
void kis_record_push(struct kis_record_sink *s);
/* Drop s (and whatever was pushed above it). */
void kis_record_pop(struct kis_record_sink *s);

/* Append "kind value" to the current record; a no-op without one. < 0
 * when the line could not be written (the caller should not make the
 * thing then). */
int kis_owner_note(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the current thread is recording a run. */
bool kis_owner_active(void);
/* The recorded run's sandbox id, or NULL without one: a thing named with
 * it (a VMM's cgroup, "<id>-vmm<n>") is known to the sweep as the run's. */
const char *kis_owner_id(void);

/* Test hook: when $KIS_TEST_PAUSE_AT names this point, inside a run, say so
 * on stderr (with the sandbox id) and stop until a signal comes. README,
 * "Testing hooks"; never set in production. */
void kis_test_pause(const char *point);

#endif
