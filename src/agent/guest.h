/* SPDX-License-Identifier: MIT */
/* The agent as PID 1 of the microvm guest (kis-agent --guest-init): set up
 * the guest, relay its virtio ports to the agent, obey the control port. */
#ifndef KIS_AGENT_GUEST_H
#define KIS_AGENT_GUEST_H

/* Never returns when it runs as PID 1; returns 2 otherwise. */
int kis_agent_guest_init(void);

#endif
