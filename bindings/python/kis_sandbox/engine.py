# SPDX-License-Identifier: MIT
"""The engine: runs, sessions, bases and workspaces over libkis-sandbox.

Every call into the library is a ctypes foreign call, which releases the
GIL: a run blocks only the thread that made it. An Engine may be used from
several threads at once (each run has its own profile and result handles;
the store handle for bases and workspaces is behind a lock).

A process killed mid-run (SIGKILL) leaves what the run made recorded under
the run's owner in the store; the next store open by anyone (the next
run, `kis sandbox gc`) removes it (src/engine/owner.h).
"""
from __future__ import annotations

import ctypes
import enum
import fcntl
import json
import os
import signal
import struct
import termios
import threading
import tty as _tty
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _lib
from .errors import KisError, raise_from
from .profile import Profile

ProfileLike = Union[Profile, Dict[str, Any], str, None]
StdinLike = Union[bytes, int, IO[bytes], None]


class Reason(str, enum.Enum):
    """How a command ended (termination.reason; kis/result.h)."""
    EXITED = "exited"
    SIGNALED = "signaled"
    TRAPPED = "trapped"
    TIMEOUT = "timeout"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    PIDS_LIMIT = "pids_limit"
    CANCELLED = "cancelled"
    SETUP_FAILED = "setup_failed"
    DISK_LIMIT = "disk_limit"
    UNKNOWN = "unknown"

    @classmethod
    def _missing_(cls, value: object) -> "Reason":
        return cls.UNKNOWN


@dataclass(frozen=True)
class Termination:
    """reason; exit_code when it exited (else None); the signal that ended
    it; the engine's explanation."""
    reason: Reason
    exit_code: Optional[int]
    signal: Optional[int]
    detail: Optional[str]


@dataclass(frozen=True)
class Usage:
    """What the command used, as the engine measured it."""
    wall_ms: int = 0
    user_ms: int = 0
    sys_ms: int = 0
    max_rss_bytes: int = 0
    minor_faults: int = 0
    major_faults: int = 0
    voluntary_ctxsw: int = 0
    involuntary_ctxsw: int = 0
    linear_memory_bytes: int = 0


@dataclass(frozen=True)
class Result:
    """One run's or exec's result. ``exit_code`` is the CLI's exit status
    (the command's code, 126/127 when it never ran, 128+N for signal N);
    ``termination`` says how it ended."""
    sandbox: str
    tier: str
    backend: str
    termination: Termination
    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    usage: Usage
    workspace: Optional[str] = None
    workspace_kept: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """It exited with 0."""
        return self.termination.reason is Reason.EXITED and self.exit_code == 0


class Cancel:
    """A handle that cancels a run from another thread: pass it as
    ``cancel=`` and call cancel(). A run ends with reason cancelled; an
    exec in a session is sent SIGKILL. Usable once; close() frees it."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe2(os.O_CLOEXEC)
        self._done = False

    def fileno(self) -> int:
        return self._r

    def cancel(self) -> None:
        """Cancel (idempotent)."""
        if not self._done:
            self._done = True
            os.write(self._w, bytes([signal.SIGKILL]))

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._r = self._w = -1

    def __enter__(self) -> "Cancel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _err() -> "ctypes._Pointer[_lib._Error]":
    return _lib._ErrorP()


class _Handle:
    """A profile or result handle, freed on exit."""

    def __init__(self, ptr: Optional[int], free: Any) -> None:
        if not ptr:
            raise MemoryError("the library could not allocate a handle")
        self.ptr = ptr
        self._free = free

    def __enter__(self) -> int:
        return self.ptr

    def __exit__(self, *exc: object) -> None:
        self._free(self.ptr)


def _profile_json(profile: ProfileLike) -> str:
    if profile is None:
        return "{}"
    if isinstance(profile, Profile):
        return profile.to_json()
    if isinstance(profile, dict):
        return json.dumps(profile)
    return str(profile)


def _profile_handle(profile: ProfileLike, **extra: Any) -> _Handle:
    """A struct kis_profile * merged from the profile (validated by the
    engine), then from extra fields."""
    lib = _lib.lib()
    h = _Handle(lib.kis_profile_new(), lib.kis_profile_free)
    for doc in (_profile_json(profile), json.dumps(extra) if extra else None):
        if doc is None:
            continue
        data = doc.encode()
        err = _err()
        if lib.kis_profile_merge_json(h.ptr, data, len(data), ctypes.byref(err)) < 0:
            lib.kis_profile_free(h.ptr)
            raise_from(err)
    return h


def _result(res: int) -> Result:
    lib = _lib.lib()
    doc = json.loads(_lib.take_string(lib.kis_result_to_json(res)) or "{}")
    streams = []
    for sid in (1, 2):
        data = ctypes.c_void_p()
        n = ctypes.c_size_t()
        lib.kis_result_stream(res, sid, ctypes.byref(data), ctypes.byref(n))
        streams.append(ctypes.string_at(data.value, n.value) if data.value else b"")
    t = doc.get("termination", {})
    trunc = {s.get("name"): bool(s.get("truncated")) for s in doc.get("streams", [])}
    u = doc.get("usage", {})
    return Result(
        # "id" names the document's own object; "sandbox" is its deprecated alias
        sandbox=doc.get("id") or doc.get("sandbox", ""),
        tier=doc.get("tier", ""),
        backend=doc.get("backend") or "",
        termination=Termination(Reason(t.get("reason", "unknown")), t.get("exit_code"),
                                t.get("signal"), t.get("detail")),
        exit_code=int(doc.get("exit_status", -1)),
        stdout=streams[0],
        stderr=streams[1],
        stdout_truncated=trunc.get("stdout", False),
        stderr_truncated=trunc.get("stderr", False),
        usage=Usage(**{k: int(v) for k, v in u.items()
                       if k in Usage.__dataclass_fields__ and v is not None}),
        workspace=doc.get("workspace"),
        workspace_kept=bool(doc.get("workspace_kept", False)),
        raw=doc,
    )


class _Stdin:
    """The command's stdin as an fd: bytes go into a memfd (a pipe would
    block the writer before the command reads), an int or a file object
    is used as it is, None is /dev/null (-1)."""

    def __init__(self, stdin: StdinLike) -> None:
        self._own = -1
        if stdin is None:
            self.fd = -1
        elif isinstance(stdin, (bytes, bytearray, memoryview)):
            self._own = os.memfd_create("kis-stdin", os.MFD_CLOEXEC)
            os.write(self._own, bytes(stdin))
            os.lseek(self._own, 0, os.SEEK_SET)
            self.fd = self._own
        elif isinstance(stdin, int):
            self.fd = stdin
        else:
            self.fd = stdin.fileno()

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        if self._own >= 0:
            os.close(self._own)


def _argv(argv: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(argv, str):
        raise TypeError("argv is a list of strings; for a shell line use Session.shell()")
    if not argv:
        raise ValueError("no command to run")
    return list(argv)


class Engine:
    """The sandbox engine over one store.

    Args:
        store_root: the store's directory; None is $KIS_SANDBOX_ROOT, else
            the default (/var/lib/kis/sandbox for root).
    """

    def __init__(self, store_root: Optional[Union[str, os.PathLike]] = None) -> None:
        self._root = os.fsencode(store_root) if store_root is not None else None
        self._store: Optional[int] = None
        self._lock = threading.Lock()
        _lib.lib()  # load now: a missing library fails here, not mid-run

    @property
    def store_root(self) -> Optional[str]:
        return os.fsdecode(self._root) if self._root is not None else None

    @staticmethod
    def version() -> str:
        """The library's version."""
        return _lib.lib().kis_version().decode()

    def _with_store(self, fn: Any) -> Any:
        lib = _lib.lib()
        with self._lock:
            if self._store is None:
                st = ctypes.c_void_p()
                err = _err()
                if lib.kis_store_open(self._root, ctypes.byref(st), ctypes.byref(err)) < 0:
                    raise_from(err)
                self._store = st.value
            return fn(self._store)

    def close(self) -> None:
        """Close the store handle (runs need none). Idempotent."""
        with self._lock:
            if self._store is not None:
                _lib.lib().kis_store_free(self._store)
                self._store = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def backends(self) -> List[Dict[str, Any]]:
        """The backends compiled in and what each can enforce on this host,
        probed now: dicts with backend, tier, available, why_absent, tty,
        shell, network and limits."""
        lib = _lib.lib()
        out = ctypes.c_void_p()
        err = _err()
        if lib.kis_backends_json(self._root, ctypes.byref(out), ctypes.byref(err)) < 0:
            raise_from(err)
        return json.loads(_lib.take_string(out.value) or "[]")

    def import_base(self, path: Union[str, os.PathLike]) -> "Base":
        """Copy the tree at path into the store as a new immutable base."""
        lib = _lib.lib()
        buf = ctypes.create_string_buffer(_lib.ID_BUFSZ)

        def do(st: int) -> None:
            err = _err()
            if lib.kis_base_import(st, os.fsencode(path), None, buf, ctypes.byref(err)) < 0:
                raise_from(err)
        self._with_store(do)
        return Base(self, buf.value.decode())

    def clone(self, base: Union["Base", str], id: Optional[str] = None) -> "Workspace":
        """A copy-on-write workspace cloned from base; id None mints one."""
        lib = _lib.lib()
        bid = base.id if isinstance(base, Base) else base
        buf = ctypes.create_string_buffer(_lib.ID_BUFSZ)

        def do(st: int) -> None:
            err = _err()
            if lib.kis_workspace_clone(st, bid.encode(), id.encode() if id else None, buf,
                                       ctypes.byref(err)) < 0:
                raise_from(err)
        self._with_store(do)
        return Workspace(self, buf.value.decode())

    def run(self, argv: Sequence[str], profile: ProfileLike = None, *,
            stdin: StdinLike = None, cancel: Optional[Cancel] = None,
            workspace: Optional[Union["Workspace", str]] = None,
            base: Optional[Union["Base", str]] = None) -> Result:
        """Run one command in a fresh sandbox and return its result, with
        stdout and stderr captured. The profile (a Profile, a dict or JSON
        text) is validated by the engine. workspace or base set the
        profile's field of that name. A command that fails is a Result;
        only an engine error (the profile refused, the tier absent) raises.
        """
        extra: Dict[str, Any] = {}
        if workspace is not None:
            extra["workspace"] = workspace.id if isinstance(workspace, Workspace) else workspace
        if base is not None:
            extra["base"] = base.id if isinstance(base, Base) else base
        lib = _lib.lib()
        args = _lib.argv_array(_argv(argv))
        with _profile_handle(profile, **extra) as p, \
                _Handle(lib.kis_result_new(), lib.kis_result_free) as res, _Stdin(stdin) as fd:
            err = _err()
            if lib.kis_run_capture(p, args, self._root, fd,
                                   cancel.fileno() if cancel else -1, res,
                                   ctypes.byref(err)) < 0:
                raise_from(err)
            return _result(res)

    def session(self, profile: ProfileLike = None) -> "Session":
        """A sandbox that outlives a command: exec() and shell() run in it
        one after another. Use it as a context manager (destroyed on exit)
        or call destroy()."""
        lib = _lib.lib()
        buf = ctypes.create_string_buffer(_lib.ID_BUFSZ)
        with _profile_handle(profile) as p:
            err = _err()
            if lib.kis_session_open(p, self._root, buf, ctypes.byref(err)) < 0:
                raise_from(err)
        return Session(self, buf.value.decode())


class Base:
    """An immutable tree in the store that workspaces are cloned from."""

    def __init__(self, engine: Engine, id: str) -> None:
        self.engine = engine
        self.id = id

    def __repr__(self) -> str:
        return f"Base({self.id!r})"

    def clone(self, id: Optional[str] = None) -> "Workspace":
        """Engine.clone(self, id)."""
        return self.engine.clone(self, id)

    def remove(self) -> None:
        """Mark the base removed (freed with its last clone). Idempotent."""
        lib = _lib.lib()

        def do(st: int) -> None:
            err = _err()
            if lib.kis_base_remove(st, self.id.encode(), ctypes.byref(err)) < 0:
                raise_from(err)
        self.engine._with_store(do)

    destroy = remove


class Workspace:
    """A copy-on-write clone of a base; runs given it see and change it."""

    def __init__(self, engine: Engine, id: str) -> None:
        self.engine = engine
        self.id = id

    def __repr__(self) -> str:
        return f"Workspace({self.id!r})"

    @property
    def path(self) -> str:
        """The host path of the workspace's files."""
        lib = _lib.lib()
        out = ctypes.c_void_p()

        def do(st: int) -> None:
            err = _err()
            if lib.kis_workspace_path(st, self.id.encode(), ctypes.byref(out),
                                      ctypes.byref(err)) < 0:
                raise_from(err)
        self.engine._with_store(do)
        return _lib.take_string(out.value) or ""

    def run(self, argv: Sequence[str], profile: ProfileLike = None, **kw: Any) -> Result:
        """Engine.run with this workspace."""
        return self.engine.run(argv, profile, workspace=self, **kw)

    def destroy(self) -> None:
        """Remove the workspace. Idempotent; Busy while a session holds it."""
        lib = _lib.lib()

        def do(st: int) -> None:
            err = _err()
            if lib.kis_workspace_destroy(st, self.id.encode(), ctypes.byref(err)) < 0:
                raise_from(err)
        self.engine._with_store(do)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


class Session:
    """A sandbox that outlives a command (an agent inside it keeps its
    state): a shell() sees the cwd and exported variables of the last."""

    def __init__(self, engine: Engine, id: str) -> None:
        self.engine = engine
        self.id = id
        self._destroyed = False

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def _exec(self, argv: Sequence[str], shell: bool, stdin: StdinLike,
              cancel: Optional[Cancel]) -> Result:
        lib = _lib.lib()
        args = _lib.argv_array(list(argv))
        with _Handle(lib.kis_result_new(), lib.kis_result_free) as res, _Stdin(stdin) as fd:
            err = _err()
            if lib.kis_session_exec_capture(self.engine._root, self.id.encode(), args, shell, fd,
                                            cancel.fileno() if cancel else -1, res,
                                            ctypes.byref(err)) < 0:
                raise_from(err)
            return _result(res)

    def exec(self, argv: Sequence[str], *, stdin: StdinLike = None,
             cancel: Optional[Cancel] = None) -> Result:
        """Run argv in the session, output captured."""
        return self._exec(_argv(argv), False, stdin, cancel)

    def shell(self, line: str, *, stdin: StdinLike = None,
              cancel: Optional[Cancel] = None) -> Result:
        """Run a shell line; its working directory and environment carry
        over to the next shell() of the session."""
        return self._exec([line], True, stdin, cancel)

    def pty(self, argv: Sequence[str], rows: int = 24, cols: int = 80) -> "Pty":
        """Start argv on a terminal inside the session; read and write the
        returned Pty, resize() it, wait() for its Result."""
        return Pty(self, _argv(argv), rows, cols)

    def destroy(self) -> None:
        """End every process of the session and release what it made.
        Idempotent."""
        if self._destroyed:
            return
        lib = _lib.lib()
        err = _err()
        if lib.kis_session_destroy(self.engine._root, self.id.encode(), ctypes.byref(err)) < 0:
            raise_from(err)
        self._destroyed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Pty:
    """A command on a terminal inside a session. ``fd`` is the master side
    of a pseudo-terminal the engine wires into the sandbox: read() what the
    command writes, write() its keys. The exec runs in a thread of its own
    (the library call releases the GIL)."""

    def __init__(self, session: Session, argv: List[str], rows: int, cols: int) -> None:
        self.session = session
        self.fd, self._slave = os.openpty()
        os.set_inheritable(self.fd, False)
        os.set_inheritable(self._slave, False)
        # raw: the bytes pass the line discipline unchanged; the terminal
        # that echoes and edits lines is the one inside the sandbox
        _tty.setraw(self._slave)
        _set_size(self._slave, rows, cols)
        self._resize_r, self._resize_w = os.pipe2(os.O_CLOEXEC)
        self._cancel = Cancel()
        self._result: Optional[Result] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(argv,), daemon=True)
        self._thread.start()

    def _run(self, argv: List[str]) -> None:
        lib = _lib.lib()
        args = _lib.argv_array(argv)
        try:
            with _Handle(lib.kis_result_new(), lib.kis_result_free) as res:
                err = _err()
                if lib.kis_session_exec_pty(self.session.engine._root,
                                            self.session.id.encode(), args, False,
                                            self._slave, self._resize_r,
                                            self._cancel.fileno(), res,
                                            ctypes.byref(err)) < 0:
                    raise_from(err)
                self._result = _result(res)
        except BaseException as e:  # handed to wait()
            self._error = e

    def read(self, n: int = 65536) -> bytes:
        """Up to n bytes the command wrote (b"" once it is gone)."""
        try:
            return os.read(self.fd, n)
        except OSError:
            return b""

    def write(self, data: bytes) -> int:
        """Send keys to the command."""
        return os.write(self.fd, data)

    def resize(self, rows: int, cols: int) -> None:
        """Change the terminal's size; the command gets SIGWINCH."""
        _set_size(self._slave, rows, cols)
        os.write(self._resize_w, b"\0")

    def kill(self) -> None:
        """Send the command SIGKILL."""
        self._cancel.cancel()

    def wait(self, timeout: Optional[float] = None) -> Result:
        """The exec's Result once the command ended (TimeoutError if not
        within timeout seconds)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the command on the terminal is still running")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def close(self) -> None:
        """Kill the command if it still runs, wait, and close the fds."""
        if self._thread.is_alive():
            self.kill()
            self._thread.join()
        for fd in (self.fd, self._slave, self._resize_r, self._resize_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._cancel.close()

    def __enter__(self) -> "Pty":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Engine", "Base", "Workspace", "Session", "Pty", "Result", "Termination", "Usage",
           "Reason", "Cancel", "KisError"]
