#!/usr/bin/env bash
# Debian's Chromium for the dashboard's browser tests (Playwright drives it through executable_path: its own
# browser download is not reachable here). Idempotent; needs root (or sudo) for apt-get.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version
