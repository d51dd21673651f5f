# SPDX-License-Identifier: MIT
# The wasm engines a test can run a module under (`--wasm-engine`,
# profile field wasm.engine), and whether this build accepts each: a
# test parametrized over ENGINES skips an engine the CLI refuses, with
# the CLI's own reason (the compiler, on a host without LLVM's runtime).
# KIS_WASM_ENGINES (comma-separated) narrows the list.
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import KIS

ENGINES = tuple(e for e in os.environ.get("KIS_WASM_ENGINES", "interpreter,compiler").split(",")
                if e)

# (module (memory (export "memory") 1) (func (export "_start"))): enough
# for a run to show whether the engine is accepted, with no tool to build it.
_EMPTY_WASI = bytes.fromhex(
    "0061736d" "01000000"                           # magic, version 1
    "01" "04" "01" "60" "00" "00"                   # type: () -> ()
    "03" "02" "01" "00"                             # function 0 of type 0
    "05" "03" "01" "00" "01"                        # memory: min 1 page
    "07" "13" "02"                                  # two exports:
    "06" "6d656d6f7279" "02" "00"                   #   "memory", memory 0
    "06" "5f7374617274" "00" "00"                   #   "_start", function 0
    "0a" "04" "01" "02" "00" "0b")                  # code: an empty body


@functools.lru_cache(maxsize=None)
def refusal(engine):
    """None when `run --tier wasm --wasm-engine ENGINE` runs a module
    here, else what the CLI said (its first line)."""
    d = Path(tempfile.mkdtemp(prefix="kis-engine-probe."))
    try:
        (d / "base").mkdir()
        (d / "base" / "probe.wasm").write_bytes(_EMPTY_WASI)
        env = dict(os.environ, KIS_SANDBOX_ROOT=str(d / "store"))

        def k(*a):
            return subprocess.run([str(KIS), "sandbox", *a], capture_output=True, text=True,
                                  env=env, timeout=120)
        b = k("base", "import", str(d / "base"))
        if b.returncode != 0:
            return f"cannot import the probe's base: {b.stderr.strip()}"
        p = k("run", "--tier", "wasm", "--wasm-engine", engine, "--base", b.stdout.strip(),
              "--", "probe.wasm")
        k("base", "remove", b.stdout.strip())
        if p.returncode == 0:
            return None
        return (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[0]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def engine_flags(engine):
    """The run flags that pick ENGINE; skips the test when this build
    refuses it (the compiler before it is built)."""
    why = refusal(engine)
    if why:
        pytest.skip(f"wasm engine {engine!r} not accepted by this build: {why}")
    return ["--wasm-engine", engine]
