import sys
print('not a PDF:', sys.argv[1:])
sys.exit(2)
