"""The worker's decisions, as a pure state machine.

Events in (claimed, finished, swept, the current time), answers out (how many
to claim, whether to sweep, how long to sleep). The driver-side loop in
``alkstore/api/worker.py`` performs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidArgument


@dataclass
class WorkerPolicy:
    concurrency: int
    poll_interval_us: int
    sweep_interval_us: int
    heartbeat_interval_us: int
    running: int = 0
    next_sweep_us: int = 0
    next_due_us: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise InvalidArgument("concurrency must be an int")
        if self.concurrency < 1:
            raise InvalidArgument("concurrency must be >= 1")

    def claim_size(self) -> int:
        """Claim only what can start now: nothing waits in memory while its
        visibility timeout runs, so a stopped worker strands nothing."""
        return max(0, self.concurrency - self.running)

    def claimed(self, got: int, asked: int, next_due_us: int | None) -> None:
        self.running += got
        # A short batch means the queue had nothing more that was due: sleep
        # until the next job falls due (or a wake). A full batch says nothing.
        self.next_due_us = next_due_us if got < asked else None

    def finished(self) -> None:
        self.running -= 1

    def sweep_due(self, now_us: int) -> bool:
        return now_us >= self.next_sweep_us

    def swept(self, now_us: int) -> None:
        self.next_sweep_us = now_us + self.sweep_interval_us

    def sleep_us(self, now_us: int) -> int:
        """How long to wait for a wake before looking again on our own."""
        deadline = min(now_us + self.poll_interval_us, self.next_sweep_us)
        if self.next_due_us is not None and self.claim_size() > 0:
            deadline = min(deadline, self.next_due_us)
        return max(0, deadline - now_us)
