"""Every endpoint of sluice-execd(8) and of sluiced(8)'s control API as a
:class:`~sluice._http.Call`, shared by the blocking and the asyncio
clients so that both send exactly the same requests."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
from typing import Any, Mapping, Optional, Sequence, Union

from ._http import Call, Response, json_call, q, query
from ._pty import PortResponse
from .errors import InvalidArgumentError
from .models import (Ceiling, CommandOutput, CommandStatus, Credential,
                     ExecResult, Grant, Health, Limits, Listing,
                     BrokerSession, Prompt, Rule, RuleList, SandboxInfo,
                     TarResult)

Cmd = Union[str, Sequence[str]]
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The deadline the executor enforces, at most limits_max.timeout_s (28
# minutes by default): a client waiting on an exec never gives up first.
EXEC_MAX_S = 1680
MARGIN_S = 30


def _json(r: Response) -> Any:
    return r.json()


def _obj(r: Response) -> dict[str, Any]:
    d = r.json()
    return d if isinstance(d, dict) else {}


def new_id() -> str:
    return "sbx-" + os.urandom(6).hex()


def check_id(what: str, v: str) -> str:
    if not isinstance(v, str) or not _ID.match(v):
        raise InvalidArgumentError("%s %r: 1 to 64 of A-Z a-z 0-9 . _ - (not starting "
                         "with . _ -)" % (what, v))
    return v


def command_body(cmd: Cmd, timeout_s: Optional[int] = None,
                 env: Optional[Mapping[str, str]] = None,
                 cwd: Optional[str] = None,
                 stdin: Union[str, bytes, None] = None,
                 output_cap: Optional[int] = None,
                 binary: bool = False,
                 output_cap_total: Optional[int] = None) -> dict[str, Any]:
    """The body of exec and commands: a list is argv, a string a shell
    command line (``/bin/sh -c``)."""
    b: dict[str, Any] = {}
    if isinstance(cmd, str):
        b["shell"] = cmd
    else:
        argv = list(cmd)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise InvalidArgumentError("cmd: a non-empty list of strings, or a string")
        b["cmd"] = argv
    if env is not None:
        b["env"] = dict(env)
    if cwd is not None:
        b["cwd"] = cwd
    if timeout_s is not None:
        b["timeout_s"] = int(timeout_s)
    if stdin is not None:
        b["stdin"] = (stdin.decode("utf-8") if isinstance(stdin, bytes)
                      else stdin)
    if output_cap is not None:
        b["output_cap"] = int(output_cap)
    if output_cap_total is not None:
        b["output_cap_total"] = int(output_cap_total)
    if binary:
        b["encoding"] = "base64"
    return b


def exec_wait_s(timeout_s: Optional[int], limits: Optional[Limits]) -> float:
    t = timeout_s or (limits.timeout_s if limits else None) or EXEC_MAX_S
    return float(t + MARGIN_S)


def install_body(packages: Union[str, Sequence[str]], manager: str,
                 timeout_s: Optional[int]) -> dict[str, Any]:
    """The body of POST /install: the executor builds the command line
    itself and refuses (400) what is not a bare package name."""
    pk = [packages] if isinstance(packages, str) else list(packages)
    if not pk or not all(isinstance(p, str) and p for p in pk):
        raise InvalidArgumentError("packages: one or more names")
    if manager not in ("pip", "npm"):
        raise InvalidArgumentError("manager: pip or npm, not %r" % manager)
    body: dict[str, Any] = {"manager": manager, "packages": pk}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    return body


def install(sid: str, body: Mapping[str, Any], wait_s: float
            ) -> Call[ExecResult]:
    return json_call("POST", "/v1/sandboxes/%s/install" % q(sid),
                     lambda r: ExecResult.from_json(_obj(r)), body,
                     sandbox=True, timeout=wait_s)


def metrics() -> Call[str]:
    return Call("GET", "/v1/metrics", lambda r: r.body.decode("utf-8",
                                                              "replace"))


def events() -> Call[None]:
    return Call("GET", "/v1/events", lambda r: None,
                headers={"Accept": "text/event-stream"})


def event_of(event: str, data: str) -> tuple[str, Any]:
    """An executor event: its data is JSON (text kept if it is not)."""
    try:
        return event, json.loads(data)
    except ValueError:
        return event, data


def shell_join(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def file_path(path: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise InvalidArgumentError("path: a non-empty string")
    return "/".join(q(p) for p in path.split("/"))


# ---------------------------------------------------------------- executor

def health() -> Call[Health]:
    return json_call("GET", "/v1/health", lambda r: Health.from_json(_obj(r)))


def node() -> Call[dict[str, Any]]:
    return json_call("GET", "/v1/node", _obj)


def set_draining(on: bool) -> Call[dict[str, Any]]:
    return json_call("PUT", "/v1/node", _obj, {"draining": bool(on)})


def healthz() -> Call[dict[str, Any]]:
    return json_call("GET", "/healthz", _obj)


def healthz_503(e: Exception) -> dict[str, Any]:
    """/healthz's 503 is its answer, not an error: the error's message
    is its body ({"ok", "image_ready"})."""
    import json
    try:
        d = json.loads(str(getattr(e, "message", "")))
    except ValueError:
        d = None
    if isinstance(d, dict) and "image_ready" in d:
        return {"ok": bool(d.get("ok")),
                "image_ready": bool(d.get("image_ready"))}
    return {"ok": False, "image_ready": False}


def sandbox_create(body: Mapping[str, Any], timeout: float) -> Call[SandboxInfo]:
    return json_call("POST", "/v1/sandboxes",
                     lambda r: SandboxInfo.from_json(_obj(r)), body,
                     timeout=timeout)


def create_body(tenant_id: str, user_id: str, id: Optional[str],
                network: Optional[str], profile: Optional[str],
                limits: Union[Limits, Mapping[str, int], None],
                backend: Optional[str]) -> dict[str, Any]:
    b: dict[str, Any] = {"id": check_id("sandbox id", id or new_id()),
                         "tenant": tenant_id, "user": user_id}
    if network is not None:     # none: the daemon's default tier applies
        b["network"] = {"tier": network}
    if profile is not None:
        b["profile"] = profile
    if backend is not None:
        b["backend"] = backend
    if limits is not None:
        b["limits"] = (limits.to_json() if isinstance(limits, Limits)
                       else dict(limits))
    return b


def sandbox_list(tenant: Optional[str], user: Optional[str]
                 ) -> Call[list[SandboxInfo]]:
    def parse(r: Response) -> list[SandboxInfo]:
        return [SandboxInfo.from_json(b) for b in
                _obj(r).get("sandboxes") or [] if isinstance(b, dict)]
    return json_call("GET", "/v1/sandboxes" + query(tenant=tenant, user=user),
                     parse)


def sandbox_get(sid: str) -> Call[SandboxInfo]:
    return json_call("GET", "/v1/sandboxes/" + q(sid),
                     lambda r: SandboxInfo.from_json(_obj(r)), sandbox=True)


def sandbox_patch(sid: str, tier: str) -> Call[SandboxInfo]:
    return json_call("PATCH", "/v1/sandboxes/" + q(sid),
                     lambda r: SandboxInfo.from_json(_obj(r)),
                     {"network": {"tier": tier}}, sandbox=True)


def sandbox_delete(sid: str, archive: bool) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/sandboxes/%s%s" % (
        q(sid), query(archive="keep" if archive else "discard")), _obj,
        sandbox=True, timeout=120)


def exec_(sid: str, body: Mapping[str, Any], wait_s: float
          ) -> Call[ExecResult]:
    return json_call("POST", "/v1/sandboxes/%s/exec" % q(sid),
                     lambda r: ExecResult.from_json(_obj(r)), body,
                     sandbox=True, timeout=wait_s)


def exec_stream(sid: str, body: Mapping[str, Any]) -> Call[None]:
    return json_call("POST", "/v1/sandboxes/%s/exec" % q(sid),
                     lambda r: None, body, sandbox=True,
                     headers={"Accept": "text/event-stream"})


def command_start(sid: str, body: Mapping[str, Any]) -> Call[dict[str, Any]]:
    return json_call("POST", "/v1/sandboxes/%s/commands" % q(sid), _obj, body,
                     sandbox=True)


def command_list(sid: str) -> Call[list[CommandStatus]]:
    def parse(r: Response) -> list[CommandStatus]:
        d = r.json()
        items = d.get("commands") if isinstance(d, dict) else d
        return [CommandStatus.from_json(c) for c in items or []
                if isinstance(c, dict)]
    return json_call("GET", "/v1/sandboxes/%s/commands" % q(sid), parse,
                     sandbox=True)


def command_get(sid: str, cid: str) -> Call[CommandStatus]:
    return json_call("GET", "/v1/sandboxes/%s/commands/%s" % (q(sid), q(cid)),
                     lambda r: CommandStatus.from_json(_obj(r)), sandbox=True)


def command_output(sid: str, cid: str, stdout_offset: int,
                   stderr_offset: int, binary: bool) -> Call[CommandOutput]:
    return json_call("GET", "/v1/sandboxes/%s/commands/%s/output%s" % (
        q(sid), q(cid), query(stdout_offset=stdout_offset,
                              stderr_offset=stderr_offset,
                              encoding="base64" if binary else None)),
        lambda r: CommandOutput.from_json(_obj(r), binary), sandbox=True)


def command_stop(sid: str, cid: str) -> Call[dict[str, Any]]:
    return json_call("POST", "/v1/sandboxes/%s/commands/%s/stop" % (
        q(sid), q(cid)), _obj, sandbox=True, timeout=120)


def cancel(sid: str, all_: bool) -> Call[int]:
    return json_call("POST", "/v1/sandboxes/%s/cancel" % q(sid),
                     lambda r: int(_obj(r).get("cancelled") or 0),
                     {"all": bool(all_)}, sandbox=True, timeout=120)


def files_list(sid: str, path: Optional[str], glob: Optional[str],
               recursive: bool) -> Call[Listing]:
    return json_call("GET", "/v1/sandboxes/%s/files%s" % (q(sid), query(
        path=path, glob=None if glob in (None, "*") and not recursive
        else glob, recursive="1" if recursive else None)),
        lambda r: Listing.from_json(_obj(r)), sandbox=True)


def file_read(sid: str, path: str, offset: Optional[int],
              length: Optional[int]) -> Call[bytes]:
    h = {"Accept": "application/octet-stream"}
    if offset is not None or length is not None:
        start = offset or 0
        if length is None:
            h["Range"] = "bytes=%d-" % start
        elif length <= 0:
            raise InvalidArgumentError("length: above 0")
        else:
            h["Range"] = "bytes=%d-%d" % (start, start + length - 1)
    return Call("GET", "/v1/sandboxes/%s/files/%s" % (q(sid), file_path(path)),
                lambda r: r.body, headers=h, sandbox=True, timeout=300)


def file_write(sid: str, path: str, data: bytes) -> Call[dict[str, Any]]:
    return Call("PUT", "/v1/sandboxes/%s/files/%s" % (q(sid), file_path(path)),
                _obj, data, "application/octet-stream", sandbox=True,
                timeout=300)


TarSource = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]


def tar_bytes(src: TarSource) -> bytes:
    """The body of put_tar: bytes as they are (a tar, tar.gz or tar.zst);
    a path: a directory is made a tar of (its contents, links as links),
    a file is read as it is."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return bytes(src)
    if not isinstance(src, (str, os.PathLike)):
        raise InvalidArgumentError("put_tar: bytes, or the path of a "
                                   "directory or of a tar file")
    p = os.fspath(src)
    if os.path.isdir(p):
        import io
        import tarfile
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
            for n in sorted(os.listdir(p)):
                t.add(os.path.join(p, n), arcname=n)
        return b.getvalue()
    with open(p, "rb") as f:
        return f.read()


def tar_dir(d: str) -> str:
    if not isinstance(d, str) or "\0" in d:
        raise InvalidArgumentError("dir: a string")
    return d


def archive_put(sid: str, d: str, data: bytes) -> Call[TarResult]:
    return Call("PUT", "/v1/sandboxes/%s/archive%s" % (q(sid), query(
        path=tar_dir(d))), lambda r: TarResult.from_json(_obj(r)), data,
        "application/x-tar", sandbox=True, timeout=600)


def archive_get(sid: str, d: str) -> Call[bytes]:
    return Call("GET", "/v1/sandboxes/%s/archive%s" % (q(sid), query(
        path=tar_dir(d))), lambda r: r.body,
        headers={"Accept": "application/x-tar"}, sandbox=True, timeout=600)


def file_delete(sid: str, path: str) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/sandboxes/%s/files/%s" % (
        q(sid), file_path(path)), _obj, sandbox=True)


def edit(sid: str, path: str, old: str, new: str) -> Call[dict[str, Any]]:
    return json_call("POST", "/v1/sandboxes/%s/edit" % q(sid), _obj,
                     {"path": path, "old": old, "new": new}, sandbox=True)


def stream_event(event: str, data: str) -> tuple[str, Any]:
    try:
        return event, json.loads(data) if data else {}
    except ValueError:
        return event, {}


def chunk_bytes(d: Any, binary: bool) -> bytes:
    v = d.get("data") if isinstance(d, dict) else None
    if not isinstance(v, str):
        return b""
    return base64.b64decode(v) if binary else v.encode("utf-8",
                                                       "surrogatepass")


# ------------------------------------------------------------------ broker

def b_health() -> Call[dict[str, Any]]:
    return json_call("GET", "/v1/health", _obj)


def b_metrics() -> Call[str]:
    return Call("GET", "/v1/metrics", lambda r: r.body.decode("utf-8",
                                                              "replace"))


def b_ceiling_get() -> Call[Ceiling]:
    return json_call("GET", "/v1/ceiling", lambda r: Ceiling.from_json(_obj(r)))


def b_ceiling_set(tier: Optional[str], tenants: Optional[Mapping[str, Any]],
                  close_exceeding: bool) -> Call[Ceiling]:
    b: dict[str, Any] = {}
    if tier is not None:
        b["tier"] = tier
    if tenants is not None:
        b["tenants"] = dict(tenants)
    if not b:
        raise InvalidArgumentError("set a tier, tenants or both")
    if close_exceeding:
        b["close_exceeding"] = True
    return json_call("PUT", "/v1/ceiling",
                     lambda r: Ceiling.from_json(_obj(r)), b)


def b_sessions() -> Call[list[BrokerSession]]:
    return json_call("GET", "/v1/sessions", lambda r: [
        BrokerSession.from_json(s) for s in _obj(r).get("sessions") or []
        if isinstance(s, dict)])


def b_session_get(sid: str) -> Call[BrokerSession]:
    return json_call("GET", "/v1/sessions/" + q(sid),
                     lambda r: BrokerSession.from_json(_obj(r)))


def b_session_create(sid: str, tenant: str, user: str, tier: str,
                     socket: Optional[str], source: Optional[str],
                     vsock_cid: Optional[int]) -> Call[BrokerSession]:
    b: dict[str, Any] = {"id": check_id("session id", sid), "tenant": tenant,
                         "user": user, "tier": tier}
    for k, v in (("socket", socket), ("source", source),
                 ("vsock_cid", vsock_cid)):
        if v is not None:
            b[k] = v
    return json_call("POST", "/v1/sessions",
                     lambda r: BrokerSession.from_json(_obj(r)), b)


def b_session_tier(sid: str, tier: str) -> Call[BrokerSession]:
    return json_call("PATCH", "/v1/sessions/" + q(sid),
                     lambda r: BrokerSession.from_json(_obj(r)),
                     {"tier": tier})


def b_session_delete(sid: str) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/sessions/" + q(sid), _obj)


def b_grant_add(sid: str, host: str, port: int) -> Call[Grant]:
    return json_call("POST", "/v1/sessions/%s/grants" % q(sid),
                     lambda r: Grant.from_json(_obj(r)),
                     {"host": host, "port": int(port)})


def b_grant_remove(sid: str, host: str, port: int) -> Call[dict[str, Any]]:
    h = host.strip("[]")
    target = "[%s]:%d" % (h, port) if ":" in h else "%s:%d" % (h, port)
    return json_call("DELETE", "/v1/sessions/%s/grants/%s" % (q(sid),
                                                              q(target)), _obj)


def b_prompts() -> Call[list[dict[str, Any]]]:
    return json_call("GET", "/v1/prompts", lambda r: [
        p for p in _obj(r).get("prompts") or [] if isinstance(p, dict)])


def b_prompt_get(pid: str) -> Call[dict[str, Any]]:
    return json_call("GET", "/v1/prompts/" + q(pid), _obj)


def b_prompt_answer(pid: str, decision: str) -> Call[dict[str, Any]]:
    if decision not in ("allow_once", "allow_chat", "deny"):
        raise InvalidArgumentError("decision: allow_once, allow_chat or deny")
    return json_call("POST", "/v1/prompts/" + q(pid), _obj,
                     {"decision": decision})


RuleLike = Union[Rule, Mapping[str, Any]]


def rule_body(r: RuleLike) -> dict[str, Any]:
    """A rule as sluiced takes it: a :class:`Rule`, or a dict in the
    API's shape (sent as it is; sluiced names a field it refuses)."""
    if isinstance(r, Rule):
        return r.to_json()
    if isinstance(r, Mapping):
        return dict(r)
    raise InvalidArgumentError("a rule: a sluice.Rule or a dict")


def strs_arg(what: str, v: Union[str, Sequence[str]]) -> list[str]:
    """A list of strings; one string alone is a list of it (never its
    characters)."""
    lst = [v] if isinstance(v, str) else list(v)
    if not all(isinstance(x, str) for x in lst):
        raise InvalidArgumentError("%s: a list of strings" % what)
    return lst


def b_rules() -> Call[RuleList]:
    return json_call("GET", "/v1/rules",
                     lambda r: RuleList.from_json(_obj(r)))


def b_rule_get(name: str) -> Call[Rule]:
    return json_call("GET", "/v1/rules/" + q(name),
                     lambda r: Rule.from_json(_obj(r)))


def b_rule_put(body: Mapping[str, Any]) -> Call[Rule]:
    return json_call("POST", "/v1/rules",
                     lambda r: Rule.from_json(_obj(r)), body)


def b_rules_replace(rules: Sequence[RuleLike]) -> Call[RuleList]:
    if isinstance(rules, (str, Mapping, Rule)):
        raise InvalidArgumentError("rules: a list of rules")
    return json_call("PUT", "/v1/rules",
                     lambda r: RuleList.from_json(_obj(r)),
                     {"rules": [rule_body(x) for x in rules]})


def b_rule_delete(name: str) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/rules/" + q(name), _obj)


def b_creds() -> Call[list[Credential]]:
    return json_call("GET", "/v1/credentials", lambda r: [
        Credential.from_json(c) for c in _obj(r).get("credentials") or []
        if isinstance(c, dict)])


def b_cred_get(name: str) -> Call[Credential]:
    return json_call("GET", "/v1/credentials/" + q(name),
                     lambda r: Credential.from_json(_obj(r)))


def b_cred_set(name: str, tenant: str, hosts: Union[str, Sequence[str]],
               value: str, header: str, format: Optional[str],
               methods: Optional[Sequence[str]],
               paths: Optional[Sequence[str]]) -> Call[Credential]:
    if not isinstance(value, str):
        raise InvalidArgumentError("value: a string")
    inject: dict[str, Any] = {"header": header}
    if format is not None:
        inject["format"] = format
    b: dict[str, Any] = {"name": name, "tenant": tenant,
                         "hosts": strs_arg("hosts", hosts),
                         "inject": inject, "value": value}
    if methods is not None:
        b["methods"] = strs_arg("methods", methods)
    if paths is not None:
        b["paths"] = strs_arg("paths", paths)
    return json_call("POST", "/v1/credentials",
                     lambda r: Credential.from_json(_obj(r)), b)


def b_cred_delete(name: str) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/credentials/" + q(name), _obj)


def b_events() -> Call[None]:
    return Call("GET", "/v1/events", lambda r: None,
                headers={"Accept": "text/event-stream"})


def prompt_of(d: dict[str, Any], answer: Any) -> Prompt:
    return Prompt.from_json(d, answer)


# ---- terminals and ports (sluice._pty) ----

def pty_start(sid: str, command: Optional[str], cwd: Optional[str],
              env: Optional[Mapping[str, str]], cols: Optional[int],
              rows: Optional[int]) -> Call[dict[str, Any]]:
    b: dict[str, Any] = {}
    for k, v in (("command", command), ("cwd", cwd), ("cols", cols),
                 ("rows", rows)):
        if v is not None:
            b[k] = v
    if env is not None:
        b["env"] = dict(env)
    return json_call("POST", "/v1/sandboxes/%s/pty" % q(sid), _obj, b,
                     sandbox=True)


def pty_get(sid: str, pid: str) -> Call[dict[str, Any]]:
    return json_call("GET", "/v1/sandboxes/%s/pty/%s" % (q(sid), q(pid)),
                     _obj, sandbox=True)


def pty_delete(sid: str, pid: str) -> Call[dict[str, Any]]:
    return json_call("DELETE", "/v1/sandboxes/%s/pty/%s" % (q(sid), q(pid)),
                     _obj, sandbox=True)


def port_path(sid: str, port: int, path: str) -> str:
    if not isinstance(port, int) or isinstance(port, bool) or \
            not 1 <= port <= 65535:
        raise InvalidArgumentError("port %r: 1 to 65535" % (port,))
    if not path.startswith("/"):
        path = "/" + path
    return "/v1/sandboxes/%s/ports/%d%s" % (q(sid), port, path)


def port_fetch(sid: str, port: int, path: str, method: str,
               body: Optional[bytes], headers: Optional[Mapping[str, str]],
               timeout: Optional[float]) -> Call[PortResponse]:
    return Call(method.upper(), port_path(sid, port, path),
                lambda r: PortResponse(r.status, [
                    (k, v) for k, v in r.headers
                    if k.lower() != "x-sluice-upstream"], r.body),
                body, None, dict(headers or {}), sandbox=True,
                timeout=timeout, upstream=True)
