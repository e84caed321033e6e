// opensandbox_chathub.mjs: ChatHub's Sandbox tools through the official,
// unmodified OpenSandbox JS SDK against sluice-execd's OpenSandbox API
// (tests/scenario/t_opensandbox.py runs it).  Argument: a JSON object
// {sdk (the SDK's dist/index.js), domain, key, image}.  Prints one JSON
// line per step; exits non-zero on the first failure.
const cfg = JSON.parse(process.argv[2]);
const { Sandbox } = await import(cfg.sdk);

function ok(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}
function step(name, data) {
  console.log(JSON.stringify({ step: name, ...data }));
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const connectionConfig = { domain: cfg.domain, apiKey: cfg.key, protocol: "http" };
let sbx;
try {
  // ChatHub: create (ready check through execd /ping included)
  sbx = await Sandbox.create({
    connectionConfig, image: cfg.image, timeoutSeconds: 600,
    resource: { cpu: "1", memory: "2Gi" },
    env: { CHATHUB_ENV: "from-create" }, metadata: { chat: "c-42" },
  });
  step("create", { id: sbx.id });
  const info = await sbx.sandboxes.getSandbox(sbx.id);
  ok(info.status.state === "Running", "state Running: " + JSON.stringify(info));
  ok(info.metadata.chat === "c-42", "metadata kept");

  // runCommand (foreground): stdout, stderr, exit code, env, cwd
  let ex = await sbx.commands.run(
    "echo out-$CHATHUB_ENV; echo err-line >&2; pwd; exit 3",
    { workingDirectory: "/workspace" });
  const out = ex.logs.stdout.map((m) => m.text).join("");
  const err = ex.logs.stderr.map((m) => m.text).join("");
  step("run", { exitCode: ex.exitCode, out, err });
  ok(ex.exitCode === 3, "exit code 3");
  ok(out.includes("out-from-create") && out.includes("/workspace"), "stdout");
  ok(err.includes("err-line"), "stderr");
  ex = await sbx.commands.run("true");
  ok(ex.exitCode === 0, "exit 0");

  // runCommand background, getCommandOutput, stopCommand
  const bg = await sbx.commands.run(
    "for i in 1 2 3; do echo tick-$i; sleep 0.2; done; sleep 60",
    { background: true });
  ok(bg.id, "a background command id");
  await sleep(1500);
  const st = await sbx.commands.getCommandStatus(bg.id);
  ok(st.running === true, "background running");
  let logs = await sbx.commands.getBackgroundCommandLogs(bg.id);
  step("logs", { content: logs.content, cursor: logs.cursor });
  ok(logs.content.includes("tick-1") && logs.content.includes("tick-3"),
     "background output");
  const again = await sbx.commands.getBackgroundCommandLogs(bg.id, logs.cursor);
  ok(again.content === "", "nothing new after the cursor: " + JSON.stringify(again));
  await sbx.commands.interrupt(bg.id);
  let st2;
  for (let i = 0; i < 50; i++) {
    st2 = await sbx.commands.getCommandStatus(bg.id);
    if (!st2.running) break;
    await sleep(100);
  }
  step("stop", { status: st2 });
  ok(st2.running === false, "stopped");

  // writeFile, readFile, editFile, listFiles, exportFile
  await sbx.files.createDirectories([{ path: "/workspace/proj", mode: 755 }]);
  await sbx.files.writeFiles([
    { path: "/workspace/proj/a.py", data: "print('hello from a')\n" },
    { path: "/workspace/proj/data.bin", data: new Uint8Array([0, 1, 2, 255]) },
  ]);
  ok((await sbx.files.readFile("/workspace/proj/a.py")) ===
     "print('hello from a')\n", "read back");
  await sbx.files.replaceContents([{ path: "/workspace/proj/a.py",
    oldContent: "hello", newContent: "edited" }]);
  ex = await sbx.commands.run("python3 proj/a.py || cat proj/a.py",
                              { workingDirectory: "/workspace" });
  ok(ex.logs.stdout.map((m) => m.text).join("").includes("edited"),
     "the command sees the edit");
  const ls = await sbx.files.listDirectory({ path: "/workspace/proj" });
  step("list", { entries: ls.map((f) => [f.path, f.type, f.size]) });
  ok(ls.length === 2 && ls[0].path === "/workspace/proj/a.py" &&
     ls[0].type === "file", "listing");
  const found = await sbx.files.search({ path: "/workspace", pattern: "*.py" });
  ok(found.some((f) => f.path === "/workspace/proj/a.py"), "search");
  const bytes = await sbx.files.readBytes("/workspace/proj/data.bin");
  ok(bytes.length === 4 && bytes[3] === 255, "export bytes");
  const part = await sbx.files.readBytes("/workspace/proj/data.bin",
                                        { range: "bytes=1-2" });
  ok(part.length === 2 && part[0] === 1, "Range");
  const fi = await sbx.files.getFileInfo(["/workspace/proj/a.py"]);
  ok(fi["/workspace/proj/a.py"].type === "file", "info");
  // confinement: outside the workspace is refused
  let refused = false;
  try { await sbx.files.readFile("/etc/passwd"); } catch (e) { refused = true; }
  ok(refused, "outside the workspace refused");
  // ChatHub's working directory, /tmp/workspace: the workspace under
  // another name, for the file tools and for commands alike
  await sbx.files.writeFiles([
    { path: "/tmp/workspace/tw/b.py", data: "print('b via tmp')\n" }]);
  ok((await sbx.files.readFile("/workspace/tw/b.py")) === "print('b via tmp')\n",
     "written under /tmp/workspace, read under /workspace");
  ex = await sbx.commands.run(
    "pwd -P; python3 tw/b.py; python3 /tmp/workspace/tw/b.py; " +
    "cd /tmp/workspace/proj && ls",
    { workingDirectory: "/tmp/workspace" });
  const tout = ex.logs.stdout.map((m) => m.text).join("");
  step("tmpworkspace", { exitCode: ex.exitCode, out: tout });
  ok(ex.exitCode === 0 && tout.split("b via tmp").length === 3 &&
     tout.includes("a.py"), "commands in and naming /tmp/workspace");
  const tls = await sbx.files.listDirectory({ path: "/tmp/workspace/tw" });
  ok(tls.length === 1 && tls[0].path === "/tmp/workspace/tw/b.py",
     "listing /tmp/workspace names its files there: " + JSON.stringify(tls));
  const tfi = await sbx.files.getFileInfo(["/tmp/workspace/tw/b.py"]);
  ok(tfi["/tmp/workspace/tw/b.py"].path === "/tmp/workspace/tw/b.py", "info there");
  await sbx.files.replaceContents([{ path: "/tmp/workspace/tw/b.py",
    oldContent: "via tmp", newContent: "edited via tmp" }]);
  ok((await sbx.files.readFile("/tmp/workspace/tw/b.py")).includes("edited via tmp"),
     "edit and read under /tmp/workspace");
  refused = false;
  try { await sbx.files.readFile("/tmp/workspacex/b.py"); } catch (e) { refused = true; }
  ok(refused, "a sibling of /tmp/workspace is not the workspace");
  // what sluice does not do: a clear error
  let nsErr;
  try { await sbx.commands.createSession(); } catch (e) { nsErr = e; }
  ok(nsErr && nsErr.statusCode === 501, "sessions: 501");

  // renew, list, pause/resume
  await sbx.renew(1200);
  const page = await sbx.sandboxes.listSandboxes({ states: ["Running"],
                                                   metadata: { chat: "c-42" } });
  ok(page.items.some((s) => s.id === sbx.id), "listed");
  await sbx.sandboxes.pauseSandbox(sbx.id);
  ok((await sbx.sandboxes.getSandbox(sbx.id)).status.state === "Paused", "Paused");
  await sbx.sandboxes.resumeSandbox(sbx.id);
  ok((await sbx.sandboxes.getSandbox(sbx.id)).status.state === "Running", "resumed");
  step("lifecycle", {});
  console.log(JSON.stringify({ sandbox: sbx.id }));

  // kill
  await sbx.kill();
  let gone = false;
  try { await sbx.sandboxes.getSandbox(sbx.id); } catch (e) { gone = e.statusCode === 404; }
  ok(gone, "deleted: 404");
  step("kill", {});
  sbx = null;
  console.log(JSON.stringify({ done: true }));
} finally {
  if (sbx) { try { await sbx.kill(); } catch (e) { /* the test cleans up */ } }
}
