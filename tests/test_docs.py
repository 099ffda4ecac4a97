"""The README is for users: short, with its two commands, and every page it points at exists.

Everything beyond the README lives in ``docs/*.md`` (each reachable from the README) and
``benchmarks/README.md``; a link to a file that was moved or renamed fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MOST_LINES = 250
# Markdown links and images ``[text](target)`` / ``![alt](target)``, and HTML ``src=``/``href=``.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|(?:src|href)=\"([^\"]+)\"")


def pages() -> list[Path]:
    return [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(text: str, anchors: bool = False) -> list[str]:
    """Targets of the links in ``text`` that point into the repository (no URL, no link to
    the page's own headings); with ``anchors``, ``file#heading`` as written."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    targets = [a or b for a, b in LINK.findall(text)]
    kept = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    return kept if anchors else [t.split("#")[0] for t in kept]


def headings(page: Path) -> set[str]:
    """GitHub's anchors of the headings of ``page`` (lower case, punctuation dropped, - for spaces)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }


def test_readme_is_at_most_250_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_LINES, (
        f"README.md has {lines} lines: move details to docs/ (at most {MOST_LINES})"
    )


def test_every_relative_link_points_at_a_file():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages()
              for target in relative_links(page.read_text(encoding="utf-8"))
              if not (page.parent / target).exists()]  # fmt: skip
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_every_link_to_a_heading_finds_it():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in pages()
              for target in relative_links(page.read_text(encoding="utf-8"), anchors=True)
              if "#" in target and (page.parent / target.split("#")[0]).suffix == ".md"
              and target.split("#")[1] not in headings(page.parent / target.split("#")[0])]  # fmt: skip
    assert not broken, "links to no heading:\n" + "\n".join(broken)


def test_every_docs_page_and_screenshot_is_reachable_from_the_readme():
    readme = README.read_text(encoding="utf-8")
    linked = {(ROOT / t).resolve() for t in relative_links(readme)}
    for page in pages()[2:]:  # a page linked from another docs page counts too
        linked |= {
            (page.parent / t).resolve() for t in relative_links(page.read_text(encoding="utf-8"))
        }
    docs = ROOT / "docs"
    orphans = [
        p.name
        for p in sorted([*docs.glob("*.md"), *docs.glob("*.png")])
        if p.resolve() not in linked
    ]
    assert not orphans, f"docs/ files no page links to: {orphans}"


def test_the_readme_shows_the_two_commands_ci_runs():
    readme = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/setup-venv qt && .venv/bin/n5zarr view" in readme  # the main job
    assert "bash .ci/run" in readme  # the tests
    test_command = ".venv/bin/python -m pytest -q -p no:cacheprovider"
    assert test_command in ci
    assert test_command in readme


def test_the_link_finder_finds_links_and_skips_urls():
    text = '[a](docs/x.md) ![b](docs/y.png "t") <img src="docs/z.png"> [c](https://e.org) [d](#top) [e](f.md#s)\n```\n[g](no.md)\n```'
    assert sorted(relative_links(text)) == ["docs/x.md", "docs/y.png", "docs/z.png", "f.md"]
    assert "f.md#s" in relative_links(text, anchors=True)


def test_headings_become_github_anchors(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "# The `n5zarr` command\n## Remote reads: timeouts, retries\n```\n# not a heading\n```\n"
    )
    assert headings(page) == {"the-n5zarr-command", "remote-reads-timeouts-retries"}
