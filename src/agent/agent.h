/* SPDX-License-Identifier: MIT */
/* The in-sandbox agent: accept connections on a listening socket (or serve
 * one channel), run exec requests with the shared supervisor, keep the
 * durable shell's state. */
#ifndef KIS_AGENT_H
#define KIS_AGENT_H

#include <stdbool.h>

/* The working directory of requests that name none (NULL: the agent's
 * own at start). Resolved when a command starts, inside the sandbox. */
void kis_agent_set_cwd(const char *cwd);
/* Serve connections accepted on listen_fd until SIGTERM. Returns an exit status. */
int kis_agent_serve_listener(int listen_fd);
/* Serve exactly one already-connected channel (virtio console, a socket). */
int kis_agent_serve_channel(int fd);

/* The cgroup v2 directory (an open descriptor) under which each exec's
 * command gets a leaf of its own (the microvm guest's pids group): the
 * leaf's cpu.stat is that exec's limits.cpu_ms over all its processes and
 * no other exec's, and the command's cgroup namespace is rooted there. */
void kis_agent_set_cgroup_dir(int fd);

/* The confinement every command of this agent goes through (the microvm
 * guest's, src/agent/confine.c; NULL: none, the sandbox around the agent
 * confines it): kis_agent_confine_child runs in the command's child
 * between fork and exec; the agent itself stays outside it. */
struct kis_agent_confine;
void kis_agent_set_confine(struct kis_agent_confine *c);

/* Test hooks (tests/integration/test_microvm.py, a hostile guest): an EXEC
 * of argv "kis-test:flood KIND" makes the agent's own side write malformed
 * frames (KIND huge, type or random) on its connection, as a compromised
 * guest kernel or agent could. Nothing runs; off unless the engine asks. */
void kis_agent_set_test_hooks(bool on);

#endif
