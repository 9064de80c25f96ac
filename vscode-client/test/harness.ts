/**
 * Test/bench harness: the real Synapse server (launched with the extension's
 * own launch code) and the real fake Anthropic server, spoken to over LSP with
 * vscode-languageserver-protocol. No mocks.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

import {
  ApplyWorkspaceEditRequest,
  ConfigurationRequest,
  createProtocolConnection,
  ExecuteCommandRequest,
  InitializedNotification,
  InitializeRequest,
  RegistrationRequest,
  ShowMessageRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCreateRequest,
  type ApplyWorkspaceEditParams,
  type InitializeResult,
  type MessageActionItem,
  type ProtocolConnection,
  type ShowMessageRequestParams,
} from 'vscode-languageserver-protocol/node';

import { resolveServer, type ServerLaunch } from '../src/launch';
import {
  REQUEST_PERMISSION_REQUEST,
  SESSION_UPDATE_METHOD,
  serverSettings,
  type RequestPermissionParams,
  type RequestPermissionResult,
  type SessionUpdateParams,
} from '../src/protocol';

export const CLIENT_DIR = process.env.SYNAPSE_CLIENT_DIR || path.resolve(__dirname, '..');
export const REPO_ROOT = path.resolve(CLIENT_DIR, '..');

/** The Python that has synapse_lsp: $SYNAPSE_PYTHON, else the repo's .venv. */
export function pythonPath(): string {
  return process.env.SYNAPSE_PYTHON || path.join(REPO_ROOT, '.venv', 'bin', 'python');
}

/** Why the real-server tests cannot run here, or null. */
export function serverUnavailable(): string | null {
  if (!fs.existsSync(path.join(REPO_ROOT, 'synapse_lsp', 'lsp', 'server.py'))) {
    return 'synapse_lsp/lsp/server.py is not in the repository';
  }
  if (!fs.existsSync(path.join(REPO_ROOT, 'synapse_lsp', 'fakeapi.py'))) {
    return 'synapse_lsp/fakeapi.py (the fake Anthropic server) is not in the repository yet';
  }
  const py = pythonPath();
  if (!fs.existsSync(py)) return `no Python at ${py} (set SYNAPSE_PYTHON or run ./dev setup)`;
  return null;
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

async function waitForFile(file: string, timeoutMs: number, proc: ChildProcess, stderr: () => string): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, 'utf8').trim();
      if (text) return text;
    }
    if (proc.exitCode !== null) throw new Error(`fake API exited with ${proc.exitCode}: ${stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fake API did not write ${file} within ${timeoutMs} ms: ${stderr()}`);
}

export interface FakeApi {
  baseUrl: string;
  requests(): Promise<unknown[]>;
  close(): Promise<void>;
}

/** `python -m synapse_lsp.fakeapi --script <json> --port-file <f>` (docs/agent.md). */
export async function startFakeApi(script: unknown, dir: string): Promise<FakeApi> {
  const scriptFile = path.join(dir, 'script.json');
  const portFile = path.join(dir, 'port');
  fs.writeFileSync(scriptFile, JSON.stringify(script, null, 2));
  const proc = spawn(pythonPath(), ['-m', 'synapse_lsp.fakeapi', '--script', scriptFile, '--port-file', portFile], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const port = await waitForFile(portFile, 15_000, proc, () => err);
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    baseUrl,
    async requests() {
      const res = await fetch(`${baseUrl}/_requests`);
      return (await res.json()) as unknown[];
    },
    async close() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
    },
  };
}

export interface ClientOptions {
  workspace: string;
  env?: Record<string, string>;
  settings?: Record<string, unknown>;
  /** Answer to permission questions (default: the first action). */
  onShowMessageRequest?: (params: ShowMessageRequestParams) => MessageActionItem | null;
  /**
   * With it, the client offers `synapse/requestPermission` (as the extension does) and
   * answers the permission questions, sent as data, with it.
   */
  onRequestPermission?: (params: RequestPermissionParams) => RequestPermissionResult;
  /** Answer to workspace/applyEdit (default: not applied, so the server writes nothing). */
  onApplyEdit?: (params: ApplyWorkspaceEditParams) => { applied: boolean; failureReason?: string };
  /** Whether to advertise workspace.applyEdit (default false: the server writes to disk). */
  applyEdit?: boolean;
  /** Another server command line (benchmarks: a bare pygls server as the baseline). */
  command?: string[];
}

export interface LspClient {
  connection: ProtocolConnection;
  launch: ServerLaunch;
  process: ChildProcess;
  initializeResult: InitializeResult;
  /** Milliseconds from spawn to the initialize result. */
  initializeMs: number;
  stderr(): string;
  logs: string[];
  messageRequests: ShowMessageRequestParams[];
  permissionRequests: RequestPermissionParams[];
  applyEdits: ApplyWorkspaceEditParams[];
  onUpdate(listener: (params: SessionUpdateParams) => void): void;
  execute<T>(command: string, args?: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/**
 * Start the server the way the extension does (src/launch.ts: configured
 * command = `<python> -m synapse_lsp`) and run initialize/initialized.
 */
export async function startServer(options: ClientOptions): Promise<LspClient> {
  const launch = resolveServer(
    { command: options.command ?? [pythonPath(), '-m', 'synapse_lsp'] },
    { baseEnv: { ...process.env, ...options.env }, cwd: options.workspace },
  );
  const started = performance.now();
  const proc = spawn(launch.command, launch.args, { cwd: launch.cwd, env: launch.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const connection = createProtocolConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  const logs: string[] = [];
  const messageRequests: ShowMessageRequestParams[] = [];
  const permissionRequests: RequestPermissionParams[] = [];
  const applyEdits: ApplyWorkspaceEditParams[] = [];
  const listeners: ((p: SessionUpdateParams) => void)[] = [];
  const settings = serverSettings(options.settings ?? {});

  connection.onNotification(SESSION_UPDATE_METHOD, (params: SessionUpdateParams) => {
    for (const l of listeners) l(params);
  });
  connection.onNotification('window/logMessage', (p: { message: string }) => logs.push(p.message));
  connection.onNotification('window/showMessage', (p: { message: string }) => logs.push(`[showMessage] ${p.message}`));
  connection.onNotification('$/progress', () => undefined);
  connection.onRequest(ConfigurationRequest.type, (params) => params.items.map((i) => (i.section === 'synapse' ? settings : null)));
  connection.onRequest(WorkDoneProgressCreateRequest.type, () => null);
  connection.onRequest(RegistrationRequest.type, () => null);
  connection.onRequest(ShowMessageRequest.type, (params) => {
    messageRequests.push(params);
    return options.onShowMessageRequest ? options.onShowMessageRequest(params) : (params.actions?.[0] ?? null);
  });
  const answerPermission = options.onRequestPermission;
  if (answerPermission) {
    connection.onRequest(REQUEST_PERMISSION_REQUEST, (params: RequestPermissionParams) => {
      permissionRequests.push(params);
      return answerPermission(params);
    });
  }
  connection.onRequest(ApplyWorkspaceEditRequest.type, (params) => {
    applyEdits.push(params);
    return options.onApplyEdit ? options.onApplyEdit(params) : { applied: false, failureReason: 'test client' };
  });
  connection.listen();

  const uri = pathToFileURL(options.workspace).toString();
  const exited = new Promise<never>((_, reject) =>
    proc.once('exit', (code) => reject(new Error(`server exited with ${code} during initialize: ${err}`))),
  );
  exited.catch(() => undefined);
  const initializeResult = await Promise.race([
    connection.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      rootUri: uri,
      workspaceFolders: [{ uri, name: path.basename(options.workspace) }],
      capabilities: {
        workspace: {
          applyEdit: options.applyEdit ?? false,
          workspaceEdit: { documentChanges: true, resourceOperations: ['create'] },
          configuration: true,
          workspaceFolders: true,
        },
        window: { workDoneProgress: true, showMessage: { messageActionItem: {} } },
        ...(answerPermission ? { experimental: { synapse: { requestPermission: true } } } : {}),
      },
      initializationOptions: settings,
    }),
    exited,
  ]);
  const initializeMs = performance.now() - started;
  await connection.sendNotification(InitializedNotification.type, {});

  return {
    connection,
    launch,
    process: proc,
    initializeResult,
    initializeMs,
    stderr: () => err,
    logs,
    messageRequests,
    permissionRequests,
    applyEdits,
    onUpdate: (l) => listeners.push(l),
    async execute<T>(command: string, args: Record<string, unknown> = {}): Promise<T> {
      return (await connection.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] })) as T;
    },
    async close() {
      const exit = new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
      try {
        await Promise.race([connection.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 5000))]);
        await connection.sendNotification('exit');
      } catch {
        // already gone
      }
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(timer);
      connection.dispose();
    },
  };
}
