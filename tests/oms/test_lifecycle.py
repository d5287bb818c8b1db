"""The one client lifecycle (``oms.lifecycle.ClientLifecycle``) against a stand-in access point: start and stop
once, a failed start shuts the client down, state errors name the client, loop waits map to OMS errors."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import oms
from oms.client.core import Runtime
from oms.client.endpoints import Endpoint
from oms.client.loop import LoopThread
from oms.client.rpc import ChannelPool
from oms.context import ClientContext, Lifecycle
from oms.lifecycle import ClientLifecycle
from oms.plugins import ClientPluginManager


@dataclass
class StandInAccessPoint:
    """Implements ``ClientContext`` with a real loop thread and records what clients asked of it."""

    runtime: Runtime
    namespace: str = "ns"
    plugin_manager: ClientPluginManager = field(default_factory=lambda: ClientPluginManager(load_entry_points=False))
    started: list[Lifecycle] = field(default_factory=list)
    forgotten: list[Lifecycle] = field(default_factory=list)

    def born_host(self) -> str:
        return "127.0.0.1"

    def start_client(self, client: Lifecycle) -> Runtime:
        self.runtime.loop.start()
        self.started.append(client)
        return self.runtime

    def forget_client(self, client: Lifecycle) -> None:
        self.forgotten.append(client)


@dataclass
class Core:
    runtime: Runtime


class Thing(ClientLifecycle[Core]):
    KIND = "thing"

    def __init__(self, context: ClientContext, fail_open: bool = False) -> None:
        super().__init__(context)
        self.fail_open = fail_open
        self.opened = 0
        self.closed = 0

    def _open(self, runtime: Runtime) -> Core:
        self.opened += 1
        if self.fail_open:
            raise oms.OMSRuntimeException(500, "cannot open")
        return Core(runtime)

    def _close(self, core: Core) -> None:
        self.closed += 1


@pytest.fixture
def ap() -> Iterator[StandInAccessPoint]:
    loop = LoopThread("test-lifecycle")
    yield StandInAccessPoint(Runtime(loop, ChannelPool(), Endpoint.of([("127.0.0.1", 1)]), "ns", None))
    loop.stop(5)


def test_starts_once_stops_once_and_the_access_point_forgets_it(ap: StandInAccessPoint) -> None:
    thing = Thing(ap)
    assert not thing.is_running
    with thing as started:
        assert started is thing and thing.startup() is thing
        assert thing.is_running and thing.opened == 1 and ap.started == [thing]
    thing.shutdown()
    assert not thing.is_running and thing.closed == 1 and ap.forgotten == [thing]
    with pytest.raises(oms.OMSIllegalStateException, match="the thing was shut down; create a new one"):
        thing.startup()


def test_a_failed_start_shuts_the_client_down(ap: StandInAccessPoint) -> None:
    thing = Thing(ap, fail_open=True)
    with pytest.raises(oms.OMSRuntimeException, match="cannot open"):
        thing.startup()
    assert not thing.is_running and ap.forgotten == [thing]
    with pytest.raises(oms.OMSIllegalStateException, match="was shut down"):
        thing.startup()
    thing.shutdown()  # idempotent: nothing was opened, nothing is closed
    assert thing.closed == 0 and ap.forgotten == [thing]


def test_calls_outside_the_running_state_name_the_client(ap: StandInAccessPoint) -> None:
    thing = Thing(ap)
    with pytest.raises(oms.OMSIllegalStateException, match="the thing is not started"):
        thing._running_core()
    refused = asyncio.sleep(0)
    with pytest.raises(oms.OMSIllegalStateException, match="not started"):
        thing._submit(refused)
    assert inspect.getcoroutinestate(refused) == inspect.CORO_CLOSED  # closed, not left never awaited
    thing.startup()
    thing.shutdown()
    with pytest.raises(oms.OMSIllegalStateException, match="the thing is shut down"):
        thing._running_core()


@pytest.mark.timeout(30)
def test_waiting_on_the_loop_maps_timeouts_and_cancels(ap: StandInAccessPoint) -> None:
    thing = Thing(ap).startup()
    core = thing._running_core()
    assert thing._wait(core, asyncio.sleep(0, "done"), 5, "unused") == "done"
    with pytest.raises(oms.OMSTimeOutException, match=r"no answer within 0\.05s"):
        thing._wait(core, asyncio.sleep(10), 0.05, "no answer within 0.05s")

    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(oms.OMSIllegalStateException, match="the thing was shut down during the call"):
        thing._wait(core, cancelled(), 5, "unused")

    async def awaited() -> str:
        return await thing._await_on_loop(asyncio.sleep(0, "via aio"), 5)

    assert asyncio.run(awaited()) == "via aio"
    thing.shutdown()


@pytest.mark.timeout(30)
def test_awaited_from_the_access_points_own_loop_a_call_runs_inline(ap: StandInAccessPoint) -> None:
    """``loop_thread()`` runs a coroutine on the access point's loop; the aio calls it awaits run in its own task
    (no hand-over to the loop and back), time out as OMS errors, and a cancel of the caller cancels the call."""
    thing = Thing(ap).startup()
    assert thing.loop_thread() is ap.runtime.loop

    async def task_of_call() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    async def inline() -> tuple[bool, bool]:
        caller = asyncio.current_task()
        return await thing._await_on_loop(task_of_call(), 5) is caller, thing.loop_thread().in_loop()

    assert thing.loop_thread().run(inline(), 10) == (True, True)

    async def elsewhere() -> bool:  # from another event loop the call is its own task on the access point's loop
        return await thing._await_on_loop(task_of_call(), 5) is asyncio.current_task()

    assert asyncio.run(elsewhere()) is False

    async def too_slow() -> None:
        await thing._await_on_loop(asyncio.sleep(10), 0.01)

    with pytest.raises(oms.OMSTimeOutException, match=r"no answer within 0\.010s"):
        thing.loop_thread().run(too_slow(), 10)

    started = asyncio.Event()
    finished: list[str] = []

    async def long_call() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            finished.append("call cancelled")
            raise

    async def caller() -> None:
        await thing._await_on_loop(long_call(), 20)

    async def cancel_the_caller() -> None:
        task = asyncio.ensure_future(caller())
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    thing.loop_thread().run(cancel_the_caller(), 10)
    assert finished == ["call cancelled"]
    thing.shutdown()
    with pytest.raises(oms.OMSIllegalStateException, match="the thing is shut down"):
        thing.loop_thread()
