# SPDX-License-Identifier: MIT
# One system view for every tier (src/confine/sysview.c): each entry of the
# table is checked on every tier that shows root: host, from inside a
# sandbox. The table is read from the C source itself, so the test and the
# tiers cannot drift apart (the container tier once showed
# /etc/security/opasswd, which the others hid, and lacked /opt).
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import KIS, ROOT

TIERS = ["landlock", "bubblewrap", "oci"]
SYSVIEW = ROOT / "src" / "confine" / "sysview.c"


def table(name):
    text = SYSVIEW.read_text()
    m = re.search(r"const char \*const " + name + r"\[\] = \{(.*?)\};", text, re.S)
    assert m, f"{name} not found in {SYSVIEW}"
    return re.findall(r'"([^"]+)"', m.group(1))


def available(name):
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], capture_output=True,
                       text=True)
    rows = [b for b in json.loads(p.stdout or "[]") if b["backend"] == name]
    return rows and rows[0]["available"], (rows[0].get("why_absent") if rows else "not built")


@pytest.fixture(scope="module")
def env():
    if os.geteuid() != 0:
        pytest.skip("the hidden entries are root's files: the check needs the engine as root")
    top = Path(tempfile.mkdtemp(prefix="kis-sysview-", dir="/tmp"))
    os.chmod(top, 0o711)
    e = dict(os.environ, KIS_SANDBOX_ROOT=str(top / "store"))
    try:
        src = top / "base"
        src.mkdir()
        (src / "x").write_text("x\n")
        p = subprocess.run([str(KIS), "sandbox", "base", "import", str(src)],
                           capture_output=True, text=True, env=e)
        assert p.returncode == 0, p.stderr
        yield {"env": e, "base": p.stdout.strip()}
    finally:
        for ws in (top / "store" / "workspaces").glob("*/*"):
            if os.path.ismount(ws):
                subprocess.run(["umount", "-l", str(ws)], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def inside(env, backend, script):
    ok, why = available(backend)
    if not ok:
        pytest.skip(f"{backend} is absent here: {why}")
    p = subprocess.run([str(KIS), "sandbox", "run", "--backend", backend, "--base", env["base"],
                        "--", "sh", "-c", script], capture_output=True, text=True,
                       env=env["env"], stdin=subprocess.DEVNULL, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("backend", TIERS)
def test_every_hidden_etc_entry_is_hidden(env, backend):
    hidden = [f"/etc/{h}" for h in table("kis_sysview_etc_hidden")]
    present = [h for h in hidden if os.path.lexists(h)]
    if not present:
        pytest.skip("none of the hidden entries exists on this host")
    # a hidden file reads empty or not at all, and so does every file in a
    # hidden directory (landlock may still list the names: its READ_DIR on
    # /etc covers the hierarchy; the contents are what is secret)
    script = "; ".join(
        f'if [ -d {h} ]; then for f in $(find {h} -type f 2>/dev/null); do '
        f'head -c1 "$f" 2>/dev/null | grep -q . && echo "SHOWN $f"; done; '
        f'else head -c1 {h} 2>/dev/null | grep -q . && echo "SHOWN {h}"; fi'
        for h in present) + "; true"
    readable = [h for h in present if os.path.isdir(h) and any(
        f.is_file() for f in Path(h).rglob("*"))]
    assert readable or any(os.path.isfile(h) for h in present), "nothing to check"
    out = inside(env, backend, script)
    assert "SHOWN" not in out, out


@pytest.mark.parametrize("backend", TIERS)
def test_every_system_directory_is_shown_read_only(env, backend):
    dirs = [d for d in table("kis_sysview_dirs") if os.path.isdir(d)]
    script = "; ".join(f'[ -d {d} ] || echo "MISSING {d}"; touch {d}/.kis-probe 2>/dev/null '
                       f'&& echo "WRITABLE {d}"' for d in dirs) + "; true"
    out = inside(env, backend, script)
    assert "MISSING" not in out and "WRITABLE" not in out, out
    assert not [d for d in dirs if os.path.exists(f"{d}/.kis-probe")]


@pytest.mark.parametrize("backend", ["bubblewrap", "oci"])
def test_proc_masked_and_read_only_entries(env, backend):
    masked = [m for m in table("kis_sysview_masked") if m.startswith("/proc/") and
              os.path.exists(m)]
    ro = [r for r in table("kis_sysview_readonly") if os.path.exists(r)]
    script = "; ".join(f'head -c1 {m} 2>/dev/null | grep -q . && echo "SHOWN {m}"; '
                       f'[ -d {m} ] && ls -A {m} | head -c1 | grep -q . && echo "SHOWN {m}"'
                       for m in masked)
    script += "; " + "; ".join(
        f'grep -q " {r} " /proc/self/mountinfo && grep " {r} " /proc/self/mountinfo | '
        f'grep -q " ro," || echo "NOT-RO {r}"' for r in ro) + "; true"
    out = inside(env, backend, script)
    assert "SHOWN" not in out and "NOT-RO" not in out, out
