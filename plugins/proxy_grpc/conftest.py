"""tests_5x/ uses the official 5.x client, whose package ``rocketmq`` clashes with the
C++ client's: it runs in its own environment (`tox -e grpc5`, which sets ROCKETMQ_GRPC5)."""

import os

collect_ignore = [] if os.environ.get("ROCKETMQ_GRPC5") else ["tests_5x"]
