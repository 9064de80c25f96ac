/**
 * Synapse for VS Code: starts the Synapse language server over stdio and
 * shows its chat in a sidebar webview.
 *
 * Edits arrive as `workspace/applyEdit` (vscode-languageclient applies them: buffers
 * with undo) and permission questions as `synapse/requestPermission`, data naming
 * the tool call by id (a notification and the same buttons in that call's card).
 *
 * This file wires the parts together around the one authoritative chat state:
 * - serverClient.ts — the language client: start, restart, settings, trust, execute;
 * - sessionCommands.ts — the chat sessions and their commands;
 * - questions.ts — the server's questions (permission, as data, and the others);
 * - chatView.ts — the webview view and its messages; statusBar.ts — the status bar;
 * - editDiffs.ts, editorFeedback.ts, rewind.ts — edit cards, editor feedback, rewind.
 */

import * as vscode from 'vscode';

import { ChatViewProvider, type WebviewHandlers } from './chatView';
import { EditDiffs } from './editDiffs';
import { EditorFeedbackReporter } from './editorFeedback';
import { DIAGNOSTICS_NOTIFICATION } from './protocol';
import { Questions } from './questions';
import { ServerClient } from './serverClient';
import { SessionCommands } from './sessionCommands';
import { apply, type Action } from './state';
import { initialState, type ChatState } from './stateModel';
import { busySessions } from './stateSelectors';
import { updateStatusBar } from './statusBar';

let controller: SynapseController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new SynapseController(context);
  await controller.activate();
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}

class SynapseController {
  private readonly log: vscode.LogOutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  /** The authoritative chat state: every action is folded here, then sent to the view. */
  private readonly state: ChatState = initialState();
  private readonly questions: Questions;
  private readonly view: ChatViewProvider;
  private readonly sessions: SessionCommands;
  private readonly server: ServerClient;
  /** Edit cards' "Open diff" and "Revert this edit". */
  private readonly editDiffs: EditDiffs;
  /** Diagnostics of the files the agent edited, once settled, to the server (editor feedback). */
  private readonly feedback: EditorFeedbackReporter;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel('Synapse', { log: true });
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = 'Synapse';
    context.subscriptions.push(this.log, this.statusItem);
    this.questions = new Questions((action) => this.dispatch(action));
    this.view = new ChatViewProvider(context.extensionUri, this.state, this.webviewHandlers());
    this.sessions = new SessionCommands({
      state: this.state,
      log: this.log,
      dispatch: (action) => this.dispatch(action),
      execute: <T>(command: string, args?: Record<string, unknown>) => this.server.execute<T>(command, args),
      post: (message) => this.view.post(message),
      reveal: () => this.view.reveal(),
    });
    this.server = new ServerClient(context, this.log, {
      setPhase: (phase, message) => this.dispatch({ type: 'server', phase, message }),
      onUpdate: (params) => {
        this.dispatch({ type: 'update', params });
        this.feedback.observe(params);
      },
      questions: this.questions,
      onRunning: async () => {
        await this.sessions.refreshSessions();
        await this.server.refreshSandbox();
        await this.sessions.reloadAfterRestart();
      },
      busySessions: () => busySessions(this.state),
      changed: () => this.updateStatusBar(),
    });
    this.editDiffs = new EditDiffs((sid, tid, i) => this.state.byId[sid]?.tools[tid]?.diffs?.[i] ?? null, this.log);
    this.feedback = new EditorFeedbackReporter(
      (params) => void this.server.client?.sendNotification(DIAGNOSTICS_NOTIFICATION, params),
      () => vscode.workspace.getConfiguration('synapse').get<boolean | null>('editorFeedback') !== false,
      this.log,
    );
    context.subscriptions.push(this.feedback);
  }

  async activate(): Promise<void> {
    this.context.subscriptions.push(
      ...this.view.register(),
      this.editDiffs.register(),
      ...this.sessions.register(),
      ...this.server.register(),
    );
    this.updateStatusBar();
    this.statusItem.show();
    // Not awaited: activation (and with it the chat view) never waits on the server;
    // the view shows starting / running / failed(reason) as the lifecycle goes.
    void this.server.start();
  }

  async dispose(): Promise<void> {
    await this.server.dispose();
  }

  /** Fold an action here (authoritative state) and forward it to the webview (batched). */
  private dispatch(action: Action): void {
    apply(this.state, action);
    this.view.postAction(action);
    this.updateStatusBar();
  }

  private updateStatusBar(): void {
    updateStatusBar(this.statusItem, this.state, this.server.sandbox, this.server.problemKind);
  }

  /** Messages from the chat webview, each to the part that handles it. */
  private webviewHandlers(): WebviewHandlers {
    return {
      newSession: () => this.sessions.newChat(),
      selectSession: (m) => this.sessions.selectSession(m.sessionId),
      deleteSession: (m) => this.sessions.deleteSession(m.sessionId),
      refreshSessions: () => this.sessions.refreshSessions(),
      prompt: (m) => this.sessions.prompt(m.sessionId, m.text, m.attachments ?? []),
      cancel: (m) => this.sessions.cancel(m.sessionId),
      addSelection: () => this.view.attach('selection', false),
      addActiveFile: () => this.view.attach('file', false),
      openLink: (m) => this.view.openLink(m.href),
      openFile: (m) => this.view.openFile(m.path, m.line),
      showLogs: () => this.log.show(true),
      restartServer: () => this.server.restartServer('restart requested from the chat'),
      openServerSettings: () => this.server.openServerSettings(),
      permissionAnswer: (m) => this.questions.answer(m.id, m.answer),
      openDiff: (m) => this.editDiffs.open(m.sessionId, m.toolCallId, m.index),
      revertEdit: (m) => this.editDiffs.revert(m.sessionId, m.toolCallId, m.index),
      setApiKey: () => this.server.setApiKey(),
    };
  }
}
