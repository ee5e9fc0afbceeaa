#!/usr/bin/env bash
# Build (once) the virtual environment a LeRobot checkpoint is served from: Python >= 3.12, lerobot 0.6.x
# with its own torch from the package index, and grpo-probe-serve from this checkout (docs/lerobot.md).
#
# Why its own environment: LeRobot 0.6 needs Python >= 3.12 and torch < 2.12; the probe runs Python 3.11
# with torch 2.13. The index has no CPU-only torch below 2.12, so the venv gets the index's (CUDA) build,
# which runs on CPU; it is large (several GB), so the venv is kept and only rebuilt when the lerobot
# version asked for changes. grpo-probe-serve is reinstalled on every call (seconds), so the served
# adapter is always this checkout's.
#
#     tools/make_lerobot_venv.sh [VENV_DIR]      # default .venvs/lerobot; prints VENV_DIR/bin/python
#
# Environment: GRPO_PROBE_LEROBOT_VERSION (default 0.6.1), GRPO_PROBE_LEROBOT_PYTHON (an interpreter to
# use instead of the first Python 3.13 or 3.12 found on PATH or under ~/.pyenv/versions).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$REPO/.venvs/lerobot}"
VERSION="${GRPO_PROBE_LEROBOT_VERSION:-0.6.1}"

find_python() {
  local candidate
  if [[ -n "${GRPO_PROBE_LEROBOT_PYTHON:-}" ]]; then
    echo "$GRPO_PROBE_LEROBOT_PYTHON"
    return
  fi
  for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.13.*/bin/python "$HOME"/.pyenv/versions/3.12.*/bin/python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
  echo "make_lerobot_venv: no Python >= 3.12 found (python3.13, python3.12 on PATH, ~/.pyenv/versions/3.1[23].*);" \
    "set GRPO_PROBE_LEROBOT_PYTHON to one" >&2
  exit 2
}

STAMP="$VENV/.lerobot-$VERSION"
if [[ ! -f "$STAMP" ]]; then
  PYTHON="$(find_python)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  INSTALL=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  # the same resolution, faster, with uv: the one on PATH, else the one bin/bootstrap puts in .venv/bin
  UV="$(command -v uv 2>/dev/null || true)"
  [[ -n "$UV" || ! -x "$REPO/.venv/bin/uv" ]] || UV="$REPO/.venv/bin/uv"
  if [[ -n "$UV" ]]; then
    INSTALL=("$UV" pip install --quiet --python "$VENV/bin/python")
  fi
  # diffusion: LeRobot's Diffusion policy needs diffusers' schedulers; ACT needs nothing more
  "${INSTALL[@]}" "lerobot[diffusion]==$VERSION" >&2
  touch "$STAMP"
fi

# the distribution reads the package's sources that serve/pyproject.toml names (tools/serve_sources.py):
# build from a copy, so nothing is written in the checkout
TREE="$(mktemp -d)"
trap 'rm -rf "$TREE"' EXIT
cp -r "$REPO/serve" "$TREE/serve"
rm -rf "$TREE/serve/build" "$TREE/serve"/*.egg-info
while read -r source; do
  mkdir -p "$(dirname "$TREE/$source")"
  cp -r "$REPO/$source" "$TREE/$source"
done < <("$VENV/bin/python" "$REPO/tools/serve_sources.py")
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$TREE/serve" >&2
# grpo-probe-serve's own dependencies (numpy came with lerobot)
"$VENV/bin/python" -c 'import msgpack, websockets' 2>/dev/null ||
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "websockets>=13" "msgpack>=1.0" >&2
echo "$VENV/bin/python"
