"""Hot-path batch codecs: columnar FlatBuffers (core/batches.py) vs plain protobuf.

DESIGN.md ("Wire") asks for this measurement. Each codec encodes a batch from
Python lists (what the producer holds) and decodes it back to Python values
(what the broker and the consumer use), for batches of 100 and 1,000 messages:
100-byte payloads, 26-character ids, int64 timestamps. Two shapes are measured:

- messages: a Produce batch (timestamps, ids, payloads);
- deliveries: a delivery batch (timestamps, versions, delivery counts, ids,
  payloads, one lease expiry), decoded into ``dejaq.core.model.Delivery``.

The protobuf side is the equivalent message with repeated fields, declared here
at run time (proto/ has no such message, and this benchmark changes nothing
outside benchmarks/). Timings are the best of several runs of ``timeit``, with
the garbage collector left on as in a real process.

    python benchmarks/wire_codec.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import flatbuffers
import google.protobuf
from common import save
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal import api_implementation

from dejaq.core.model import Delivery
from dejaq.core.wire.batches import (
    decode_deliveries,
    decode_messages,
    encode_deliveries,
    encode_messages,
)

SIZES = (100, 1000)
PAYLOAD_BYTES = 100
ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ULID's (Crockford base32)
ID_CHARS = 26
PACKAGE = "dejaq.bench"

F = descriptor_pb2.FieldDescriptorProto


def _protobuf_classes() -> tuple[Any, Any]:
    """MessageBatch and DeliveryBatch as plain protobuf repeated fields (proto3, packed)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="dejaq_bench_codec.proto", package=PACKAGE, syntax="proto3"
    )
    shapes = {
        "MessageBatch": [
            ("timestamps", F.TYPE_INT64, F.LABEL_REPEATED),
            ("ids", F.TYPE_STRING, F.LABEL_REPEATED),
            ("payloads", F.TYPE_BYTES, F.LABEL_REPEATED),
        ],
        "DeliveryBatch": [
            ("timestamps", F.TYPE_INT64, F.LABEL_REPEATED),
            ("versions", F.TYPE_UINT64, F.LABEL_REPEATED),
            ("deliveries", F.TYPE_UINT32, F.LABEL_REPEATED),
            ("ids", F.TYPE_STRING, F.LABEL_REPEATED),
            ("payloads", F.TYPE_BYTES, F.LABEL_REPEATED),
            ("lease_until", F.TYPE_INT64, F.LABEL_OPTIONAL),
        ],
    }
    for name, fields in shapes.items():
        message = file.message_type.add(name=name)
        for number, (field, kind, label) in enumerate(fields, start=1):
            message.field.add(name=field, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    # Built at run time, so the classes are untyped (Any) for mypy.
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.MessageBatch")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.DeliveryBatch")),
    )


PbMessageBatch, PbDeliveryBatch = _protobuf_classes()


@dataclass(frozen=True)
class Columns:
    timestamps: list[int]
    ids: list[str]
    payloads: list[bytes]


def sample(n: int, rng: random.Random) -> Columns:
    now = time.time_ns() // 1_000_000
    return Columns(
        [now + rng.randrange(3_600_000) for _ in range(n)],
        ["".join(rng.choices(ID_ALPHABET, k=ID_CHARS)) for _ in range(n)],
        [os.urandom(PAYLOAD_BYTES) for _ in range(n)],
    )


def deliveries_of(c: Columns, rng: random.Random) -> list[Delivery]:
    return [
        Delivery(i, t, p, rng.randrange(1, 1 << 40), rng.randrange(1, 4))
        for i, t, p in zip(c.ids, c.timestamps, c.payloads, strict=True)
    ]


# -- the codecs under test: (encode, decode) from and to plain Python values ----


def fb_encode_messages(c: Columns) -> bytes:
    return encode_messages(c.timestamps, c.payloads, c.ids)


def fb_decode_messages(buf: bytes) -> Columns:
    b = decode_messages(buf)
    return Columns(b.timestamps, b.ids, b.payloads)


def pb_encode_messages(c: Columns) -> bytes:
    data: bytes = PbMessageBatch(
        timestamps=c.timestamps, ids=c.ids, payloads=c.payloads
    ).SerializeToString()
    return data


def pb_decode_messages(buf: bytes) -> Columns:
    m = PbMessageBatch.FromString(buf)
    return Columns(list(m.timestamps), list(m.ids), list(m.payloads))


LEASE_UNTIL = 1_900_000_000_000


def fb_encode_deliveries(ds: list[Delivery]) -> bytes:
    return encode_deliveries(ds, LEASE_UNTIL)


def fb_decode_deliveries(buf: bytes) -> list[Delivery]:
    return decode_deliveries(buf)[0]


def pb_encode_deliveries(ds: list[Delivery]) -> bytes:
    data: bytes = PbDeliveryBatch(
        timestamps=[d.timestamp for d in ds],
        versions=[d.version for d in ds],
        deliveries=[d.deliveries for d in ds],
        ids=[d.id for d in ds],
        payloads=[d.payload for d in ds],
        lease_until=LEASE_UNTIL,
    ).SerializeToString()
    return data


def pb_decode_deliveries(buf: bytes) -> list[Delivery]:
    m = PbDeliveryBatch.FromString(buf)
    return [
        Delivery(i, t, p, v, n)
        for i, t, p, v, n in zip(
            m.ids, m.timestamps, m.payloads, m.versions, m.deliveries, strict=True
        )
    ]


@dataclass(frozen=True)
class Codec:
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


CODECS: dict[str, dict[str, Codec]] = {
    "messages": {
        "flatbuffers": Codec(fb_encode_messages, fb_decode_messages),
        "protobuf": Codec(pb_encode_messages, pb_decode_messages),
    },
    "deliveries": {
        "flatbuffers": Codec(fb_encode_deliveries, fb_decode_deliveries),
        "protobuf": Codec(pb_encode_deliveries, pb_decode_deliveries),
    },
}


def best_us(fn: Callable[[], object], repeat: int, target_s: float) -> tuple[float, float]:
    """Best and median µs per call over ``repeat`` runs of about ``target_s`` each."""
    timer = timeit.Timer(fn, setup=gc.enable)  # timeit turns gc off; a real process has it on
    loops, took = timer.autorange()
    loops = max(1, round(loops * target_s / max(took, 1e-9)))
    runs = [t / loops * 1e6 for t in timer.repeat(repeat=repeat, number=loops)]
    return min(runs), statistics.median(runs)


def measure(codec: Codec, value: Any, n: int, repeat: int, target_s: float) -> dict[str, Any]:
    buf = codec.encode(value)
    if codec.decode(buf) != value:
        raise AssertionError("the codec does not round-trip its input")
    encode_us, encode_median = best_us(lambda: codec.encode(value), repeat, target_s)
    decode_us, decode_median = best_us(lambda: codec.decode(buf), repeat, target_s)
    return {
        "bytes": len(buf),
        "encode_us": round(encode_us, 1),
        "decode_us": round(decode_us, 1),
        "round_trip_us": round(encode_us + decode_us, 1),
        "encode_msgs_per_s": round(n / encode_us * 1e6),
        "decode_msgs_per_s": round(n / decode_us * 1e6),
        "encode_median_us": round(encode_median, 1),
        "decode_median_us": round(decode_median, 1),
    }


def run(sizes: Sequence[int], repeat: int, target_s: float) -> dict[str, Any]:
    rng = random.Random(1)
    results: dict[str, Any] = {}
    for shape, codecs in CODECS.items():
        for n in sizes:
            columns = sample(n, rng)
            value: Any = columns if shape == "messages" else deliveries_of(columns, rng)
            row = {name: measure(c, value, n, repeat, target_s) for name, c in codecs.items()}
            fb, pb = row["flatbuffers"], row["protobuf"]
            # Above 1: protobuf takes longer than FlatBuffers, i.e. FlatBuffers is faster.
            row["protobuf_over_flatbuffers"] = {
                op: round(pb[f"{op}_us"] / fb[f"{op}_us"], 2)
                for op in ("encode", "decode", "round_trip")
            }
            results[f"{shape} x{n}"] = row
            print(
                f"{shape} x{n}: round trip flatbuffers {fb['round_trip_us']} µs,"
                f" protobuf {pb['round_trip_us']} µs",
                flush=True,
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="shorter runs (a few seconds)")
    a = p.parse_args(argv)
    repeat, target_s = (3, 0.03) if a.quick else (5, 0.1)
    results: dict[str, Any] = {
        "config": {
            "sizes": list(SIZES),
            "payload_bytes": PAYLOAD_BYTES,
            "id_chars": ID_CHARS,
            "repeat": repeat,
            "seconds_per_run": target_s,
            "protobuf": f"{google.protobuf.__version__} ({api_implementation.Type()})",
            "flatbuffers": getattr(flatbuffers, "__version__", "?"),
        },
        **run(SIZES, repeat, target_s),
    }
    save("wire_codec", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
