"""Time convtranspose against the installed peers: ``python benchmarks/peers.py --help``.

A thin wrapper: the suite lives in :mod:`convtranspose._cli.bench` so that
``python -m convtranspose bench`` works from an installed (non-editable) package.
"""

import os
import sys

# Before the library is imported: choices stored on disk by an earlier run would
# decide for this one, and the planning columns time deciding afresh.
os.environ["CONVTRANSPOSE_WISDOM"] = "off"

from convtranspose._cli.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
