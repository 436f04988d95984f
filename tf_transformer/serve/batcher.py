"""Concurrent requests into one backend call at a time: a bounded queue, batches, timeouts.

A translator decodes a batch in about the time of one sentence (its steps run for every row at
once), and the backends are not made for several threads (a LiteRT interpreter holds one
state). So one thread runs the backend, and while it works, requests wait in the queue; the
next call takes every waiting sentence that asks for the same number of alternatives, up to
`max_batch` sentences, and each request gets its own rows back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from concurrent.futures import ThreadPoolExecutor


class Busy(Exception):
    """The queue is full: the server is at its limit (HTTP 503; the client may retry)."""


class TimedOut(Exception):
    """A request waited longer than the batcher's timeout (HTTP 504)."""


@dataclasses.dataclass
class _Job:
    sentences: list[str]
    n: int  # translations per sentence: 1, or the best n distinct (alternatives)
    future: asyncio.Future


class Batcher:
    """Batches the sentences of concurrent requests into calls of `translator`.

    Args:
      translator: a `backends.base.BaseTranslator` (`translate`, `translate_n_best`).
      max_batch: the most sentences one backend call takes (a request with more runs alone).
      max_queue: the most requests waiting; one more is refused with `Busy`.
      timeout: seconds a request may wait for its answer, queue included (`TimedOut`).
    """

    def __init__(self, translator, *, max_batch: int = 32, max_queue: int = 256, timeout=120.0):
        self.translator = translator
        self.max_batch, self.timeout = max_batch, timeout
        self.queue: asyncio.Queue[_Job] = asyncio.Queue(max_queue)
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="backend")
        self.task: asyncio.Task | None = None
        self.calls = 0  # backend calls made (a test reads it: batching happened)

    async def translate(self, sentences: list[str], n: int = 1) -> list[list[str]]:
        """Each sentence's translations: `[best]` (`n` 1) or its `n` best distinct ones."""
        if not sentences:
            return []
        if self.task is None:
            self.task = asyncio.create_task(self._run())
        job = _Job(list(sentences), n, asyncio.get_running_loop().create_future())
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            raise Busy(
                f"the server has {self.queue.maxsize} requests waiting; retry later"
            ) from None
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), self.timeout)
        except asyncio.TimeoutError:
            job.future.cancel()  # the batch loop skips it if it has not started yet
            raise TimedOut(f"no translation within {self.timeout:g} s") from None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            if first.future.done():  # timed out while waiting
                continue
            jobs = self._next_batch(first)
            sentences = [s for job in jobs for s in job.sentences]
            call = functools.partial(self._call, sentences, first.n)
            try:
                results = await loop.run_in_executor(self.executor, call)
            except Exception as error:  # noqa: BLE001  (the requests get it; the loop goes on)
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            start = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(results[start : start + len(job.sentences)])
                start += len(job.sentences)

    def _next_batch(self, first: _Job) -> list[_Job]:
        """`first` and the waiting jobs after it that ask for the same `n`, up to `max_batch`
        sentences; the first that does not fit goes back to the queue's end (it waits one call
        more)."""
        jobs, count = [first], len(first.sentences)
        while not self.queue.empty() and count < self.max_batch:
            job = self.queue.get_nowait()
            if job.future.done():  # timed out while waiting
                continue
            if job.n != first.n or count + len(job.sentences) > self.max_batch:
                self.queue.put_nowait(job)  # room: it was just taken out
                break
            jobs.append(job)
            count += len(job.sentences)
        return jobs

    async def run(self, function, *args):
        """`function(*args)` on the backend's thread, between batches (an attention map)."""
        call = functools.partial(function, *args)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self.executor, call), self.timeout)
        except asyncio.TimeoutError:
            raise TimedOut(f"no answer within {self.timeout:g} s") from None

    def _call(self, sentences: list[str], n: int) -> list[list[str]]:
        self.calls += 1
        if n == 1:
            return [[text] for text in self.translator.translate(sentences)]
        return self.translator.translate_n_best(sentences, n)

    def close(self) -> None:
        """Stops the batch loop and the backend's thread."""
        if self.task is not None:
            self.task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)
