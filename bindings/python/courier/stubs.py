"""Engine-wide stubs for the app's own tests, and HAR record and replay (the C core's stubs.c and
har.c; this module only translates).

An engine answers from its stubs instead of the network while its stub mode is not ``off``:
``Engine(stub_mode="only", stubs=[...])`` or, at run time, ``engine.stubs.mode = "only"`` and
``engine.stubs.add("GET", "/users/1", {"id": 1})``. Answers are judged
like real ones (status, validator, mapping, cache, events); what the stubs saw is in
``engine.stubs.requests``. ``engine.record_har(path)`` records real traffic into a HAR 1.2 file and
``engine.stubs.replay_har(path)`` answers from it. The pytest fixture ``courier_stubs``
(:mod:`courier.pytest_plugin`) gives a test an engine with stubs.
"""
from __future__ import annotations

import ctypes
import json as _json
import os
from ctypes import CFUNCTYPE, byref, c_char_p, c_int, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

from . import _callbacks as cb
from ._enums import CEnum
from ._lib import ERROR, lib
from .errors import CourierError, InvalidArgument, check, coerce, lib_code
from .request import HeadersArg, _b, _opt, _pairs
from .response import Answer

__all__ = ["StubMode", "UrlMatch", "StubAnswer", "Stub", "StubbedRequest", "Stubs"]


class StubMode(CEnum):
    """What an engine does with its stubs (``courier_stub_mode``)."""
    __c_enum__ = ("courier_stub_mode", "COURIER_STUBS_")
    OFF = 0           #: stubs are not consulted, nothing is recorded (the default)
    ONLY = 1          #: an unmatched request fails with :class:`courier.NoStub`; nothing is sent
    PASS_THROUGH = 2  #: an unmatched request goes to the network


class UrlMatch(CEnum):
    """How a stub's URL pattern is compared (``courier_url_match``). A pattern starting with ``/``
    (a regular expression: ``^/``) is compared with the URL's path and query, any other with the
    whole URL."""
    __c_enum__ = ("courier_url_match", "COURIER_URL_")
    EXACT = 0   #: byte for byte
    PREFIX = 1  #: the URL starts with the pattern
    GLOB = 2    #: fnmatch(3): ``*`` any run (slashes included), ``?`` one character
    REGEX = 3   #: a POSIX extended regular expression searched in the URL


@dataclass
class StubAnswer:
    """One answer of a stub: a response (``status``, ``headers``, a body as ``body`` bytes/text,
    ``json`` or a ``file``), or a failure (``error``: a code, its name, or an error class), after
    ``delay`` seconds."""
    status: int = 200
    body: Union[bytes, str, None] = None
    content_type: Optional[str] = None
    headers: HeadersArg = None
    json: Any = None
    file: Union[str, os.PathLike, None] = None
    error: Any = None
    delay: Optional[float] = None

    @classmethod
    def text(cls, text: str, status: int = 200, **kw: Any) -> "StubAnswer":
        """A text body (``text/plain; charset=utf-8``)."""
        return cls(status=status, body=text, content_type="text/plain; charset=utf-8", **kw)

    @classmethod
    def of_json(cls, value: Any, status: int = 200, **kw: Any) -> "StubAnswer":
        """A JSON body made from a Python value (``application/json``)."""
        return cls(status=status, json=value, **kw)

    def _add_to(self, stub: int) -> None:
        L = lib
        if self.error is not None:
            code = self.error
            if isinstance(code, type):
                code = code.CODE
            elif isinstance(code, str):
                code = lib_code(code)
            check(L.courier_stub_add_error(stub, int(code)), arg="error")
        elif self.file is not None:
            check(L.courier_stub_add_file(stub, int(self.status), _b(os.fspath(self.file))), arg="file")
        else:
            body, ctype = self.body, self.content_type
            if self.json is not None:
                body = _json.dumps(self.json, separators=(",", ":"))
                ctype = ctype or "application/json"
            data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
            check(L.courier_stub_add_response(stub, int(self.status), data if data else None, len(data), _opt(ctype)),
                  arg="status")
        for name, value in _pairs(self.headers):
            check(L.courier_stub_add_header(stub, _b(name), _b(value)), arg="headers")
        if self.delay is not None:
            check(L.courier_stub_set_delay_ms(stub, int(round(self.delay * 1000))), arg="delay")


def _answer(a: Any) -> StubAnswer:
    """An answer from what a stub was given: a StubAnswer, a :class:`courier.Answer`, a status
    (int), a body (str or bytes), or a value sent as JSON (dict or list)."""
    if isinstance(a, StubAnswer):
        return a
    if isinstance(a, Answer):
        return StubAnswer(status=a.status, body=a.body, content_type=a.content_type, headers=a.headers, json=a.json)
    if isinstance(a, bool):
        raise TypeError("answers: a bool is not an answer")
    if isinstance(a, int):
        return StubAnswer(status=a)
    if isinstance(a, (str, bytes)):
        return StubAnswer(body=a)
    if isinstance(a, (dict, list)):
        return StubAnswer(json=a)
    raise TypeError(f"answers: expected courier.StubAnswer, an int status, a str/bytes body or a dict/list, got {type(a).__name__}")


@dataclass
class Stub:
    """A stub: what it matches (``method``: None for any; ``url``: a pattern, None for any, compared
    as ``match`` says; ``headers``: lines the request must carry, a value of None meaning any;
    ``when``: a predicate ``fn(StubbedRequest) -> bool`` asked last, on the sending thread) and its
    ``answers``, one per attempt (a retry takes the next); after the last, the last answers again.
    An answer may be a :class:`StubAnswer`, a :class:`courier.Answer`, a status (int), a body (str
    or bytes) or a value sent as JSON (a dict; a list is a list of answers, so a JSON array goes in
    ``StubAnswer(json=[...])``)."""
    method: Optional[str] = None
    url: Optional[str] = None
    answers: Union[StubAnswer, int, str, bytes, Sequence[Union[StubAnswer, int, str, bytes]]] = field(default_factory=list)
    match: Union[UrlMatch, str, int] = UrlMatch.EXACT
    headers: Union[Sequence[tuple[str, Optional[str]]], dict[str, Optional[str]], None] = None
    when: Optional[Callable[["StubbedRequest"], bool]] = None

    def _answers(self) -> list[StubAnswer]:
        a = self.answers
        if not isinstance(a, (list, tuple)):
            return [_answer(a)]
        return [_answer(x) for x in a]

    def _make(self, engine: Any) -> int:
        """A new C stub (``courier_stub_free`` it). ``engine`` receives the predicate's exceptions."""
        answers = self._answers()
        if not answers:
            raise InvalidArgument("answers: a stub needs an answer")
        out = c_void_p()
        err = ERROR()
        check(lib.courier_stub_new(byref(out), _opt(self.method), _opt(self.url),
                                   int(coerce(UrlMatch, self.match, "match")), byref(err)), err)
        stub = out.value
        try:
            items = self.headers.items() if isinstance(self.headers, dict) else (self.headers or ())
            for name, value in items:
                check(lib.courier_stub_match_header(stub, _b(name), _opt(value)), arg="headers")
            if self.when is not None:
                key = cb.register(cb.Slot(self.when, None, engine))
                check(lib.courier_stub_set_predicate(stub, c_predicate, key, cb.user_free), arg="when")
            for a in answers:
                a._add_to(stub)
            return stub
        except BaseException:
            lib.courier_stub_free(stub)
            raise


class StubbedRequest:
    """A request the stubs saw (a copy): ``method``, ``url``, ``headers`` (a list of (name, value)
    lines as the engine set them), ``body`` (bytes, or None), ``stub_id`` (None when none matched)."""

    __slots__ = ("method", "url", "headers", "body", "stub_id")

    def __init__(self, ptr: int) -> None:
        L = lib
        self.method: str = L.courier_stub_request_method(ptr).decode()
        self.url: str = L.courier_stub_request_url(ptr).decode()
        lines = []
        name, value = c_char_p(), c_char_p()
        for i in range(L.courier_stub_request_header_count(ptr)):
            if L.courier_stub_request_header_at(byref(name), byref(value), ptr, i) == 0:
                lines.append(((name.value or b"").decode(), (value.value or b"").decode()))
        self.headers: list[tuple[str, str]] = lines
        n = c_size_t()
        p = L.courier_stub_request_body(ptr, byref(n))
        self.body: Optional[bytes] = ctypes.string_at(p, n.value) if p else None
        sid = L.courier_stub_request_stub_id(ptr)
        self.stub_id: Optional[int] = sid or None

    def header(self, name: str) -> Optional[str]:
        """The first header line of that name (case-insensitive), or None."""
        low = name.lower()
        return next((v for n, v in self.headers if n.lower() == low), None)

    @property
    def text(self) -> Optional[str]:
        """The body as UTF-8 text, or None."""
        return self.body.decode("utf-8", "replace") if self.body is not None else None

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body or b"null")

    def __repr__(self) -> str:
        return f"StubbedRequest({self.method} {self.url}, stub_id={self.stub_id})"


class Stubs:
    """An engine's stubs (``engine.stubs``): add and remove them, the mode, the record of the
    requests they saw, HAR replay. Any thread."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    @property
    def mode(self) -> StubMode:
        """The stub mode (``"off"``, ``"only"``, ``"pass-through"``); a change applies to later sends."""
        return StubMode(lib.courier_engine_stub_mode(self._engine._handle()))

    @mode.setter
    def mode(self, mode: Union[StubMode, str, int]) -> None:
        check(lib.courier_engine_set_stub_mode(self._engine._handle(),
                                               int(coerce(StubMode, mode, "mode"))), arg="mode")

    def add(self, stub: Union[Stub, str, None] = None, url: Optional[str] = None, *answers: Any, **kw: Any) -> int:
        """Adds a stub and returns its id: ``add(Stub(...))``, or ``add("GET", "/users/1",
        StubAnswer.of_json({...}), match="prefix")``. The stub added last that matches answers."""
        if not isinstance(stub, Stub):
            stub = Stub(stub, url, list(answers), **kw)
        c = stub._make(self._engine)
        try:
            out = c_uint64()
            check(lib.courier_engine_add_stub(byref(out), self._engine._handle(), c), arg="stub")
            return out.value
        finally:
            lib.courier_stub_free(c)

    def remove(self, stub_id: int) -> bool:
        """Removes a stub; False when there is none of that id."""
        return lib.courier_engine_remove_stub(self._engine._handle(), int(stub_id)) == 0

    def clear(self) -> None:
        """Removes every stub (the record stays)."""
        check(lib.courier_engine_clear_stubs(self._engine._handle()))

    @property
    def requests(self) -> list[StubbedRequest]:
        """The requests the stubs saw, in order (each retry a stub answered too)."""
        h = self._engine._handle()
        out = []
        p = c_void_p()
        for i in range(lib.courier_engine_stub_request_count(h)):
            if lib.courier_engine_stub_request_at(byref(p), h, i) != 0:
                break
            try:
                out.append(StubbedRequest(p.value))
            finally:
                lib.courier_stub_request_free(p.value)
        return out

    def clear_requests(self) -> None:
        """Empties the record."""
        check(lib.courier_engine_clear_stub_requests(self._engine._handle()))

    def replay_har(self, path: Union[str, os.PathLike]) -> int:
        """Adds a HAR 1.2 file's entries as stubs (one per method and URL, matched exactly; its
        responses in the file's order) and returns how many. The mode is not changed. Raises
        :class:`courier.NotFound` (no file) or :class:`courier.JsonError` (not a HAR)."""
        n = c_size_t()
        err = ERROR()
        check(lib.courier_engine_replay_har(byref(n), self._engine._handle(), _b(os.fspath(path)), byref(err)), err)
        return n.value


STUB_PREDICATE_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)


def _predicate(request: Optional[int], user: Optional[int]) -> int:
    """Runs on the sending thread inside the send; an exception is kept and re-raised by the send
    (the stub then does not match)."""
    slot = cb.lookup(user)
    if slot is None or request is None:
        return 0
    try:
        return 1 if slot.fn(StubbedRequest(request)) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


c_predicate = STUB_PREDICATE_FN(_predicate)
_ = CourierError
