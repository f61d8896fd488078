"""Shared by the TF2 program tests (test_tf2_*.py): values against NumPy."""
import numpy as np


def close(a, b, tol=1e-5):
    """a (a tensor, array or number) equals b to tol, absolute and relative."""
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)
