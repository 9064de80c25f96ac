/**
 * The chat sessions: list, new, open (picker), reload, delete, prompt, cancel,
 * rewind — plus Restart Shell, Refresh Tools and Show Status — each a
 * `synapse.session.*` (or other) command on the server, folded into the chat state.
 */

import * as vscode from 'vscode';
import { ResponseError } from 'vscode-languageclient/node';

import { Commands, type PromptResult, type SessionInfo, type SessionNewResult, type StatusResult } from './protocol';
import { rewindCommand } from './rewind';
import { errorMessage } from './startProblems';
import type { Action } from './state';
import type { ChatState } from './stateModel';
import { promptContext, type Attachment, type ToWebview } from './webview/messages';

/** What the session commands need from the rest of the extension. */
export interface SessionHost {
  readonly state: ChatState;
  readonly log: vscode.LogOutputChannel;
  dispatch(action: Action): void;
  /** `workspace/executeCommand` on the server (started if need be). */
  execute<T>(command: string, args?: Record<string, unknown>): Promise<T>;
  post(message: ToWebview): void;
  /** Show the chat view. */
  reveal(): Promise<void>;
}

export class SessionCommands {
  /** The chat on screen being loaded into a restarted server (a prompt waits for it). */
  private reloading: Promise<void> | null = null;

  constructor(private readonly host: SessionHost) {}

  private get state(): ChatState {
    return this.host.state;
  }

  register(): vscode.Disposable[] {
    return [
      vscode.commands.registerCommand('synapse.newChat', () => this.newChat()),
      vscode.commands.registerCommand('synapse.openSession', () => this.openSessionPicker()),
      vscode.commands.registerCommand('synapse.cancel', () => this.cancel(this.state.activeSessionId)),
      vscode.commands.registerCommand('synapse.restartShell', () => this.restartShell()),
      vscode.commands.registerCommand('synapse.refreshTools', () => this.refreshTools()),
      vscode.commands.registerCommand('synapse.showStatus', () => this.showStatus()),
      vscode.commands.registerCommand('synapse.rewind', () =>
        rewindCommand({
          activeSessionId: () => this.state.activeSessionId,
          execute: (command, args) => this.host.execute(command, args),
          reload: (sessionId) => this.reloadSession(sessionId),
        }),
      ),
    ];
  }

  async refreshSessions(): Promise<void> {
    try {
      const result = await this.host.execute<{ sessions: SessionInfo[] }>(Commands.sessionList);
      this.host.dispatch({ type: 'sessions', sessions: result.sessions ?? [] });
    } catch (error) {
      this.host.log.warn(`Listing sessions: ${errorMessage(error)}`);
    }
  }

  async newChat(): Promise<string | null> {
    await this.host.reveal();
    try {
      const ws = workspaceUri();
      const session = await this.host.execute<SessionNewResult>(Commands.sessionNew, ws ? { workspaceUri: ws } : {});
      this.host.dispatch({ type: 'sessionCreated', session });
      this.host.post({ type: 'focusInput' });
      return session.sessionId;
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not start a chat: ${errorMessage(error)}`);
      return null;
    }
  }

  /** Replay a session from the server (after a rewind cut its conversation). */
  private async reloadSession(sessionId: string): Promise<void> {
    this.host.dispatch({ type: 'loadStarted', sessionId });
    try {
      const session = await this.host.execute<SessionNewResult>(Commands.sessionLoad, { sessionId });
      this.host.dispatch({ type: 'sessionLoaded', session });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not reload the chat: ${errorMessage(error)}`);
    }
  }

  async selectSession(sessionId: string): Promise<void> {
    const live = this.state.byId[sessionId];
    if (live?.loaded) {
      this.host.dispatch({ type: 'select', sessionId });
      return;
    }
    this.host.dispatch({ type: 'loadStarted', sessionId });
    try {
      const session = await this.host.execute<SessionNewResult>(Commands.sessionLoad, { sessionId });
      this.host.dispatch({ type: 'sessionLoaded', session });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not open the chat: ${errorMessage(error)}`);
    }
  }

  /**
   * A new server process knows the stored sessions but has none live: mark
   * them unloaded (opening one replays it) and replay the one on screen.
   */
  async reloadAfterRestart(): Promise<void> {
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
      await this.host.reveal();
      await this.selectSession(pick.sessionId);
    }
  }

  async deleteSession(sessionId: string): Promise<void> {
    const title = this.state.sessions.find((s) => s.sessionId === sessionId)?.title ?? sessionId;
    const choice = await vscode.window.showWarningMessage(`Delete the chat "${title}"?`, { modal: true }, 'Delete');
    if (choice !== 'Delete') return;
    try {
      await this.host.execute(Commands.sessionDelete, { sessionId });
      this.host.dispatch({ type: 'sessionDeleted', sessionId });
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not delete the chat: ${errorMessage(error)}`);
    }
  }

  async prompt(sessionId: string | null, text: string, attachments: Attachment[]): Promise<void> {
    const id = sessionId ?? (await this.newChat());
    if (!id) {
      this.host.post({ type: 'restoreInput', text });
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
    this.host.dispatch({ type: 'promptStarted', sessionId: id, text });
    const params = { sessionId: id, text, ...(context ? { context } : {}) };
    try {
      let result: PromptResult;
      try {
        result = await this.host.execute<PromptResult>(Commands.sessionPrompt, params);
      } catch (error) {
        // The server restarted under us between the check and the request: load the
        // stored chat into it and send once more.
        if (!isUnknownSession(error)) throw error;
        this.host.log.info(`Prompt: ${id} is not live in this server; loading it and retrying`);
        await this.host.execute<SessionNewResult>(Commands.sessionLoad, { sessionId: id });
        result = await this.host.execute<PromptResult>(Commands.sessionPrompt, params);
      }
      this.host.dispatch({ type: 'promptFinished', sessionId: id, result });
    } catch (error) {
      const busy = error instanceof ResponseError && (error.data as { reason?: string } | undefined)?.reason === 'session_busy';
      this.host.dispatch({ type: 'promptFailed', sessionId: id, message: errorMessage(error), busy, text });
      this.host.post({ type: 'restoreInput', text });
    }
    await this.refreshSessions();
  }

  async cancel(sessionId: string | null): Promise<void> {
    if (!sessionId) return;
    this.host.dispatch({ type: 'cancelRequested', sessionId });
    try {
      await this.host.execute(Commands.sessionCancel, { sessionId });
    } catch (error) {
      this.host.log.warn(`Cancel: ${errorMessage(error)}`);
    }
  }

  private async restartShell(): Promise<void> {
    const sessionId = this.state.activeSessionId;
    const ws = workspaceUri();
    try {
      await this.host.execute(Commands.shellRestart, sessionId ? { sessionId } : ws ? { workspaceUri: ws } : {});
      void vscode.window.showInformationMessage('Synapse: shell restarted.');
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: could not restart the shell: ${errorMessage(error)}`);
    }
  }

  private async refreshTools(): Promise<void> {
    const ws = workspaceUri();
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Synapse: refreshing tools…' },
      async () => {
        try {
          const result = await this.host.execute<{ tools: number; errors?: string[] }>(Commands.toolsRefresh, {
            ...(ws ? { workspaceUri: ws } : {}),
            what: 'all',
          });
          const errors = result.errors ?? [];
          if (errors.length > 0) {
            for (const e of errors) this.host.log.warn(`tools: ${e}`);
            void vscode.window.showWarningMessage(
              `Synapse: ${result.tools} tools; ${errors.length} problem(s): ${errors[0]}`,
              'Show Logs',
            ).then((c) => c && this.host.log.show(true));
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
      const s = await this.host.execute<StatusResult>(Commands.status);
      const sessions = s.workspaces.reduce((n, w) => n + w.sessions, 0);
      const tools = s.workspaces.reduce((n, w) => n + w.tools, 0);
      void vscode.window.showInformationMessage(
        `Synapse ${s.version} · model ${s.model} · API key ${s.apiKey ? 'set' : 'NOT set'} · ${s.workspaces.length} workspace(s), ${sessions} chat(s), ${tools} tools · sandbox ${s.sandbox.description}`,
      );
    } catch (error) {
      void vscode.window.showErrorMessage(`Synapse: ${errorMessage(error)}`);
    }
  }
}

/** The workspace folder of the active editor, else the first one. */
function workspaceUri(): string | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  const folder = (active && vscode.workspace.getWorkspaceFolder(active)) || vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.toString();
}

/** The server does not know the session: it restarted since the chat was loaded. */
function isUnknownSession(error: unknown): boolean {
  return error instanceof ResponseError && error.code === -32602 && /unknown sessionId/.test(error.message);
}
