#!/usr/bin/env bash
# Debian's Chromium for the browser tier (make test-browser): installed when missing, as root; otherwise one
# line saying how. The playwright Python package drives it; playwright's own browser download is never used.
set -euo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "make test-browser needs Debian's chromium: sudo apt-get install -y chromium" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
