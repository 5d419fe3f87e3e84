#!/usr/bin/env bash
# Installs the reference MCP servers the `mcp` crate's tests run (pinned npm versions) into
# "$CACHE/mcp-servers-<version>" and prints that directory (the install prefix). Reuses the
# cache; retries the install like .ci/run does for npm pack. Use:
#   export SKILLS_AGENT_MCP_SERVERS="$(.ci/mcp-servers.sh)"
set -euo pipefail

VERSION="2026.8.31"
PACKAGES=(
  "@modelcontextprotocol/server-everything@$VERSION"
  "@modelcontextprotocol/server-filesystem@$VERSION"
)
CACHE="${SKILLS_AGENT_CACHE:-$HOME/.cache/skills-agent}"
PREFIX="$CACHE/mcp-servers-$VERSION"

installed() {
  [ -f "$PREFIX/node_modules/@modelcontextprotocol/server-everything/package.json" ] &&
    [ -f "$PREFIX/node_modules/@modelcontextprotocol/server-filesystem/package.json" ] &&
    [ -f "$PREFIX/.complete" ]
}

if ! installed; then
  command -v npm >/dev/null 2>&1 || { echo "mcp-servers.sh: npm is not installed (apt-get install nodejs npm)" >&2; exit 1; }
  for attempt in 1 2 3; do
    rm -rf "$PREFIX" && mkdir -p "$PREFIX"
    # stdout of npm goes to stderr: this script's stdout is the directory only.
    if npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2; then
      touch "$PREFIX/.complete"
      break
    fi
    echo "npm install failed (attempt $attempt)" >&2; sleep $((attempt * 5))
  done
fi
installed || { echo "mcp-servers.sh: could not install ${PACKAGES[*]} into $PREFIX" >&2; exit 1; }
printf '%s\n' "$PREFIX"
