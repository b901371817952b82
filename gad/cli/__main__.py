"""``python -m gad.cli``."""

import sys

from gad.cli import main

sys.exit(main())
