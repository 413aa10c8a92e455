"""`python -m lockstep.launcher ...` is `lockstep-run ...`."""

import sys

from lockstep.launcher.cli import main

sys.exit(main())
