from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OnDuplicate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_DUPLICATE_KEEP: _ClassVar[OnDuplicate]
    ON_DUPLICATE_REPLACE: _ClassVar[OnDuplicate]
    ON_DUPLICATE_EXTEND: _ClassVar[OnDuplicate]
ON_DUPLICATE_KEEP: OnDuplicate
ON_DUPLICATE_REPLACE: OnDuplicate
ON_DUPLICATE_EXTEND: OnDuplicate

class TopicSettings(_message.Message):
    __slots__ = ("buckets", "lease_ms", "max_deliveries", "max_payload_bytes", "dead_retention_ms", "expiry_ms", "dedup_window_ms", "max_rate", "kind", "priorities", "aging_ms", "webhook", "paused", "paused_at_ms", "resumed_at_ms", "key_concurrency", "key_rate", "key_burst", "key_overrides")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEAD_RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_MS_FIELD_NUMBER: _ClassVar[int]
    DEDUP_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_RATE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PRIORITIES_FIELD_NUMBER: _ClassVar[int]
    AGING_MS_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    KEY_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    KEY_RATE_FIELD_NUMBER: _ClassVar[int]
    KEY_BURST_FIELD_NUMBER: _ClassVar[int]
    KEY_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    buckets: int
    lease_ms: int
    max_deliveries: int
    max_payload_bytes: int
    dead_retention_ms: int
    expiry_ms: int
    dedup_window_ms: int
    max_rate: float
    kind: str
    priorities: int
    aging_ms: int
    webhook: Webhook
    paused: bool
    paused_at_ms: int
    resumed_at_ms: int
    key_concurrency: int
    key_rate: float
    key_burst: int
    key_overrides: int
    def __init__(self, buckets: _Optional[int] = ..., lease_ms: _Optional[int] = ..., max_deliveries: _Optional[int] = ..., max_payload_bytes: _Optional[int] = ..., dead_retention_ms: _Optional[int] = ..., expiry_ms: _Optional[int] = ..., dedup_window_ms: _Optional[int] = ..., max_rate: _Optional[float] = ..., kind: _Optional[str] = ..., priorities: _Optional[int] = ..., aging_ms: _Optional[int] = ..., webhook: _Optional[_Union[Webhook, _Mapping]] = ..., paused: _Optional[bool] = ..., paused_at_ms: _Optional[int] = ..., resumed_at_ms: _Optional[int] = ..., key_concurrency: _Optional[int] = ..., key_rate: _Optional[float] = ..., key_burst: _Optional[int] = ..., key_overrides: _Optional[int] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("url", "timeout_ms", "concurrency", "headers", "secret", "backoff_ms")
    URL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    url: str
    timeout_ms: int
    concurrency: int
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    secret: str
    backoff_ms: int
    def __init__(self, url: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., concurrency: _Optional[int] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., secret: _Optional[str] = ..., backoff_ms: _Optional[int] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("name", "settings", "created_at_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    settings: TopicSettings
    created_at_ms: int
    def __init__(self, name: _Optional[str] = ..., settings: _Optional[_Union[TopicSettings, _Mapping]] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

class Counts(_message.Message):
    __slots__ = ("waiting", "due", "leased", "dead")
    WAITING_FIELD_NUMBER: _ClassVar[int]
    DUE_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    waiting: int
    due: int
    leased: int
    dead: int
    def __init__(self, waiting: _Optional[int] = ..., due: _Optional[int] = ..., leased: _Optional[int] = ..., dead: _Optional[int] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "settings", "exist_ok")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    EXIST_OK_FIELD_NUMBER: _ClassVar[int]
    name: str
    settings: TopicSettings
    exist_ok: bool
    def __init__(self, name: _Optional[str] = ..., settings: _Optional[_Union[TopicSettings, _Mapping]] = ..., exist_ok: _Optional[bool] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UpdateTopicRequest(_message.Message):
    __slots__ = ("name", "max_rate", "no_max_rate", "kind", "priorities", "aging_ms", "webhook", "no_webhook", "rotate_secret", "show_secret", "lease_ms", "max_deliveries", "paused", "key_concurrency", "key_rate", "key_burst")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_RATE_FIELD_NUMBER: _ClassVar[int]
    NO_MAX_RATE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PRIORITIES_FIELD_NUMBER: _ClassVar[int]
    AGING_MS_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    NO_WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    ROTATE_SECRET_FIELD_NUMBER: _ClassVar[int]
    SHOW_SECRET_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    KEY_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    KEY_RATE_FIELD_NUMBER: _ClassVar[int]
    KEY_BURST_FIELD_NUMBER: _ClassVar[int]
    name: str
    max_rate: float
    no_max_rate: bool
    kind: str
    priorities: int
    aging_ms: int
    webhook: Webhook
    no_webhook: bool
    rotate_secret: bool
    show_secret: bool
    lease_ms: int
    max_deliveries: int
    paused: bool
    key_concurrency: int
    key_rate: float
    key_burst: int
    def __init__(self, name: _Optional[str] = ..., max_rate: _Optional[float] = ..., no_max_rate: _Optional[bool] = ..., kind: _Optional[str] = ..., priorities: _Optional[int] = ..., aging_ms: _Optional[int] = ..., webhook: _Optional[_Union[Webhook, _Mapping]] = ..., no_webhook: _Optional[bool] = ..., rotate_secret: _Optional[bool] = ..., show_secret: _Optional[bool] = ..., lease_ms: _Optional[int] = ..., max_deliveries: _Optional[int] = ..., paused: _Optional[bool] = ..., key_concurrency: _Optional[int] = ..., key_rate: _Optional[float] = ..., key_burst: _Optional[int] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics", "activity")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    activity: _containers.RepeatedCompositeFieldContainer[TopicActivity]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ..., activity: _Optional[_Iterable[_Union[TopicActivity, _Mapping]]] = ...) -> None: ...

class TopicActivity(_message.Message):
    __slots__ = ("topic", "delivery_rate", "lateness_p99_ms", "over_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_RATE_FIELD_NUMBER: _ClassVar[int]
    LATENESS_P99_MS_FIELD_NUMBER: _ClassVar[int]
    OVER_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    delivery_rate: float
    lateness_p99_ms: float
    over_ms: int
    def __init__(self, topic: _Optional[str] = ..., delivery_rate: _Optional[float] = ..., lateness_p99_ms: _Optional[float] = ..., over_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("topic", "counts", "consumers", "next_due_ms", "activity")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    counts: Counts
    consumers: int
    next_due_ms: int
    activity: TopicActivity
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ..., counts: _Optional[_Union[Counts, _Mapping]] = ..., consumers: _Optional[int] = ..., next_due_ms: _Optional[int] = ..., activity: _Optional[_Union[TopicActivity, _Mapping]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("topic", "id", "timestamp_ms", "payload", "version", "deliveries", "lease_owner", "state", "max_deliveries", "expires_at_ms", "priority", "key", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    timestamp_ms: int
    payload: bytes
    version: int
    deliveries: int
    lease_owner: str
    state: str
    max_deliveries: int
    expires_at_ms: int
    priority: int
    key: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., timestamp_ms: _Optional[int] = ..., payload: _Optional[bytes] = ..., version: _Optional[int] = ..., deliveries: _Optional[int] = ..., lease_owner: _Optional[str] = ..., state: _Optional[str] = ..., max_deliveries: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., priority: _Optional[int] = ..., key: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ("topic", "id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class MoveRequest(_message.Message):
    __slots__ = ("topic", "id", "version", "timestamp_ms", "priority")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    timestamp_ms: int
    priority: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("topic", "id", "version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("topic", "id", "version", "consumer_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    consumer_id: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ..., consumer_id: _Optional[str] = ...) -> None: ...

class ExtendRequest(_message.Message):
    __slots__ = ("topic", "id", "version", "consumer_id", "lease_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    consumer_id: str
    lease_ms: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ..., consumer_id: _Optional[str] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class NackRequest(_message.Message):
    __slots__ = ("topic", "id", "version", "consumer_id", "delay_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    consumer_id: str
    delay_ms: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ..., consumer_id: _Optional[str] = ..., delay_ms: _Optional[int] = ...) -> None: ...

class MutationResult(_message.Message):
    __slots__ = ("id", "version", "timestamp_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    version: int
    timestamp_ms: int
    def __init__(self, id: _Optional[str] = ..., version: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ListDeadRequest(_message.Message):
    __slots__ = ("topic", "limit", "after_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    limit: int
    after_id: str
    def __init__(self, topic: _Optional[str] = ..., limit: _Optional[int] = ..., after_id: _Optional[str] = ...) -> None: ...

class ListDeadResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class RedriveRequest(_message.Message):
    __slots__ = ("topic", "ids", "timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class RedriveResponse(_message.Message):
    __slots__ = ("redriven",)
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: int
    def __init__(self, redriven: _Optional[int] = ...) -> None: ...

class ScanBucketRequest(_message.Message):
    __slots__ = ("topic", "bucket", "after_id", "limit", "states", "without_payloads")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    bucket: int
    after_id: str
    limit: int
    states: _containers.RepeatedScalarFieldContainer[str]
    without_payloads: bool
    def __init__(self, topic: _Optional[str] = ..., bucket: _Optional[int] = ..., after_id: _Optional[str] = ..., limit: _Optional[int] = ..., states: _Optional[_Iterable[str]] = ..., without_payloads: _Optional[bool] = ...) -> None: ...

class ScanBucketResponse(_message.Message):
    __slots__ = ("messages", "next_after_id", "done")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_after_id: str
    done: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_after_id: _Optional[str] = ..., done: _Optional[bool] = ...) -> None: ...

class ListByDueRequest(_message.Message):
    __slots__ = ("topic", "limit", "after_timestamp_ms", "after_id", "without_payloads")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    limit: int
    after_timestamp_ms: int
    after_id: str
    without_payloads: bool
    def __init__(self, topic: _Optional[str] = ..., limit: _Optional[int] = ..., after_timestamp_ms: _Optional[int] = ..., after_id: _Optional[str] = ..., without_payloads: _Optional[bool] = ...) -> None: ...

class ListByDueResponse(_message.Message):
    __slots__ = ("messages", "next_after_timestamp_ms", "next_after_id", "done")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_after_timestamp_ms: int
    next_after_id: str
    done: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_after_timestamp_ms: _Optional[int] = ..., next_after_id: _Optional[str] = ..., done: _Optional[bool] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("topic", "batch", "on_duplicate")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    ON_DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    batch: bytes
    on_duplicate: OnDuplicate
    def __init__(self, topic: _Optional[str] = ..., batch: _Optional[bytes] = ..., on_duplicate: _Optional[_Union[OnDuplicate, str]] = ...) -> None: ...

class Rejection(_message.Message):
    __slots__ = ("index", "code", "reason", "kind")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    index: int
    code: int
    reason: str
    kind: str
    def __init__(self, index: _Optional[int] = ..., code: _Optional[int] = ..., reason: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("results", "rejections")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    results: bytes
    rejections: _containers.RepeatedCompositeFieldContainer[Rejection]
    def __init__(self, results: _Optional[bytes] = ..., rejections: _Optional[_Iterable[_Union[Rejection, _Mapping]]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("topic", "consumer_id", "lease_ms", "credits", "hold_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    consumer_id: str
    lease_ms: int
    credits: int
    hold_ms: int
    def __init__(self, topic: _Optional[str] = ..., consumer_id: _Optional[str] = ..., lease_ms: _Optional[int] = ..., credits: _Optional[int] = ..., hold_ms: _Optional[int] = ...) -> None: ...

class Settle(_message.Message):
    __slots__ = ("kind", "ids", "versions", "ms", "token", "credits")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACK: _ClassVar[Settle.Kind]
        EXTEND: _ClassVar[Settle.Kind]
        NACK: _ClassVar[Settle.Kind]
    ACK: Settle.Kind
    EXTEND: Settle.Kind
    NACK: Settle.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    kind: Settle.Kind
    ids: _containers.RepeatedScalarFieldContainer[str]
    versions: _containers.RepeatedScalarFieldContainer[int]
    ms: int
    token: int
    credits: int
    def __init__(self, kind: _Optional[_Union[Settle.Kind, str]] = ..., ids: _Optional[_Iterable[str]] = ..., versions: _Optional[_Iterable[int]] = ..., ms: _Optional[int] = ..., token: _Optional[int] = ..., credits: _Optional[int] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ("keep",)
    KEEP_FIELD_NUMBER: _ClassVar[int]
    keep: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keep: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsumeRequest(_message.Message):
    __slots__ = ("hello", "credits", "settle", "goodbye")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    SETTLE_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    credits: int
    settle: Settle
    goodbye: Goodbye
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., credits: _Optional[int] = ..., settle: _Optional[_Union[Settle, _Mapping]] = ..., goodbye: _Optional[_Union[Goodbye, _Mapping]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("consumer_id", "lease_ms", "topic")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_id: str
    lease_ms: int
    topic: Topic
    def __init__(self, consumer_id: _Optional[str] = ..., lease_ms: _Optional[int] = ..., topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class SettleResult(_message.Message):
    __slots__ = ("token", "versions", "rejections")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    token: int
    versions: _containers.RepeatedScalarFieldContainer[int]
    rejections: _containers.RepeatedCompositeFieldContainer[Rejection]
    def __init__(self, token: _Optional[int] = ..., versions: _Optional[_Iterable[int]] = ..., rejections: _Optional[_Iterable[_Union[Rejection, _Mapping]]] = ...) -> None: ...

class ConsumeResponse(_message.Message):
    __slots__ = ("welcome", "deliveries", "settled", "sent_at")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    deliveries: bytes
    settled: SettleResult
    sent_at: int
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., deliveries: _Optional[bytes] = ..., settled: _Optional[_Union[SettleResult, _Mapping]] = ..., sent_at: _Optional[int] = ...) -> None: ...

class ForecastRequest(_message.Message):
    __slots__ = ("topic", "horizon_ms", "step_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    HORIZON_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    horizon_ms: int
    step_ms: int
    def __init__(self, topic: _Optional[str] = ..., horizon_ms: _Optional[int] = ..., step_ms: _Optional[int] = ...) -> None: ...

class ForecastResponse(_message.Message):
    __slots__ = ("start_ms", "step_ms", "counts")
    START_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_MS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    start_ms: int
    step_ms: int
    counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, start_ms: _Optional[int] = ..., step_ms: _Optional[int] = ..., counts: _Optional[_Iterable[int]] = ...) -> None: ...

class KeyLimit(_message.Message):
    __slots__ = ("key", "concurrency", "rate", "burst")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    key: str
    concurrency: int
    rate: float
    burst: int
    def __init__(self, key: _Optional[str] = ..., concurrency: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class SetKeyLimitRequest(_message.Message):
    __slots__ = ("topic", "key", "concurrency", "rate", "burst")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    concurrency: int
    rate: float
    burst: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., concurrency: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class KeyLimitRequest(_message.Message):
    __slots__ = ("topic", "key")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class KeyLimitView(_message.Message):
    __slots__ = ("topic", "key", "overridden", "override", "concurrency", "rate", "burst")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OVERRIDDEN_FIELD_NUMBER: _ClassVar[int]
    OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    overridden: bool
    override: KeyLimit
    concurrency: int
    rate: float
    burst: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., overridden: _Optional[bool] = ..., override: _Optional[_Union[KeyLimit, _Mapping]] = ..., concurrency: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class ListKeyLimitsRequest(_message.Message):
    __slots__ = ("topic", "after", "limit")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    after: str
    limit: int
    def __init__(self, topic: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListKeyLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[KeyLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[KeyLimit, _Mapping]]] = ...) -> None: ...

class RemoveKeyLimitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicKeysRequest(_message.Message):
    __slots__ = ("topic", "limit")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    limit: int
    def __init__(self, topic: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class KeyLoad(_message.Message):
    __slots__ = ("key", "due", "held", "oldest_ms", "lateness_ms", "concurrency", "rate", "burst")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DUE_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    OLDEST_MS_FIELD_NUMBER: _ClassVar[int]
    LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    key: str
    due: int
    held: int
    oldest_ms: int
    lateness_ms: int
    concurrency: int
    rate: float
    burst: int
    def __init__(self, key: _Optional[str] = ..., due: _Optional[int] = ..., held: _Optional[int] = ..., oldest_ms: _Optional[int] = ..., lateness_ms: _Optional[int] = ..., concurrency: _Optional[int] = ..., rate: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class TopicKeysResponse(_message.Message):
    __slots__ = ("now_ms", "keys")
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    now_ms: int
    keys: _containers.RepeatedCompositeFieldContainer[KeyLoad]
    def __init__(self, now_ms: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[KeyLoad, _Mapping]]] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerStatus(_message.Message):
    __slots__ = ("id", "address", "started_at_ms", "skew_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SKEW_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    address: str
    started_at_ms: int
    skew_ms: int
    def __init__(self, id: _Optional[str] = ..., address: _Optional[str] = ..., started_at_ms: _Optional[int] = ..., skew_ms: _Optional[int] = ...) -> None: ...

class BucketRange(_message.Message):
    __slots__ = ("first", "last")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ...) -> None: ...

class ConsumerStatus(_message.Message):
    __slots__ = ("id", "broker", "buckets")
    ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    id: str
    broker: str
    buckets: _containers.RepeatedCompositeFieldContainer[BucketRange]
    def __init__(self, id: _Optional[str] = ..., broker: _Optional[str] = ..., buckets: _Optional[_Iterable[_Union[BucketRange, _Mapping]]] = ...) -> None: ...

class TopicStatus(_message.Message):
    __slots__ = ("name", "buckets", "consumers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    buckets: int
    consumers: _containers.RepeatedCompositeFieldContainer[ConsumerStatus]
    def __init__(self, name: _Optional[str] = ..., buckets: _Optional[int] = ..., consumers: _Optional[_Iterable[_Union[ConsumerStatus, _Mapping]]] = ...) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("mode", "cluster", "broker", "healthy", "now_ms", "brokers", "topics")
    MODE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    mode: str
    cluster: str
    broker: str
    healthy: bool
    now_ms: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerStatus]
    topics: _containers.RepeatedCompositeFieldContainer[TopicStatus]
    def __init__(self, mode: _Optional[str] = ..., cluster: _Optional[str] = ..., broker: _Optional[str] = ..., healthy: _Optional[bool] = ..., now_ms: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerStatus, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicStatus, _Mapping]]] = ...) -> None: ...

class CronEntry(_message.Message):
    __slots__ = ("topic", "id", "schedule", "timezone", "payload", "start_ms", "end_ms", "paused", "misfire", "misfire_limit", "version", "next_ms", "priority")
    class Misfire(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ONCE: _ClassVar[CronEntry.Misfire]
        SKIP: _ClassVar[CronEntry.Misfire]
        ALL: _ClassVar[CronEntry.Misfire]
    ONCE: CronEntry.Misfire
    SKIP: CronEntry.Misfire
    ALL: CronEntry.Misfire
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NEXT_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    schedule: str
    timezone: str
    payload: bytes
    start_ms: int
    end_ms: int
    paused: bool
    misfire: CronEntry.Misfire
    misfire_limit: int
    version: int
    next_ms: int
    priority: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., schedule: _Optional[str] = ..., timezone: _Optional[str] = ..., payload: _Optional[bytes] = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., paused: _Optional[bool] = ..., misfire: _Optional[_Union[CronEntry.Misfire, str]] = ..., misfire_limit: _Optional[int] = ..., version: _Optional[int] = ..., next_ms: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class CronUpdateRequest(_message.Message):
    __slots__ = ("topic", "id", "version", "schedule", "timezone", "payload", "start_ms", "end_ms", "paused", "misfire", "misfire_limit", "priority")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    schedule: str
    timezone: str
    payload: bytes
    start_ms: int
    end_ms: int
    paused: bool
    misfire: CronEntry.Misfire
    misfire_limit: int
    priority: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ..., schedule: _Optional[str] = ..., timezone: _Optional[str] = ..., payload: _Optional[bytes] = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., paused: _Optional[bool] = ..., misfire: _Optional[_Union[CronEntry.Misfire, str]] = ..., misfire_limit: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class CronGetRequest(_message.Message):
    __slots__ = ("topic", "id", "upcoming")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    upcoming: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., upcoming: _Optional[int] = ...) -> None: ...

class CronInfo(_message.Message):
    __slots__ = ("entry", "upcoming_ms")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_MS_FIELD_NUMBER: _ClassVar[int]
    entry: CronEntry
    upcoming_ms: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, entry: _Optional[_Union[CronEntry, _Mapping]] = ..., upcoming_ms: _Optional[_Iterable[int]] = ...) -> None: ...

class CronListRequest(_message.Message):
    __slots__ = ("topic", "after_id", "limit")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    after_id: str
    limit: int
    def __init__(self, topic: _Optional[str] = ..., after_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class CronListResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[CronEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[CronEntry, _Mapping]]] = ...) -> None: ...

class CronDeleteRequest(_message.Message):
    __slots__ = ("topic", "id", "version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    id: str
    version: int
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class CronDeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
