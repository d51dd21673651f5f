# SPDX-License-Identifier: MIT
# Honest answers, round three (issue 40): a limit is enforced or refused by
# name, and the result says what happened. Each test is named after the
# defect it pins and failed on the build before its fix.
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import KIS

NATIVE = ["process", "landlock", "bubblewrap", "oci"]


def backends():
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], capture_output=True,
                       text=True, timeout=120)
    return {c["backend"]: c for c in json.loads(p.stdout)} if p.returncode == 0 else {}


_CAPS = {}


def require(backend):
    if not _CAPS:
        _CAPS.update(backends())
    c = _CAPS.get(backend)
    if not c:
        pytest.skip(f"{backend} is not in this build")
    if not c.get("available"):
        pytest.skip(f"{backend} is absent here: {c.get('why_absent') or c.get('status')}")
    return c


def flags(backend):
    return ["--backend", backend] + (["--allow-process-tier"] if backend == "process" else [])


@pytest.fixture
def world(monkeypatch):
    """A private store under a directory others may search: the host tiers
    run commands as an unprivileged user, who must reach the workspace."""
    top = Path(tempfile.mkdtemp(prefix="kis-honest-", dir="/tmp"))
    os.chmod(top, 0o711)
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(top / "store"))
    try:
        yield top
    finally:
        subprocess.run([str(KIS), "sandbox", "gc"], capture_output=True, timeout=120)
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("backend", NATIVE)
def test_output_limited_run_exited_0_at_random(world, backend):
    """`yes | head -c 5000` under a 1k output limit often ends by itself
    before the limit's SIGKILL lands: kis exited 0 (landlock 9 of 10), so a
    caller checking $? read success from a cut stream. The verdict's status
    is 137, every time (README "Termination reasons and exit statuses")."""
    require(backend)
    seen = {}
    for _ in range(50):
        p = subprocess.run([str(KIS), "sandbox", "run", *flags(backend), "--output-limit", "1k",
                            "--", "sh", "-c", "yes | head -c 5000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        seen[p.returncode] = seen.get(p.returncode, 0) + 1
        assert len(p.stdout) <= 1024
        assert b"output_limit" in p.stderr, p.stderr
    assert seen == {137: 50}, f"exit statuses of 50 runs: {seen}"
