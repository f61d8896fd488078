"""pytest setup: the package from this source tree (python/), the library
from $VKFUSE_LIBRARY (ctest sets the dev build's) or the build tree."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
