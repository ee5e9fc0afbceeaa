#!/usr/bin/env bash
# Installs Debian's qemu-user (qemu-x86_64) for the cross-CPU test (tests/test_cross_cpu.py), as root; a
# no-op when present. Its x86-64 emulator runs the probe's chain on another processor model (an Intel
# Haswell: AVX2 and FMA, no AVX-512), whose CPUID every library reads instead of this machine's.
set -euo pipefail
if command -v qemu-x86_64 >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "installing qemu-user needs root: sudo apt-get install qemu-user" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq qemu-user >/dev/null
command -v qemu-x86_64
