"""Schedules on SQLite: registration, the ticks' compare-and-set on the
fire time, pausing and resuming."""

from __future__ import annotations

from ...protocol.plan import Fetch, Statement
from ...protocol.values.types import NewSchedule
from ..shapes import DUE_SCHEDULE_COLS, SCHEDULE_COLS
from ..sql import Sql
from .spelling import RULES
from .tables import SCHEDULES


class Schedules:
    # Same expression: keep the pending fire time (re-registration at every
    # process start must not skip or repeat a fire). The paused flag is left
    # as it is: re-registering never resumes a schedule. The parameters are
    # NewSchedule's fields.
    _upsert_schedule = Sql(
        f"INSERT INTO {SCHEDULES} (name, queue, expression, payload, options, "
        "next_fire_at, created_at, tz, catch_up, catch_up_max, catch_up_grace_us) "
        "VALUES (:name, :queue, :expression, :payload_json, :options_json, :next_fire_us, "
        ":now_us, :tz, :catch_up, :catch_up_max, :catch_up_grace_us) "
        "ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, "
        "payload = excluded.payload, options = excluded.options, "
        f"next_fire_at = {RULES.keep_fire_time()}, expression = excluded.expression, "
        "tz = excluded.tz, catch_up = excluded.catch_up, "
        "catch_up_max = excluded.catch_up_max, catch_up_grace_us = excluded.catch_up_grace_us"
    )

    def upsert_schedule(self, schedule: NewSchedule) -> Statement:
        return self._upsert_schedule.bind(**schedule._asdict())

    _delete_schedule = Sql(f"DELETE FROM {SCHEDULES} WHERE name = :name", Fetch.ROWCOUNT)

    def delete_schedule(self, name: str) -> Statement:
        return self._delete_schedule.bind(name=name)

    _due_schedules = Sql(
        f"SELECT {DUE_SCHEDULE_COLS} FROM {SCHEDULES} "
        f"WHERE {RULES.schedule_due(':now')} ORDER BY next_fire_at LIMIT :limit",
        Fetch.ALL,
    )

    def due_schedules(self, now_us: int, limit: int) -> Statement:
        return self._due_schedules.bind(now=now_us, limit=limit)

    # Compare-and-set on the fire time read by due_schedules: of the tickers
    # that read the same fire time, exactly one moves it (and enqueues its
    # job), and records the last fire time it enqueued (if any) as the
    # schedule's last.
    _advance_schedule = Sql(
        f"UPDATE {SCHEDULES} SET next_fire_at = :next, "
        "last_fire_at = COALESCE(:last, last_fire_at) "
        f"WHERE name = :name AND {RULES.fire_time_unchanged(':fire_at')}",
        Fetch.ROWCOUNT,
    )

    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        return self._advance_schedule.bind(
            name=name, fire_at=fire_at_us, next=next_fire_us, last=last_fire_us
        )

    # A paused schedule's fire time, passed or not, is nobody's to sleep until.
    _next_schedule_time = Sql(
        f"SELECT MIN(next_fire_at) FROM {SCHEDULES} WHERE {RULES.SCHEDULE_RUNNING}", Fetch.ONE
    )

    def next_schedule_time(self) -> Statement:
        return self._next_schedule_time.bind()

    _list_schedules = Sql(f"SELECT {SCHEDULE_COLS} FROM {SCHEDULES} ORDER BY name", Fetch.ALL)

    def list_schedules(self) -> Statement:
        return self._list_schedules.bind()

    _schedule_state = Sql(
        f"SELECT expression, tz, next_fire_at, paused FROM {SCHEDULES} WHERE name = :name",
        Fetch.ONE,
    )

    def schedule_state(self, name: str) -> Statement:
        return self._schedule_state.bind(name=name)

    _pause_schedule = Sql(f"UPDATE {SCHEDULES} SET paused = 1 WHERE name = :name", Fetch.ROWCOUNT)

    def pause_schedule(self, name: str) -> Statement:
        return self._pause_schedule.bind(name=name)

    # Compare-and-set on the fire time the resume read: a resume never moves a
    # fire time it did not see.
    _resume_schedule = Sql(
        f"UPDATE {SCHEDULES} SET next_fire_at = :next, paused = 0 "
        f"WHERE name = :name AND {RULES.fire_time_unchanged(':fire_at')}",
        Fetch.ROWCOUNT,
    )

    def resume_schedule(self, name: str, fire_at_us: int, next_fire_us: int) -> Statement:
        return self._resume_schedule.bind(name=name, fire_at=fire_at_us, next=next_fire_us)
