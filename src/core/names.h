/* SPDX-License-Identifier: MIT */
/* Names of the core vocabulary's enumerations (kis_tier_name and the rest
 * are public, in kis/profile.h). */
#ifndef KIS_CORE_NAMES_H
#define KIS_CORE_NAMES_H

#include <stddef.h>

/* The index of s in a table of n names, or -1 (s may be NULL). */
int kis_name_index(const char *const *names, unsigned n, const char *s);
/* The one table of the tiers' names (enum kis_tier order) and of the
 * network modes' (enum kis_net_mode order), *n receiving its length: the
 * profile's messages, the CLI's help and through it the shell completion
 * read these (house rule 12). */
const char *const *kis_tier_names(unsigned *n);
const char *const *kis_net_mode_names(unsigned *n);
/* "expected a, b or c, not" for a refusal naming the choices. */
void kis_names_expect(const char *const *names, unsigned n, char *out, size_t len);

#endif
