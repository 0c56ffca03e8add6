"""Decode a corpus the way Salt's event readers do, for comparison with saltsight.

Usage: python_decode.py CORPUS ROUNDS
CORPUS holds frames, each behind a 4-byte big-endian length (a container for this
benchmark, not a wire form). Each frame is decoded as salt.utils.event does:
salt.payload.loads(frame) for the {head, body} envelope, then SaltEvent.unpack(body)
(the tag split off at "\\n\\n", salt.payload.loads of the rest with encoding utf-8).
Prints one JSON line: the best of ROUNDS runs.
"""

import json
import struct
import sys
import time

import salt.payload
import salt.utils.event


def frames_of(blob):
    out, at = [], 0
    while at < len(blob):
        (n,) = struct.unpack(">I", blob[at : at + 4])
        out.append(blob[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def main():
    path, rounds = sys.argv[1], int(sys.argv[2])
    frames = frames_of(open(path, "rb").read())
    total = sum(len(f) for f in frames)
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        for frame in frames:
            envelope = salt.payload.loads(frame)
            body = envelope.get("body", envelope.get(b"body"))
            tag, data = salt.utils.event.SaltEvent.unpack(body)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    print(json.dumps({"frames": len(frames), "bytes": total, "seconds": best,
                      "mb_per_s": total / best / 1e6, "events_per_s": len(frames) / best}))


if __name__ == "__main__":
    main()
