# Sourced by the build scripts: `launcher` holds the CMake flags that put
# ccache in front of the C++ and CUDA compilers, when it is installed
# (scripts/setup.sh installs it). Paths are hashed relative to the
# repository, so a checkout in another folder reuses the same cache.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
