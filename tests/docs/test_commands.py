"""Every ``alkstore`` command the docs show is one the real command line takes.

- In ``sh``/``console``/``shell``/``bash`` blocks, each ``alkstore ...`` (or
  ``python -m alkstore ...``) command line is parsed by the click command it
  names: its options, arguments and their types, as a user's shell would
  hand them over (nothing runs, no database is opened).
- In inline code and ``text`` blocks (synopses like ``alkstore dead requeue
  QUEUE (--id ID ... | --all)``), the command must exist and every option
  named must be one of its own.

So a renamed command or flag fails here instead of in a reader's shell.
"""

from __future__ import annotations

import re
import shlex

import click
import pytest

from alkstore.cli import main

from .blocks import SHELL_LANGS, Block, all_blocks, pages

BLOCKS = all_blocks()


def _command_lines(block: Block) -> list[list[str]]:
    """The ``alkstore`` invocations of a shell block, as argument lists."""
    found = []
    text = block.code.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        words = shlex.split(line, comments=True)
        segment: list[str] = []
        for word in [*words, ";"]:
            if word not in ("&&", "||", ";", "|"):
                segment.append(word)
                continue
            while segment and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0]):
                segment.pop(0)  # VAR=value before the command
            if segment[:1] == ["alkstore"]:
                found.append(segment[1:])
            elif segment[:3] in (["python", "-m", "alkstore"], ["python3", "-m", "alkstore"]):
                found.append(segment[3:])
            segment = []
    return found


SHELL_COMMANDS = [
    (f"{b.where}:{' '.join(args)}", args)
    for b in BLOCKS
    if b.lang in SHELL_LANGS
    for args in _command_lines(b)
]


def _parse(args: list[str]) -> click.Command:
    """Parse ``args`` as ``alkstore`` would, down to the command that runs;
    click's ``UsageError`` when they do not parse."""
    command: click.Command = main
    name = "alkstore"
    parent: click.Context | None = None
    while isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name, parent=parent)
        if args and args[0].startswith("-"):
            # A group's own option (--help, --version) ends the command line.
            known = {opt for p in command.params for opt in p.opts}
            known |= set(command.get_help_option_names(ctx))
            if args[0] not in known:
                raise click.NoSuchOption(args[0], ctx=ctx)
            return command
        if not args:
            raise click.UsageError("a group without a command", ctx=ctx)
        sub_name, sub, args = command.resolve_command(ctx, args)
        assert sub is not None and sub_name is not None
        command, name, parent = sub, sub_name, ctx
    try:
        command.make_context(name, list(args), parent=parent)
    except click.exceptions.Exit as done:  # --help: it parsed
        assert done.exit_code == 0
    return command


def test_the_docs_show_commands() -> None:
    assert len(SHELL_COMMANDS) >= 10
    shown = {args[0] for _, args in SHELL_COMMANDS if args}
    assert {"queues", "dead", "worker", "demo"} <= shown


@pytest.mark.parametrize("args", [a for _, a in SHELL_COMMANDS], ids=[i for i, _ in SHELL_COMMANDS])
def test_shell_command_parses(args: list[str]) -> None:
    _parse(args)


OPTION = re.compile(r"^-{1,2}[A-Za-z][\w-]*")
INLINE = re.compile(r"`(alkstore [^`]+)`")


def _synopses() -> list[tuple[str, str]]:
    """``alkstore ...`` in inline code (outside fences) and in text blocks."""
    out = []
    for path in pages():
        prose = re.sub(r"^ *```.*?^ *```", "", path.read_text(), flags=re.S | re.M)
        out += [(f"{path.name}:{m}", m) for m in INLINE.findall(prose)]
    for block in BLOCKS:
        if block.lang in ("text", ""):
            for line in block.code.replace("\\\n", " ").splitlines():
                if line.startswith("alkstore "):
                    out.append((f"{block.where}:{line.split('#')[0].strip()}", line))
    return out


SYNOPSES = _synopses()


def test_the_docs_show_synopses() -> None:
    assert len(SYNOPSES) >= 30
    assert any(" worker MODULE:ATTR" in s for _, s in SYNOPSES)


@pytest.mark.parametrize("synopsis", [s for _, s in SYNOPSES], ids=[i for i, _ in SYNOPSES])
def test_synopsis_names_real_commands_and_options(synopsis: str) -> None:
    words = [w.strip("[]()|.,") for w in synopsis.split("#")[0].split()[1:]]
    words = [w for w in words if w and w != "..."]
    command: click.Command = main
    ctx = click.Context(main, info_name="alkstore")
    chain = [main]
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        # (``dead QUEUE`` resolves to ``dead list`` and keeps QUEUE in rest.)
        _, sub, words = command.resolve_command(ctx, words)
        assert sub is not None
        command = sub
        ctx = click.Context(sub, info_name=sub.name, parent=ctx)
        chain.append(sub)
    known = {opt for cmd in chain for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    known |= {"--help", "-h"}
    named = {m.group(0) for w in words if (m := OPTION.match(w.split("=")[0]))}
    assert named <= known, f"{synopsis}: no such option {sorted(named - known)}"
