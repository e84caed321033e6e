// sluice: sandboxes, commands, files and network approvals for apps.
//
//   import { SandboxClient } from 'sluice';
//   const client = new SandboxClient();          // /run/sluice-execd/exec.sock
//   const sb = await client.sandboxes.create({ tenantId: 'acme', userId: 'alice' });
//   try {
//     console.log((await sb.exec(['python3', '-c', 'print(6 * 7)'])).stdout);  // 42
//   } finally {
//     await sb.destroy();
//   }
export { VERSION } from './http.js';
export { SandboxClient, Sandboxes, Sandbox, Command, DEFAULT_EXEC_ADDRESS } from './client.js';
export { BrokerClient, EventStream, PromptWatch, DEFAULT_BROKER_ADDRESS } from './broker.js';
export { Prompt } from './models.js';
export { Terminal, PortResponse } from './pty.js';
export {
  SluiceError, SluiceConnectionError, BadRequestError, UnauthorizedError, ForbiddenError,
  NetworkNotPermittedError, NotFoundError, SandboxNotFoundError, ConflictError, TooLargeError,
  QuotaExceededError, BusyError, BackendUnavailableError, BrokerUnavailableError, CommandError,
  InvalidArgumentError, InvalidStateError, SluiceTimeoutError, errorFrom,
} from './errors.js';
export * as webhook from './webhook.js';
