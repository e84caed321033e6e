// opensandbox_egress.mjs: OpenSandbox's network policy through the
// official, unmodified JS SDK against sluice-execd (t_opensandbox.py
// egress_sdk runs it): networkPolicy at create, getEgressPolicy,
// patchEgressRules, deleteEgressRules, and what a command inside the
// sandbox then meets through sluiced.  Argument: a JSON object {sdk,
// domain, key, image, port (the upstream's, behind the names
// allowed.test, denied.test, other.test, a.wild.test)}.  Prints one JSON
// line per step and {"sandbox": id} once made; exits non-zero on the
// first failure.
const cfg = JSON.parse(process.argv[2]);
const { Sandbox } = await import(cfg.sdk);

function ok(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}
function step(name, data) {
  console.log(JSON.stringify({ step: name, ...data }));
}

// status and X-Sluice-Reason of a GET from inside the sandbox, through
// the sandbox's proxy (sluiced), with the time it took
async function fetchIn(sbx, host) {
  const t0 = Date.now();
  const ex = await sbx.commands.run(
    `curl -sS --max-time 20 -o /dev/null -D - http://${host}:${cfg.port}/ ` +
    `| tr -d '\\r' | grep -i -e '^HTTP/' -e '^x-sluice-reason:'`);
  const out = ex.logs.stdout.map((m) => m.text).join("");
  const code = Number((out.match(/^HTTP\/[0-9.]+ ([0-9]+)/m) || [])[1]);
  const reason = ((out.match(/^x-sluice-reason: *(.*)$/mi) || [])[1] || "").trim();
  const r = { host, code, reason, ms: Date.now() - t0 };
  step("fetch", r);
  return r;
}

const connectionConfig = { domain: cfg.domain, apiKey: cfg.key, protocol: "http" };
let sbx;
try {
  sbx = await Sandbox.create({
    connectionConfig, image: cfg.image, timeoutSeconds: 600,
    networkPolicy: {
      defaultAction: "deny",
      egress: [{ action: "allow", target: "allowed.test" },
               { action: "deny", target: "denied.test" }],
    },
  });
  console.log(JSON.stringify({ sandbox: sbx.id }));
  let p = await sbx.getEgressPolicy();
  step("policy", { p });
  ok(p.defaultAction === "deny", "defaultAction deny");
  ok(JSON.stringify(p.egress) === JSON.stringify([
    { action: "allow", target: "allowed.test" },
    { action: "deny", target: "denied.test" }]), "the rules echoed as given");

  let r = await fetchIn(sbx, "allowed.test");
  ok(r.code === 200, "an allowed name reaches its upstream");
  r = await fetchIn(sbx, "denied.test");
  ok(r.code === 403 && r.reason === "session_denied", "a denied name: 403 session_denied");
  ok(r.ms < 5000, "refused at once, no prompt");

  // merge: the incoming first, a duplicate target's first rule wins
  await sbx.patchEgressRules([
    { action: "allow", target: "*.wild.test" },
    { action: "deny", target: "allowed.test" },
    { action: "allow", target: "allowed.test" },
  ]);
  p = await sbx.getEgressPolicy();
  step("patched", { p });
  ok(JSON.stringify(p.egress) === JSON.stringify([
    { action: "allow", target: "*.wild.test" },
    { action: "deny", target: "allowed.test" },
    { action: "deny", target: "denied.test" }]), "merged");
  r = await fetchIn(sbx, "a.wild.test");
  ok(r.code === 200, "a wildcard allow");
  r = await fetchIn(sbx, "allowed.test");
  ok(r.code === 403 && r.reason === "session_denied", "now denied");

  await sbx.deleteEgressRules(["allowed.test", "denied.test"]);
  p = await sbx.getEgressPolicy();
  step("deleted", { p });
  ok(JSON.stringify(p.egress) === JSON.stringify([
    { action: "allow", target: "*.wild.test" }]), "two rules gone");
  r = await fetchIn(sbx, "denied.test");
  ok(r.reason === "no_approver" || r.reason === "prompt_timeout",
     "no rule names it: the tier off, so sluice asks (no approver here)");

  // a malformed target: sluiced's 400, the rules unchanged
  let threw = false;
  try {
    await sbx.patchEgressRules([{ action: "allow", target: "bad host" }]);
  } catch (e) {
    threw = true;
    step("bad", { message: String(e.message || e) });
  }
  ok(threw, "a malformed target refused");
  p = await sbx.getEgressPolicy();
  ok(p.egress.length === 1, "unchanged after the refusal");
  step("done", { done: true });
  console.log(JSON.stringify({ done: true }));
} finally {
  if (process.env.KEEP !== "1" && sbx) {
    try { await sbx.kill(); } catch (e) { /* reported by the checks */ }
  }
}
