/* SPDX-License-Identifier: MIT */
/* The in-sandbox agent: accept connections on a listening socket (or serve
 * one channel), run exec requests with the shared supervisor, keep the
 * durable shell's state. */
#ifndef KIS_AGENT_H
#define KIS_AGENT_H

/* The working directory of requests that name none (NULL: the agent's
 * own at start). Resolved when a command starts, inside the sandbox. */
void kis_agent_set_cwd(const char *cwd);
/* Serve connections accepted on listen_fd until SIGTERM. Returns an exit status. */
int kis_agent_serve_listener(int listen_fd);
/* Serve exactly one already-connected channel (virtio console, a socket). */
int kis_agent_serve_channel(int fd);

/* The accounting file (cgroup cpu.stat) of the group every command runs
 * in, read-only: an exec's limits.cpu_ms then counts all its processes. */
void kis_agent_set_cpu_fd(int fd);

#endif
