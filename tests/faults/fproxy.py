#!/usr/bin/env python3
"""fproxy.py -- the fault harness's TCP proxy (docs/reliability.md): sits
between the clients and each server, and on command drops, delays, cuts
the replies of, or black-holes its connections.

  fproxy.py --log FAULTS.LOG --listen HOST[,HOST...]
            --route NAME=UPHOST:UPPORT [--route ...]

Each route listens on one port, the same on every HOST of --listen (the
root side of each client namespace's veth, and 127.0.0.1), and forwards
every connection to its upstream. The first line on stdout is
"ready control=PORT NAME=PORT ...". The control port (127.0.0.1) takes one
command a line and answers one line, "ok ..." or "err ...":

  mode NAME pass          forward everything (the start)
  mode NAME delay MS      hold every chunk, either way, MS ms
  mode NAME cut           forward half of the next reply of each
                          connection, then reset it (new ones too)
  mode NAME blackhole     forward nothing either way, keep every
                          connection open and accept new ones; what was
                          held is delivered when the mode changes back, as
                          TCP's retransmissions would after a black hole
  drop NAME               reset every connection of the route now
  upstream NAME HOST:PORT later connections go there (a restarted server)
  mark start|end KIND TARGET
                          appends "t_ns start|end KIND TARGET" (the
                          CLOCK_MONOTONIC time) to FAULTS.LOG: the schedule's
                          log for check.py
  conns NAME              how many connections the route has open

Resets are real (SO_LINGER 0). A proxy that loses its control connection
goes on; it ends on SIGTERM or when its stdin closes (the harness's shell
is gone), so it never outlives the run.
"""
import argparse
import asyncio
import signal
import socket
import struct
import sys
import time


class Route:
    def __init__(self, name, up):
        self.name = name
        self.up = up
        self.mode = "pass"
        self.delay = 0.0
        self.changed = asyncio.Event()
        self.conns = set()

    def set_mode(self, mode, delay=0.0):
        self.mode = mode
        self.delay = delay
        self.changed.set()
        self.changed = asyncio.Event()

    async def passable(self):
        while self.mode == "blackhole":
            await self.changed.wait()


def reset(writer):
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
        writer.transport.abort()
    except (OSError, RuntimeError):
        pass


class Conn:
    def __init__(self, route, cr, cw):
        self.route = route
        self.cr, self.cw = cr, cw
        self.ur = self.uw = None

    def kill(self):
        reset(self.cw)
        if self.uw is not None:
            reset(self.uw)

    async def pump(self, reader, writer, down):
        r = self.route
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    writer.write_eof()
                    return
                due = time.monotonic() + (r.delay if r.mode == "delay" else 0)
                await r.passable()
                if r.mode == "delay":
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                if r.mode == "cut" and down:
                    writer.write(data[:max(1, len(data) // 2)])
                    await writer.drain()
                    self.kill()
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, RuntimeError, asyncio.IncompleteReadError):
            self.kill()

    async def run(self):
        r = self.route
        r.conns.add(self)
        try:
            await r.passable()
            host, port = r.up
            try:
                self.ur, self.uw = await asyncio.wait_for(
                    asyncio.open_connection(host, port), 2)
            except (OSError, asyncio.TimeoutError):
                reset(self.cw)  # a dead server: the client sees a reset
                return
            await asyncio.gather(self.pump(self.cr, self.uw, False),
                                 self.pump(self.ur, self.cw, True))
        finally:
            r.conns.discard(self)
            self.kill()


async def control(reader, writer, routes, log):
    while True:
        line = await reader.readline()
        if not line:
            break
        p = line.decode().split()
        reply = "ok"
        try:
            if p[0] == "mode":
                r = routes[p[1]]
                if p[2] == "delay":
                    r.set_mode("delay", int(p[3]) / 1000.0)
                elif p[2] in ("pass", "cut", "blackhole"):
                    r.set_mode(p[2])
                else:
                    reply = "err unknown mode %s" % p[2]
            elif p[0] == "drop":
                r = routes[p[1]]
                n = len(r.conns)
                for c in list(r.conns):
                    c.kill()
                reply = "ok %d" % n
            elif p[0] == "upstream":
                host, port = p[2].rsplit(":", 1)
                routes[p[1]].up = (host, int(port))
            elif p[0] == "mark" and len(p) == 4:
                log.write("%d %s %s %s\n" % (time.monotonic_ns(), p[1], p[2],
                                             p[3]))
                log.flush()
            elif p[0] == "conns":
                reply = "ok %d" % len(routes[p[1]].conns)
            else:
                reply = "err unknown command"
        except (IndexError, KeyError, ValueError) as e:
            reply = "err %r" % (e,)
        writer.write((reply + "\n").encode())
        await writer.drain()
    writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--route", action="append", required=True)
    a = ap.parse_args()
    log = open(a.log, "a")
    routes = {}
    ready = []
    hosts = a.listen.split(",")
    for spec in a.route:
        name, up = spec.split("=", 1)
        uh, up_port = up.rsplit(":", 1)
        r = Route(name, (uh, int(up_port)))
        routes[name] = r

        def accept(cr, cw, r=r):
            asyncio.ensure_future(Conn(r, cr, cw).run())

        for _ in range(20):
            servers = []
            try:
                s = await asyncio.start_server(accept, hosts[0], 0)
                port = s.sockets[0].getsockname()[1]
                servers.append(s)
                for h in hosts[1:]:
                    servers.append(await asyncio.start_server(accept, h, port))
                break
            except OSError:
                for s in servers:
                    s.close()
        else:
            raise SystemExit("fproxy: no port free on every host of %s"
                             % a.listen)
        ready.append("%s=%d" % (name, port))
    cs = await asyncio.start_server(
        lambda r, w: control(r, w, routes, log), "127.0.0.1", 0)
    print("ready control=%d %s" % (cs.sockets[0].getsockname()[1],
                                   " ".join(ready)), flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(sys.stdin.fileno(), stop.set)  # stdin closed: end
    await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
