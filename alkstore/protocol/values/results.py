"""Results and kept jobs: how long a finished job's record is kept when its
queue says nothing, and the names of a job's dependency policy.

A job is *kept* when its finish must be recorded: it has dependencies or
dependents, or a caller awaits it (``Queue.result``), or its handler
returned a value. Its record (outcome, result, error) then stays in history
for its queue's results retention, or its history retention if that is
longer (docs/workflows.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .errors import InvalidArgument
from .ints import check_int
from .timeconv import US_PER_S

# A day, as Celery keeps its results by default.
RESULTS_RETENTION_US = 86_400 * US_PER_S

# What a job does when one of its dependencies dies or is cancelled.
OnDependencyFailure = Literal["cancel", "run"]
ON_DEPENDENCY_FAILURE: tuple[OnDependencyFailure, ...] = ("cancel", "run")

# What a waiting job's ``on_failure`` column holds.
ON_FAILURE_CANCEL = 0
ON_FAILURE_RUN = 1

# The most dependencies one job may have: enough for a wide fan-in, bounded
# so a mistaken list cannot make one statement enormous.
MAX_DEPENDENCIES = 100_000


def check_dependencies(depends_on: object) -> tuple[int, ...]:
    """``depends_on``: job ids (an iterable of ints), each kept once, in
    order; ``InvalidArgument`` otherwise, before any round trip."""
    if isinstance(depends_on, str | bytes | dict) or not isinstance(depends_on, Iterable):
        raise InvalidArgument(
            f"depends_on must be a list of job ids, got {type(depends_on).__name__}"
        )
    ids = tuple(dict.fromkeys(check_int(job_id, "job id") for job_id in depends_on))
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidArgument(f"a job may depend on at most {MAX_DEPENDENCIES} jobs")
    return ids


def on_failure_code(policy: object) -> int:
    """The stored code of an ``on_dependency_failure`` policy."""
    if policy == "cancel":
        return ON_FAILURE_CANCEL
    if policy == "run":
        return ON_FAILURE_RUN
    raise InvalidArgument(f"on_dependency_failure must be 'cancel' or 'run', got {policy!r}")
