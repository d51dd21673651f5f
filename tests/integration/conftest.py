# SPDX-License-Identifier: MIT
# Shared fixtures for the behaviour tests: they drive the built `kis` binary.
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIS = Path(os.environ.get("KIS", ROOT / "build" / "kis"))

PROC = ["--tier", "process", "--allow-process-tier"]


def kis(*args, input=None, env=None, timeout=60, check=None):
    """Run `kis sandbox ARGS...`; returns CompletedProcess with text output."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([str(KIS), "sandbox", *args], input=input, capture_output=True,
                          text=True, env=e, timeout=timeout)


def kis_json(*args, **kw):
    """Run with --json and parse the result document."""
    p = kis("run", "--json", *args, **kw)
    assert p.stdout.strip(), f"no JSON on stdout; stderr={p.stderr!r}"
    return p, json.loads(p.stdout)


@pytest.fixture(autouse=True, scope="session")
def _built():
    if not KIS.exists():
        pytest.exit(f"{KIS} is missing: run 'make' first", returncode=2)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A private store root for tests that make bases and workspaces."""
    root = tmp_path / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    return root
