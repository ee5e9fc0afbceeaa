#!/usr/bin/env bash
# Make (or reuse) a simulator's own virtual environment, e.g. .venvs/metaworld: its own Python and its own
# MuJoCo build beside grpo-probe-serve, from which `python -m grpo_probe.serve env ...` serves the simulator
# to the probe (docs/your-simulator-served.md).
#
#     tools/make_sim_venv.sh [metaworld|aloha]  # prints the venv's python on its last line
#
# Why a script: MetaWorld 3.1.1 pins mujoco==3.3.0 and the probe pins mujoco 4.0.0 for its registered
# bytes; no one environment holds both (gym-aloha 0.1.5 takes mujoco>=3.0,<3.9 through dm_control: here
# MuJoCo 3.3.0 too, with dm_control 1.0.28, the release built against it). The venv is cached under
# .venvs/ (gitignored): it is rebuilt only when this script or the serve distribution changes (a stamp of
# their sha256), and grpo-probe-serve alone is reinstalled when only its source changed. Python: 3.12, else
# 3.13, else 3.11, on PATH or installed by pyenv (MetaWorld 3.1.1 and gym-aloha 0.1.5 take 3.10 to 3.13);
# SIM_PYTHON=/path/to/python chooses another.
set -euo pipefail
cd "$(dirname "$0")/.."
sim=${1:-metaworld}
case $sim in
  metaworld) packages=("metaworld==3.1.1" "mujoco==3.3.0" "gymnasium>=1.1,<2" packaging) ;;
  aloha) packages=("gym-aloha==0.1.5" "dm-control==1.0.28" "mujoco==3.3.0" "gymnasium>=1.1,<2") ;;
  *) echo "tools/make_sim_venv.sh: unknown simulator '$sim' (known: metaworld, aloha)" >&2; exit 2 ;;
esac
python=${SIM_PYTHON:-}
if [ -z "$python" ]; then
  # a command that runs (a pyenv shim for a version not selected does not), then pyenv's own installs
  for version in 3.12 3.13 3.11; do
    for candidate in "python$version" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version"; do
      if "$candidate" -c pass >/dev/null 2>&1; then python=$candidate; break 2; fi
    done
  done
fi
[ -n "$python" ] || { echo "tools/make_sim_venv.sh: no Python 3.12, 3.13 or 3.11 found (set SIM_PYTHON)" >&2; exit 1; }
venv=.venvs/$sim
recipe=$( (cat "$0"; echo "$python $("$python" --version 2>&1)"; cat serve/pyproject.toml) | sha256sum | cut -c1-16)
# every source file grpo-probe-serve ships (serve/pyproject.toml says which: tools/serve_sources.py)
mapfile -t shipped < <("$python" tools/serve_sources.py --files)
serve_src=$(cat "${shipped[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$venv/.recipe-$recipe" ]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "${packages[@]}" >&2
  touch "$venv/.recipe-$recipe"
fi
if [ ! -f "$venv/.serve-$serve_src" ]; then
  rm -f "$venv"/.serve-*
  # ./serve builds in its own folder (serve/build): one build at a time, as two venvs may be made at once
  exec 9>.venvs/.serve-build.lock
  flock 9
  "$venv/bin/python" -m pip install --quiet --no-deps --force-reinstall ./serve >&2
  "$venv/bin/python" -m pip install --quiet ./serve >&2  # its own dependencies (numpy, websockets, msgpack)
  rm -rf serve/build serve/*.egg-info
  flock -u 9
  touch "$venv/.serve-$serve_src"
fi
echo "$PWD/$venv/bin/python"
