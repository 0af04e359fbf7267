"""``python -m graphloom serve``: the same as the ``graphloom`` command."""

import sys

from graphloom.server import main

sys.exit(main())
