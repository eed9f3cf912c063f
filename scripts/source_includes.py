"""The quoted #includes of the C++ sources under a directory (used by the layering checkers)."""
import os
import re

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(top):
    """(path, path relative to top with '/') of every .h/.cc below top, in a stable order."""
    for dirpath, dirnames, names in os.walk(top):
        dirnames.sort()
        for name in sorted(names):
            if name.endswith((".h", ".cc")):
                path = os.path.join(dirpath, name)
                yield path, os.path.relpath(path, top).replace(os.sep, "/")


def quoted_includes(path):
    """(line number, included path) of each #include "..." of the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield line_no, m.group(1)
