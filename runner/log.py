"""structlog, configured once: readable lines on the terminal, JSON lines in a log file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import platformdirs
import structlog

_configured = False


def default_log_file() -> Path:
    """Where the CLI appends JSON logs unless told otherwise: ``$XDG_CACHE_HOME/ispm/ispm.jsonl``."""
    return Path(platformdirs.user_cache_dir("ispm")) / "ispm.jsonl"


def configure(log_file: Path | None = None, *, verbose: bool = False) -> None:
    """Route structlog through stdlib logging to stderr (human) and, if given, a JSON file.

    Safe to call more than once: the last call wins, handlers are replaced, not stacked.
    """
    global _configured
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.DEBUG)
    # sqlglot warns when it falls back to opaque commands; agents' odd SQL must not flood the console.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    # httpx logs every request at INFO and httpcore traces each step at DEBUG: per-call noise in a
    # 12-hour run, and time on the gateway's hot path. Our own retry and failure events say what matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)

    console = logging.StreamHandler(sys.stderr)
    # The terminal is for the command's own output; log events show there only when they matter.
    console.setLevel(logging.DEBUG if verbose else logging.WARNING)
    console.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
            foreign_pre_chain=shared,
        )
    )
    root.addHandler(console)

    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(log_file, encoding="utf-8")
        to_file.setLevel(logging.DEBUG)
        to_file.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                processor=structlog.processors.JSONRenderer(sort_keys=True),
                foreign_pre_chain=shared,
            )
        )
        root.addHandler(to_file)
    _configured = True


def get(name: str) -> structlog.stdlib.BoundLogger:
    """A logger for one module; configures defaults on first use if nobody has yet."""
    if not _configured:
        configure()
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
