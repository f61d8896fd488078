"""vkfuse for Python: TensorFlow 2's names over vkfuse's C library.

``import vkfuse as tf`` runs TF2 eager code that uses the ops vkfuse has,
on any Vulkan GPU or the CPU backend (``VKFUSE_BACKEND=cpu|vulkan``).
See docs/PYTHON.md for the API next to TF2's and what differs.
"""
from __future__ import annotations

from . import _lib, errors, dtypes  # noqa: F401
from ._context import Context, context, default_context  # noqa: F401
from .dtypes import (DType, as_dtype, bool, double, float16, float32, float64, half,  # noqa: F401,A004
                     int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from .tensor import Tensor, TensorShape, constant, convert_to_tensor, is_tensor  # noqa: F401
from . import _operators  # noqa: F401  (attaches Tensor's operators)
from .math_ops import (abs, add, add_n, argmax, argmin, cast, ceil, clip_by_global_norm,  # noqa: F401
                       clip_by_norm, clip_by_value, cos, cumsum, divide, equal, exp, floor,
                       floordiv, floormod, greater, greater_equal, less, less_equal, log,
                       logical_and, logical_not, logical_or, matmul, maximum, minimum, mod,
                       multiply, negative, norm, not_equal, pow, realdiv, reduce_all,
                       reduce_any, reduce_logsumexp, reduce_max, reduce_mean, reduce_min,
                       reduce_prod, reduce_sum, round, rsqrt, saturate_cast, sigmoid, sign, sin,
                       sqrt, square, squared_difference, stop_gradient, subtract, tanh, truediv,
                       truncatediv, where)
from .array_ops import (boolean_mask, broadcast_to, concat, copy_to, expand_dims, fill,  # noqa: F401
                        gather, identity, one_hot, ones, ones_like, pad, range, rank, reshape,
                        reverse, shape, size, split, squeeze, stack, tile, transpose, unstack,
                        zeros, zeros_like)
from .variables import Variable  # noqa: F401
from .tensor_array import TensorArray  # noqa: F401
from . import math  # noqa: F401

__version__ = _lib.version()
newaxis = None


def device_name() -> str:
    """The current context's device, as the library names it."""
    return context().device_name

from . import nest, nn, random  # noqa: E402,F401
from .tape import GradientTape, UnconnectedGradients  # noqa: E402,F401



def print(*inputs: object, output_stream: object = None, sep: str = " ", end: str = "\n") -> None:  # noqa: A001
    """tf.print: prints tensors' values (eagerly, at once)."""
    import builtins
    import numpy as np
    parts = [np.array2string(np.asarray(x.numpy())) if isinstance(x, Tensor) else str(x) for x in inputs]
    builtins.print(*parts, sep=sep, end=end)
from .devices import auto_backend, device, devices  # noqa: E402,F401
from .user_ops import elementwise  # noqa: E402,F401
from .kernels import kernel  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from .linalg import einsum, eye, tensordot  # noqa: E402,F401
from .math_ops import argsort, sort  # noqa: E402,F401
from .array_ops import gather_nd, linspace, meshgrid, roll, sequence_mask, strided_slice, tensor_scatter_nd_add  # noqa: E402,F401
from . import distribute  # noqa: E402,F401
from .module import (Module, constant_initializer, executing_eagerly, get_static_value,  # noqa: E402,F401
                     glorot_uniform_initializer, initializers, name_scope, ones_initializer,
                     random_normal_initializer, random_uniform_initializer, zeros_initializer)
from . import data  # noqa: E402,F401
from . import debugging  # noqa: E402,F401
from . import optimizers  # noqa: E402,F401
from . import checkpoint as train  # noqa: E402,F401
from .optimizers import keras  # noqa: E402,F401

# Traced functions and AutoGraph (docs/PYTHON_FUNCTION.md)
from . import autograph, config, graph_control, saved_model  # noqa: E402,F401
from .function import TensorSpec, function  # noqa: E402,F401
from .control_flow import cond, foldl, foldr, map_fn, scan, while_loop  # noqa: E402,F401
from .printing import print_ as print  # noqa: A001,E402  (TF's format, in the graph too)
from .profiling import profile  # noqa: E402,F401
