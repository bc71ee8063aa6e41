"""A closed client's calls each raise a ConnectionClosed of their own: one kept object raised again and again
grew its traceback by every raise's frames (and kept them alive) for as long as a caller retried."""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType

import pytest

# A server that exits at once: every call after the first finds the client closed.
EXITS = [sys.executable, "-c", "import sys; sys.exit(3)"]
RETRIES = 50
# A call's own frames down to its raise; one error raised by every call had about RETRIES times as many.
MAX_FRAMES = 12


def _frames(exc: BaseException) -> int:
    count, tb = 0, exc.__traceback__
    while tb is not None:
        count, tb = count + 1, tb.tb_next
    return count


def _raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # the test looks at what was raised
        return exc
    raise AssertionError("the call did not raise")


def test_each_call_on_a_closed_client_raises_its_own_error(impl: ModuleType) -> None:
    with impl.Client.spawn(EXITS, stderr="tail", timeout=10) as client:
        errors = [_raised(lambda: client.call("ping")) for _ in range(RETRIES)]
        errors.append(_raised(lambda: client.notify("ping")))
    assert all(isinstance(error, impl.ConnectionClosed) for error in errors)
    assert all(error.returncode == 3 for error in errors)
    assert len({id(error) for error in errors}) == len(errors)
    assert max(_frames(error) for error in errors) <= MAX_FRAMES


def test_each_call_on_a_closed_async_client_raises_its_own_error(impl: ModuleType) -> None:
    async def main() -> list[BaseException]:
        errors: list[BaseException] = []
        async with impl.AsyncClient.spawn(EXITS, stderr="tail", timeout=10) as client:
            for _ in range(RETRIES):
                with pytest.raises(impl.ConnectionClosed) as caught:
                    await client.call("ping")
                errors.append(caught.value)
        return errors

    errors = asyncio.run(main())
    assert all(error.returncode == 3 for error in errors)
    assert len({id(error) for error in errors}) == len(errors)
    assert max(_frames(error) for error in errors) <= MAX_FRAMES
