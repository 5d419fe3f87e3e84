import sys
if len(sys.argv) != 2:
    print('usage: toc.py FILE.md', file=sys.stderr); sys.exit(2)
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError as error:
    print(error, file=sys.stderr); sys.exit(1)
for line in lines:
    if line.startswith('#'):
        level = len(line) - len(line.lstrip('#'))
        print('  ' * (level - 1) + '- ' + line.lstrip('#').strip())
