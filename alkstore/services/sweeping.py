"""The sweep of one queue: its expired and stranded jobs to the dead letters,
a page at a time, each burial logged (someone must look at them). Shared by
``Queue.sweep_expired`` and the worker's periodic sweep."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from ..api.core.handle import StoreCore
from ..protocol.plans.claim import SWEEP_PAGE, sweep

log = logging.getLogger("alkstore.queue")


async def sweep_queue(core: StoreCore, queue: str) -> int:
    """Sweep ``queue`` until a page comes back short; how many it buried."""
    total = 0
    while True:
        buried = await core.run(
            sweep(core.dialect, queue, core.now_us(), origin=core.origin), bulk=True
        )
        total += len(buried)
        if buried:
            log_buried(queue, buried)
            core.telemetry.buried(queue, buried)
        if len(buried) < SWEEP_PAGE:
            return total


def log_buried(queue: str, buried: Sequence[tuple[int, str]]) -> None:
    """Jobs the sweep moved to the dead letters, at ERROR, with the reasons."""
    reasons = Counter(reason for _, reason in buried)
    shown = ", ".join(str(job_id) for job_id, _ in buried[:10])
    more = f" and {len(buried) - 10} more" if len(buried) > 10 else ""
    log.error(
        "%d job(s) of queue %s moved to dead letters by the sweep (%s): %s%s",
        len(buried), queue, ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items())),
        shown, more,
    )  # fmt: skip
