"""The synthetic enterprise before it is split into vendors: people, and the knobs every vendor shares.

Corvid Systems (``corvid.io``) acquired Lumen Analytics (``lumenanalytics.com``) on 2023-03-01.
Lumen staff kept some old-domain logins and aliases, which is one of the ways the same person looks
different across systems. Everything is drawn from one seeded ``random.Random``; nothing reads the
wall clock.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Generic, TypeVar

AS_OF = datetime(2026, 6, 30, 0, 0, 0, tzinfo=UTC)
DOMAIN = "corvid.io"
OLD_DOMAIN = "lumenanalytics.com"
TENANT_DOMAIN = "corvid.onmicrosoft.com"
ACQUISITION_DATE = date(2023, 3, 1)


def ts(moment: datetime) -> str:
    """An ISO-8601 UTC timestamp with a ``Z`` suffix, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def day(moment: date | datetime) -> str:
    """An ISO-8601 calendar date."""
    return moment.strftime("%Y-%m-%d")


HEX_DIGITS = "0123456789abcdef"


def draw_token(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters drawn from ``alphabet``, one ``rng.choice`` each."""
    return "".join(rng.choice(alphabet) for _ in range(n))


def draw_guid(rng: random.Random) -> str:
    """A GUID in the 8-4-4-4-12 form, from 32 drawn hex digits."""
    h = draw_token(rng, HEX_DIGITS, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def at(d: date, hour: int = 9, minute: int = 0) -> datetime:
    """A date as a UTC datetime at the given time of day."""
    return datetime(d.year, d.month, d.day, hour, minute, tzinfo=UTC)


@dataclass
class Person:
    """One human in HR. Vendors derive their own identifiers from these fields."""

    pid: str
    first: str
    last: str
    email: str
    handle: str
    department: str
    title: str
    site: str
    employment_type: str
    status: str
    start: date
    legal_entity: str
    manager_pid: str | None = None
    termination: date | None = None
    contract_end: date | None = None
    old_email: str | None = None
    # Free-form tags the vendor modules use to decide who gets which access.
    tags: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def left(self) -> bool:
        return self.status == "terminated"

    @property
    def acquired(self) -> bool:
        return self.old_email is not None


@dataclass
class Org:
    """State every vendor shares while they are generated, in a fixed order.

    What one vendor hands to a later one (e.g. the Okta ids SCIM pushed into AWS) is not kept here:
    each vendor returns it as a typed ``Generated.published`` value, passed on by ``generate``.
    """

    rng: random.Random
    people: list[Person] = field(default_factory=list)
    # People already used for a planted finding, per family, so plants and decoys never collide.
    claimed: set[str] = field(default_factory=set)
    # People by pid, rebuilt whenever HR has added someone since it was last built.
    _pid_index: dict[str, Person] = field(default_factory=dict, init=False, repr=False)

    def by_pid(self, pid: str) -> Person:
        if len(self._pid_index) != len(self.people):
            self._pid_index = {p.pid: p for p in self.people}
        return self._pid_index[pid]

    def pick(self, pool: list[Person], n: int, *, claim: bool = True) -> list[Person]:
        """Draw ``n`` unclaimed people from ``pool``, in a seeded order, and claim them."""
        free = [p for p in pool if p.pid not in self.claimed]
        if len(free) < n:
            raise ValueError(f"world generator: need {n} people, only {len(free)} free in pool")
        chosen = self.rng.sample(free, n)
        if claim:
            self.claimed.update(p.pid for p in chosen)
        return chosen

    def when(self, start: datetime, end: datetime) -> datetime:
        """A seeded moment between two datetimes, to the minute."""
        span = int((end - start).total_seconds() // 60)
        return start + timedelta(minutes=self.rng.randint(0, max(span, 0)))

    def hexid(self, n: int) -> str:
        return draw_token(self.rng, HEX_DIGITS, n)

    def guid(self) -> str:
        return draw_guid(self.rng)

    def token(self, alphabet: str, n: int) -> str:
        return draw_token(self.rng, alphabet, n)


Row = tuple[object, ...]
# Sequence, not list: vendor modules build rows as their tables' row types (``runner.world.tables``).
Rows = dict[str, Sequence[Row]]

Published = TypeVar("Published")


@dataclass(frozen=True)
class Generated(Generic[Published]):
    """One vendor's output: its rows per table, and what it publishes for the vendors after it."""

    rows: Rows
    published: Published
