/**
 * The language client of the Synapse server inside VS Code: builds it (server
 * choice from launch.ts, the API key from SecretStorage), starts and restarts it
 * through the lifecycle (lifecycle.ts), follows settings and Workspace Trust, and
 * sends `workspace/executeCommand`. Also the server commands: Show Logs, Restart
 * Server, and the API key's (apiKey.ts).
 */

import * as vscode from 'vscode';
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  RevealOutputChannelOn,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';

import { readApiKey, registerApiKey, setApiKey } from './apiKey';
import { DEFAULT_API_KEY_ENV, NoSuitablePython, TRUST_NOTIFICATION, chooseServer, describeLaunch, initializationOptions, type ServerLaunch } from './launch';
import { ServerLifecycle } from './lifecycle';
import {
  Commands,
  PROTOCOL_VERSION,
  SESSION_UPDATE_METHOD,
  protocolMismatch,
  serverSettings,
  type SandboxInfo,
  type SessionUpdateParams,
  type StatusResult,
} from './protocol';
import type { Questions } from './questions';
import { listenSaveDocuments } from './saveDocuments';
import { exitProblem, launchBase, spawnServer, waitForExit, type ProcessHandle } from './serverProcess';
import { StartError, errorMessage, problemMessage, spawnProblem, type ProblemKind } from './startProblems';
import type { ServerPhase } from './stateModel';

const RESTART_SETTINGS = ['synapse.server.command', 'synapse.pythonPath', 'synapse.apiKeyEnv'];
const CONFIG_RESTART_DEBOUNCE_MS = 300;

/** One server process and its LanguageClient. */
interface ClientHandle extends ProcessHandle {
  client: LanguageClient;
  started?: number;
}

/** What the client reports to, and asks of, the rest of the extension. */
export interface ServerClientHooks {
  setPhase(phase: ServerPhase, message: string | null): void;
  /** A `synapse/sessionUpdate` of the current server. */
  onUpdate(params: SessionUpdateParams): void;
  /** Answers the server's questions on each new client. */
  readonly questions: Questions;
  /** After a (re)start: sessions, sandbox, the chat on screen reloaded. */
  onRunning(): Promise<void>;
  /** Chats with a turn running (a settings change then asks before restarting). */
  busySessions(): number;
  /** The sandbox (or the start problem) changed: the status bar. */
  changed(): void;
}

export class ServerClient {
  private readonly lifecycle: ServerLifecycle<ClientHandle>;
  /** Why the last start failed (for the status bar text). */
  problemKind: ProblemKind | null = null;
  /** What `synapse.status` said of the sandbox (null: not known yet). */
  sandbox: SandboxInfo | null = null;
  private configRestartTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly hooks: ServerClientHooks,
  ) {
    this.lifecycle = new ServerLifecycle<ClientHandle>({
      create: () => this.createClient(),
      start: (handle) => this.startClient(handle),
      dispose: (handle) => disposeHandle(handle, this.log),
      onPhase: (phase, message, problem) => {
        this.problemKind = phase === 'running' ? null : (problem?.kind ?? this.problemKind);
        this.hooks.setPhase(phase, message);
      },
      onRunning: (handle) => this.onRunning(handle),
      notify: (event, message) => this.notify(event, message),
      log: (level, message) => this.log[level](message),
    });
  }

  register(): vscode.Disposable[] {
    return [
      vscode.commands.registerCommand('synapse.showLogs', () => this.log.show(true)),
      vscode.commands.registerCommand('synapse.restartServer', () => this.restartServer('restart requested')),
      ...registerApiKey(this.context.secrets, () => void this.offerRestart('The stored API key changed.')),
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.onTrustGranted()),
    ];
  }

  /** Not awaited by activation: the chat view shows starting / running / failed(reason). */
  start(): Promise<void> {
    return this.lifecycle.start('activation');
  }

  /** The LanguageClient of the running server, if any. */
  get client(): LanguageClient | undefined {
    return this.lifecycle.client?.client;
  }

  /** `workspace/executeCommand` with the protocol's single-object argument. */
  async execute<T>(command: string, args: Record<string, unknown> = {}): Promise<T> {
    if (this.lifecycle.phase === 'failed' || this.lifecycle.phase === 'stopped') {
      // Try again (bounded): the user may have installed the server meanwhile.
      await this.lifecycle.start('a request needs the server');
    }
    await this.lifecycle.settled();
    const client = this.client;
    if (!client || client.state !== State.Running) {
      const problem = this.lifecycle.problem;
      throw new Error(problem ? problemMessage(problem) : 'The Synapse server is not running (see "Synapse: Show Logs").');
    }
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] })) as T;
  }

  /** Always works: disposes whatever client exists (half-started too), then starts. */
  async restartServer(why: string): Promise<void> {
    this.log.info(`Restarting the server: ${why}`);
    await this.lifecycle.restart(why);
  }

  async openServerSettings(): Promise<void> {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'synapse.server.command');
  }

  /** "Set API Key" (from the chat view's button too). */
  setApiKey(): Promise<void> {
    return setApiKey(this.context.secrets);
  }

  /** The sandbox mode in force, for the status bar (after a start and a settings change). */
  async refreshSandbox(): Promise<void> {
    try {
      const s = await this.execute<StatusResult>(Commands.status);
      this.sandbox = s.sandbox ?? null;
    } catch (error) {
      this.log.warn(`synapse.status failed: ${errorMessage(error)}`);
      this.sandbox = null;
    }
    this.hooks.changed();
  }

  async dispose(): Promise<void> {
    clearTimeout(this.configRestartTimer);
    await this.lifecycle.dispose();
  }

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('synapse');
  }

  private serverSection(scope?: vscode.Uri): Record<string, unknown> {
    const cfg = vscode.workspace.getConfiguration('synapse', scope);
    const section: Record<string, unknown> = {};
    for (const key of Object.keys(cfg)) {
      const value = cfg.get(key);
      if (typeof value !== 'function') section[key] = value;
    }
    return serverSettings(section);
  }

  /** Choose the server (setting, PATH, bundled) and build its client; nothing is started yet. */
  private async createClient(): Promise<ClientHandle> {
    const cfg = this.config();
    const apiKey = await readApiKey(this.context.secrets);
    const folder = vscode.workspace.workspaceFolders?.[0];
    let launch: ServerLaunch;
    try {
      // Setting, else synapse on PATH or the server bundled in the .vsix (launch.ts).
      const chosen = await chooseServer(
        {
          command: cfg.get<string[] | string>('server.command'),
          pythonPath: cfg.get<string>('pythonPath'),
          apiKeyEnv: cfg.get<string>('apiKeyEnv') || DEFAULT_API_KEY_ENV,
        },
        {
          apiKey,
          cwd: folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined,
          extensionPath: this.context.extensionPath,
          expectedProtocol: PROTOCOL_VERSION,
        },
      );
      launch = chosen.launch;
      for (const note of chosen.notes) this.log.info(note);
    } catch (error) {
      // No suitable Python for the bundled server: the message says what to install or set.
      throw new StartError({ kind: error instanceof NoSuitablePython ? 'no-python' : 'error', detail: errorMessage(error) });
    }
    const keyEnv = cfg.get<string>('apiKeyEnv') || DEFAULT_API_KEY_ENV;
    this.log.info(`Starting ${describeLaunch(launch)}`);
    this.log.info(
      `API key: ${apiKey ? 'stored in VS Code (passed as ' + keyEnv + ')' : launch.env[keyEnv] ? 'from the environment (' + keyEnv + ')' : 'not set — use "Synapse: Set API Key"'}`,
    );

    const handle = { launch, stderr: '' } as ClientHandle;
    // We spawn the process ourselves: a spawn error, an early exit and its stderr
    // become a precise message, and a half-started server can always be killed.
    const serverOptions: ServerOptions = () => spawnServer(handle);
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.log,
      // Workspace Trust: an untrusted workspace's own MCP servers are not started.
      initializationOptions: initializationOptions(this.serverSection(), vscode.workspace.isTrusted),
      // The chat shows failures itself; don't pop the log for every error.
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          // Give the process a moment to report its exit code and stderr.
          void waitForExit(handle, 1000).then(() => {
            const problem = exitProblem(handle);
            this.lifecycle.closed(handle, problem.detail ?? 'the server process exited', problem);
          });
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      initializationFailedHandler: (error) => {
        this.log.error(`initialize failed: ${String(error)}`);
        return false;
      },
      middleware: {
        workspace: {
          // The `synapse` section also holds client-only keys (server.command,
          // pythonPath, trace): the server gets its own keys only.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) return result;
            return params.items.map((item, i) =>
              item.section === 'synapse' && result[i] && typeof result[i] === 'object'
                ? serverSettings(result[i] as Record<string, unknown>)
                : result[i],
            );
          },
        },
      },
    };

    const client = new LanguageClient('synapse', 'Synapse', serverOptions, clientOptions);
    handle.client = client;
    client.onNotification(SESSION_UPDATE_METHOD, (params: SessionUpdateParams) => {
      if (this.lifecycle.client !== handle) return;
      this.hooks.onUpdate(params);
    });
    // Permission questions (as data, in the card of the tool call they name) and the
    // server's other questions: questions.ts.
    this.hooks.questions.listen(client);
    // The agent's edits are saved before its next command reads the disk.
    listenSaveDocuments(client);
    handle.started = Date.now();
    return handle;
  }

  /** `client.start()`, its failure described from what the process did. */
  private async startClient(handle: ClientHandle): Promise<void> {
    try {
      await handle.client.start();
    } catch (error) {
      if (error instanceof StartError) throw error;
      if (handle.spawnError) throw new StartError(spawnProblem(handle.spawnError, launchBase(handle.launch)));
      await waitForExit(handle, 1000);
      if (handle.exit) throw new StartError(exitProblem(handle));
      throw new StartError({ kind: 'error', detail: errorMessage(error), ...launchBase(handle.launch) });
    }
  }

  private async onRunning(handle: ClientHandle): Promise<void> {
    const client = handle.client;
    this.log.info(`Server ready in ${Date.now() - (handle.started ?? Date.now())} ms`);
    // A server of another protocol version may misread us (or we it): say so plainly,
    // keep it running (most commands may still work) and show it in the chat view too.
    const mismatch = protocolMismatch(client.initializeResult);
    if (mismatch) {
      this.hooks.setPhase('running', mismatch);
      this.log.error(mismatch);
      void vscode.window.showErrorMessage(mismatch, 'Show Logs').then((choice) => {
        if (choice === 'Show Logs') this.log.show(true);
      });
    }
    await this.hooks.onRunning();
  }

  private notify(event: 'startFailed' | 'crashed' | 'gaveUp', message: string): void {
    if (event === 'crashed') {
      void vscode.window.showWarningMessage(message, 'Show Logs').then((choice) => {
        if (choice === 'Show Logs') this.log.show(true);
      });
      return;
    }
    void vscode.window.showErrorMessage(message, 'Open Settings', 'Restart', 'Show Logs').then((choice) => {
      if (choice === 'Restart') void this.restartServer('restart requested');
      if (choice === 'Open Settings') void this.openServerSettings();
      if (choice === 'Show Logs') this.log.show(true);
    });
  }

  private async offerRestart(why: string): Promise<void> {
    const choice = await vscode.window.showInformationMessage(`${why} Restart the Synapse server to use it?`, 'Restart');
    if (choice === 'Restart') await this.restartServer(why);
  }

  /** The user trusted the workspace: the server starts the folders' own MCP servers, and
   * the workspace values of restricted settings (permission rules) now count. */
  private onTrustGranted(): void {
    const client = this.client;
    if (client?.state !== State.Running) return; // the next start sends isTrusted itself
    this.log.info('Workspace trusted: loading the folders\' own mcp_servers.json');
    void client.sendNotification(TRUST_NOTIFICATION, { trusted: true });
    void client.sendNotification(DidChangeConfigurationNotification.type, {
      settings: { synapse: this.serverSection() },
    });
  }

  /**
   * Settings that pick the server restart it (debounced: VS Code may rewrite
   * settings.json several times, e.g. during activation, and read it as empty in
   * between); while the server is not running any `synapse.*` change retries the
   * start. Other settings go to the running server.
   */
  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration('synapse')) return;
    const phase = this.lifecycle.phase;
    const serverSettingChanged = RESTART_SETTINGS.some((key) => e.affectsConfiguration(key));
    if (serverSettingChanged || phase !== 'running') {
      if (phase === 'running' && this.hooks.busySessions() > 0) {
        // Don't kill a running turn over a settings edit: ask.
        void this.offerRestart('The Synapse server settings changed.');
        return;
      }
      clearTimeout(this.configRestartTimer);
      this.configRestartTimer = setTimeout(() => {
        this.configRestartTimer = undefined;
        void this.restartServer('the server settings changed');
      }, CONFIG_RESTART_DEBOUNCE_MS);
      return;
    }
    const client = this.client;
    if (client?.state === State.Running) {
      void client
        .sendNotification(DidChangeConfigurationNotification.type, {
          settings: { synapse: this.serverSection() },
        })
        .then(() => this.refreshSandbox());
    }
  }
}

/** Stop a client in any state (a half-started one cannot be stopped: kill its process). */
async function disposeHandle(handle: ClientHandle, log: vscode.LogOutputChannel): Promise<void> {
  const client = handle.client;
  try {
    if (client.state === State.Running) await client.stop(3000);
  } catch (error) {
    log.warn(`Stopping the server: ${errorMessage(error)}`);
  }
  try {
    await client.dispose(1000);
  } catch {
    // not running (starting or failed): nothing to shut down politely
  }
  const child = handle.child;
  if (child && child.exitCode === null && child.signalCode === null) {
    await waitForExit(handle, 1000);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await waitForExit(handle, 2000);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}
