"""Tests for scripts/find_files.py: the script runs as a subprocess in a temporary workspace.

Run: python3 -m unittest discover -s examples/skill-tests/file-finder
"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "skills" / "file-finder" / "scripts" / "find_files.py"
USAGE = "usage: find_files.py"


class FileFinderTest(unittest.TestCase):
    def setUp(self):
        self.workspace = tempfile.TemporaryDirectory()
        self.addCleanup(self.workspace.cleanup)
        self.root = Path(self.workspace.name)
        self.write("README.md", "# Demo\nSee the Invoice folder.\n")
        self.write("data/sales.csv", "date,amount\n2026-01-05,54.00\n")
        self.write("data/invoice-2024.csv", "id,total\n1,10\n")
        self.write("data/archive/old.json", '{"invoice": 7}\n')
        self.write("docs/guide.md", "Intro\n")
        self.write("notes/todo.txt", "buy milk\ncall Bob\nsend the   invoice to ACME\n")
        # never searched
        self.write(".git/config", "invoice\n")
        self.write("node_modules/pkg/invoice.js", "invoice\n")
        self.write("target/debug/invoice.txt", "invoice\n")
        self.write("__pycache__/invoice.pyc", "invoice\n")

    def write(self, relative, content):
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def run_script(self, *args, env=None):
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            cwd=self.root,
            capture_output=True,
            encoding="utf-8",
            env=env,
            timeout=60,
        )

    def find(self, *args):
        """The output lines of a successful run."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        return result.stdout.splitlines()

    def matches(self, *args):
        """Only the `file:` and `line:` lines of a successful run."""
        return [line for line in self.find(*args) if line.startswith(("file: ", "line: "))]

    def assert_fails(self, args, status, *fragments):
        """A failed run: nothing on stdout, one line on stderr holding every fragment."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, status, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("find_files: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    # normal cases

    def test_glob_on_file_names(self):
        self.assertEqual(
            self.find("*.csv"),
            [
                "pattern: *.csv",
                "search: file names (glob), ignoring case",
                "file: data/invoice-2024.csv",
                "file: data/sales.csv",
                "matches: 2 (files searched: 6)",
            ],
        )

    def test_glob_on_paths(self):
        self.assertEqual(self.matches("docs/*.md"), ["file: docs/guide.md"])
        self.assertEqual(self.matches("**/*.md"), ["file: README.md", "file: docs/guide.md"])
        self.assertEqual(self.matches("./data/*.json"), ["file: data/archive/old.json"])
        self.assertEqual(self.matches("*.CSV"), ["file: data/invoice-2024.csv", "file: data/sales.csv"])

    def test_plain_word_finds_names_and_lines(self):
        self.assertEqual(
            self.find("invoice"),
            [
                "pattern: invoice",
                "search: file names and file contents, ignoring case",
                "line: README.md:2: See the Invoice folder.",
                "file: data/invoice-2024.csv",
                "line: data/archive/old.json:1: {\"invoice\": 7}",
                "line: notes/todo.txt:3: send the invoice to ACME",
                "matches: 4 (files searched: 6)",
            ],
        )

    def test_names_only_and_text_only(self):
        self.assertEqual(self.matches("--name", "invoice"), ["file: data/invoice-2024.csv"])
        self.assertEqual(
            self.matches("--text", "INVOICE"),
            [
                "line: README.md:2: See the Invoice folder.",
                "line: data/archive/old.json:1: {\"invoice\": 7}",
                "line: notes/todo.txt:3: send the invoice to ACME",
            ],
        )
        self.assertEqual(self.matches("--text", "total"), ["line: data/invoice-2024.csv:1: id,total"])

    def test_name_with_a_slash_matches_the_path(self):
        self.assertEqual(self.matches("--name", "data/sal"), ["file: data/sales.csv"])

    def test_folder_limits_the_search(self):
        lines = self.find("*.csv", "data")
        self.assertIn("folder: data", lines)
        self.assertIn("file: data/sales.csv", lines)
        self.assertEqual(self.matches("invoice", "notes"), ["line: notes/todo.txt:3: send the invoice to ACME"])
        self.assertEqual(self.matches("*.json", "data/archive/"), ["file: data/archive/old.json"])

    def test_help(self):
        result = self.run_script("--help")
        self.assertEqual(result.returncode, 0)
        self.assertTrue(result.stdout.startswith(USAGE))

    # bad input

    def test_no_pattern(self):
        self.assert_fails([], 2, "no PATTERN given", USAGE)
        self.assert_fails(["--name"], 2, "no PATTERN given")

    def test_empty_or_too_long_pattern(self):
        self.assert_fails(["  "], 2, "the PATTERN is empty")
        self.assert_fails(["x" * 201], 2, "longer than 200 characters")

    def test_too_many_arguments(self):
        self.assert_fails(["a", "b", "c"], 2, "got 3 arguments")

    def test_unknown_option(self):
        self.assert_fails(["--regex", "x"], 2, "unknown option: --regex")

    def test_bad_max(self):
        for value in ["0", "1001", "ten", "-3", "²", "1.5"]:
            with self.subTest(value=value):
                self.assert_fails(["--max", value, "x"], 2, "--max needs a whole number from 1 to 1000")
        self.assert_fails(["x", "--max"], 2, "--max needs a whole number", "got: None")

    def test_folder_outside_the_workspace(self):
        self.assert_fails(["x", ".."], 2, "the folder .. is outside the workspace")
        self.assert_fails(["x", "/"], 2, "the folder / is outside the workspace")
        self.assert_fails(["x", "data/../../"], 2, "is outside the workspace")

    def test_missing_folder_or_a_file_as_folder(self):
        self.assert_fails(["x", "nowhere"], 2, "no such folder in the workspace: nowhere")
        self.assert_fails(["x", "README.md"], 2, "no such folder in the workspace: README.md")

    # edge cases

    def test_nothing_found_is_not_an_error(self):
        self.assertEqual(
            self.find("zebra"),
            [
                "pattern: zebra",
                "search: file names and file contents, ignoring case",
                "matches: 0 (files searched: 6)",
            ],
        )

    def test_max_cuts_the_list(self):
        lines = self.find("--max", "2", "invoice")
        self.assertEqual(len([line for line in lines if line.startswith(("file: ", "line: "))]), 2)
        self.assertEqual(lines[-1], "matches: more than 2, only the first 2 shown (files searched: 4)")
        self.assertEqual(self.find("--max=1", "*.md")[-1], "matches: more than 1, only the first 1 shown (files searched: 5)")

    def test_binary_and_large_files_are_not_searched_for_text(self):
        self.write("blob.dat", b"invoice\x00\x01\x02")
        self.write("huge.log", "invoice\n" + "x" * (1024 * 1024))
        self.assertEqual(self.matches("--text", "invoice", "."), [
            "line: README.md:2: See the Invoice folder.",
            "line: data/archive/old.json:1: {\"invoice\": 7}",
            "line: notes/todo.txt:3: send the invoice to ACME",
        ])
        self.assertEqual(self.matches("--name", "blob"), ["file: blob.dat"])

    def test_non_utf8_text_is_searched(self):
        self.write("latin.txt", b"caf\xe9 invoice\n")
        self.assertIn("line: latin.txt:1: caf\ufffd invoice", self.matches("--text", "invoice"))

    def test_long_lines_are_shortened(self):
        self.write("long.txt", "invoice " + "y" * 300 + "\n")
        line = [m for m in self.matches("--text", "invoice") if m.startswith("line: long.txt")][0]
        self.assertEqual(line, "line: long.txt:1: invoice " + "y" * 151 + "…")

    @unittest.skipUnless(hasattr(os, "symlink"), "needs symlinks")
    def test_symlinks_do_not_leave_the_workspace(self):
        outside = tempfile.TemporaryDirectory()
        self.addCleanup(outside.cleanup)
        secret = Path(outside.name) / "secret-invoice.txt"
        secret.write_text("invoice\n", encoding="utf-8")
        os.symlink(secret, self.root / "link-invoice.txt")
        os.symlink(outside.name, self.root / "outside-dir")
        os.symlink(self.root / "notes" / "todo.txt", self.root / "todo-link.txt")
        lines = self.matches("invoice")
        self.assertNotIn("file: link-invoice.txt", lines)
        self.assertFalse(any("secret" in line or "outside-dir" in line for line in lines), lines)
        self.assertIn("line: todo-link.txt:3: send the invoice to ACME", lines)
        self.assert_fails(["x", "outside-dir"], 2, "is outside the workspace")

    def test_output_is_deterministic_and_independent_of_the_locale(self):
        self.write("café/naïve.txt", "Zürich invoice\n")
        first = self.run_script("invoice")
        second = self.run_script("invoice")
        env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C")
        third = self.run_script("invoice", env=env)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertEqual(first.stdout, third.stdout)
        self.assertIn("line: café/naïve.txt:1: Zürich invoice", first.stdout)

    def test_script_is_executable_with_a_python3_shebang(self):
        self.assertTrue(os.stat(SCRIPT).st_mode & stat.S_IXUSR)
        self.assertEqual(SCRIPT.read_text(encoding="utf-8").splitlines()[0], "#!/usr/bin/env python3")
        result = subprocess.run(
            [str(SCRIPT), "*.md"], cwd=self.root, capture_output=True, encoding="utf-8", timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("file: docs/guide.md", result.stdout)


if __name__ == "__main__":
    unittest.main()
