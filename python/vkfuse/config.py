"""tf.config: run_functions_eagerly (debugging traced functions)."""
from .function import functions_run_eagerly, run_functions_eagerly  # noqa: F401
