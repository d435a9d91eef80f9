#!/usr/bin/env bash
# Fetches the header-only cuDNN frontend (the graph API whose fused SDPA the
# CUDA backend uses: cuda/sdpa_cudnn.cpp) into .deps/cudnn-frontend/include,
# from its PyPI wheel, nvidia-cudnn-frontend, pinned. CMake looks there
# (REPRISE_CUDNN_FRONTEND_INCLUDE); without it the CUDA backend is built
# without cuDNN attention, and asking for it is an Error that says so.
# Idempotent; a failed download leaves nothing behind and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
dest=.deps/cudnn-frontend
[[ -f $dest/include/cudnn_frontend.h && $(cat "$dest/VERSION" 2>/dev/null) == "$version" ]] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 "nvidia-cudnn-frontend==$version" -d "$tmp" >/dev/null 2>&1; then
  echo "cudnn_frontend: could not download nvidia-cudnn-frontend $version: building without cuDNN attention"
  exit 0
fi
python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[1] + "/x", [n for n in z.namelist() if n.startswith("include/")])
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/x/include" "$dest/include"
echo "$version" >"$dest/VERSION"
echo "cudnn_frontend: nvidia-cudnn-frontend $version headers in $dest/include"
