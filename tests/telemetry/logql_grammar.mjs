// Parses LogQL queries with Grafana's LogQL grammar (@grafana/lezer-logql, pinned in docs/package.json) and reports,
// for each, whether the parse met an error and the label matchers of its stream selector as written:
// [label, operator node name (Eq, Neq, Re, Nre), string literal text]. Reads a JSON list of queries on stdin,
// writes a JSON list of {error, matchers} on stdout. The docs folder's package.json is passed as the first argument.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

const require = createRequire(resolve(process.argv[2]));
const { parser } = require("@grafana/lezer-logql");

const queries = JSON.parse(readFileSync(0, "utf8"));
const results = queries.map((query) => {
  const tree = parser.parse(query);
  let error = false;
  let selectorEnd = -1;
  const matchers = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) error = true;
      if (node.name === "Selector" && selectorEnd < 0) selectorEnd = node.to;
      if (node.name === "Matcher" && node.to <= selectorEnd) {
        const parts = [];
        for (let child = node.node.firstChild; child; child = child.nextSibling) {
          parts.push(child.name === "Identifier" || child.name === "String" ? query.slice(child.from, child.to) : child.name);
        }
        matchers.push(parts);
      }
    },
  });
  return { error, matchers };
});
process.stdout.write(JSON.stringify(results));
