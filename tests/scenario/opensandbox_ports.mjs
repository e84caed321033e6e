// opensandbox_ports.mjs: a server inside a sandbox reached through the
// port proxy, with the official, unmodified OpenSandbox JS SDK against
// sluice-execd (t_opensandbox.py ports_sdk runs it): a background
// python3 -m http.server, getEndpoint / getEndpointUrl and the
// endpoint's headers, a signed preview URL (getSignedEndpoint), what is
// refused.  Argument: a JSON object {sdk, domain, key, image}.  Prints
// one JSON line per step and {"sandbox": id}; exits non-zero on the
// first failure.
import { createHash } from "node:crypto";

const cfg = JSON.parse(process.argv[2]);
const { Sandbox } = await import(cfg.sdk);

function ok(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}
function step(name, data) {
  console.log(JSON.stringify({ step: name, ...data }));
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha = (b) => createHash("sha256").update(b).digest("hex");

const connectionConfig = { domain: cfg.domain, apiKey: cfg.key, protocol: "http" };
let sbx;
try {
  sbx = await Sandbox.create({ connectionConfig, image: cfg.image, timeoutSeconds: 600 });
  console.log(JSON.stringify({ sandbox: sbx.id }));
  await sbx.files.createDirectories([{ path: "/workspace/site", mode: 755 }]);
  await sbx.files.writeFiles([
    { path: "/workspace/site/hello.txt", data: "hello from inside\n" }]);
  // 3 MiB of pseudo-random bytes: streamed back whole
  const ex0 = await sbx.commands.run(
    "python3 -c \"import os,random; random.seed(7); " +
    "open('/workspace/site/big.bin','wb').write(random.randbytes(3<<20))\" " +
    "&& sha256sum /workspace/site/big.bin");
  const bigSha = ex0.logs.stdout.map((m) => m.text).join("").split(" ")[0];
  ok(bigSha.length === 64, "big file made: " + bigSha);
  const bg = await sbx.commands.run(
    "cd /workspace/site && exec python3 -m http.server 8000 --bind 127.0.0.1",
    { background: true });
  ok(bg.id, "server started");

  const ep = await sbx.getEndpoint(8000);
  step("endpoint", { ep });
  ok(ep.endpoint.endsWith(`/sandboxes/${sbx.id}/proxy/8000`), "endpoint path");
  ok(ep.headers && ep.headers["OpenSandbox-Secure-Access"], "a token header");
  const url = await sbx.getEndpointUrl(8000);
  ok(url === "http://" + ep.endpoint, "url: " + url);

  // the server needs a moment to listen
  let r;
  for (let i = 0; i < 50; i++) {
    r = await fetch(url + "/hello.txt", { headers: ep.headers });
    if (r.status !== 502) break;
    await sleep(200);
  }
  const text = await r.text();
  step("get", { status: r.status, text, server: r.headers.get("server") });
  ok(r.status === 200 && text === "hello from inside\n", "the file through the proxy");
  ok((r.headers.get("server") || "").includes("SimpleHTTP"), "python's server answered");

  r = await fetch(url + "/big.bin", { headers: ep.headers });
  const big = Buffer.from(await r.arrayBuffer());
  step("big", { status: r.status, len: big.length });
  ok(r.status === 200 && big.length === 3 << 20 && sha(big) === bigSha, "3 MiB intact");

  // a client that goes away half way: the daemon drops the exchange
  // (and still serves the next)
  {
    const ac = new AbortController();
    const rr = await fetch(url + "/big.bin", { headers: ep.headers, signal: ac.signal });
    const rd = rr.body.getReader();
    await rd.read();
    ac.abort();
    await rd.read().catch(() => null);
  }
  r = await fetch(url + "/nothing-here?x=1", { headers: ep.headers });
  ok(r.status === 404, "the upstream's 404 passed on: " + r.status);
  await r.arrayBuffer();
  r = await fetch(url + "/", { headers: ep.headers });
  const listing = await r.text();
  ok(r.status === 200 && listing.includes("hello.txt"), "the directory listing");
  // python's http.server takes no POST: its 501 is passed on, the body went up
  r = await fetch(url + "/hello.txt", { method: "POST", headers: ep.headers, body: "x=1" });
  ok(r.status === 501, "POST reaches the server: " + r.status);
  await r.arrayBuffer();

  // without the header, or with execd's token under it: 401
  r = await fetch(url + "/hello.txt");
  ok(r.status === 401, "no token: " + r.status);
  const execd = await sbx.getEndpoint(44772);
  r = await fetch(url + "/hello.txt", {
    headers: { "OpenSandbox-Secure-Access": execd.headers["X-EXECD-ACCESS-TOKEN"] } });
  ok(r.status === 401, "execd's token opens no port: " + r.status);
  // execd's own /proxy/{port} with execd's token, as OpenSandbox's execd
  r = await fetch(`http://${execd.endpoint}/proxy/8000/hello.txt`, { headers: execd.headers });
  ok(r.status === 200 && (await r.text()) === "hello from inside\n", "execd's /proxy: " + r.status);
  // the token of port 8000 does not open another port
  const ep2 = await sbx.getEndpoint(8001);
  r = await fetch("http://" + ep2.endpoint + "/", { headers: ep.headers });
  ok(r.status === 401, "8000's token on 8001: " + r.status);
  r = await fetch("http://" + ep2.endpoint + "/", { headers: ep2.headers });
  const j = await r.json();
  step("closed", { status: r.status, j });
  ok(r.status === 502 && j.code === "PORT_UNREACHABLE", "nothing on 8001: 502");

  // a signed preview URL: no headers needed, until it expires
  const exp = Math.floor(Date.now() / 1000) + 600;
  const signed = await sbx.getSignedEndpoint(8000, exp);
  step("signed", { signed });
  r = await fetch("http://" + signed.endpoint + "/hello.txt");
  ok(r.status === 200 && (await r.text()) === "hello from inside\n", "signed URL");
  const forged = signed.endpoint.replace(/@(\d+)\./, (m, e) => `@${Number(e) + 1}.`);
  r = await fetch("http://" + forged + "/hello.txt");
  ok(r.status === 401, "a changed expiry: " + r.status);
  let threw = false;
  try {
    await sbx.getSignedEndpoint(8000, Math.floor(Date.now() / 1000) - 5);
  } catch (e) {
    threw = true;
  }
  ok(threw, "an expiry in the past refused");

  // a WebSocket through the signed URL (a browser sends no headers), to
  // an echo server in the sandbox: the 101 and the frames pass both ways
  if (typeof WebSocket === "function") {
    await sbx.files.writeFiles([{ path: "/workspace/ws.py", data: cfg.wsServer }]);
    const wsbg = await sbx.commands.run("exec python3 /workspace/ws.py 8765",
                                        { background: true });
    const wsSigned = await sbx.getSignedEndpoint(8765, exp);
    const big = "x".repeat(200000);
    // listening yet?
    await sbx.commands.run("for i in $(seq 100); do python3 -c \"import socket; " +
      "socket.create_connection(('127.0.0.1', 8765)).close()\" 2>/dev/null && break; " +
      "sleep 0.1; done");
    const got = await new Promise((resolve) => {
      const msgs = [];
      const ws = new WebSocket("ws://" + wsSigned.endpoint + "/chat");
      const timer = setTimeout(() => resolve(msgs), 20000);
      ws.onopen = () => { ws.send("hi"); ws.send(big); };
      ws.onmessage = (m) => {
        msgs.push(m.data);
        if (msgs.length === 2) ws.close();
      };
      ws.onclose = () => { clearTimeout(timer); resolve(msgs); };
      ws.onerror = () => {};
    });
    step("websocket", { n: got.length, first: got[0], bigLen: got[1] && got[1].length });
    ok(got[0] === "echo:hi" && got[1] === "echo:" + big, "WebSocket echo");
    // without a token: refused before any upgrade
    const refused = await new Promise((resolve) => {
      const ws = new WebSocket("ws://" + wsSigned.endpoint.replace(/@.*$/, "") + "/chat");
      const timer = setTimeout(() => resolve(true), 10000);
      ws.onopen = () => { clearTimeout(timer); resolve(false); };
      ws.onerror = () => { clearTimeout(timer); resolve(true); };
    });
    ok(refused, "a WebSocket without a token refused");
    await sbx.commands.interrupt(wsbg.id);
  } else {
    step("websocket", { skipped: "this node has no WebSocket client" });
  }

  await sbx.commands.interrupt(bg.id);
  step("done", {});
  console.log(JSON.stringify({ done: true }));
} finally {
  if (process.env.KEEP !== "1" && sbx) {
    try { await sbx.kill(); } catch (e) { /* reported by the checks */ }
  }
}
