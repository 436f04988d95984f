"""`StopSignal`: SIGINT and SIGTERM as a flag that the stop rules poll."""

from __future__ import annotations

import signal
import threading

from typing_extensions import Self  # typing.Self needs Python 3.11

from tf_transformer.training.result import StopReason


class StopSignal:
    """A context manager that turns SIGINT/SIGTERM into a flag the training loop polls.

    The loop finishes its step, saves a checkpoint and returns. A second signal of the same
    kind gets the previous handler (Ctrl-C twice still interrupts). Outside the main thread
    (where handlers cannot be installed) it does nothing.

    Example:
      >>> with StopSignal() as stop:
      ...     while not stop.requested: ...
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested: StopReason | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.requested:
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
            return
        self.requested = StopReason(signal.Signals(signum).name)

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
