"""Time convtranspose against the installed peers: ``python benchmarks/peers.py --help``.

A thin wrapper: the suite lives in :mod:`convtranspose._bench` so that
``python -m convtranspose bench`` works from an installed (non-editable) package.
"""

import sys

from convtranspose._bench import main

if __name__ == "__main__":
    sys.exit(main())
