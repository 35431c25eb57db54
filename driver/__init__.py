"""The dejaq client library: import everything a program uses from here.

::

    from dejaq.driver import Admin, Client, Consumer, Producer

    async with Client("127.0.0.1:7700") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer:
            await producer.send(b"resize photo 17", delay_ms=1500)
        async with Consumer(client, "jobs") as consumer:
            async for delivery in consumer:
                await delivery.ack()

``embedded(...)`` runs a broker inside the program instead of connecting to one.
Other modules of ``dejaq.driver`` may move; these names stay.
"""

from dejaq.core.errors import (
    AlreadyExists,
    BrokerUnavailable,
    CoordinationUnavailable,
    DejaqError,
    InvalidArgument,
    Leased,
    NotFound,
    NotLeaseHolder,
    PayloadTooLarge,
    PermissionDenied,
    ResourceExhausted,
    StaleVersion,
    StorageError,
    StorageRefused,
    StorageUnavailable,
    Unauthenticated,
    WrongKind,
)
from dejaq.core.model import TopicSettings, Webhook
from dejaq.core.signature import verify as verify_webhook_signature
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.cron import Cron
from dejaq.driver.delivery import Delivery
from dejaq.driver.embedded import embedded
from dejaq.driver.producer import Outgoing, Producer, ProduceResult
from dejaq.driver.settle import SettleFailure, SettleRejected
from dejaq.driver.sync import SyncClient
from dejaq.driver.tls import ClientTls

__all__ = [
    "Admin",
    "AlreadyExists",
    "BrokerUnavailable",
    "Client",
    "ClientTls",
    "Consumer",
    "CoordinationUnavailable",
    "Cron",
    "DejaqError",
    "Delivery",
    "InvalidArgument",
    "Leased",
    "NotFound",
    "NotLeaseHolder",
    "Outgoing",
    "PayloadTooLarge",
    "PermissionDenied",
    "ProduceResult",
    "Producer",
    "ResourceExhausted",
    "SettleFailure",
    "SettleRejected",
    "StaleVersion",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "SyncClient",
    "TopicSettings",
    "Unauthenticated",
    "Webhook",
    "WrongKind",
    "embedded",
    "verify_webhook_signature",
]
