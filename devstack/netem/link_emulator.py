#!/usr/bin/env python3
"""A link emulator in user space: what `tc qdisc … netem delay D J loss P`
does, for kernels built without netem.

Devstack runs one per test network (`seckill_devstack::TestNet`), in the
root namespace. Per emulated host it owns two TAP devices: one moved into
the host's namespace as its `eth0`, one attached to the test's bridge. It
forwards Ethernet frames between them both ways, and applies the host's
current impairment to each frame in each direction, as netem on both ends
of a veth pair would:

- delay: uniform in [delay - jitter, delay + jitter] (netem's default
  distribution), so frames may reorder, as with netem;
- loss: each frame dropped with probability `loss`;
- a bound: at most LIMIT frames wait per direction (netem's `limit`,
  1000 by default); beyond it a frame is dropped and counted.

With no impairment a frame is forwarded at once.

Commands, one a line on stdin; each answered by one line on stdout, `ok …`
or `error <why>`, once it applies (frames read after the answer see it):

    add <host> <inner> <outer> <netns> <bridge>
        makes TAP <inner>, moves it into <netns> as eth0 (down, no
        address: the caller configures it), and TAP <outer>, on <bridge>
        and up
    impair <host> <delay_ms> <jitter_ms> <loss>   (loss in [0, 1])
    clear <host>
    stats <host>
        ok frames=<forwarded> lost=<dropped by loss> overflow=<dropped
        beyond the bound> queued=<waiting now>, both directions summed

The TAP devices live as long as their file descriptors: when stdin closes
(the test process gone, however it ended) this program exits and the
kernel removes every device it made. Standard library only.
"""

import fcntl
import heapq
import os
import random
import selectors
import struct
import subprocess
import sys
import time

# <linux/if_tun.h>: _IOW('T', 202, int), and the flags for an Ethernet
# device without the packet-information prefix.
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000

# netem's default `limit`: frames waiting per direction.
LIMIT = 1000
# Frames read from one device before others get a turn.
BATCH = 64
# Larger than any frame at the devices' MTU (1500 plus the header).
FRAME_MAX = 65536


class Impairment:
    """A host's link as netem would be configured on it."""

    def __init__(self, delay=0.0, jitter=0.0, loss=0.0):
        self.delay = delay
        self.jitter = jitter
        self.loss = loss

    def none(self):
        return self.delay == 0 and self.jitter == 0 and self.loss == 0


class Direction:
    """Frames read from one TAP device, written to the other."""

    def __init__(self, source, sink):
        self.source = source
        self.sink = sink
        self.frames = 0
        self.lost = 0
        self.overflow = 0


class Link:
    """One emulated host: its two devices and its impairment."""

    def __init__(self, inner_fd, outer_fd):
        self.impairment = Impairment()
        # What the host sends, and what is sent to it.
        self.outgoing = Direction(inner_fd, outer_fd)
        self.incoming = Direction(outer_fd, inner_fd)
        self.fds = (inner_fd, outer_fd)


class Emulator:
    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.links = {}
        # (due, sequence, direction, frame): the sequence keeps frames due
        # at the same instant in arrival order and the heap off comparing
        # directions.
        self.due = []
        self.sequence = 0
        self.queued = {}
        self.random = random.Random()
        self.commands = b""

    # Devices

    def tap(self, name):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
        except OSError:
            os.close(fd)
            raise
        return fd

    def add(self, host, inner, outer, netns, bridge):
        if host in self.links:
            raise ValueError(f"host {host} exists")
        inner_fd = self.tap(inner)
        try:
            outer_fd = self.tap(outer)
        except OSError:
            os.close(inner_fd)
            raise
        try:
            ip("link", "set", inner, "netns", netns, "name", "eth0")
            ip("link", "set", outer, "master", bridge, "up")
        except Exception:
            os.close(inner_fd)
            os.close(outer_fd)
            raise
        link = Link(inner_fd, outer_fd)
        self.links[host] = link
        self.selector.register(inner_fd, selectors.EVENT_READ, (link, link.outgoing))
        self.selector.register(outer_fd, selectors.EVENT_READ, (link, link.incoming))

    # Frames

    def receive(self, link, direction, now):
        """Reads what waits on `direction`'s source, a batch at most."""
        for _ in range(BATCH):
            try:
                frame = os.read(direction.source, FRAME_MAX)
            except BlockingIOError:
                return
            except OSError as error:
                # The device is gone (its namespace deleted under it): this
                # direction stops; the others go on.
                print(f"link emulator: {error}; no longer reading it", file=sys.stderr)
                self.selector.unregister(direction.source)
                return
            self.route(link.impairment, direction, frame, now)

    def route(self, impairment, direction, frame, now):
        if impairment.none():
            self.send(direction, frame)
            return
        if impairment.loss > 0 and self.random.random() < impairment.loss:
            direction.lost += 1
            return
        waiting = self.queued.get(id(direction), 0)
        if waiting >= LIMIT:
            direction.overflow += 1
            return
        low = max(0.0, impairment.delay - impairment.jitter)
        delay = self.random.uniform(low, impairment.delay + impairment.jitter)
        if delay <= 0:
            self.send(direction, frame)
            return
        self.queued[id(direction)] = waiting + 1
        self.sequence += 1
        heapq.heappush(self.due, (now + delay, self.sequence, direction, frame))

    def send(self, direction, frame):
        try:
            os.write(direction.sink, frame)
            direction.frames += 1
        except BlockingIOError:
            # The device's queue is full: dropped, as a full NIC ring
            # drops.
            direction.overflow += 1
        except OSError:
            # The device is down (EIO), as a host's eth0 is until its
            # caller sets it up: dropped, as by a link that is down.
            direction.lost += 1

    def release(self, now):
        """Sends every frame now due; how long until the next is."""
        while self.due and self.due[0][0] <= now:
            _, _, direction, frame = heapq.heappop(self.due)
            self.queued[id(direction)] -= 1
            self.send(direction, frame)
        return max(0.0, self.due[0][0] - now) if self.due else None

    # Commands

    def command(self, line):
        words = line.split()
        if not words:
            return "error empty command"
        verb, args = words[0], words[1:]
        try:
            if verb == "add" and len(args) == 5:
                self.add(*args)
                return "ok"
            if verb == "impair" and len(args) == 4:
                delay, jitter, loss = float(args[1]) / 1000, float(args[2]) / 1000, float(args[3])
                if delay < 0 or jitter < 0 or not 0 <= loss <= 1:
                    return "error delay and jitter are at least 0, loss is in [0, 1]"
                self.link(args[0]).impairment = Impairment(delay, jitter, loss)
                return "ok"
            if verb == "clear" and len(args) == 1:
                self.link(args[0]).impairment = Impairment()
                return "ok"
            if verb == "stats" and len(args) == 1:
                link = self.link(args[0])
                both = (link.outgoing, link.incoming)
                queued = sum(self.queued.get(id(direction), 0) for direction in both)
                return (
                    f"ok frames={sum(d.frames for d in both)} lost={sum(d.lost for d in both)} "
                    f"overflow={sum(d.overflow for d in both)} queued={queued}"
                )
        except (KeyError, ValueError, OSError) as error:
            return f"error {verb}: {error}".replace("\n", " ")
        return f"error unknown command: {line.strip()}"

    def link(self, host):
        try:
            return self.links[host]
        except KeyError:
            raise KeyError(f"no host {host}") from None

    def read_commands(self):
        """Answers every whole line on stdin; False once it is closed."""
        chunk = os.read(sys.stdin.fileno(), 4096)
        if not chunk:
            return False
        self.commands += chunk
        while b"\n" in self.commands:
            line, self.commands = self.commands.split(b"\n", 1)
            answer = self.command(line.decode(errors="replace"))
            sys.stdout.write(answer + "\n")
            sys.stdout.flush()
        return True

    def run(self):
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
        timeout = None
        while True:
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    if not self.read_commands():
                        return
                else:
                    link, direction = key.data
                    self.receive(link, direction, time.monotonic())
            timeout = self.release(time.monotonic())


def ip(*args):
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def main():
    emulator = Emulator()
    try:
        emulator.run()
    except KeyboardInterrupt:
        pass
    # Exiting closes every device's descriptor: the kernel removes them.


if __name__ == "__main__":
    main()
