/**
 * An edit card's "Open diff" and "Revert this edit".
 *
 * "Open diff" shows VS Code's diff editor: on the left a read-only virtual
 * document (scheme `synapse-diff`) holding the text from before the edit, on the
 * right the file itself, so the open buffer as it is now (unsaved changes
 * included). "Revert this edit" puts the old text back into the buffer with a
 * WorkspaceEdit (undoable, not saved) when the edited region still holds the
 * edit's new text, and otherwise says why it did not (`planRevert`).
 */

import * as path from 'node:path';

import * as vscode from 'vscode';

import { planRevert, revertRefusal } from './diff';
import type { FileDiffState } from './stateModel';

export const DIFF_SCHEME = 'synapse-diff';

/** Finds the diff `index` of a tool call in the extension host's state. */
export type DiffLookup = (sessionId: string, toolCallId: string, index: number) => FileDiffState | null;

export class EditDiffs implements vscode.TextDocumentContentProvider {
  /** Virtual document key → the text from before the edit. */
  private readonly before = new Map<string, string>();

  constructor(
    private readonly lookup: DiffLookup,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  register(): vscode.Disposable {
    return vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.before.get(uri.query) ?? '';
  }

  /** The diff editor: before the edit (read-only) vs the file now. */
  async open(sessionId: string, toolCallId: string, index: number): Promise<void> {
    const d = this.find(sessionId, toolCallId, index);
    if (!d) return;
    const file = vscode.Uri.file(d.path);
    const name = path.basename(d.path);
    if (!(await exists(file))) {
      void vscode.window.showWarningMessage(`Synapse: ${name} no longer exists; no diff to show.`);
      return;
    }
    const key = `${sessionId}/${toolCallId}/${index}`;
    this.before.set(key, d.oldText ?? '');
    // The file's own path, so the left side gets the same language mode.
    const left = vscode.Uri.from({ scheme: DIFF_SCHEME, path: file.path, query: key });
    const title = `${name}: before Synapse's edit ↔ now`;
    await vscode.commands.executeCommand('vscode.diff', left, file, title, { preview: true });
  }

  /** Put the text from before the edit back in the buffer, or say why not. */
  async revert(sessionId: string, toolCallId: string, index: number): Promise<void> {
    const d = this.find(sessionId, toolCallId, index);
    if (!d) return;
    const file = vscode.Uri.file(d.path);
    const name = path.basename(d.path);
    if (!(await exists(file))) {
      void vscode.window.showWarningMessage(
        d.oldText === null ? `Synapse: ${name} no longer exists; nothing to revert.` : `Synapse: ${name} no longer exists; not reverted.`,
      );
      return;
    }
    let doc: vscode.TextDocument;
    try {
      doc = await vscode.workspace.openTextDocument(file);
    } catch (error) {
      void vscode.window.showWarningMessage(`Synapse: cannot open ${name} (${errorMessage(error)}); not reverted.`);
      return;
    }
    const plan = planRevert(doc.getText(), d.oldText, d.newText);
    if (!plan.ok) {
      this.log.info(`Revert of ${d.path} (${toolCallId}) refused: ${plan.reason}`);
      void vscode.window.showWarningMessage(`Synapse: ${revertRefusal(name, plan.reason)}.`);
      return;
    }
    if (d.oldText === null) {
      // The edit created the file: reverting it is deleting it, which no undo brings back.
      const choice = await vscode.window.showWarningMessage(
        `Delete ${name}? Synapse created it in this edit; the file is removed from disk.`,
        { modal: true },
        'Delete',
      );
      if (choice !== 'Delete') return;
      const edit = new vscode.WorkspaceEdit();
      edit.deleteFile(file, { ignoreIfNotExists: true });
      if (await vscode.workspace.applyEdit(edit)) void vscode.window.showInformationMessage(`Synapse: deleted ${name}.`);
      else void vscode.window.showWarningMessage(`Synapse: VS Code refused to delete ${name}.`);
      return;
    }
    const range = new vscode.Range(doc.positionAt(plan.start), doc.positionAt(plan.end));
    const edit = new vscode.WorkspaceEdit();
    edit.replace(file, range, plan.text);
    if (!(await vscode.workspace.applyEdit(edit))) {
      void vscode.window.showWarningMessage(`Synapse: VS Code refused the edit to ${name}; not reverted.`);
      return;
    }
    const at = doc.positionAt(plan.start);
    await vscode.window.showTextDocument(doc, { preview: true, selection: new vscode.Range(at, at) });
    void vscode.window.showInformationMessage(`Synapse: reverted the edit of ${name} (unsaved; Undo brings the edit back).`);
  }

  private find(sessionId: string, toolCallId: string, index: number): FileDiffState | null {
    const d = this.lookup(sessionId, toolCallId, index);
    if (!d) void vscode.window.showWarningMessage('Synapse: this edit is not known any more (the chat was reloaded); nothing to do.');
    return d;
  }
}

async function exists(uri: vscode.Uri): Promise<boolean> {
  if (vscode.workspace.textDocuments.some((doc) => doc.uri.toString() === uri.toString())) return true;
  try {
    await vscode.workspace.fs.stat(uri);
    return true;
  } catch {
    return false;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
