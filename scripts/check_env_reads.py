#!/usr/bin/env python3
"""Every SENTINEL_* variable is read once, through the registry (common/sentinel_env.h),
never with getenv. Finds getenv/secure_getenv calls on a literal SENTINEL_* name in product code
(a comment that mentions one is not a hit). Test programs may set and read their own.
Usage: check_env_reads.py DIR...  (exit 1 and file:line for each hit, 2 on usage)."""
import pathlib
import re
import sys

CALL = re.compile(r'\b(?:secure_)?getenv\s*\(\s*"SENTINEL_')


def hits(path: pathlib.Path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        code = line.split("//", 1)[0]
        if CALL.search(code):
            yield number, line.strip()


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = 0
    for root in argv[1:]:
        base = pathlib.Path(root)
        if not base.is_dir():
            print(f"check_env_reads: {root}: not a directory", file=sys.stderr)
            return 2
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".cc", ".h", ".c", ".cpp"):
                continue
            for number, line in hits(path):
                print(f"{path}:{number}: SENTINEL_* read with getenv (use ProcessSentinelEnv()): "
                      f"{line}")
                found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
