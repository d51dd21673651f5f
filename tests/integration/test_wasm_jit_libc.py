# SPDX-License-Identifier: MIT
# The compiler's fast path for wasi-libc's memcpy, memmove, memset and memcmp
# (src/wasm/jit_llvm.c, "wasi-libc's memory routines, recognised"): the real
# routines, linked from Debian's wasi-libc into a module of our own
# (tests/wasm/libc_routines.c), called under both engines with in-bounds,
# overlapping, crossing-the-end and wild ranges; every result, trap and the
# memory after each call must agree.
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

RUNNER = ROOT / "build" / "kis-wasm-run"
SRC = ROOT / "tests" / "wasm" / "libc_routines.c"
BASE, END = 131072, 196608

# jit_llvm.c's known_bodies: length, the call (if any) whose immediate is
# left out, and the two hashes
KNOWN = {
    "memcpy": (1296, 0, 0xbff5f612ef2b2479, 0x0a3e6c49a138f0bb),
    "memmove": (1287, 41, 0x32b469df5412ea5e, 0x55c44b47b7ef60a0),
    "memset": (379, 0, 0xec893cb3c59fb061, 0x2a42ca637395bf82),
    "memcmp": (73, 0, 0x851910bed14663a3, 0xd8e27c9da25ed634),
}


def _leb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def _bodies_by_name(path):
    """The code section's bodies, by the name section's function names."""
    b = Path(path).read_bytes()
    i, nimp, bodies, names = 8, 0, [], {}
    while i < len(b):
        sid = b[i]
        size, i = _leb(b, i + 1)
        end = i + size
        if sid == 2:  # imports: functions among them shift the indices
            n, j = _leb(b, i)
            for _ in range(n):
                for _ in range(2):
                    ln, j = _leb(b, j)
                    j += ln
                kind = b[j]
                j += 1
                if kind == 0:
                    nimp += 1
                    _, j = _leb(b, j)
                else:
                    pytest.skip("an import other than a function")
        elif sid == 10:
            n, j = _leb(b, i)
            for _ in range(n):
                ln, j = _leb(b, j)
                bodies.append(b[j:j + ln])
                j += ln
        elif sid == 0:
            ln, j = _leb(b, i)
            if b[j:j + ln] == b"name":
                j += ln
                while j < end:
                    sub = b[j]
                    sz, j = _leb(b, j + 1)
                    if sub == 1:
                        n, k = _leb(b, j)
                        for _ in range(n):
                            idx, k = _leb(b, k)
                            ln2, k = _leb(b, k)
                            names[b[k:k + ln2].decode()] = idx - nimp
                            k += ln2
                    j += sz
        i = end
    return {nm: bodies[ix] for nm, ix in names.items() if 0 <= ix < len(bodies)}


def _hash(body, call_at):
    m = (1 << 64) - 1
    h1, h2 = 0xCBF29CE484222325, 0x243F6A8885A308D3
    for i, c in enumerate(body):
        if call_at and call_at < i <= call_at + 5:
            c = 0
        h1 = ((h1 ^ c) * 0x100000001B3) & m
        h2 = ((h2 ^ c) * 0x9E3779B97F4A7C15) & m
        h2 ^= h2 >> 29
    return h1, h2


@pytest.fixture
def module(tmp_path):
    if not RUNNER.exists():
        pytest.skip("build/kis-wasm-run is not built (make build/kis-wasm-run)")
    if not shutil.which("clang") or not Path("/usr/lib/wasm32-wasi/libc.a").exists():
        pytest.skip("clang and wasi-libc (Debian packages clang, wasi-libc) are not installed")
    out = tmp_path / "lc.wasm"
    p = subprocess.run(["clang", "--target=wasm32-wasi", "-O2", "-nostartfiles",
                        "-Wl,--no-entry", f"-Wl,--initial-memory={END}", f"-Wl,--max-memory={END}",
                        "-o", str(out), str(SRC)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"cannot build the module with clang: {p.stderr[:200]}")
    bodies = _bodies_by_name(out)
    for name, (ln, at, h1, h2) in KNOWN.items():
        body = bodies.get(name)
        if body is None or len(body) != ln or _hash(body, at) != (h1, h2):
            pytest.skip(f"this wasi-libc's {name} is another build than the one the compiler "
                        "knows: its fast path is not exercised here")
    return out


def test_known_libc_routines_agree_with_the_interpreter(module):
    seed = int(os.environ.get("KIS_DIFF_SEED", "0")) or random.randrange(1 << 30)
    rng = random.Random(seed)

    def addr():
        return rng.choice([BASE + rng.randrange(65536), END - rng.randrange(64),
                           END + rng.randrange(8), 0xFFFFFFFF - rng.randrange(16), BASE])

    def count():
        return rng.choice([0, 1, 3, 7, 8, 15, 16, 31, 33, 100, 1000, rng.randrange(70000),
                           0xFFFFFFFF])

    calls = ["fill 12345", "sum"]
    for _ in range(3000):
        f = rng.choice(["cpy", "mov", "set", "cmp"])
        a = addr()
        b = rng.randrange(1 << 32) if f == "set" else addr()
        if f in ("cpy", "mov") and rng.random() < 0.4:  # overlapping ranges
            b = (a + rng.randrange(-40, 40)) & 0xFFFFFFFF
            if rng.random() < 0.5:
                a, b = BASE + 1000, BASE + 1000 + rng.randrange(-40, 40)
        if f == "cmp" and rng.random() < 0.5:  # equal prefixes, then a difference
            b = BASE + rng.randrange(30000)
            a = BASE + 32768 + rng.randrange(30000)
            calls.append(f"cpy {a} {b} {rng.randrange(3000)}")
        calls.append(f"{f} {a} {b} {count()}")
        calls.append("sum")
    text = "\n".join(calls) + "\n"
    out = {}
    for engine in ("interpreter", "compiler"):
        p = subprocess.run([str(RUNNER), "--engine", engine, "--batch", str(module)],
                           input=text, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (engine, p.stderr)
        out[engine] = p.stdout.splitlines()
    assert len(out["interpreter"]) == len(calls)
    # both kinds of outcome were met: calls that ran and calls that trapped
    assert any(x.startswith("trap") for x in out["interpreter"])
    assert sum(not x.startswith("trap") for x in out["interpreter"]) > len(calls) // 3
    diff = [(c, a, b) for c, a, b in zip(calls, out["interpreter"], out["compiler"]) if a != b]
    assert diff == [], f"seed {seed}: {diff[:5]}"
