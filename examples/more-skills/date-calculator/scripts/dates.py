import datetime, sys
args = sys.argv[1:]
try:
    if args[0] == 'between':
        a, b = (datetime.date.fromisoformat(x) for x in args[1:3])
        print(f'days: {(b - a).days}')
    elif args[0] == 'weekday':
        print(datetime.date.fromisoformat(args[1]).strftime('%A'))
    else:
        raise ValueError(args[0])
except Exception as error:
    print(f'usage: dates.py between DATE DATE | weekday DATE ({error})', file=sys.stderr); sys.exit(2)
