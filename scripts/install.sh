#!/usr/bin/env bash
# Installs the optimised build (build/release) into its prefix (/usr/local
# by default; as root, with sudo when not root): the library, the headers,
# the CMake and pkg-config files, and the Python package into Debian
# python3's site directory under the prefix (docs/PYTHON.md), so that
# `python3 -c "import vkfuse"` works from any directory in a new shell,
# without LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO cmake --install build/release >/dev/null
$SUDO ldconfig 2>/dev/null || true
echo "install: vkfuse installed under $(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' build/release/CMakeCache.txt)"
