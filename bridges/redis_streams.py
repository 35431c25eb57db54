"""The Redis Streams ends: a source read through a consumer group, a sink of XADDs.

``redis-stream://[:password@]host:port/db`` (``rediss-stream://`` for TLS,
with redis-py's URL options such as ``ssl_ca_certs``). The source's options:
``stream`` and ``group`` (both needed), ``consumer`` (default ``dejaq``: keep
it stable, its pending entries come first after a restart) and ``start``
(where a group made by the bridge starts, default ``0``: the whole stream).
The sink's: ``stream``, and ``maxlen`` (trim to about that many entries;
default none). A batch is added by one script (``XADD_BATCH``): its entries
land together, and the script's reply confirms them all.

The bridge's CPU a message is most of what limits it, so a batch crosses
redis-py in as few pieces as it can: the read's reply is taken as the parser
made it (no dict of bytes an entry), and the sink's and the ack's many arguments go
as one msgpack argument that the script unpacks (redis-py frames each
argument in Python).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from itertools import chain
from typing import Any, TypeVar

import msgspec
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
# one of each per entry. ARGV[1]: maxlen (0: none); ARGV[2]: the entries as
# one msgpack array, each entry the array of its fields and values in order.
XADD_BATCH = """
local maxlen = tonumber(ARGV[1])
local entries = cmsgpack.unpack(ARGV[2])
for _, fields in ipairs(entries) do
  local args = {KEYS[1]}
  if maxlen > 0 then
    args[2], args[3], args[4] = 'MAXLEN', '~', maxlen
  end
  args[#args + 1] = '*'
  local at = #args
  for j = 1, #fields do
    args[at + j] = fields[j]
  end
  redis.call('XADD', unpack(args))
end
return #entries
"""
# Acknowledges the entry ids of ARGV[2] (a msgpack array) in group ARGV[1],
# 500 a call (the Lua stack bounds a call's arguments).
XACK_BATCH = """
local ids = cmsgpack.unpack(ARGV[2])
local acked = 0
for i = 1, #ids, 500 do
  local last = math.min(i + 499, #ids)
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids, i, last))
end
return acked
"""
# Errors of a server gone or going (a restart, a load from disk): the bridge reconnects.
DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError)
T = TypeVar("T")
_PACK = msgspec.msgpack.Encoder().encode


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
        self._xack: Any = None

    async def open(self) -> None:
        redis = await self._connect()
        # The reply as the parser made it: ``_inbound`` reads each entry's
        # fields where redis-py would make a dict of them first.
        redis.set_response_callback("XREADGROUP", _as_parsed)
        self._xack = redis.register_script(XACK_BATCH)
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
        for entries in _streams(answer):
            for entry_id, flat in entries:
                if flat is None:
                    gone.append(entry_id.decode())
                else:
                    out.append(_inbound(entry_id, flat))
        if gone:
            # Deleted from the stream while pending: nothing is left to carry.
            log.warning("%s: entries %s were deleted before the bridge took them", self.where, gone)
            await self._ack(gone)
        return out

    async def ack(self, messages: Sequence[Inbound]) -> None:
        if messages:
            await self._ack([m.source_id for m in messages])

    async def _ack(self, ids: list[str]) -> None:
        xack, args = self._xack, [self.group, _PACK(ids)]
        await self._call(lambda r: xack(keys=[self.stream], args=args, client=r))

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
        entries = [
            ["payload", _as_str(m.payload), *chain.from_iterable(m.fields.items())]
            for m in messages
        ]
        xadd, args = self._xadd, [self.maxlen or 0, _PACK(entries)]
        await self._call(lambda r: xadd(keys=[self.stream], args=args, client=r))


def _as_str(raw: bytes) -> msgspec.Raw:
    """``raw`` as a msgpack str of its bytes: Redis's ``cmsgpack`` reads no
    bin type, and a str is any bytes to it."""
    n = len(raw)
    if n < 32:
        head = bytes((0xA0 | n,))
    elif n < 0x100:
        head = b"\xd9" + n.to_bytes(1, "big")
    elif n < 0x10000:
        head = b"\xda" + n.to_bytes(2, "big")
    else:
        head = b"\xdb" + n.to_bytes(4, "big")
    return msgspec.Raw(head + raw)


def _as_parsed(response: Any, **options: Any) -> Any:
    """A reply as the parser made it (a response callback)."""
    return response


def _streams(answer: Any) -> Any:
    """Each stream's entries of an XREADGROUP reply (a list of [name, entries]
    in RESP2, a map in RESP3; nothing when the read timed out)."""
    if not answer:
        return ()
    if isinstance(answer, dict):
        return answer.values()
    return (entries for _name, entries in answer)


def _inbound(entry_id: bytes, flat: list[bytes]) -> Inbound:
    """The message of a stream entry: ``flat`` is its fields and values in turn
    (the last of a name given twice wins)."""
    payload = b""
    text: dict[str, str] = {}
    pairs = iter(flat)
    for name, value in zip(pairs, pairs, strict=True):
        if name == PAYLOAD:
            payload = value
        else:
            text[_NAMES.get(name) or _name(name)] = value.decode(errors="replace")
    source_id = entry_id.decode()
    return Inbound(payload, text, source_id, source_id)


# Field names as text, by their bytes: the same few names come in every entry.
_NAMES: dict[bytes, str] = {}
_NAMES_AT_MOST = 4096


def _name(raw: bytes) -> str:
    name = raw.decode(errors="replace")
    if len(_NAMES) < _NAMES_AT_MOST:
        _NAMES[raw] = name
    return name


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
