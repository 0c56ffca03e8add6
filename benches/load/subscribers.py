#!/usr/bin/env python3
"""The load test's Python subscribers, beside saltsight on the same bus.

    subscribers.py salt MASTER_CONFIG END_JID   Salt's own subscriber, the way
        engines and the reactor read: salt.utils.event.get_event("master", ...)
        then event.get_event(full=True) in a loop (every event decoded).
    subscribers.py bare ENDPOINT END_JID        a bare reader: a socket and a
        msgpack.Unpacker, frames split, nothing else done (ENDPOINT is a unix
        socket path or host:port).

Run with the Salt venv's Python. Protocol on stdout, one line each:
    hello            the first load/hello event arrived (subscribed)
    done N REASON    N job events (tags salt/job/...) received when the end job's
                     return arrived (REASON end), the stream closed (eof) or
                     SIGTERM came (term)
After "done" it waits for stdin to close, so that whoever measures it can read
its /proc entries first. It only reads the bus.
"""

import os
import signal
import socket
import sys

HELLO = b"load/hello"


class Counter:
    def __init__(self, end_jid):
        self.jobs = 0
        self.hello = False
        self.end_tag = b"salt/job/" + end_jid.encode() + b"/ret/"

    def tag(self, tag):
        """Counts one event by its tag; True at the end."""
        if tag.startswith(b"salt/job/"):
            self.jobs += 1
            return tag.startswith(self.end_tag)
        if not self.hello and tag.startswith(HELLO):
            self.hello = True
            say("hello")
        return False


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def finish(counter, reason):
    say(f"done {counter.jobs} {reason}")
    # Stay (idle, blocked) until the harness has read /proc and closes stdin.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.stdin.read()
    sys.exit(0)


def salt_subscriber(master_config, counter):
    import salt.config
    import salt.utils.event

    opts = salt.config.master_config(master_config)
    event = salt.utils.event.get_event(
        "master", sock_dir=opts["sock_dir"], opts=opts, listen=True
    )
    while True:
        try:
            ev = event.get_event(wait=1, full=True)
        except Exception:  # the master dropped us: the stream closed
            return "eof"
        if ev is None:
            continue
        if counter.tag(ev["tag"].encode()):
            return "end"


def bare_reader(endpoint, counter):
    import msgpack

    if endpoint.startswith("/"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(endpoint)
    else:
        host, port = endpoint.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
    unpacker = msgpack.Unpacker(raw=True, max_buffer_size=1 << 30)
    while True:
        chunk = sock.recv(262144)
        if not chunk:
            return "eof"
        unpacker.feed(chunk)
        for frame in unpacker:
            body = frame[b"body"]
            if counter.tag(body[: body.find(b"\n\n")]):
                return "end"


def main():
    kind, where, end_jid = sys.argv[1:4]
    counter = Counter(end_jid)

    def on_term(_sig, _frame):
        finish(counter, "term")

    signal.signal(signal.SIGTERM, on_term)
    if kind == "salt":
        reason = salt_subscriber(where, counter)
    elif kind == "bare":
        reason = bare_reader(where, counter)
    else:
        sys.exit(f"unknown subscriber {kind}")
    finish(counter, reason)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
