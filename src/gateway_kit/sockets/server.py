"""`SocketServer`: the gateway's Socket.IO endpoint (python-socketio, ASGI), at
``{prefix}/socket.io``.

- ``connect`` takes ``auth={"ticket": ...}``: a one-time ticket (`SocketTickets`), consumed
  atomically, bound to its user, credential and (for a browser) Origin. Origins are checked
  against an explicit allowlist (by default the gateway's own origin). A refused connect says
  why in its ``connect_error`` message. Clients pass ``auth`` as a function, so that every
  reconnect fetches a new ticket.
- ``subscribe {"stream", "after"}`` is authorized like every read (`authorize_subscription`),
  joins the stream's room, replays what the client missed from the log, then goes live without
  gap or duplicate (the rule of the SSE streams: the live feed is registered before the replay
  reads, and what both hold is sent once). Acknowledged with ``{"ok": true}`` or
  ``{"ok": false, "error", "message"}``; events arrive as ``event`` messages holding envelopes.
  ``unsubscribe {"stream"}`` leaves.
- Presence: every (un)subscription and disconnect sends the stream's room a ``presence``
  message (who watches it now, from every process); ``GET {prefix}/streams/{s}/presence``.
- A revoked token, or a Flask login that logged out, loses its sockets within a check's time,
  whichever process holds them.
- While the database cannot be reached, a connect is refused and a subscribe acknowledged with
  the error ``database_unavailable`` (try again); connections already open stay, and what the
  outage kept from the presence rows is written once the database is back.

Several processes: each process delivers the log's events to its own connections (the log
crosses processes by itself); what must reach connections of other processes (presence
messages, disconnects) goes through python-socketio's Redis manager when `redis_url` is given.

Longer than most modules, on purpose: its handlers (connect, subscribe, unsubscribe, disconnect
and the periodic credential check) share one table of connections and their turns, and each
reads as the protocol's answer to one message; admission is `gateway_kit.identity.admission`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import socketio

from ..coordination.periodic import Periodic
from ..coordination.tasks import TaskSet
from ..exceptions import DatabaseUnavailable
from ..hooks import Plugins
from ..hooks.manager import NOT_YOURS
from ..http.errors import DATABASE_UNAVAILABLE, FORBIDDEN, HTTPError
from ..http.routing import INVALID_STREAM, unfit_stream
from ..identity.admission import CREDENTIAL_ENDED, AdmissionRefused, SocketAdmission
from ..identity.credentials import CredentialView, credentials_of
from ..identity.logins import EndedLogins
from ..identity.tickets import SocketTickets
from ..log import EventLog
from ..log.event import MAX_SEQ
from ..principal import Principal
from ..settings import (
    DEFAULT_MAX_PAGE_BYTES,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_REDIS_CHANNEL,
    DEFAULT_SEND_TIMEOUT,
)
from ..streams.request import Cursor, parse_cursor
from ..streams.service import StreamService
from .connection import Connection, SubscriptionRefused
from .feeds import ExtraEvents, RoomFeeds, room_of
from .outbox import Outboxes
from .packets import GatewayPacket
from .presence import Presence

logger = logging.getLogger(__name__)

SOCKETIO_PATH = "/socket.io"
DEFAULT_CHECK_INTERVAL = 1.0  # seconds between looks for revoked credentials
BAD_SUBSCRIPTION = 'send {"stream": "...", "after": seq}'
NEGATIVE_CURSOR = "after must not be negative"
NOT_CONNECTED = "this connection has no principal"
UNAVAILABLE = "the database cannot be reached right now; try again shortly"


def _nothing() -> None:
    return None


class SocketServer:
    """:param log: the log the streams are read from.
    :param plugins: whose `authorize_subscription` decides who reads what.
    :param streams: the stream machinery (its live reader is shared with the SSE streams).
    :param tickets: the ticket store.
    :param prefix: the gateway's prefix; the endpoint is at ``{prefix}/socket.io``.
    :param origins: the browser origins allowed to connect; None: the gateway's own origin
        only. Clients that send no ``Origin`` (a CLI) are not asked.
    :param redis_url: a Redis server for what crosses processes (python-socketio's
        `AsyncRedisManager`); None for one process.
    :param redis_channel: the Redis channel of this deployment's processes.
    :param check_interval: seconds between looks for revoked credentials.
    :param ended_logins: where ended cookie logins are known; the cookie resolver's own, so
        that a logout noted in this process is seen at once (a new one reads the database).
    :param queue_size: messages one connection may have waiting; beyond, it leaves its rooms
        and catches up from the log once its client has read them.
    :param send_timeout: seconds a connection may take to send what it holds (a page and
        `queue_size` at most) before it is closed.
    :param max_page_bytes: how much of events' data one replay page holds, besides one event.
    :param extra_events: the messages, (name, payload) each, an event's envelope makes besides
        its ``event`` message (sent right after it: the legacy clients' approval messages).
    """

    def __init__(
        self,
        *,
        log: EventLog,
        plugins: Plugins,
        streams: StreamService,
        tickets: SocketTickets,
        prefix: str = "/gateway",
        origins: Sequence[str] | None = None,
        redis_url: str | None = None,
        redis_channel: str = DEFAULT_REDIS_CHANNEL,
        check_interval: float = DEFAULT_CHECK_INTERVAL,
        ended_logins: EndedLogins | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        extra_events: ExtraEvents | None = None,
    ) -> None:
        self.log = log
        self.plugins = plugins
        self.streams = streams
        self.tickets = tickets
        self.ended_logins = ended_logins if ended_logins is not None else EndedLogins(log)
        self.credentials: CredentialView = credentials_of(log)
        self.admission = SocketAdmission(
            tickets=tickets,
            credentials=self.credentials,
            ended_logins=self.ended_logins,
            origins=origins,
            prefix=prefix,
        )
        process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.presence = Presence(log, process_id)
        manager = (
            socketio.AsyncRedisManager(redis_url, channel=redis_channel) if redis_url else None
        )
        self.sio = socketio.AsyncServer(
            async_mode="asgi",
            client_manager=manager,
            # The Origin is checked at connect, against `origins`, so that a refusal says why
            # (engine.io's own check refuses the transport with no reason a client sees).
            # Connections are admitted by ticket, never by cookie: no credentials for CORS.
            cors_allowed_origins="*",
            cors_credentials=False,
            logger=False,
            engineio_logger=False,
            serializer=GatewayPacket,  # a cursor of any number of digits is answered
        )
        self.app = socketio.ASGIApp(self.sio, socketio_path=prefix.strip("/") + SOCKETIO_PATH)
        self.prefix = prefix
        self.connections: dict[str, Connection] = {}
        self._unwatch: dict[str, Callable[[], None]] = {}
        self._closing = TaskSet()
        # A presence write failed (the database was away): this process's rows are written
        # again, from what its connections hold, at the next check.
        self._presence_stale = False
        self.outboxes = Outboxes(self.sio, limit=queue_size, timeout=send_timeout)
        self.rooms = RoomFeeds(
            log,
            lambda: streams.state().hub,
            self.sio,
            self.outboxes,
            max_page_bytes=max_page_bytes,
            extra_events=extra_events,
        )
        self.checks = Periodic(self._check_credentials, check_interval, "gateway-kit-sockets")
        self.sio.on("connect", self.on_connect)
        self.sio.on("disconnect", self.on_disconnect)
        self.sio.on("subscribe", self.on_subscribe)
        self.sio.on("unsubscribe", self.on_unsubscribe)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # --- connecting ---------------------------------------------------------------------

    async def on_connect(self, sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        try:
            await self._connect(sid, environ, auth)
        except DatabaseUnavailable:
            self.connections.pop(sid, None)
            raise socketio.exceptions.ConnectionRefusedError(
                UNAVAILABLE, {"error": DATABASE_UNAVAILABLE}
            ) from None

    async def _connect(self, sid: str, environ: dict[str, Any], auth: Any) -> None:
        try:
            admitted = await self.admission.admit(environ, auth)
        except AdmissionRefused as refused:
            raise socketio.exceptions.ConnectionRefusedError(
                refused.message, {"error": refused.code}
            ) from None
        principal = admitted.principal
        connection = Connection(sid, uuid.uuid4().hex, principal, admitted.since)
        if principal.credential_id is not None:
            loop = asyncio.get_running_loop()

            def ended() -> None:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(self._close_ended, connection)

            self._unwatch[sid] = self.credentials.watch(principal.credential_id, ended)
        try:
            holds = (await asyncio.to_thread(self._still_valid, [connection]))[0]
        except DatabaseUnavailable as exc:
            holds, refusal = False, (str(exc), {"error": DATABASE_UNAVAILABLE})
        else:
            refusal = (CREDENTIAL_ENDED, {"error": "credential_ended"})
        if not holds:
            self._unwatch.pop(sid, _nothing)()
            raise socketio.exceptions.ConnectionRefusedError(*refusal)
        self.connections[sid] = connection
        await asyncio.to_thread(self.presence.connected, connection.connection_id, principal)
        self.checks.start()

    async def on_disconnect(self, sid: str, *reason: Any) -> None:
        self._unwatch.pop(sid, _nothing)()
        connection = self.connections.pop(sid, None)
        if connection is None:
            return
        streams = list(connection.streams)  # requests in flight may still change the set
        for stream in streams:
            await self.rooms.leave(sid, stream)
        async with connection.lock:  # after any presence write of a request in flight
            try:
                await asyncio.to_thread(self.presence.disconnected, connection.connection_id)
            except DatabaseUnavailable:
                self._presence_stale = True
                return
        for stream in streams:
            with contextlib.suppress(DatabaseUnavailable):
                await self._announce(stream)

    def _still_valid(self, connections: list[Connection]) -> list[bool]:
        """For each connection, whether its credential still holds (from memory)."""
        return [self.admission.holds(c.principal, c.since) for c in connections]

    def _close_ended(self, connection: Connection) -> None:
        """Close a connection whose credential just ended (called in its loop)."""
        if self.connections.get(connection.sid) is connection:
            self._closing.start(self._close(connection.sid))

    async def _close(self, sid: str) -> None:
        logger.info("closing socket %s: its credential was revoked or logged out", sid)
        await self.sio.disconnect(sid, ignore_queue=True)

    async def _check_credentials(self) -> None:
        """Disconnect this process's connections whose credential was revoked or logged out
        (should a notice have been missed), and keep this process's presence alive."""
        # A lease that had run out (the database was away) may have let other processes
        # delete this process's rows meanwhile.
        await asyncio.to_thread(self.presence.keep_alive)
        if self.presence.lapsed() or self._presence_stale:
            self._presence_stale = False
            try:
                await asyncio.to_thread(self.presence.restore, self._presence_rows())
            except BaseException:
                self._presence_stale = True
                raise
        connections = list(self.connections.values())
        holds = await asyncio.to_thread(self._still_valid, connections)
        ended = [c.sid for c, ok in zip(connections, holds, strict=True) if not ok]
        for sid in ended:
            await self._close(sid)

    def _presence_rows(self) -> list[tuple[str, Principal, set[str]]]:
        return [(c.connection_id, c.principal, set(c.streams)) for c in self.connections.values()]

    # --- subscriptions ------------------------------------------------------------------

    async def on_subscribe(self, sid: str, data: Any = None, *extra: Any) -> dict[str, Any]:
        try:
            return await self._subscribe(sid, data)
        except DatabaseUnavailable:
            self._presence_stale = True
            return SubscriptionRefused(DATABASE_UNAVAILABLE, UNAVAILABLE).ack()

    async def _subscribe(self, sid: str, data: Any) -> dict[str, Any]:
        try:
            connection = self._connection(sid)
            stream, after = self._subscription(data)
        except SubscriptionRefused as refused:
            return refused.ack()
        turn = connection.take_turn(stream)
        try:
            if not await self.plugins.authorize_subscription(connection.principal, stream):
                return SubscriptionRefused(FORBIDDEN, NOT_YOURS.format(stream=stream)).ack()
            if not connection.newest(stream, turn):
                return {"ok": True}  # a later (un)subscribe of the stream has the last word
            connection.streams.add(stream)
            try:
                await self.rooms.join(
                    sid, stream, after, wanted=lambda: self._watching(connection, stream)
                )
            except DatabaseUnavailable:
                if connection.newest(stream, turn):
                    connection.streams.discard(stream)  # not subscribed: the client asks again
                raise
            finally:
                await self._settle(connection, stream)
            return {"ok": True}
        finally:
            connection.end_turn(stream, turn)

    async def on_unsubscribe(self, sid: str, data: Any = None, *extra: Any) -> dict[str, Any]:
        try:
            connection = self._connection(sid)
            stream = self._stream(data)
        except SubscriptionRefused as refused:
            return refused.ack()
        turn = connection.take_turn(stream)
        try:
            connection.streams.discard(stream)
            await self._settle(connection, stream)
            return {"ok": True}
        except DatabaseUnavailable:
            # Unsubscribed all the same (no event reaches it); the row goes once it is back.
            self._presence_stale = True
            return SubscriptionRefused(DATABASE_UNAVAILABLE, UNAVAILABLE).ack()
        finally:
            connection.end_turn(stream, turn)

    async def _settle(self, connection: Connection, stream: str) -> None:
        """Bring the stream's room and presence rows to what the connection's subscriptions
        say now (requests that overlapped may have left either behind), and tell the room."""
        if not self._watching(connection, stream):
            await self.rooms.leave(connection.sid, stream)
        async with connection.lock:
            if self._watching(connection, stream):
                await asyncio.to_thread(self.presence.subscribed, connection.connection_id, stream)
            else:
                await asyncio.to_thread(
                    self.presence.unsubscribed, connection.connection_id, stream
                )
        await self._announce(stream)

    def _watching(self, connection: Connection, stream: str) -> bool:
        """Whether the connection is still here and subscribed to the stream."""
        return stream in connection.streams and self.connections.get(connection.sid) is connection

    def _connection(self, sid: str) -> Connection:
        connection = self.connections.get(sid)
        if connection is None:
            raise SubscriptionRefused("not_connected", NOT_CONNECTED)
        return connection

    def _stream(self, data: Any) -> str:
        """The stream a (un)subscribe names, if the log can hold it: a name the database cannot
        store (a lone surrogate, a NUL) is refused here rather than failing in a write."""
        if not isinstance(data, dict) or not isinstance(data.get("stream"), str):
            raise SubscriptionRefused("invalid_subscription", BAD_SUBSCRIPTION)
        stream: str = data["stream"]
        unfit = unfit_stream(stream)
        if unfit is not None:
            raise SubscriptionRefused(INVALID_STREAM, unfit)
        return stream

    def _subscription(self, data: Any) -> tuple[str, Cursor]:
        stream = self._stream(data)
        after = data.get("after", 0)
        if isinstance(after, int) and not isinstance(after, bool):
            # Compared as a number: Python cannot print one of more than a few thousand digits.
            # Beyond any seq it is beyond the head, and gets a reset, as over SSE.
            if after < 0:
                raise SubscriptionRefused("invalid_cursor", NEGATIVE_CURSOR)
            return stream, Cursor(min(after, MAX_SEQ + 1))
        if not isinstance(after, str):
            raise SubscriptionRefused("invalid_cursor", BAD_SUBSCRIPTION)
        try:
            cursor = parse_cursor(after, name="after", epoch=self.log.epoch)
        except HTTPError as exc:
            raise SubscriptionRefused(exc.code, exc.message) from None
        return stream, cursor

    async def _announce(self, stream: str) -> None:
        watching = await asyncio.to_thread(self.presence.watching, stream)
        await self.sio.emit("presence", watching, room=room_of(stream))

    # --- lifespan -----------------------------------------------------------------------

    async def startup(self) -> None:
        self.checks.start()

    async def shutdown(self) -> None:
        await self.checks.stop()
        await self.rooms.close()
        for sid in list(self.connections):
            with contextlib.suppress(Exception):
                await self.sio.disconnect(sid, ignore_queue=True)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.presence.close)
