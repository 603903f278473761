"""Rule: every Postgres connection asks the kernel to give up on a dead peer
within ``dead_peer_timeout`` (keepalives, tcp_user_timeout), unless the DSN
chose its own settings; a DSN libpq cannot parse is refused up front."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from alkstore import InvalidArgument
from alkstore.engines.postgres.control import liveness_params
from alkstore.runner.postgres.opening import with_liveness


def test_the_keepalives_add_up_to_the_bound() -> None:
    """First probe after half the bound, three more in the other half; the
    user timeout is the bound itself, in milliseconds."""
    p = liveness_params(10.0)
    assert p["keepalives"] == "1"
    keys = ("keepalives_idle", "keepalives_interval", "keepalives_count")
    idle, interval, count = (int(p[k]) for k in keys)
    assert idle + interval * count <= 10 + 1
    assert p["tcp_user_timeout"] == "10000"
    small = liveness_params(0.5)  # libpq counts keepalives in whole seconds
    assert int(small["keepalives_idle"]) >= 1 and int(small["keepalives_interval"]) >= 1
    assert small["tcp_user_timeout"] == "500"


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://app@db.internal:5432/app", "host=db.internal port=5432 user=app dbname=app"],
)
def test_the_dsn_gains_the_keepalives_and_keeps_what_it_says(dsn: str) -> None:
    got = conninfo_to_dict(with_liveness(dsn, 10.0))
    assert got["host"] == "db.internal" and got["user"] == "app" and got["dbname"] == "app"
    assert got["keepalives_idle"] == "5" and got["tcp_user_timeout"] == "10000"
    sep = "?" if "://" in dsn else " "
    own = conninfo_to_dict(with_liveness(dsn + sep + "keepalives_idle=60", 10.0))
    assert own["keepalives_idle"] == "60"
    assert own["tcp_user_timeout"] == "10000"


def test_a_dsn_libpq_cannot_parse_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="dsn"):
        with_liveness("host=a port", 10.0)
