# Sourced by the build scripts: `launcher` holds the CMake flags that put
# ccache in front of the C++ and CUDA compilers, when it is installed
# (scripts/setup.sh installs it). Paths are hashed relative to the
# repository, so a checkout in another folder reuses the same cache.
#
# New build folders use Ninja when it is installed (scripts/setup.sh
# installs it): it starts a target's objects as soon as their sources
# allow, where Make waits for the libraries the target links, which left a
# core idle through most of each layer's last file. CMAKE_GENERATOR is only
# CMake's default: a folder keeps the generator it was configured with.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if command -v ninja >/dev/null && [[ -z ${CMAKE_GENERATOR:-} ]]; then
  export CMAKE_GENERATOR=Ninja
fi
