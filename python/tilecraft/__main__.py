"""python -m tilecraft: the same command line as the tilecraft binary."""
import sys

from . import main

sys.exit(main())
