#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for cli's real-browser test (cli/tests/browser.rs)
# when they are missing, and prints their versions. Needs root or sudo for apt-get.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then APT=(apt-get); else APT=(sudo apt-get); fi
  export DEBIAN_FRONTEND=noninteractive
  "${APT[@]}" update -qq
  "${APT[@]}" install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
chromium --version
chromedriver --version
