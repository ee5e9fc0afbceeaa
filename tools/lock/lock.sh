#!/usr/bin/env bash
# Write requirements.lock: every wheel the project, its tests, its docs and its installer use, pinned with
# sha256 hashes, for Python 3.11 on x86-64 Linux (manylinux_2_28). bin/bootstrap installs exactly this
# file (`uv pip sync --require-hashes`), and manifests record its sha256. Run it, then commit the lock, after
# changing a dependency in pyproject.toml or tools/lock/installers.in:
#
#     tools/lock/lock.sh            # after bin/bootstrap has made .venv (it brings uv)
#
# It resolves against the indexes pip is configured with (torch==2.13.0's CPU build lies in a local
# find-links folder on the project's machines; on PyPI torch 2.13.0 is a CUDA build). --upgrade takes the
# newest versions allowed; without it the versions already locked are kept where they still fit.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/pip_to_uv_args.sh
UV_CACHE_DIR=.venv/.uv-cache .venv/bin/uv pip compile pyproject.toml tools/lock/installers.in --extra test \
  --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
  --index-strategy unsafe-best-match --no-header --quiet "${uv_args[@]}" "$@" -o requirements.lock.tmp
{
  echo "# Every wheel bin/bootstrap installs, pinned with its sha256; written by tools/lock/lock.sh from"
  echo "# pyproject.toml (extra \"test\") and tools/lock/installers.in, for Python 3.11 on x86-64 Linux."
  cat requirements.lock.tmp
} > requirements.lock.new
rm requirements.lock.tmp
mv requirements.lock.new requirements.lock
echo "locked $(grep -c '^[A-Za-z0-9]' requirements.lock) packages in requirements.lock (sha256 $(sha256sum requirements.lock | cut -c1-16)...)"
