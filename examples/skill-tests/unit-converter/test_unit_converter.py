"""Tests for scripts/convert.py: the script runs as a subprocess in a temporary workspace.

Run: python3 -m unittest discover -s examples/skill-tests/unit-converter
"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "skills" / "unit-converter" / "scripts" / "convert.py"
USAGE = "usage: convert.py"


class UnitConverterTest(unittest.TestCase):
    def setUp(self):
        self.workspace = tempfile.TemporaryDirectory()
        self.addCleanup(self.workspace.cleanup)
        self.root = Path(self.workspace.name)

    def run_script(self, *args, env=None):
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            cwd=self.root,
            capture_output=True,
            encoding="utf-8",
            env=env,
            timeout=60,
        )

    def convert(self, *args):
        """The output lines of a successful run."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        return result.stdout.splitlines()

    def assert_converts(self, args, first_line, quantity):
        self.assertEqual(self.convert(*args), [first_line, f"quantity: {quantity}"])

    def assert_fails(self, args, *fragments):
        """A usage error: exit status 2, nothing on stdout, one line on stderr with every fragment."""
        result = self.run_script(*args)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("convert: "), lines[0])
        for fragment in [*fragments, USAGE]:
            self.assertIn(fragment, lines[0])

    # normal cases

    def test_length(self):
        self.assert_converts(["12", "mi", "km"], "12 mi = 19.312128 km", "length")
        self.assert_converts(["5", "km", "mi"], "5 km = 3.106855961 mi", "length")
        self.assert_converts(["1", "in", "cm"], "1 in = 2.54 cm", "length")
        self.assert_converts(["3", "ft", "in"], "3 ft = 36 in", "length")
        self.assert_converts(["1", "nmi", "m"], "1 nmi = 1852 m", "length")

    def test_mass(self):
        self.assert_converts(["1", "lb", "kg"], "1 lb = 0.45359237 kg", "mass")
        self.assert_converts(["16", "oz", "lb"], "16 oz = 1 lb", "mass")
        self.assert_converts(["2.5", "t", "kg"], "2.5 t = 2500 kg", "mass")

    def test_temperature(self):
        self.assert_converts(["100", "C", "F"], "100 C = 212 F", "temperature")
        self.assert_converts(["-40", "C", "F"], "-40 C = -40 F", "temperature")
        self.assert_converts(["100", "F", "C"], "100 F = 37.77777778 C", "temperature")
        self.assert_converts(["0", "K", "C"], "0 K = -273.15 C", "temperature")
        self.assert_converts(["20", "celsius", "kelvin"], "20 C = 293.15 K", "temperature")

    def test_volume(self):
        self.assert_converts(["1", "gal", "l"], "1 gal = 3.785411784 l", "volume")
        self.assert_converts(["2", "cups", "ml"], "2 cup = 473.176473 ml", "volume")
        self.assert_converts(["1", "impgal", "gal"], "1 impgal = 1.200949926 gal", "volume")

    def test_data_size(self):
        self.assert_converts(["1", "GiB", "MiB"], "1 GiB = 1024 MiB", "data size")
        self.assert_converts(["1", "GiB", "MB"], "1 GiB = 1073.741824 MB", "data size")
        self.assert_converts(["1", "GB", "B"], "1 GB = 1000000000 B", "data size")
        self.assert_converts(["100", "Mbit", "MB"], "100 Mbit = 12.5 MB", "data size")

    def test_full_names_and_symbols_in_any_case(self):
        self.assert_converts(["10", "miles", "kilometers"], "10 mi = 16.09344 km", "length")
        self.assert_converts(["10", "Pounds", "KG"], "10 lb = 4.5359237 kg", "mass")
        self.assert_converts(["212", "°F", "degrees celsius"], "212 F = 100 C", "temperature")
        self.assert_converts(["1", "nautical", "mile", "km"], "1 nmi = 1.852 km", "length")
        self.assert_converts(["2", "fl", "oz", "ml"], "2 floz = 59.14705912 ml", "volume")

    def test_sentence_forms(self):
        self.assert_converts(["5 km to mi"], "5 km = 3.106855961 mi", "length")
        self.assert_converts(["5km", "mi"], "5 km = 3.106855961 mi", "length")
        self.assert_converts(["5", "km", "in", "m"], "5 km = 5000 m", "length")
        self.assert_converts(["1", "ft", "in"], "1 ft = 12 in", "length")
        self.assert_converts(["1,500", "m", "km"], "1500 m = 1.5 km", "length")

    def test_list(self):
        lines = self.convert("--list")
        self.assertEqual(lines[0], "length: mm, cm, m, km, in, ft, yd, mi, nmi")
        self.assertEqual([line.split(":")[0] for line in lines], ["length", "mass", "volume", "data size", "temperature"])

    def test_help(self):
        result = self.run_script("--help")
        self.assertEqual(result.returncode, 0)
        self.assertTrue(result.stdout.startswith(USAGE))

    # bad input

    def test_no_arguments(self):
        self.assert_fails([], "no arguments")

    def test_not_a_number(self):
        self.assert_fails(["abc", "km", "m"], "expected VALUE FROM_UNIT TO_UNIT, got: abc km m")
        self.assert_fails(["nan", "km", "m"], "expected VALUE FROM_UNIT TO_UNIT")
        self.assert_fails(["1,5", "km", "m"], "not a number: 1,5", "write decimals with a dot")

    def test_missing_unit(self):
        self.assert_fails(["5"], "expected VALUE FROM_UNIT TO_UNIT, got: 5")
        self.assert_fails(["5", "km"], "expected VALUE FROM_UNIT TO_UNIT")

    def test_unknown_unit_lists_the_units(self):
        self.assert_fails(["1", "furlong", "m"], "unknown unit: 'furlong'", "length: mm, cm, m, km", "temperature: C, F, K")
        self.assert_fails(["1", "m", "parsec"], "unknown unit: 'parsec'")

    def test_units_of_different_quantities(self):
        self.assert_fails(["1", "kg", "m"], "cannot convert mass (kg) to length (m)")
        self.assert_fails(["1", "C", "l"], "cannot convert temperature (C) to volume (l)")

    def test_below_absolute_zero(self):
        self.assert_fails(["-500", "C", "K"], "-500 C is below absolute zero")
        self.assert_fails(["-1", "K", "C"], "-1 K is below absolute zero")

    def test_value_out_of_range(self):
        self.assert_fails(["1e31", "km", "mm"], "value out of range (1e-30 to 1e30): 1e31")
        self.assert_fails(["1e-31", "km", "mm"], "value out of range")

    # edge cases

    def test_zero_negative_and_tiny_values(self):
        self.assert_converts(["0", "km", "mi"], "0 km = 0 mi", "length")
        self.assert_converts(["-2", "km", "m"], "-2 km = -2000 m", "length")
        self.assert_converts(["1e-30", "m", "mm"], "0." + "0" * 29 + "1 m = 0." + "0" * 26 + "1 mm", "length")

    def test_large_values_keep_every_integer_digit(self):
        self.assert_converts(["1e30", "km", "mm"], "1" + "0" * 30 + " km = 1" + "0" * 36 + " mm", "length")
        self.assert_converts(["123456789012345", "m", "km"], "123456789012345 m = 123456789012 km", "length")

    def test_same_unit(self):
        self.assert_converts(["7.25", "kg", "kg"], "7.25 kg = 7.25 kg", "mass")

    def test_output_is_deterministic_and_independent_of_the_locale(self):
        first = self.run_script("1", "mi", "ft")
        second = self.run_script("1", "mi", "ft")
        env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C")
        third = self.run_script("1", "°C", "°F", env=env)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertEqual(first.stdout, "1 mi = 5280 ft\nquantity: length\n")
        self.assertEqual(third.stdout, "1 C = 33.8 F\nquantity: temperature\n")
        failure = self.run_script("1", "µm", "m", env=env)
        self.assertEqual(failure.returncode, 2)
        self.assertIn("unknown unit: 'µm'", failure.stderr)

    def test_script_is_executable_with_a_python3_shebang(self):
        self.assertTrue(os.stat(SCRIPT).st_mode & stat.S_IXUSR)
        self.assertEqual(SCRIPT.read_text(encoding="utf-8").splitlines()[0], "#!/usr/bin/env python3")
        result = subprocess.run(
            [str(SCRIPT), "1", "kg", "g"], cwd=self.root, capture_output=True, encoding="utf-8", timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "1 kg = 1000 g\nquantity: mass\n")


if __name__ == "__main__":
    unittest.main()
