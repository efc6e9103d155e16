"""Makes `import wallsim` work when an example runs from the source tree without the CLI."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "frontends", "torch", "python"))
import wallsim  # noqa: E402,F401
