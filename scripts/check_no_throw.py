#!/usr/bin/env python3
"""House style 3.4: no `throw` in our C++ sources. Comments and string/char literals are removed
before looking, so a comment that mentions throw is fine and code after a comment is not missed.
Usage: check_no_throw.py DIR...  (exit 1 and file:line for each hit)."""
import pathlib
import re
import sys


def strip(text: str) -> str:
    """Replaces comments and literals with spaces, keeping newlines (line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
                i = j
            else:
                out.append(c)
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main() -> int:
    hits = []
    for root in sys.argv[1:]:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if path.suffix not in (".cc", ".h") or not path.is_file():
                continue
            code = strip(path.read_text(errors="replace"))
            for no, line in enumerate(code.splitlines(), 1):
                if re.search(r"\bthrow\b", line):
                    hits.append(f"{path}:{no}: {line.strip()}")
    for h in hits:
        print(h)
    if hits:
        print("CI: 'throw' found in our sources (docs/house-rules.md \"3.4 Error handling\")")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
