"""``python -m bnserve.trainer.cli``: the ``trainer`` command."""

import sys

from bnserve.trainer.cli.parser import main

sys.exit(main())
