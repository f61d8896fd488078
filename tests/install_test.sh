#!/usr/bin/env bash
# Installs the build into a temporary prefix, then compiles the README's
# example against it twice — with pkg-config and with find_package — and
# runs both; with PYTHON, imports the installed Python package from the
# prefix's site directory, which must find the installed library by itself.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS] [PYTHON]
set -euo pipefail
build=$1 src=$2 extra=${3:-} py=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(find "$tmp/prefix" -name vkfuse.pc -printf '%h\n' | head -1)
export PKG_CONFIG_PATH="$libdir"
cc $extra -std=c17 -Wall -Wextra -Werror "$src/examples/readme.c" $(pkg-config --cflags --libs vkfuse) \
   -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/app_pc"
VKFUSE_BACKEND=cpu "$tmp/app_pc"
"$tmp/app_pc"
# static linking through pkg-config --static
cc $extra -std=c17 "$src/examples/readme.c" $(pkg-config --cflags vkfuse) "$(dirname "$libdir")/libvkfuse.a" \
   $(pkg-config --libs-only-l --libs-only-other --static vkfuse | sed 's/-lvkfuse//') -o "$tmp/app_static"
VKFUSE_BACKEND=cpu "$tmp/app_static"
# vkfuse_dist (when built): its pkg-config file compiles and links examples/mlp_dist.c
if [ -f "$libdir/vkfuse_dist.pc" ]; then
    cc $extra -std=c17 -Wall -Wextra -Werror "$src/examples/mlp_dist.c" $(pkg-config --cflags --libs vkfuse_dist) -lm \
       -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/app_dist"
    inc=$(pkg-config --cflags-only-I vkfuse_dist | tr ' ' '\n' | sed -n 's/^-I//p' | head -1)
    [ -f "$inc/vkfuse_dist.h" ] ||
        { echo "install test: vkfuse_dist.pc's first include dir has no vkfuse_dist.h: $(pkg-config --cflags vkfuse_dist)"; exit 1; }
fi
mkdir "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(app C)
find_package(vkfuse REQUIRED)
add_executable(app $src/examples/readme.c)
target_link_libraries(app PRIVATE vkfuse::vkfuse)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -G Ninja -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
VKFUSE_BACKEND=cpu "$tmp/proj/build/app"
if [ -n "$py" ]; then
    site=$(find "$tmp/prefix" -path '*-packages/vkfuse/__init__.py' -printf '%h\n' | head -1)
    [ -n "$site" ] || { echo "install test: the Python package was not installed under $tmp/prefix"; exit 1; }
    (cd "$tmp" && env -u VKFUSE_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$(dirname "$site")" PYTHONDONTWRITEBYTECODE=1 \
        VKFUSE_BACKEND=cpu "$py" -c "import vkfuse as tf
assert tf._lib.path.startswith('$tmp/prefix/'), 'loaded ' + tf._lib.path
assert float(tf.reduce_sum(tf.ones([3]))) == 3.0")
    echo "install test: the installed Python package found the installed library"
fi
echo "install test: pkg-config (shared, static) and find_package builds ran"
