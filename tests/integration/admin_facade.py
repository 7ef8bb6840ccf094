"""One admin interface over confluent-kafka's AdminClient and kafka-python's KafkaAdminClient.

Every method reports broker errors as Kafka numeric error codes (0 = success) so a test can
be written once and run against both clients.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic, ResourceType)

import kafka.errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KConfigResourceType
from kafka.structs import TopicPartition as KTopicPartition

# Kafka's DescribeConfigs config_source numbers.
SOURCE_NAMES = {
    -1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}


@dataclass
class ConfigValue:
    value: str | None
    source: str  # one of SOURCE_NAMES' values
    read_only: bool


def _ck_code(exc: BaseException) -> int:
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "code"):
        return exc.args[0].code()
    raise exc


def _kp_code(exc: BaseException) -> int:
    errno = getattr(exc, "errno", None)
    if isinstance(exc, kerrors.KafkaError) and errno is not None:
        return errno
    raise exc


class CkAdmin:
    family = "confluent"

    def __init__(self, bootstrap: str):
        self.a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})

    def create(self, name, partitions=1, configs=None, validate_only=False) -> int:
        nt = NewTopic(name, num_partitions=partitions, replication_factor=1,
                      config={k: str(v) for k, v in (configs or {}).items()})
        fs = self.a.create_topics([nt], validate_only=validate_only, operation_timeout=10, request_timeout=15)
        try:
            fs[name].result(timeout=20)
            return 0
        except KafkaException as e:
            return _ck_code(e)

    def list(self) -> dict[str, int]:
        md = self.a.list_topics(timeout=10)
        return {n: len(t.partitions) for n, t in md.topics.items() if t.error is None}

    def delete(self, names) -> dict[str, int]:
        fs = self.a.delete_topics(list(names), operation_timeout=10, request_timeout=15)
        out = {}
        for n, f in fs.items():
            try:
                f.result(timeout=20)
                out[n] = 0
            except KafkaException as e:
                out[n] = _ck_code(e)
        return out

    def create_partitions(self, name, total, validate_only=False) -> int:
        fs = self.a.create_partitions([NewPartitions(name, total)], validate_only=validate_only,
                                      operation_timeout=10, request_timeout=15)
        try:
            fs[name].result(timeout=20)
            return 0
        except KafkaException as e:
            return _ck_code(e)

    def describe_configs(self, name) -> dict[str, ConfigValue]:
        res = ConfigResource(ResourceType.TOPIC, name)
        fs = self.a.describe_configs([res], request_timeout=15)
        entries = fs[res].result(timeout=20)
        out = {}
        for k, e in entries.items():
            src = e.source.name if isinstance(e.source, ConfigSource) else SOURCE_NAMES.get(int(e.source), "UNKNOWN")
            out[k] = ConfigValue(e.value, src, bool(e.is_read_only))
        return out

    def describe_configs_error(self, name) -> int:
        res = ConfigResource(ResourceType.TOPIC, name)
        fs = self.a.describe_configs([res], request_timeout=15)
        try:
            fs[res].result(timeout=20)
            return 0
        except KafkaException as e:
            return _ck_code(e)

    def incremental_alter(self, name, set_=None, delete=(), validate_only=False) -> int:
        entries = [ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in (set_ or {}).items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        fs = self.a.incremental_alter_configs([res], validate_only=validate_only, request_timeout=15)
        try:
            fs[res].result(timeout=20)
            return 0
        except KafkaException as e:
            return _ck_code(e)

    def legacy_alter(self, name, configs, validate_only=False) -> int:
        res = ConfigResource(ResourceType.TOPIC, name, set_config={k: str(v) for k, v in configs.items()})
        fs = self.a.alter_configs([res], validate_only=validate_only, request_timeout=15)
        try:
            fs[res].result(timeout=20)
            return 0
        except KafkaException as e:
            return _ck_code(e)

    def delete_records(self, name, partition, before_offset) -> tuple[int, int | None]:
        tp = TopicPartition(name, partition, before_offset)
        fs = self.a.delete_records([tp], operation_timeout=10, request_timeout=15)
        [f] = fs.values()
        try:
            r = f.result(timeout=20)
            return 0, r.low_watermark
        except KafkaException as e:
            return _ck_code(e), None


# kafka-python clients run background threads that keep reconnecting to a broker that is
# gone; conftest closes every client made here at the end of each test.
OPEN_KAFKA_PYTHON_CLIENTS: list = []


def close_kafka_python_clients() -> None:
    while OPEN_KAFKA_PYTHON_CLIENTS:
        client = OPEN_KAFKA_PYTHON_CLIENTS.pop()
        try:
            client.close()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass


class KpAdmin:
    family = "kafka-python"

    def __init__(self, bootstrap: str):
        self.a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
        OPEN_KAFKA_PYTHON_CLIENTS.append(self.a)

    def close(self):
        self.a.close()

    @staticmethod
    def _first_error(resp_topics) -> int:
        for t in resp_topics:
            if t.get("error_code", 0):
                return t["error_code"]
        return 0

    def create(self, name, partitions=1, configs=None, validate_only=False) -> int:
        spec = {name: {"num_partitions": partitions, "replication_factor": 1,
                       "configs": {k: str(v) for k, v in (configs or {}).items()}}}
        try:
            r = self.a.create_topics(spec, timeout_ms=10000, validate_only=validate_only, raise_errors=False)
        except kerrors.KafkaError as e:
            return _kp_code(e)
        return self._first_error(r["topics"])

    def list(self) -> dict[str, int]:
        return {t["name"]: len(t["partitions"]) for t in self.a.describe_topics() if t.get("error_code", 0) == 0}

    def delete(self, names) -> dict[str, int]:
        r = self.a.delete_topics(list(names), timeout_ms=10000, raise_errors=False)
        return {t["name"]: t["error_code"] for t in r["topics"]}

    def create_partitions(self, name, total, validate_only=False) -> int:
        try:
            r = self.a.create_partitions({name: total}, timeout_ms=10000, validate_only=validate_only,
                                         raise_errors=False)
        except kerrors.KafkaError as e:
            return _kp_code(e)
        for res in r.results:
            if res.error_code:
                return res.error_code
        return 0

    def describe_configs(self, name) -> dict[str, ConfigValue]:
        r = self.a.describe_configs([KConfigResource(KConfigResourceType.TOPIC, name)], config_filter="all")
        entries = r["topic"][name]
        out = {}
        for k, e in entries.items():
            src = e.get("config_source")
            if hasattr(src, "name"):
                src_name = src.name
            elif isinstance(src, str):
                src_name = src
            else:
                src_name = SOURCE_NAMES.get(int(src) if src is not None else -1, "UNKNOWN")
            out[k] = ConfigValue(e.get("value"), src_name, bool(e.get("read_only")))
        return out

    def incremental_alter(self, name, set_=None, delete=(), validate_only=False) -> int:
        configs = {k: str(v) for k, v in (set_ or {}).items()}
        configs.update({k: ("DELETE", None) for k in delete})
        r = self.a.alter_configs([KConfigResource(KConfigResourceType.TOPIC, name, configs=configs)],
                                 validate_only=validate_only, raise_on_unknown=False, incremental=True)
        return self._result_code(r, name)

    def legacy_alter(self, name, configs, validate_only=False) -> int:
        # kafka-python's non-incremental path first re-adds every other modified key (so
        # nothing is reset by omission), then sends AlterConfigs.
        res = KConfigResource(KConfigResourceType.TOPIC, name, configs={k: str(v) for k, v in configs.items()})
        r = self.a.alter_configs([res], validate_only=validate_only, raise_on_unknown=False, incremental=False)
        return self._result_code(r, name)

    @staticmethod
    def _result_code(r, name) -> int:
        result = r["topic"][name]
        if result == "OK":
            return 0
        m = re.match(r"\[Error (-?\d+)\]", str(result))
        assert m, f"unrecognized alter result {result!r}"
        return int(m.group(1))

    def delete_records(self, name, partition, before_offset) -> tuple[int, int | None]:
        tp = KTopicPartition(name, partition)
        try:
            r = self.a.delete_records({tp: before_offset}, timeout_ms=10000)
        except kerrors.KafkaError as e:
            return _kp_code(e), None
        return 0, r[tp]["low_watermark"]


def admin(fam: str, bootstrap: str):
    return CkAdmin(bootstrap) if fam == "confluent" else KpAdmin(bootstrap)
