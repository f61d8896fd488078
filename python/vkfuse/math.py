"""``vkfuse.math``: tf.math's names for what vkfuse has."""
from .math_ops import (abs, add, add_n, argmax, argmin, ceil, cos, count_nonzero, cumsum,  # noqa: F401
                       divide, equal, erf, exp, expm1, floor, floordiv, floormod, greater,
                       greater_equal, is_finite, is_inf, is_nan, less, less_equal, log, log1p,
                       log_sigmoid, logical_and, logical_not, logical_or, logical_xor, maximum,
                       minimum, mod, multiply, negative, not_equal, pow, reciprocal,
                       reduce_all, reduce_any, reduce_logsumexp, reduce_max, reduce_mean,
                       reduce_min, reduce_prod, reduce_std, reduce_sum, reduce_variance, round,
                       rsqrt, sigmoid, sign, sin, softplus, sqrt, square, squared_difference,
                       subtract, tan, tanh, top_k, truediv, truncatediv, l2_normalize,
                       divide_no_nan, unsorted_segment_sum, segment_sum, unsorted_segment_mean,
                       segment_mean, reduce_euclidean_norm)
from .math_ops import sigmoid as _sigmoid  # noqa: F401
