"""alkstore's metric instruments, made once per meter provider.

Counters and histograms are recorded as things happen. The gauges (queue
depth, the oldest ready job's age, stream consumer lag) cannot be read from
the database when an exporter collects them: an observable gauge's callback
runs in the exporter's thread and cannot await. So each instrumented store
samples them from a background task (``hooks.StoreHooks.refresh``) and the
callbacks report the last sample of every store instrumented with this
provider.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from .. import __version__
from ..protocol.values.types import QueueStats
from . import names as n


class Sampled(Protocol):
    """A store whose gauges are sampled (``hooks.Sampled``), as the
    instruments' callbacks read it."""

    def queue_samples(self) -> dict[str, QueueSample]: ...
    def lag_samples(self) -> dict[tuple[str, str], int]: ...


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One queue's gauges as of its last sample."""

    stats: QueueStats
    oldest_ready_age_s: float

    def counts(self) -> list[tuple[str, int]]:
        s = self.stats
        return [
            ("ready", s.ready), ("scheduled", s.scheduled), ("processing", s.processing),
            ("dead", s.dead),
        ]  # fmt: skip




class Instruments:
    """The instruments of one meter provider, and the stores they sample."""

    def __init__(self, meter_provider: MeterProvider | None) -> None:
        meter = metrics.get_meter("alkstore", __version__, meter_provider=meter_provider)
        self.enqueued = meter.create_counter(
            n.JOBS_ENQUEUED, unit="{job}", description="Jobs enqueued."
        )
        self.claimed = meter.create_counter(
            n.JOBS_CLAIMED, unit="{job}", description="Jobs claimed by workers and claim calls."
        )
        self.acked = meter.create_counter(n.JOBS_ACKED, unit="{job}", description="Jobs acked.")
        self.retried = meter.create_counter(
            n.JOBS_RETRIED, unit="{job}", description="Jobs put back to pending by a retry."
        )
        self.dead = meter.create_counter(
            n.JOBS_DEAD, unit="{job}", description="Jobs moved to the dead letters."
        )
        self.duration = meter.create_histogram(
            n.JOB_DURATION,
            unit="s",
            description="How long handlers ran.",
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        self.wake_latency = meter.create_histogram(
            n.WAKE_LATENCY,
            unit="s",
            description=(
                "From a job becoming due to its claim, for jobs that became due while "
                "their worker was idle."
            ),
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        meter.create_observable_gauge(
            n.QUEUE_DEPTH, [self._depth], unit="{job}",
            description="Jobs of a queue by state, as of the last sample.",
        )  # fmt: skip
        meter.create_observable_gauge(
            n.QUEUE_OLDEST_READY_AGE, [self._oldest_ready_age], unit="s",
            description="How long the oldest ready job has been due, as of the last sample.",
        )  # fmt: skip
        meter.create_observable_gauge(
            n.CONSUMER_LAG, [self._lag], unit="{event}",
            description="Events a stream consumer's saved offset is behind the stream's head.",
        )  # fmt: skip
        self._stores: weakref.WeakSet[Sampled] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, store: Sampled) -> None:
        with self._lock:
            self._stores.add(store)

    def discard(self, store: Sampled) -> None:
        with self._lock:
            self._stores.discard(store)

    def _sampled(self) -> list[Sampled]:
        # Collection runs in the exporter's thread.
        with self._lock:
            return list(self._stores)

    def _depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(count, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue, n.JOB_STATE: state})
            for store in self._sampled()
            for queue, sample in store.queue_samples().items()
            for state, count in sample.counts()
        ]

    def _oldest_ready_age(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(sample.oldest_ready_age_s, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue})
            for store in self._sampled()
            for queue, sample in store.queue_samples().items()
        ]

    def _lag(self, options: CallbackOptions) -> Iterator[Observation]:
        for store in self._sampled():
            for (stream, consumer), lag in store.lag_samples().items():
                yield Observation(
                    lag,
                    {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: stream, n.CONSUMER_GROUP: consumer},
                )


_BY_PROVIDER: weakref.WeakKeyDictionary[object, Instruments] = weakref.WeakKeyDictionary()
_global_instruments: Instruments | None = None
_made = threading.Lock()


def instruments_for(meter_provider: MeterProvider | None) -> Instruments:
    """The instruments of ``meter_provider`` (None: the global one), made on
    first use: an SDK keeps the first registration of an instrument name,
    so a second store on the same provider must share them, callbacks
    included."""
    global _global_instruments
    with _made:
        if meter_provider is None:
            if _global_instruments is None:
                _global_instruments = Instruments(None)
            return _global_instruments
        found = _BY_PROVIDER.get(meter_provider)
        if found is None:
            found = _BY_PROVIDER[meter_provider] = Instruments(meter_provider)
        return found
