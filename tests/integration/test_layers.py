# SPDX-License-Identifier: MIT
# The layer check (scripts/check-layers.sh, docs/layers.md) passes on the
# tree and fails on an include that goes up a layer.
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers.sh"


def check(tree, *objdir):
    return subprocess.run(["sh", str(SCRIPT), str(tree), *map(str, objdir)],
                          capture_output=True, text=True)


def test_the_tree_keeps_its_layers():
    p = check(ROOT)
    assert p.returncode == 0, p.stdout + p.stderr


def write(tree, path, text):
    f = tree / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)


def test_an_include_going_up_fails(tmp_path):
    write(tmp_path, "src/core/ok.c", '#include "core/util.h"\n#include "kis/error.h"\n')
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/agent/bad.c", '#include "engine/owner.h"\n')
    p = check(tmp_path)
    assert p.returncode == 1 and 'src/agent/bad.c includes "engine/owner.h"' in p.stdout, p.stdout


def test_the_cli_uses_only_public_headers(tmp_path):
    write(tmp_path, "src/cli/cmd.c", '#include "kis/sandbox.h"\n#include "cli.h"\n')
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/cli/cmd2.c", '#include "store/store_internal.h"\n')
    p = check(tmp_path)
    assert p.returncode == 1 and "only the public headers" in p.stdout, p.stdout


def test_a_directory_in_no_layer_fails(tmp_path):
    write(tmp_path, "src/newthing/x.c", "int x;\n")
    p = check(tmp_path)
    assert p.returncode == 1 and "in no layer" in p.stdout, p.stdout


def compile_into(tree, path, text):
    """Write src/PATH and compile it to build/obj/src/PATH.o."""
    write(tree, path, text)
    o = tree / "build" / "obj" / Path(path).with_suffix(".o")
    o.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-c", "-o", str(o), str(tree / path)], check=True)


def test_the_store_calling_the_engine_fails_at_link_time(tmp_path):
    # issue 42: store/sweep.c called the engine's store_owner_reap while
    # every include went down; only the objects show such an edge
    compile_into(tmp_path, "src/engine/owner.c", "int store_owner_reap(void) { return 0; }\n")
    compile_into(tmp_path, "src/store/sweep.c",
                 "int store_owner_reap(void);\nint sweep(void) { return store_owner_reap(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert ("src/store/sweep.o names store_owner_reap, defined in src/engine/owner.o "
            "(layer engine)") in p.stdout, p.stdout
    # the other way round is the layers' own direction
    (tmp_path / "build" / "obj" / "src" / "store" / "sweep.o").unlink()
    compile_into(tmp_path, "src/store/sweep.c", "int sweep(void) { return 0; }\n")
    compile_into(tmp_path, "src/engine/run.c",
                 "int sweep(void);\nint run(void) { return sweep(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout


def test_named_objects_must_exist(tmp_path):
    write(tmp_path, "src/core/ok.c", "int x;\n")
    p = check(tmp_path, tmp_path / "nothing")
    assert p.returncode == 1 and "no objects" in p.stdout, p.stdout


def test_the_built_tree_names_nothing_above_it():
    if not (ROOT / "build" / "obj" / "src").is_dir():
        pytest.skip("build/obj is not built (run make)")
    p = check(ROOT, ROOT / "build" / "obj")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "every symbol an object names is defined at or below its layer" in p.stdout


def test_the_engine_names_no_backend(tmp_path):
    # issue 42: engine/owner.c called crun's kis_oci_remove and session.c
    # the agent's kis_call_agent; of a backend's folder the engine names
    # only its table (kis_backend_<name>, the registry)
    compile_into(tmp_path, "src/backends/oci/oci.c",
                 "int kis_backend_oci;\nint kis_oci_remove(void) { return 0; }\n")
    compile_into(tmp_path, "src/agent/client.c", "int kis_call_agent(void) { return 0; }\n")
    compile_into(tmp_path, "src/engine/table.c",
                 "extern int kis_backend_oci;\nint *reg(void) { return &kis_backend_oci; }\n")
    assert check(tmp_path, tmp_path / "build" / "obj").returncode == 0
    compile_into(tmp_path, "src/engine/owner.c",
                 "int kis_oci_remove(void);\nint kis_call_agent(void);\n"
                 "int reap(void) { return kis_oci_remove() + kis_call_agent(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "src/engine/owner.o names kis_oci_remove" in p.stdout, p.stdout
    assert "src/engine/owner.o names kis_call_agent" in p.stdout, p.stdout
    assert "the engine names no backend" in p.stdout


def test_a_circle_of_files_fails(tmp_path):
    # issue 42: microvm/jail.c and vm.c, store/view.c and workspace.c named
    # each other's symbols: one unit in two files, which no include shows
    compile_into(tmp_path, "src/store/view.c",
                 "int ws_path(void);\nint view_start(void) { return ws_path(); }\n")
    compile_into(tmp_path, "src/store/workspace.c", "int ws_path(void) { return 1; }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout
    compile_into(tmp_path, "src/store/workspace.c",
                 "int view_start(void);\nint ws_path(void) { return 1; }\n"
                 "int ws_clone(void) { return view_start(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "a circle of files, one unit in 2:" in p.stdout, p.stdout
    assert "src/store/view.o" in p.stdout and "src/store/workspace.o" in p.stdout, p.stdout


def test_the_engine_is_no_longer_excused_from_circles(tmp_path):
    # issue 42: the owners' sweep (owner.c) ended a killed run's session
    # through session.c, which calls owner.c: nine files of the engine were
    # one unit, excused. The session's end went below both; a loop like
    # that one fails now
    compile_into(tmp_path, "src/engine/session_end.c", "int kis_session_end(void) { return 0; }\n")
    compile_into(tmp_path, "src/engine/owner.c",
                 "int kis_session_end(void);\nint kis_owner_reap_id(void) { return kis_session_end(); }\n")
    compile_into(tmp_path, "src/engine/session.c",
                 "int kis_owner_reap_id(void);\nint kis_session_end(void);\n"
                 "int destroy(void) { return kis_owner_reap_id() + kis_session_end(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout
    compile_into(tmp_path, "src/engine/owner.c",
                 "int kis_session_end(void);\nint destroy(void);\n"
                 "int kis_owner_reap_id(void) { return kis_session_end() + destroy(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "a circle of files, one unit in 2:" in p.stdout, p.stdout
    assert "src/engine/owner.o" in p.stdout and "src/engine/session.o" in p.stdout, p.stdout


def test_a_fork_outside_exec_fails(tmp_path):
    # issue 42: 21 of 25 fork/clone/spawn sites lay outside src/exec; the
    # ones that remain are listed with why, a new one fails
    write(tmp_path, "src/exec/spawn.c", "int f(void) { return fork(); }\n")
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/store/new.c", "/* fork() in a comment is no fork */\n")
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/store/new.c", "int g(void) { return fork(); }\n")
    p = check(tmp_path)
    assert p.returncode == 1, p.stdout
    assert "src/store/new.c forks, clones or spawns 1 time(s) outside src/exec" in p.stdout


def test_the_cli_verbs_naming_the_table_fails(tmp_path):
    # issue 42: main.c's table named each verb and every verb called
    # main.c's error helpers, a circle of 12 files the check excused by
    # folder; the helpers went below the table and src/cli is excused no
    # more, so a verb that names main.c again fails
    compile_into(tmp_path, "src/cli/output.c", "int cli_fail(void) { return 125; }\n")
    compile_into(tmp_path, "src/cli/cmd_gc.c",
                 "int cli_fail(void);\nint cmd_gc(void) { return cli_fail(); }\n")
    compile_into(tmp_path, "src/cli/main.c",
                 "int cmd_gc(void);\nint main(void) { return cmd_gc(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout
    compile_into(tmp_path, "src/cli/main.c",
                 "int cmd_gc(void);\nint cli_usage(void) { return 125; }\n"
                 "int main(void) { return cmd_gc(); }\n")
    compile_into(tmp_path, "src/cli/cmd_gc.c",
                 "int cli_fail(void);\nint cli_usage(void);\n"
                 "int cmd_gc(void) { return cli_fail() + cli_usage(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "a circle of files, one unit in 2:" in p.stdout, p.stdout
    assert "src/cli/main.o" in p.stdout and "src/cli/cmd_gc.o" in p.stdout, p.stdout


def test_wasi_and_wasi_fs_naming_each_other_fails(tmp_path):
    # issue 42: the WASI calls (wasi.c) and their path half (wasi_fs.c)
    # shared the descriptor table both ways; it went to wasi_fd.c below
    # both, and only the circles listed one by one in src/wasm stay excused
    compile_into(tmp_path, "src/wasm/wasi_fd.c", "int wasi_fd_get(void) { return 3; }\n")
    compile_into(tmp_path, "src/wasm/wasi_fs.c",
                 "int wasi_fd_get(void);\nint wasi_path_open(void) { return wasi_fd_get(); }\n")
    compile_into(tmp_path, "src/wasm/wasi.c",
                 "int wasi_path_open(void);\nint wasi_fd_get(void);\n"
                 "int kis_wasi_bind(void) { return wasi_path_open() + wasi_fd_get(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout
    compile_into(tmp_path, "src/wasm/wasi.c",
                 "int wasi_path_open(void);\nint wasi_errno(void) { return 8; }\n"
                 "int kis_wasi_bind(void) { return wasi_path_open(); }\n")
    compile_into(tmp_path, "src/wasm/wasi_fs.c",
                 "int wasi_fd_get(void);\nint wasi_errno(void);\n"
                 "int wasi_path_open(void) { return wasi_fd_get() + wasi_errno(); }\n")
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "src/wasm/wasi.o" in p.stdout and "src/wasm/wasi_fs.o" in p.stdout, p.stdout


def excused_file_sets():
    """The circles the script excuses one by one: lists of objects."""
    text = SCRIPT.read_text()
    block = text.split('circle_exceptions="', 1)[1].split('"', 1)[0]
    return [line.split(" ", 1)[0].split(",") for line in block.splitlines()
            if "," in line.split(" ", 1)[0]]


def ring(tree, objs, extra=()):
    """Compile each object's source naming the next one's symbol; the last
    names the first's unless the ring is left open (extra=None)."""
    files = list(objs) + list(extra or ())
    for i, o in enumerate(files):
        me = "f_" + Path(o).stem
        nxt = None if extra is None and i == len(files) - 1 else files[(i + 1) % len(files)]
        body = f"int {me}(void) {{ return 0; }}\n"
        if nxt:
            other = "f_" + Path(nxt).stem
            body = f"int {other}(void);\nint {me}(void) {{ return {other}(); }}\n"
        compile_into(tree, str(Path(o).with_suffix(".c")), body)


def test_an_excused_circle_excuses_no_new_file_and_goes_when_broken(tmp_path):
    # issue 42: the exceptions were whole folders, so a new circle in
    # src/wasm passed unseen; now each is one set of files: the circle
    # passes, a file that joins it fails, and once it is broken its line
    # must go
    sets = excused_file_sets()
    if not sets:
        pytest.skip("no circle is excused file by file in scripts/check-layers.sh")
    objs = sets[0]
    ring(tmp_path, objs)
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 0, p.stdout
    newcomer = str(Path(objs[0]).parent / "newcomer.o")
    ring(tmp_path, objs, extra=[newcomer])
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert f"one unit in {len(objs) + 1}:" in p.stdout and newcomer in p.stdout, p.stdout
    (tmp_path / "build" / "obj" / newcomer).unlink()
    ring(tmp_path, objs, extra=None)
    p = check(tmp_path, tmp_path / "build" / "obj")
    assert p.returncode == 1, p.stdout
    assert "is no circle any more: remove its line" in p.stdout, p.stdout
