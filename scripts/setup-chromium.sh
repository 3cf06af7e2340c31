#!/usr/bin/env bash
# Installs Debian's Chromium for the headless browser test of the web UI.
# Idempotent; progress goes to stderr.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "setup-chromium: chromium present" >&2
  exit 0
fi
echo "setup-chromium: installing chromium from Debian" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
