#!/usr/bin/env python3
"""Summarise a CSV file: rows, columns, and per column min/max/mean/sum or distinct values.

usage: csv_summary.py CSV_PATH [COLUMN]

CSV_PATH is relative to the current directory (the workspace). With COLUMN, only that column
(matched case-insensitively) is summarised. Output is one fact per line, `key: value`.
A column is numeric when most of its non-empty cells are numbers (plain decimals such as
`12`, `-4.50`, `1e3`; not `1,000` or `$5`); its other cells are counted and ignored. Sums are
exact and keep the decimals of the inputs; the mean is rounded to 4 decimals.
Errors are one line on stderr. Exit status: 0 on success, 1 when the file cannot be read as
CSV, 2 on a usage error (wrong arguments, unknown column).
"""

import csv
import os
import sys
from collections import Counter
from decimal import Context, Decimal, InvalidOperation, localcontext

USAGE = "usage: csv_summary.py CSV_PATH [COLUMN]"
MAX_DISTINCT = 100_000  # distinct values tracked per text column
SHOWN_VALUES = 5  # distinct values listed for a text column
SHOWN_IGNORED = 3  # non-numbers listed for a numeric column
MAX_EXPONENT = 30  # numbers outside 1e-30 .. 1e30 in magnitude are treated as text
# Exact for any sum of numbers within MAX_EXPONENT written in at most 64 characters.
EXACT = Context(prec=200, traps=[InvalidOperation])


class Failure(Exception):
    """An error reported as one line on stderr with an exit status."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def parse_number(text):
    """A finite Decimal for a numeric cell, else None (thousands separators are not numbers)."""
    text = text.strip()
    if not text or len(text) > 64 or "_" in text:
        return None
    try:
        value = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return None
    if value and not -MAX_EXPONENT <= value.adjusted() <= MAX_EXPONENT:
        return None
    return value


def fmt(value):
    """A Decimal as plain digits, never an exponent; a sum keeps the inputs' decimals."""
    text = format(value, "f")
    return text[1:] if value == 0 and text.startswith("-") else text


def fmt_mean(total, count):
    with localcontext(EXACT):
        mean = (total / count).quantize(Decimal("0.0001"))
    text = format(mean, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def csv_files_here():
    try:
        names = sorted(name for name in os.listdir(".") if name.lower().endswith((".csv", ".tsv")))
    except OSError:
        return "none"
    return ", ".join(names[:10]) if names else "none"


def open_csv(path):
    if not os.path.exists(path):
        raise Failure(
            f"file not found: {path} (paths are relative to the workspace {os.getcwd()}; "
            f"CSV files there: {csv_files_here()})"
        )
    if os.path.isdir(path):
        raise Failure(f"{path} is a directory, not a CSV file")
    if not os.path.isfile(path):
        raise Failure(f"{path} is not a regular file")
    try:
        handle = open(path, "r", encoding="utf-8-sig", newline="")
    except OSError as error:
        raise Failure(f"cannot read {path}: {error.strerror or error}")
    try:
        sample = handle.read(64 * 1024)
        handle.seek(0)
    except UnicodeDecodeError:
        handle.close()
        raise Failure(f"{path} is not UTF-8 text (is it a CSV file?)")
    except OSError as error:
        handle.close()
        raise Failure(f"cannot read {path}: {error.strerror or error}")
    if "\0" in sample:
        handle.close()
        raise Failure(f"{path} looks binary, not a CSV file")
    if path.lower().endswith(".tsv"):
        delimiter = "\t"
    else:
        first_line = sample.splitlines()[0] if sample else ""
        candidates = [",", ";", "\t", "|"]
        delimiter = max(candidates, key=lambda candidate: first_line.count(candidate))
        if first_line.count(delimiter) == 0:
            delimiter = ","
    return handle, delimiter


def unique_headers(header):
    names = []
    seen = set()
    for index, raw in enumerate(header, start=1):
        name = raw.strip() or f"column_{index}"
        base, suffix = name, 2
        while name.lower() in seen:
            name = f"{base}_{suffix}"
            suffix += 1
        seen.add(name.lower())
        names.append(name)
    return names


class Column:
    def __init__(self, name):
        self.name = name
        self.values = 0
        self.missing = 0
        self.numbers = 0
        self.ignored = Counter()
        self.total = Decimal(0)
        self.minimum = None
        self.maximum = None
        self.counts = Counter()
        self.too_many = False

    def add(self, cell):
        cell = cell.strip()
        if not cell:
            self.missing += 1
            return
        self.values += 1
        number = parse_number(cell)
        if number is None:
            if len(self.ignored) < MAX_DISTINCT:
                self.ignored[cell] += 1
        else:
            self.numbers += 1
            self.total = EXACT.add(self.total, number)
            if self.minimum is None or number < self.minimum:
                self.minimum = number
            if self.maximum is None or number > self.maximum:
                self.maximum = number
        if not self.too_many:
            self.counts[cell] += 1
            if len(self.counts) > MAX_DISTINCT:
                self.too_many = True

    def report(self):
        lines = []
        others = self.values - self.numbers
        numeric = self.numbers > others
        kind = "numeric" if numeric else "text"
        header = f"column {self.name}: {kind}, {self.values} values, {self.missing} empty"
        if numeric and others:
            ranked = sorted(self.ignored.items(), key=lambda item: (-item[1], item[0]))
            shown = ", ".join(short(value) for value, _ in ranked[:SHOWN_IGNORED])
            if len(ranked) > SHOWN_IGNORED:
                shown += ", …"
            header += f", {others} not numbers (ignored: {shown})"
        lines.append(header)
        if numeric:
            lines.append(f"{self.name} min: {fmt(self.minimum)}")
            lines.append(f"{self.name} max: {fmt(self.maximum)}")
            lines.append(f"{self.name} mean: {fmt_mean(self.total, self.numbers)}")
            lines.append(f"{self.name} sum: {fmt(self.total)}")
        elif self.values:
            if self.too_many:
                lines.append(f"{self.name} distinct: more than {MAX_DISTINCT}")
            else:
                lines.append(f"{self.name} distinct: {len(self.counts)}")
                ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
                shown = ", ".join(f"{short(value)} ({count})" for value, count in ranked[:SHOWN_VALUES])
                more = len(ranked) - SHOWN_VALUES
                if more > 0:
                    shown += f", … {more} more"
                lines.append(f"{self.name} values: {shown}")
        return lines


def short(text, limit=40):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarise(path, wanted):
    handle, delimiter = open_csv(path)
    with handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            header = next(reader, None)
            if header is None:
                raise Failure(f"{path} is empty (no header row)")
            names = unique_headers(header)
            selected = list(range(len(names)))
            if wanted is not None:
                matches = [i for i, name in enumerate(names) if name.lower() == wanted.strip().lower()]
                if not matches:
                    raise Failure(
                        f"unknown column: {wanted} (columns in {path}: {', '.join(names)})", 2
                    )
                selected = matches[:1]
            columns = {i: Column(names[i]) for i in selected}
            rows = 0
            ragged = 0
            for record in reader:
                if not record or all(not cell.strip() for cell in record):
                    continue
                rows += 1
                if len(record) != len(names):
                    ragged += 1
                for i, column in columns.items():
                    column.add(record[i] if i < len(record) else "")
        except csv.Error as error:
            raise Failure(f"{path} is not valid CSV (line {reader.line_num}): {error}")
        except UnicodeDecodeError:
            raise Failure(f"{path} is not UTF-8 text (is it a CSV file?)")
    # A file that is not named as a table and reads as none (one column, or most rows with
    # another number of fields): a Markdown or text file's lines are no table's rows, and a
    # summary of them would give counts that answer nothing.
    if not path.lower().endswith((".csv", ".tsv")) and (len(names) < 2 or ragged * 2 > rows):
        raise Failure(
            f"{path} is not a table: its lines have no common separator of columns (this "
            f"script summarises CSV and TSV files; CSV files here: {csv_files_here()})",
            2,
        )
    lines = [f"file: {path}", f"rows: {rows}", f"columns: {len(names)} ({', '.join(names)})"]
    if ragged:
        lines.append(f"rows with a different number of fields: {ragged}")
    for i in selected:
        lines.extend(columns[i].report())
    return lines


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if not argv or len(argv) > 2:
        print(
            f"csv_summary: expected a CSV path and an optional column, got {len(argv)} arguments ({USAGE})",
            file=sys.stderr,
        )
        return 2
    csv.field_size_limit(16 * 1024 * 1024)
    try:
        lines = summarise(argv[0], argv[1] if len(argv) == 2 else None)
    except Failure as failure:
        print(f"csv_summary: {failure}", file=sys.stderr)
        return failure.status
    except OSError as error:
        print(f"csv_summary: cannot read {argv[0]}: {error.strerror or error}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"csv_summary: {argv[0]} is too large to summarise", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    # The same bytes whatever the locale; a cell that cannot be encoded is shown as `?`.
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    sys.stderr.reconfigure(encoding="utf-8", errors="replace")
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
