"""What both prediction APIs do with a request, written once: the row limit, the version the
request names, decoding its rows, the caller's deadline, the prediction, the metrics. The
servicers (bnserve.v1.Predictor and the Open Inference Protocol) only translate their wire
forms into a ``decode`` and an ``encode`` and call ``predict``.

Where the work runs: the server is one asyncio event loop (``bnserve.server.app``), which
receives every call, so a call waiting for its body or a client holding a stream costs no
thread. Before any decoding, a request is checked against the model and its work counted
from its wire form (``measure``: O(inputs), whatever they hold). A request small by that
measure (``limits.Work.inline``: rows, elements and bytes) is answered on the loop itself:
its work (tens of microseconds) costs less than handing it to a thread. A larger request,
one whose missing values need a plan not yet built (``cached_plans_only``: building one may
take seconds), and a lazy version's first compile run on the work pool (``--threads``), so
the loop keeps answering other calls, health among them, while they run. A call for a
version not in memory awaits its load from the store, which runs on threads of its own
(``bnserve.server.on_demand``): however long the store hangs, the waiting call holds no
thread of the work pool, and calls for versions in memory never queue behind it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

import numpy as np

from bnserve.server.limits import Work, check_rows, check_still_wanted
from bnserve.server.repository import ModelRepository
from bnserve.server.served import ServedModel
from bnserve.server.snapshot import ModelEntry, Snapshot
from bnserve.store.errors import StoreUnavailable
from bnserve.store.predictor.plans import PlanNotReady, cached_plans_only

Response = TypeVar("Response")
Result = TypeVar("Result")


class DataPlane:
    """The served models, as the servicers reach them."""

    def __init__(self, repository: ModelRepository, max_rows: int, ready: Callable[[], bool], pool: Executor):
        """``max_rows``: the most rows a request may hold; ``ready``: what health reports;
        ``pool``: the threads for work too long for the event loop (never a store read)."""
        self.repository = repository
        self.max_rows = max_rows
        self.ready = ready
        self._pool = pool

    def models(self) -> Snapshot:
        """The served snapshot; until the store has been read once the server knows no model
        yet, so a call then is UNAVAILABLE (a client retries), never NOT_FOUND."""
        if not self.repository.ready:
            raise StoreUnavailable("the server has not read the model store yet; try again shortly")
        return self.repository.snapshot

    async def offload(self, work: Callable[..., Result], *args: Any) -> Result:
        """``work(*args)`` on the work pool, awaited."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)

    async def model(
        self, name: str, version: int | None = None, alias: str | None = None
    ) -> tuple[ServedModel, ModelEntry]:
        """The compiled version a selector names: from memory on the loop; else its load from
        the store awaited, and a lazy compile on the work pool."""
        self.models()  # UNAVAILABLE, not NOT_FOUND, until the store is read
        found = self.repository.get_resident(name, version, alias)
        if found is not None:
            return found
        future, entry = self.repository.locate(name, version, alias)
        # this call's own future: a call cancelled meanwhile (its deadline, its client gone)
        # cancels it alone, and the load goes on for the others
        served = await asyncio.wrap_future(future)
        if not served.is_compiled:
            served = await self.offload(self.repository.compiled, served)
        return served, entry

    async def predict(
        self,
        name: str,
        measure: Callable[[ServedModel], Work],
        decode: Callable[[ServedModel], np.ndarray],
        encode: Callable[[ServedModel, np.ndarray, np.ndarray], Response],
        context: Any,
        version: int | None = None,
        alias: str | None = None,
    ) -> Response:
        """Answer one request.

        ``measure(served)``: the request checked against that model and its work counted,
        before any decoding (its rows are held to ``--max-rows`` here);
        ``decode(served)``: the request's rows as codes (rows, features) for that model;
        ``encode(served, proba, winners)``: the response from the class probabilities and
        each row's most probable class. The request is counted once answered.
        """
        started = time.perf_counter()
        served, _ = await self.model(name, version, alias)
        if self._admit(measure, served).inline:
            try:
                with cached_plans_only():
                    return _answer(served, decode, encode, context, started)
            except PlanNotReady:
                pass  # answered on the pool below, where the plan is built
        return await self.offload(_answer, served, decode, encode, context, started)

    def _admit(self, measure: Callable[[ServedModel], Work], served: ServedModel) -> Work:
        work = measure(served)
        check_rows(work.rows, self.max_rows)
        return work


def _answer(
    served: ServedModel,
    decode: Callable[[ServedModel], np.ndarray],
    encode: Callable[[ServedModel, np.ndarray, np.ndarray], Response],
    context: Any,
    started: float,
) -> Response:
    codes = decode(served)
    check_still_wanted(context)
    proba = served.compiled.predict_proba(codes)
    winners = np.argmax(proba, axis=1)
    response = encode(served, proba, winners)
    served.metrics.record(winners, started)
    return response
