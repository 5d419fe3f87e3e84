import re, sys
if len(sys.argv) != 3:
    print('usage: test_regex.py PATTERN TEXT', file=sys.stderr); sys.exit(2)
print([m.group(0) for m in re.finditer(sys.argv[1], sys.argv[2])])
