"""A NumPy stand-in for vkfuse's tensors in graph mode, to test AutoGraph's
converter and operators on their own (no library needed).

A FakeTensor refuses bool() as a symbolic tensor does, so converted code
that would branch in Python on a tensor fails; FakeBackend's cond and
while_loop count their uses and check what the C API checks (same dtypes
and shapes from both branches and every iteration)."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def _v(x):
    return x.v if isinstance(x, FakeTensor) else x


class FakeTensor:
    __array_priority__ = 100

    def __init__(self, v):
        self.v = np.asarray(v)

    def __bool__(self):
        raise TypeError("using a symbolic tensor as a Python bool")

    def __len__(self):
        return len(self.v)

    def __repr__(self):
        return "FakeTensor(%r)" % (self.v,)

    def __getitem__(self, i):
        return FakeTensor(self.v[_v(i)])


def _binop(name):
    def op(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            other = np.asarray(other, dtype=self.v.dtype)  # TF: a Python number takes the tensor's dtype
        return FakeTensor(getattr(self.v, name)(_v(other)))
    return op


for _n in ("add radd sub rsub mul rmul truediv rtruediv floordiv mod pow lt le gt ge eq ne and or").split():
    setattr(FakeTensor, "__%s__" % _n, _binop("__%s__" % _n))
FakeTensor.__neg__ = lambda self: FakeTensor(-self.v)
FakeTensor.__hash__ = object.__hash__


def constant(v, dtype=np.float32):
    return FakeTensor(np.asarray(v, dtype=dtype))


def reduce_mean(x):
    return FakeTensor(x.v.mean(dtype=x.v.dtype))


def reduce_sum(x):
    return FakeTensor(x.v.sum(dtype=x.v.dtype))


def range_(n):
    return FakeTensor(np.arange(_v(n), dtype=np.int32))


class FakeBackend:
    def __init__(self):
        self.conds = 0
        self.loops = 0

    def is_tensor(self, x):
        return isinstance(x, FakeTensor)

    def convert(self, v):
        dt = np.bool_ if isinstance(v, bool) else np.int32 if isinstance(v, int) else np.float32
        return FakeTensor(np.asarray(v, dtype=dt))

    @staticmethod
    def _same(a, b, what):
        for x, y in zip(a, b):
            if x.v.dtype != y.v.dtype or x.v.shape != y.v.shape:
                raise ValueError("%s: %s%s vs %s%s" % (what, x.v.dtype, x.v.shape, y.v.dtype, y.v.shape))

    def cond(self, pred, true_fn, false_fn, n):
        self.conds += 1
        a, b = list(true_fn()), list(false_fn())
        assert len(a) == len(b) == n
        self._same(a, b, "cond branches")
        return a if bool(pred.v) else b

    def while_loop(self, cond_fn, body_fn, init):
        self.loops += 1
        vals = list(init)
        while bool(cond_fn(*vals).v):
            new = list(body_fn(*vals))
            self._same(vals, new, "loop variables")
            vals = new
        return vals

    def logical_not(self, x):
        return FakeTensor(np.logical_not(x.v))

    def logical_and(self, a, b):
        return FakeTensor(np.logical_and(a.v, b.v))

    def logical_or(self, a, b):
        return FakeTensor(np.logical_or(a.v, b.v))

    def length(self, t):
        return t.v.shape[0]

    def element(self, t, i):
        return FakeTensor(t.v[int(i.v)])
