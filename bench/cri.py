# SPDX-License-Identifier: MIT
# Pods through containerd's CRI plugin, as a kubelet starts and ends them:
# RunPodSandbox, CreateContainer, StartContainer, the first ExecSync
# answered ("start"), then StopContainer, RemoveContainer, StopPodSandbox,
# RemovePodSandbox ("teardown"), at the runc handler (the control) and each
# kis handler of the README's config, interleaved round by round in one
# private node (tests/cri/harness.py: the same daemon, load and image for
# all), medians and ratios to the control. A handler kis-runtime refuses
# today is named with its refusal and left out. HANDLER... (each a name of
# HANDLERS) narrows the run to those, the control always among them: a
# slow handler (kis-vm under TCG) measured beside runc alone, in fewer
# seconds and without the other handlers' pods between its rounds. The
# load average is printed with the table: the machine is shared.
# Usage: python3 bench/cri.py [N [HANDLER...]]   (sh bench/cri.sh [N [HANDLER...]])
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cri"))
import harness as H  # noqa: E402

HANDLERS = ["runc", "kis", "kis-host", "kis-vm"]


def one_pod(node, handler):
    """(start seconds, teardown seconds) of one pod with one app container."""
    t0 = time.monotonic()
    pod, cfg = node.run_pod(handler)
    try:
        cid = node.start_container(pod, cfg, "app", ["/bin/sleep", "100000"])
        out = node.exec_sync(cid, ["/bin/echo", "ready"])
        assert out == ("ready\n", "", 0), (handler, out)
        t1 = time.monotonic()
        node.cri.call("StopContainer", container_id=cid, timeout=0)
        node.cri.call("RemoveContainer", container_id=cid)
        node.cri.call("StopPodSandbox", pod_sandbox_id=pod)
        node.cri.call("RemovePodSandbox", pod_sandbox_id=pod)
        pod = None
        return t1 - t0, time.monotonic() - t1
    finally:
        if pod:
            node.teardown_pod(pod)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    pick = sys.argv[2:]
    bad = [h for h in pick if h not in HANDLERS]
    if bad:
        print(f"bench/cri.py: unknown handler {bad[0]!r}: one of {', '.join(HANDLERS)}",
              file=sys.stderr)
        return 2
    handlers = [h for h in HANDLERS if h == "runc" or not pick or h in pick]
    why = H.why_skip()
    if why:
        print(f"bench/cri.py: {why}: skipped")
        return 0
    d = tempfile.mkdtemp(prefix="kis-bench-cri-")
    node = H.Node(d)
    try:
        node.start()
        runs = {}
        load0 = os.getloadavg()
        # one pod each first: a refused handler is named and left out, and
        # the image is unpacked and cached for all
        for h in handlers:
            try:
                one_pod(node, h)
                runs[h] = ([], [])
            except node.cri.grpc.RpcError as e:
                msg = e.details().split("OCI runtime create failed: ")[-1]
                print(f"{h}: refused, left out: {msg}")
        for _ in range(n):
            for h in runs:
                s, t = one_pod(node, h)
                runs[h][0].append(s)
                runs[h][1].append(t)
        ref = [statistics.median(x) for x in runs["runc"]]
        load1 = os.getloadavg()
        print(f"\n{n} interleaved pods per handler (one app container each), medians;"
              f" control: runc handler ({H.CONTROL})")
        print(f"load average (1, 5, 15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the"
              f" start, {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end"
              f" ({os.cpu_count()} CPUs)")
        print(f"{'handler':<10} {'start ms':>9} {'ratio':>6} {'teardown ms':>12} {'ratio':>6}")
        for h, (s, t) in runs.items():
            ms, mt = statistics.median(s), statistics.median(t)
            print(f"{h:<10} {ms * 1000:>9.0f} {ms / ref[0]:>5.2f}x {mt * 1000:>12.0f}"
                  f" {mt / ref[1]:>5.2f}x")
    finally:
        left, stray = node.stop()
        if left or stray:
            print(f"bench/cri.py: left pods {left}, processes {stray}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
