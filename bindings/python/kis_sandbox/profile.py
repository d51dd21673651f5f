# SPDX-License-Identifier: MIT
"""The profile as a dataclass that mirrors the JSON profile
(docs/profile.md of the engine). Python does not validate it: the engine
does, when the profile is merged (InvalidProfile naming the JSON path).
Fields left None are absent from the JSON and keep the engine's value:
the zero profile is deny-all (no network, no escape hatch, default
limits)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Dict, List, Optional


def _plain(obj: Any) -> Any:
    """A dataclass as a dict without its None fields, recursively."""
    if is_dataclass(obj):
        out = {}
        for f in fields(obj):
            v = _plain(getattr(obj, f.name))
            if v is not None and v != {}:
                out[f.name] = v
        return out
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


@dataclass
class Network:
    """network: mode "off", "loopback", "egress" or "host" (host needs
    escape_hatch.allow_net_host); allow: egress destinations
    ("203.0.113.0/24:443")."""
    mode: Optional[str] = None
    allow: Optional[List[str]] = None


@dataclass
class Limits:
    """limits: each None keeps the engine's default (kis/limits.h)."""
    wall_ms: Optional[int] = None
    cpu_ms: Optional[int] = None
    memory_bytes: Optional[int] = None
    pids: Optional[int] = None
    output_bytes: Optional[int] = None
    file_bytes: Optional[int] = None
    open_files: Optional[int] = None
    disk_bytes: Optional[int] = None


@dataclass
class Mount:
    """One of mounts: a base or workspace id placed at target."""
    source: str
    target: str
    read_only: Optional[bool] = None


@dataclass
class Tty:
    """tty: a terminal inside the sandbox and its first size."""
    enabled: Optional[bool] = None
    rows: Optional[int] = None
    cols: Optional[int] = None


@dataclass
class EscapeHatch:
    """escape_hatch: what must be asked for by name to weaken confinement."""
    allow_process_tier: Optional[bool] = None
    allow_net_host: Optional[bool] = None


@dataclass
class Microvm:
    """microvm: accel "auto", "kvm" or "tcg"; vcpus 1..64."""
    accel: Optional[str] = None
    vcpus: Optional[int] = None


@dataclass
class Wasm:
    """wasm: engine "auto", "interpreter" or "compiler"; preopen
    "workspace" or "none"."""
    engine: Optional[str] = None
    preopen: Optional[str] = None


@dataclass
class Profile:
    """What a sandbox may do. Pass it to Engine.run or Engine.session.

    >>> Profile(tier="host", backend="landlock", limits=Limits(wall_ms=2000))
    """
    tier: Optional[str] = None
    backend: Optional[str] = None
    base: Optional[str] = None
    workspace: Optional[str] = None
    keep: Optional[bool] = None
    root: Optional[str] = None
    network: Network = field(default_factory=Network)
    limits: Limits = field(default_factory=Limits)
    env: Optional[Dict[str, str]] = None
    cwd: Optional[str] = None
    mounts: Optional[List[Mount]] = None
    tty: Tty = field(default_factory=Tty)
    escape_hatch: EscapeHatch = field(default_factory=EscapeHatch)
    microvm: Microvm = field(default_factory=Microvm)
    wasm: Wasm = field(default_factory=Wasm)

    def to_json(self) -> str:
        """The profile as the engine's JSON, without the fields left None."""
        return json.dumps(_plain(self))
