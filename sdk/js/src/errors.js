// The errors of the sluice SDK: one class per API code.
//
// Every answer of sluice-execd(8) and of sluiced(8)'s control API that is
// not a success carries {"error": {"code", "message", ...}}; errorFrom()
// turns it into the class of its code.

export class SluiceError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number|null, code?: string|null, details?: object}} [o]
   */
  constructor(message, { status = null, code = null, details = {} } = {}) {
    super(status == null ? message : `${status} ${code}: ${message}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.apiMessage = message;
    this.details = details || {};
  }

  // An InvalidArgumentError is a TypeError by its prototype chain (as
  // the SDK threw before) and a SluiceError by this: `instanceof
  // SluiceError` holds for everything the SDK throws.
  static [Symbol.hasInstance](x) {
    return Function.prototype[Symbol.hasInstance].call(this, x)
      || (this === SluiceError && x instanceof InvalidArgumentError);
  }
}

/** An argument the SDK refuses before it calls anything (status null,
 * code "invalid_argument"): a sandbox id that is not one, an empty
 * command, an http:// address.  A TypeError (what the SDK threw before)
 * and, through SluiceError's instanceof, a SluiceError. */
export class InvalidArgumentError extends TypeError {
  constructor(message) {
    super(message);
    this.name = 'InvalidArgumentError';
    this.status = null;
    this.code = 'invalid_argument';
    this.apiMessage = message;
    this.details = {};
  }
}

/** An object the SDK cannot use for the call (code "invalid_state"): a
 * Prompt made by hand, not read through a client, cannot be answered. */
export class InvalidStateError extends SluiceError {
  constructor(message) { super(message, { code: 'invalid_state' }); }
}

/** Command.wait({ timeoutMs }) ran out (code "timeout"; name
 * "TimeoutError" as before); the command goes on. */
export class SluiceTimeoutError extends SluiceError {
  constructor(message) {
    super(message, { code: 'timeout' });
    this.name = 'TimeoutError';
  }
}

/** The daemon could not be reached, or the connection broke before an
 * answer came (no status, code "connection_failed"). */
export class SluiceConnectionError extends SluiceError {}

/** 400 bad_request; field and max name a limit above the maximum. */
export class BadRequestError extends SluiceError {
  get field() { return typeof this.details.field === 'string' ? this.details.field : null; }
  get max() { return Number.isInteger(this.details.max) ? this.details.max : null; }
}
/** 401: TCP without a valid bearer token. */
export class UnauthorizedError extends SluiceError {}
/** 403 forbidden: the caller's role (or its token's tenant) may not. */
export class ForbiddenError extends SluiceError {}
/** 403 network_not_permitted: sluiced refused the network a call needs
 * (install in a sandbox whose effective tier is off): tier is the
 * sandbox's own, ceiling its tenant's, effectiveTier the lower (null
 * where the answer did not say). */
export class NetworkNotPermittedError extends SluiceError {
  get tier() { return typeof this.details.tier === 'string' ? this.details.tier : null; }
  get ceiling() { return typeof this.details.ceiling === 'string' ? this.details.ceiling : null; }
  get effectiveTier() { return typeof this.details.effective_tier === 'string' ? this.details.effective_tier : null; }
}
/** 404: no such sandbox, command, file, session, grant or prompt. */
export class NotFoundError extends SluiceError {}
/** 404 on a sandbox call because the sandbox is gone. */
export class SandboxNotFoundError extends NotFoundError {}
/** 409 exists or conflict. */
export class ConflictError extends SluiceError {}
/** 413: a body or file above the daemon's limit. */
export class TooLargeError extends SluiceError {}
/** 429 quota_exceeded: scope hit its limit with inUse. */
export class QuotaExceededError extends SluiceError {
  get scope() { return typeof this.details.scope === 'string' ? this.details.scope : null; }
  get limit() { return Number.isInteger(this.details.limit) ? this.details.limit : null; }
  get inUse() { return Number.isInteger(this.details.in_use) ? this.details.in_use : null; }
}
/** 429 busy: the sandbox runs its one foreground command. */
export class BusyError extends SluiceError {}
/** 503 backend_unavailable. */
export class BackendUnavailableError extends SluiceError {}
/** 503 broker_unavailable (executor), or unavailable from sluiced. */
export class BrokerUnavailableError extends SluiceError {}
/** A command the SDK ran for you (install) failed; result is its ExecResult. */
export class CommandError extends SluiceError {
  constructor(message, result) {
    super(message, { code: 'command_failed' });
    this.result = result;
  }
}

const BY_CODE = {
  bad_request: BadRequestError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  network_not_permitted: NetworkNotPermittedError,
  not_found: NotFoundError,
  exists: ConflictError,
  conflict: ConflictError,
  too_large: TooLargeError,
  payload_too_large: TooLargeError,
  quota_exceeded: QuotaExceededError,
  busy: BusyError,
  backend_unavailable: BackendUnavailableError,
  broker_unavailable: BrokerUnavailableError,
};
const BY_STATUS = {
  400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError,
  404: NotFoundError, 409: ConflictError, 413: TooLargeError,
};
const STATUS_CODE = {
  400: 'bad_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found',
  409: 'conflict', 413: 'too_large', 503: 'unavailable',
};

/**
 * The error of an answer with this status and body.
 * @param {number} status
 * @param {Buffer} body
 * @param {{broker?: boolean, sandbox?: boolean}} [o]
 */
export function errorFrom(status, body, { broker = false, sandbox = false } = {}) {
  let err = {};
  try {
    const doc = body && body.length ? JSON.parse(body.toString('utf8')) : null;
    if (doc && typeof doc.error === 'object' && doc.error) err = doc.error;
  } catch { /* not JSON: the status decides */ }
  let code = typeof err.code === 'string' ? err.code : null;
  let msg = typeof err.message === 'string' ? err.message : null;
  if (msg == null) {
    const text = body ? body.toString('utf8').trim() : '';
    msg = text ? text.slice(0, 300) : `HTTP ${status}`;
  }
  let Cls = (code && BY_CODE[code]) || null;
  if (!Cls) {
    if (status === 503) Cls = broker ? BrokerUnavailableError : BackendUnavailableError;
    else Cls = BY_STATUS[status] || SluiceError;
  }
  if (Cls === NotFoundError && sandbox && !broker && msg.startsWith('no sandbox ')) {
    Cls = SandboxNotFoundError;
  }
  if (code == null) code = STATUS_CODE[status] || `http_${status}`;
  return new Cls(msg, { status, code, details: err });
}
