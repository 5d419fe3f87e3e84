import sys
print('sql-queries: cannot connect to', sys.argv[1:2], file=sys.stderr)
sys.exit(2)
