"""The collector's rules (tests/docs/blocks.py) on a page made up here."""

from __future__ import annotations

from pathlib import Path

import pytest

from .blocks import blocks, file_blocks, programs

PAGE = """# A page

<!-- example: first -->
```python
x = 1
```

Some prose.

<!-- continues -->
```python
assert x == 1
```

- A list item:

  ```python
  print("indented")
  ```

```text
not run
```

```toml
# pyproject.toml
[tool.pytest.ini_options]
```

```python
# test_it.py
def test_it():
    pass
```
"""


def test_blocks_programs_and_files(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = blocks(page)
    assert [(b.lang, b.line) for b in found] == [
        ("python", 4),
        ("python", 11),
        ("python", 17),
        ("text", 21),
        ("toml", 25),
        ("python", 30),
    ]
    first, indented = programs(found)
    assert first.id == "page.md:first" and first.code == "x = 1\n\nassert x == 1\n"
    assert indented.id == "page.md:17" and indented.code == 'print("indented")\n'
    (files,) = file_blocks(found).values()
    assert [b.file_name for b in files] == ["pyproject.toml", "test_it.py"]


def test_a_continuation_needs_a_program_before_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- continues -->\n```python\npass\n```\n")
    with pytest.raises(AssertionError, match="continues"):
        programs(blocks(page))


def test_an_unclosed_fence_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\npass\n")
    with pytest.raises(AssertionError, match="never closed"):
        blocks(page)
