#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# A bare QEMU, no jail, restoring the engine's snapshot with the engine's
# device set: milliseconds from its start to the guest's first reply (pong).
# The unjailed side of bench/microvm-density.sh's "jail's cost".
import glob
import os
import socket
import subprocess
import sys
import tempfile
import time


def qmp(sock_path, deadline):
    while True:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock_path)
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
    f = s.makefile("rwb", buffering=0)
    f.readline()  # greeting

    def cmd(js, fds=()):
        if fds:
            socket.send_fds(s, [js.encode()], list(fds))
        else:
            s.sendall(js.encode())
        while True:
            line = f.readline()
            if b'"return"' in line or b'"error"' in line:
                if b'"error"' in line:
                    raise RuntimeError(line)
                return line
    cmd('{"execute":"qmp_capabilities"}')
    return s, cmd


def main():
    guest, mem, cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    snaps = sorted(glob.glob(f"{guest}/snap-*-tcg-{mem}m-{cpus}c-3d.vmstate"), key=os.path.getmtime)
    if not snaps:
        sys.exit("no snapshot")
    vmstate = snaps[-1]
    ram = vmstate[:-len(".vmstate")] + ".ram"
    stamp = os.path.basename(vmstate)[len("snap-"):].split("-tcg-")[0]
    initrd = f"{guest}/initramfs-{stamp}.cpio"
    tsc = open(f"{guest}/tsc_khz").read().strip()
    with tempfile.TemporaryDirectory() as d:
        rw = f"{d}/rw.img"
        with open(rw, "wb") as fh:
            fh.truncate(256 << 30)
        a = ["qemu-system-x86_64", "-M", "microvm,rtc=on,pit=off,memory-backend=ram",
             "-accel", "tcg,tb-size=128", "-m", f"{mem}M",
             "-object", f"memory-backend-file,id=ram,size={mem}M,mem-path={ram},share=off,"
             "prealloc=off,merge=off",
             "-cpu", "qemu64,+arat", "-smp", str(cpus), "-nodefaults", "-no-user-config", "-display", "none",
             "-no-reboot", "-serial", "none", "-kernel", f"{guest}/vmlinuz", "-initrd", initrd,
             "-append", f"quiet panic=-1 tsc_early_khz={tsc} tsc=reliable nowatchdog "
             "sysctl.vm.compaction_proactiveness=0 kis.ports=4",
             "-device", "virtio-serial-device,max_ports=6",
             "-chardev", f"socket,id=ctl,path={d}/ctl.sock,server=on,wait=off",
             "-device", "virtserialport,chardev=ctl,name=kis.ctl,nr=1",
             "-chardev", f"socket,id=qmp,path={d}/qmp.sock,server=on,wait=off",
             "-mon", "chardev=qmp,mode=control"]
        for i in range(4):
            a += ["-chardev", f"socket,id=a{i},path={d}/a{i}.sock,server=on,wait=off",
                  "-device", f"virtserialport,chardev=a{i},name=kis.{i},nr={2 + i}"]
        # the engine's device set, in its order (src/backends/microvm/vm.c
        # kis_mvm_spawn): base, delta, rw, the mounts' slots, the network
        empty = f"{guest}/disk-empty-v1.img"
        for i, (name, f) in enumerate((("base", empty), ("delta", empty), ("rw", rw))):
            ro = "readonly=on," if i < 2 else ""
            a += ["-drive", f"if=none,id={name},format=raw,cache=writeback,{ro}file={f}",
                  "-device", f"virtio-blk-device,drive={name},serial=kis-{name}"]
        for i in range(8):  # KIS_MVM_MOUNT_DISKS
            m = f"m{i // 2}{'d' if i % 2 else 'l'}"
            a += ["-drive", f"if=none,id={m},format=raw,cache=writeback,readonly=on,file={empty}",
                  "-device", f"virtio-blk-device,drive={m},serial=kis-{m}"]
        a += ["-netdev", "hubport,id=net0,hubid=0",
              "-device", "virtio-net-device,netdev=net0,mac=52:54:00:12:34:56"]
        a += ["-incoming", "defer"]
        t0 = time.monotonic()
        p = subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            s, cmd = qmp(f"{d}/qmp.sock", t0 + 10)
            cmd('{"execute":"migrate-set-capabilities","arguments":{"capabilities":'
                '[{"capability":"x-ignore-shared","state":true}]}}')
            with open(vmstate, "rb") as sf:
                cmd('{"execute":"getfd","arguments":{"fdname":"snap"}}', [sf.fileno()])
            cmd('{"execute":"migrate-incoming","arguments":{"uri":"fd:snap"}}')
            c = None
            while time.monotonic() < t0 + 30:
                try:
                    if c is None:
                        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        c.connect(f"{d}/ctl.sock")
                    c.settimeout(0.25)
                    c.sendall(b"ping\n")
                    if b"pong" in c.recv(64):
                        print(int((time.monotonic() - t0) * 1000))
                        return
                except OSError:
                    if c is not None:
                        c.close()
                    c = None
                    time.sleep(0.005)
            sys.exit("no reply")
        finally:
            p.kill()
            p.wait()


main()
