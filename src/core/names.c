/* SPDX-License-Identifier: MIT */
/* The names of tiers and network modes, as the profile, the results and
 * the CLI write them. */
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "kis/profile.h"

static const char *const tier_names[KIS_TIER__COUNT] = {
	[KIS_TIER_AUTO] = "auto",	  [KIS_TIER_PROCESS] = "process",
	[KIS_TIER_WASM] = "wasm",	  [KIS_TIER_HOST] = "host",
	[KIS_TIER_CONTAINER] = "container", [KIS_TIER_MICROVM] = "microvm",
};
static const char *const net_names[KIS_NET__COUNT] = {
	[KIS_NET_OFF] = "off", [KIS_NET_LOOPBACK] = "loopback",
	[KIS_NET_EGRESS] = "egress", [KIS_NET_HOST] = "host",
};
static const struct kis_escape_hatch hatches[KIS_ESCAPE_HATCHES] = {
	{"allow_process_tier", "--allow-process-tier", "escape_hatch.allow_process_tier",
	 "the process tier runs unconfined", KIS_TIER_PROCESS, KIS_NET__COUNT},
	{"allow_net_host", "--allow-net-host", "escape_hatch.allow_net_host",
	 "host networking removes network confinement", KIS_TIER__COUNT, KIS_NET_HOST},
};

const struct kis_escape_hatch *kis_escape_hatches(size_t *n)
{
	*n = sizeof(hatches) / sizeof(hatches[0]);
	return hatches;
}

const char *const *kis_tier_names(unsigned *n)
{
	*n = KIS_TIER__COUNT;
	return tier_names;
}

const char *const *kis_net_mode_names(unsigned *n)
{
	*n = KIS_NET__COUNT;
	return net_names;
}

void kis_names_expect(const char *const *names, unsigned n, char *out, size_t len)
{
	snprintf(out, len, "expected ");
	for (unsigned k = 0; k < n; k++) {
		size_t l = strlen(out);
		snprintf(out + l, len > l ? len - l : 0, "%s%s", names[k],
			 k + 2 < n ? ", " : k + 2 == n ? " or " : ", not");
	}
}

const char *kis_tier_name(enum kis_tier t)
{
	return (unsigned)t < KIS_TIER__COUNT ? tier_names[t] : "unknown";
}

int kis_name_index(const char *const *names, unsigned n, const char *s)
{
	for (unsigned i = 0; s && i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -1;
}

int kis_tier_parse(const char *s, enum kis_tier *out)
{
	int i = kis_name_index(tier_names, KIS_TIER__COUNT, s);
	if (i < 0)
		return -1;
	*out = (enum kis_tier)i;
	return 0;
}

const char *kis_net_mode_name(enum kis_net_mode m)
{
	return (unsigned)m < KIS_NET__COUNT ? net_names[m] : "unknown";
}

int kis_net_mode_parse(const char *s, enum kis_net_mode *out)
{
	int i = kis_name_index(net_names, KIS_NET__COUNT, s);
	if (i < 0)
		return -1;
	*out = (enum kis_net_mode)i;
	return 0;
}

