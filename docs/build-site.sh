#!/usr/bin/env bash
# Lint docs/openapi.json and build the static API reference into site/index.html with the pinned Redocly CLI.
# Usage: docs/build-site.sh (from anywhere). Needs Node.js >= 20.19 and npm; only `npm ci` uses the network.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

# No usage data and no update checks: lint and build must neither report to nor depend on the network.
export REDOCLY_TELEMETRY=off
export REDOCLY_SUPPRESS_NOTIFICATIONS=true

if [[ ! -f openapi.json ]]; then
    echo "build-site.sh: docs/openapi.json is missing; generate it with 'python -m app.openapi'" >&2
    exit 1
fi

# Exactly the versions in package-lock.json.
npm ci --no-audit --no-fund

# --no-install: use the pinned local CLI, never fetch another one. --lint-config error: a mistake in
# redocly.yaml fails the build instead of being skipped with a warning.
npx --no-install redocly lint --lint-config error openapi.json

# --inlineBundle embeds the Redoc scripts, so the published page loads nothing from a CDN.
mkdir -p ../site
npx --no-install redocly build-docs openapi.json --lint-config error --inlineBundle -o ../site/index.html
