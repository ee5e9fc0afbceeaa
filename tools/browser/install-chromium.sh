#!/usr/bin/env bash
# Installs Debian's Chromium for the report test (tests/e2e/test_report.py), as root; a no-op when present.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "installing chromium needs root: sudo apt-get install chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
command -v chromium
