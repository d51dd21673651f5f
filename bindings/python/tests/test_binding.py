# SPDX-License-Identifier: MIT
# The Python binding (issue 45): runs, errors, workspaces, sessions and the
# pty, threads, and a caller killed mid-run, on the landlock backend.
import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import kis_sandbox as ks
from conftest import BUILD, KIS, TREE


def test_run_returns_bytes_exit_code_and_usage(engine, landlock):
    r = engine.run(["sh", "-c", "printf 'a\\0b'; echo oops >&2; cat; exit 3"], landlock(),
                   stdin=b"in\0put")
    assert r.termination.reason is ks.Reason.EXITED
    assert r.exit_code == 3 and r.termination.exit_code == 3
    assert r.stdout == b"a\0bin\0put"  # NUL bytes survive, as JSON would not carry them
    assert r.stderr == b"oops\n"
    assert r.backend == "landlock" and r.tier == "host"
    assert r.usage.wall_ms > 0


def test_timeout_is_a_reason_not_an_exception(engine, landlock):
    r = engine.run(["sleep", "10"], landlock(limits=ks.Limits(wall_ms=300)))
    assert r.termination.reason is ks.Reason.TIMEOUT
    assert r.termination.exit_code is None


@pytest.mark.parametrize("profile,cls,code", [
    (dict(tier="process"), ks.EscapeHatchForbidden, "escape_hatch_forbidden"),
    (dict(backend="no-such-backend"), ks.TierUnavailable, "tier_unavailable"),
    (dict(backend="landlock", network={"mode": "egress"}), ks.ProfileUnsatisfiable,
     "profile_unsatisfiable"),
    (dict(limits={"wall_ms": -1}), ks.InvalidProfile, "invalid_profile"),
    (dict(no_such_field=1), ks.InvalidProfile, "invalid_profile"),
])
def test_each_error_code_is_its_own_exception(engine, landlock, profile, cls, code):
    with pytest.raises(cls) as e:
        engine.run(["true"], profile)
    assert isinstance(e.value, ks.KisError)
    assert e.value.code == code and e.value.message


def test_profile_dataclass_is_validated_by_the_engine(engine, landlock):
    with pytest.raises(ks.InvalidProfile) as e:
        engine.run(["true"], landlock(limits=ks.Limits(memory_bytes=-5)))
    assert "limits.memory_bytes" in e.value.message


def test_env_and_cwd_reach_the_command(engine, landlock):
    r = engine.run(["sh", "-c", "echo $FOO; pwd"], landlock(env={"FOO": "bar"}, cwd="/tmp"))
    assert r.stdout == b"bar\n/tmp\n", r


def test_base_clone_run_and_idempotent_destroy(engine, landlock, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_text("hello\n")
    base = engine.import_base(src)
    ws = engine.clone(base)
    r = ws.run(["sh", "-c", "cat f.txt; echo new > g.txt"], landlock())
    assert r.stdout == b"hello\n" and r.workspace == ws.id
    assert (Path(ws.path) / "g.txt").read_text() == "new\n"
    named = base.clone(id="w-named-by-caller")
    assert named.id == "w-named-by-caller"
    with pytest.raises(ks.DestinationExists):
        engine.clone(base, id="w-named-by-caller")
    for w in (ws, named):
        w.destroy()
        w.destroy()  # idempotent
    base.remove()
    with pytest.raises(ks.NotFound):
        engine.clone(base)


def test_cancel_from_another_thread_ends_with_cancelled(engine, landlock):
    with ks.Cancel() as c:
        threading.Timer(0.3, c.cancel).start()
        t = time.monotonic()
        r = engine.run(["sleep", "20"], landlock(), cancel=c)
    assert r.termination.reason is ks.Reason.CANCELLED
    assert time.monotonic() - t < 10


def test_a_run_releases_the_gil(engine, landlock):
    """Another thread keeps running Python while a run waits in C."""
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)
    t = threading.Thread(target=spin)
    t.start()
    try:
        engine.run(["sleep", "1"], landlock())
    finally:
        stop.set()
        t.join()
    assert ticks > 100  # a held GIL would allow ~none during the second in C


def test_eight_threads_at_once(engine, landlock):
    out = {}
    errors = []

    def worker(i):
        try:
            for j in range(3):
                r = engine.run(["sh", "-c", f"echo {i}-{j}"], landlock())
                out[(i, j)] = r.stdout
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert out == {(i, j): f"{i}-{j}\n".encode() for i in range(8) for j in range(3)}


def test_session_exec_shell_and_idempotent_destroy(engine, landlock):
    with engine.session(landlock()) as s:
        assert s.shell("cd /tmp && export GREETING=hi").ok
        r = s.shell("echo $GREETING from $PWD")
        assert r.stdout == b"hi from /tmp\n"
        assert s.exec(["cat"], stdin=b"abc").stdout == b"abc"
        s.destroy()
        s.destroy()
    assert not any((engine_store := Path(engine.store_root) / "sessions").glob(s.id)), engine_store


def test_session_pty_and_resize(engine, landlock):
    with engine.session(landlock()) as s:
        with s.pty(["sh", "-c", "stty size; read a; stty size; echo got $a"],
                   rows=30, cols=100) as t:
            buf = b""
            while b"30 100" not in buf:
                buf += t.read()
            t.resize(40, 120)
            time.sleep(0.2)
            t.write(b"abc\r")
            while b"got abc" not in buf:
                chunk = t.read()
                assert chunk, buf
                buf += chunk
            r = t.wait(30)
        assert b"40 120" in buf
        assert r.termination.reason is ks.Reason.EXITED and r.exit_code == 0


def test_engine_backends_lists_landlock(engine, landlock):
    b = {x["backend"]: x for x in engine.backends()}
    assert b["landlock"]["available"] and b["landlock"]["tier"] == "host"
    assert "wall_ms" in b["landlock"]["limits"]


def procs_with(marker):
    hits = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "cmdline").read_bytes():
                    hits.append(int(p.name))
            except OSError:
                pass
    return hits


def cgroups_named(name):
    return [os.path.join(top, name) for top, dirs, _ in os.walk("/sys/fs/cgroup") if name in dirs]


def test_killed_caller_leaves_no_sandbox(store, landlock):
    """SIGKILL the Python process during a run of sleep: the next store
    open (here `kis sandbox gc`) removes its processes, cgroup and owner."""
    marker = "31.4159"
    prog = textwrap.dedent(f"""
        import kis_sandbox as ks
        ks.Engine({str(store)!r}).run(["sleep", "{marker}"],
            ks.Profile(tier="host", backend="landlock", limits=ks.Limits(wall_ms=60000)))
    """)
    p = subprocess.Popen([sys.executable, "-c", prog], env=os.environ.copy())
    owners = store / "owners"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (procs_with(marker) and
                                               list(owners.glob("s-*"))):
        time.sleep(0.05)
    owner = [o.name for o in owners.glob("s-*")]
    assert procs_with(marker) and owner, "the run never started"
    p.send_signal(signal.SIGKILL)
    p.wait()
    g = subprocess.run([str(KIS), "sandbox", "gc", "--store-root", str(store), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert g.returncode == 0, g.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and procs_with(marker):
        time.sleep(0.05)
    assert not procs_with(marker)
    assert not cgroups_named(owner[0])
    assert not (owners / owner[0]).exists()



def test_wheel_installs_and_runs_the_readme_example(store, landlock, tmp_path):
    """The wheel `make python` built, installed with pip into a fresh
    directory, runs the README's example unchanged."""
    wheels = sorted((BUILD / "python" / "dist").glob("kis_sandbox-*.whl"))
    if not wheels:
        pytest.skip("no wheel: run 'make python' first")
    readme = (TREE / "bindings" / "python" / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--target", str(target), str(wheels[-1])], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KIS_SANDBOX_LIBRARY",)}
    env["PYTHONPATH"] = str(target)
    env["KIS_SANDBOX_ROOT"] = str(store)
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "hello" in r.stdout
    assert str(target) in subprocess.run(
        [sys.executable, "-c", "import kis_sandbox._lib as l; print(l._find())"], env=env,
        capture_output=True, text=True).stdout
