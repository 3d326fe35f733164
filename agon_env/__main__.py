"""``python -m agon_env``: the ``agon`` command (:mod:`agon_env.cli`)."""

import sys

from agon_env.cli import main

sys.exit(main())
