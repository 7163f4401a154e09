"""Every link in the README, CONTRIBUTING.md and docs/ leads somewhere, and the README's setup commands exist.

Why: the README keeps the headline and sends the details one link away into docs/; a renamed page or heading
would leave a newcomer at a dead end without any test noticing. Links are read as GitHub renders them: inline
``[text](target)`` and ``![alt](target)`` outside code, anchors as GitHub's heading slugs.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose_lines(text: str, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked out unless asked not to."""
    lines, in_fence = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append((number, _CODE_SPAN.sub("", line) if blank_code else line))
    return lines


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every inline link and image on a page."""
    return [(n, m.group(1)) for n, line in prose_lines(path.read_text(encoding="utf-8")) for m in _LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lowercased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page has: its headings' slugs (repeats numbered as GitHub does) and explicit HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8"), blank_code=False):  # `code` in a heading counts
        found.update(_HTML_ANCHOR.findall(line))
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of ``path``, one line each (empty when every link resolves)."""
    problems = []
    for number, target in links(path):
        if _EXTERNAL.match(target):
            continue
        where = f"{path.relative_to(root)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.is_relative_to(root):
            problems.append(f"{where}: points outside the repository")
        elif not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
    return problems


def first_code_block(path: Path) -> list[str]:
    """The lines of the first fenced code block of a page."""
    block: list[str] = []
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            if inside:
                return block
            inside = True
        elif inside:
            block.append(line)
    raise AssertionError(f"{path.name} has no code block")


def commands(path: Path) -> list[list[str]]:
    """The first code block's commands, each split as the shell would, without its comment."""
    return [words for line in first_code_block(path) if (words := shlex.split(line, comments=True))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_in_the_repository_and_an_existing_heading(page: Path) -> None:
    assert links(page) or page.name != "README.md", "no links found: the link pattern no longer reads the page"
    assert broken_links(page) == []


def test_a_missing_file_a_missing_heading_and_a_path_outside_the_repository_are_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A part\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-part), [here](#page), [site](https://example.org/x.md)\n"
        "[gone](nowhere.md), [renamed](other.md#old-part), [out](../../elsewhere/x.md)\n"
        "`[in code](ignored.md)`\n\n```\n[in a block](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "docs/page.md:4: nowhere.md: no such file",
        "docs/page.md:4: other.md#old-part: no heading #old-part in docs/other.md",
        "docs/page.md:4: ../../elsewhere/x.md: points outside the repository",
    ]


def test_github_slugs_drop_punctuation_and_number_repeated_headings(tmp_path: Path) -> None:
    assert slug("Where to add …") == "where-to-add-"
    assert slug("Scripts, torchrun, Accelerate, Lightning, SLURM") == "scripts-torchrun-accelerate-lightning-slurm"
    assert (
        slug("The assertion line: an fd-level tee of fd 2 and fd 1")
        == "the-assertion-line-an-fd-level-tee-of-fd-2-and-fd-1"
    )
    page = tmp_path / "twice.md"
    page.write_text("# Notes\n\n## Notes\n\n## `--apply-fix`\n\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"notes", "notes-1", "--apply-fix"}


def test_every_page_in_docs_is_one_link_away_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for _, target in links(ROOT / "README.md")
        if not _EXTERNAL.match(target)
    }
    assert [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked] == []


def test_the_readmes_first_code_block_is_the_two_setup_commands_and_what_they_run_exists() -> None:
    setup = commands(ROOT / "README.md")
    assert setup == [["bash", "scripts/lab.sh"], ["bash", "scripts/test.sh"]]
    for words in setup:
        assert all((ROOT / word).is_file() for word in words[1:]), words


def test_ci_and_contributing_run_the_readmes_test_command() -> None:
    test_command = shlex.join(commands(ROOT / "README.md")[1])
    assert f"exec {test_command}" in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands(ROOT / "CONTRIBUTING.md") == commands(ROOT / "README.md")
