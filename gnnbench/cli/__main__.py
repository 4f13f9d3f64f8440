import sys

from gnnbench.cli import main

sys.exit(main())
