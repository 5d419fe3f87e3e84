import sys
print('pdf-forms needs a PDF file; got', sys.argv[1:])
sys.exit(2)
