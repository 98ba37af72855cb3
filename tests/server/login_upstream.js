// A login service for tests/server/login_body_test.cc (issue 34's done-when),
// run by the real Node (no packages): the upstream behind tollgated's gateway.
//
//   POST /login  {"username": U, "password": P} -> 200 when P is "right-" + U,
//                else 401 (400 for a body that is not JSON); the answer echoes
//                the user name and the body's byte length, so a test sees the
//                body arrived unchanged. Any Content-Type is read as JSON
//                (as many real login handlers do).
//   GET /seen    -> {"seen": N}: how many login requests reached it.
//
// Listens on 127.0.0.1, port 0 (any), and prints "listening <port>" once it does.
'use strict';
const http = require('http');

let seen = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/seen') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ seen }));
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > 1 << 20) {
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/login') {
      res.writeHead(404);
      res.end();
      return;
    }
    ++seen;
    const raw = Buffer.concat(chunks);
    let body;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch (e) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('not JSON');
      return;
    }
    const user = body && typeof body.username === 'string' ? body.username : '';
    const ok = user !== '' && body.password === 'right-' + user;
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok, username: user, length: raw.length }));
  });
});
// tollgated keeps upstream connections alive in its pool: never close them
// under it during a test (Node's default is 5 s idle).
server.keepAliveTimeout = 120000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write('listening ' + server.address().port + '\n');
});
process.on('SIGTERM', () => process.exit(0));
