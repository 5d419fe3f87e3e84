"""Tests for scripts/csv_summary.py: the script runs as a subprocess in a temporary workspace.

Run: python3 -m unittest discover -s examples/skill-tests/csv-summary
"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "skills" / "csv-summary" / "scripts" / "csv_summary.py"


class CsvSummaryTest(unittest.TestCase):
    def setUp(self):
        self.workspace = tempfile.TemporaryDirectory()
        self.addCleanup(self.workspace.cleanup)
        self.root = Path(self.workspace.name)

    def write(self, name, content):
        path = self.root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
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

    def summary(self, *args):
        """The output lines of a successful run."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        return result.stdout.splitlines()

    def assert_fails(self, args, status, *fragments):
        """A failed run: nothing on stdout, one line on stderr holding every fragment."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, status, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("csv_summary: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        return lines[0]

    # normal cases

    def test_whole_file(self):
        self.write(
            "orders.csv",
            "id,city,price\n1,Oslo,2.50\n2,Lima,9.75\n3,Oslo,4.00\n4,Rome,3.25\n",
        )
        self.assertEqual(
            self.summary("orders.csv"),
            [
                "file: orders.csv",
                "rows: 4",
                "columns: 3 (id, city, price)",
                "column id: numeric, 4 values, 0 empty",
                "id min: 1",
                "id max: 4",
                "id mean: 2.5",
                "id sum: 10",
                "column city: text, 4 values, 0 empty",
                "city distinct: 3",
                "city values: Oslo (2), Lima (1), Rome (1)",
                "column price: numeric, 4 values, 0 empty",
                "price min: 2.50",
                "price max: 9.75",
                "price mean: 4.875",
                "price sum: 19.50",
            ],
        )

    def test_one_column_is_matched_ignoring_case(self):
        self.write("orders.csv", "id,Price\n1,2.50\n2,9.75\n")
        self.assertEqual(
            self.summary("orders.csv", "price"),
            [
                "file: orders.csv",
                "rows: 2",
                "columns: 2 (id, Price)",
                "column Price: numeric, 2 values, 0 empty",
                "Price min: 2.50",
                "Price max: 9.75",
                "Price mean: 6.125",
                "Price sum: 12.25",
            ],
        )

    def test_sums_are_exact_decimals(self):
        self.write("money.csv", "amount\n0.1\n0.2\n1.005\n-0.3\n")
        lines = self.summary("money.csv", "amount")
        self.assertIn("amount sum: 1.005", lines)
        self.assertIn("amount min: -0.3", lines)
        self.assertIn("amount mean: 0.2512", lines)

    def test_mean_is_rounded_to_four_decimals(self):
        self.write("thirds.csv", "x\n1\n1\n2\n")
        self.assertIn("x mean: 1.3333", self.summary("thirds.csv"))

    def test_exponent_numbers_are_printed_plainly(self):
        self.write("exp.csv", "x\n1e3\n2.5E-2\n")
        lines = self.summary("exp.csv")
        self.assertIn("x max: 1000", lines)
        self.assertIn("x min: 0.025", lines)
        self.assertIn("x sum: 1000.025", lines)

    def test_semicolon_tab_and_tsv_files(self):
        self.write("semi.csv", "name;qty\na;1\nb;2\n")
        self.assertIn("qty sum: 3", self.summary("semi.csv"))
        self.write("tabs.csv", "name\tqty\na\t4\nb\t5\n")
        self.assertIn("qty sum: 9", self.summary("tabs.csv"))
        self.write("table.tsv", "name,x\tqty\na,b\t6\n")
        lines = self.summary("table.tsv")
        self.assertIn("columns: 2 (name,x, qty)", lines)
        self.assertIn("qty sum: 6", lines)

    def test_quoted_fields_crlf_and_byte_order_mark(self):
        self.write(
            "quoted.csv",
            '\ufeffname,"note, long",qty\r\n"Smith, J","two\r\nlines",3\r\nLee,x,4\r\n',
        )
        lines = self.summary("quoted.csv")
        self.assertIn("rows: 2", lines)
        self.assertIn("columns: 3 (name, note, long, qty)", lines)
        self.assertIn("name values: Lee (1), Smith, J (1)", lines)
        self.assertIn("note, long values: two lines (1), x (1)", lines)
        self.assertIn("qty sum: 7", lines)

    def test_many_distinct_values_are_cut_after_five(self):
        self.write("letters.csv", "letter\n" + "".join(f"{c}\n" for c in "gfedcbaa"))
        lines = self.summary("letters.csv")
        self.assertIn("letter distinct: 7", lines)
        self.assertIn("letter values: a (2), b (1), c (1), d (1), e (1), … 2 more", lines)

    def test_path_in_a_sub_folder(self):
        (self.root / "data").mkdir()
        self.write("data/x.csv", "v\n5\n")
        self.assertIn("file: data/x.csv", self.summary("data/x.csv"))

    def test_help(self):
        result = self.run_script("--help")
        self.assertEqual(result.returncode, 0)
        self.assertTrue(result.stdout.startswith("usage: csv_summary.py"))

    # bad input

    def test_missing_file_lists_the_csv_files_of_the_workspace(self):
        self.write("sales.csv", "a\n1\n")
        self.write("notes.txt", "x")
        line = self.assert_fails(["sale.csv"], 1, "file not found: sale.csv", "CSV files there: sales.csv")
        self.assertNotIn("notes.txt", line)

    def test_missing_file_in_an_empty_workspace(self):
        self.assert_fails(["sales.csv"], 1, "file not found: sales.csv", "CSV files there: none")

    def test_unknown_column_lists_the_columns(self):
        self.write("orders.csv", "id,price\n1,2\n")
        self.assert_fails(["orders.csv", "total"], 2, "unknown column: total", "columns in orders.csv: id, price")

    def test_wrong_number_of_arguments(self):
        self.assert_fails([], 2, "got 0 arguments", "usage: csv_summary.py")
        self.assert_fails(["a.csv", "b", "c"], 2, "got 3 arguments")

    def test_directory(self):
        (self.root / "data.csv").mkdir()
        self.assert_fails(["data.csv"], 1, "data.csv is a directory")

    @unittest.skipUnless(hasattr(os, "mkfifo"), "needs mkfifo")
    def test_fifo_is_refused_without_reading(self):
        os.mkfifo(self.root / "pipe.csv")
        self.assert_fails(["pipe.csv"], 1, "pipe.csv is not a regular file")

    def test_binary_file(self):
        self.write("image.csv", b"a,b\n\x00\x01\x02\x03\n")
        self.assert_fails(["image.csv"], 1, "image.csv looks binary")

    def test_not_utf8(self):
        self.write("latin.csv", b"name\ncaf\xe9\n")
        self.assert_fails(["latin.csv"], 1, "latin.csv is not UTF-8")

    def test_not_utf8_after_the_first_block(self):
        self.write("late.csv", b"name\n" + b"abc\n" * 30000 + b"caf\xe9\n")
        self.assert_fails(["late.csv"], 1, "late.csv is not UTF-8")

    def test_empty_file(self):
        self.write("empty.csv", "")
        self.assert_fails(["empty.csv"], 1, "empty.csv is empty")

    def test_unterminated_quote_runs_to_the_end_of_the_file(self):
        self.write("open.csv", 'a,b\n1,"never closed\n2,3\n')
        lines = self.summary("open.csv")
        self.assertIn("rows: 1", lines)

    def test_huge_numbers_are_text_not_a_crash(self):
        self.write("big.csv", "a\n9e999999\n9e999999\n")
        lines = self.summary("big.csv")
        self.assertIn("column a: text, 2 values, 0 empty", lines)

    def test_underscores_and_thousands_separators_are_not_numbers(self):
        self.write("sep.csv", 'a,b\n1_000,"1,000"\n2_000,"2,000"\n')
        lines = self.summary("sep.csv")
        self.assertIn("column a: text, 2 values, 0 empty", lines)
        self.assertIn("column b: text, 2 values, 0 empty", lines)

    # edge cases

    def test_header_only(self):
        self.write("head.csv", "a,b\n")
        self.assertEqual(
            self.summary("head.csv"),
            [
                "file: head.csv",
                "rows: 0",
                "columns: 2 (a, b)",
                "column a: text, 0 values, 0 empty",
                "column b: text, 0 values, 0 empty",
            ],
        )

    def test_a_file_that_is_no_table_is_refused(self):
        self.write("sales.csv", "a,b\n1,2\n")
        self.write("README.md", "# Notes\n\nSome text, with a comma.\nMore text.\n")
        self.assert_fails(["README.md"], 2, "README.md is not a table", "CSV files here: sales.csv")
        self.write("ragged.txt", "a,b,c\n1\n2\n3,4,5\n")
        self.assert_fails(["ragged.txt"], 2, "ragged.txt is not a table")
        # A table in a .txt file is read; a one-column .csv file is a table by its name.
        self.write("table.txt", "a;b\n1;2\n3;4\n")
        self.assertIn("a sum: 4", self.summary("table.txt"))
        self.write("names.csv", "name\nann\nbob\n")
        self.assertIn("rows: 2", self.summary("names.csv"))

    def test_blank_lines_empty_cells_and_ragged_rows(self):
        self.write("ragged.csv", "a,b,c\n1,2,3\n\n , ,\n4\n5,6,7,8\n")
        lines = self.summary("ragged.csv")
        self.assertIn("rows: 3", lines)
        self.assertIn("rows with a different number of fields: 2", lines)
        self.assertIn("column a: numeric, 3 values, 0 empty", lines)
        self.assertIn("a sum: 10", lines)
        self.assertIn("column b: numeric, 2 values, 1 empty", lines)
        self.assertIn("b sum: 8", lines)

    def test_blank_and_duplicate_header_names(self):
        self.write("names.csv", "x,,X\n1,2,3\n")
        self.assertIn("columns: 3 (x, column_2, X_2)", self.summary("names.csv"))
        self.assertIn("X_2 sum: 3", self.summary("names.csv", "x_2"))

    def test_mostly_numbers_column_ignores_the_rest(self):
        self.write("mixed.csv", "amount\n10\nn/a\n20\n-\n30\n")
        lines = self.summary("mixed.csv")
        self.assertIn("column amount: numeric, 5 values, 0 empty, 2 not numbers (ignored: -, n/a)", lines)
        self.assertIn("amount sum: 60", lines)
        self.assertIn("amount mean: 20", lines)

    def test_mostly_text_column_is_text(self):
        self.write("ids.csv", "code\nA1\nB2\n3\n")
        lines = self.summary("ids.csv")
        self.assertIn("column code: text, 3 values, 0 empty", lines)
        self.assertIn("code distinct: 3", lines)

    def test_negative_zero_and_large_values(self):
        self.write("zero.csv", "a,b\n-0.00,1e30\n0,3\n")
        lines = self.summary("zero.csv")
        self.assertIn("a sum: 0.00", lines)
        self.assertIn("b mean: 500000000000000000000000000001.5", lines)
        self.assertIn("b sum: 1000000000000000000000000000003", lines)

    def test_long_text_values_are_shortened(self):
        self.write("long.csv", "t\n" + "word " * 20 + "\n")
        lines = self.summary("long.csv")
        self.assertIn("t values: " + ("word " * 8).strip() + "… (1)", lines)

    def test_output_is_deterministic_and_independent_of_the_locale(self):
        self.write("text.csv", "city\nZürich\nÅre\nOslo\nOslo\nBern\nKöln\nNice\n")
        first = self.run_script("text.csv")
        second = self.run_script("text.csv")
        env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C")
        third = self.run_script("text.csv", env=env)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertEqual(first.stdout, third.stdout)
        self.assertIn("city values: Oslo (2), Bern (1), Köln (1), Nice (1), Zürich (1), … 1 more", first.stdout)

    def test_script_is_executable_with_a_python3_shebang(self):
        self.assertTrue(os.stat(SCRIPT).st_mode & stat.S_IXUSR)
        self.assertEqual(SCRIPT.read_text(encoding="utf-8").splitlines()[0], "#!/usr/bin/env python3")
        self.write("a.csv", "n\n2\n")
        result = subprocess.run(
            [str(SCRIPT), "a.csv"], cwd=self.root, capture_output=True, encoding="utf-8", timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("n sum: 2", result.stdout)


if __name__ == "__main__":
    unittest.main()
