# SPDX-License-Identifier: MIT
"""kis_sandbox: the kis sandbox engine from Python (over libkis-sandbox).

    from kis_sandbox import Engine, Profile, Limits
    engine = Engine()
    result = engine.run(["echo", "hi"], Profile(tier="host", limits=Limits(wall_ms=5000)))
    print(result.termination.reason, result.stdout)
"""
from .engine import (Base, Cancel, Engine, Pty, Reason, Result, Session, Termination, Usage,
                     Workspace)
from .errors import (Busy, DestinationExists, EscapeHatchForbidden, InternalError,
                     InvalidArgument, InvalidId, InvalidProfile, KisError, NotFound,
                     ProfileUnsatisfiable, ProtocolError, TierUnavailable, TtyUnsupported)
from .profile import EscapeHatch, Limits, Microvm, Mount, Network, Profile, Tty, Wasm

__version__ = "0.1.0"

__all__ = [
    "Engine", "Base", "Workspace", "Session", "Pty", "Result", "Termination", "Usage", "Reason",
    "Cancel", "Profile", "Network", "Limits", "Mount", "Tty", "EscapeHatch", "Microvm", "Wasm",
    "KisError", "EscapeHatchForbidden", "TierUnavailable", "ProfileUnsatisfiable",
    "TtyUnsupported", "InvalidProfile", "InvalidId", "NotFound", "DestinationExists",
    "InvalidArgument", "Busy", "InternalError", "ProtocolError",
]
