import sys
if len(sys.argv) != 2:
    print('usage: exif.py IMAGE', file=sys.stderr)
    sys.exit(2)
print('image-metadata: not an image:', sys.argv[1], file=sys.stderr)
sys.exit(1)
