# SPDX-License-Identifier: MIT
# The WASI preview 1 conformance suite (WebAssembly/wasi-testsuite, the
# prebuilt c, rust and assemblyscript tests in ../shared/testdata): each
# test runs through `kis sandbox run --tier wasm` in a fresh copy of its
# root, and passes by the upstream runner's rule (the exit code, and stdout
# and stderr starting with the expected text). A test that cannot pass is
# listed in DEVIATIONS with the reason, as docs/wasm.md documents it.
# Every test runs under each wasm engine (wasm_engines.ENGINES: the
# interpreter and the compiler; on a host without the compiler its half
# skips with the CLI's reason). `make wasi-suite WASM_ENGINE=compiler`
# runs one engine's half.
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import KIS, ROOT
from wasm_engines import ENGINES, engine_flags

SUITE = Path(os.environ.get("KIS_WASI_TESTSUITE",
                            ROOT.parent / "shared" / "testdata" / "wasi-testsuite"))
GROUPS = ("assemblyscript", "c", "rust")

# "group/name" (every engine) or "engine:group/name": why it does not pass
# (docs/wasm.md, "WASI conformance").
DEVIATIONS = {}


def suite_tests():
    if not SUITE.is_dir():
        return []
    return sorted(f"{g}/{m.stem}" for g in GROUPS if (SUITE / g).is_dir()
                  for m in (SUITE / g).glob("*.wasm"))


def _writable_copy(src, dst):
    """The suite's data is read-only on this machine; upstream's files are
    ordinary ones (0644, 0755) that the tests write to."""
    shutil.copytree(src, dst, symlinks=True)
    for d, dirs, files in os.walk(dst):
        for n in dirs + files:
            p = Path(d) / n
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
    Path(dst).chmod(0o755)


def _kis(store, *args, timeout=120):
    return subprocess.run([str(KIS), "sandbox", *args], capture_output=True, text=True,
                          env=dict(os.environ, KIS_SANDBOX_ROOT=str(store)), timeout=timeout)


TESTS = suite_tests()


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"no WASI testsuite at {SUITE}")
def test_the_suite_is_complete():
    assert len(TESTS) == 72, TESTS


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"no WASI testsuite at {SUITE}")
@pytest.mark.parametrize("name", TESTS or ["none"])
@pytest.mark.parametrize("engine", ENGINES)
def test_wasi_suite(engine, name, store, tmp_path):
    engine_args = engine_flags(engine)
    group, test = name.split("/")
    spec = {}
    side = SUITE / group / (test + ".json")
    if side.exists():
        spec = json.loads(side.read_text())
    base = tmp_path / "base"
    if "root" in spec:
        _writable_copy(SUITE / group / spec["root"], base)
    else:
        base.mkdir()
    # The module lies in the workspace (the wasm tier reads it there).
    module = f"{test}.wasm"
    shutil.copy(SUITE / group / module, base / module)
    b = _kis(store, "base", "import", str(base))
    assert b.returncode == 0, b.stderr
    bid = b.stdout.strip()
    try:
        # A test without a root has no directory (upstream: no --dir).
        preopen = [] if "root" in spec else ["--preopen", "none"]
        argv = ["run", "--json", "--tier", "wasm", *engine_args, "--base", bid,
                "--timeout", "60s", *preopen]
        for k, v in spec.get("env", {}).items():
            argv += ["--env", f"{k}={v}"]
        # The compiler runs it twice: compiled on a cold cache, then linked
        # from the store's cache by our loader (src/wasm/jit_elf.c): the
        # cache file must be the same one (not compiled and written again).
        cache = Path(store) / "cache" / "wasm-code"
        rounds = ("cold", "cached") if engine == "compiler" else ("",)
        why, seen = [], None
        for r in rounds:
            p = _kis(store, *argv, "--", module, *spec.get("args", []))
            assert p.stdout.strip(), p.stderr
            doc = json.loads(p.stdout)
            want = spec.get("exit_code", 0)
            got = doc["termination"]
            tag = f"{r}: " if r else ""
            if got["reason"] != "exited" or got["exit_code"] != want:
                why.append(f"{tag}ended {got}, expected exit code {want}")
            for s in ("stdout", "stderr"):
                if s in spec and not doc[s].startswith(spec[s]):
                    why.append(f"{tag}{s} does not start with {spec[s]!r}")
            files = {f.name: f.stat().st_ino for f in cache.glob("*.o")} if r else {}
            if r == "cached":
                assert files == seen, f"the cached run compiled again: {seen} then {files}"
            seen = files
        deviation = DEVIATIONS.get(f"{engine}:{name}", DEVIATIONS.get(name))
        if deviation:
            assert why, f"{name} passes now under {engine}: remove it from DEVIATIONS " \
                        "and docs/wasm.md"
            pytest.xfail(deviation)
        assert not why, (why, doc["stdout"][-2000:], doc["stderr"][-2000:])
    finally:
        _kis(store, "base", "remove", bid)
