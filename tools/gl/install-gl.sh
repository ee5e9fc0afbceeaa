#!/usr/bin/env bash
# Installs a headless OpenGL backend for camera frames from Debian's packages, as root; a no-op when present.
#   tools/gl/install-gl.sh [--require] [--with-osmesa]
# Mesa's EGL with its software driver (llvmpipe renders on the CPU, no GPU or display needed):
#   libegl1 (libEGL.so.1, the glvnd loader), libegl-mesa0 (Mesa's EGL vendor), libgl1-mesa-dri (llvmpipe),
#   libopengl0 (libOpenGL.so.0: PyOpenGL, which MuJoCo's EGL context uses, loads the GL entry points from it).
# --with-osmesa adds libosmesa6, the fallback for MUJOCO_GL=osmesa. Without root, or when apt-get fails, it
# prints the command to run and exits 0: the state-vector observation needs no OpenGL, so only camera frames
# are lost. --require (or GRPO_PROBE_REQUIRE_GL=1) makes that an error, for machines that must render.
set -euo pipefail
required=${GRPO_PROBE_REQUIRE_GL:-0}
packages=(libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0)
for arg in "$@"; do
  case "$arg" in
    --require) required=1 ;;
    --with-osmesa) packages+=(libosmesa6) ;;
    *)
      echo "install-gl.sh: unknown argument $arg (expected --require, --with-osmesa)" >&2
      exit 2
      ;;
  esac
done

# Without the backend: a warning, or with --require an error; either way what to run to fix it.
give_up() {
  echo "headless GL for camera frames: $1; ${2:-to install: sudo apt-get install -y ${missing[*]}}" >&2
  if [ "$required" = 1 ]; then
    exit 1
  fi
  exit 0
}

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    [ "${status:0:2}" = ii ] || missing+=("$pkg")
  done
else # not Debian: look for the libraries themselves; there is no apt-get to install them with
  libs=$(ldconfig -p 2>/dev/null || true)
  for lib in libEGL.so.1 libEGL_mesa.so.0 libOpenGL.so.0; do
    grep -q "[[:space:]]$lib " <<<"$libs" || missing+=("$lib")
  done
  [ ${#missing[@]} -eq 0 ] && exit 0
  give_up "${missing[*]} not found" "install Mesa's EGL, its software driver and libOpenGL with this system's packages"
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  give_up "needs root to install ${missing[*]}"
fi
echo "installing headless GL for camera frames: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
  give_up "apt-get failed"
fi
ldconfig -p | grep -q '[[:space:]]libEGL.so.1 ' || give_up "libEGL.so.1 still not found after installing"
