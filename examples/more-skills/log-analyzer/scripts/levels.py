import sys
if len(sys.argv) != 2:
    print('usage: levels.py FILE.log', file=sys.stderr)
    sys.exit(2)
counts = {}
with open(sys.argv[1], encoding='utf-8', errors='replace') as log:
    for line in log:
        for level in ('ERROR', 'WARN', 'INFO'):
            if level in line:
                counts[level] = counts.get(level, 0) + 1
for level in ('ERROR', 'WARN', 'INFO'):
    print(f'{level}: {counts.get(level, 0)}')
