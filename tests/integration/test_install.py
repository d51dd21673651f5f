# SPDX-License-Identifier: MIT
# `make install PREFIX=...` installs the binary, the agent, the libraries
# (static and shared), the headers and a pkg-config file that works.
import os
import subprocess

from conftest import ROOT

PROGRAM = r'''
#include <kis/sandbox.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	struct kis_profile p;
	struct kis_error *e = NULL;
	kis_profile_init(&p);
	p.tier = KIS_TIER_PROCESS;
	if (kis_profile_check_hatches(&p, &e) < 0) {
		char *s = kis_error_format(e);
		puts(s);
		free(s);
		kis_error_free(e);
	}
	return 0;
}
'''


def test_make_install_and_link_against_it(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["make", "-s", "install", f"PREFIX={prefix}"], cwd=ROOT, check=True,
                   capture_output=True)
    for f in ("bin/kis", "bin/kis-agent", "bin/kis-runtime", "bin/kis-runtime-host",
              "bin/kis-runtime-microvm",
              "bin/kis-runtime-container", "lib/libkis-sandbox.a",
              "lib/libkis-sandbox.so", "lib/libkis-sandbox.so.0", "include/kis/sandbox.h",
              "lib/pkgconfig/kis-sandbox.pc"):
        assert (prefix / f).exists(), f
    # the three hand-written pages render with man(1), without a warning
    for page, sect in (("kis", 1), ("kis-runtime", 8), ("kis-sandbox-profile", 5)):
        f = prefix / f"share/man/man{sect}/{page}.{sect}"
        assert f.exists(), f
        r = subprocess.run(["man", "--warnings", "-l", str(f)], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
        assert r.returncode == 0 and "EXIT STATUS" in r.stdout and "ENVIRONMENT" in r.stdout, r
        assert not r.stderr.strip(), r.stderr
    # the JSON Schemas of every --json document (README, JSON output)
    schemas = {f.name for f in (prefix / "share/kis/schema").glob("*.schema.json")}
    assert {f.name for f in (ROOT / "docs/schema").glob("*.schema.json")} == schemas, schemas
    # zsh's completion runs the installed bash one (bashcompinit)
    zsh = (prefix / "share/zsh/vendor-completions/_kis").read_text()
    assert f'"${{KIS_BASH_COMPLETION:-{prefix}/share/bash-completion/completions/kis}}"' in zsh
    assert (prefix / "share/bash-completion/completions/kis").exists()
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib/pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "kis-sandbox"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    src = tmp_path / "t.c"
    src.write_text(PROGRAM)
    subprocess.run(["cc", str(src), *flags, "-o", str(tmp_path / "t")], check=True)
    out = subprocess.run([str(tmp_path / "t")], env=dict(env, LD_LIBRARY_PATH=str(prefix / "lib")),
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith("escape_hatch_forbidden: the process tier runs unconfined")
    # the installed kis finds its installed agent
    r = subprocess.run([str(prefix / "bin/kis"), "sandbox", "run", "--tty", "--tier", "process",
                        "--allow-process-tier", "--", "true"],
                       env=dict(env, KIS_SANDBOX_ROOT=str(tmp_path / "store")),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    # the installed kis (static) compiles through the installed kis-helper
    # and links the cached code after (a WASI module that only returns)
    if (prefix / "lib/kis/libkis-jit.so").exists():
        assert (prefix / "lib/kis/kis-helper").exists()
        base = tmp_path / "wbase"
        base.mkdir()
        (base / "t.wasm").write_bytes(bytes.fromhex(
            "0061736d01000000010401600000030201000" "70a01065f73746172740000" "0a040102000b"))
        wenv = dict(env, KIS_SANDBOX_ROOT=str(tmp_path / "wstore"))
        kis_bin = str(prefix / "bin/kis")
        b = subprocess.run([kis_bin, "sandbox", "base", "import", str(base)], env=wenv,
                           check=True, capture_output=True, text=True).stdout.strip()
        for _ in range(2):
            r = subprocess.run([kis_bin, "sandbox", "run", "--tier", "wasm", "--wasm-engine",
                                "compiler", "--base", b, "--", "t.wasm"], env=wenv,
                               capture_output=True, text=True, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r.stderr
        assert list((tmp_path / "wstore/cache/wasm-code").glob("*.o"))
