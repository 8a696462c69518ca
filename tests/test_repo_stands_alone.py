"""A clone of the repository stands alone: no file points outside it, and every citation of a
spec section (``STORE.md §10``) or of a house rule resolves inside ``docs/``."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "docs" / "spec"
DESIGN = ROOT / "docs" / "design.md"
PERF = ROOT / "docs" / "perf.md"

# Built from pieces so that this file does not trip its own check.
OUTSIDE_PATHS = [
    ("../" + "shared").encode(),
    ("/work/" + "shared").encode(),
    ("shared/" + "spec").encode(),
]
SPEC_NAMES = ("REMOTING", "CODES", "MESSAGE", "STORE", "ROUTE", "SPARK", "HA", "ACL")
SPEC_NAMES += ("METRICS", "GRPC_POP")

# A spec name with ".md", or a bare one right before a section sign ("REMOTING §11").
DOC_NAME = re.compile(rf"\b({'|'.join(SPEC_NAMES)})(?:\.md\b|(?= ?§))")
# a section sign, a number ("3", "4.13"), maybe a range to another ("1-7", "3.1-3.3")
SECTION = re.compile(r"§ ?(\d+(?:\.\d+)*)(?: ?[-\u2013] ?§?(\d+(?:\.\d+)*))?")
TOKEN = re.compile(f"{DOC_NAME.pattern}|{SECTION.pattern}")
HEADING = re.compile(r"^#+ (\d+(?:\.\d+)*)[. ]", re.MULTILINE)
LIST_ITEM = re.compile(r"^(\d+)\. ", re.MULTILINE)
OLD_DESIGN_NAMES = re.compile(r"\b(DESIGN|PERF)\.md\b")
DESIGN_RULE = re.compile(r"docs/design\.md,? rules? (\d+)")


def repository_files() -> list[Path]:
    """Tracked files plus new ones not ignored, so a check passes before and after a commit."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in listing.split("\0") if name and (ROOT / name).is_file()]


@cache
def text_files() -> dict[str, str]:
    texts = {}
    for path in repository_files():
        try:
            texts[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: golden frames, compiled extensions
    return texts


@cache
def sections_of(doc: Path) -> frozenset[str]:
    """Numbered headings ("4", "4.2") and numbered list items under a heading ("4.13")."""
    text = doc.read_text(encoding="utf-8")
    found = set()
    headings = list(HEADING.finditer(text))
    for index, heading in enumerate(headings):
        number = heading.group(1)
        found.add(number)
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        found.update(f"{number}.{item}" for item in LIST_ITEM.findall(text, heading.end(), end))
    return frozenset(found)


def citations(name: str, text: str):
    """(line number, spec name, section) for every section cited. A section sign without a
    name belongs to the spec named last before it; in a spec file, named on the same line, or
    else the spec file itself."""
    own = Path(name).stem if name.startswith("docs/spec/") else None
    doc = own
    for number, line in enumerate(text.splitlines(), 1):
        if own:
            doc = own
        for token in TOKEN.finditer(line):
            if token.group(1):
                doc = token.group(1)
                continue
            for section in token.group(2, 3):
                if section and doc:
                    yield number, doc, section


def test_no_file_points_outside_the_repository():
    offenders = []
    for path in repository_files():
        content = path.read_bytes()
        offenders += [
            f"{path.relative_to(ROOT)}: {p.decode()}" for p in OUTSIDE_PATHS if p in content
        ]
    assert not offenders, "paths outside a clone; point at docs/ instead:\n" + "\n".join(offenders)


def test_every_cited_spec_section_exists():
    broken = []
    for name, text in text_files().items():
        for line, doc, section in citations(name, text):
            spec = SPEC_DIR / f"{doc}.md"
            if not spec.exists():
                broken.append(f"{name}:{line}: {doc}.md §{section}: docs/spec/{doc}.md is missing")
            elif section not in sections_of(spec):
                broken.append(f"{name}:{line}: {doc}.md §{section}: no such section")
    assert not broken, "\n".join(broken)


def test_design_and_perf_are_cited_by_their_paths_in_docs():
    broken = []
    design_rules = set(LIST_ITEM.findall(DESIGN.read_text(encoding="utf-8")))
    assert PERF.exists()
    for name, text in text_files().items():
        for number, line in enumerate(text.splitlines(), 1):
            if match := OLD_DESIGN_NAMES.search(line):
                broken.append(f"{name}:{number}: {match[0]}: write docs/{match[1].lower()}.md")
            for rule in DESIGN_RULE.findall(line):
                if rule not in design_rules:
                    broken.append(f"{name}:{number}: docs/design.md has no rule {rule}")
    assert not broken, "\n".join(broken)


def test_the_checker_finds_what_it_must():
    cited = list(citations("x.py", "see STORE.md §3-5, §12; SPARK.md (§4.13); REMOTING §11"))
    assert [(doc, section) for _, doc, section in cited] == [
        ("STORE", "3"),
        ("STORE", "5"),
        ("STORE", "12"),
        ("SPARK", "4.13"),
        ("REMOTING", "11"),
    ]
    assert list(citations("docs/spec/CODES.md", "x\nsee §4.2")) == [(2, "CODES", "4.2")]
    assert "4.13" in sections_of(SPEC_DIR / "SPARK.md")
    assert "99" not in sections_of(SPEC_DIR / "STORE.md")
