"""How many examples a Hypothesis property runs: the profile's count (tests/conftest.py registers ``ci``, the
default, and ``deep``, which ``make test-deep`` loads through ``HYPOTHESIS_PROFILE``), times the property's weight.

A property says its weight, not a count: ``@examples(5)`` over a check that costs a millisecond, ``@examples(0.5)``
over one that serves thirty entries. A ``max_examples`` written on a test would hold in every profile, so the deep
run would not go deeper there.
"""

from __future__ import annotations

from hypothesis import settings


def examples(weight: float = 1) -> settings:
    """Settings of the loaded profile with ``weight`` times its ``max_examples`` (at least one)."""
    return settings(settings.default, max_examples=max(1, round(settings.default.max_examples * weight)))
