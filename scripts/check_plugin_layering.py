#!/usr/bin/env python3
"""Checks the include layering of plugin/: every `#include "plugin/<dir>/..."` must point to a
directory the including directory may depend on. The allowed graph is a DAG (checked too):

    abi <- base <- core <- (cupti, transport, guard [+verbs], net) <- entry
    (verbs itself uses abi and base only)

entry/ wires the plugin together and may include anything; nothing includes entry/ but entry/.
Usage: check_plugin_layering.py <repo root>   (exit 1 on a forbidden edge, 2 on bad usage)
"""
import os
import re
import sys

from source_includes import quoted_includes, source_files

# directory -> directories it may include (itself always allowed).
ALLOWED = {
    "abi": set(),
    "base": {"abi"},
    "core": {"abi", "base"},
    # the verbs loader reports through base/status.h, the plugin's one way to fail (header only).
    "verbs": {"abi", "base"},
    "cupti": {"abi", "base", "core"},
    "transport": {"abi", "base", "core"},
    # libnccl-net-sentinel.so is its own .so: its reporter streams through plugin/transport.
    "net": {"abi", "base", "core", "transport"},
    # the guard reads net-plugin evidence through net/net_observer.h and probes verbs.
    "guard": {"abi", "base", "verbs", "net"},
    "entry": {"abi", "base", "core", "cupti", "transport", "net", "guard", "verbs"},
}

EXCEPTIONS = set()  # known edges that break the rule, each with its reason: keep it empty

PLUGIN_INCLUDE = re.compile(r'^plugin/([A-Za-z0-9_]+)/(.+)$')


def check_dag():
    state = {}

    def visit(node, path):
        if state.get(node) == 1:
            return path + [node]
        if state.get(node) == 2:
            return None
        state[node] = 1
        for dep in sorted(ALLOWED.get(node, ())):
            cycle = visit(dep, path + [node])
            if cycle:
                return cycle
        state[node] = 2
        return None

    for node in sorted(ALLOWED):
        cycle = visit(node, [])
        if cycle:
            return cycle
    return None


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    root = argv[1]
    plugin = os.path.join(root, "plugin")
    if not os.path.isdir(plugin):
        print(f"error: {plugin} is not a directory", file=sys.stderr)
        return 2
    cycle = check_dag()
    if cycle:
        print("error: the allowed layering has a cycle: " + " -> ".join(cycle), file=sys.stderr)
        return 1
    bad = []
    files = 0
    for path, rel_to_plugin in source_files(plugin):
        files += 1
        rel = "plugin/" + rel_to_plugin
        rel_dir = rel_to_plugin.split("/")[0] if "/" in rel_to_plugin else "."
        if rel_dir not in ALLOWED:
            bad.append(f"{rel}: directory plugin/{rel_dir} has no layer in this checker")
            continue
        for lineno, included in quoted_includes(path):
            m = PLUGIN_INCLUDE.match(included)
            if not m:
                continue
            target_dir = m.group(1)
            target = f"plugin/{target_dir}/{m.group(2)}"
            if target_dir == rel_dir or target_dir in ALLOWED[rel_dir]:
                continue
            if (rel, target) in EXCEPTIONS:
                continue
            bad.append(f"{rel}:{lineno}: plugin/{rel_dir} must not include {target}")
    for line in bad:
        print(line, file=sys.stderr)
    if bad:
        print(f"{len(bad)} forbidden include(s); layering: {__doc__.splitlines()[3].strip()}",
              file=sys.stderr)
        return 1
    print(f"plugin layering ok ({files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
