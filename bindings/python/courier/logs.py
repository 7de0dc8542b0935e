"""The engine's log lines into Python's ``logging`` (``Engine(logger=...)``).

Each line the C core makes (one JSON object: docs/design/logging.md, "Sinks, monitors, events") becomes a ``LogRecord`` of
the logger ``courier`` (or the one given), or of its child for the line's component:
``courier.transport``, ``courier.cache``, ``courier.journal``, ``courier.mapping``,
``courier.scheduling`` (``courier_log_component``). The record's message is the line's
``message``; every other field of the line is an attribute of the record (``extra``):
``event``, ``request_id``, ``method``, ``url`` (redacted by the core), ``status``, ``code``,
``duration_ms``, ``component``, ``reason``... A field whose name ``LogRecord`` already uses (none of the
core's today; a field of ``log_set_field`` may) gets the prefix ``courier_``.

Levels map both ways: the core's error, warning, info and debug are ``logging``'s; its trace is
level 5 (:data:`TRACE`). When the bridge is attached, and at :meth:`courier.Engine.sync_log_levels`,
the levels are read from the loggers' effective levels (a level below DEBUG means trace, one above
CRITICAL off):

* given a logger (``logger=True``, a name, a ``logging.Logger``), the engine's level is the
  ``courier`` logger's and each component's its child's, so the core never formats a line that
  ``logging`` would drop (the engine's other sinks, a log file, then see those levels too);
* in the automatic mode (``logger=None``: on because the application configured logging), the
  levels are raised where a logger wants more (``courier.cache`` at DEBUG makes the cache's debug
  lines) and never lowered, so an engine's log file keeps what it had.

Either way the sink's own level is the most verbose the loggers want: the core calls into Python
only with lines some logger may keep (and each logger's filters decide the rest).

The C core calls the sink on the thread where the line is made (mostly the engine's worker): the
sink holds the GIL only to parse the line and hand one record to the logger (no caller lookup, no
formatting of its own); the handlers run there, as they would for any thread.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Optional, Union

__all__ = ["TRACE", "COMPONENTS", "from_python", "to_python", "LogBridge", "bridge_for"]

#: the core's trace level, as a ``logging`` level (below DEBUG)
TRACE = 5

#: ``courier_log_component``'s names, in its order (the child loggers' names)
COMPONENTS = ("transport", "cache", "journal", "mapping", "scheduling")

_TO_PYTHON = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: TRACE}
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def to_python(level: int) -> int:
    """A ``courier_log_level`` (1 error ... 5 trace) as a ``logging`` level."""
    return _TO_PYTHON.get(int(level), logging.INFO)


def from_python(level: int) -> int:
    """A ``logging`` level as the ``courier_log_level`` that makes the lines it lets through:
    above CRITICAL off (0), ERROR and CRITICAL error (1), WARNING warning, INFO info, DEBUG debug,
    below DEBUG trace (5)."""
    if level > logging.CRITICAL:
        return 0
    for c_level, threshold in ((1, logging.ERROR), (2, logging.WARNING), (3, logging.INFO), (4, logging.DEBUG)):
        if level >= threshold:
            return c_level
    return 5


def configured(logger: logging.Logger) -> bool:
    """The rule of ``Engine(logger=None)`` (the default): the application has configured logging
    when the root logger has a handler (``logging.basicConfig``, ``dictConfig``, a framework's
    set-up) or the given logger has a handler or a level of its own."""
    return bool(logging.getLogger().handlers) or bool(logger.handlers) or logger.level != logging.NOTSET


class LogBridge:
    """A log sink of one engine that hands its lines to ``logger`` and its component children."""

    def __init__(self, logger: logging.Logger, exact: bool = True) -> None:
        self.logger = logger
        self.children = {name: logger.getChild(name) for name in COMPONENTS}
        self.exact = exact  # False: the automatic mode, which never lowers the engine's levels
        self.sink = 0
        self.sink_level = -1

    def levels(self) -> tuple[int, dict[str, int]]:
        """The engine's level and each component's, from the loggers' effective levels."""
        return (from_python(self.logger.getEffectiveLevel()),
                {name: from_python(child.getEffectiveLevel()) for name, child in self.children.items()})

    def attach(self, engine: Any) -> None:
        """Sets the engine's levels from the loggers and adds the sink."""
        self.sync(engine)

    def sync(self, engine: Any) -> None:
        """The engine's levels and the sink's from the loggers' levels (see the module's text)."""
        level, components = self.levels()
        wanted = max(level, *components.values())
        if not self.exact:
            level = max(level, int(engine.log_level))
            components = {name: max(c_level, int(engine.log_get_component_level(name)))
                          for name, c_level in components.items()}
        engine.log_level = level  # sets every component's too
        for name, c_level in components.items():
            if c_level != level:
                engine.log_set_component_level(name, c_level)
        if wanted != self.sink_level:  # the sink's own level: what some logger may keep
            if self.sink:
                engine.remove_log_sink(self.sink)
                self.sink = 0
            if wanted:
                self.sink = engine.add_log_sink(self.emit, wanted)
            self.sink_level = wanted

    def emit(self, level: int, line: str) -> None:
        """The sink (the engine's worker thread, or the sending thread): one record."""
        fields = json.loads(line)
        logger = self.children.get(fields.get("component"), self.logger)
        py_level = _TO_PYTHON.get(level, logging.INFO)
        if not logger.isEnabledFor(py_level):
            return
        message = fields.pop("message", "")
        extra = {("courier_" + k if k in _RESERVED else k): v for k, v in fields.items()}
        logger.handle(logger.makeRecord(logger.name, py_level, "(courier)", 0, message, (), None, extra=extra))


def bridge_for(setting: Union[bool, str, logging.Logger, None]) -> Optional[LogBridge]:
    """The bridge ``Engine(logger=setting)`` attaches, or None: ``True`` the logger ``courier``,
    a name or a ``logging.Logger`` that one, ``False`` none, ``None`` (the default) the logger
    ``courier`` when :func:`configured` says the application has configured logging."""
    if setting is False:
        return None
    if setting is None or setting is True:
        logger = logging.getLogger("courier")
        if setting is None:
            return LogBridge(logger, exact=False) if configured(logger) else None
    elif isinstance(setting, str):
        logger = logging.getLogger(setting)
    elif isinstance(setting, logging.Logger):
        logger = setting
    else:
        raise TypeError(f"logger: expected a bool, a name or a logging.Logger, got {type(setting).__name__}")
    return LogBridge(logger)
