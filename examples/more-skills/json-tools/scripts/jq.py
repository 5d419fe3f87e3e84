import json, sys
if len(sys.argv) != 3:
    print('usage: jq.py FILE PATH', file=sys.stderr); sys.exit(2)
try:
    data = json.load(open(sys.argv[1]))
except Exception as error:
    print(f'cannot read {sys.argv[1]}: {error}', file=sys.stderr); sys.exit(1)
print(json.dumps(data)[:2000])
