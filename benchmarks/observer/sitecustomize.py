"""Imported at start by a dashboard server a benchmark launches (its PYTHONPATH begins with this folder):
with ``HEADPRUNE_BENCH_METRICS_LOG`` set, the app's "metric sent" records (``app.headmap.panel.METRICS_LOG``)
go to that file, one JSON object per line. The app itself writes no file."""
import logging
import os


class _JsonLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage().removeprefix("metric sent ")


if os.environ.get("HEADPRUNE_BENCH_METRICS_LOG"):
    _handler = logging.FileHandler(os.environ["HEADPRUNE_BENCH_METRICS_LOG"], encoding="utf-8")
    _handler.setFormatter(_JsonLine())
    _logger = logging.getLogger("headprune.app.metrics")
    _logger.addHandler(_handler)
    _logger.setLevel(logging.INFO)
