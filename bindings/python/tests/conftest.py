# SPDX-License-Identifier: MIT
# Fixtures of the Python binding's tests: the package as `make python`
# staged it in the build tree (PYTHONPATH), a private store, the landlock
# backend (host tier), which runs as root here.
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

TREE = Path(__file__).resolve().parents[3]
BUILD = Path(os.environ.get("BUILD", TREE / "build"))
KIS = BUILD / "kis"

import kis_sandbox  # noqa: E402  (from the build tree: make check-python sets PYTHONPATH)


@pytest.fixture
def store():
    """A store of its own under a directory others may search: the host
    tier runs commands as an unprivileged user, who must reach it."""
    top = Path(tempfile.mkdtemp(prefix="kis-py-", dir="/tmp"))
    os.chmod(top, 0o711)
    root = top / "store"
    try:
        yield root
    finally:
        if KIS.exists():
            for s in (root / "sessions").glob("s-*"):
                subprocess.run([str(KIS), "sandbox", "session", "destroy", "--store-root",
                                str(root), s.name], capture_output=True)
            subprocess.run([str(KIS), "sandbox", "gc", "--store-root", str(root)],
                           capture_output=True)
        subprocess.run(["umount", "-R", "-l", str(root)], capture_output=True)
        for m in [l.split()[4] for l in open("/proc/self/mountinfo") if str(root) in l]:
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def engine(store):
    e = kis_sandbox.Engine(store)
    try:
        yield e
    finally:
        e.close()


def landlock_profile(**kw):
    """The landlock backend, with a wall clock that ends a stuck test."""
    kw.setdefault("limits", kis_sandbox.Limits(wall_ms=30000))
    return kis_sandbox.Profile(tier="host", backend="landlock", **kw)


@pytest.fixture(scope="session")
def landlock():
    if os.geteuid() != 0:
        pytest.skip("needs root (the host tier's cgroups and overlay clones)")
    top = tempfile.mkdtemp(prefix="kis-py-probe-", dir="/tmp")
    try:
        c = {b["backend"]: b for b in kis_sandbox.Engine(top).backends()}.get("landlock")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    if not c or not c["available"]:
        pytest.skip(f"landlock is absent here: {c and c.get('why_absent')}")
    return landlock_profile
