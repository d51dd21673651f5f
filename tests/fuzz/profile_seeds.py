#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds for fuzz_profile: the README's profile (every field), and small
ones that set a field or two, the shapes a --profile file or a session's
record takes."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
full = {
    "tier": "auto", "backend": "landlock",
    "base": "b-akxxwqkvbthhjfk94mnckxvsw4", "workspace": "w-5qy968wjepwshsmk95vfbn7wjr",
    "keep": False, "root": "host",
    "network": {"mode": "off", "allow": ["203.0.113.0/24:443", "[2001:db8::1]:80"]},
    "limits": {"wall_ms": 1000, "cpu_ms": 5, "memory_bytes": 1 << 26, "pids": 16,
               "output_bytes": 1024, "file_bytes": 4096, "open_files": 64, "disk_bytes": 1 << 30},
    "env": {"K": "V", "LANG": "C.UTF-8"}, "cwd": "/workspace",
    "mounts": [{"source": "b-akxxwqkvbthhjfk94mnckxvsw4", "target": "/data", "read_only": True}],
    "tty": {"enabled": True, "rows": 24, "cols": 80},
    "escape_hatch": {"allow_process_tier": False, "allow_net_host": False},
    "microvm": {"accel": "tcg", "vcpus": 2},
    "wasm": {"engine": "interpreter", "preopen": "none"},
}
(out / "full.json").write_text(json.dumps(full))
for k, v in full.items():
    (out / f"one-{k}.json").write_text(json.dumps({k: v}))
(out / "tier-microvm.json").write_text(json.dumps({"tier": "microvm", "network": {"mode": "egress"}}))
(out / "empty.json").write_text("{}")
