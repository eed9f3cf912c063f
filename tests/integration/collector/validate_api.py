#!/usr/bin/env python3
"""Validates sentineld HTTP payloads against schemas/api/*.schema.json.

usage: validate_api.py SCHEMA_DIR NAME=FILE...   (NAME: alerts, ranks, telemetry, healthz, trace, error, expect, exclude)
Exit 0 when every file is valid, 1 otherwise, 77 when the jsonschema module is missing.
"""
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    print("python3 jsonschema module missing (Debian: python3-jsonschema)")
    sys.exit(77)


def main():
    schema_dir = pathlib.Path(sys.argv[1])
    failed = False
    for item in sys.argv[2:]:
        name, path = item.split("=", 1)
        schema = json.loads((schema_dir / f"{name}.schema.json").read_text())
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        payload = json.loads(pathlib.Path(path).read_text())
        errors = sorted(cls(schema).iter_errors(payload), key=lambda e: list(e.path))
        for e in errors:
            failed = True
            print(f"{name}: {path}: {'/'.join(map(str, e.path))}: {e.message}")
        if not errors:
            print(f"{name}: ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
