# SPDX-License-Identifier: MIT
"""Like-for-like references for the benchmarks: the raw mechanism with the
configuration kis generates for it, and nothing more.

  refs.py bwrap KIS [--cgroup] -- CMD...
      prints a bench/startup.c command: bwrap with the very argv kis's
      --dry-run shows for the bubblewrap backend (its mounts, namespaces,
      seccomp program, user namespace and staged agent, prepared the way
      the engine prepares them, see the recipes in bench/startup.c), CMD in
      place of the agent. --cgroup adds a cgroup as kis makes one per run.
  refs.py crun KIS DIR -- CMD...
      writes DIR/bundle: the config.json kis's --dry-run shows for the oci
      backend (the same function writes the one a run uses), with CMD as
      process.args in place of the agent and no cgroupsPath (crun then
      uses /<container id>, which is what kis names it: /kis-<sandbox id>),
      the rootfs skeleton kis makes, the agent bound from kis's staged copy;
      prints the bench/startup.c command running it with crun as kis does.
      kis's config carries the annotation run.oci.seccomp_bpf_data (its own
      compiled program for the same policy, the file bubblewrap runs use)
      and no linux.seccomp: crun loads the program as given.
      As root the container joins the sandbox's user namespace (0..65535
      onto its own host block), which kis makes before crun starts and
      names by a path into its descriptor table: the reference makes it
      the same way (@userns, bench/startup.c) and names it
      /proc/self/fd/USERNS_FD.
"""
import glob
import json
import os
import subprocess
import sys


def dry_run(kis, backend, cmd):
    out = subprocess.run([kis, "sandbox", "run", "--dry-run", "--backend", backend, "--"] + cmd,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def binary_key(path):
    st = os.stat(path)
    return "%x-%x-%x" % (st.st_dev, st.st_ino, st.st_size)


def seccomp_file(kis, net=0, sysv=1):
    # the engine's cache (src/backends/host_common.c cache_name): one run of
    # the backend has written it
    subprocess.run([kis, "sandbox", "run", "--backend", "bubblewrap", "--", "/bin/true"],
                   check=True, capture_output=True)
    base = "/run/kis-sandbox" if os.geteuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "") + "/kis-sandbox"
    real = os.path.realpath(kis)
    hits = glob.glob("%s/seccomp-n%d-i%d-u0-%s-*.bpf" % (base, net, sysv, binary_key(real)))
    if not hits:
        sys.exit("refs.py: kis's compiled seccomp program is not in %s" % base)
    return max(hits, key=os.path.getmtime)


def bwrap(kis, cmd, cgroup):
    plan = dry_run(kis, "bubblewrap", ["/bin/true"])
    argv = plan["bwrap_argv"]
    first = plan["ids"]["first"]
    end = argv.index("--")
    agent = os.path.join(os.path.dirname(os.path.realpath(kis)), "kis-agent")
    words = ["@userns=%d" % first, "@seccomp=%s" % seccomp_file(kis), "@stage=%s" % agent,
             "@drop=%d" % first]
    if cgroup:
        words.insert(0, "@cgroup")
    return " ".join(words + argv[:end] + ["--"] + cmd)


USERNS_FD = 100


def crun(kis, d, cmd):
    plan = dry_run(kis, "oci", ["/bin/true"])
    cfg = plan["config"]
    bundle = os.path.join(d, "bundle")
    rootfs = os.path.join(bundle, "rootfs")
    os.makedirs(rootfs, exist_ok=True)
    # the container's root is the sandbox's first id, not root: the way to
    # its rootfs is searchable, as kis's bundle under /run/kis/oci is
    for p in (d, bundle, rootfs):
        os.chmod(p, 0o755)
    # kis_oci_rootfs_skeleton: the mount points, the agent's file, and the
    # system directories (a merged-/usr link as the same link)
    for sub in ["proc", "dev", "sys", "tmp", "workspace", ".kis"]:
        os.makedirs(os.path.join(rootfs, sub), exist_ok=True)
    open(os.path.join(rootfs, ".kis/agent"), "a").close()
    os.chmod(os.path.join(rootfs, ".kis/agent"), 0o755)
    for m in cfg["mounts"]:
        if m["type"] != "bind" or m["destination"].count("/") != 1:
            continue
        dst = m["destination"]
        p = os.path.join(rootfs, dst[1:])
        if not os.path.lexists(p):
            os.mkdir(p)
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]:
        p = os.path.join(rootfs, top[1:])
        if os.path.islink(top) and not os.path.lexists(p):
            os.symlink(os.readlink(top), p)
    agent = os.path.join(os.path.dirname(os.path.realpath(kis)), "kis-agent")
    staged = glob.glob("/run/kis/agent-%s-*" % binary_key(agent))
    for m in cfg["mounts"]:
        if m["destination"] == "/.kis/agent" and staged:
            m["source"] = max(staged, key=os.path.getmtime)
    cfg["process"]["args"] = cmd
    cfg["root"]["path"] = rootfs
    cfg["linux"].pop("cgroupsPath", None)
    words = ["@crunns"]
    for ns in cfg["linux"].get("namespaces", []):
        if ns["type"] == "user" and "path" in ns:
            ns["path"] = "/proc/self/fd/%d" % USERNS_FD
            words.insert(0, "@userns=%d,fd=%d" % (plan["ids"]["first"], USERNS_FD))
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    return " ".join(words) + " crun --root %s/state --log=file:%s/crun.log run --bundle %s kisref-{}" % (
        d, d, bundle)


def main():
    a = sys.argv[1:]
    if "--" not in a or len(a) < 2:
        sys.exit(__doc__)
    cmd = a[a.index("--") + 1:]
    head = a[:a.index("--")]
    if head[0] == "bwrap":
        print(bwrap(head[1], cmd, "--cgroup" in head[2:]))
    elif head[0] == "crun":
        print(crun(head[1], head[2], cmd))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
