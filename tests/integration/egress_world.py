# SPDX-License-Identifier: MIT
# The test's own small internet for tests/integration/test_egress.py, run
# inside a network namespace the test made: TCP and UDP echo, and a tiny
# DNS server, on the addresses given. Every accepted connection or datagram
# is logged (one line, flushed), so a test sees what reached a listener.
#
#   python3 egress_world.py LOG SPEC...   SPEC: KIND:ADDR:PORT, KIND one of tcp, udp,
#     dns, tcp6, udp6 (ADDR an IPv6 address for the last two: the port is
#     what follows its last colon)
import socket
import struct
import sys
import threading

LOG = open(sys.argv[1], "a", buffering=1)
# the names the DNS server knows
NAMES = {"world.test": "203.0.113.10", "metadata.test": "169.254.169.254"}


def log(line):
    LOG.write(line + "\n")


def tcp(addr, port, family=socket.AF_INET):
    s = socket.socket(family)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    while True:
        c, peer = s.accept()
        log(f"tcp {addr}:{port} from {peer[0]}")
        try:
            c.settimeout(2)
            data = c.recv(4096)
            c.sendall(data)
            # a throughput sink for bench/egress.sh: "sink" then bytes
            if data.startswith(b"sink"):
                c.settimeout(None)
                while c.recv(1 << 16):
                    pass
        except OSError:
            pass
        c.close()


def udp(addr, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(4096)
        log(f"udp {addr}:{port} from {peer[0]}")
        s.sendto(data, peer)


def dns_answer(q):
    """A reply to one query (RFC 1035 4.1): A records from NAMES, else NXDOMAIN."""
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    qtype, = struct.unpack("!H", q[i + 1:i + 3])
    question = q[12:i + 5]
    name = ".".join(labels).lower()
    ip = NAMES.get(name)
    if ip and qtype == 1:
        head = struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0)
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
        return head + question + rr, name
    rcode = 0 if ip else 3
    return struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 0, 0, 0) + question, name


def dns(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        q, peer = s.recvfrom(512)
        try:
            a, name = dns_answer(q)
        except (IndexError, struct.error):
            continue
        log(f"dns {name} from {peer[0]}")
        s.sendto(a, peer)


KINDS = {"tcp": tcp, "udp": udp, "dns": dns,
         "tcp6": lambda a, p: tcp(a, p, socket.AF_INET6),
         "udp6": lambda a, p: udp(a, p, socket.AF_INET6)}
for spec in sys.argv[2:]:
    kind, rest = spec.split(":", 1)
    addr, port = rest.rsplit(":", 1)
    threading.Thread(target=KINDS[kind], args=(addr, int(port)), daemon=True).start()
log("ready")
threading.Event().wait()
