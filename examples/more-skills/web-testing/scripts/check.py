import sys
print('web-testing: no browser available for', sys.argv[1:], file=sys.stderr)
sys.exit(2)
