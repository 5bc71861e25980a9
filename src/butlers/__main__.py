import sys

from butlers.cli import main

sys.exit(main())
