/* SPDX-License-Identifier: MIT */
/* Internal: what of the host a sandbox with root: host sees, one table for
 * every tier (landlock grants it, bubblewrap and oci mount it). */
#ifndef KIS_CONFINE_SYSVIEW_H
#define KIS_CONFINE_SYSVIEW_H

#include <stddef.h>

/* The host's system directories, shown read-only (a missing one is
 * skipped; a merged-/usr link such as /bin -> usr/bin stays a link). */
extern const char *const kis_sysview_dirs[];
extern const size_t kis_sysview_n_dirs;
/* Entries of /etc never shown, relative to /etc ("ssl/private"): secrets a
 * sandbox never needs. Hidden on every tier: landlock leaves them out of
 * its rules, bubblewrap and oci cover them (a file with /dev/null, a
 * directory with an empty read-only tmpfs). */
extern const char *const kis_sysview_etc_hidden[];
extern const size_t kis_sysview_n_etc_hidden;
/* Kernel interfaces in /proc and /sys that leak host information or take
 * writes even without capabilities: covered where the tier has its own
 * /proc (runc's defaults, libcontainer/specconv), and read-only ones. */
extern const char *const kis_sysview_masked[];
extern const size_t kis_sysview_n_masked;
extern const char *const kis_sysview_readonly[];
extern const size_t kis_sysview_n_readonly;

#endif
