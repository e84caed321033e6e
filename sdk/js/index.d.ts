// Type declarations of the sluice SDK for Node (an ES module).

/// <reference types="node" />

export const VERSION: string;
export const DEFAULT_EXEC_ADDRESS: string;
export const DEFAULT_BROKER_ADDRESS: string;

export type Tier = 'off' | 'registries' | 'public';
export type Decision = 'allow_once' | 'allow_chat' | 'deny';
export type Cmd = string | string[];
export type Bytes = string | Buffer | Uint8Array;

// ------------------------------------------------------------------ errors

export interface ErrorOptions {
  status?: number | null;
  code?: string | null;
  details?: Record<string, unknown>;
}

/** Base of every error the SDK throws. */
export class SluiceError extends Error {
  constructor(message: string, options?: ErrorOptions);
  /** HTTP status; null when no answer came. */
  readonly status: number | null;
  /** The API's error code ("quota_exceeded", ...). */
  readonly code: string | null;
  /** The API's message (message adds status and code). */
  readonly apiMessage: string;
  /** The whole error object the API sent. */
  readonly details: Record<string, unknown>;
}
export class SluiceConnectionError extends SluiceError {}
export class BadRequestError extends SluiceError {
  readonly field: string | null;
  readonly max: number | null;
}
/**
 * An argument the SDK refuses before it calls anything (status null, code
 * "invalid_argument"). At run time it is also a TypeError (what the SDK
 * threw before): `e instanceof TypeError` and `e instanceof SluiceError`
 * both hold.
 */
export class InvalidArgumentError extends SluiceError {
  constructor(message: string);
  readonly code: 'invalid_argument';
}
/** An object the SDK cannot use for the call (code "invalid_state"): a Prompt not read through a client. */
export class InvalidStateError extends SluiceError {
  constructor(message: string);
}
/** Command.wait({ timeoutMs }) ran out (code "timeout", name "TimeoutError"); the command goes on. */
export class SluiceTimeoutError extends SluiceError {
  constructor(message: string);
}
export class UnauthorizedError extends SluiceError {}
export class ForbiddenError extends SluiceError {}
/** 403 network_not_permitted: install in a sandbox whose effective tier is off. */
export class NetworkNotPermittedError extends SluiceError {
  /** the sandbox's own tier */
  readonly tier: string | null;
  /** its tenant's ceiling as sluiced applies it; null when sluiced had no session */
  readonly ceiling: string | null;
  /** the lower of tier and ceiling */
  readonly effectiveTier: string | null;
}
export class NotFoundError extends SluiceError {}
export class SandboxNotFoundError extends NotFoundError {}
export class ConflictError extends SluiceError {}
export class TooLargeError extends SluiceError {}
export class QuotaExceededError extends SluiceError {
  /** global, tenant, user, creates or sandbox */
  readonly scope: string | null;
  readonly limit: number | null;
  readonly inUse: number | null;
}
export class BusyError extends SluiceError {}
export class BackendUnavailableError extends SluiceError {}
export class BrokerUnavailableError extends SluiceError {}
export class CommandError extends SluiceError {
  constructor(message: string, result: ExecResult);
  readonly result: ExecResult;
}
export function errorFrom(status: number, body: Buffer,
  options?: { broker?: boolean; sandbox?: boolean }): SluiceError;

// ------------------------------------------------------------------ models

export interface Limits {
  memoryMb?: number; pids?: number; cpuPct?: number; tmpMb?: number; homeMb?: number;
  fsizeMb?: number; nofile?: number; nproc?: number; timeoutS?: number; outputCap?: number;
}

export interface SandboxInfo {
  id: string; tenant: string; user: string;
  /** creating, running, suspended, deleting or dead */
  state: string;
  backend: string; profile: string; image: string; tier: string; broker: string;
  /** sluiced's session of the sandbox (its prompts and grants): ids are per tenant, session ids unique on the host */
  session: string;
  limits: Limits; usage: Record<string, unknown>;
  created: string; lastUsed: string; note: string;
  raw: Record<string, unknown>;
}

/** An entry under /workspace a command created, modified or deleted. */
export interface Change {
  /** relative to /workspace */
  path: string;
  change: 'created' | 'modified' | 'deleted';
  type: 'file' | 'directory' | 'symlink' | 'other';
  /** bytes (before, for a deleted one) */
  size: number;
}

/** A regular file a command created or modified under /workspace/outputs (read it with sb.read(path)). */
export interface Artifact { path: string; size: number; sha256: string }

/** A file under outputs/ a limit left out of artifacts (it stays in the workspace). */
export interface ArtifactSkipped { path: string; size: number; limit: 'file_bytes' | 'count' | 'total_bytes' }

/** What a command did to the workspace. */
export interface WorkspaceChanges {
  changed: Change[];
  /** the workspace had too many entries to compare: only outputs/ was */
  changedTruncated: boolean;
  artifacts: Artifact[];
  artifactsSkipped: ArtifactSkipped[];
}

export interface ExecResult extends WorkspaceChanges {
  id: string;
  /** 128+N for a death by signal N */
  exitCode: number;
  signal: number | null;
  timedOut: boolean; oomKilled: boolean; cancelled: boolean;
  durationMs: number;
  /** text: invalid UTF-8 shows as U+FFFD */
  stdout: string; stderr: string;
  /** the bytes (exact with binary: true) */
  stdoutRaw: Buffer; stderrRaw: Buffer;
  stdoutTruncated: boolean; stderrTruncated: boolean;
  /** with outputCapTotal: the bytes of both streams not in the answer (a UTF-8 character the cap cuts is left out whole); null otherwise */
  outputDropped: number | null;
  /** exit 0, not timed out, cancelled or OOM-killed */
  ok: boolean;
  raw: Record<string, unknown>;
}

export interface StreamChunk {
  stream: 'stdout' | 'stderr';
  data: string;
  dataRaw: Buffer;
}

/** changed, artifacts, ... once the command has exited (empty before) */
export interface CommandStatus extends WorkspaceChanges {
  id: string;
  status: 'running' | 'exited' | string;
  background: boolean; argv: string[];
  started: string | null; ended: string | null;
  exitCode: number | null; signal: number | null;
  timedOut: boolean; cancelled: boolean; oomKilled: boolean;
  /** bytes written so far */
  stdoutBytes: number; stderrBytes: number;
  raw: Record<string, unknown>;
}

export interface OutputChunk {
  /** above the offset asked for when the ring dropped the bytes between */
  offset: number;
  next: number;
  data: string;
  dataRaw: Buffer;
}

export interface CommandOutput {
  status: CommandStatus;
  stdout: OutputChunk;
  stderr: OutputChunk;
}

export interface FileEntry {
  path: string;
  /** file, dir, symlink, fifo, socket, char, block or other */
  type: string;
  size: number;
  /** octal text, "0644" */
  mode: string;
  mtime: number;
  target: string | null;
}

export interface TarResult {
  path: string; files: number; dirs: number; links: number; bytes: number;
}

export interface Listing extends Array<FileEntry> {
  path: string;
  truncated: boolean;
}

export interface Health {
  ok: boolean; version: string; defaultBackend: string;
  backends: Array<{ name: string; ok: boolean; reason: string | null }>;
  broker: Record<string, any>;
  capacity: Record<string, any>;
  raw: Record<string, unknown>;
}

export interface Doctor { ok: boolean; problems: string[]; health: Health | null }

export interface Grant { host: string; port: number }

export interface BrokerSession {
  id: string; tenant: string; user: string; tier: string; ceiling: string;
  effectiveTier: string; transport: string; socket: string | null; fromConfig: boolean;
  connections: number; grants: Grant[]; counters: Record<string, number>;
  raw: Record<string, unknown>;
}

export interface Ceiling {
  tier: string; tenants: Record<string, string>; source: string;
  /** connections closed by a set with closeExceeding */
  closed: number | null;
  raw: Record<string, unknown>;
}

export type RuleAction = 'allow' | 'deny' | 'prompt';

/** A request rule of sluiced (sluiced(8), Request rules). */
export interface Rule {
  name: string;
  /** null: every tenant's sessions */
  tenant: string | null;
  /** host names and *.suffix patterns, each with an optional :port */
  hosts: string[];
  /** [] : any method */
  methods: string[];
  /** path globs; [] : any path */
  paths: string[];
  action: RuleAction;
}

/** What rules.add() and rules.replace() take: name, hosts and action required. */
export interface RuleInput {
  name: string; hosts: string[] | string; action: RuleAction;
  tenant?: string | null; methods?: string[]; paths?: string[];
}

/** GET /v1/rules: the API's rules in order, the configuration's, the built-in names. */
export interface RuleList { rules: Rule[]; config: Rule[]; builtin: string[] }

/** A credential of sluiced, never its value (write-only). */
export interface Credential {
  name: string; tenant: string; hosts: string[];
  /** inject.header and inject.format ("{}" where the value goes) */
  header: string; format: string;
  methods: string[]; paths: string[];
  /** sluice-cred:<name>:<secret>: what a sandbox sends in the value's place */
  placeholder: string;
  /** when it was last set, Unix seconds */
  updated: number | null;
  raw: Record<string, unknown>;
}

export interface Event {
  /** counts up from 1 within a sluiced process; null for "connected" */
  id: number | null;
  /** prompt, prompt_resolved, denied, session, ceiling (or connected) */
  type: string;
  data: any;
}

/** A pending network prompt. */
export class Prompt {
  readonly id: string; readonly session: string; readonly tenant: string; readonly user: string;
  readonly host: string; readonly port: number; readonly method: string; readonly path: string | null;
  readonly tier: string; readonly ceiling: string; readonly created: string; readonly expires: string;
  readonly expiresInS: number; readonly waiting: number;
  /** pending, allow_once, allow_chat, deny or timeout */
  state: string;
  readonly raw: Record<string, unknown>;
  /** host:port (IPv6 in brackets) */
  readonly target: string;
  /** ConflictError when already answered or expired */
  answer(decision: Decision): Promise<Prompt>;
  allowOnce(): Promise<Prompt>;
  allowChat(): Promise<Prompt>;
  deny(): Promise<Prompt>;
}

// ------------------------------------------------------------------ executor

export interface ClientOptions {
  /** bearer token for an https address (default $SLUICE_EXEC_TOKEN) */
  token?: string | null;
  /** sluiced's control API (default $SLUICE_BROKER_ADDRESS or /run/sluice/control.sock) */
  broker?: string | null;
  brokerToken?: string | null;
  /** CA certificates (PEM) to verify https servers */
  ca?: string | Buffer | null;
  timeoutMs?: number;
  createTimeoutMs?: number;
}

export interface CreateOptions {
  tenantId: string;
  userId: string;
  /** default a random sbx-... */
  id?: string | null;
  /** default: none sent, the daemon's tier applies (off unless the administrator set another) */
  network?: Tier | null;
  profile?: string | null;
  limits?: Limits | null;
  backend?: 'ns' | 'gvisor' | null;
}

export interface CommandOptions {
  timeoutS?: number | null;
  env?: Record<string, string> | null;
  cwd?: string | null;
  stdin?: string | Buffer | null;
}

export interface ExecOptions extends CommandOptions {
  /** bytes kept of each stream */
  outputCap?: number | null;
  /** bytes kept of the whole answer, stdout and stderr together (what came first); outputDropped says what was left out */
  outputCapTotal?: number | null;
  /** exact bytes in stdoutRaw/stderrRaw */
  binary?: boolean;
}

export interface InstallOptions {
  manager?: 'pip' | 'npm';
  timeoutS?: number | null;
  /** throw CommandError when the install fails (default true) */
  check?: boolean;
}

export class SandboxClient {
  /** address: a Unix socket path (default $SLUICE_EXEC_ADDRESS or /run/sluice-execd/exec.sock) or an https:// URL */
  constructor(address?: string | null, options?: ClientOptions);
  readonly address: string;
  readonly sandboxes: Sandboxes;
  readonly broker: BrokerClient;
  health(): Promise<Health>;
  /** GET /v1/node (auditor): host, version, backends, capacity, draining, remaining (snake_case, as the daemon says). */
  node(): Promise<Record<string, any>>;
  /** PUT /v1/node (admin): drain the node (true) or end the drain. */
  setDraining(on: boolean): Promise<{ draining: boolean; remaining?: number; since?: number; removed?: number }>;
  /** GET /healthz, a load balancer's probe: ok false on its 503. */
  healthz(): Promise<{ ok: boolean; imageReady: boolean }>;
  doctor(): Promise<Doctor>;
  /** GET /v1/metrics: the Prometheus text (auditor) */
  metrics(): Promise<string>;
  /** GET /v1/events (auditor): [event, data] as they happen (sandbox, command; dropped, then the end, for a reader that fell behind) */
  events(options?: { idleTimeoutMs?: number | null }): AsyncGenerator<[string, any], void, undefined>;
}

export class Sandboxes {
  /** Never retried: a timeout cannot create two. */
  create(options: CreateOptions): Promise<Sandbox>;
  get(id: string): Promise<Sandbox>;
  list(filter?: { tenant?: string | null; user?: string | null }): Promise<Sandbox[]>;
  /** Clear an id: its archive removed, a sandbox still there destroyed without one. */
  discardArchive(id: string): Promise<{ id: string; deleted: boolean; archive: 'discarded' }>;
}

export class Sandbox {
  readonly id: string;
  /** sluiced's session of the sandbox (its prompts and grants) */
  readonly session: string;
  lastInfo: SandboxInfo;
  info(): Promise<SandboxInfo>;
  setNetwork(tier: Tier): Promise<SandboxInfo>;
  exec(cmd: Cmd, options?: ExecOptions): Promise<ExecResult>;
  /** chunks as they come, then the result */
  stream(cmd: Cmd, options?: CommandOptions & { binary?: boolean }): AsyncGenerator<StreamChunk | ExecResult, void, undefined>;
  start(cmd: Cmd, options?: CommandOptions): Promise<Command>;
  commands(): Promise<CommandStatus[]>;
  command(id: string): Promise<Command>;
  install(packages: string | string[], options?: InstallOptions): Promise<ExecResult>;
  cancel(options?: { all?: boolean }): Promise<number>;
  destroy(options?: { archive?: boolean }): Promise<void>;
  write(path: string, data: Bytes): Promise<number>;
  read(path: string, range?: { offset?: number | null; length?: number | null }): Promise<Buffer>;
  readText(path: string): Promise<string>;
  list(options?: { glob?: string; recursive?: boolean; path?: string | null }): Promise<Listing>;
  edit(path: string, old: string, nu: string): Promise<void>;
  remove(path: string): Promise<void>;
  /** a tar (bytes, or the path of a tar, tar.gz or tar.zst file) extracted under dir, all or nothing */
  putTar(data: Uint8Array | string, options?: { dir?: string }): Promise<TarResult>;
  /** dir as a tar: files, directories, symbolic links (as links) */
  getTar(options?: { dir?: string }): Promise<Buffer>;
  /** A shell on a pty in the sandbox (bash -i, or bash -c command); attached unless attach is false */
  terminal(options?: { command?: string; cols?: number; rows?: number; cwd?: string;
    env?: Record<string, string>; attach?: boolean }): Promise<Terminal>;
  /** A terminal started earlier, by its session id (not attached) */
  terminalOf(id: string): Promise<Terminal>;
  /** The URL of port inside the sandbox through the executor's port proxy (takes the executor's token) */
  portUrl(port: number, path?: string): string;
  /** An HTTP request to 127.0.0.1:port inside the sandbox: the server's answer whatever its status; sluice's own errors (bad_gateway) throw */
  fetch(port: number, options?: { path?: string; method?: string; body?: Uint8Array | string | null;
    headers?: Record<string, string>; timeoutMs?: number | null }): Promise<PortResponse>;
}

export interface TerminalInfo {
  sessionId: string;
  running: boolean;
  /** bytes of output so far: the next byte's offset */
  outputOffset: number;
  /** the oldest byte the ring keeps */
  oldestOffset: number;
  attached: boolean;
  cols: number | null;
  rows: number | null;
  exitCode: number | null;
  raw: Record<string, unknown>;
}

/** A terminal: a shell on a pty in a sandbox, over a WebSocket */
export class Terminal {
  readonly id: string;
  readonly sandboxId: string;
  lastInfo: TerminalInfo;
  /** the offset of the next output byte (from the terminal's first byte) */
  offset: number;
  /** set once the shell ended */
  exitCode: number | null;
  /** the close code when the server closed (4001: taken over) */
  closeCode: number | null;
  /** error messages the server sent ({type: "error", code, error}) */
  errors: { type: string; code: string; error: string }[];
  readonly attached: boolean;
  info(): Promise<TerminalInfo>;
  /** end the shell and all it started */
  kill(): Promise<TerminalInfo>;
  /** since: replay from that offset; takeover: close a client attached already (else ConflictError) */
  attach(options?: { since?: number | null; takeover?: boolean; timeoutMs?: number }): Promise<Terminal>;
  /** keys ('\x03' is Ctrl-C) */
  send(data: string | Uint8Array): void;
  resize(cols: number, rows: number): void;
  /** INT, TERM, KILL, HUP, QUIT, TSTP, CONT, STOP, USR1, USR2, WINCH or a number: to the foreground group */
  signal(sig?: string | number): void;
  /** the output that came within timeoutMs (empty: none) */
  read(options?: { timeoutMs?: number }): Promise<Buffer>;
  /** output up to and including pattern (SluiceTimeoutError otherwise) */
  readUntil(pattern: string | Uint8Array, options?: { timeoutMs?: number }): Promise<Buffer>;
  /** close the WebSocket; the shell runs on */
  detach(): Promise<void>;
}

/** What the server on a port inside the sandbox answered */
export class PortResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
  header(name: string): string | string[] | null;
  text(): string;
  json(): unknown;
}

export class Command {
  readonly id: string;
  readonly sandbox: Sandbox;
  /** the last status seen: running or exited */
  status: string;
  last: CommandStatus | null;
  refresh(): Promise<CommandStatus>;
  output(options?: { offset?: number | null; stdoutOffset?: number | null; stderrOffset?: number | null; binary?: boolean }): Promise<CommandOutput>;
  /** rejects with a SluiceTimeoutError (named TimeoutError) after timeoutMs */
  wait(options?: { timeoutMs?: number | null; pollMs?: number }): Promise<CommandStatus>;
  stop(): Promise<void>;
}

// ------------------------------------------------------------------ broker

export interface StreamOptions {
  lastEventId?: number | null;
  reconnect?: boolean;
  reconnects?: number | null;
  idleTimeoutMs?: number;
}

export class EventStream implements AsyncIterableIterator<Event> {
  lastEventId: number | null;
  readonly connects: number;
  next(): Promise<IteratorResult<Event>>;
  return(): Promise<IteratorResult<Event>>;
  [Symbol.asyncIterator](): EventStream;
  /** open the stream now (an approver from here on) */
  connect(): Promise<EventStream>;
  close(): void;
}

export class PromptWatch implements AsyncIterableIterator<Prompt> {
  readonly events: EventStream;
  next(): Promise<IteratorResult<Prompt>>;
  return(): Promise<IteratorResult<Prompt>>;
  [Symbol.asyncIterator](): PromptWatch;
  /** open the stream now: an approver from here on, so start what may ask after */
  connect(): Promise<PromptWatch>;
  close(): void;
}

export interface WatchOptions {
  /** the prompts already waiting first (default true) */
  pending?: boolean;
  /** one chat's prompts only */
  session?: string | null;
  lastEventId?: number | null;
  reconnects?: number | null;
  idleTimeoutMs?: number;
}

export class BrokerClient {
  constructor(address?: string | null, options?: { token?: string | null; ca?: string | Buffer | null; timeoutMs?: number });
  readonly address: string;
  readonly sessions: {
    list(): Promise<BrokerSession[]>;
    get(id: string): Promise<BrokerSession>;
    create(options: { id: string; tenant?: string; user?: string; tier?: Tier; socket?: string | null; source?: string | null; vsockCid?: number | null }): Promise<BrokerSession>;
    setTier(id: string, tier: Tier): Promise<BrokerSession>;
    delete(id: string): Promise<void>;
  };
  readonly grants: {
    list(session: string): Promise<Grant[]>;
    add(session: string, host: string, port: number): Promise<Grant>;
    remove(session: string, host: string, port: number): Promise<void>;
  };
  readonly ceilings: {
    get(): Promise<Ceiling>;
    set(options: { tier?: Tier | null; tenants?: Record<string, Tier | null> | null; closeExceeding?: boolean }): Promise<Ceiling>;
  };
  readonly prompts: {
    list(): Promise<Prompt[]>;
    get(id: string): Promise<Prompt>;
    answer(id: string, decision: Decision): Promise<Prompt>;
    watch(options?: WatchOptions): PromptWatch;
  };
  /** request rules: every role reads, the admin writes */
  readonly rules: {
    list(): Promise<RuleList>;
    get(name: string): Promise<Rule>;
    add(rule: RuleInput): Promise<Rule>;
    replace(rules: RuleInput[]): Promise<RuleList>;
    delete(name: string): Promise<void>;
  };
  /** credentials (admin, app): the value is write-only */
  readonly credentials: {
    list(): Promise<Credential[]>;
    get(name: string): Promise<Credential>;
    set(options: { name: string; tenant: string; hosts: string[] | string; value: string; header?: string;
      format?: string | null; methods?: string[] | null; paths?: string[] | null }): Promise<Credential>;
    delete(name: string): Promise<void>;
  };
  health(): Promise<Record<string, any>>;
  metrics(): Promise<string>;
  events(options?: StreamOptions): EventStream;
}

export * as webhook from './webhook.js';
