"""A TCP relay process in front of one chunkd replica: clients dial the
relay, the relay dials the replica and passes every byte both ways.
SIGUSR1 cuts every connection it carries at once (both sides, as a broken
network path would), which is the soak's "client connection cut" fault;
the relay keeps listening, so clients reconnect through it.

    python relay.py LISTEN_PORT UPSTREAM_PORT

It prints "ready" once listening; SIGTERM ends it."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import sys
from typing import Set


class Relay:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: Set[asyncio.StreamWriter] = set()
        self.cuts = 0

    async def serve(self, client_r: asyncio.StreamReader,
                    client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
        except (OSError, asyncio.TimeoutError):
            client_w.close()  # the replica is down: the client sees a reset
            return
        pair = {client_w, up_w}
        self.writers |= pair
        try:
            await asyncio.gather(self._pump(client_r, up_w), self._pump(up_r, client_w))
        finally:
            self.writers -= pair
            for w in pair:
                w.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except (OSError, RuntimeError):
            writer.close()

    def cut(self) -> None:
        """Every connection ends now, with a reset rather than a FIN."""
        self.cuts += 1
        for w in list(self.writers):
            sock = w.get_extra_info("socket")
            try:
                if sock is not None:
                    # SO_LINGER 0: close() sends RST.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass  # this connection has just closed by itself
            w.transport.abort()
        self.writers.clear()


async def main(listen_port: int, upstream_port: int) -> None:
    relay = Relay(upstream_port)
    server = await asyncio.start_server(relay.serve, "127.0.0.1", listen_port,
                                        reuse_address=True)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGUSR1, relay.cut)
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    print("ready", flush=True)
    async with server:
        await stop
    relay.cut()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
