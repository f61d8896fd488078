#!/usr/bin/env bash
# Installs the Debian 12 packages vkfuse needs that are missing (run as root).
set -euo pipefail
pkgs=(gcc g++ make cmake ninja-build pkg-config
      libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
      libshaderc-dev glslc glslang-dev spirv-tools
      libopenblas-dev libdnnl-dev libcmocka-dev clang libclang-rt-14-dev
      libopenmpi-dev openmpi-bin
      python3-numpy python3-pytest python3-mpi4py)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
  echo "setup: all packages present"
fi
