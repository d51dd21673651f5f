/* SPDX-License-Identifier: MIT */
/* The agent as PID 1 of the microvm guest (kis-agent --guest-init): set up
 * the guest, relay its virtio ports to the agent, obey the control port. */
#ifndef KIS_AGENT_GUEST_H
#define KIS_AGENT_GUEST_H

#include <stddef.h>

/* Never returns when it runs as PID 1; returns 2 otherwise. */
int kis_agent_guest_init(void);

/* A mount's target as the guest can place it (issue 21), checked by the
 * engine's plan and again by the guest's init on the cfg it receives:
 * absolute and normal (no empty, '.' or '..' component; letters, digits,
 * '.', '_', '-'), not / and not over the guest's own system: the
 * directories its kernel and init use (/bin, /sbin, /lib*, /usr, /etc,
 * /init, /dev, /proc, /sys, /run, /boot: a command that could write
 * /sbin/modprobe would have the kernel run it as root on its next module
 * request), /workspace, /.kis, /mnt itself and the init's /mnt/.layers and
 * /mnt/ws. 0 when placeable; -1 with why. */
int kis_guest_mount_target_check(const char *t, char *why, size_t n);

#endif
