#!/usr/bin/env bash
# Installs the build dependencies tilecraft needs, only where they are missing.
# Idempotent: on a machine that already has everything (the GPU machine, which
# reaches no package registry) it checks and returns without touching apt.
set -euo pipefail

# header (searched in the usual prefixes) -> Debian package that provides it
declare -A need=(
  [yaml-cpp/yaml.h]=libyaml-cpp-dev
  [nlohmann/json.hpp]=nlohmann-json3-dev
  [CLI/CLI.hpp]=libcli11-dev
  [fmt/core.h]=libfmt-dev
  [gtest/gtest.h]=libgtest-dev
  [benchmark/benchmark.h]=libbenchmark-dev
)
prefixes=(/usr/include /usr/local/include /opt/conda/include)

missing=()
for header in "${!need[@]}"; do
  found=0
  for p in "${prefixes[@]}"; do
    [ -f "$p/$header" ] && { found=1; break; }
  done
  [ $found -eq 1 ] || missing+=("${need[$header]}")
done

if ! command -v cmake >/dev/null; then missing+=(cmake); fi

# Python side (the tilecraft package and its tests): nanobind to build the
# extension, numpy and pytest to test it. Best effort: a machine that reaches
# no registry builds and tests without them and says so.
py=${PYTHON:-python3}
if command -v "$py" >/dev/null; then
  py_missing=()
  for mod in nanobind numpy pytest; do
    "$py" -c "import $mod" 2>/dev/null || py_missing+=("$mod")
  done
  # Optional: torch for the torch-facing Python tests (large; only on request).
  if [ "${TILECRAFT_WITH_TORCH:-0}" = 1 ] && ! "$py" -c "import torch" 2>/dev/null; then py_missing+=(torch); fi
  if [ ${#py_missing[@]} -gt 0 ]; then
    echo "install_deps: pip installing ${py_missing[*]}"
    "$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore "${py_missing[@]}" ||
      echo "install_deps: could not install ${py_missing[*]}: the Python package and its tests will be skipped" >&2
  fi
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all build dependencies present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if ! command -v apt-get >/dev/null; then
  echo "install_deps: missing ${missing[*]} and no apt-get to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
