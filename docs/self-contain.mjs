// Makes the built reference page self-contained: Redoc's "API docs by" footer loads Redocly's logo from a CDN at
// run time, so its two addresses are replaced by small inline SVG wordmarks drawn here (text only, no copied art).
// Usage: node self-contain.mjs SITE_HTML. check-site.mjs then proves the page asks for nothing outside itself.
import { readFileSync, writeFileSync } from "node:fs";

function wordmark(text, width) {
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="16" viewBox="0 0 ${width} 16">` +
    `<text x="0" y="12" font-family="sans-serif" font-size="12" fill="#6b7280">${text}</text></svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
}

// The addresses the Redoc bundle of @redocly/cli (docs/package.json) puts in the footer.
const REPLACEMENTS = new Map([
  ["https://cdn.redoc.ly/redoc/logo-mini-full.svg", wordmark("Redocly", 48)],
  ["https://cdn.redoc.ly/redoc/logo-mini.svg", wordmark("R", 10)],
]);

const site = process.argv[2];
if (!site) {
  console.error("usage: node self-contain.mjs SITE_HTML");
  process.exit(2);
}
let html = readFileSync(site, "utf8");
let replaced = 0;
for (const [address, inline] of REPLACEMENTS) {
  const parts = html.split(address);
  replaced += parts.length - 1;
  html = parts.join(inline);
}
writeFileSync(site, html);
console.log(`self-contain: ${replaced} outside asset address(es) replaced by inline images in ${site}`);
