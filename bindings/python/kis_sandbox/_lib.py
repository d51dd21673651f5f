# SPDX-License-Identifier: MIT
"""The shared library through ctypes: where it is found and the
prototypes of the functions the package calls (include/kis/ffi.h and the
store's functions of include/kis/store.h).

ctypes is enough: every call takes handles, ids, fds and strings, never a
struct whose layout Python would have to mirror; ctypes releases the GIL
around each foreign call, so a run in one thread never stops the others.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

SONAME = "libkis-sandbox.so.0"
ID_BUFSZ = 65  # KIS_ID_BUFSZ (kis/id.h)


class _Error(ctypes.Structure):
    """struct kis_error (kis/error.h): read only through its accessors."""


_ErrorP = ctypes.POINTER(_Error)


def _find() -> str:
    """$KIS_SANDBOX_LIBRARY, else the copy in this package (a wheel made by
    `make python` carries the library and kis-agent beside it), else the
    system's (`make install`)."""
    env = os.environ.get("KIS_SANDBOX_LIBRARY")
    if env:
        return env
    here = Path(__file__).resolve().parent / "_native" / SONAME
    if here.exists():
        return str(here)
    return SONAME


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path, use_errno=True)
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    errp = ctypes.POINTER(_ErrorP)
    vp = ctypes.c_void_p
    sig = {
        "kis_version": (ctypes.c_char_p, []),
        "kis_error_code": (ctypes.c_int, [_ErrorP]),
        "kis_error_message": (ctypes.c_char_p, [_ErrorP]),
        "kis_error_free": (None, [_ErrorP]),
        "kis_error_errno": (ctypes.c_int, [_ErrorP]),
        "kis_errc_name": (ctypes.c_char_p, [ctypes.c_int]),
        "kis_profile_new": (vp, []),
        "kis_profile_free": (None, [vp]),
        "kis_profile_merge_json": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_size_t, errp]),
        "kis_profile_to_json": (vp, [vp]),
        "kis_result_new": (vp, []),
        "kis_result_free": (None, [vp]),
        "kis_result_to_json": (vp, [vp]),
        "kis_result_stream": (ctypes.c_int, [vp, ctypes.c_int, ctypes.POINTER(vp),
                                             ctypes.POINTER(ctypes.c_size_t)]),
        "kis_run_capture": (ctypes.c_int, [vp, c_char_pp, ctypes.c_char_p, ctypes.c_int,
                                           ctypes.c_int, vp, errp]),
        "kis_session_open": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_char_p, errp]),
        "kis_session_exec_capture": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, c_char_pp,
                                                    ctypes.c_bool, ctypes.c_int, ctypes.c_int,
                                                    vp, errp]),
        "kis_session_exec_pty": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, c_char_pp,
                                                ctypes.c_bool, ctypes.c_int, ctypes.c_int,
                                                ctypes.c_int, vp, errp]),
        "kis_session_destroy": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, errp]),
        "kis_backends_json": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(vp), errp]),
        "kis_store_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(vp), errp]),
        "kis_store_free": (None, [vp]),
        "kis_store_root": (ctypes.c_char_p, [vp]),
        "kis_base_import": (ctypes.c_int, [vp, ctypes.c_char_p, vp, ctypes.c_char_p, errp]),
        "kis_base_remove": (ctypes.c_int, [vp, ctypes.c_char_p, errp]),
        "kis_workspace_clone": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_char_p, errp]),
        "kis_workspace_path": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.POINTER(vp), errp]),
        "kis_workspace_destroy": (ctypes.c_int, [vp, ctypes.c_char_p, errp]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_lib: Optional[ctypes.CDLL] = None
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load(_find())
    return _lib


def take_string(p: Optional[int]) -> Optional[str]:
    """A malloc'ed C string the library handed over: copied, then freed."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        _libc.free(p)


def argv_array(argv: "list[str] | tuple[str, ...]") -> "ctypes.Array[ctypes.c_char_p]":
    """A NULL-terminated char *argv[]."""
    arr = (ctypes.c_char_p * (len(argv) + 1))()
    for i, a in enumerate(argv):
        arr[i] = os.fsencode(a)
    arr[len(argv)] = None
    return arr
