/**
 * Synapse for VS Code: starts the Synapse language server over stdio and
 * shows its chat in a sidebar webview.
 *
 * Edits arrive as `workspace/applyEdit` and permission questions as
 * `window/showMessageRequest`; vscode-languageclient handles both (buffers
 * with undo; a notification with the three buttons).
 */

import { randomBytes } from 'node:crypto';
import * as path from 'node:path';

import * as vscode from 'vscode';
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  ResponseError,
  MessageType,
  RevealOutputChannelOn,
  ShowMessageRequest,
  State,
  type CancellationToken,
  type MessageActionItem,
  type ShowMessageRequestParams,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';

import {
  DEFAULT_API_KEY_ENV,
  NoSuitablePython,
  TRUST_NOTIFICATION,
  describeLaunch,
  chooseServer,
  initializationOptions,
  type ServerLaunch,
} from './launch';
import {
  ServerLifecycle,
  StartError,
  exitProblem,
  launchBase,
  problemLabel,
  problemMessage,
  spawnProblem,
  spawnServer,
  waitForExit,
  type ProblemKind,
  type ProcessHandle,
} from './lifecycle';
import {
  Commands,
  DIAGNOSTICS_NOTIFICATION,
  PROTOCOL_VERSION,
  SAVE_DOCUMENTS_REQUEST,
  type SaveDocumentsParams,
  protocolMismatch,
  SESSION_UPDATE_METHOD,
  serverSettings,
  type PromptResult,
  type SessionInfo,
  type SessionNewResult,
  type SessionUpdateParams,
  type SandboxInfo,
  type StatusResult,
  sandboxLabel,
} from './protocol';
import { apply, busySessions, initialState, questionTarget, type Action, type ChatState, type ServerPhase } from './state';
import { EditDiffs } from './editDiffs';
import { EditorFeedbackReporter } from './editorFeedback';
import { rewindCommand } from './rewind';
import { makeNonce, webviewHtml } from './webview/html';
import { promptContext, type Attachment, type FromWebview, type ToWebview } from './webview/messages';

const SECRET_KEY = 'synapse.apiKey';
const VIEW_ID = 'synapse.chat';
const RESTART_SETTINGS = ['synapse.server.command', 'synapse.pythonPath', 'synapse.apiKeyEnv'];
const CONFIG_RESTART_DEBOUNCE_MS = 300;

/** One server process and its LanguageClient. */
interface ClientHandle extends ProcessHandle {
  client: LanguageClient;
  started?: number;
}

let controller: SynapseController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new SynapseController(context);
  await controller.activate();
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}

class SynapseController implements vscode.WebviewViewProvider {
  private readonly log: vscode.LogOutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  /** What `synapse.status` said of the sandbox (null: not known yet). */
  private sandbox: SandboxInfo | null = null;
  private readonly state: ChatState = initialState();
  private readonly lifecycle: ServerLifecycle<ClientHandle>;
  /** Why the last start failed (for the status bar text). */
  private problemKind: ProblemKind | null = null;
  private view: vscode.WebviewView | undefined;
  /** Edit cards' "Open diff" and "Revert this edit". */
  private readonly editDiffs: EditDiffs;
  /** Diagnostics of the files the agent edited, once settled, to the server (editor feedback). */
  private readonly feedback: EditorFeedbackReporter;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel('Synapse', { log: true });
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = 'Synapse';
    context.subscriptions.push(this.log, this.statusItem);
    this.lifecycle = this.newLifecycle();
    this.editDiffs = new EditDiffs((sid, tid, i) => this.state.byId[sid]?.tools[tid]?.diffs?.[i] ?? null, this.log);
    this.feedback = new EditorFeedbackReporter(
      (params) => void this.client?.sendNotification(DIAGNOSTICS_NOTIFICATION, params),
      () => this.config().get<boolean | null>('editorFeedback') !== false,
      this.log,
    );
    context.subscriptions.push(this.feedback);
  }

  async activate(): Promise<void> {
    const ctx = this.context;
    ctx.subscriptions.push(
      vscode.window.registerWebviewViewProvider(VIEW_ID, this),
      this.editDiffs.register(),
      vscode.commands.registerCommand('synapse.newChat', () => this.newChat()),
      vscode.commands.registerCommand('synapse.openSession', () => this.openSessionPicker()),
      vscode.commands.registerCommand('synapse.sendSelection', () => this.attach('selection', true)),
      vscode.commands.registerCommand('synapse.addActiveFile', () => this.attach('file', true)),
      vscode.commands.registerCommand('synapse.cancel', () => this.cancel(this.state.activeSessionId)),
      vscode.commands.registerCommand('synapse.restartShell', () => this.restartShell()),
      vscode.commands.registerCommand('synapse.refreshTools', () => this.refreshTools()),
      vscode.commands.registerCommand('synapse.showLogs', () => this.log.show(true)),
      vscode.commands.registerCommand('synapse.setApiKey', () => this.setApiKey()),
      vscode.commands.registerCommand('synapse.clearApiKey', () => this.clearApiKey()),
      vscode.commands.registerCommand('synapse.restartServer', () => this.restartServer('restart requested')),
      vscode.commands.registerCommand('synapse.showStatus', () => this.showStatus()),
      vscode.commands.registerCommand('synapse.rewind', () =>
        rewindCommand({
          activeSessionId: () => this.state.activeSessionId,
          execute: (command, args) => this.execute(command, args),
          reload: (sessionId) => this.reloadSession(sessionId),
        }),
      ),
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.onTrustGranted()),
      this.context.secrets.onDidChange((e) => {
        if (e.key === SECRET_KEY) void this.offerRestart('The stored API key changed.');
      }),
    );
    this.updateStatusBar();
    this.statusItem.show();
    // Not awaited: activation (and with it the chat view) never waits on the server;
    // the view shows starting / running / failed(reason) as the lifecycle goes.
    void this.lifecycle.start('activation');
  }

  // ---- state ---------------------------------------------------------------

  private outbox: Action[] = [];
  private outboxScheduled = false;

  /**
   * Fold an action here (authoritative state) and forward it to the webview.
   * Actions are posted in batches, one per turn of the event loop: a burst
   * (a replayed session, one stdout read full of notifications) costs the
   * webview one message, not hundreds.
   */
  private dispatch(action: Action): void {
    apply(this.state, action);
    this.outbox.push(action);
    if (!this.outboxScheduled) {
      this.outboxScheduled = true;
      setImmediate(() => {
        this.outboxScheduled = false;
        const actions = this.outbox;
        this.outbox = [];
        if (actions.length === 1) this.post({ type: 'action', action: actions[0] });
        else if (actions.length > 1) this.post({ type: 'actions', actions });
      });
    }
    this.updateStatusBar();
  }

  private setPhase(phase: ServerPhase, message: string | null = null): void {
    this.dispatch({ type: 'server', phase, message });
  }

  private updateStatusBar(): void {
    const item = this.statusItem;
    const phase = this.state.server.phase;
    const busy = busySessions(this.state);
    // The chat view shows what happened, with Restart / Settings / Logs buttons.
    item.command = `${VIEW_ID}.focus`;
    item.backgroundColor = undefined;
    switch (phase) {
      case 'starting':
        item.text = '$(sync~spin) Synapse';
        item.tooltip = `Synapse: starting the language server…${this.state.server.message ? ' (' + this.state.server.message + ')' : ''}`;
        break;
      case 'restarting':
        item.text = '$(sync~spin) Synapse';
        item.tooltip = `Synapse: ${this.state.server.message ?? 'restarting'}`;
        item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
        break;
      case 'running': {
        const sandbox = sandboxLabel(this.sandbox);
        const mode = sandbox.text ? ` · ${sandbox.text}` : '';
        item.text = busy > 0 ? `$(loading~spin) Synapse (${busy})${mode}` : `$(comment-discussion) Synapse${mode}`;
        item.tooltip = busy > 0 ? `Synapse: ${busy} chat(s) running` : 'Synapse: ready';
        if (this.sandbox) item.tooltip += `\nSandbox: ${this.sandbox.description}`;
        if (sandbox.warn) item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
        if (this.state.server.message) {
          item.tooltip = `Synapse: ${this.state.server.message}`;
          item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
        }
        break;
      }
      case 'stopped':
        item.text = '$(circle-slash) Synapse';
        item.tooltip = 'Synapse: server stopped';
        break;
      case 'failed':
        item.text = `$(error) Synapse: ${problemLabel(this.problemKind)}`;
        item.tooltip = `${this.state.server.message ?? 'Synapse server failed'} — click to open the chat view`;
        item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
        break;
    }
  }

  // ---- server --------------------------------------------------------------

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

  /** The LanguageClient of the running server, if any. */
  private get client(): LanguageClient | undefined {
    return this.lifecycle.client?.client;
  }

  private newLifecycle(): ServerLifecycle<ClientHandle> {
    return new ServerLifecycle<ClientHandle>({
      create: () => this.createClient(),
      start: (handle) => this.startClient(handle),
      dispose: (handle) => disposeHandle(handle, this.log),
      onPhase: (phase, message, problem) => {
        this.problemKind = phase === 'running' ? null : (problem?.kind ?? this.problemKind);
        this.setPhase(phase, message);
      },
      onRunning: (handle) => this.onRunning(handle),
      notify: (event, message) => this.notify(event, message),
      log: (level, message) => this.log[level](message),
    });
  }

  /** Choose the server (setting, PATH, bundled) and build its client; nothing is started yet. */
  private async createClient(): Promise<ClientHandle> {
    const cfg = this.config();
    // Bounded: a secret store that does not answer must not hold the start forever.
    const apiKey = await Promise.race([
      this.context.secrets.get(SECRET_KEY),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 10_000)),
    ]);
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
      this.dispatch({ type: 'update', params });
      this.feedback.observe(params);
    });
    // Permission questions: a notification as before, and the same buttons in the tool card.
    client.onRequest(ShowMessageRequest.type, (params, token) => this.askUser(params, token));
    // The agent's edits are saved before its next command reads the disk (the server
    // never asks for a buffer that also holds the user's own unsaved edits).
    client.registerFeature({
      fillClientCapabilities(capabilities) {
        const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
        const ours = (experimental.synapse ?? {}) as Record<string, unknown>;
        capabilities.experimental = { ...experimental, synapse: { ...ours, saveDocuments: true } };
      },
      initialize() {},
      getState: () => ({ kind: 'static' }),
      clear() {},
    });
    client.onRequest(SAVE_DOCUMENTS_REQUEST, (params: SaveDocumentsParams) => saveDocuments(params));
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

  private questions = new Map<string, (answer: string | null) => void>();
  /** The chat on screen being loaded into a restarted server (a prompt waits for it). */
  private reloading: Promise<void> | null = null;
  private questionSeq = 0;

  /**
   * `window/showMessageRequest`: the server's permission question. Shown as a
   * notification and, when it is about a running tool call, in that call's card
   * ("waiting for your answer" with the same buttons); the first answer wins.
   */
  private askUser(params: ShowMessageRequestParams, token: CancellationToken): Promise<MessageActionItem | null> {
    const titles = (params.actions ?? []).map((a) => a.title);
    const id = `q${++this.questionSeq}`;
    const target = titles.length > 0 ? questionTarget(this.state, params.message) : null;
    return new Promise<MessageActionItem | null>((resolve) => {
      let done = false;
      const finish = (answer: string | null): void => {
        if (done) return;
        done = true;
        this.questions.delete(id);
        if (target) this.dispatch({ type: 'permissionAnswered', id });
        const action = answer === null ? null : (params.actions ?? []).find((a) => a.title === answer) ?? null;
        resolve(action);
      };
      this.questions.set(id, finish);
      token.onCancellationRequested(() => finish(null));
      if (target) {
        this.dispatch({
          type: 'permissionAsked',
          sessionId: target.sessionId,
          toolCallId: target.toolCallId,
          question: { id, message: params.message, actions: titles },
        });
      }
      const show =
        params.type === MessageType.Error
          ? vscode.window.showErrorMessage
          : params.type === MessageType.Warning
            ? vscode.window.showWarningMessage
            : vscode.window.showInformationMessage;
      void Promise.resolve(show(params.message, ...titles)).then(
        (choice) => {
          // Closing the notification answers nothing while the card still asks.
          if (choice !== undefined || !target) finish(choice ?? null);
        },
        () => {
          if (!target) finish(null);
        },
      );
    });
  }

  private answerQuestion(id: string, answer: string): void {
    this.questions.get(id)?.(answer);
  }

  private async onRunning(handle: ClientHandle): Promise<void> {
    const client = handle.client;
    this.log.info(`Server ready in ${Date.now() - (handle.started ?? Date.now())} ms`);
    // A server of another protocol version may misread us (or we it): say so plainly,
    // keep it running (most commands may still work) and show it in the chat view too.
    const mismatch = protocolMismatch(client.initializeResult);
    if (mismatch) {
      this.setPhase('running', mismatch);
      this.log.error(mismatch);
      void vscode.window.showErrorMessage(mismatch, 'Show Logs').then((choice) => {
        if (choice === 'Show Logs') this.log.show(true);
      });
    }
    await this.refreshSessions();
    await this.refreshSandbox();
    await this.reloadAfterRestart();
  }

  /** The sandbox mode in force, for the status bar (after a start and a settings change). */
  private async refreshSandbox(): Promise<void> {
    try {
      const s = await this.execute<StatusResult>(Commands.status);
      this.sandbox = s.sandbox ?? null;
    } catch (error) {
      this.log.warn(`synapse.status failed: ${errorMessage(error)}`);
      this.sandbox = null;
    }
    this.updateStatusBar();
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

  private async openServerSettings(): Promise<void> {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'synapse.server.command');
  }

  /**
   * A new server process knows the stored sessions but has none live: mark
   * them unloaded (opening one replays it) and replay the one on screen.
   */
  private async reloadAfterRestart(): Promise<void> {
    const live = Object.values(this.state.byId).filter((s) => s.loaded);
    if (live.length === 0) return;
    for (const session of live) session.loaded = false;
    const active = this.state.activeSessionId;
    if (active && this.state.sessions.some((s) => s.sessionId === active)) {
      const reload = this.selectSession(active);
      this.reloading = reload;
      try {
        await reload;
      } finally {
        if (this.reloading === reload) this.reloading = null;
      }
    }
  }

  /** Always works: disposes whatever client exists (half-started too), then starts. */
  private async restartServer(why: string): Promise<void> {
    this.log.info(`Restarting the server: ${why}`);
    await this.lifecycle.restart(why);
  }

  private async offerRestart(why: string): Promise<void> {
    const choice = await vscode.window.showInformationMessage(
      `${why} Restart the Synapse server to use it?`,
      'Restart',
    );
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

  private configRestartTimer: NodeJS.Timeout | undefined;

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
      if (phase === 'running' && busySessions(this.state) > 0) {
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

  /** `workspace/executeCommand` with the protocol's single-object argument. */
  private async execute<T>(command: string, args: Record<string, unknown> = {}): Promise<T> {
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

  // ---- sessions ------------------------------------------------------------

  private workspaceUri(): string | undefined {
    const active = vscode.window.activeTextEditor?.document.uri;
    const folder = (active && vscode.workspace.getWorkspaceFolder(active)) || vscode.workspace.workspaceFolders?.[0];
    return folder?.uri.toString();
  }

  private async refreshSessions(): Promise<void> {
    try {
      const result = await this.execute<{ sessions: SessionInfo[] }>(Commands.sessionList);
      this.dispatch({ type: 'sessions', sessions: result.sessions ?? [] });
    } catch (error) {
      this.log.warn(`Listing sessions: ${errorMessage(error)}`);
    }
  }

  private async newChat(): Promise<string | null> {
    await this.reveal();
    try {
      const ws = this.workspaceUri();
      const session = await this.execute<SessionNewResult>(Commands.sessionNew, ws ? { workspaceUri: ws } : {});
      this.dispatch({ type: 'sessionCreated', session });
      this.post({ type: 'focusInput' });
      return session.sessionId;
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not start a chat: ${errorMessage(error)}`);
      return null;
    }
  }

  /** Replay a session from the server (after a rewind cut its conversation). */
  private async reloadSession(sessionId: string): Promise<void> {
    this.dispatch({ type: 'loadStarted', sessionId });
    try {
      const session = await this.execute<SessionNewResult>(Commands.sessionLoad, { sessionId });
      this.dispatch({ type: 'sessionLoaded', session });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not reload the chat: ${errorMessage(error)}`);
    }
  }

  private async selectSession(sessionId: string): Promise<void> {
    const live = this.state.byId[sessionId];
    if (live?.loaded) {
      this.dispatch({ type: 'select', sessionId });
      return;
    }
    this.dispatch({ type: 'loadStarted', sessionId });
    try {
      const session = await this.execute<SessionNewResult>(Commands.sessionLoad, { sessionId });
      this.dispatch({ type: 'sessionLoaded', session });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not open the chat: ${errorMessage(error)}`);
    }
  }

  private async openSessionPicker(): Promise<void> {
    await this.refreshSessions();
    const items = this.state.sessions.map((s) => ({
      label: s.title || 'Untitled chat',
      description: s.busy ? '$(loading~spin) running' : undefined,
      detail: [s.updatedAt ?? s.createdAt, s.workspaceUri ? vscode.Uri.parse(s.workspaceUri).fsPath : '']
        .filter(Boolean)
        .join(' · '),
      sessionId: s.sessionId,
    }));
    if (items.length === 0) {
      void vscode.window.showInformationMessage('Synapse: no stored chats yet.');
      return;
    }
    const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Open a Synapse chat' });
    if (pick) {
      await this.reveal();
      await this.selectSession(pick.sessionId);
    }
  }

  private async deleteSession(sessionId: string): Promise<void> {
    const title = this.state.sessions.find((s) => s.sessionId === sessionId)?.title ?? sessionId;
    const choice = await vscode.window.showWarningMessage(`Delete the chat "${title}"?`, { modal: true }, 'Delete');
    if (choice !== 'Delete') return;
    try {
      await this.execute(Commands.sessionDelete, { sessionId });
      this.dispatch({ type: 'sessionDeleted', sessionId });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not delete the chat: ${errorMessage(error)}`);
    }
  }

  private async prompt(sessionId: string | null, text: string, attachments: Attachment[]): Promise<void> {
    const id = sessionId ?? (await this.newChat());
    if (!id) {
      this.post({ type: 'restoreInput', text });
      return;
    }
    const openFiles = vscode.window.visibleTextEditors
      .map((e) => e.document.uri)
      .filter((uri) => uri.scheme === 'file')
      .map((uri) => uri.toString());
    const context = promptContext(attachments, [...new Set(openFiles)]);
    // After a server restart the chat on screen is not live in the new server until it
    // is loaded again: wait for that reload (or do it) before prompting.
    if (this.reloading) await this.reloading;
    if (this.state.byId[id] && !this.state.byId[id].loaded) await this.selectSession(id);
    this.dispatch({ type: 'promptStarted', sessionId: id, text });
    const params = { sessionId: id, text, ...(context ? { context } : {}) };
    try {
      let result: PromptResult;
      try {
        result = await this.execute<PromptResult>(Commands.sessionPrompt, params);
      } catch (error) {
        // The server restarted under us between the check and the request: load the
        // stored chat into it and send once more.
        if (!isUnknownSession(error)) throw error;
        this.log.info(`Prompt: ${id} is not live in this server; loading it and retrying`);
        await this.execute<SessionNewResult>(Commands.sessionLoad, { sessionId: id });
        result = await this.execute<PromptResult>(Commands.sessionPrompt, params);
      }
      this.dispatch({ type: 'promptFinished', sessionId: id, result });
    } catch (error) {
      const busy = error instanceof ResponseError && (error.data as { reason?: string } | undefined)?.reason === 'session_busy';
      this.dispatch({ type: 'promptFailed', sessionId: id, message: errorMessage(error), busy, text });
      this.post({ type: 'restoreInput', text });
    }
    await this.refreshSessions();
  }

  private async cancel(sessionId: string | null): Promise<void> {
    if (!sessionId) return;
    this.dispatch({ type: 'cancelRequested', sessionId });
    try {
      await this.execute(Commands.sessionCancel, { sessionId });
    } catch (error) {
      this.log.warn(`Cancel: ${errorMessage(error)}`);
    }
  }

  private async restartShell(): Promise<void> {
    const sessionId = this.state.activeSessionId;
    const ws = this.workspaceUri();
    try {
      await this.execute(Commands.shellRestart, sessionId ? { sessionId } : ws ? { workspaceUri: ws } : {});
      void vscode.window.showInformationMessage('Synapse: shell restarted.');
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not restart the shell: ${errorMessage(error)}`);
    }
  }

  private async refreshTools(): Promise<void> {
    const ws = this.workspaceUri();
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Synapse: refreshing tools…' },
      async () => {
        try {
          const result = await this.execute<{ tools: number; errors?: string[] }>(Commands.toolsRefresh, {
            ...(ws ? { workspaceUri: ws } : {}),
            what: 'all',
          });
          const errors = result.errors ?? [];
          if (errors.length > 0) {
            for (const e of errors) this.log.warn(`tools: ${e}`);
            void vscode.window.showWarningMessage(
              `Synapse: ${result.tools} tools; ${errors.length} problem(s): ${errors[0]}`,
              'Show Logs',
            ).then((c) => c && this.log.show(true));
          } else {
            void vscode.window.showInformationMessage(`Synapse: ${result.tools} tools available.`);
          }
        } catch (error) {
          void vscode.window.showErrorMessage(`Synapse: refreshing tools failed: ${errorMessage(error)}`);
        }
      },
    );
  }

  private async showStatus(): Promise<void> {
    try {
      const s = await this.execute<StatusResult>(Commands.status);
      const sessions = s.workspaces.reduce((n, w) => n + w.sessions, 0);
      const tools = s.workspaces.reduce((n, w) => n + w.tools, 0);
      void vscode.window.showInformationMessage(
        `Synapse ${s.version} · model ${s.model} · API key ${s.apiKey ? 'set' : 'NOT set'} · ${s.workspaces.length} workspace(s), ${sessions} chat(s), ${tools} tools · sandbox ${s.sandbox.description}`,
      );
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: ${errorMessage(error)}`);
    }
  }

  // ---- API key -------------------------------------------------------------

  private async setApiKey(): Promise<void> {
    const key = await vscode.window.showInputBox({
      title: 'Synapse: API key',
      prompt: 'Stored in VS Code\'s secret storage and passed to the Synapse server\'s environment only.',
      password: true,
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? null : 'Enter a key'),
    });
    if (!key) return;
    await this.context.secrets.store(SECRET_KEY, key.trim());
    // secrets.onDidChange offers the restart.
  }

  private async clearApiKey(): Promise<void> {
    await this.context.secrets.delete(SECRET_KEY);
    void vscode.window.showInformationMessage('Synapse: the stored API key was removed.');
  }

  // ---- context attachments ------------------------------------------------

  private async attach(kind: 'selection' | 'file', reveal: boolean): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('Synapse: open a file first.');
      return;
    }
    const doc = editor.document;
    const name = path.basename(doc.uri.path) || doc.uri.toString();
    let attachment: Attachment;
    if (kind === 'selection' && !editor.selection.isEmpty) {
      const sel = editor.selection;
      attachment = {
        kind: 'selection',
        uri: doc.uri.toString(),
        label: `${name}:${sel.start.line + 1}-${sel.end.line + 1}`,
        range: {
          start: { line: sel.start.line, character: sel.start.character },
          end: { line: sel.end.line, character: sel.end.character },
        },
        text: doc.getText(sel),
      };
    } else {
      attachment = { kind: 'file', uri: doc.uri.toString(), label: name };
    }
    if (reveal) await this.reveal();
    this.post({ type: 'attach', attachment });
    this.post({ type: 'focusInput' });
  }

  // ---- webview -------------------------------------------------------------

  private async reveal(): Promise<void> {
    if (this.view) this.view.show(true);
    else await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.context.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [dist] };
    view.webview.html = webviewHtml({
      cspSource: view.webview.cspSource,
      nonce: makeNonce((n) => randomBytes(n)),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js')).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.css')).toString(),
    });
    view.webview.onDidReceiveMessage((m: FromWebview) => void this.onMessage(m));
    view.onDidDispose(() => {
      if (this.view === view) this.view = undefined;
    });
  }

  private post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }

  private async onMessage(m: FromWebview): Promise<void> {
    switch (m.type) {
      case 'ready':
        // The snapshot already contains whatever is still queued.
        this.outbox = [];
        this.post({ type: 'snapshot', state: this.state });
        break;
      case 'newSession':
        await this.newChat();
        break;
      case 'selectSession':
        await this.selectSession(m.sessionId);
        break;
      case 'deleteSession':
        await this.deleteSession(m.sessionId);
        break;
      case 'refreshSessions':
        await this.refreshSessions();
        break;
      case 'prompt':
        await this.prompt(m.sessionId, m.text, m.attachments ?? []);
        break;
      case 'cancel':
        await this.cancel(m.sessionId);
        break;
      case 'addSelection':
        await this.attach('selection', false);
        break;
      case 'addActiveFile':
        await this.attach('file', false);
        break;
      case 'openLink':
        await this.openLink(m.href);
        break;
      case 'openFile':
        await this.openFile(m.path, m.line);
        break;
      case 'showLogs':
        this.log.show(true);
        break;
      case 'restartServer':
        await this.restartServer('restart requested from the chat');
        break;
      case 'openServerSettings':
        await this.openServerSettings();
        break;
      case 'permissionAnswer':
        this.answerQuestion(m.id, m.answer);
        break;
      case 'openDiff':
        await this.editDiffs.open(m.sessionId, m.toolCallId, m.index);
        break;
      case 'revertEdit':
        await this.editDiffs.revert(m.sessionId, m.toolCallId, m.index);
        break;
      case 'setApiKey':
        await this.setApiKey();
        break;
    }
  }

  private async openLink(href: string): Promise<void> {
    if (!/^[a-z][a-z0-9+.-]*:/i.test(href)) {
      // A relative link in the agent's Markdown: a path in the workspace (maybe with #L12).
      const m = /^(.*?)(?:#L(\d+))?$/.exec(href);
      await this.openFile(decodeURIComponent(m?.[1] ?? href), m?.[2] ? Number(m[2]) : undefined);
      return;
    }
    let uri: vscode.Uri;
    try {
      uri = vscode.Uri.parse(href, true);
    } catch {
      return;
    }
    if (uri.scheme === 'http' || uri.scheme === 'https' || uri.scheme === 'mailto') {
      await vscode.env.openExternal(uri);
    } else if (uri.scheme === 'file') {
      await this.openFile(uri.fsPath);
    }
  }

  private async openFile(file: string, line?: number): Promise<void> {
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const abs = path.isAbsolute(file) || !root ? file : path.join(root, file);
    const uri = vscode.Uri.file(abs);
    try {
      const stat = await vscode.workspace.fs.stat(uri);
      if (stat.type & vscode.FileType.Directory) {
        await vscode.commands.executeCommand('revealInExplorer', uri);
        return;
      }
      const doc = await vscode.workspace.openTextDocument(uri);
      const pos = new vscode.Position(Math.max(0, (line ?? 1) - 1), 0);
      await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos), preview: true });
    } catch (error) {
      void vscode.window.showWarningMessage(`Synapse: cannot open ${file}: ${errorMessage(error)}`);
    }
  }

  async dispose(): Promise<void> {
    clearTimeout(this.configRestartTimer);
    await this.lifecycle.dispose();
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

/** The server does not know the session: it restarted since the chat was loaded. */
function isUnknownSession(error: unknown): boolean {
  return error instanceof ResponseError && error.code === -32602 && /unknown sessionId/.test(error.message);
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** `synapse/saveDocuments`: save each open document the server names; what was saved. */
async function saveDocuments(params: SaveDocumentsParams): Promise<{ saved: string[] }> {
  const saved: string[] = [];
  for (const uri of params.uris ?? []) {
    const fsPath = vscode.Uri.parse(uri).fsPath;
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === fsPath);
    if (doc === undefined) continue;
    if (!doc.isDirty || (await doc.save())) saved.push(uri);
  }
  return { saved };
}
