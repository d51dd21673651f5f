/* SPDX-License-Identifier: MIT */
/* Internal to the microvm backend: the session's port broker, which serves
 * agent.sock and hands each connection to a free agent port of the VM. */
#ifndef KIS_BACKENDS_MICROVM_MUX_H
#define KIS_BACKENDS_MICROVM_MUX_H

#include <sys/types.h>

#include "kis/error.h"

/* Start the broker, detached; it ends when QEMU (pid qemu) ends. */
int kis_mvm_broker_start(int listen_fd, int dfd, pid_t qemu, struct kis_error **err);

#endif
