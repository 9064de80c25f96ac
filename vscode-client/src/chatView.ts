/**
 * The chat view in the sidebar (a webview view): its HTML, the messages to it
 * (state actions batched per event-loop turn, a snapshot when it loads) and from
 * it (routed to the handlers extension.ts wires up), context attachments (Send
 * Selection, Add Active File), and the links and files it opens.
 */

import { randomBytes } from 'node:crypto';
import * as path from 'node:path';

import * as vscode from 'vscode';

import { errorMessage } from './startProblems';
import type { Action } from './state';
import type { ChatState } from './stateModel';
import { makeNonce, webviewHtml } from './webview/html';
import type { Attachment, FromWebview, ToWebview } from './webview/messages';

export const VIEW_ID = 'synapse.chat';

/** What to do with each message from the webview (`ready` is the view's own). */
export type WebviewHandlers = {
  [K in Exclude<FromWebview['type'], 'ready'>]: (message: Extract<FromWebview, { type: K }>) => unknown;
};

export class ChatViewProvider implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private outbox: Action[] = [];
  private outboxScheduled = false;

  /** `state` is the authoritative chat state the view is sent a snapshot of. */
  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly state: ChatState,
    private readonly handlers: WebviewHandlers,
  ) {}

  register(): vscode.Disposable[] {
    return [
      vscode.window.registerWebviewViewProvider(VIEW_ID, this),
      vscode.commands.registerCommand('synapse.sendSelection', () => this.attach('selection', true)),
      vscode.commands.registerCommand('synapse.addActiveFile', () => this.attach('file', true)),
    ];
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
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

  /**
   * Forward an action (already folded into the state) to the webview. Actions are
   * posted in batches, one per turn of the event loop: a burst (a replayed session,
   * one stdout read full of notifications) costs the webview one message, not hundreds.
   */
  postAction(action: Action): void {
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
  }

  post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }

  async reveal(): Promise<void> {
    if (this.view) this.view.show(true);
    else await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
  }

  /** The active editor's selection (or its file) as a context chip in the composer. */
  async attach(kind: 'selection' | 'file', reveal: boolean): Promise<void> {
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

  async openLink(href: string): Promise<void> {
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

  async openFile(file: string, line?: number): Promise<void> {
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

  private async onMessage(m: FromWebview): Promise<void> {
    if (m.type === 'ready') {
      // The snapshot already contains whatever is still queued.
      this.outbox = [];
      this.post({ type: 'snapshot', state: this.state });
      return;
    }
    const handler = this.handlers[m.type] as ((message: FromWebview) => unknown) | undefined;
    await handler?.(m);
  }
}
