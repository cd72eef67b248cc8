"""``python -m clconv``: the command line (see :mod:`clconv.cli`)."""

import sys

from .cli import main

sys.exit(main())
