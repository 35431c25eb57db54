"""The Redis Streams ends: a source read through a consumer group, a sink of XADDs.

``redis-stream://[:password@]host:port/db`` (``rediss-stream://`` for TLS,
with redis-py's URL options such as ``ssl_ca_certs``). The source's options:
``stream`` and ``group`` (both needed), ``consumer`` (default ``dejaq``: keep
it stable, its pending entries come first after a restart) and ``start``
(where a group made by the bridge starts, default ``0``: the whole stream).
The sink's: ``stream``, and ``maxlen`` (trim to about that many entries;
default none). A batch is added by one script (``XADD_BATCH``): its entries
land together, and the script's reply confirms them all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source
from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

log = logging.getLogger("dejaq.bridges")

SCHEMES = {"redis-stream": "redis", "rediss-stream": "rediss"}
PAYLOAD = b"payload"
SOURCE_OPTIONS = frozenset({"stream", "group", "consumer", "start"})
SINK_OPTIONS = frozenset({"stream", "maxlen"})
# A batch of entries added by one script call: one command and one reply, not
# one of each per entry (redis-py's cost a command is most of the sink's CPU).
# ARGV: maxlen (0: none), then per entry its number of fields and its fields.
XADD_BATCH = """
local maxlen = tonumber(ARGV[1])
local i, added = 2, 0
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local args = {KEYS[1]}
  if maxlen > 0 then
    args[2], args[3], args[4] = 'MAXLEN', '~', maxlen
  end
  args[#args + 1] = '*'
  for j = 1, 2 * n do
    args[#args + 1] = ARGV[i + j]
  end
  redis.call('XADD', unpack(args))
  i = i + 1 + 2 * n
  added = added + 1
end
return added
"""
# Errors of a server gone or going (a restart, a load from disk): the bridge reconnects.
DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError)
T = TypeVar("T")


def client_url(url: str) -> str:
    """``url`` with redis-py's own scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise InvalidArgument(f"{redact(url)}: not a redis-stream:// or rediss-stream:// URL")
    return f"{SCHEMES[scheme.lower()]}://{rest}"


def _options(options: Mapping[str, Any], allowed: frozenset[str], needed: Sequence[str]) -> None:
    unknown = set(options) - allowed
    if unknown:
        raise InvalidArgument(f"unknown option(s) {sorted(unknown)}: expected {sorted(allowed)}")
    for name in needed:
        value = options.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"{name}: wants a non-empty string, not {value!r}")


class _Connected:
    def __init__(self, url: str) -> None:
        self.url = client_url(url)
        self.where = redact(url)
        self.redis: aioredis.Redis | None = None

    async def _call(self, call: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        if self.redis is None:
            raise EndpointDown(f"{self.where}: not open")
        try:
            return await call(self.redis)
        except DOWN as exc:
            raise EndpointDown(f"{self.where}: {redact(str(exc))}") from exc

    async def _connect(self) -> aioredis.Redis:
        await self.close()
        self.redis = aioredis.Redis.from_url(
            self.url, socket_connect_timeout=5, socket_keepalive=True, health_check_interval=10
        )
        await self._call(lambda r: r.ping())
        return self.redis

    async def close(self) -> None:
        if self.redis is not None:
            redis, self.redis = self.redis, None
            try:
                await redis.aclose()
            except DOWN:
                pass  # a broken connection has nothing left to release


class RedisStreamSource(_Connected, Source):
    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        _options(options, SOURCE_OPTIONS, ("stream", "group"))
        super().__init__(url)
        self.stream = str(options["stream"])
        self.group = str(options["group"])
        self.consumer = str(options.get("consumer", "dejaq"))
        self.start = str(options.get("start", "0"))
        self._backlog = True  # entries delivered to this consumer before and not acked

    async def open(self) -> None:
        await self._connect()
        await self._make_group()
        self._backlog = True

    async def _make_group(self) -> None:
        try:
            await self._call(
                lambda r: r.xgroup_create(self.stream, self.group, id=self.start, mkstream=True)
            )
        except redis_errors.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(self, limit: int, wait_ms: int) -> Sequence[Inbound]:
        if self._backlog:
            got = await self._read("0", limit, None)
            if got:
                return got
            self._backlog = False
        return await self._read(">", limit, wait_ms)

    async def _read(self, start: str, limit: int, wait_ms: int | None) -> list[Inbound]:
        streams: dict[Any, Any] = {self.stream: start}
        try:
            answer: Any = await self._call(
                lambda r: r.xreadgroup(self.group, self.consumer, streams, limit, wait_ms or None)
            )
        except redis_errors.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream or group went (a server restarted without its data): made again.
            await self._make_group()
            return []
        out: list[Inbound] = []
        gone: list[str] = []
        for _name, entries in answer or ():
            for entry_id, fields in entries:
                sid = entry_id.decode()
                if fields is None:
                    gone.append(sid)
                    continue
                payload = fields.get(PAYLOAD, b"")
                text = {
                    k.decode(errors="replace"): v.decode(errors="replace")
                    for k, v in fields.items()
                    if k != PAYLOAD
                }
                out.append(Inbound(payload, text, sid, sid))
        if gone:
            # Deleted from the stream while pending: nothing is left to carry.
            log.warning("%s: entries %s were deleted before the bridge took them", self.where, gone)
            await self._call(lambda r: r.xack(self.stream, self.group, *gone))
        return out

    async def ack(self, messages: Sequence[Inbound]) -> None:
        if messages:
            ids = [m.source_id for m in messages]
            await self._call(lambda r: r.xack(self.stream, self.group, *ids))

    async def lag(self) -> int | None:
        groups = await self._call(lambda r: r.xinfo_groups(self.stream))
        for group in groups:
            if _text(group.get("name")) == self.group:
                lag = group.get("lag")
                return None if lag is None else int(lag)
        return None


class RedisStreamSink(_Connected, Sink):
    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        _options(options, SINK_OPTIONS, ("stream",))
        super().__init__(url)
        self.stream = str(options["stream"])
        maxlen = options.get("maxlen")
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 1):
            raise InvalidArgument(f"maxlen: wants a whole number above 0, not {maxlen!r}")
        self.maxlen: int | None = maxlen
        self._xadd: Any = None

    async def open(self) -> None:
        redis = await self._connect()
        self._xadd = redis.register_script(XADD_BATCH)

    async def publish(self, messages: Sequence[Outbound]) -> None:
        if not messages:
            return
        args: list[Any] = [self.maxlen or 0]
        for m in messages:
            args += (len(m.fields) + 1, PAYLOAD, m.payload)
            for name, value in m.fields.items():
                args += (name, value)
        xadd = self._xadd
        await self._call(lambda r: xadd(keys=[self.stream], args=args, client=r))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
