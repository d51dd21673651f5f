/* SPDX-License-Identifier: MIT */
/* The core vocabulary as JSON: the one writer and reader of a limits
 * object ({"wall_ms": N, ...}), used by --dry-run, the agent's request and
 * a session's stored limits alike. */
#ifndef KIS_CORE_JSON_H
#define KIS_CORE_JSON_H

#include <jansson.h>

#include "kis/limits.h"

#define KIS_LIMITS_ALL ((1u << KIS_LIMIT__COUNT) - 1)

/* The limits whose bit is in mask, by name; NULL on ENOMEM. */
json_t *kis_limits_to_json(const struct kis_limits *l, unsigned mask);
/* Read the limits of mask from o (a missing, non-integer or non-positive
 * value reads 0, the default); o may be NULL. Others are left alone. */
void kis_limits_from_json(const json_t *o, struct kis_limits *l, unsigned mask);
/* The bits of the limits a session's exec may tighten. */
unsigned kis_limits_per_exec(void);

#endif
