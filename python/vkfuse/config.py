"""tf.config: run_functions_eagerly (debugging traced functions) and the
device listing TF programs print at their start."""
from collections import namedtuple
from typing import List, Optional

from .function import functions_run_eagerly, run_functions_eagerly  # noqa: F401

PhysicalDevice = namedtuple("PhysicalDevice", ["name", "device_type"])


def list_physical_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    """TF's listing: the host as CPU:0 and every Vulkan device vkfuse finds
    as a GPU (lavapipe included: it is where Vulkan work runs);
    vkfuse.devices() has their details."""
    from .devices import devices
    out = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    out += [PhysicalDevice("/physical_device:GPU:%d" % i, "GPU") for i, _ in enumerate(devices())]
    if device_type is None:
        return out
    return [d for d in out if d.device_type == str(device_type).upper()]


def list_logical_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    return [PhysicalDevice(d.name.replace("/physical_device:", "/device:"), d.device_type)
            for d in list_physical_devices(device_type)]
