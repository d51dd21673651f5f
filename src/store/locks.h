/* SPDX-License-Identifier: MIT */
/* Internal: the store's lock descriptors, for a process forked from the
 * engine that does not exec (store/fs.c keeps the list). */
#ifndef KIS_STORE_LOCKS_H
#define KIS_STORE_LOCKS_H

/* In a child just forked without exec, before anything else: close every
 * descriptor that holds one of the store's flocks (an owner's record
 * file, a temporary's directory). A flock belongs to the open file
 * description, which the child shares: without this, a child that
 * outlives a SIGKILLed engine keeps its owner "live" and its session
 * "being created" (flock(2)); close-on-exec would drop them only at an
 * execve. Async-signal-safe (close(2) and atomics only): also after a
 * fork of a threaded process. */
void kis_store_locks_drop(void);

#endif
