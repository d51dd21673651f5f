/* SPDX-License-Identifier: MIT */
/* Owners: what a one-shot run (or a session being created) made on the host,
 * recorded under a lock that dies with the engine, and the sweep of it. */
#ifndef KIS_ENGINE_OWNER_H
#define KIS_ENGINE_OWNER_H

#include <stdbool.h>

#include "kis/error.h"
#include "core/record.h"
#include "kis/store.h"

/* Theory of operation. A run owns ROOT/owners/<id> (id: the sandbox id),
 * a file flocked by the engine for the run's whole life (flock(2): the
 * kernel drops the lock when the holder dies, however it dies). Into it
 * the run appends one line per thing it is about to make, before making
 * it: "cgroup <dir>", "tmp <dir>", "pid <pid> <start>", "crun <container>",
 * "ws <workspace id>", "session <id>". (Older builds made a directory with
 * a `records` file in it; the sweep still reads those.) A run that ends
 * normally has removed those things itself and removes the owner; a run
 * that was killed leaves an owner whose lock anyone can take, and the
 * sweep (every store open, `kis sandbox gc`) undoes its records: processes
 * killed first, then containers, cgroups, temporary directories, the
 * session's half-made directory and last the workspace clone. What the
 * kernel can tie to the engine's life is tied as well (PR_SET_PDEATHSIG,
 * the QEMU of a one-shot run, every tool), and what must outlive the
 * engine once a session is published is tied to the owner's tether until
 * then (core/record.h: its watchers kill it when the engine dies, with no
 * sweep needed; kis_owner_end hands it over when undo is false); the
 * records are for the rest.
 *
 * The owner being recorded to is the calling thread's (one run per thread
 * at a time): the places that make things (the cgroup code, the private
 * directory, QEMU's launch) are far below the run and take no context, so
 * they write through core/record.h, which owner.c points at the run's
 * records while the run lasts. */

struct kis_owner;

/* Make and lock ROOT/owners/<id> and make it the thread's current owner.
 * Fails with the store's error; a run without an owner would leak. s is
 * borrowed: it must stay open until kis_owner_end, which reaps through it. */
int kis_owner_begin(struct kis_store *s, const char *id, struct kis_owner **out,
		    struct kis_error **err);
/* The run is over: undo what is still recorded (undo: each thing is looked
 * for first, so what the run removed itself costs a stat), or, undo false,
 * a session was published and owns what is left: drop the records. Then
 * remove the owner and unlock. NULL is accepted. */
void kis_owner_end(struct kis_owner *o, bool undo);
/* Undo what the owner <id> recorded if its process is gone: 0 done (or no
 * such owner), 1 the owner is alive (nothing touched), < 0 failure. */
int kis_owner_reap_id(const char *store_root, const char *id, struct kis_error **err);

#endif
