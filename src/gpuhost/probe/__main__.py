"""``python3 -m gpuhost.probe`` (or ``python3 -m probe`` from a copied directory)."""

import sys

from .cli import main

sys.exit(main())
