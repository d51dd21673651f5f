/* SPDX-License-Identifier: MIT */
/* kis/id.h: engine-minted identifiers and the one validation of a
 * caller-supplied id, done at the boundary. */
#ifndef KIS_ID_H
#define KIS_ID_H

#include <stddef.h>

#include "kis/error.h"

/* Longest id, without the terminating NUL. */
#define KIS_ID_MAX 64
/* Buffer size for a minted id: prefix ("b-", "w-", "s-") + 26 symbols + NUL. */
#define KIS_ID_BUFSZ (KIS_ID_MAX + 1)

/* Mint "<prefix>-<26 base32 symbols>" from 128 bits of getrandom(2) into
 * buf (KIS_ID_BUFSZ bytes). prefix is one lower-case letter. */
KIS_API int kis_id_mint(char prefix, char buf[KIS_ID_BUFSZ], struct kis_error **err);

/* Validate an id: charset [a-z0-9-], 1 to 64 characters, no leading dash
 * (the charset already excludes '.', '/' and NUL). `what` names the id in
 * the error ("workspace id"). Returns 0 or -1 with KIS_E_INVALID_ID. */
KIS_API int kis_id_validate(const char *id, const char *what, struct kis_error **err);

#endif
