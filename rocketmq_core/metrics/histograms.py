"""Histograms counted in plain integers on the hot path, exported through OpenTelemetry.

An OpenTelemetry ``Histogram.record`` costs tens of microseconds in the Python SDK, more
than a whole send; a bisect and two integer adds cost well under one. So the send path
and the request timing count into ``BucketCounts`` rows, and each collection hands the
reader finished histogram points (``HistogramSeries.points``), as the SDK's own
aggregation would have made them (cumulative, or delta since the last export).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# RocketMQ 5's boundaries (METRICS.md §1.4, §1.6)
MESSAGE_SIZE_BOUNDS = (
    1024.0,
    4096.0,
    512 * 1024.0,
    1024 * 1024.0,
    2 * 1024 * 1024.0,
    4 * 1024 * 1024.0,
)
RPC_LATENCY_BOUNDS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)


class BucketCounts:
    """Per key, the count in each bucket (the last is +Inf), then the sum, min and max."""

    __slots__ = ("_first", "_width", "bounds", "rows")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self._first = bounds[0]
        self._width = len(bounds) + 1
        self.rows: dict[Any, list[float]] = {}

    def add(self, key: Any, value: float, count: int = 1) -> None:
        """``count`` observations of ``value`` under ``key``."""
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0] * self._width + [0, value, value]
        if value <= self._first:  # most messages and requests: skip the search
            row[0] += count
        else:  # le: a value on a bound is in its bucket
            row[bisect_left(self.bounds, value)] += count
        row[-3] += value * count
        if value < row[-2]:
            row[-2] = value
        elif value > row[-1]:
            row[-1] = value


@dataclass
class HistogramSeries:
    """One histogram metric: its counts, and how a key becomes a point's labels."""

    name: str
    description: str
    unit: str
    counts: BucketCounts
    labels: Callable[[Any], Mapping[str, str] | None]  # None: the key is not exported
    _start_ns: int = field(default_factory=time.time_ns)
    _last_ns: int = 0  # the previous collection (delta points start there)
    _exported: dict[Any, list[float]] = field(default_factory=dict)

    def points(self, base: Mapping[str, str], delta: bool) -> list[Any]:
        """The OpenTelemetry histogram points of every key, now."""
        from opentelemetry.sdk.metrics.export import HistogramDataPoint

        now = time.time_ns()
        points = []
        width = len(self.counts.bounds) + 1
        for key, row in list(self.counts.rows.items()):
            labels = self.labels(key)
            if labels is None:
                continue
            buckets, total = [int(n) for n in row[:width]], row[width]
            start = self._start_ns
            if delta:
                before = self._exported.get(key)
                self._exported[key] = list(row)
                start = self._last_ns if before is not None else start
                if before is not None:
                    buckets = [n - int(b) for n, b in zip(buckets, before[:width], strict=True)]
                    total -= before[width]
            points.append(
                HistogramDataPoint(
                    attributes={**base, **labels},
                    start_time_unix_nano=start,
                    time_unix_nano=now,
                    count=sum(buckets),
                    sum=total,
                    bucket_counts=buckets,
                    explicit_bounds=list(self.counts.bounds),
                    min=row[width + 1],
                    max=row[width + 2],
                )
            )
        self._last_ns = now
        return points


def with_histograms(
    metrics_data: Any,
    scope_name: str,
    series: Iterable[HistogramSeries],
    base: Mapping[str, str],
    delta: bool,
) -> Any:
    """``metrics_data`` (from a reader's collection) with the histograms added to the
    metrics of the scope ``scope_name``."""
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Histogram,
        Metric,
        MetricsData,
        ResourceMetrics,
        ScopeMetrics,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    temporality = AggregationTemporality.DELTA if delta else AggregationTemporality.CUMULATIVE
    extra = []
    for histogram in series:
        points = histogram.points(base, delta)
        if points:
            data = Histogram(data_points=points, aggregation_temporality=temporality)
            extra.append(Metric(histogram.name, histogram.description, histogram.unit, data))
    if not extra:
        return metrics_data
    resources = list(metrics_data.resource_metrics) if metrics_data is not None else []
    if not resources:
        scope = ScopeMetrics(InstrumentationScope(scope_name), [], "")
        resources = [ResourceMetrics(Resource.get_empty(), [scope], "")]
    first = resources[0]
    scopes = list(first.scope_metrics)
    for index, scope in enumerate(scopes):
        if scope.scope.name == scope_name:
            scopes[index] = ScopeMetrics(scope.scope, [*scope.metrics, *extra], scope.schema_url)
            break
    else:
        scopes.append(ScopeMetrics(InstrumentationScope(scope_name), extra, ""))
    resources[0] = ResourceMetrics(first.resource, scopes, first.schema_url)
    return MetricsData(resources)
