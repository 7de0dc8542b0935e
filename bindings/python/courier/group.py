"""Groups: batches and chains of requests (``courier_group_*``), completing once.

A batch runs its members concurrently (at most ``max_in_flight`` at once; with ``fail_fast`` the
first failure cancels the rest); a chain runs them one after another, and a member may be a
function that makes its request from the previous member's result when its turn comes. The core
decides all of it; this module converts the members and the results.

>>> with courier.Engine(base_url=url) as engine:
...     result = engine.batch([courier.Request("GET", "/json"), courier.Request("GET", "/echo")])
...     [m.response.status for m in result]

Every member is an ordinary request (retry, cache, mock, monitors apply), so each
:class:`GroupMember` has its request id, its response or its error.
"""
from __future__ import annotations

import threading
from ctypes import CFUNCTYPE, POINTER, byref, c_int, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from . import _callbacks as cb
from ._enums import CEnum
from ._lib import ERROR, EngineHandle, lib
from .errors import InvalidArgument, Timeout, check, coerce, make_error
from .request import Request
from .response import Response

__all__ = ["Group", "GroupMode", "GroupFlag", "GroupMember", "GroupResult", "Member"]


class GroupMode(CEnum):
    """``courier_group_mode``."""
    __c_enum__ = ("courier_group_mode", "COURIER_GROUP_")
    BATCH = 0
    CHAIN = 1


class GroupFlag(CEnum):
    """``courier_group_flag``: member flags."""
    __c_enum__ = ("courier_group_flag", "COURIER_GROUP_")
    CONTINUE_ON_FAILURE = 1


#: A member as the group functions take it: a :class:`courier.Request`, a ``(method, url)`` pair,
#: or (in a chain) a function ``build(previous) -> Request | None`` called when its turn comes with
#: the previous member's :class:`GroupMember` (None for the first), returning None to skip.
Member = Union[Request, "tuple[str, str]", Callable[[Optional["GroupMember"]], Optional[Request]]]


@dataclass
class GroupMember:
    """One member's result: its index, request id (0 when it was never sent), its ``response``
    (None when none came back, or its build function skipped it) and its ``error`` (None when it
    succeeded; an HTTP status failure has both)."""
    index: int
    request_id: int
    response: Optional[Response]
    error: Optional[BaseException]

    @property
    def ok(self) -> bool:
        return self.error is None

    def result(self) -> Optional[Response]:
        """The response, or raises the member's error."""
        if self.error is not None:
            raise self.error
        return self.response


@dataclass
class GroupResult:
    """A completed group: ``members`` in index order; ``error`` is the group's failure (the one
    that stopped a chain or a fail-fast batch, the lowest-index failure of a plain batch,
    :class:`courier.Cancelled` when cancelled; None when no counted member failed) and
    ``failed_index`` its member."""
    members: list[GroupMember] = field(default_factory=list)
    error: Optional[BaseException] = None
    failed_index: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> "GroupResult":
        if self.error is not None:
            raise self.error
        return self

    @property
    def responses(self) -> list[Optional[Response]]:
        return [m.response for m in self.members]

    def __iter__(self) -> Iterator[GroupMember]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def __getitem__(self, index: int) -> GroupMember:
        return self.members[index]


GROUP_BUILD_FN = CFUNCTYPE(c_int, c_void_p, c_size_t, c_int, c_void_p, POINTER(c_void_p), c_void_p)
GROUP_MEMBER_FN = CFUNCTYPE(None, c_void_p, c_size_t, c_int, c_void_p, c_void_p)
GROUP_DONE_FN = CFUNCTYPE(None, c_void_p, c_int, c_int64, c_void_p)


class Group:
    """A ``courier_group`` on an engine. Add members, :meth:`start`, then :meth:`wait` (or give
    ``start`` a callback); :meth:`cancel` from any thread. Close it (or use ``with``) to release
    it: closing a running group cancels it. :meth:`courier.Engine.batch` and
    :meth:`courier.Engine.chain` do all of this in one call; :class:`courier.AsyncEngine` awaits
    groups.

    ``on_member(member)`` (optional) is told each member's result as it is set, on the thread that
    moves the group (mostly the engine's worker): it must not block."""

    def __init__(self, engine: EngineHandle, mode: Union[GroupMode, str, int] = GroupMode.BATCH, *,
                 fail_fast: bool = False, max_in_flight: int = 0,
                 on_member: Optional[Callable[[GroupMember], None]] = None) -> None:
        self._engine = engine
        self.mode = coerce(GroupMode, mode, "mode")
        self._lock = threading.Lock()  # the results; C calls are never made holding it
        self._ptr_lock = threading.Lock()  # the handle's lifetime: cancel against close
        self._done = threading.Event()
        self._result: Optional[GroupResult] = None
        self._waiters: list[Callable[[GroupResult], None]] = []
        self._by_request: dict[int, BaseException] = {}
        self._by_index: dict[int, BaseException] = {}
        self._loose: list[BaseException] = []
        out = c_void_p()
        check(lib.courier_group_new(byref(out), engine._handle(), int(self.mode)), arg="mode")
        self._ptr: Optional[int] = out.value
        try:
            if fail_fast:
                check(lib.courier_group_set_fail_fast(self._ptr, 1))
            if max_in_flight:
                check(lib.courier_group_set_max_in_flight(self._ptr, int(max_in_flight)), arg="max_in_flight")
            if on_member is not None:
                key = cb.register(cb.Slot(on_member, self, engine, self))
                check(lib.courier_group_set_member_callback(self._ptr, _member, key, cb.user_free))
        except BaseException:
            self.close()
            raise

    # where the callbacks of members keep their exceptions (see courier._callbacks)
    @property
    def engine(self) -> EngineHandle:
        return self._engine

    def keep(self, exc: BaseException, request_id: int = 0) -> None:
        with self._lock:
            if request_id:
                self._by_request.setdefault(request_id, exc)
            else:
                self._loose.append(exc)

    def _h(self) -> int:
        if not self._ptr:
            raise InvalidArgument("the group is closed")
        return self._ptr

    def add(self, member: Member, url: Optional[str] = None, *, continue_on_failure: bool = False,
            **options: Any) -> int:
        """Appends a member (see :data:`Member`; or a method with ``url`` and request options,
        as :meth:`courier.Engine.send` takes them). ``continue_on_failure``: its failure neither
        stops a chain nor fails the group. Returns its index."""
        flags = int(GroupFlag.CONTINUE_ON_FAILURE) if continue_on_failure else 0
        index = c_size_t()
        if callable(member) and not isinstance(member, Request):
            key = cb.register(cb.Slot(member, self, self._engine, self))
            check(lib.courier_group_add_built(byref(index), self._h(), _build, key, cb.user_free, flags))
            return index.value
        req = _request(member, url, options)
        creq = req._build(self, self._engine)
        check(lib.courier_group_add(byref(index), self._h(), creq, flags))  # takes creq in every case
        return index.value

    def start(self, callback: Optional[Callable[[GroupResult], None]] = None) -> "Group":
        """Starts the group. ``callback(result)`` (optional) runs once when it completes, on the
        thread that completes it (the engine's worker, or this one when nothing needed the
        network). Returns the group."""
        if callback is not None:
            self._waiters.append(callback)
        key = cb.register(self)
        code = lib.courier_group_start(self._h(), _done, key, cb.user_free)
        check(code)
        return self

    def cancel(self) -> bool:
        """Cancels the group (members on the wire complete with :class:`courier.Cancelled`, the
        rest are never sent). False when it has already completed. Any thread."""
        with self._ptr_lock:
            ptr = self._ptr
            if not ptr or self._done.is_set():
                return False
            return lib.courier_group_cancel(ptr) == 0

    def wait(self, timeout: Optional[float] = None) -> GroupResult:
        """Waits for the group to complete (the GIL is released meanwhile) and returns its result;
        raises :class:`courier.Timeout` (a ``TimeoutError``) when ``timeout`` passes first."""
        if not self._done.wait(timeout):
            raise Timeout("the group did not complete in time")
        assert self._result is not None
        return self._result

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def __len__(self) -> int:
        return int(lib.courier_group_count(self._h()))

    def close(self) -> None:
        """Releases the group (cancelling it if it runs). The result stays readable."""
        with self._ptr_lock:
            ptr, self._ptr = self._ptr, None
            if ptr:
                lib.courier_group_free(ptr)

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    # -- from the trampolines ----------------------------------------------------------------------
    def _member_result(self, g: int, index: int, take: bool) -> GroupMember:
        code, rid, err = c_int(), c_uint64(), ERROR()
        resp_ptr = c_void_p()
        lib.courier_group_result(byref(code), byref(resp_ptr), byref(rid), g, index, byref(err))
        if take:
            owned = lib.courier_group_take_response(g, index)
            resp = Response(owned) if owned else None
        else:
            resp = Response._borrow(resp_ptr.value) if resp_ptr.value else None
        with self._lock:  # an exception a callback of this member raised comes first
            exc = self._by_index.get(index) or (self._by_request.get(rid.value) if rid.value else None)
        if exc is None and code.value != 0:
            exc = make_error(code.value, err, resp)
        return GroupMember(index, rid.value, resp, exc)

    def _complete(self, g: int, code: int, failed_index: int) -> None:
        members = [self._member_result(g, i, True) for i in range(lib.courier_group_count(g))]
        error: Optional[BaseException] = None
        if code != 0:
            if 0 <= failed_index < len(members) and members[failed_index].error is not None:
                error = members[failed_index].error
            else:
                error = make_error(code)
        elif self._loose:
            error = self._loose[0]
        self._result = GroupResult(members, error, failed_index if failed_index >= 0 else None)
        self._done.set()
        for fn in self._waiters:
            try:
                fn(self._result)
            except BaseException as e:  # nothing waits for it: printed
                cb.orphan(e)


def _request(member: Any, url: Optional[str], options: dict[str, Any]) -> Request:
    if isinstance(member, Request):
        if url is not None or options:
            raise TypeError("add(Request) takes no other request arguments")
        return member
    if isinstance(member, tuple):
        return Request(*member, **options)
    if isinstance(member, str):
        return Request(member, url or "", **options)
    raise TypeError(f"a group member is a courier.Request, (method, url) or a function, not {type(member).__name__}")


def _build_tramp(g: Optional[int], index: int, prev_code: int, prev_response: Optional[int], out: Any,
                 user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    group: Group = slot.extra
    try:
        prev = None
        if index > 0 and group.mode == GroupMode.CHAIN:
            prev = group._member_result(g or 0, index - 1, False)
        req = slot.fn(prev)
        if prev is not None and prev.response is not None:
            prev.response._release()
        if req is None:
            return 0
        out[0] = _request(req, None, {})._build(group, group.engine)
        return 0
    except BaseException as e:
        with group._lock:
            group._by_index.setdefault(index, e)
        return cb.code_of(e)


def _member_tramp(g: Optional[int], index: int, code: int, response: Optional[int], user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None:
        return
    group: Group = slot.extra
    member = group._member_result(g or 0, index, False)
    try:
        slot.fn(member)
    except BaseException as e:
        group.keep(e)
    finally:
        if member.response is not None:
            member.response._release()


def _done_tramp(g: Optional[int], code: int, failed_index: int, user: Optional[int]) -> None:
    group = cb.lookup(user)
    if group is None:  # pragma: no cover
        return
    try:
        group._complete(g or 0, code, failed_index)
    except BaseException as e:  # pragma: no cover - _complete guards its callbacks
        cb.orphan(e)


_build = GROUP_BUILD_FN(_build_tramp)
_member = GROUP_MEMBER_FN(_member_tramp)
_done = GROUP_DONE_FN(_done_tramp)


def run(engine: EngineHandle, mode: GroupMode, members: Sequence[Member], *, fail_fast: bool = False,
        max_in_flight: int = 0, continue_on_failure: bool = False,
        on_member: Optional[Callable[[GroupMember], None]] = None,
        callback: Optional[Callable[[GroupResult], None]] = None) -> Group:
    """A started group of ``members`` (what Engine.batch/chain and AsyncEngine build on)."""
    group = Group(engine, mode, fail_fast=fail_fast, max_in_flight=max_in_flight, on_member=on_member)
    try:
        for m in members:
            group.add(m, continue_on_failure=continue_on_failure)
        return group.start(callback)
    except BaseException:
        group.close()
        raise
