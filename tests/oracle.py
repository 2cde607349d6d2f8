#!/usr/bin/env python3
"""Fills in the expected results of Tessera's conformance files with DuckDB's answers.

A conformance file (`*.test`) holds a Tessera script (inline, or a path after `script:`), the
SQL that asks the same question (after `sql:`), and, after a line `----`, the expected result as
CSV with a header. This script runs the SQL with DuckDB over the same Parquet files Tessera reads
and rewrites everything after `----`. Tessera never produces its own expectations.

    python3 tests/oracle.py                        # every file under tests/conformance
    python3 tests/oracle.py tests/conformance/ssb  # a folder, or single files
    python3 tests/oracle.py --data D --out E       # answers on data D, written to copies under E

Data: a file's `data:` line names generated data, `ssb SF` (the Star Schema Benchmark at that scale
factor), `tpch SF` (TPC-H) or `wisconsin ROWS` (the Wisconsin relations), or a checked-in folder, `folder PATH`
(relative to the file's folder or one above it; see tests/data/make.py). Unless `--data` is given, it is generated
with `tessera gen` (deterministic) into target/conformance-data.
"""

import argparse
import datetime
import decimal
import math
import os
import pathlib
import subprocess
import sys

try:
    import duckdb
except ImportError:
    sys.exit("error: the DuckDB Python package is missing: pip install duckdb")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse(path):
    """Splits a conformance file into its header lines, fields and everything before `----`."""
    text = path.read_text()
    head, sep, _ = text.partition("\n----\n")
    if not sep:
        head = text.rstrip("\n")
        if head.endswith("----"):
            head = head[: -len("----")].rstrip("\n")
    fields = {}
    current = None
    for line in head.splitlines():
        if line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if colon and key in ("data", "script", "sql", "order") and current not in ("script", "sql") or (
            colon and key in ("sql",)
        ):
            current = key
            fields[key] = value.strip()
            continue
        if current in ("script", "sql"):
            fields[current] = (fields[current] + "\n" + line).strip("\n")
    return head, fields


def dataset(path, fields, args):
    if args.data:
        return pathlib.Path(args.data)
    kind, _, scale = fields.get("data", "").partition(" ")
    if kind == "folder" and scale:
        # A checked-in folder, relative to the file's folder or one above it.
        for ancestor in [path.parent, *path.resolve().parents]:
            if (ancestor / scale).is_dir():
                return (ancestor / scale).resolve()
        sys.exit(f"error: {path}: data folder {scale} not found")
    if kind == "ssb" and scale:
        folder = ROOT / "target" / "conformance-data" / f"ssb-{scale}"
        marker = folder / "date.parquet"
        arguments = ["gen", "ssb", "--sf", scale, "--out", str(folder)]
    elif kind == "tpch" and scale:
        folder = ROOT / "target" / "conformance-data" / f"tpch-{scale}"
        marker = folder / "lineitem.parquet"
        arguments = ["gen", "tpch", "--sf", scale, "--out", str(folder)]
    elif kind == "wisconsin" and scale:
        folder = ROOT / "target" / "conformance-data" / f"wisconsin-{scale}"
        marker = folder / "wisconsin_small.parquet"
        arguments = ["gen", "wisconsin", "--rows", scale, "--out", str(folder)]
    else:
        sys.exit(f"error: unsupported data line {fields.get('data')!r}")
    if not marker.exists():
        tessera = args.tessera or str(ROOT / "target" / "debug" / "tessera")
        command = [tessera] + arguments
        if not os.path.exists(tessera):
            command = ["cargo", "run", "--quiet", "--"] + command[1:]
        subprocess.run(command, check=True, cwd=ROOT)
    return folder


def connect(folder):
    connection = duckdb.connect()
    for entry in sorted(folder.iterdir()):
        name = entry.stem if entry.suffix == ".parquet" else entry.name
        if entry.is_dir() and any(entry.rglob("*=*")):
            connection.execute(
                f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{entry}/**/*.parquet', hive_partitioning = true)"
            )
            continue
        if entry.is_dir():
            pattern = str(entry / "*.parquet")
        elif entry.suffix == ".parquet":
            pattern = str(entry)
        elif entry.suffix in (".arrow", ".feather", ".ipc"):
            import pyarrow.feather

            connection.register(entry.stem, pyarrow.feather.read_table(str(entry)))
            continue
        elif entry.suffix in (".csv", ".tsv"):
            connection.execute(f"CREATE VIEW \"{entry.stem}\" AS SELECT * FROM read_csv('{entry}')")
            continue
        else:
            continue
        connection.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{pattern}')")
    return connection


def csv_field(text):
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def cell(value):
    """A value as Tessera's CSV output writes it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return f"{value:.1f}"
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        # As DuckDB prints it: a zone's instant in UTC, the fraction of a second without
        # trailing zeros.
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d ") + cell(value.time())
    if isinstance(value, datetime.time):
        text = value.strftime("%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, datetime.date):
        return value.isoformat()
    return csv_field(str(value))


def answer(connection, sql):
    result = connection.execute(sql)
    names = [d[0] for d in result.description]
    lines = [",".join(csv_field(n) for n in names)]
    for row in result.fetchall():
        lines.append(",".join(cell(v) for v in row))
    return "\n".join(lines) + "\n"


def files(paths):
    for path in paths:
        path = pathlib.Path(path)
        if path.is_dir():
            yield from sorted(path.rglob("*.test"))
        else:
            yield path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "tests" / "conformance")])
    parser.add_argument("--data", help="the data directory to answer on (default: generated per file)")
    parser.add_argument("--out", help="write copies of the files here instead of rewriting them")
    parser.add_argument("--tessera", help="the tessera binary used to generate data")
    args = parser.parse_args()
    connections = {}
    roots = [pathlib.Path(p).resolve() for p in args.paths]
    for path in files(args.paths):
        head, fields = parse(path)
        if "sql" not in fields:
            sys.exit(f"error: {path} has no `sql:` section")
        folder = dataset(path, fields, args)
        if folder not in connections:
            connections[folder] = connect(folder)
        expected = answer(connections[folder], fields["sql"])
        text = head + "\n----\n" + expected
        target = path
        if args.out:
            resolved = path.resolve()
            base = next((r for r in roots if r in resolved.parents), resolved.parent)
            base = base if base.is_dir() else base.parent
            target = pathlib.Path(args.out) / resolved.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            script = fields.get("script", "")
            if script and "\n" not in script:
                # Keep the copy runnable from anywhere: point at the script by absolute path.
                resolved_script = (path.parent / script)
                for ancestor in [path.parent, *path.resolve().parents]:
                    if (ancestor / script).exists():
                        resolved_script = ancestor / script
                        break
                text = text.replace(f"script: {script}", f"script: {resolved_script.resolve()}", 1)
            text = f"# expected values computed by DuckDB on {folder}\n" + text
        target.write_text(text)
        rows = expected.count("\n") - 1
        print(f"{target}: {rows} row{'s' if rows != 1 else ''}")


if __name__ == "__main__":
    main()
