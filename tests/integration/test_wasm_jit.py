# SPDX-License-Identifier: MIT
# The wasm compiler (--wasm-engine compiler, src/wasm/jit_llvm.c): every test
# of the wasm tier again under it (confinement, limits, termination reasons),
# then what only compiled code has: its pages never writable and executable,
# its cache in the store, SIMD, and a differential run of
# the two engines on the same module with random arguments.
import json
import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import test_wasm_tier as tier
from conftest import KIS, ROOT, children_of, kis
from test_wasm_tier import modules, run, world  # noqa: F401 (fixtures)

RUNNER = ROOT / "build" / "kis-wasm-run"

# The tier's tests, run compiled (the ones about choosing an engine stay
# there: they name the engine themselves).
for _name in dir(tier):
    if _name.startswith("test_") and "engine" not in _name:
        globals()[_name] = getattr(tier, _name)

# One cache for the session: each test's store starts with the code compiled
# so far, so wasitest.wasm is compiled once, not once per test.
_CACHE = {}


@pytest.fixture(autouse=True)
def compiled(store, tmp_path_factory):
    p = kis("backends")
    if "compiler" not in p.stdout:
        pytest.skip("this build has no wasm compiler (llvm-14-dev, scripts/install-deps.sh)")
    if "dir" not in _CACHE:
        _CACHE["dir"] = tmp_path_factory.mktemp("jit-cache")
    shared = _CACHE["dir"]
    mine = Path(store) / "cache" / "wasm-code"
    mine.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.chmod(mine.parent, 0o700)
    for f in shared.glob("*.o"):
        shutil.copy(f, mine / f.name)
        os.chmod(mine / f.name, 0o600)
    before = list(tier.ENGINE)
    tier.ENGINE[:] = ["--wasm-engine", "compiler"]
    try:
        yield
    finally:
        tier.ENGINE[:] = before
        for f in mine.glob("*.o"):
            shutil.copy(f, shared / f.name)


def test_compiled_code_is_never_writable_and_executable(world):
    """/proc/PID/maps of the process running a compiled loop: its code is an
    anonymous read-execute mapping, and no mapping is writable and
    executable at once."""
    p = subprocess.Popen([str(KIS), "sandbox", "run", "--tier", "wasm", "--base", world["base"],
                          "--wasm-engine", "compiler", "--timeout", "20s", "--", "loop.wasm"],
                         env=tier.env_of(world["store"]), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        maps = None
        for _ in range(200):
            time.sleep(0.05)
            for pid in children_of(p.pid):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    m = Path(f"/proc/{pid}/maps").read_text()
                except OSError:
                    continue
                # the child, past the second seccomp filter: code mapped
                anon_x = [l for l in m.splitlines()
                          if l.split()[1].startswith("r-x") and len(l.split()) < 6]
                if "Seccomp:\t2" in status and anon_x:
                    maps = m
            if maps:
                break
        assert maps, "no compiled code found in the running child"
        wx = [l for l in maps.splitlines() if "w" in l.split()[1] and "x" in l.split()[1]]
        assert wx == [], wx
    finally:
        p.kill()
        p.wait()


def test_second_run_links_the_cached_code(world):
    """The first compiled run writes the store's cache; a second run of the
    same module links it (same result), and a cache file the engine does
    not trust (world-writable) is not used but replaced."""
    cache = Path(world["store"]) / "cache" / "wasm-code"
    for f in cache.glob("*.o"):
        f.unlink()
    d = run(world, "--", "wasitest.wasm", "hello")
    assert d["stdout"] == "hello from wasm\n"
    files = list(cache.glob("*.o"))
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600
    d = run(world, "--", "wasitest.wasm", "hello")
    assert d["stdout"] == "hello from wasm\n"
    # an untrusted file: its object garbage, its mode world-writable
    data = bytearray(files[0].read_bytes())
    data[-200:] = b"\xcc" * 200
    files[0].write_bytes(bytes(data))
    os.chmod(files[0], 0o666)
    d = run(world, "--", "wasitest.wasm", "hello")
    assert d["stdout"] == "hello from wasm\n" and d["termination"]["reason"] == "exited"
    assert files[0].stat().st_mode & 0o777 == 0o600  # compiled anew, written again


def test_auto_compiles_small_modules_and_links_cached_code(world):
    """wasm.engine auto (no --wasm-engine): a small module is compiled on
    its first run (its code appears in the store's cache, and the result
    says so in "wasm"); a second run links that code."""
    cache = Path(world["store"]) / "cache" / "wasm-code"
    for f in cache.glob("*.o"):
        f.unlink()
    d = _auto(world["store"], world["base"], "exit42.wasm")
    assert d["termination"]["exit_code"] == 42, d
    assert d["wasm"] == {"engine": "compiler", "code": "compiled", "tier_up": None}, d
    small = {f.name: f.stat().st_ino for f in cache.glob("*.o")}
    assert len(small) == 1, small  # compiled: auto took the compiler
    d = _auto(world["store"], world["base"], "exit42.wasm")
    assert d["wasm"] == {"engine": "compiler", "code": "cached", "tier_up": None}, d
    assert {f.name: f.stat().st_ino for f in cache.glob("*.o")} == small


# ---- tier-up across runs (docs/wasm.md, "Tier-up") ----

def _auto(store, base, *args):
    p = kis("run", "--json", "--tier", "wasm", "--base", base, "--", *args,
            env={"KIS_SANDBOX_ROOT": str(store)})
    return json.loads(p.stdout)


def _custom_section(payload):
    """A custom section (id 0, core spec 5.5.3) named kis-test: any number
    of them may follow the others, so appending one makes a module unique
    (the cache is keyed by its bytes) and as large as asked."""
    name = b"kis-test"
    body = bytes([len(name)]) + name + payload
    n, size = len(body), bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        size.append(b | (0x80 if n else 0))
        if not n:
            break
    return b"\0" + bytes(size) + body


def _fresh_base(store, tmp_path, src, name, size=0):
    """A base holding one copy of module src, unique to this test and
    padded to about size bytes."""
    data = Path(src).read_bytes()
    nonce = f"{name}-{time.time_ns()}-{os.getpid()}".encode()
    pad = max(0, size - len(data) - len(nonce) - 16)
    d = tmp_path / ("base-" + name)
    d.mkdir()
    (d / name).write_bytes(data + _custom_section(nonce + b"\0" * pad))
    return tier.sh(store, "base", "import", str(d)).stdout.strip()


def _tier_up_done(cache, timeout=900):
    """Wait until no background compile holds a claim in the cache (each
    claim is a <hash>.pending file, gone when its compile ends, whether
    the compile succeeded or not). Niced on a loaded 2-core machine, a
    276 KB module's compile has taken a minute."""
    end = time.monotonic() + timeout
    while list(cache.glob("*.pending")):
        assert time.monotonic() < end, list(cache.iterdir())
        time.sleep(0.2)


def test_auto_tiers_up_a_large_module_on_its_second_run(world, modules, tmp_path):
    """A fresh ~300 KB module (above KIS_WASM_AUTO_COMPILE_MAX) under the
    default engine: its first run is interpreted at once and starts its
    compile in the background; the compile fills the cache with a whole
    object; the second run links that cached code."""
    if "compiler" not in kis("backends").stdout:
        pytest.skip("this build has no wasm compiler")
    store = world["store"]
    cache = Path(store) / "cache" / "wasm-code"
    base = _fresh_base(store, tmp_path, modules / "wasitest.wasm", "big.wasm",
                       300_000)
    before = set(cache.glob("*.o")) if cache.exists() else set()
    d = _auto(store, base, "big.wasm", "hello")
    assert d["stdout"] == "hello from wasm\n", d
    assert d["wasm"] == {"engine": "interpreter", "code": None, "tier_up": "started"}, d
    _tier_up_done(cache)
    new = set(cache.glob("*.o")) - before
    assert len(new) == 1, (new, list(cache.iterdir()))
    assert not list(cache.glob(".*.tmp")), list(cache.iterdir())
    (obj,) = new
    assert obj.stat().st_mode & 0o777 == 0o600
    # the fast tier first, then the optimising one over it: a hello
    # world's profile is too thin for the mixed tier (WASM_TIERUP_PROFILE_MIN)
    # (jit_cache.c: "KISJIT2\n", then the tier as a u32; 0 is WASM_JIT_TIER_OPT)
    head = obj.read_bytes()[:12]
    assert head[:8] == b"KISJIT2\n" and int.from_bytes(head[8:], "little") == 0, head
    d = _auto(store, base, "big.wasm", "hello")
    assert d["stdout"] == "hello from wasm\n", d
    assert d["wasm"] == {"engine": "compiler", "code": "cached", "tier_up": None}, d


def _first_run_then_cached_tier(world, modules, tmp_path, name, limit):
    """A fresh 300 KB module's first run, spinning until limit (kis run
    flags) ends it: interpreted, starting tier-up; returns (its result, the
    tier of the one object tier-up cached, the next run's result)."""
    store = world["store"]
    cache = Path(store) / "cache" / "wasm-code"
    base = _fresh_base(store, tmp_path, modules / "wasitest.wasm", name, 300_000)
    before = set(cache.glob("*.o")) if cache.exists() else set()
    p = kis("run", "--json", "--tier", "wasm", *limit, "--base", base, "--",
            name, "spin", env={"KIS_SANDBOX_ROOT": str(store)}, check=False)
    first = json.loads(p.stdout)
    assert first["wasm"] == {"engine": "interpreter", "code": None, "tier_up": "started"}, first
    _tier_up_done(cache)
    new = set(cache.glob("*.o")) - before
    assert len(new) == 1, (new, list(cache.iterdir()))
    head = next(iter(new)).read_bytes()[:12]
    assert head[:8] == b"KISJIT2\n", head
    return first, int.from_bytes(head[8:], "little"), _auto(store, base, name, "hello")


def test_tier_up_mixes_the_tiers_by_the_runs_profile(world, modules, tmp_path):
    """A first run that spins until its deadline interrupts it: its
    interpreter counted tens of millions of loop back-edges and wrote
    them at the run's end, so the background compile's second stage is
    the mixed tier (2: what ran hot optimised, the rest fast), and the next
    run links that code and runs right."""
    if "compiler" not in kis("backends").stdout:
        pytest.skip("this build has no wasm compiler")
    first, tier, d = _first_run_then_cached_tier(world, modules, tmp_path, "mix.wasm",
                                                 ["--timeout", "1s"])
    assert first["termination"]["reason"] == "timeout", first
    assert tier == 2, tier
    assert d["stdout"] == "hello from wasm\n", d
    assert d["wasm"] == {"engine": "compiler", "code": "cached", "tier_up": None}, d


def test_tier_up_without_the_runs_profile_optimises_it_all(world, modules, tmp_path):
    """A first run killed at its CPU limit (SIGKILL: its interpreter never
    wrote its counts) sends the background compile no profile: its second
    stage, after the pipe's end of file, compiles the whole module at the
    optimising tier (0), not the mixed one (2), and the next run links it."""
    if "compiler" not in kis("backends").stdout:
        pytest.skip("this build has no wasm compiler")
    first, tier, d = _first_run_then_cached_tier(world, modules, tmp_path, "spin.wasm",
                                                 ["--cpu-time", "1s"])
    assert first["termination"]["reason"] != "exited", first
    assert tier == 0, tier
    assert d["wasm"] == {"engine": "compiler", "code": "cached", "tier_up": None}, d


def test_racing_first_runs_compile_a_module_once(world, modules, tmp_path):
    """Two first runs of the same fresh module at the same time: both run
    interpreted, one starts the compile and the other finds it running
    (the claim is a flock'ed file); one object is written, whole (both
    later readers link it: a torn file would be refused and compiled)."""
    if "compiler" not in kis("backends").stdout:
        pytest.skip("this build has no wasm compiler")
    store = world["store"]
    cache = Path(store) / "cache" / "wasm-code"
    base = _fresh_base(store, tmp_path, modules / "wasitest.wasm", "race.wasm",
                       300_000)
    before = set(cache.glob("*.o")) if cache.exists() else set()
    out = [None, None]

    def go(i):
        out[i] = _auto(store, base, "race.wasm", "hello")
    ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(d["stdout"] == "hello from wasm\n" for d in out), out
    assert sorted(d["wasm"]["tier_up"] for d in out) == ["running", "started"], out
    assert all(d["wasm"]["engine"] == "interpreter" for d in out), out
    _tier_up_done(cache)
    new = set(cache.glob("*.o")) - before
    assert len(new) == 1, (new, list(cache.iterdir()))
    ino = next(iter(new)).stat().st_ino
    # two readers at once
    ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(d["wasm"] == {"engine": "compiler", "code": "cached", "tier_up": None} for d in out), out
    assert next(iter(new)).stat().st_ino == ino  # linked, never written again


# 60 functions of 49,000 locals each: a few bytes of module each, and
# hundreds of MiB of LLVM IR and machine code in all (measured: 40 of them
# peaked at 553 MB compiled in the foreground), padded past
# KIS_WASM_AUTO_COMPILE_MAX so that auto tiers it up
def _budget_buster(path):
    def leb(n):
        out = bytearray()
        while True:
            b, n = n & 0x7f, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def sec(i, body):
        return bytes([i]) + leb(len(body)) + body
    nf = 60
    body = b"\x01" + leb(49000) + b"\x7f" + b"\x0b"
    m = (b"\0asm\x01\0\0\0" + sec(1, b"\x01\x60\0\0") + sec(3, leb(nf) + b"\0" * nf)
         + sec(7, b"\x01\x06_start\x00" + leb(nf - 1))
         + sec(10, leb(nf) + (leb(len(body)) + body) * nf))
    path.write_bytes(m)


def test_tier_up_over_its_budget_leaves_the_cache_clean(world, tmp_path):
    """A module whose compile needs more memory than its budget (RLIMIT_DATA
    of the compiler process, docs/wasm.md): the run itself is interpreted
    and right, the background compile dies at its budget, and the cache
    holds nothing new (no object, no temporary file, no claim)."""
    if "compiler" not in kis("backends").stdout:
        pytest.skip("this build has no wasm compiler")
    store = world["store"]
    cache = Path(store) / "cache" / "wasm-code"
    _budget_buster(tmp_path / "buster.wasm")
    base = _fresh_base(store, tmp_path, tmp_path / "buster.wasm", "buster.wasm", 140_000)
    before = set(cache.iterdir()) if cache.exists() else set()
    d = _auto(store, base, "buster.wasm")
    assert d["termination"]["reason"] == "exited" and d["termination"]["exit_code"] == 0, d
    assert d["wasm"] == {"engine": "interpreter", "code": None, "tier_up": "started"}, d
    _tier_up_done(cache)
    assert set(cache.iterdir()) == before, set(cache.iterdir()) ^ before
    d = _auto(store, base, "buster.wasm")
    assert d["wasm"]["engine"] == "interpreter", d
    _tier_up_done(cache)


def test_auto_runs_interpreted_when_the_cached_code_is_refused(world):
    """A cached object that our loader refuses (its section table pointed
    past the file) is a miss: the run compiles anew (auto: the module is
    small), runs right and writes the entry again; the next run links it."""
    cache = Path(world["store"]) / "cache" / "wasm-code"
    for f in cache.glob("*.o"):
        f.unlink()
    d = run(world, "--", "exit42.wasm")
    (f,) = cache.glob("*.o")
    b = bytearray(f.read_bytes())
    elf = b.rfind(b"\x7fELF")
    b[elf + 0x28:elf + 0x30] = (1 << 40).to_bytes(8, "little")  # e_shoff
    f.write_bytes(bytes(b))
    ino = f.stat().st_ino
    p = kis("run", "--json", "--tier", "wasm", "--base", world["base"], "--", "exit42.wasm",
            env={"KIS_SANDBOX_ROOT": str(world["store"])})
    assert json.loads(p.stdout)["termination"]["exit_code"] == 42, p.stdout
    d = run(world, "--", "exit42.wasm")
    assert d["termination"]["exit_code"] == 42, d
    assert f.stat().st_ino != ino  # replaced by a fresh compile


def test_simd_module_runs_compiled(world, tmp_path):
    """A vector instruction (here one that traps at the memory's edge) runs
    compiled as interpreted: the same trap."""
    src = tmp_path / "simd"
    src.mkdir()
    (tmp_path / "simd.wat").write_text("""(module (memory (export "memory") 1)
        (func (export "_start")
          (v128.store (i32.const 65520) (i32x4.splat (i32.const 1)))
          (drop (v128.load (i32.const 65521)))))""")
    subprocess.run(["wat2wasm", str(tmp_path / "simd.wat"), "-o", str(src / "simd.wasm")],
                   check=True)
    base = tier.sh(world["store"], "base", "import", str(src)).stdout.strip()
    e = {"KIS_SANDBOX_ROOT": str(world["store"])}
    for engine in ("compiler", "interpreter"):
        p = kis("run", "--json", "--tier", "wasm", "--base", base, "--wasm-engine", engine,
                "--", "simd.wasm", env=e)
        d = json.loads(p.stdout)
        assert d["termination"]["reason"] == "trapped", (engine, d)
        assert "out of bounds memory access" in d["termination"]["detail"], (engine, d)


def test_oob_at_the_edge_traps(world, tmp_path):
    """A 4-byte load at the last 4 bytes of memory runs; one byte further
    traps, for loads and stores, with the interpreter's trap kind."""
    if not RUNNER.exists():
        pytest.skip("build/kis-wasm-run is not built (make build/kis-wasm-run)")
    wat = tmp_path / "edge.wat"
    wat.write_text("""(module (memory 1)
        (func (export "ld") (param i32) (result i32) (i32.load (local.get 0)))
        (func (export "ldo") (param i32) (result i32) (i32.load offset=65535 (local.get 0)))
        (func (export "st") (param i32) (i64.store (local.get 0) (i64.const 7))))""")
    subprocess.run(["wat2wasm", str(wat), "-o", str(tmp_path / "edge.wasm")], check=True)
    calls = "ld 65532\nld 65533\nldo 0\nldo 4294967295\nst 65528\nst 65529\nld 4294967295\n"
    want = ("0\ntrap: out of bounds memory access\ntrap: out of bounds memory access\n"
            "trap: out of bounds memory access\n\ntrap: out of bounds memory access\n"
            "trap: out of bounds memory access\n")
    for engine in ("interpreter", "compiler"):
        p = subprocess.run([str(RUNNER), "--engine", engine, "--batch", str(tmp_path / "edge.wasm")],
                           input=calls, capture_output=True, text=True, timeout=60)
        assert p.stdout == want, (engine, p.stdout, p.stderr)


# The probe of both ways compiled code keeps accesses in bounds: guard mode
# (a reservation of the whole index+offset range, the fault made a trap) and
# check mode (explicit compares), which a process with an RLIMIT_AS gets
# (jit.h). Each call and its expected answer, the interpreter's.
OOB_WAT = """(module (memory 1 3)
  (func (export "ld") (param i32) (result i32) (i32.load (local.get 0)))
  (func (export "ldo") (param i32) (result i32) (i32.load offset=0xffffffff (local.get 0)))
  (func (export "ld8o") (param i32) (result i32) (i32.load8_u offset=0xfffffff0 (local.get 0)))
  (func (export "st") (param i32 i32) (i32.store (local.get 0) (local.get 1)))
  (func (export "dropld") (param i32) (drop (i64.load (local.get 0))))
  (func (export "st_then_oob") (param i32)
    (i32.store (i32.const 0) (i32.const 77)) (drop (i32.load (local.get 0)))
    (i32.store (i32.const 0) (i32.const 99)))
  (func (export "peek") (result i32) (i32.load (i32.const 0)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))"""
OOB = "out of bounds memory access"
OOB_CALLS = [
    ("ld 65532", "0"), ("ld 65533", "trap: " + OOB), ("ld 4294967295", "trap: " + OOB),
    ("ldo 0", "trap: " + OOB), ("ldo 4294967295", "trap: " + OOB),
    ("ld8o 0", "trap: " + OOB), ("ld8o 4294967295", "trap: " + OOB),
    ("st 65532 5", ""), ("st 65533 5", "trap: " + OOB),
    ("dropld 65528", ""), ("dropld 65529", "trap: " + OOB),  # an unused load traps too
    ("st_then_oob 70000", "trap: " + OOB), ("peek", "77"),  # the store before it stays
    ("grow 1", "1"), ("ld 131068", "0"), ("ld 131069", "trap: " + OOB),
    ("st 131068 9", ""), ("grow 1", "2"), ("ld 196605", "trap: " + OOB),
    ("grow 1", "4294967295"), ("ld 196604", "0"),
]
# An address-space limit (8 GB: LLVM fits, an 8 GiB reservation per memory
# does not) is what makes a process use check mode.
CHECK_MODE = ["prlimit", "--as=8000000000"]


def _memory_mode(prefix):
    p = subprocess.run(prefix + [str(KIS), "sandbox", "backends"], capture_output=True,
                       text=True, timeout=60)
    for line in p.stdout.splitlines():
        if line.startswith("wasm compiler memory checks:"):
            return line.split(":", 1)[1].strip()
    return None


@pytest.mark.parametrize("mode", ["guard", "check"])
def test_oob_probe_in_both_memory_modes(tmp_path, mode):
    """Loads and stores at the edge, past it, with an offset that overflows
    32 bits, after memory.grow (and at the maximum), an unused load, and
    a store before a trap: compiled code answers as the interpreter, in the
    mode said (kis sandbox backends names it)."""
    if not RUNNER.exists():
        pytest.skip("build/kis-wasm-run is not built (make build/kis-wasm-run)")
    if not shutil.which("wat2wasm"):
        pytest.skip("wat2wasm (wabt) is not installed")
    prefix = CHECK_MODE if mode == "check" else []
    if mode == "check" and not shutil.which("prlimit"):
        pytest.skip("prlimit (util-linux) is not installed")
    got_mode = _memory_mode(prefix)
    if mode == "guard" and got_mode == "check":
        pytest.skip("this host cannot reserve 8 GiB of address space (check mode only)")
    assert got_mode == mode
    (tmp_path / "oob.wat").write_text(OOB_WAT)
    subprocess.run(["wat2wasm", str(tmp_path / "oob.wat"), "-o", str(tmp_path / "oob.wasm")],
                   check=True)
    calls = "".join(c + "\n" for c, _ in OOB_CALLS)
    want = "".join(w + "\n" for _, w in OOB_CALLS)
    for engine in ("interpreter", "compiler"):
        p = subprocess.run(prefix + [str(RUNNER), "--engine", engine, "--batch",
                                     str(tmp_path / "oob.wasm")],
                           input=calls, capture_output=True, text=True, timeout=120)
        assert p.stdout == want, (engine, mode, p.stdout, p.stderr)


@pytest.mark.parametrize("mode", ["guard", "check"])
def test_oob_through_the_tier_in_both_memory_modes(world, tmp_path, mode):
    """The confined child: a load past memory, after a store, is the trap
    (the fault handler under seccomp), not a crash, in either mode."""
    if not shutil.which("wat2wasm"):
        pytest.skip("wat2wasm (wabt) is not installed")
    if mode == "check" and not shutil.which("prlimit"):
        pytest.skip("prlimit (util-linux) is not installed")
    prefix = CHECK_MODE if mode == "check" else []
    if mode == "guard" and _memory_mode(prefix) != "guard":
        pytest.skip("this host cannot reserve 8 GiB of address space (check mode only)")
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "oobw.wat").write_text("""(module (memory (export "memory") 1)
        (func (export "_start") (i32.store (i32.const 0) (i32.const 1))
          (drop (i32.load offset=65534 (i32.const 0)))))""")
    subprocess.run(["wat2wasm", str(tmp_path / "oobw.wat"), "-o", str(src / "oobw.wasm")],
                   check=True)
    base = tier.sh(world["store"], "base", "import", str(src)).stdout.strip()
    e = dict(os.environ, KIS_SANDBOX_ROOT=str(world["store"]))
    p = subprocess.run(prefix + [str(KIS), "sandbox", "run", "--json", "--tier", "wasm",
                                 "--base", base, "--wasm-engine", "compiler", "--", "oobw.wasm"],
                       capture_output=True, text=True, timeout=120, env=e)
    d = json.loads(p.stdout)
    assert d["termination"]["reason"] == "trapped", (mode, d)
    assert OOB in d["termination"]["detail"], (mode, d)


DIFF_WAT = """(module (memory 1)
  (func (export "arith") (param i32 i32) (result i32 i32 i32 i32)
    (i32.add (local.get 0) (local.get 1)) (i32.mul (local.get 0) (local.get 1))
    (i32.rotl (local.get 0) (local.get 1)) (i32.shr_s (local.get 0) (local.get 1)))
  (func (export "div") (param i32 i32) (result i32 i32)
    (i32.div_s (local.get 0) (local.get 1)) (i32.rem_u (local.get 0) (local.get 1)))
  (func (export "div64") (param i64 i64) (result i64)
    (i64.rem_s (local.get 0) (local.get 1)))
  (func (export "bits") (param i64) (result i64 i64 i64)
    (i64.clz (local.get 0)) (i64.ctz (local.get 0)) (i64.popcnt (local.get 0)))
  (func (export "conv") (param f64) (result i32 i64 i32)
    (i32.trunc_f64_s (local.get 0)) (i64.trunc_sat_f64_u (local.get 0))
    (i32.reinterpret_f32 (f32.demote_f64 (local.get 0))))
  (func (export "fmin") (param f64 f64) (result f64 f64 f64)
    (f64.min (local.get 0) (local.get 1)) (f64.max (local.get 0) (local.get 1))
    (f64.nearest (local.get 0)))
  (func (export "mem") (param i32 i64) (result i64)
    (i64.store (local.get 0) (local.get 1)) (i64.load16_s offset=3 (local.get 0)))
  (func $fib (export "fib") (param i32) (result i32)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2)) (then (local.get 0))
      (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1)))
                     (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
  (func (export "loop") (param i32) (result i32) (local i32)
    (block $b (loop $l
      (br_if $b (i32.eqz (local.get 0)))
      (local.set 1 (i32.xor (i32.mul (local.get 1) (i32.const 31)) (local.get 0)))
      (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
      (br $l)))
    (local.get 1))
  (func (export "sw") (param i32) (result i32)
    (block $c (block $b (block $a (br_table $a $b $c (local.get 0)))
      (return (i32.const 10))) (return (i32.const 20))) (i32.const 30)))
"""


def _edge_ints(rng, bits):
    edges = [0, 1, 2, 3, 31, 32, 63, 64, (1 << (bits - 1)) - 1, 1 << (bits - 1),
             (1 << bits) - 1, (1 << bits) - 2]
    return rng.choice(edges) if rng.random() < 0.4 else rng.getrandbits(bits)


def _f64(rng):
    import struct
    special = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2147483647.5, -2147483648.9,
               4294967296.0, 1e300, -1e300, float("inf"), float("-inf"), float("nan")]
    v = rng.choice(special) if rng.random() < 0.5 else rng.uniform(-5e9, 5e9)
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def test_differential_random_arguments(tmp_path):
    """The same module under both engines, 3000 calls with random and edge
    arguments: the same results, bit for bit, and the same traps."""
    if not RUNNER.exists():
        pytest.skip("build/kis-wasm-run is not built (make build/kis-wasm-run)")
    if not shutil.which("wat2wasm"):
        pytest.skip("wat2wasm (wabt) is not installed")
    (tmp_path / "d.wat").write_text(DIFF_WAT)
    subprocess.run(["wat2wasm", str(tmp_path / "d.wat"), "-o", str(tmp_path / "d.wasm")],
                   check=True)
    seed = int(os.environ.get("KIS_DIFF_SEED", "0")) or random.randrange(1 << 30)
    rng = random.Random(seed)
    calls = []
    for _ in range(3000):
        k = rng.randrange(10)
        if k == 0:
            calls.append(f"arith {_edge_ints(rng, 32)} {_edge_ints(rng, 32)}")
        elif k == 1:
            calls.append(f"div {_edge_ints(rng, 32)} {_edge_ints(rng, 32)}")
        elif k == 2:
            calls.append(f"div64 {_edge_ints(rng, 64)} {_edge_ints(rng, 64)}")
        elif k == 3:
            calls.append(f"bits {_edge_ints(rng, 64)}")
        elif k == 4:
            calls.append(f"conv {_f64(rng)}")
        elif k == 5:
            calls.append(f"fmin {_f64(rng)} {_f64(rng)}")
        elif k == 6:
            calls.append(f"mem {rng.choice([0, 8, 65528, 65529, 65532, 1 << 31, rng.getrandbits(16)])}"
                         f" {_edge_ints(rng, 64)}")
        elif k == 7:
            calls.append(f"fib {rng.randrange(20)}")
        elif k == 8:
            calls.append(f"loop {rng.randrange(5000)}")
        else:
            calls.append(f"sw {_edge_ints(rng, 32)}")
    text = "\n".join(calls) + "\n"
    out = {}
    for engine in ("interpreter", "compiler"):
        p = subprocess.run([str(RUNNER), "--engine", engine, "--batch", str(tmp_path / "d.wasm")],
                           input=text, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (engine, p.stderr)
        out[engine] = p.stdout.splitlines()
    assert len(out["interpreter"]) == len(calls)
    diff = [(c, a, b) for c, a, b in zip(calls, out["interpreter"], out["compiler"]) if a != b]
    assert diff == [], f"seed {seed}: {diff[:5]}"
    assert any(l.startswith("trap:") for l in out["compiler"])  # the traps were exercised
