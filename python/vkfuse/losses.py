"""``vkfuse.keras.losses`` and ``vkfuse.keras.metrics``: the Keras losses
and running metrics that TF2's custom training loops use, built from
vkfuse's ops (Keras layers and models are not available).

Losses follow Keras 2: a per-example loss (the mean over the last axis
where Keras takes one), then the mean over the examples (weighted by
``sample_weight``: the sum of weighted losses over the number of
examples, Keras' ``SUM_OVER_BATCH_SIZE``). Probabilities are clipped to
[1e-7, 1 - 1e-7] before a log, as Keras' epsilon.
"""
from __future__ import annotations

import types
from typing import Any, Optional

from . import dtypes
from ._core import tensor as _t
from .array_ops import one_hot, ones_like, reshape
from .math_ops import (argmax, cast, clip_by_value, divide, divide_no_nan, equal, log, multiply,
                       reduce_mean, reduce_sum, square, subtract, abs as _abs)
from .nn import (sigmoid_cross_entropy_with_logits, softmax_cross_entropy_with_logits,
                 sparse_softmax_cross_entropy_with_logits)
from .variables import Variable

_EPS = 1e-7


def _probs(p: Any) -> Any:
    return clip_by_value(p, _EPS, 1.0 - _EPS)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, axis: int = -1) -> Any:
    y_pred = _t(y_pred)
    labels = cast(reshape(_t(y_true), [-1]), dtypes.int32)
    if from_logits:
        return sparse_softmax_cross_entropy_with_logits(labels=labels, logits=y_pred)
    p = _probs(divide(y_pred, reduce_sum(y_pred, axis=axis, keepdims=True)))
    return -reduce_sum(multiply(one_hot(labels, y_pred.shape[-1]), log(p)), axis=axis)


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, axis: int = -1) -> Any:
    y_pred = _t(y_pred)
    y_true = cast(_t(y_true), y_pred.dtype)
    if from_logits:
        return softmax_cross_entropy_with_logits(labels=y_true, logits=y_pred, axis=axis)
    p = _probs(divide(y_pred, reduce_sum(y_pred, axis=axis, keepdims=True)))
    return -reduce_sum(multiply(y_true, log(p)), axis=axis)


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, axis: int = -1) -> Any:
    y_pred = _t(y_pred)
    y_true = cast(_t(y_true), y_pred.dtype)
    if from_logits:
        return reduce_mean(sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred), axis=axis)
    p = _probs(y_pred)
    ll = multiply(y_true, log(p)) + multiply(subtract(1.0, y_true), log(subtract(1.0, p)))
    return -reduce_mean(ll, axis=axis)


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    y_pred = _t(y_pred)
    return reduce_mean(square(subtract(y_pred, cast(_t(y_true), y_pred.dtype))), axis=-1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> Any:
    y_pred = _t(y_pred)
    return reduce_mean(_abs(subtract(y_pred, cast(_t(y_true), y_pred.dtype))), axis=-1)


class Loss:
    """A Keras loss object: ``loss(y_true, y_pred, sample_weight=None)`` is a scalar."""

    _fn: Any = None

    def __init__(self, from_logits: bool = False, reduction: Any = "auto", name: Optional[str] = None,
                 **kwargs: Any) -> None:
        self.from_logits = bool(from_logits)
        self.reduction = reduction
        self.name = name

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return type(self)._fn(y_true, y_pred, from_logits=self.from_logits)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        per = self.call(y_true, y_pred)
        if sample_weight is not None:
            per = multiply(per, cast(_t(sample_weight), per.dtype))
        if self.reduction in ("none", None):
            return per
        if self.reduction == "sum":
            return reduce_sum(per)
        return reduce_mean(per)


class SparseCategoricalCrossentropy(Loss):
    _fn = staticmethod(sparse_categorical_crossentropy)


class CategoricalCrossentropy(Loss):
    _fn = staticmethod(categorical_crossentropy)


class BinaryCrossentropy(Loss):
    _fn = staticmethod(binary_crossentropy)


class MeanSquaredError(Loss):
    def call(self, y_true: Any, y_pred: Any) -> Any:
        return mean_squared_error(y_true, y_pred)


class MeanAbsoluteError(Loss):
    def call(self, y_true: Any, y_pred: Any) -> Any:
        return mean_absolute_error(y_true, y_pred)


# ---- metrics: running means kept in variables (so they update in traced functions too) ----
class Mean:
    """``keras.metrics.Mean``: the (weighted) mean of every value given since the last reset."""

    def __init__(self, name: str = "mean", dtype: Any = dtypes.float32) -> None:
        self.name = name
        self.total = Variable(0.0, trainable=False, name=name + "/total")
        self.count = Variable(0.0, trainable=False, name=name + "/count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        v = cast(_t(values), dtypes.float32)
        w = ones_like(v) if sample_weight is None else multiply(ones_like(v), cast(_t(sample_weight), dtypes.float32))
        self.total.assign_add(reduce_sum(multiply(v, w)))
        self.count.assign_add(reduce_sum(w))

    def result(self) -> Any:
        return divide_no_nan(self.total, self.count)

    def reset_state(self) -> None:
        self.total.assign(0.0)
        self.count.assign(0.0)

    reset_states = reset_state

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.update_state(*args, **kwargs)
        return self.result()

    @property
    def variables(self) -> list:
        return [self.total, self.count]


class _MatchMean(Mean):
    def _matches(self, y_true: Any, y_pred: Any) -> Any:
        raise NotImplementedError

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:  # type: ignore[override]
        super().update_state(self._matches(_t(y_true), _t(y_pred)), sample_weight)


class SparseCategoricalAccuracy(_MatchMean):
    """The fraction of examples whose argmax of y_pred is the integer label."""

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = dtypes.float32) -> None:
        super().__init__(name, dtype)

    def _matches(self, y_true: Any, y_pred: Any) -> Any:
        labels = cast(reshape(y_true, [-1]), dtypes.int32)
        return cast(equal(argmax(y_pred, axis=-1, output_type=dtypes.int32), labels), dtypes.float32)


class CategoricalAccuracy(_MatchMean):
    """The fraction of examples whose argmax of y_pred is that of the one-hot y_true."""

    def __init__(self, name: str = "categorical_accuracy", dtype: Any = dtypes.float32) -> None:
        super().__init__(name, dtype)

    def _matches(self, y_true: Any, y_pred: Any) -> Any:
        return cast(equal(argmax(y_pred, axis=-1, output_type=dtypes.int32),
                          argmax(y_true, axis=-1, output_type=dtypes.int32)), dtypes.float32)


losses = types.SimpleNamespace(
    Loss=Loss, SparseCategoricalCrossentropy=SparseCategoricalCrossentropy,
    CategoricalCrossentropy=CategoricalCrossentropy, BinaryCrossentropy=BinaryCrossentropy,
    MeanSquaredError=MeanSquaredError, MeanAbsoluteError=MeanAbsoluteError,
    sparse_categorical_crossentropy=sparse_categorical_crossentropy,
    categorical_crossentropy=categorical_crossentropy, binary_crossentropy=binary_crossentropy,
    mean_squared_error=mean_squared_error, mean_absolute_error=mean_absolute_error,
    mse=mean_squared_error, mae=mean_absolute_error)
metrics = types.SimpleNamespace(Mean=Mean, SparseCategoricalAccuracy=SparseCategoricalAccuracy,
                                CategoricalAccuracy=CategoricalAccuracy)
