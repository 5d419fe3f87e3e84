import sys
print('slide-deck: no outline given', sys.argv[1:])
sys.exit(2)
