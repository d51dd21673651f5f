/* SPDX-License-Identifier: MIT */
/* The system view of root: host, written once (sysview.h). A second copy
 * drifted before: /etc/security/opasswd was hidden on two tiers and
 * readable on the container tier. */
#include "core/util.h"

#include "confine/sysview.h"

const char *const kis_sysview_dirs[] = {"/usr",   "/bin",    "/sbin", "/lib", "/lib32",
					"/lib64", "/libx32", "/etc",  "/opt"};
const size_t kis_sysview_n_dirs = ARRAY_SIZE(kis_sysview_dirs);

const char *const kis_sysview_etc_hidden[] = {
	"shadow", "shadow-", "gshadow",     "gshadow-",         "sudoers",
	"sudoers.d", "ssh", "ssl/private", "security/opasswd", "kis",
};
const size_t kis_sysview_n_etc_hidden = ARRAY_SIZE(kis_sysview_etc_hidden);

const char *const kis_sysview_masked[] = {
	"/proc/acpi",        "/proc/asound",      "/proc/interrupts", "/proc/kcore",
	"/proc/keys",        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi",        "/sys/firmware",    "/sys/devices/virtual/powercap",
};
const size_t kis_sysview_n_masked = ARRAY_SIZE(kis_sysview_masked);

const char *const kis_sysview_readonly[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
					    "/proc/sysrq-trigger"};
const size_t kis_sysview_n_readonly = ARRAY_SIZE(kis_sysview_readonly);
