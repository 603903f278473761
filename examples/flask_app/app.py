"""Orders on Flask with Flask-SQLAlchemy: the order (an ORM row) and its job
commit in one transaction, the session's own.

    hypercorn app:app --bind 127.0.0.1:8000          # or: flask run, gunicorn app:app
    alkstore worker tasks:handlers --db app.db

README.md has the Postgres commands.
"""

import atexit
import os
from contextlib import ExitStack
from typing import Any

import psycopg
from flask import Flask, jsonify, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import alkstore.sync

# The database, as the alkstore command reads it: ALKSTORE_DSN, else the SQLite file ALKSTORE_DB.
DSN = os.environ.get("ALKSTORE_DSN") or None
DB = os.environ.get("ALKSTORE_DB") or "app.db"
SCHEMA = os.environ.get("ALKSTORE_SCHEMA") or "alkstore"

app = Flask(__name__)
if DSN is not None:
    dsn = DSN
    app.config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://"
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {"creator": lambda: psycopg.connect(dsn)}
else:
    app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///" + os.path.abspath(DB)


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(app, model_class=Base)


class Order(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "orders"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    item: Mapped[str]
    quantity: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(16), default="new")
    job_id: Mapped[int] = mapped_column(BigInteger)


# One store for the process, shared by the request threads, closed at exit.
_stack = ExitStack()
atexit.register(_stack.close)
store = _stack.enter_context(
    alkstore.sync.open_postgres(DSN, options=alkstore.sync.PostgresOptions(schema=SCHEMA))
    if DSN is not None
    else alkstore.sync.open_sqlite(DB)
)
with app.app_context():
    db.create_all()


@app.post("/orders")
def create_order() -> Any:
    data = request.get_json()
    try:
        # The job rides in the session's transaction, on its own connection.
        connection = db.session.connection().connection.dbapi_connection
        with store.join(connection) as tx:
            job_id = tx.enqueue("orders", {"order_id": data["id"]})
        db.session.add(Order(id=data["id"], item=data["item"],
                             quantity=data.get("quantity", 1), job_id=job_id))  # fmt: skip
        db.session.commit()  # the order and its job, or neither
    except IntegrityError:  # a duplicate id: the rollback takes the job with it
        db.session.rollback()
        return jsonify(error=f"order {data['id']} already exists"), 409
    return jsonify(id=data["id"], job_id=job_id), 201


@app.get("/orders/<order_id>")
def read_order(order_id: str) -> Any:
    order = db.session.get(Order, order_id)
    if order is None:
        return jsonify(error=f"no order {order_id}"), 404
    return jsonify(id=order.id, item=order.item, quantity=order.quantity,
                   status=order.status, job_id=order.job_id)  # fmt: skip


@app.get("/queue")
def queue_stats() -> Any:
    stats = store.queue("orders").stats()
    return jsonify(ready=stats.ready, scheduled=stats.scheduled, processing=stats.processing,
                   dead=stats.dead, paused=stats.paused)  # fmt: skip
