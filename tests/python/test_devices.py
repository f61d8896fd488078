"""Device choice: devices(), device(spec) as a context manager, TF's names."""
import pytest

import vkfuse as tf


def test_devices_and_device():
    devs = tf.devices()
    assert all({"name", "type", "chosen", "index"} <= set(d) for d in devs)
    with tf.device("cpu") as c:
        x = tf.ones([3]) * 2
        assert tf.context() is c and c.backend == "cpu"
    assert x.device == c.device_name and x.numpy().tolist() == [2, 2, 2]
    assert tf.device("cpu") is c  # one context per name
    with tf.device("/GPU:0"):
        y = tf.ones([3])
    assert y.context is tf.default_context()  # TF's names: the default context (soft placement)
    if devs:
        with tf.device("vulkan:0"):
            z = tf.constant([1.0, 2.0]) + 1
        assert z.context.backend == "vulkan" and z.numpy().tolist() == [2, 3]
        with pytest.raises(tf.errors.InvalidArgumentError, match="different contexts"):
            x[:2] + z
        assert (tf.copy_to(z, c) + x[:2]).numpy().tolist() == [4, 5]
    with pytest.raises(tf.errors.OpError):
        tf.device(f"vulkan:{len(devs) + 3}")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.device("tpu")
    assert tf.auto_backend()
