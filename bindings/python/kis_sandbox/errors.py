# SPDX-License-Identifier: MIT
"""The engine's errors as exceptions: one class per stable error code of
include/kis/error.h, each carrying the code's name, the message and the
errno the engine blamed (0 when none)."""
from __future__ import annotations

import ctypes
from typing import Dict, Optional, Type

from . import _lib


class KisError(Exception):
    """An error the engine returned.

    Attributes:
        code: the stable code's name, e.g. ``"profile_unsatisfiable"``.
        message: what went wrong and what to change (lower-case).
        errno: the system error to blame, 0 when none.
    """

    code: str = "unknown"

    def __init__(self, message: str, code: Optional[str] = None, errno: int = 0) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.errno = errno

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class EscapeHatchForbidden(KisError):
    """The unconfined tier or host networking without its escape hatch."""
    code = "escape_hatch_forbidden"


class TierUnavailable(KisError):
    """A pinned tier or backend is absent on this host."""
    code = "tier_unavailable"


class ProfileUnsatisfiable(KisError):
    """The backend is present but cannot enforce a field of the profile."""
    code = "profile_unsatisfiable"


class TtyUnsupported(KisError):
    """A terminal was asked of a backend without one."""
    code = "tty_unsupported"


class InvalidProfile(KisError):
    """Malformed profile: an unknown field, a wrong type, a bad value."""
    code = "invalid_profile"


class InvalidId(KisError):
    """An id that fails validation."""
    code = "invalid_id"


class NotFound(KisError):
    """A valid id that names nothing."""
    code = "not_found"


class DestinationExists(KisError):
    """A clone target that already holds content."""
    code = "destination_exists"


class InvalidArgument(KisError):
    """A bad argument to the API."""
    code = "invalid_argument"


class Busy(KisError):
    """The object is in use (a base with clones, a held workspace)."""
    code = "busy"


class InternalError(KisError):
    """A bug or an unexpected host failure."""
    code = "internal"


class ProtocolError(KisError):
    """The sandbox's side broke the agent protocol."""
    code = "protocol"


_BY_CODE: Dict[str, Type[KisError]] = {
    c.code: c for c in (EscapeHatchForbidden, TierUnavailable, ProfileUnsatisfiable,
                        TtyUnsupported, InvalidProfile, InvalidId, NotFound,
                        DestinationExists, InvalidArgument, Busy, InternalError, ProtocolError)
}


def class_for(code: str) -> Type[KisError]:
    """The exception class of a code's name (KisError for a code newer
    than this package)."""
    return _BY_CODE.get(code, KisError)


def raise_from(err: "ctypes._Pointer[_lib._Error]") -> None:
    """Raise the exception of a struct kis_error *, freeing it."""
    lib = _lib.lib()
    try:
        num = lib.kis_error_code(err)
        code = (lib.kis_errc_name(num) or b"unknown").decode()
        msg = (lib.kis_error_message(err) or b"").decode("utf-8", "replace")
        eno = lib.kis_error_errno(err)
    finally:
        lib.kis_error_free(err)
    raise class_for(code)(msg, code, eno)
