#!/usr/bin/env python3
"""Fill a PDF form."""
import sys
print(sys.argv)
