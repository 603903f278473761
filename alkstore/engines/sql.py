"""Statements written with named parameters, rendered once per engine.

A statement's SQL is an ``Sql``: the engine's text with ``:name``
parameters, a class attribute of the dialect standing right above the
method that binds it::

    _ack = Sql(f"DELETE FROM {JOBS} WHERE id = :job_id AND {RULES.owned(...)}", Fetch.ROWCOUNT)

    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return self._ack.bind(job_id=job_id, worker=worker, claim=claim, now=now_us)

A dialect renders every such attribute when it is made
(:func:`render_statements`; SQLite's once, at import): each name becomes the
engine's numbered placeholder (``?1``, ``$1``; a name used twice is one
value), ``SCHEMA`` becomes the dialect's quoted schema, and ``bind`` takes
the values by name, keyword only, and lays them out in placeholder order. So
the executors, the simulation and the blocking drivers still get a
positional ``Statement.params``, and binding costs about what building the
tuple by hand did.

Variants of one statement chosen by a key (a claim's limit checks, a page's
filter) are a ``Variants``: each variant renders like an ``Sql`` and takes
every name any variant uses, so one ``bind`` call serves them all.
"""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast, overload

from ..protocol.plan import Fetch, Statement
from .spelling import Spelling

K = TypeVar("K")

# Stands for the dialect's quoted schema in a statement's text (Postgres's
# tables are schema-qualified; SQLite's never use it).
SCHEMA = "{schema}"

# A quoted literal or identifier (left as it is), a parameter (``:name``,
# not the second colon of a ``::type`` cast), or another engine's
# placeholder, which has no place in a statement written with names.
_TOKEN = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|(?<![:\w]):([a-z][a-z0-9_]*)|(\?|\$\d)""")
# ``bind``'s own keyword: no parameter may take it.
_RESERVED = frozenset({"wakes"})

Binder = Callable[..., Statement]


class Rendered:
    """One statement rendered for one engine: its SQL, its parameters' names
    in placeholder order, and ``bind(**values) -> Statement`` (keyword only;
    ``wakes=`` sets the channels the statement wakes)."""

    __slots__ = ("bind", "fetch", "names", "sql")

    def __init__(self, sql: str, names: tuple[str, ...], fetch: Fetch, bind: Binder) -> None:
        self.sql = sql
        self.names = names
        self.fetch = fetch
        self.bind = bind

    def __repr__(self) -> str:
        return f"Rendered({self.sql!r}, names={self.names!r}, fetch={self.fetch})"


class Sql:
    """A statement's SQL with ``:name`` parameters, and what it fetches."""

    __slots__ = ("fetch", "name", "text")

    def __init__(self, text: str, fetch: Fetch = Fetch.NONE) -> None:
        self.text = text
        self.fetch = fetch
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Sql: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Rendered: ...
    def __get__(self, obj: object, owner: type) -> Sql | Rendered:
        # An instance holds its renderings in its __dict__, which wins over
        # this (a non-data descriptor): only the class itself gets here.
        if obj is None:
            return self
        raise AttributeError(f"{owner.__name__}.{self.name} was never rendered for this instance")

    def __repr__(self) -> str:
        return f"Sql({self.text!r}, {self.fetch})"

    def replace(self, old: str, new: str) -> Sql:
        """This statement with ``old`` replaced by ``new`` in its text: how
        the simulation's deliberately broken dialects edit a statement."""
        return Sql(self.text.replace(old, new), self.fetch)

    def render(self, spelling: Spelling, schema: str = "", also: tuple[str, ...] = ()) -> Rendered:
        """The statement for one engine (and schema); ``bind`` also takes the
        names ``also`` and ignores them."""
        sql, names = _render_text(self.text, spelling, schema)
        return _rendered(sql, names, self.fetch, also)


class Variants(Generic[K]):
    """Variants of one statement, chosen by a key; rendered, a dict of
    ``Rendered`` whose ``bind`` all take every name any variant uses."""

    __slots__ = ("name", "variants")

    def __init__(self, variants: Mapping[K, Sql]) -> None:
        self.variants = dict(variants)
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Variants[K]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Mapping[K, Rendered]: ...
    def __get__(self, obj: object, owner: type) -> Variants[K] | Mapping[K, Rendered]:
        if obj is None:
            return self
        raise AttributeError(f"{owner.__name__}.{self.name} was never rendered for this instance")

    def replace(self, old: str, new: str) -> Variants[K]:
        """Every variant with ``old`` replaced by ``new`` (as ``Sql.replace``)."""
        return Variants({key: sql.replace(old, new) for key, sql in self.variants.items()})

    def render(self, spelling: Spelling, schema: str = "") -> dict[K, Rendered]:
        texts = {key: _render_text(v.text, spelling, schema) for key, v in self.variants.items()}
        every = tuple(dict.fromkeys(name for _, names in texts.values() for name in names))
        return {
            key: _rendered(text, names, self.variants[key].fetch, every)
            for key, (text, names) in texts.items()
        }


def render_statements(cls: type, spelling: Spelling, schema: str = "") -> dict[str, object]:
    """Every ``Sql`` and ``Variants`` of ``cls`` (its bases' included, a
    subclass's own winning) rendered for ``spelling`` and ``schema``, by
    attribute name: what a dialect puts in its instance's ``__dict__``."""
    return {name: template.render(spelling, schema) for name, template in _templates(cls).items()}


@functools.cache
def _templates(cls: type) -> dict[str, Sql | Variants[Any]]:
    found: dict[str, Sql | Variants[Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, Sql | Variants):
                found[name] = value
            else:
                found.pop(name, None)
    return found


def _rendered(sql: str, names: tuple[str, ...], fetch: Fetch, also: tuple[str, ...]) -> Rendered:
    accepted = names + tuple(n for n in also if n not in names)
    return Rendered(sql, names, fetch, _binder(names, accepted)(sql, fetch))


def _render_text(text: str, spelling: Spelling, schema: str) -> tuple[str, tuple[str, ...]]:
    """``text`` in the engine's placeholders, and its parameters' names in
    placeholder order (the order each first appears)."""
    if SCHEMA in text:
        if not schema:
            raise ValueError(f"a statement names the schema, and none was given: {text!r}")
        text = text.replace(SCHEMA, schema)
    numbers: dict[str, str] = {}

    def place(match: re.Match[str]) -> str:
        name, foreign = match[1], match[2]
        if foreign is not None:
            raise ValueError(f"write parameters as :name, not {foreign!r}: {text!r}")
        if name is None:
            return match[0]
        if keyword.iskeyword(name) or name in _RESERVED:
            raise ValueError(f"{name!r} cannot name a parameter: {text!r}")
        if name not in numbers:
            numbers[name] = spelling.param(len(numbers) + 1)
        return numbers[name]

    return _TOKEN.sub(place, text), tuple(numbers)


@functools.cache
def _binder(names: tuple[str, ...], accepted: tuple[str, ...]) -> Callable[[str, Fetch], Binder]:
    """What makes the binders of statements whose parameters are ``names``
    (in placeholder order) and whose ``bind`` takes ``accepted``.

    Generated, as ``dataclasses`` generate an ``__init__``: calling a
    function whose keyword-only parameters are the names costs a few tens of
    nanoseconds over building the tuple by hand, where taking ``**values``
    and picking from that dict cost about 0.4 us a statement, nearly as much
    again as building the ``Statement``. The names are checked identifiers
    (``_render_text``), so the generated text is only ever this."""
    signature = ", ".join(["*", *accepted, "wakes=()"])
    if names:
        body = f"return _Statement(_sql, ({''.join(f'{n}, ' for n in names)}), _fetch, wakes)"
    else:
        body = "return _same if not wakes else _Statement(_sql, (), _fetch, wakes)"
    source = (
        "def make(_sql, _fetch):\n"
        "    _same = _Statement(_sql, (), _fetch)\n"
        f"    def bind({signature}):\n"
        f"        {body}\n"
        "    return bind\n"
    )
    namespace: dict[str, Any] = {"_Statement": Statement}
    exec(source, namespace)
    return cast("Callable[[str, Fetch], Binder]", namespace["make"])
