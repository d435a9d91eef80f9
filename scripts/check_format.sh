#!/usr/bin/env bash
# Fails when a C++ source file differs from its clang-format output.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not clang-format clean: $f"
    status=1
  fi
done < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
exit $status
