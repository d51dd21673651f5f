# SPDX-License-Identifier: MIT
# A newcomer's path (issue 19): the guest found where `make install` put it
# by a fresh store and a fresh user, the man pages, bash completion,
# progress on a terminal only, --version, --help on every subverb, one key
# for an id, errors as JSON under --json, and the library that finds its
# installed agent by itself.
import json
import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import KIS, PROC, ROOT, kis, stderr_on_pty

GUEST = ROOT / "build" / "microvm-guest"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`make install DESTDIR=...` (the default PREFIX) into a temp dir; the
    guest is the build's, fetched once by the Makefile (skipped below when
    Debian's archive cannot be reached)."""
    # outside pytest's 0700 tree: another user reads it below
    dest = Path(tempfile.mkdtemp(prefix="kis-destdir-"))
    os.chmod(dest, 0o755)
    subprocess.run(["make", "-s", "install", f"DESTDIR={dest}"], cwd=ROOT, check=True,
                   capture_output=True)
    yield dest / "usr" / "local"
    shutil.rmtree(dest, ignore_errors=True)


def run_installed(prefix, *args, env=None, **kw):
    e = {k: v for k, v in os.environ.items() if k not in ("KIS_MICROVM_GUEST_DIR", "KIS_AGENT")}
    e.update(env or {})
    return subprocess.run([str(prefix / "bin" / "kis"), "sandbox", *args], env=e,
                          capture_output=True, text=True, timeout=300, **kw)


def test_install_puts_the_guest_in_the_system_location(installed):
    g = installed / "lib" / "kis" / "guest"
    if not (g / "vmlinuz").exists():
        pytest.skip("make install could not fetch the guest kernel (Debian's archive)")
    for f in ("vmlinuz", "kernel.release", "busybox", "modules/load"):
        assert (g / f).exists(), f
    assert (installed / "lib" / "kis" / "fetch-guest.sh").exists()


def test_a_fresh_store_finds_the_installed_guest(installed, tmp_path):
    if not (installed / "lib/kis/guest/vmlinuz").exists():
        pytest.skip("no guest installed (Debian's archive unreachable)")
    env = {"KIS_SANDBOX_ROOT": str(tmp_path / "fresh")}
    st = json.loads(run_installed(installed, "guest", "status", "--json", env=env).stdout)
    assert st["source"] == "system" and st["found"] is True
    assert st["path"] == str((installed / "lib/kis/guest").resolve())
    assert st["cache"] == str(tmp_path / "fresh" / "cache" / "guest-system")
    # backends names the path it used
    caps = json.loads(run_installed(installed, "backends", "--json", env=env).stdout)
    mvm = [b for b in caps if b["backend"] == "microvm"][0]
    assert mvm["guest"]["source"] == "system" and mvm["guest"]["path"] == st["path"]
    table = run_installed(installed, "backends", env=env).stdout
    assert f"microvm guest: {st['path']} (system)" in table
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86 is not installed: the run itself is not tried")
    assert mvm["available"], mvm.get("why_absent")
    # a fresh microvm run of the installed kis boots the installed kernel
    p = run_installed(installed, "run", "--tier", "microvm", "--", "uname", "-r", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (installed / "lib/kis/guest/kernel.release").read_text().strip()


def test_a_fresh_user_finds_the_installed_guest(installed, request):
    """Another uid, no KIS_SANDBOX_ROOT: its own store under
    $XDG_STATE_HOME, the same system guest."""
    if not (installed / "lib/kis/guest/vmlinuz").exists():
        pytest.skip("no guest installed (Debian's archive unreachable)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is missing")
    home = Path(tempfile.mkdtemp(prefix="kis-home-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, 65534, 65534)
    e = {k: v for k, v in os.environ.items() if not k.startswith("KIS_")}
    e.update(HOME=str(home), XDG_STATE_HOME=str(home / ".state"))
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        str(installed / "bin/kis"), "sandbox", "guest", "status", "--json"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert st["source"] == "system", st
    assert st["cache"].startswith(str(home / ".state")), st


def test_guest_path_without_a_guest_is_refused_by_name(tmp_path):
    e = {"KIS_SANDBOX_ROOT": str(tmp_path / "s"), "KIS_MICROVM_GUEST_DIR": ""}
    p = kis("guest", "path", env=e)
    # build/kis has no system location (nothing installed beside it)
    assert p.returncode == 125 and p.stderr.startswith("tier_unavailable: "), p.stderr
    assert "kis sandbox guest fetch" in p.stderr
    st = json.loads(kis("guest", "status", "--json", env=e).stdout)
    assert st["source"] == "none" and st["found"] is False
    assert st["path"] == str(tmp_path / "s" / "cache" / "guest")


def test_microvm_run_without_a_guest_says_what_to_do_first(tmp_path):
    """The run's refusal leads with the fix and names where it looked,
    the store's own cache last, even when the message is cut short."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")
    e = {"KIS_SANDBOX_ROOT": str(tmp_path / "s"), "KIS_MICROVM_GUEST_DIR": ""}
    p = kis("run", "--tier", "microvm", "--", "/bin/true", env=e)
    assert p.returncode == 125 and p.stderr.startswith("tier_unavailable: "), p.stderr
    assert "no guest kernel: run 'kis sandbox guest fetch'" in p.stderr, p.stderr
    assert str(tmp_path / "s" / "cache" / "guest") in p.stderr, p.stderr


def fake_guest(d):
    (d / "modules").mkdir(parents=True)
    (d / "vmlinuz").write_text("not a kernel")
    (d / "modules" / "load").write_text("")
    (d / "busybox").write_text("")
    (d / "busybox").chmod(0o755)
    return d


def test_guest_lookup_order(installed, tmp_path):
    """env, then the system location, then the store's cache."""
    store = tmp_path / "s"
    fake_guest(store / "cache" / "guest")
    env = {"KIS_SANDBOX_ROOT": str(store)}
    st = json.loads(kis("guest", "status", "--json", env=dict(env, KIS_MICROVM_GUEST_DIR="")).stdout)
    assert st["source"] == "store" and st["path"] == str(store / "cache" / "guest")
    if (installed / "lib/kis/guest/vmlinuz").exists():
        st = json.loads(run_installed(installed, "guest", "status", "--json", env=env).stdout)
        assert st["source"] == "system", st
    other = fake_guest(tmp_path / "mine")
    st = json.loads(run_installed(installed, "guest", "status", "--json",
                                  env=dict(env, KIS_MICROVM_GUEST_DIR=str(other))).stdout)
    assert st["source"] == "environment" and st["path"] == str(other)


def test_guest_fetch_system_needs_an_installed_kis(tmp_path):
    """build/kis has no system location of its own: --system is refused
    by name, before anything is downloaded."""
    p = kis("guest", "fetch", "--system", env={"KIS_SANDBOX_ROOT": str(tmp_path / "s")})
    assert p.returncode == 125 and p.stderr.startswith("invalid_argument: --system"), p.stderr


def test_guest_env_comes_first(tmp_path):
    if not (GUEST / "vmlinuz").exists():
        pytest.skip("no guest in build/microvm-guest (make microvm-guest)")
    e = {"KIS_SANDBOX_ROOT": str(tmp_path / "s"), "KIS_MICROVM_GUEST_DIR": str(GUEST)}
    assert kis("guest", "path", env=e).stdout.strip() == str(GUEST)


def test_uninstall_removes_what_install_wrote(tmp_path):
    dest = tmp_path / "d"
    subprocess.run(["make", "-s", "install", f"DESTDIR={dest}", "INSTALL_GUEST=0"], cwd=ROOT,
                   check=True, capture_output=True)
    assert (dest / "usr/local/bin/kis").exists()
    subprocess.run(["make", "-s", "uninstall", f"DESTDIR={dest}"], cwd=ROOT, check=True,
                   capture_output=True)
    left = [p for p in dest.rglob("*") if not p.is_dir()]
    assert left == []


# ---- the manual ----

def test_man_pages_render():
    if shutil.which("man") is None or shutil.which("help2man") is None:
        pytest.skip("man-db or help2man is not installed")
    subprocess.run(["make", "-s", "man"], cwd=ROOT, check=True, capture_output=True)
    pages = sorted((ROOT / "build" / "man").glob("*.1"))
    verbs = [p.name[len("kis-sandbox-"):-2] for p in pages if p.name != "kis-sandbox.1"]
    assert "run" in verbs and "guest" in verbs and "session" in verbs
    env = dict(os.environ, MANPAGER="cat", MANWIDTH="100", LC_ALL="C.UTF-8")
    for page in pages:
        p = subprocess.run(["man", "-l", str(page)], env=env, capture_output=True, text=True)
        assert p.returncode == 0, (page, p.stderr)
        assert "NAME" in p.stdout and "SYNOPSIS" in p.stdout or "DESCRIPTION" in p.stdout
        assert "warning" not in p.stderr, (page, p.stderr)
    # one source: every flag of run --help is in its page
    out = subprocess.run(["man", "-l", str(ROOT / "build/man/kis-sandbox-run.1")], env=env,
                         capture_output=True, text=True).stdout
    for flag in ("--base", "--workspace", "--timeout", "--allow-process-tier", "--store-root"):
        assert flag in out, flag


# ---- completion ----

COMPLETE = r'''
source "$1"
complete -p kis
comp() { # the line, a trailing space meaning a new word
	read -ra COMP_WORDS <<<"$1"
	[[ $1 == *" " ]] && COMP_WORDS+=("")
	COMP_WORDS[0]=$KIS
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	_kis
	echo "${COMPREPLY[*]}"
}
comp "kis sandbox "
comp "kis sandbox run --ba"
comp "kis sandbox clone "
comp "kis sandbox run --base "
comp "kis sandbox base "
comp "kis sandbox run -- ech"
comp "kis sandbox session "
comp "kis sandbox run --tier "
comp "kis sandbox create --backend "
comp "kis sandbox run --net "
'''


def test_bash_completion_offers_verbs_flags_and_a_base_id(store, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").write_text("x")
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    script = tmp_path / "c.sh"
    script.write_text(COMPLETE)
    p = subprocess.run(["bash", "--norc", str(script), str(ROOT / "scripts/completion/kis.bash")],
                       env=dict(os.environ, KIS=str(KIS)), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "complete -F _kis kis"
    verbs = lines[1].split()
    for v in ("run", "create", "exec", "base", "clone", "workspace", "session", "guest"):
        assert v in verbs, verbs
    assert set(lines[2].split()) == {"--backend", "--base"}
    assert lines[3].split() == [base]
    assert lines[4].split() == [base]
    assert lines[5].split() == ["import", "list", "remove", "--help"]
    assert "echo" in lines[6].split()
    assert lines[7].split() == ["list", "destroy", "create", "exec", "shell", "--help"]
    # the choices come from the binary's help, which writes them from the
    # library's tables (core/names.c, the backends' registry; issue 42)
    assert lines[8].split() == ["auto", "process", "wasm", "host", "container", "microvm"]
    backends = [b["backend"] for b in json.loads(kis("backends", "--json").stdout)]
    assert lines[9].split() == backends
    assert lines[10].split() == ["off", "loopback", "egress", "host"]


def _zsh_complete(tmp_path, typed):
    """Type each (line, expected) line and a TAB into an interactive zsh
    (compinit, our _kis on its fpath) on a pseudo-terminal; what the
    terminal showed after each, read until the expected text appears (the
    completion runs kis, which a loaded machine makes slow) or 30 s pass."""
    d = tmp_path / "zdot"
    (d / "fp").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/completion/_kis", d / "fp" / "_kis")
    (d / ".zshrc").write_text(f"fpath=({d}/fp $fpath)\nautoload -U compinit\n"
                              f"compinit -u -d {d}/.zcompdump\nPS1='%% '\n")
    env = dict(os.environ, ZDOTDIR=str(d), TERM="dumb",
               KIS_BASH_COMPLETION=str(ROOT / "scripts/completion/kis.bash"),
               PATH=f"{KIS.parent}:{os.environ['PATH']}")
    master, slave = pty.openpty()
    p = subprocess.Popen(["zsh", "-i"], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)

    def read_until(want, secs):
        out, end = b"", time.monotonic() + secs
        while time.monotonic() < end and (want is None or want not in out.decode(errors="replace")):
            if select.select([master], [], [], 0.1)[0]:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
        return out.decode(errors="replace")
    try:
        read_until("% ", 30)  # the prompt
        shown = []
        for line, want in typed:
            os.write(master, line.encode() + b"\t")
            shown.append(read_until(want, 30))
            os.write(master, b"\x15")  # the line killed
            read_until(None, 0.3)
        return shown
    finally:
        p.kill()
        p.wait()
        os.close(master)


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed (Debian: zsh)")
def test_zsh_completion_offers_verbs_flags_and_a_base_id(store, tmp_path):
    (tmp_path / "t").mkdir()
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    typed = [("kis sandbox bas", "kis sandbox base "),
             ("kis sandbox run --bas", "kis sandbox run --base "),
             ("kis sandbox base ", "remove"),
             ("kis sandbox clone ", f"kis sandbox clone {base} ")]
    shown = _zsh_complete(tmp_path, typed)
    for (line, want), got in zip(typed, shown):
        assert want in got, (line, got)
    for sub in ("import", "list", "remove"):
        assert sub in shown[2], shown[2]


# ---- progress: on a terminal only ----

def many_files(d, n=12000):
    for i in range(n // 500):
        sub = d / f"d{i}"
        sub.mkdir(parents=True)
        for j in range(500):
            (sub / f"f{j}").write_bytes(b"x" * 100)
    return d


def test_import_progress_shows_totals_on_a_pty_and_nothing_on_a_pipe(store, tmp_path):
    src = many_files(tmp_path / "big")
    # progress shows after half a second; the hook shows it at once, so the
    # test holds on a machine that imports 12000 files faster than that
    now = {"KIS_TEST_PROGRESS_AT_ONCE": "1"}
    rc, out, tty = stderr_on_pty(["base", "import", str(src)], now)
    assert rc == 0 and out.startswith("b-"), tty
    # 12000 files and 24 directories, each an entry of the import
    assert "importing: " in tty and "/12024 files" in tty and "/1.1 MiB" in tty, tty
    assert "12024/12024 files, 1.1/1.1 MiB (100%)" in tty  # the final totals
    p = kis("base", "import", str(src))
    assert p.returncode == 0 and p.stderr == ""
    rc, out, tty = stderr_on_pty(["base", "import", "--quiet", str(src)], {})
    assert rc == 0 and "importing" not in tty
    # under --json: events as JSON lines on stderr, the result on stdout
    rc, out, tty = stderr_on_pty(["base", "import", "--json", str(src)], {})
    assert rc == 0 and json.loads(out)["id"].startswith("b-")
    events = [json.loads(l) for l in tty.replace("\r", "").splitlines() if l.strip()]
    assert events and events[-1] == {"progress": {"files": 12024, "files_total": 12024,
                                                  "bytes": 1200000, "bytes_total": 1200000}}


def test_guest_fetch_shows_its_steps_only_on_a_terminal(tmp_path):
    """The script's steps appear on a pty; an already complete guest
    needs no step (idempotent), so a fresh copy is fetched only when the
    archive is reachable: the pipe half is checked with the complete one."""
    if not (GUEST / "vmlinuz").exists():
        pytest.skip("no guest in build/microvm-guest")
    p = kis("guest", "fetch", "--dir", str(GUEST))
    assert p.returncode == 0 and p.stderr == "" and p.stdout.strip() == str(GUEST)
    if subprocess.run(["apt-get", "download", "--print-uris", "linux-image-cloud-amd64"],
                      capture_output=True, cwd=tmp_path).returncode != 0:
        pytest.skip("Debian's archive is unreachable: no fresh fetch")
    rc, out, tty = stderr_on_pty(["guest", "fetch", "--dir", str(tmp_path / "g")], {})
    assert rc == 0, tty
    assert "guest: downloading linux-image-cloud-amd64" in tty and "guest: done" in tty, tty
    assert (tmp_path / "g" / "vmlinuz").exists()


# ---- the small things ----

def test_version():
    p = subprocess.run([str(KIS), "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("kis ")
    assert kis("--version").stdout == p.stdout


@pytest.mark.parametrize("verb", [
    ["session", "list"], ["session", "destroy"], ["session", "create"], ["session", "exec"],
    ["session", "shell"], ["base", "import"],
    ["base", "list"], ["base", "remove"], ["workspace", "list"], ["workspace", "path"],
    ["guest"], ["guest", "fetch"], ["guest", "status"], ["guest", "path"],
])
def test_help_on_every_subverb_exits_0(verb):
    p = kis(*verb, "--help")
    assert p.returncode == 0, (verb, p.stderr)
    assert p.stdout.startswith("Usage: kis sandbox "), verb


def test_session_exec_and_shell_are_there_under_session_too(store):
    """A user who looks for exec under 'session' (where create, list and
    destroy are) finds it; an unknown subcommand is named as such, even
    with a command after it."""
    s = kis("session", "create", *PROC)
    assert s.returncode == 0, s.stderr
    sid = s.stdout.strip()
    try:
        p = kis("session", "exec", sid, "--", "sh", "-c", "echo via-session")
        assert p.returncode == 0 and p.stdout == "via-session\n", (p.stdout, p.stderr)
        p = subprocess.run([str(KIS), "sandbox", "session", "shell", sid], input="echo $((2+3))\n",
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "5" in p.stdout.split(), (p.stdout, p.stderr)
    finally:
        kis("session", "destroy", sid)
    p = kis("session", "frob", sid, "--", "true")
    assert p.returncode == 125 and "unknown subcommand 'frob'" in p.stderr, p.stderr


def test_one_key_for_an_id(store, tmp_path):
    (tmp_path / "t").mkdir()
    b = json.loads(kis("base", "import", str(tmp_path / "t"), "--json").stdout)
    assert set(b) == {"id"}
    assert [x["id"] for x in json.loads(kis("base", "list", "--json").stdout)] == [b["id"]]
    w = json.loads(kis("clone", b["id"], "--json").stdout)
    try:
        assert w["id"].startswith("w-") and w["base"] == b["id"]
        assert [x["id"] for x in json.loads(kis("workspace", "list", "--json").stdout)] == [w["id"]]
        assert json.loads(kis("workspace", "path", w["id"], "--json").stdout)["id"] == w["id"]
    finally:
        kis("destroy", w["id"])
    s = kis("create", *PROC, "--json")
    assert s.returncode == 0, s.stderr
    sid = json.loads(s.stdout)["id"]
    try:
        assert sid in [x["id"] for x in json.loads(kis("session", "list", "--json").stdout)]
    finally:
        kis("session", "destroy", sid)


@pytest.mark.parametrize("args,code", [
    (["run", "--json", "--tier", "nope", "--", "true"], "invalid_profile"),
    (["run", "--json", "--tier", "process", "--", "true"], "escape_hatch_forbidden"),
    (["clone", "b-nothere", "--json"], "not_found"),
    (["session", "list", "--json", "--bogus"], "invalid_argument"),
    (["frobnicate", "--json"], "invalid_argument"),
])
def test_an_error_under_json_is_a_json_document(store, args, code):
    p = kis(*args)
    assert p.returncode == 125
    doc = json.loads(p.stdout)
    assert doc["error"]["code"] == code and doc["error"]["message"]
    assert p.stdout.endswith("\n")
    # and the one line for people stays on stderr
    assert p.stderr.startswith(code + ": "), p.stderr


def test_run_on_a_named_workspace_says_nothing_of_keeping_it(store, tmp_path):
    (tmp_path / "t").mkdir()
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    ws = kis("clone", base).stdout.strip()
    kept = None
    try:
        p = kis("run", *PROC, "--workspace", ws, "--", "sh", "-c", "echo err >&2")
        assert p.returncode == 0 and p.stderr == "err\n"
        p = kis("run", *PROC, "--base", base, "--keep", "--", "true")
        assert p.returncode == 0 and p.stderr.startswith("kis: workspace w-")
        kept = p.stderr.split()[2]
    finally:
        for w in (ws, kept):
            if w:
                kis("destroy", w)


def test_json_output_ends_with_a_newline(store):
    for args in (["run", "--json", *PROC, "--", "true"], ["backends", "--json"],
                 ["base", "list", "--json"], ["session", "list", "--json"],
                 ["guest", "status", "--json"]):
        p = kis(*args)
        assert p.returncode == 0 and p.stdout.endswith("}\n") or p.stdout.endswith("]\n"), args


LIBPROG = r'''
#include <kis/sandbox.h>
#include <stdio.h>
#include <stdlib.h>
/* one header: the store's API (kis/store.h) and sessions come with it */
int main(int argc, char **argv)
{
	struct kis_error *e = NULL;
	struct kis_store *s = NULL;
	if (kis_store_open(argv[1], &s, &e) < 0)
		return 2;
	kis_store_free(s);
	printf("%s\n", kis_version());
	struct kis_profile p;
	kis_profile_init(&p);
	if (kis_profile_set(&p, "backend", argv[2], &e) < 0)
		return 3;
	struct kis_run_options o = {.io = {.stdin_fd = -1, .stdout_fd = 1, .stderr_fd = 2,
					   .cancel_fd = -1},
				    .store_root = argv[1], .resize_fd = -1, .tty_fd = -1};
	struct kis_result r;
	kis_result_init(&r);
	char *argv_cmd[] = {"/bin/true", NULL};
	if (kis_run(&p, argv_cmd, &o, &r, NULL, &e) < 0) {
		char *m = kis_error_format(e);
		printf("%s\n", m);
		return 4;
	}
	return kis_result_exit_status(&r);
}
'''


def test_the_installed_library_finds_its_agent_without_env(installed, tmp_path):
    """A program far from bin/kis-agent, linked against the installed
    shared library, runs on a tier that needs the agent."""
    caps = json.loads(kis("backends", "--json").stdout)
    if not [b for b in caps if b["backend"] == "bubblewrap" and b["available"]]:
        pytest.skip("bubblewrap is not available here")
    src = tmp_path / "t.c"
    src.write_text(LIBPROG)
    prog = tmp_path / "elsewhere" / "t"
    prog.parent.mkdir()
    subprocess.run(["cc", str(src), f"-I{installed}/include", f"-L{installed}/lib",
                    "-lkis-sandbox", "-o", str(prog)], check=True)
    e = {k: v for k, v in os.environ.items() if not k.startswith("KIS_")}
    e["LD_LIBRARY_PATH"] = str(installed / "lib")
    p = subprocess.run([str(prog), str(tmp_path / "store"), "bubblewrap"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout.strip() == subprocess.run([str(KIS), "--version"], capture_output=True,
                                              text=True).stdout.split()[1]


def test_microvm_follows_store_root_not_the_environment(tmp_path):
    """Issue 20, defect 3: with KIS_SANDBOX_ROOT=A and --store-root B, the
    microvm looked for its guest under A and made A's directories. The
    guest is looked up in B, and A is never made."""
    a, b = tmp_path / "A", tmp_path / "B"
    fake_guest(b / "cache" / "guest")
    env = {"KIS_SANDBOX_ROOT": str(a), "KIS_MICROVM_GUEST_DIR": ""}
    p = kis("backends", "--json", "--store-root", str(b), env=env)
    assert p.returncode == 0, p.stderr
    vm = [x for x in json.loads(p.stdout) if x["backend"] == "microvm"][0]
    if (vm.get("guest") or {}).get("source") == "system":
        pytest.skip("a guest is installed in the system location, which comes first")
    assert vm["guest"]["path"] == str(b / "cache" / "guest"), vm
    # the microvm's own probe and plan read B's guest: planned, not refused
    p = kis("run", "--dry-run", "--tier", "microvm", "--store-root", str(b), "--", "true",
            env=env)
    assert p.returncode == 0, p.stderr
    assert not a.exists(), sorted(str(x) for x in a.rglob("*"))
