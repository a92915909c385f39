'use strict';
// A webhook receiver for hookkeeper's tests that verifies every delivery
// with the Standard Webhooks reference library (npm standardwebhooks), so
// that our signatures are checked by code we did not write.
//
// RECEIVER_SECRETS is a JSON object mapping a path to the one whsec_ secret
// that path knows, e.g. {"/new": "whsec_..."}; one process can so play
// several receivers (one that knows only the new secret of a rotation, one
// that knows only the old one).
//
//   POST <path>  204 when verify() accepts the request, 401 with the reason
//                otherwise; 404 for a path without a secret.
//   GET /stats   {"<path>": {"verified": [{"id", "type", "data"}], "rejected": n}}
//
// It prints "port=<n>" on stdout once listening on 127.0.0.1 (the readiness
// signal) and exits when stdin closes, so it never outlives its test.
const http = require('node:http');
const { Webhook } = require('standardwebhooks');

const receivers = new Map();
for (const [path, secret] of Object.entries(JSON.parse(process.env.RECEIVER_SECRETS || '{}'))) {
  receivers.set(path, { webhook: new Webhook(secret), verified: [], rejected: 0 });
}

function stats() {
  const out = {};
  for (const [path, r] of receivers) {
    out[path] = { verified: r.verified, rejected: r.rejected };
  }
  return JSON.stringify(out);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(stats());
    return;
  }
  const r = receivers.get(req.url);
  if (req.method !== 'POST' || !r) {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let payload;
    try {
      payload = r.webhook.verify(Buffer.concat(chunks), req.headers);
    } catch (err) {
      r.rejected++;
      res.writeHead(401, { 'content-type': 'text/plain' }).end(String(err.message));
      return;
    }
    r.verified.push({ id: payload.id, type: payload.type, data: payload.data });
    res.writeHead(204).end();
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`port=${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
