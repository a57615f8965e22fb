"""The servers' listening sockets."""

from __future__ import annotations

import asyncio
import socket

from gateway_kit.cli.sockets import listen


def test_accepted_connections_get_tcp_nodelay() -> None:
    """Regression: a socket not made as TCP kept Nagle on, delaying small answers ~40 ms."""
    sock = listen("127.0.0.1", 0)

    async def main() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            result = await asyncio.wait_for(accepted, 5)
            writer.close()
            await writer.wait_closed()
            return result

    assert asyncio.run(main()) != 0
