# SPDX-License-Identifier: MIT
# The compiler's fast path for wasi-libc's memcpy, memmove, memset, memcmp,
# strlen, __strchrnul, strcspn and strspn (src/wasm/jit_llvm.h, "wasi-libc's
# memory routines, recognised"): the real routines, linked from Debian's
# wasi-libc into a module of our own (tests/wasm/libc_routines.c), called
# under both engines with in-bounds, overlapping, crossing-the-end and wild
# ranges, strings that end at the last byte of memory or run past it, and
# the shadow stack (where strcspn and strspn write their set) anywhere;
# every result, trap and the memory after each call must agree.
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
    "strlen": (177, 0, 0xD8EEEE29802577A3, 0xA84C013706654EF3),
    "__strchrnul": (353, 64, 0xF6A2A6EF69FC2163, 0x3F97DA8C8E472CE6),
    "strcspn": (258, 56, 0x71F5259E230B89EE, 0xA965B1D3D4A0889A),
    "strspn": (261, 0, 0x6FDA969C69F2FB42, 0xC165268C6FF75522),
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
            names.update(_names(b, i, end))
        i = end
    return {nm: bodies[ix - nimp] for nm, ix in names.items() if 0 <= ix - nimp < len(bodies)}


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


def _run_both(module, calls):
    text = "\n".join(calls) + "\n"
    out = {}
    for engine in ("interpreter", "compiler"):
        p = subprocess.run([str(RUNNER), "--engine", engine, "--batch", str(module)],
                           input=text, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (engine, p.stderr)
        out[engine] = p.stdout.splitlines()
    assert len(out["interpreter"]) == len(calls)
    return out


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
    out = _run_both(module, calls)
    # both kinds of outcome were met: calls that ran and calls that trapped
    assert any(x.startswith("trap") for x in out["interpreter"])
    assert sum(not x.startswith("trap") for x in out["interpreter"]) > len(calls) // 3
    diff = [(c, a, b) for c, a, b in zip(calls, out["interpreter"], out["compiler"]) if a != b]
    assert diff == [], f"seed {seed}: {diff[:5]}"


def _string_calls(rng, sp0):
    """A batch for the string routines: strings in the test's page (letters
    with NULs at a few densities), at and past the end of memory, in the
    data and below the stack pointer; sets of one, two and more bytes; the
    stack pointer (global 0) moved near 0, near and past the end, and next
    to the strings, so that the 32-byte set overlaps what is read."""
    calls = ["fills 777 40", "sumall"]

    def put(at, text):  # a NUL-terminated string, written by memset
        for i, ch in enumerate(text.encode() + b"\0"):
            calls.append(f"set {(at + i) & 0xFFFFFFFF} {ch} 1")

    def where():
        return rng.choice([BASE + rng.randrange(65536), END - 1 - rng.randrange(80), END - 1,
                           END + rng.randrange(8), 0xFFFFFFFF - rng.randrange(16),
                           sp0 - rng.randrange(96), 1024 + rng.randrange(64), 0])

    sp = sp0
    for _ in range(2500):
        r = rng.random()
        if r < 0.05:
            calls.append(f"fills {rng.randrange(1 << 30)} {rng.choice([2, 5, 40, 1000, 1 << 30])}")
        elif r < 0.10:  # the last bytes of memory: no NUL, or one at the very end
            k = rng.randrange(1, 200)
            calls.append(f"set {END - k} {rng.choice([97, 98, 0x80, 0xFF])} {k}")
            if rng.random() < 0.5:
                calls.append(f"set {END - 1} 0 1")
        elif r < 0.16:
            at = rng.choice([END - 1 - rng.randrange(80), sp0 - rng.randrange(96)])  # not the data:
            put(at if rng.random() < 0.3 else BASE + rng.randrange(65000),  # the calls' pointers
                "".join(rng.choice("abcxyz\x80\xff") for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 7, 40]))))
        elif r < 0.22:
            sp = rng.choice([sp0, sp0, rng.randrange(40), 32, 31, END, END - 32, END - 31,
                             END + 16, 0xFFFFFFF0, BASE + rng.randrange(65536),
                             sp0 + rng.randrange(-48, 48)])
            calls.append(f"setsp {sp}")
        else:
            f = rng.choice(["len", "chrnul", "chr", "cspn", "spn"])
            s = where()
            if rng.random() < 0.2:  # next to the set: sp - 32 .. sp
                s = (sp - rng.randrange(48)) & 0xFFFFFFFF
            if f == "len":
                calls.append(f"len {s}")
            elif f in ("chrnul", "chr"):
                c = rng.choice([0, 97, 98, 120, 0x80, 0xFF, 256 + 97, 0xFFFFFF00, rng.randrange(1 << 32)])
                calls.append(f"{f} {s} {c}")
            else:
                t = where()
                if rng.random() < 0.2:
                    t = (sp - rng.randrange(48)) & 0xFFFFFFFF
                calls.append(f"{f} {s} {t}")
        if rng.random() < 0.3:
            calls.append("sumall")
    # the set over the strings: s or set reaching into sp - 32 .. sp, which
    # the routines zero before they read them (only what they read before
    # counts, the rest is the set's bytes)
    calls.append(f"setsp {sp0}")
    put(196100, "yz")
    put(196200, "abcxyz")
    put(196300, "qr")  # none of the string's: strcspn reads it into the set
    for at in (sp0 - 48, sp0 - 40, sp0 - 33, sp0 - 32, sp0 - 31, sp0 - 2):
        put(sp0 - 60, "abcxyz" * 12)
        for t in (196100, 196200, 196300, at):
            calls += [f"cspn {at} {t}", "sumall", f"spn {at} {t}", "sumall"]
            put(sp0 - 60, "abcxyz" * 12)
        for s in (BASE + 100, at):
            calls += [f"cspn {s} {at}", "sumall", f"spn {s} {at}", "sumall"]
            put(sp0 - 60, "abcxyz" * 12)
    calls += ["getsp", "sumall"]
    return calls


def test_known_string_routines_agree_with_the_interpreter(module):
    seed = int(os.environ.get("KIS_DIFF_SEED", "0")) or random.randrange(1 << 30)
    rng = random.Random(seed)
    sp0 = int(_run_both(module, ["getsp"])["interpreter"][0])
    calls = _string_calls(rng, sp0)
    # the strings that end exactly at the end of memory, each routine:
    # no NUL in the last 37 bytes ("c"s, none of them in the set "ab"),
    # then one in the very last
    blocks = {}
    for f in ("len {}", "chrnul {} 122", "chr {} 122", "cspn {} 196000", "spn {} 196000"):
        calls += [f"setsp {sp0}", "set 196000 97 1", "set 196001 98 1", "set 196002 0 1",
                  f"set {END - 37} 99 37"]
        blocks[f.split()[0]] = len(calls)
        calls += [f.format(END - k) for k in (37, 33, 17, 16, 5, 4, 1)]
        calls += [f"set {END - 1} 0 1"] + [f.format(END - k) for k in (37, 33, 17, 16, 5, 4, 1)]
        calls.append("sumall")
    out = _run_both(module, calls)
    outcomes = out["interpreter"]
    assert sum(x.startswith("trap") for x in outcomes) > 100
    assert sum(x.isdigit() for x in outcomes) > len(calls) // 3
    diff = [(c, a, b) for c, a, b in zip(calls, out["interpreter"], out["compiler"]) if a != b]
    assert diff == [], f"seed {seed}: {diff[:5]}"
    oob = ["trap: out of bounds memory access"] * 7
    ends = [str(END - 1)] * 7
    lens = [str(END - 1), "36", "32", "16", "15", "4", "3", "0"]  # memset's result first
    want = {"len": oob + lens, "chrnul": oob + ends[:1] + ends, "chr": oob + ends[:1] + ["0"] * 7,
            "cspn": oob + lens, "spn": ["0"] * 7 + ends[:1] + ["0"] * 7}
    for f, i in blocks.items():
        assert outcomes[i:i + 15] == want[f], f


def _patched(module, tmp_path, name, at, new):
    """The module with bytes of one function's body replaced (same length:
    the code section's sizes hold)."""
    b = bytearray(Path(module).read_bytes())
    body = _bodies_by_name(module)[name]
    i = bytes(b).find(body)
    assert i > 0 and bytes(b).find(body, i + 1) < 0
    b[i + at:i + at + len(new)] = new
    out = tmp_path / f"patched-{name}.wasm"
    out.write_bytes(bytes(b))
    return out


def test_string_routine_changed_by_a_byte_is_not_recognised(module, tmp_path):
    """strlen whose last `local.get 0` reads local 1 (it returns 0 always),
    and strcspn whose call of __strchrnul calls strspn instead: same
    lengths, other bodies; the compiler must run what the module says."""
    body = _bodies_by_name(module)["strlen"]
    assert body[-6:] == bytes([0x20, 0x01, 0x20, 0x00, 0x6B, 0x0B])
    m1 = _patched(module, tmp_path, "strlen", len(body) - 3, bytes([0x01]))
    calls = ["fills 5 40", f"set {END - 1} 0 1", "len 131072", "len 131073", f"len {END - 3}"]
    out = _run_both(m1, calls)
    assert out["interpreter"] == out["compiler"]
    assert out["compiler"][2:] == ["0", "0", "0"]

    names = _bodies_by_name(module)
    cs = names["strcspn"]
    assert cs[56] == 0x10
    # the index of strspn: the name section's index plus the imported functions
    b = Path(module).read_bytes()
    old = cs[57:62]
    target = sum((old[k] & 0x7F) << (7 * k) for k in range(5))
    shift = target - _name_index(b, "__strchrnul")
    want = _name_index(b, "strspn") + shift
    leb = bytes([(want >> (7 * k)) & 0x7F | (0x80 if k < 4 else 0) for k in range(5)])
    m2 = _patched(module, tmp_path, "strcspn", 57, leb)
    calls = ["fills 9 40", "set 196000 97 1", "set 196001 0 1", "set 196100 120 1",
             "set 196101 0 1"] + [f"cspn {131072 + k * 97} {t}" for k in range(20) for t in (196000, 196100)]
    out = _run_both(m2, calls)
    assert out["interpreter"] == out["compiler"]


def _names(b, i, end):
    """The name section's function names (custom section "name",
    subsection 1) in the custom section b[i:end], by name: their function
    indices, imports counted."""
    ln, j = _leb(b, i)
    names = {}
    if b[j:j + ln] != b"name":
        return names
    j += ln
    while j < end:
        sub = b[j]
        sz, j = _leb(b, j + 1)
        if sub == 1:
            n, k = _leb(b, j)
            for _ in range(n):
                idx, k = _leb(b, k)
                ln2, k = _leb(b, k)
                names[b[k:k + ln2].decode()] = idx
                k += ln2
        j += sz
    return names


def _name_index(b, name):
    """The function index the name section gives name (imports not counted
    out)."""
    i = 8
    while i < len(b):
        sid = b[i]
        size, i = _leb(b, i + 1)
        if sid == 0 and name in (names := _names(b, i, i + size)):
            return names[name]
        i += size
    raise AssertionError(f"no function {name}")
