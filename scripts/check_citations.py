#!/usr/bin/env python3
"""Checks that every citation of docs/ can be followed by a reader with no other help.

A citation names the file and the heading, the heading quoted as it begins in the file:

    docs/nccl-facts.md "4.5 The activation mask"
    docs/cupti-verbs-facts.md "3.1 Listing devices", "3.4 Link rate"      (same file)
    docs/nccl-facts.md "4.1 Finding the library" to "4.3 `finalize` and unload"
    docs/nccl-facts.md "5.6 Pitfalls" item 1                              (text after: free)

The quoted text starts with the section number and must be the heading's text or a beginning of it
that ends at a word boundary (at least one word of the title). Quoted headings joined to a citation
by ", ", " and ", " or " or " to " cite the same file. Inside a page of docs/, a quoted heading
alone ("5.1 Per-event facts") cites that same page. CONTRIBUTING.md, "Citing docs/", has the rule.

Fails on:
- a heading that does not exist in the cited file, or a cited docs/ file that does not exist;
- a section sign (U+00A7) anywhere: the old "section N" form that names no heading;
- `docs/<file>.md N.M` with a bare number instead of a quoted heading.

Files searched: every file git knows (tracked, or untracked and not ignored) except binaries and
the checker's own planted fixtures (tests/ci/citations/, checked by tests/ci/CMakeLists.txt).
A citation may wrap over lines: comment markers (//, /*, *, #) at line starts are ignored.

Usage: check_citations.py <repo root>   (exit 1 on a finding, 2 on bad usage)
"""
import os
import re
import subprocess
import sys

SECTION_SIGN = "\u00a7"
NUM = r"(?:\d+(?:\.\d+)+|\d+\.)"
QUOTED = rf'"({NUM} [^"\n]+?)"'
CHAIN = r"(?:, | and | or | to )"
DOC = r"docs/[A-Za-z0-9_.-]+?\.md"
CITATION = re.compile(rf"({DOC})\s+{QUOTED}((?:{CHAIN}{QUOTED})*)")
CHAINED = re.compile(rf"{CHAIN}{QUOTED}")
BARE_NUMBER = re.compile(rf"({DOC})`?,?\s+(\d+\.\d+)\b")
SELF = re.compile(rf"(?<![\w/.])(?:{CHAIN})?{QUOTED}")
COMMENT_START = re.compile(r"^\s*(?://+!?|/\*+|\*+(?!/)|#+)?\s?")
HEADING = re.compile(r"^#+\s+(\d+(?:\.\d+)*\.?\s.*?)\s*$")


def norm(text):
    return " ".join(text.split())


def headings(root, doc, cache):
    """The headings of docs/<file>.md that start with a section number, or None if no such file."""
    if doc not in cache:
        path = os.path.join(root, doc)
        if not os.path.isfile(path):
            cache[doc] = None
        else:
            with open(path, encoding="utf-8") as f:
                cache[doc] = [norm(m.group(1)) for m in map(HEADING.match, f) if m]
    return cache[doc]


def resolves(cited, heads):
    cited = norm(cited)
    if " " not in cited:
        return False
    for h in heads:
        if h == cited:
            return True
        if h.startswith(cited) and not h[len(cited)].isalnum():
            return True
    return False


def joined(text):
    """The file's text with comment markers at line starts dropped and lines joined by a space;
    returns it with the offset at which each line starts."""
    parts, starts, pos = [], [], 0
    for line in text.split("\n"):
        body = COMMENT_START.sub("", line, count=1)
        starts.append(pos)
        parts.append(body)
        pos += len(body) + 1
    return " ".join(parts), starts


def line_of(starts, offset):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


# The checker's fixtures: a tree of their own, with wrong citations on purpose.
EXCLUDED = ("tests/ci/citations/",)


def files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True).stdout
        names = out.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but builds
        names = []
        for top, dirs, found in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            names += [os.path.relpath(os.path.join(top, f), root) for f in found]
    for rel in sorted(set(names)):
        if rel.startswith(EXCLUDED):
            continue
        if rel and os.path.isfile(os.path.join(root, rel)):
            yield rel


def check_file(root, rel, text, cache):
    findings = []
    flat, starts = joined(text)
    for i, line in enumerate(text.split("\n"), 1):
        if SECTION_SIGN in line:
            findings.append((i, "a section sign: cite docs/<file>.md \"<heading>\" instead"))
    covered = []
    for m in CITATION.finditer(flat):
        doc = m.group(1)
        heads = headings(root, doc, cache)
        at = line_of(starts, m.start())
        if heads is None:
            findings.append((at, f"{doc} does not exist"))
            continue
        cited = [m.group(2)] + [c.group(1) for c in CHAINED.finditer(m.group(3))]
        for c in cited:
            if not resolves(c, heads):
                findings.append((at, f'{doc} has no heading "{norm(c)}"'))
        covered.append((m.start(), m.end()))
    for m in BARE_NUMBER.finditer(flat):
        findings.append((line_of(starts, m.start()),
                         f'{m.group(1)} {m.group(2)}: quote the heading, e.g. "{m.group(2)} Title"'))
    if rel.startswith("docs/") and rel.endswith(".md"):
        heads = headings(root, rel, cache)
        for m in SELF.finditer(flat):
            if any(a <= m.start() < b for a, b in covered):
                continue
            if not resolves(m.group(1), heads):
                findings.append((line_of(starts, m.start()),
                                 f'{rel} has no heading "{norm(m.group(1))}"'))
    return findings


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    cache = {}
    bad = 0
    for rel in files(root):
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for line, what in check_file(root, rel, text, cache):
            print(f"{rel}:{line}: {what}")
            bad += 1
    if bad:
        print(f"CI: {bad} citation(s) of docs/ a reader cannot follow (CONTRIBUTING.md, "
              "\"Citing docs/\")")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
