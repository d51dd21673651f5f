/* SPDX-License-Identifier: MIT */
/* Names of the core vocabulary's enumerations (kis_tier_name and the rest
 * are public, in kis/profile.h). */
#ifndef KIS_CORE_NAMES_H
#define KIS_CORE_NAMES_H

/* The index of s in a table of n names, or -1 (s may be NULL). */
int kis_name_index(const char *const *names, unsigned n, const char *s);

#endif
