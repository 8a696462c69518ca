"""``python -m rocketmq_core.cli``: the ``rocketmq`` command."""

import sys

from .rocketmq import main

sys.exit(main())
