import sys
print('spreadsheet-charts: matplotlib is not installed', file=sys.stderr)
sys.exit(1)
