# SPDX-License-Identifier: MIT
# A container's CPU bound judged from inside it, where its cgroup namespace
# shows its own group at /sys/fs/cgroup (a kis-vm pod's app container:
# src/agent/pod.c): a busy loop's share of one CPU over the guest's clock,
# and the periods its group was throttled in.


def busy_probe(secs):
    """argv: a busy loop of `secs` seconds (the shell's own, no fork per
    turn) between two readings of "usage_usec nr_throttled uptime"."""
    stat = ("awk '/^usage_usec/{u=$2} /^nr_throttled/{t=$2} END{printf \"%s %s \", u, t+0}' "
            "/sys/fs/cgroup/cpu.stat; cut -d' ' -f1 /proc/uptime")
    return ["sh", "-c", f"{stat}; timeout {secs} sh -c 'while :; do :; done'; {stat}"]


def busy_share(out):
    """From busy_probe's output: the share of one CPU the loop had, and
    the periods throttled meanwhile."""
    (u0, t0, w0), (u1, t1, w1) = (line.split() for line in out.split("\n")[:2])
    return (int(u1) - int(u0)) / 1e6 / (float(w1) - float(w0)), int(t1) - int(t0)
