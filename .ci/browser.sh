#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for cli's real-browser test (cli/tests/browser.rs)
# when they are missing, and prints their versions. Needs root or sudo for apt-get.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  APT=(env DEBIAN_FRONTEND=noninteractive apt-get)
  if [ "$(id -u)" != 0 ]; then APT=(sudo "${APT[@]}"); fi
  "${APT[@]}" update -qq
  "${APT[@]}" install -y -qq chromium chromium-driver >/dev/null
fi
chromium --version 2>/dev/null  # (Debian's wrapper script warns on stderr)
chromedriver --version
