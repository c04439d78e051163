"""A turn's text is judged for leaked calls as a step of its own: the event loop is given way
first, and only when there is something to judge (a turn of calls has no leak to look for)."""

from __future__ import annotations

from toolwire.loop.cooperative import Slice
from toolwire.loop.state import LoopRequest
from toolwire.loop.turn import TurnRead, leaked_call
from toolwire.transcript import ToolCall


class CountingSlice(Slice):
    def __init__(self) -> None:
        super().__init__()
        self.given = 0

    async def give_way(self) -> None:
        self.given += 1
        await super().give_way()


async def test_the_loop_is_given_way_before_the_text_is_judged() -> None:
    work = CountingSlice()
    read = TurnRead(text=["It is sunny."])
    request = LoopRequest(model="m", input=[])
    assert await leaked_call(request, read, "It is sunny.", "", {"get_weather"}, work) is None
    assert work.given == 1


async def test_a_turn_of_calls_is_not_judged_and_gives_no_way() -> None:
    work = CountingSlice()
    call = ToolCall("call_1", "get_weather", {"city": "Paris"}, '{"city": "Paris"}')
    read = TurnRead(calls=[call])
    request = LoopRequest(model="m", input=[])
    assert await leaked_call(request, read, "", "", {"get_weather"}, work) is None
    assert await leaked_call(request, TurnRead(), "Hi.", "", set(), work) is None
    assert work.given == 0
