#!/usr/bin/env python3
"""Convert a value between units of length, mass, temperature, volume or data size.

usage: convert.py VALUE FROM_UNIT TO_UNIT
       convert.py --list

The arguments may also come as one string ("5 km to mi", "5km mi"). Output:
    5 km = 3.106855961 mi
    quantity: length
Errors are one line on stderr. Exit status: 0 on success, 2 on a usage error (bad number,
unknown unit, units of different quantities, a temperature below absolute zero).
"""

import re
import sys
from decimal import Decimal, localcontext
from fractions import Fraction

USAGE = "usage: convert.py VALUE FROM_UNIT TO_UNIT, for example convert.py 5 km mi; convert.py --list"
SIGNIFICANT = 10


F = Fraction


# quantity -> [(symbol, factor to the base unit, aliases)]; base units: m, kg, l, B, K (offsets below)
UNITS = {
    "length": [
        ("mm", F("0.001"), ["millimeter", "millimeters", "millimetre", "millimetres"]),
        ("cm", F("0.01"), ["centimeter", "centimeters", "centimetre", "centimetres"]),
        ("m", F(1), ["meter", "meters", "metre", "metres"]),
        ("km", F(1000), ["kilometer", "kilometers", "kilometre", "kilometres"]),
        ("in", F("0.0254"), ["inch", "inches", '"']),
        ("ft", F("0.3048"), ["foot", "feet", "'"]),
        ("yd", F("0.9144"), ["yard", "yards"]),
        ("mi", F("1609.344"), ["mile", "miles"]),
        ("nmi", F(1852), ["nautical mile", "nautical miles", "nautical-mile", "nautical-miles"]),
    ],
    "mass": [
        ("mg", F("0.000001"), ["milligram", "milligrams"]),
        ("g", F("0.001"), ["gram", "grams"]),
        ("kg", F(1), ["kilogram", "kilograms", "kilo", "kilos"]),
        ("t", F(1000), ["tonne", "tonnes", "metric ton", "metric tons"]),
        ("oz", F("0.028349523125"), ["ounce", "ounces"]),
        ("lb", F("0.45359237"), ["lbs", "pound", "pounds"]),
        ("st", F("6.35029318"), ["stone", "stones"]),
    ],
    "volume": [
        ("ml", F("0.001"), ["milliliter", "milliliters", "millilitre", "millilitres", "cm3", "cc"]),
        ("cl", F("0.01"), ["centiliter", "centiliters", "centilitre", "centilitres"]),
        ("dl", F("0.1"), ["deciliter", "deciliters", "decilitre", "decilitres"]),
        ("l", F(1), ["liter", "liters", "litre", "litres"]),
        ("m3", F(1000), ["cubic meter", "cubic meters", "cubic metre", "cubic metres"]),
        ("tsp", F("0.00492892159375"), ["teaspoon", "teaspoons"]),
        ("tbsp", F("0.01478676478125"), ["tablespoon", "tablespoons"]),
        ("floz", F("0.0295735295625"), ["fl oz", "fl-oz", "fluid ounce", "fluid ounces"]),
        ("cup", F("0.2365882365"), ["cups"]),
        ("pt", F("0.473176473"), ["pint", "pints"]),
        ("qt", F("0.946352946"), ["quart", "quarts"]),
        ("gal", F("3.785411784"), ["gallon", "gallons", "us gal", "us gallon", "us gallons"]),
        ("impgal", F("4.54609"), ["imperial gallon", "imperial gallons", "uk gallon", "uk gallons", "imp gal"]),
    ],
    "data size": [
        ("bit", F(1, 8), ["bits"]),
        ("B", F(1), ["byte", "bytes"]),
        ("kB", F(10**3), ["kb", "kilobyte", "kilobytes"]),
        ("MB", F(10**6), ["megabyte", "megabytes"]),
        ("GB", F(10**9), ["gigabyte", "gigabytes"]),
        ("TB", F(10**12), ["terabyte", "terabytes"]),
        ("PB", F(10**15), ["petabyte", "petabytes"]),
        ("KiB", F(2**10), ["kibibyte", "kibibytes"]),
        ("MiB", F(2**20), ["mebibyte", "mebibytes"]),
        ("GiB", F(2**30), ["gibibyte", "gibibytes"]),
        ("TiB", F(2**40), ["tebibyte", "tebibytes"]),
        ("kbit", F(10**3, 8), ["kilobit", "kilobits", "kbps"]),
        ("Mbit", F(10**6, 8), ["megabit", "megabits", "mbps"]),
        ("Gbit", F(10**9, 8), ["gigabit", "gigabits", "gbps"]),
    ],
    # temperature: value in kelvin = (value + offset) * factor
    "temperature": [
        ("C", (F("273.15"), F(1)), ["°c", "celsius", "degc", "degrees celsius", "centigrade"]),
        ("F", (F("459.67"), F(5, 9)), ["°f", "fahrenheit", "degf", "degrees fahrenheit"]),
        ("K", (F(0), F(1)), ["kelvin", "kelvins"]),
    ],
}


def build_table():
    table = {}
    for quantity, units in UNITS.items():
        for symbol, factor, aliases in units:
            for name in [symbol, *aliases]:
                table[name.lower()] = (quantity, symbol, factor)
    return table


TABLE = build_table()


def known_units():
    return "; ".join(
        f"{quantity}: {', '.join(symbol for symbol, _, _ in units)}" for quantity, units in UNITS.items()
    )


def lookup(name):
    key = " ".join(name.strip().lower().replace("_", " ").split())
    if key.endswith(".") and len(key) > 1:
        key = key[:-1]
    for candidate in (key, key.replace("degrees ", ""), key.replace(" ", "")):
        if candidate in TABLE:
            return TABLE[candidate]
    return None


class UsageError(Exception):
    pass


NUMBER = r"[-+]?(?:\d[\d_,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


def parse_arguments(argv):
    """(value, from, to) from `5 km mi`, `5 km to mi`, `5km mi`, or one string holding them."""
    text = " ".join(argv).strip()
    match = re.fullmatch(rf"({NUMBER})\s*(.+?)\s+(?:(?:to|in|into|as|->|=)\s+)?(\S.*)", text)
    if not match:
        raise UsageError(f"expected VALUE FROM_UNIT TO_UNIT, got: {text or '(nothing)'}")
    value_text, source, target = match.groups()
    # a two-word unit (`fl oz`, `nautical miles`) may have swallowed the split: prefer known units
    if lookup(source) is None or lookup(target) is None:
        words = (source + " " + target).split()
        for cut in range(1, len(words)):
            left, right = " ".join(words[:cut]), " ".join(words[cut:])
            right = re.sub(r"^(?:to|in|into|as|->|=)\s+", "", right)
            if lookup(left) and lookup(right):
                source, target = left, right
                break
    if "," in value_text:
        if not re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][-+]?\d+)?", value_text):
            raise UsageError(f"not a number: {value_text} (write decimals with a dot: 1.5)")
        value_text = value_text.replace(",", "")
    try:
        exact = Decimal(value_text.replace("_", ""))
    except ArithmeticError:
        raise UsageError(f"not a number: {value_text}")
    if not exact.is_finite() or (exact != 0 and not -30 <= exact.adjusted() <= 30):
        raise UsageError(f"value out of range (1e-30 to 1e30): {value_text}")
    value = Fraction(exact)
    return value_text, value, source, target


def unit_of(name):
    unit = lookup(name)
    if unit is None:
        raise UsageError(f"unknown unit: {name!r}; known units: {known_units()}")
    return unit


def convert(value, source, target):
    quantity, _, factor = source
    if quantity != target[0]:
        raise UsageError(
            f"cannot convert {source[0]} ({source[1]}) to {target[0]} ({target[1]})"
        )
    if quantity == "temperature":
        offset, scale = factor
        kelvin = (value + offset) * scale
        if kelvin < 0:
            raise UsageError(f"{fmt(value)} {source[1]} is below absolute zero")
        to_offset, to_scale = target[2]
        return kelvin / to_scale - to_offset
    return value * factor / target[2]


def fmt(value):
    """A number in plain notation: every integer digit, at most SIGNIFICANT significant digits."""
    value = Fraction(value)
    whole_digits = len(str(abs(value.numerator) // value.denominator))
    with localcontext() as context:
        context.prec = max(SIGNIFICANT, whole_digits)
        number = Decimal(value.numerator) / Decimal(value.denominator)
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv and argv[0] == "--list":
        for quantity, units in UNITS.items():
            print(f"{quantity}: {', '.join(symbol for symbol, _, _ in units)}")
        return 0
    try:
        if not argv:
            raise UsageError("no arguments")
        value_text, value, source_name, target_name = parse_arguments(argv)
        source, target = unit_of(source_name), unit_of(target_name)
        result = convert(value, source, target)
    except UsageError as error:
        print(f"convert: {error} ({USAGE})", file=sys.stderr)
        return 2
    print(f"{fmt(value)} {source[1]} = {fmt(result)} {target[1]}")
    print(f"quantity: {source[0]}")
    return 0


if __name__ == "__main__":
    # The same bytes whatever the locale.
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    sys.stderr.reconfigure(encoding="utf-8", errors="replace")
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
