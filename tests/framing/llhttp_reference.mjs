// The reference reading of Node.js's own HTTP server (llhttp, strict mode): every case of the framing corpus is
// sent as raw bytes to a server on 127.0.0.1. What the server read is taken from its events, not from its answers
// (it may drop the answer to a request it read whole when a later one on the connection is malformed): each
// request it read to its end, in order, and whether it then refused the connection's bytes (`clientError`).
// Reads [{name, raw (base64)}] on stdin; writes {name: {requests: [[method, target, body (latin-1)]], refused}}.
import http from "node:http";
import net from "node:net";
import { readFileSync } from "node:fs";

const CASE_TIMEOUT_MS = 10000;
const cases = JSON.parse(readFileSync(0, "utf8"));

let current = null; // what the server read on the case's connection (one connection at a time)

const server = http.createServer((req, res) => {
  const entry = { method: req.method, target: req.url, chunks: [], req };
  current.seen.push(entry);
  req.on("data", (chunk) => entry.chunks.push(chunk));
  req.on("end", () => {
    res.writeHead(200, { "Content-Length": 0 });
    res.end();
  });
});
server.on("clientError", (_err, socket) => {
  current.refused = true;
  socket.destroy();
});

function exchange(port, raw) {
  current = { seen: [], refused: false };
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.end(raw));
    const timer = setTimeout(() => socket.destroy(), CASE_TIMEOUT_MS);
    socket.on("data", () => {});
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      // Let the server's side of the connection finish its events before they are read.
      setTimeout(() => {
        const requests = [];
        for (const entry of current.seen) {
          if (!entry.req.complete) break;
          requests.push([entry.method, entry.target, Buffer.concat(entry.chunks).toString("latin1")]);
        }
        resolve({ requests, refused: current.refused });
      }, 20);
    });
  });
}

server.listen(0, "127.0.0.1", async () => {
  const { port } = server.address();
  const out = {};
  for (const { name, raw } of cases) {
    out[name] = await exchange(port, Buffer.from(raw, "base64"));
  }
  server.close();
  server.closeAllConnections();
  process.stdout.write(JSON.stringify(out));
});
