#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds for fuzz_oci_config: a config.json of the shape the OCI runtime
spec describes (config.md: ociVersion, process, root, mounts, linux), once
per tier annotation, one with every field bubblewrap's plan reads, and an
exec's process.json."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
base = {
    "ociVersion": "1.0.0",
    "process": {"terminal": False, "user": {"uid": 0, "gid": 0},
                "args": ["sh"], "env": ["PATH=/usr/bin:/bin", "TERM=xterm"], "cwd": "/",
                "capabilities": {k: ["CAP_CHOWN", "CAP_KILL"] for k in
                                 ("bounding", "effective", "permitted")},
                "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
                "noNewPrivileges": True},
    # a directory every host has and the model accepts (it resolves
    # root.path on the host): the fuzzer then reaches the policy and plan
    "root": {"path": "/var/tmp", "readonly": True},
    "hostname": "box",
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
               {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
                "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666"]}],
    "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]},
              "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
              "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"]},
}


def put(name, doc):
    (out / f"{name}.json").write_text(json.dumps(doc))


put("plain", base)
for tier in ("container", "microvm", "host"):
    d = json.loads(json.dumps(base))
    d["annotations"] = {"run.kis.tier": tier}
    put(f"tier-{tier}", d)
d = json.loads(json.dumps(base))
d["annotations"] = {"run.kis.tier": "host"}
d["process"]["oomScoreAdj"] = 100
d["linux"]["resources"].update({"memory": {"limit": 1 << 26}, "pids": {"limit": 64}})
d["mounts"].append({"destination": "/data", "type": "bind", "source": "/tmp",
                    "options": ["rbind", "ro"]})
put("host-full", d)
put("process", base["process"])
