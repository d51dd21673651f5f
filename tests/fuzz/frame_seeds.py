# SPDX-License-Identifier: MIT
"""Seeds for fuzz-proto: frames as the engine and the agent send them
(src/agent/proto.c's header: u32 payload length, u8 type, u8 stream, two
zero bytes, u32 exec id; little-endian), one conversation a file.

  python3 tests/fuzz/frame_seeds.py CORPUS_DIR
"""
import json
import struct
import sys
from pathlib import Path

HELLO, EXEC, DATA, EOF, RESIZE, SIGNAL, EXIT, ERROR, STARTED = range(1, 10)


def frame(kind, payload=b"", stream=0, exec_id=1):
    if isinstance(payload, (dict, list)):
        payload = json.dumps(payload).encode()
    return struct.pack("<IBBxxI", len(payload), kind, stream, exec_id) + payload


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    req = {"argv": ["/bin/sh", "-c", "echo hi"], "env": ["PATH=/usr/bin:/bin", "HOME=/"],
           "cwd": "/workspace", "tty": False,
           "limits": {"wall_ms": 600000, "cpu_ms": 1000, "output_bytes": 1048576,
                      "open_files": 1024, "file_bytes": 1 << 30}}
    result = {"reason": "exited", "exit_code": 0, "signal": 0, "detail": "done",
              "usage": {"wall_ms": 3, "user_ms": 1, "sys_ms": 1, "max_rss_bytes": 4096,
                        "minor_faults": 10, "major_faults": 0, "voluntary_ctxsw": 1,
                        "involuntary_ctxsw": 0},
              "streams": [{"truncated": False}, {"truncated": True}]}
    seeds = {
        "request": frame(HELLO, struct.pack("<I", 1), exec_id=0) + frame(EXEC, req) +
                   frame(DATA, b"input", stream=0) + frame(EOF) + frame(RESIZE, struct.pack("<HH", 24, 80)) +
                   frame(SIGNAL, struct.pack("<I", 15)),
        "answer": frame(HELLO, struct.pack("<I", 1), exec_id=0) + frame(STARTED, {"pid": 2}) +
                  frame(DATA, b"hi\n", stream=1) + frame(EOF, stream=1) + frame(EXIT, result),
        "error": frame(ERROR, {"code": "internal", "message": "no"}),
    }
    for name, b in seeds.items():
        (out / name).write_bytes(b)
    print(f"fuzz-proto: {len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
