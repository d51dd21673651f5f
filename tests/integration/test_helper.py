# SPDX-License-Identifier: MIT
"""The static `kis` and its dynamic half, kis-helper (src/helper/main.c):
the CLI maps no shared object, the compiler runs in a process of its own
that is confined before it reads a module, and it answers a hostile or
broken request with an error rather than with code."""
import os
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import AS_NOBODY, KIS, userns_off

HELPER = KIS.parent / "kis-helper"
MAGIC = 0x314A434B
FRAME = struct.Struct("=IIQ")

# (module (func (export "f") (result i32) i32.const 7))
MODULE = bytes.fromhex(
    "0061736d01000000010501600001 7f030201000705010166 00000a06010400410 70b"
    .replace(" ", ""))


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("the helper closed the socket")
        b += c
    return b


def recv_frame(s):
    magic, word, n = FRAME.unpack(recv_exact(s, FRAME.size))
    assert magic == MAGIC
    return word, recv_exact(s, n) if n else b""


# The helper as root (the engine's usual case) and as an ordinary user
# (a rootless engine's: a user namespace of its own comes first, made by
# the rootless tier's own map writer, confine/userns.c)
AS = {"root": [], "user": AS_NOBODY}


@pytest.fixture(params=sorted(AS))
def compiler(request):
    if not HELPER.exists():
        pytest.skip(f"{HELPER} is not built")
    if not (KIS.parent / "libkis-jit.so").exists():
        pytest.skip("no compiler plugin in this build (llvm-14-dev missing)")
    if request.param == "user":
        if os.geteuid() != 0:
            pytest.skip("running the helper as another user needs root")
        why = userns_off()
        if why:
            pytest.skip(why)
    ours, theirs = socket.socketpair()
    p = subprocess.Popen([*AS[request.param], str(HELPER), "wasm-compile"], stdin=theirs,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={})
    theirs.close()
    ours.settimeout(60)
    try:
        word, msg = recv_frame(ours)
        assert word == 0, msg
        yield p, ours
    finally:
        ours.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_the_cli_maps_no_shared_object():
    out = subprocess.run(["readelf", "-lW", str(KIS)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("readelf (binutils) is not installed")
    assert "INTERP" not in out.stdout, "kis asks for a program interpreter: not static"
    dyn = subprocess.run(["readelf", "-dW", str(KIS)], capture_output=True, text=True).stdout
    assert "(NEEDED)" not in dyn, dyn


def status(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return fields


def test_the_compiler_process_is_confined_before_it_reads_a_module(compiler):
    p, s = compiler
    st = status(p.pid)
    assert st["Seccomp"] == "2"
    assert st["NoNewPrivs"] == "1"
    for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    # control: this test's own process is root with capabilities, unconfined
    mine = status(os.getpid())
    assert mine["Seccomp"] == "0" and int(mine["CapEff"], 16) != 0
    # no file system to name: an empty root in mount and network
    # namespaces of its own (control: ours has files, and its own namespaces)
    assert os.listdir(f"/proc/{p.pid}/root") == []
    assert os.listdir("/proc/self/root")
    owner = Path(f"/proc/{p.pid}").stat().st_uid
    for ns in ("mnt", "net", "ipc") + (("user",) if owner != 0 else ()):
        assert os.readlink(f"/proc/{p.pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
    # it holds no descriptor beyond its socket and /dev/null
    fds = {os.readlink(f"/proc/{p.pid}/fd/{f}") for f in os.listdir(f"/proc/{p.pid}/fd")}
    assert all(f.startswith("socket:") or f == "/dev/null" for f in fds), fds


def is_objects(b):
    """The compiler's answer: a container of ELF objects (src/wasm/jit.h,
    "KISOBJS1", the count, 0, each length, the objects)."""
    if b[:8] != b"KISOBJS1":
        return False
    n = int.from_bytes(b[8:12], "little")
    at = 16 + 8 * n
    for i in range(n):
        ln = int.from_bytes(b[16 + 8 * i:24 + 8 * i], "little")
        if b[at:at + 4] != b"\x7fELF":
            return False
        at += ln
    return n >= 1 and at == len(b)


def test_the_compiler_answers_code_for_a_module(compiler):
    _, s = compiler
    s.sendall(FRAME.pack(MAGIC, 1, len(MODULE)) + MODULE)
    word, obj = recv_frame(s)
    assert word == 0, obj
    assert is_objects(obj)


def test_the_compiler_refuses_an_invalid_module_and_goes_on(compiler):
    _, s = compiler
    bad = b"\0asm\1\0\0\0\x01\xff\xff"
    s.sendall(FRAME.pack(MAGIC, 0, len(bad)) + bad)
    word, msg = recv_frame(s)
    assert word != 0 and msg.startswith(b"wasm.engine: "), msg
    s.sendall(FRAME.pack(MAGIC, 1, len(MODULE)) + MODULE)
    word, obj = recv_frame(s)
    assert word == 0 and is_objects(obj)


def test_the_compiler_refuses_a_bad_frame(compiler):
    p, s = compiler
    s.sendall(FRAME.pack(0xDEADBEEF, 0, 1 << 40))
    word, msg = recv_frame(s)
    assert word != 0 and b"bad request" in msg
    assert p.wait(timeout=10) == 1


def test_the_helper_refuses_what_it_does_not_know():
    if not HELPER.exists():
        pytest.skip(f"{HELPER} is not built")
    for args in ([], ["nonsense"], ["subids", "-1"], ["subids", "12x"]):
        r = subprocess.run([str(HELPER), *args], capture_output=True, text=True)
        assert r.returncode == 2, (args, r)


def test_subids_of_a_user_without_ranges():
    if not HELPER.exists():
        pytest.skip(f"{HELPER} is not built")
    owners = set()
    for f in ("/etc/subuid", "/etc/subgid"):
        if os.path.exists(f):
            owners |= {line.split(":")[0] for line in open(f) if ":" in line}
    if "root" in owners or "0" in owners:
        pytest.skip("root has subordinate ids on this host")
    r = subprocess.run([str(HELPER), "subids", "0"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
