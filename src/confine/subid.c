/* SPDX-License-Identifier: MIT */
/* An ordinary user's subordinate ids (subuid(5), subgid(5)), looked up by
 * shadow's libsubid, for a rootless sandbox that maps a range through
 * newuidmap(1) and newgidmap(1) rather than the caller's one id.
 *
 * The lookup is subid_lib.c's (the library, kis-helper) or subid_remote.c's
 * (the static kis, which asks kis-helper). libsubid is loaded when first asked (dlopen(3) of its ABI 4 soname), not
 * linked: it brings PAM, SELinux and semanage into the process, a cost every
 * `kis` start would pay for a lookup only a rootless container run makes.
 * It is there wherever newuidmap is (Debian's uidmap depends on libsubid4);
 * the header is libsubid-dev's. libsubid reads /etc/subuid and /etc/subgid
 * and whatever nsswitch.conf names for "subid" (sssd, for one), which a
 * reader of the files alone would miss. */
#include "core/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "confine/confine.h"

/* The setuid helpers at their fixed places only: never a path from the
 * environment for a program that runs with privilege. */
static const char *installed(const char *const *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (access(c[i], X_OK) == 0)
			return c[i];
	return NULL;
}

const char *kis_newuidmap_path(void)
{
	static const char *const c[] = {"/usr/bin/newuidmap", "/bin/newuidmap"};
	return installed(c, ARRAY_SIZE(c));
}

const char *kis_newgidmap_path(void)
{
	static const char *const c[] = {"/usr/bin/newgidmap", "/bin/newgidmap"};
	return installed(c, ARRAY_SIZE(c));
}

bool kis_subids_of(uid_t uid, struct kis_subids *out)
{
	memset(out, 0, sizeof(*out));
	if (!kis_newuidmap_path() || !kis_newgidmap_path())
		return false;
	return kis_subids_lookup(uid, out);
}
