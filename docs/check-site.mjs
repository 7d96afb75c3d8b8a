// Loads the built API reference in headless Chromium with the network off and fails if the page asks for anything
// from outside itself, or does not render the reference.
// Usage: node check-site.mjs SITE_HTML [--screenshot PNG]. CHROMIUM names the browser (default /usr/bin/chromium).
// docs/build-site.sh runs it after the build, inside a network namespace with no interfaces when it can make one.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { chromium } from "playwright-core";

// Schemes that never leave the page: the file itself, inline data and objects the page made.
const LOCAL_SCHEMES = new Set(["file:", "data:", "blob:", "about:"]);
// Everything the page must show, so a blank or broken page cannot pass.
const EXPECTED_TEXT = ["Attribution Adapter", "Attribute a training failure", "no_attribution_available"];
// The headless flags that keep Chromium itself from reaching for the network (updates, sync, field trials).
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
];
const LOAD_TIMEOUT_MS = 60_000;

function usage() {
  console.error("usage: node check-site.mjs SITE_HTML [--screenshot PNG]");
  process.exit(2);
}

/** Loads `url` offline; returns the outside requests it tried, broken images and the page's text. */
async function loadOffline(browser, url, screenshot) {
  const context = await browser.newContext({ offline: true, viewport: { width: 1400, height: 900 } });
  const outside = [];
  // Every request is seen here first: anything that would leave the page is recorded and refused.
  await context.route("**/*", (route) => {
    const requested = route.request().url();
    if (LOCAL_SCHEMES.has(new URL(requested).protocol)) return route.continue();
    outside.push(requested);
    return route.abort("internetdisconnected");
  });
  const page = await context.newPage();
  page.on("websocket", (socket) => outside.push(socket.url()));
  await page.goto(url, { waitUntil: "load", timeout: LOAD_TIMEOUT_MS });
  // Redoc renders after load; wait until the operation is on the page (or the timeout says it never came).
  await page
    .getByText(EXPECTED_TEXT[1], { exact: false })
    .first()
    .waitFor({ timeout: LOAD_TIMEOUT_MS })
    .catch(() => {});
  await page.waitForTimeout(500); // late requests (images mounted after render, lazy chunks) show up here
  const brokenImages = await page.$$eval("img", (images) =>
    images.filter((img) => !img.complete || img.naturalWidth === 0).map((img) => img.currentSrc || img.src),
  );
  const text = await page.evaluate(() => document.body.innerText);
  if (screenshot) await page.screenshot({ path: screenshot });
  await context.close();
  return { outside, brokenImages, text };
}

function problemsOf(result) {
  const problems = result.outside.map((url) => `asked for ${url}`);
  problems.push(...result.brokenImages.map((src) => `image not shown: ${src}`));
  for (const expected of EXPECTED_TEXT) {
    if (!result.text.includes(expected)) problems.push(`the page does not show "${expected}"`);
  }
  return problems;
}

async function main() {
  const args = process.argv.slice(2);
  const site = args[0];
  if (!site || site.startsWith("--")) usage();
  const shotIndex = args.indexOf("--screenshot");
  const screenshot = shotIndex >= 0 ? args[shotIndex + 1] : undefined;
  if (shotIndex >= 0 && !screenshot) usage();
  if (!existsSync(site)) {
    console.error(`check-site: ${site} does not exist; build it first`);
    process.exit(1);
  }

  const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    console.error(`check-site: no Chromium at ${executablePath}; install Debian's chromium package or set CHROMIUM`);
    process.exit(1);
  }
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
  try {
    // First a page that does reach outside, so this check is seen to catch what it looks for.
    const canaryDir = mkdtempSync(join(tmpdir(), "check-site-"));
    const canary = join(canaryDir, "canary.html");
    writeFileSync(
      canary,
      `<!doctype html><title>canary</title><p>${EXPECTED_TEXT.join(" ")}</p>` +
        `<img src="https://cdn.example.invalid/logo.svg" alt="outside">`,
    );
    const canaryResult = await loadOffline(browser, pathToFileURL(canary).href);
    rmSync(canaryDir, { recursive: true, force: true });
    if (!canaryResult.outside.includes("https://cdn.example.invalid/logo.svg")) {
      console.error("check-site: the canary page's outside image went unnoticed; this check cannot be trusted");
      process.exit(1);
    }

    const result = await loadOffline(browser, pathToFileURL(resolve(site)).href, screenshot);
    const problems = problemsOf(result);
    if (problems.length) {
      console.error(`check-site: ${site} is not self-contained or did not render:`);
      for (const problem of problems) console.error(`  - ${problem}`);
      process.exit(1);
    }
    console.log(
      `check-site: ${site} rendered offline in ${await browser.version()} with no request outside the page` +
        (screenshot ? `; screenshot in ${screenshot}` : ""),
    );
  } finally {
    await browser.close();
  }
}

await main();
