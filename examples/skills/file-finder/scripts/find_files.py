#!/usr/bin/env python3
"""Find files in the workspace by name (glob or part of the name) or by text they contain.

usage: find_files.py [--name | --text] [--max N] PATTERN [FOLDER]

PATTERN with `*`, `?` or `[` is a glob matched against file names and relative paths
(`*.csv`, `data/*.json`, `**/test_*.py`). Any other PATTERN finds files whose name (or, when it
holds a `/`, relative path) contains it and lines that contain it. `--name` searches names only, `--text` contents only. Matching ignores
case. FOLDER (default: the whole workspace, the current directory) limits the search.
Skipped: .git, .agent, node_modules, target, __pycache__, .venv; symlinks are never followed
out of the workspace; binary files and files over 1 MiB are not searched for text.
Output, one fact per line:
    file: data/sales.csv                  (a name match)
    line: notes.txt:3: the matching line  (a text match)
    matches: 2 (files searched: 14)
Errors are one line on stderr. Exit status: 0 (also when nothing matches), 1 when the folder
cannot be read, 2 on a usage error.
"""

import fnmatch
import os
import sys

USAGE = "usage: find_files.py [--name | --text] [--max N] PATTERN [FOLDER]"
SKIPPED_FOLDERS = {".git", ".agent", "node_modules", "target", "__pycache__", ".venv", ".hg", ".svn"}
DEFAULT_MAX = 50
LIMIT_MAX = 1000
MAX_FILES = 20_000
MAX_TEXT_BYTES = 1024 * 1024
LINE_CHARS = 160


class UsageError(Exception):
    pass


def parse(argv):
    mode, limit, rest = "auto", DEFAULT_MAX, []
    arguments = iter(argv)
    for argument in arguments:
        if argument in ("--name", "--names"):
            mode = "name"
        elif argument in ("--text", "--content", "--contents"):
            mode = "text"
        elif argument == "--max" or argument.startswith("--max="):
            value = argument.partition("=")[2] if "=" in argument else next(arguments, None)
            if value is None or not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= LIMIT_MAX:
                raise UsageError(f"--max needs a whole number from 1 to {LIMIT_MAX}, got: {value}")
            limit = int(value)
        elif argument.startswith("--") and len(argument) > 2:
            raise UsageError(f"unknown option: {argument}")
        else:
            rest.append(argument)
    if not rest:
        raise UsageError("no PATTERN given")
    if len(rest) > 2:
        raise UsageError(f"expected PATTERN and an optional FOLDER, got {len(rest)} arguments: {' '.join(rest)}")
    pattern = rest[0]
    if not pattern.strip():
        raise UsageError("the PATTERN is empty")
    if len(pattern) > 200:
        raise UsageError("the PATTERN is longer than 200 characters")
    folder = rest[1] if len(rest) == 2 else "."
    return mode, limit, pattern, folder


def inside(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def walk(start, root, counter):
    """Relative paths (with `/`) of the files under `start`, sorted, never leaving `root`."""
    for directory, folders, files in os.walk(start, followlinks=False, onerror=None):
        folders[:] = sorted(folder for folder in folders if folder not in SKIPPED_FOLDERS)
        for name in sorted(files):
            absolute = os.path.join(directory, name)
            if os.path.islink(absolute) and not inside(os.path.realpath(absolute), root):
                continue
            if not os.path.isfile(absolute):
                continue
            counter[0] += 1
            if counter[0] > MAX_FILES:
                return
            yield os.path.relpath(absolute, root).replace(os.sep, "/")


def is_glob(pattern):
    return any(character in pattern for character in "*?[")


def name_matches(relative, pattern, glob):
    name = relative.rsplit("/", 1)[-1].lower()
    pattern = pattern.lower()
    if not glob:
        return pattern in (relative.lower() if "/" in pattern else name)
    path = relative.lower()
    candidates = {pattern}
    if pattern.startswith("**/"):
        candidates.add(pattern[3:])
    if pattern.startswith("./"):
        candidates.add(pattern[2:])
    return any(
        fnmatch.fnmatchcase(name, candidate) or fnmatch.fnmatchcase(path, candidate)
        for candidate in candidates
    )


def text_matches(path, needle):
    try:
        if os.path.getsize(path) > MAX_TEXT_BYTES:
            return
        with open(path, "rb") as handle:
            data = handle.read(MAX_TEXT_BYTES + 1)
    except OSError:
        return
    if b"\0" in data[:8192]:
        return
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line.lower():
            line = " ".join(line.split())
            if len(line) > LINE_CHARS:
                line = line[: LINE_CHARS - 1] + "…"
            yield number, line


def search(mode, limit, pattern, folder):
    root = os.path.realpath(os.getcwd())
    start = os.path.realpath(os.path.join(root, folder))
    if not inside(start, root):
        raise UsageError(f"the folder {folder} is outside the workspace {root}")
    if not os.path.isdir(start):
        raise UsageError(f"no such folder in the workspace: {folder}")
    glob = is_glob(pattern)
    by_name = mode in ("auto", "name") or glob
    by_text = mode == "text" or (mode == "auto" and not glob)
    kinds = []
    if by_name:
        kinds.append("file names (glob)" if glob else "file names")
    if by_text:
        kinds.append("file contents")
    lines = [f"pattern: {pattern}", f"search: {' and '.join(kinds)}, ignoring case"]
    if folder != ".":
        lines.append(f"folder: {folder}")
    counter = [0]
    found = 0
    truncated = False
    needle = pattern.lower()
    for relative in walk(start, root, counter):
        if by_name and name_matches(relative, pattern, glob):
            found += 1
            if found > limit:
                truncated = True
                break
            lines.append(f"file: {relative}")
        if by_text:
            for number, text in text_matches(os.path.join(root, relative), needle):
                found += 1
                if found > limit:
                    truncated = True
                    break
                lines.append(f"line: {relative}:{number}: {text}")
        if truncated:
            break
    searched = min(counter[0], MAX_FILES)
    if truncated:
        lines.append(f"matches: more than {limit}, only the first {limit} shown (files searched: {searched})")
    else:
        lines.append(f"matches: {found} (files searched: {searched})")
    if counter[0] > MAX_FILES:
        lines.append(f"stopped after {MAX_FILES} files: give a FOLDER to search less")
    return lines


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    try:
        mode, limit, pattern, folder = parse(argv)
        lines = search(mode, limit, pattern, folder)
    except UsageError as error:
        print(f"find_files: {error} ({USAGE})", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"find_files: cannot search: {error.strerror or error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    # The same bytes whatever the locale; a name that cannot be encoded is shown with `?`.
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    sys.stderr.reconfigure(encoding="utf-8", errors="replace")
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
