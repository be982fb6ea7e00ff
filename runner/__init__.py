"""ISPM-Enterprise-SQL@v1: world → tasks → sandbox → grading → run → record."""

__version__ = "0.1.0"
BENCHMARK_ID = "ISPM-Enterprise-SQL@v1"
