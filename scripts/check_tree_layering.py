#!/usr/bin/env python3
"""Checks the edges between the repository's top-level trees, in both the C++ includes and the
CMake link graph. A tree may depend only on the trees listed for it:

    schemas  <- every tree (the two written contracts: the wire header and the C ABI)
    common   -> nothing of ours
    plugin   -> common
    collector-> common
    tools    -> common, plugin
    tests    -> anything

An include edge is `#include "<tree>/..."` in a .h/.cc under a tree. A link edge is a target
defined in one tree's CMakeLists.txt naming, in target_link_libraries(), a target defined in
another tree (aliases such as sentinel::rules resolved; targets of the top-level CMakeLists.txt
are the contracts). The exception list is empty, and stays so.
Usage: check_tree_layering.py <repo root>   (exit 1 on a forbidden edge, 2 on bad usage)
"""
import os
import re
import sys

from source_includes import quoted_includes, source_files

CONTRACTS = "schemas"  # the top-level CMakeLists.txt's interface targets count as this tree
ALLOWED = {
    "schemas": set(),
    "common": {"schemas"},
    "plugin": {"schemas", "common"},
    "collector": {"schemas", "common"},
    "tools": {"schemas", "common", "plugin"},
    "tests": {"schemas", "common", "plugin", "collector", "tools"},
}
EXCEPTIONS = set()  # (from, to) edges that break the rule, each with its reason: keep it empty

COMMAND = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*\(')
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE", "LINK_INTERFACE_LIBRARIES",
            "debug", "optimized", "general"}


def strip_comments(text):
    out = []
    for line in text.splitlines():
        quoted = False
        cut = len(line)
        for i, ch in enumerate(line):
            if ch == '"':
                quoted = not quoted
            elif ch == "#" and not quoted:
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def commands(path):
    """(line, name lowercased, [args]) of every command call in a CMakeLists.txt."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_comments(f.read())
    pos = 0
    while True:
        m = COMMAND.search(text, pos)
        if not m:
            return
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
            i += 1
        body = text[m.end():i - 1]
        line = text.count("\n", 0, m.start()) + 1
        yield line, m.group(1).lower(), re.findall(r'"[^"]*"|[^\s()]+', body)
        pos = i


def tree_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in ALLOWED else None


def cmake_files(root):
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and
                             not d.startswith("build"))
        if "CMakeLists.txt" in names:
            path = os.path.join(dirpath, "CMakeLists.txt")
            yield path, os.path.relpath(path, root).replace(os.sep, "/")


def link_edges(root):
    """(file:line, from tree, to tree, from target, to target) of every cross-tree link."""
    owner = {}   # target -> tree ("schemas" for the top level)
    alias = {}   # alias -> target
    calls = []
    for path, rel in cmake_files(root):
        tree = CONTRACTS if rel == "CMakeLists.txt" else tree_of(rel)
        if tree is None:
            continue
        for line, name, args in commands(path):
            if name in ("add_library", "add_executable") and args:
                if len(args) >= 3 and args[1] == "ALIAS":
                    alias[args[0]] = args[2]
                else:
                    owner.setdefault(args[0], tree)
            elif name == "target_link_libraries" and args:
                calls.append((f"{rel}:{line}", tree, args[0], args[1:]))
    for where, tree, target, deps in calls:
        src_tree = owner.get(alias.get(target, target), tree)
        for dep in deps:
            dep = dep.strip('"')
            if dep in KEYWORDS or dep.startswith("$") or dep.startswith("-"):
                continue
            dst_tree = owner.get(alias.get(dep, dep))
            if dst_tree is None or dst_tree == src_tree:
                continue
            yield where, src_tree, dst_tree, target, dep


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"error: {root} is not a directory", file=sys.stderr)
        return 2
    bad = []
    files = 0
    for tree in sorted(ALLOWED):
        top = os.path.join(root, tree)
        if not os.path.isdir(top):
            continue
        for path, rel_to_tree in source_files(top):
            files += 1
            rel = f"{tree}/{rel_to_tree}"
            for lineno, included in quoted_includes(path):
                target_tree = tree_of(included) if "/" in included else None
                if target_tree is None or target_tree == tree:
                    continue
                if target_tree in ALLOWED[tree] or (tree, target_tree) in EXCEPTIONS:
                    continue
                bad.append(f"{rel}:{lineno}: {tree}/ must not include {included}")
    links = 0
    for where, src, dst, target, dep in link_edges(root):
        links += 1
        if dst in ALLOWED[src] or (src, dst) in EXCEPTIONS:
            continue
        bad.append(f"{where}: {src}/ target {target} must not link {dep} ({dst}/)")
    for line in bad:
        print(line, file=sys.stderr)
    if bad:
        print(f"{len(bad)} forbidden edge(s) between top-level trees; allowed: " +
              "; ".join(f"{k} -> {', '.join(sorted(v)) or 'nothing'}" for k, v in
                        sorted(ALLOWED.items())), file=sys.stderr)
        return 1
    print(f"tree layering ok ({files} files, {links} cross-tree link edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
