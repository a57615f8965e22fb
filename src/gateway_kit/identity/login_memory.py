"""`LoginMemory`: what one process keeps in memory of ended cookie logins: the answers for the
logins asked about lately, `size` of them at most.

Keeping every ended login would cost memory a client can spend at will: a login and a logout
take it milliseconds, and the row of an ended login lives as long as a cookie may (31 days by
default). Memory keeps the answer (ended, and when; or not ended) for the `size` logins asked
about most recently; any other login is asked of the database, whose rows every process writes
and reads, so an ended login is refused whatever memory holds. A kept answer is kept current
with each change the owner reads (`changed`), and so is the answer of a login being asked of
the database meanwhile (`asking` ... `answered`): an end committed while the question is under
way is never lost. Logins in `pinned` (those a stream or a socket holds open) are never the
ones let go.

Not thread-safe: its owner, `CredentialView`, calls it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container


class Unknown:
    """Memory holds no answer for the login: ask the database."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()

EndedAt = float | None  # when the login last ended; None: not ended


def later(a: EndedAt, b: EndedAt) -> EndedAt:
    if a is None:
        return b
    return a if b is None else max(a, b)


class LoginMemory:
    """:param size: answers kept, at most (beside those of `pinned` logins).
    :param pinned: credential ids whose answer is kept however many others come.
    """

    def __init__(self, size: int, pinned: Container[str] = ()) -> None:
        self.size = size
        self.pinned = pinned
        self._answers: OrderedDict[str, EndedAt] = OrderedDict()  # oldest asked first
        # Logins being asked of the database: how many questions, and what changed meanwhile.
        self._asking: dict[str, tuple[int, EndedAt]] = {}

    def __len__(self) -> int:
        return len(self._answers)

    def known(self, credential_id: str) -> EndedAt | Unknown:
        """The answer kept for `credential_id` (now the most recently asked), or `UNKNOWN`."""
        answer = self._answers.get(credential_id, UNKNOWN)
        if not isinstance(answer, Unknown):
            self._answers.move_to_end(credential_id)
        return answer

    def peek(self, credential_id: str) -> EndedAt | Unknown:
        """The answer kept for `credential_id`, or `UNKNOWN`, leaving the order as it is."""
        return self._answers.get(credential_id, UNKNOWN)

    def asking(self, credential_id: str) -> None:
        """`credential_id` is being asked of the database: note the changes read meanwhile."""
        count, ended_at = self._asking.get(credential_id, (0, None))
        self._asking[credential_id] = (count + 1, ended_at)

    def answered(self, credential_id: str, ended_at: EndedAt) -> EndedAt:
        """The database's answer: kept, merged with what changed while it was asked."""
        count, meanwhile = self._asking.pop(credential_id, (1, None))
        if count > 1:
            self._asking[credential_id] = (count - 1, meanwhile)
        return self.noted(credential_id, later(ended_at, meanwhile))

    def gave_up(self, credential_id: str) -> None:
        """The question about `credential_id` failed: nothing was learned."""
        count, meanwhile = self._asking.pop(credential_id, (1, None))
        if count > 1:
            self._asking[credential_id] = (count - 1, meanwhile)

    def changed(self, credential_id: str, ended_at: float) -> EndedAt | Unknown:
        """A change read from the database: the login ended at `ended_at`. Kept if its login's
        answer is (or is being asked); returns what memory held before."""
        before = self._answers.get(credential_id, UNKNOWN)
        if not isinstance(before, Unknown):
            self._answers[credential_id] = later(before, ended_at)
        asked = self._asking.get(credential_id)
        if asked is not None:
            self._asking[credential_id] = (asked[0], later(asked[1], ended_at))
        return before

    def noted(self, credential_id: str, ended_at: EndedAt) -> EndedAt:
        """Keep `ended_at` as what memory knows of `credential_id` (a later end stands)."""
        kept = later(self._answers.pop(credential_id, None), ended_at)
        self._answers[credential_id] = kept
        self._let_go()
        return kept

    def forget_before(self, cutoff: float) -> None:
        """Let go of the logins that ended before `cutoff` (their rows are deleted)."""
        for credential_id in [
            c for c, at in self._answers.items() if at is not None and at < cutoff
        ]:
            del self._answers[credential_id]

    def _let_go(self) -> None:
        """The least recently asked answers beyond `size`, pinned ones aside."""
        excess = len(self._answers) - self.size
        if excess <= 0:
            return
        going, held = [], []
        for credential_id in self._answers:
            if credential_id in self.pinned:
                held.append(credential_id)
            else:
                going.append(credential_id)
                if len(going) == excess:
                    break
        for credential_id in going:
            del self._answers[credential_id]
        for credential_id in held:  # out of the way of the next scan
            self._answers.move_to_end(credential_id)
