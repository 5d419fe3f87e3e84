import sys
print('image-resize: not an image:', sys.argv[1:2], file=sys.stderr)
sys.exit(1)
