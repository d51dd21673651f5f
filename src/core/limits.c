/* SPDX-License-Identifier: MIT */
/* The limits' table (kis/limits.h), their defaults, and their JSON. */
#include "core/util.h"

#include <string.h>

#include "core/json.h"
#include "kis/limits.h"

const struct kis_limit_info kis_limit_table[KIS_LIMIT__COUNT] = {
#define ROW(f, B, k, d, lo, m, pe, fl, h)                                             \
	[KIS_LIMIT_I_##B] = {#f, "limits." #f, KIS_LIMIT_##B, k, d, lo, m, pe, fl, h, \
			     offsetof(struct kis_limits, f)},
	KIS_LIMITS(ROW)
#undef ROW
};

void kis_limits_resolve(const struct kis_limits *in, struct kis_limits *out)
{
	*out = *in;
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if (!*kis_limit_slot(out, i))
			*kis_limit_slot(out, i) = kis_limit_table[i].def;
}

json_t *kis_limits_to_json(const struct kis_limits *l, unsigned mask)
{
	json_t *o = json_object();
	for (unsigned i = 0; o && i < KIS_LIMIT__COUNT; i++)
		if (mask & kis_limit_table[i].bit &&
		    json_object_set_new(o, kis_limit_table[i].name,
					json_integer((json_int_t)kis_limit_get(l, i))) < 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

void kis_limits_from_json(const json_t *o, struct kis_limits *l, unsigned mask)
{
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++) {
		json_t *v = json_object_get(o, kis_limit_table[i].name);
		if (mask & kis_limit_table[i].bit)
			*kis_limit_slot(l, i) = json_is_integer(v) && json_integer_value(v) > 0 ?
							(uint64_t)json_integer_value(v) : 0;
	}
}

unsigned kis_limits_per_exec(void)
{
	unsigned m = 0;
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if (kis_limit_table[i].per_exec)
			m |= kis_limit_table[i].bit;
	return m;
}
