"""Which message an error with ``id: null`` answers (:class:`_Ledger`): the messages a stream client wrote and
that are unanswered, in the order of writing, and the errors held until they can belong to one only. One per
client, the one owner of that state; every client that writes a stream (``Client``, ``AsyncClient``, the
WebSocket client) records in it what it writes (``written``, ``withdrawn``), what it gives up (``abandoned``) and
what it reads (``answered``, ``refused``). The rule: docs/semantics.md, "What a stream client sends, and errors
with ``id: null``"."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Iterable, Sequence

from rpcwire._contract import Core
from rpcwire._types import Response

logger: logging.Logger = logging.getLogger("rpcwire.client")

_LEDGER = 4096  # calls and batches written and unanswered that an id-null error is matched against
_HELD = 64  # id-null errors waiting until they can belong to one call only

# A message this small and shallow is read by any server (none refuses it unread); a batch may not be.
_READABLE_BYTES = 64 * 1024
_READABLE_DEPTH = 32


def _refusable(core: Core, line: bytes, batch: bool) -> bool:
    """Whether a server with sane limits could refuse ``line`` unread: a batch, a message over
    ``_READABLE_BYTES``, or one nested deeper than ``_READABLE_DEPTH`` (counted by the client's ``core``)."""
    if batch or len(line) > _READABLE_BYTES:
        return True
    return core._nests_deeper(line, _READABLE_DEPTH)


class _Sent:
    """One message written (a call or a batch until it is answered; a notification or an answer of the
    client's until later ones are): its ids, its place in the order of writing, whether a server could
    refuse it unread."""

    __slots__ = ("abandoned", "ids", "seq", "suspect")

    def __init__(self, seq: int, ids: tuple[int, ...], suspect: bool) -> None:
        self.seq = seq
        self.ids = ids
        self.suspect = suspect
        self.abandoned = False


class _Ledger:
    """Which message an error with ``id: null`` answers (``-32700``/``-32600`` for a message the server
    could not read an id in: too deep, too long, a batch over its limit).

    A server reads a stream's messages in the order they were written and answers one it cannot read at
    once, before it reads the next, so that error comes before any answer to a later message. So it can
    only answer a message written after the last one answered (the *frontier*) and not answered itself:
    a call, a batch, a notification or an answer of the client's. Of those, the ones a server could
    refuse unread (*suspects*: a batch, over 64 KiB, nested deeper than 32) are the candidates, or all of
    them when none is. One candidate: the error is its answer (a call or every entry of a batch fails
    with it; for a notification it is logged). Several: the error is held until answers to the others
    leave one (with several errors held: once as many candidates are left as errors, in order), so that
    it never fails a call the server read; a call it may belong to ends at its deadline meanwhile.

    Places in the order of writing count by two (:meth:`position`), so that a message whose entry is made only
    after it was written (a lone call's, once something else comes before its answer) takes the place between
    the one written last before it and the next (``written(..., at=)``); calls recorded in a group after their
    answers may have come (:meth:`caught_up`) take theirs after every message recorded before them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._frontier = 0
        self._by_id: dict[int, _Sent] = {}
        self._calls: dict[int, _Sent] = {}  # calls and batches unanswered, by seq, in the order written
        self._others: collections.deque[_Sent] = collections.deque()  # notifications and answers, in order
        self._held: list[tuple[Response, set[_Sent]]] = []

    def position(self) -> int:
        """The place of the message written last (read without the lock: writers hold the client's output)."""
        return self._seq

    def written(self, ids: Sequence[int], suspect: bool, at: int | None = None) -> _Sent:
        """A message is being written, after every one before it (``ids``: the calls it makes, if any); or,
        ``at``, one that was written when :meth:`position` was ``at``: before those written since."""
        with self._lock:
            if at is None or at >= self._seq:
                self._seq += 2
                seq = self._seq
            else:  # (rare: what was written since its write is reordered behind it)
                seq = at + 1
            sent = _Sent(seq, tuple(ids), suspect)
            if not ids:
                self._others.append(sent)
                if seq != self._seq:
                    self._others = collections.deque(sorted(self._others, key=lambda other: other.seq))
                if len(self._others) > _LEDGER:  # a bound: the oldest is no longer a candidate
                    self._others.popleft()
                return sent
            for id_ in ids:
                self._by_id[id_] = sent
            self._calls[seq] = sent
            if seq != self._seq:
                self._calls = dict(sorted(self._calls.items()))
            while len(self._calls) > _LEDGER:
                self._forget(next(iter(self._calls.values())))
            return sent

    def caught_up(self, unrecorded: dict[int, list[_Sent]], passed: int) -> None:
        """Calls written after every message recorded here and not recorded themselves, as :meth:`written` would
        have (none a suspect): ``unrecorded``, id -> the list its entry goes into, in the order of writing (the
        order of their ids); and ``passed``, the greatest id of such a call answered since (0: none), whose answer
        moved the frontier past everything written before it, the calls of ``unrecorded`` with a smaller id
        included. A client that records its short calls so, lazily, pays nothing here for those answered
        before anything else comes (``AsyncClient``)."""
        with self._lock:
            for id_, sent in unrecorded.items():
                if passed and id_ > passed:  # the answered call's place: the frontier moves to it
                    self._seq += 2
                    self._advance(self._seq)
                    passed = 0
                self._seq += 2
                entry = _Sent(self._seq, (id_,), False)
                self._by_id[id_] = entry
                self._calls[self._seq] = entry
                sent.append(entry)
            if passed:
                self._seq += 2
                self._advance(self._seq)
            while len(self._calls) > _LEDGER:
                self._forget(next(iter(self._calls.values())))

    def withdrawn(self, sent: _Sent) -> None:
        """Nothing of it was written after all (its deadline passed first)."""
        with self._lock:
            self._forget(sent)
            with contextlib.suppress(ValueError):
                self._others.remove(sent)
            for _, candidates in self._held:
                candidates.discard(sent)

    def abandoned(self, ids: Iterable[int]) -> None:
        """Its caller stopped waiting (a timeout, an interrupt): it stays a candidate until it is answered
        or the frontier passes it, as the server may have refused it (and known by its id while an error held
        may be its, so that its answer still tells where that error goes)."""
        with self._lock:
            for id_ in ids:
                sent = self._by_id.get(id_)
                if sent is not None:
                    sent.abandoned = True
                    if sent.seq <= self._frontier and not self._names(sent):
                        self._forget(sent)

    def answered(self, id_: int) -> list[tuple[_Sent, Response]]:
        """An answer naming ``id_`` arrived; the held errors that it leaves with one message to go to."""
        with self._lock:
            sent = self._by_id.pop(id_, None)
            if sent is None:
                return []
            if self._calls.pop(sent.seq, None) is not None:
                for other in sent.ids:  # a batch is answered by one array: the rest of it with this entry
                    self._by_id.pop(other, None)
                self._advance(sent.seq)
            if not self._held:
                return []
            for _, candidates in self._held:
                candidates.discard(sent)
            return self._matched()

    def refused(self, error: Response) -> list[tuple[_Sent, Response]]:
        """An error with ``id: null`` arrived: the message it answers, if it can be told yet."""
        with self._lock:
            frontier = self._frontier
            candidates = [sent for seq, sent in self._calls.items() if seq > frontier]
            candidates += [sent for sent in self._others if sent.seq > frontier]
            suspects = {sent for sent in candidates if sent.suspect}
            if not candidates:
                logger.warning("dropped an error with id null that answers no message of the client's: %s", error.error)
                return []
            self._held.append((error, suspects or set(candidates)))
            if len(self._held) > _HELD:
                dropped, _ = self._held.pop(0)
                logger.warning("dropped an error with id null that could not be matched to a call: %s", dropped.error)
            return self._matched()

    def _advance(self, seq: int) -> None:
        """The frontier moves to ``seq``: what it passes is no candidate any more."""
        self._frontier = max(self._frontier, seq)
        while self._others and self._others[0].seq <= self._frontier:
            self._others.popleft()
        while self._calls:  # callers gone, passed by the frontier: forgotten (unless a held error may be theirs)
            first = next(iter(self._calls.values()))
            if first.seq > self._frontier or not first.abandoned or self._names(first):
                break
            self._forget(first)

    def _names(self, sent: _Sent) -> bool:
        """Whether a held error may answer ``sent``: then its answer, when it comes, tells that error where it
        goes, so the entry is kept (by its id) though its caller is gone and the frontier passed it."""
        return any(sent in candidates for _, candidates in self._held)

    def _matched(self) -> list[tuple[_Sent, Response]]:
        """Held errors that now have one message to go to (taken out, with their messages)."""
        matched: list[tuple[_Sent, Response]] = []
        while self._held:
            left = set().union(*(candidates for _, candidates in self._held))
            if len(left) == len(self._held):  # as many messages left as errors: each its own, in order
                pairs = list(zip(sorted(left, key=lambda sent: sent.seq), [e for e, _ in self._held], strict=True))
                self._held.clear()
            else:
                single = next(((e, c) for e, c in self._held if len(c) <= 1), None)
                if single is None:
                    break
                self._held.remove(single)
                if not single[1]:
                    logger.warning("dropped an error with id null that answers no message left: %s", single[0].error)
                    continue
                pairs = [(next(iter(single[1])), single[0])]
            for sent, error in pairs:
                self._forget(sent)
                with contextlib.suppress(ValueError):
                    self._others.remove(sent)
                self._advance(sent.seq)
                for _, candidates in self._held:
                    candidates.discard(sent)
                if sent.ids:
                    matched.append((sent, error))
                else:
                    logger.warning("the server refused a notification (or an answer) of the client's: %s", error.error)
        return matched

    def _forget(self, sent: _Sent) -> None:
        self._calls.pop(sent.seq, None)
        for id_ in sent.ids:
            if self._by_id.get(id_) is sent:
                del self._by_id[id_]
