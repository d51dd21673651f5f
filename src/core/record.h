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

#include <sys/types.h>

#define KIS_TETHER_WATCHERS 8

struct kis_record_sink {
	int fd;         /* O_APPEND records file: one line per thing */
	const char *id; /* the run's sandbox id, for messages */
	/* The tether (kis_owner_tether): a pipe, both ends -1 until first
	 * asked for (kis_record_init sets them so), and the watchers started
	 * on it, reaped by kis_record_tether_end. */
	int tether[2];
	pid_t watchers[KIS_TETHER_WATCHERS];
	size_t n_watchers;
	struct kis_record_sink *prev;
};

/* A sink with no tether yet: fd and id are the caller's. */
void kis_record_init(struct kis_record_sink *s, int fd, const char *id);

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

/* The tether of the current record. A process the run starts that may
 * outlive the engine (a session's agent, VMM, pasta, container) is tied
 * to the engine until the command that made it hands it over: its
 * watcher, a process of ours (exec/tether.h, kis_tether_watch), holds the
 * read end of this pipe and a pidfd of the engine, and when the engine
 * dies or ends the record without a handover (the pipe's last writer
 * closes, or the pidfd turns readable: pidfd_open(2)) it kills what it
 * watches. A handover is a byte left in the pipe, which no watcher reads
 * (FIONREAD tells them apart from end of file). The tether is the
 * outermost record's: a session made inside a run (a run with a
 * terminal) is handed over only when that run hands over, never by its
 * own create. Returns the read end (made on first use, O_CLOEXEC), or -1
 * with errno: ENOENT without a record, else pipe2's. */
int kis_owner_tether(void);
/* A watcher of the current record's tether started as pid, reaped when
 * the tether ends (it exits at once then). */
void kis_owner_tether_watcher(pid_t pid);
/* End s's tether: with handover the watched processes go on as their
 * holder's (a published session's), else they are killed; either way
 * the watchers exit and are reaped here. A sink without one: nothing. */
void kis_record_tether_end(struct kis_record_sink *s, bool handover);

/* Test hook: when $KIS_TEST_PAUSE_AT names this point, inside a run, say so
 * on stderr (with the sandbox id) and stop until a signal comes. README,
 * "Testing hooks"; never set in production. */
void kis_test_pause(const char *point);
/* Test hook: when $KIS_TEST_COUNT names a file, append "<what>\n" to it,
 * so a test counts what one command did ("ctx": an engine context made,
 * "select": a backend selected, "plan": a backend's plan made by the
 * engine). A no-op in what ships. */
void kis_test_count(const char *what);

#endif
