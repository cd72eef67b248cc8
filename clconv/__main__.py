"""``python -m clconv``: the command line (see :mod:`clconv.tools.cli`)."""

import sys

from .tools.cli import main

sys.exit(main())
