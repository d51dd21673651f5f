# SPDX-License-Identifier: MIT
# WASI preview 1 behaviour that the conformance suite found wrong, pinned by
# programs of our own (tests/wasm/wasi/), under each wasm engine:
# - path calls answer as Linux does, trailing slashes included: pathsem.c is
#   built natively and for wasm32-wasi and both outputs must be the same
#   (the interpreter once removed "file/" as the file and renamed "x/" as x,
#   and read(2) of a directory was EBADF, not EISDIR);
# - the descriptor table is the module's own: fd_close and fd_renumber on
#   the preopen (fd 3) work (they were ENOTSUP) and lose only the module's
#   capability; whatever takes number 3 afterwards holds its own rights.
import difflib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import KIS, ROOT
from test_wasm_tier import have_wasi_cc
from wasm_engines import ENGINES, engine_flags

SRC = ROOT / "tests" / "wasm" / "wasi"
EBADF, ENOTDIR, NOTCAPABLE = 8, 54, 76
FT_DIRECTORY, FT_REGULAR_FILE = 3, 4


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not have_wasi_cc():
        pytest.skip("clang --target=wasm32-wasi needs lld, wasi-libc and "
                    "libclang-rt-14-dev-wasm32 (scripts/install-deps.sh)")
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed (the native side of pathsem)")
    d = tmp_path_factory.mktemp("wasi-sem")
    for prog in ("pathsem", "fdtable"):
        subprocess.run(["clang", "--target=wasm32-wasi", "-O2", "-Wall", "-Werror", "-o",
                        str(d / f"{prog}.wasm"), str(SRC / f"{prog}.c")],
                       check=True, capture_output=True)
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Werror", "-o",
                    str(d / "pathsem.native"), str(SRC / "pathsem.c")],
                   check=True, capture_output=True)
    return d


def _kis(store, *args):
    return subprocess.run([str(KIS), "sandbox", *args], capture_output=True, text=True,
                          env=dict(os.environ, KIS_SANDBOX_ROOT=str(store)), timeout=120)


@pytest.fixture
def world(built, store, tmp_path):
    """A base with the two modules; the workspaces made are destroyed."""
    src = tmp_path / "base"
    src.mkdir()
    for m in built.glob("*.wasm"):
        shutil.copy(m, src / m.name)
    b = _kis(store, "base", "import", str(src))
    assert b.returncode == 0, b.stderr
    made = []
    try:
        yield {"store": store, "base": b.stdout.strip(), "made": made}
    finally:
        for w in made:
            _kis(store, "destroy", w)
        _kis(store, "base", "remove", b.stdout.strip())


def run(world, engine, *argv):
    """Run a module in a fresh clone; returns (the result, the clone's path)."""
    c = _kis(world["store"], "clone", world["base"])
    assert c.returncode == 0, c.stderr
    ws = c.stdout.strip()
    world["made"].append(ws)
    p = _kis(world["store"], "run", "--json", "--tier", "wasm", *engine_flags(engine),
             "--workspace", ws, "--", *argv)
    assert p.stdout.strip(), p.stderr
    doc = json.loads(p.stdout)
    assert doc["termination"]["reason"] == "exited", doc
    path = Path(_kis(world["store"], "workspace", "path", ws).stdout.strip())
    return doc, path


def lines(doc):
    return dict(l.split("=", 1) for l in doc["stdout"].splitlines() if "=" in l)


# Where WASI's rights answer before Linux's semantics, on purpose: the
# call's line, Linux's answer, WASI's, and why. Each is checked to still
# differ, so one that starts to agree is noticed.
RIGHTS_DIFFER = {
    "lseek a directory": ("ok", "ESPIPE",
                          "a directory holds no fd_seek right (wasi-libc reads "
                          "directories by cookie); NOTCAPABLE, ESPIPE through wasi-libc"),
    "fdatasync a directory": ("ok", "EBADF",
                              "fd_datasync is a right wasi-libc asks for with write "
                              "access only; NOTCAPABLE, EBADF through wasi-libc"),
    "fdatasync a read-only file": ("ok", "EBADF", "as for a directory"),
    "ftruncate a directory": ("EINVAL", "ENOTCAPABLE",
                              "fd_filestat_set_size is a right of a writable file only"),
    "ftruncate a read-only file": ("EINVAL", "ENOTCAPABLE", "as for a directory"),
}


def _split(out):
    """{label: answer} of pathsem's lines, and the lines themselves."""
    res = {}
    for l in out.splitlines():
        label, rest = l[:28].strip(), l[28:].split()
        res[label] = rest[0] if rest else ""
    return res


@pytest.mark.parametrize("engine", ENGINES)
def test_path_calls_answer_as_linux_does(engine, world, built, tmp_path):
    """unlink, rmdir, mkdir, open (plain, O_DIRECTORY, O_NOFOLLOW, O_CREAT,
    O_EXCL), stat, lstat, readlink, utimensat (following or not), symlink,
    link and rename, each on a fresh tree, on files, directories, links to
    them and a dangling link, with and without trailing slashes, then calls
    on descriptors (read of a directory, lseek, pread and pwrite past the
    end, ftruncate, O_APPEND, O_TRUNC, truncate, access, readdir): the same
    answer and the same tree afterwards as the native build on Linux."""
    scratch = tmp_path / "native"
    scratch.mkdir()
    native = subprocess.run([str(built / "pathsem.native")], cwd=scratch, capture_output=True,
                            text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    doc, _ = run(world, engine, "pathsem.wasm")
    assert doc["termination"]["exit_code"] == 0, doc
    n, w = _split(native.stdout), _split(doc["stdout"])
    for label, (linux, wasi, why) in RIGHTS_DIFFER.items():
        assert (n.get(label), w.get(label)) == (linux, wasi), (label, why)
    want = [l for l in native.stdout.splitlines() if l[:28].strip() not in RIGHTS_DIFFER]
    got = [l for l in doc["stdout"].splitlines() if l[:28].strip() not in RIGHTS_DIFFER]
    assert len(want) > 300, "pathsem printed too little natively"
    diff = list(difflib.unified_diff(want, got, "linux", f"wasm ({engine})", lineterm="", n=0))
    assert not diff, "\n".join(diff[:80])


@pytest.mark.parametrize("engine", ENGINES)
def test_fd_close_on_the_preopen_loses_only_the_modules_capability(engine, world):
    doc, ws = run(world, engine, "fdtable.wasm", "close")
    got = lines(doc)
    assert got["mkdir"] == "0" and got["open_sub"] == "0"
    assert got["close3"] == "0", got                     # was ENOTSUP (58)
    assert got["fd3_closed"] == f"e{EBADF} prestat={EBADF}", got
    assert got["open_via_closed"] == str(EBADF) and got["close3_again"] == str(EBADF), got
    # sub, opened beneath the preopen before, still works
    assert got["sub"] == f"type{FT_DIRECTORY} prestat={EBADF}", got
    # number 3 goes to the next descriptor: a file, with a file's rights only
    assert got["create_in_sub"] == "0 fd=3", got
    assert got["fd3_now"] == f"type{FT_REGULAR_FILE} prestat={EBADF}", got
    assert got["open_via_new3"] == str(NOTCAPABLE), got
    assert got["write_new3"] == "0", got
    assert (ws / "sub" / "inner.txt").read_text() == "via the new fd 3\n"
    assert not (ws / "gone.txt").exists() and not (ws / "x.txt").exists()
    assert (ws / "fdtable.wasm").exists()  # the workspace itself is untouched


@pytest.mark.parametrize("engine", ENGINES)
def test_fd_renumber_onto_the_preopen_replaces_it(engine, world):
    doc, ws = run(world, engine, "fdtable.wasm", "renumber-onto")
    got = lines(doc)
    assert got["renumber"] == "0", got                   # was ENOTSUP (58)
    # fd 3 is sub now, no preopen; sub's old number is gone
    assert got["fd3"] == f"type{FT_DIRECTORY} prestat={EBADF}", got
    assert got["old_sub"] == f"e{EBADF} prestat={EBADF}", got
    assert got["renumber_closed_from"] == str(EBADF), got
    assert got["renumber_closed_to"] == str(EBADF), got
    assert got["create_via3"] == "0" and got["write"] == "0", got
    assert (ws / "sub" / "inner.txt").read_text() == "in sub\n"
    assert not (ws / "inner.txt").exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_fd_renumber_moves_the_preopen(engine, world):
    doc, ws = run(world, engine, "fdtable.wasm", "renumber-away")
    got = lines(doc)
    assert got["renumber"] == "0", got                   # was ENOTSUP (58)
    assert got["fd3"] == f"e{EBADF} prestat={EBADF}", got
    assert got["moved"] == f"type{FT_DIRECTORY} prestat=0", got  # still the preopen "/"
    assert got["create_via_moved"] == "0" and got["write"] == "0", got
    assert (ws / "top.txt").read_text() == "at the top\n"
    assert not (ws / "sub" / "top.txt").exists()
