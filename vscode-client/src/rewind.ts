/**
 * "Synapse: Rewind Files to Before a Turn…": the active chat's checkpoints in a quick
 * pick (turn, prompt, the files it changed), then `synapse.session.rewind`. The server
 * asks about files changed since the turn (window/showMessageRequest) and puts open
 * buffers back through applyEdit; the report is shown and, when the conversation was
 * cut, the chat is replayed from the server.
 */
import * as vscode from 'vscode';
import {
  Commands,
  type ChangedFile,
  type CheckpointInfo,
  type SessionCheckpointsResult as CheckpointsResult,
  type SessionRewindResult as RewindResult,
} from './protocol';

// The shapes are the protocol's own (generated from the server's classes).
export type { ChangedFile, CheckpointInfo, CheckpointsResult, RewindResult };

export interface RewindHost {
  activeSessionId(): string | null;
  execute<T>(command: string, args: Record<string, unknown>): Promise<T>;
  /** Replay the session from the server (its conversation changed). */
  reload(sessionId: string): Promise<void>;
}

const MARK: Record<ChangedFile['status'], string> = { added: '+', modified: '~', deleted: '−' };

/** The quick pick's rows, newest turn first. */
export function checkpointItems(result: CheckpointsResult): (vscode.QuickPickItem & { turn: number })[] {
  return [...result.checkpoints].reverse().map((cp) => {
    const files = cp.changed.map((f) => `${MARK[f.status]}${f.path}`);
    const extra = cp.ignoredChanged.length ? ` · ignored: ${cp.ignoredChanged.join(', ')}` : '';
    return {
      turn: cp.turn,
      label: `Turn ${cp.turn}: ${cp.prompt || '(no prompt)'}`,
      description: cp.finished ? `${cp.changed.length} file(s) changed` : 'running',
      detail: (files.join(' ') || 'no files changed') + extra,
    };
  });
}

/** A short summary line of a rewind report for a notification. */
export function rewindSummary(turn: number, report: RewindResult): string {
  const parts: string[] = [];
  const restored = report.restored.length + report.overwritten.length;
  if (restored) parts.push(`${restored} restored`);
  if (report.deleted.length) parts.push(`${report.deleted.length} removed`);
  if (report.skipped.length) parts.push(`kept as you changed them: ${report.skipped.join(', ')}`);
  if (report.notRestorable.length) parts.push(`not restorable: ${report.notRestorable.join(', ')}`);
  if (report.repositoryChanged) parts.push('git index/HEAD changes not undone');
  const what = parts.length ? parts.join('; ') : 'no file needed restoring';
  return `Synapse: files rewound to before turn ${turn} (${what})${report.truncated ? '; the chat now ends there' : ''}.`;
}

export async function rewindCommand(host: RewindHost): Promise<void> {
  const sessionId = host.activeSessionId();
  if (!sessionId) {
    void vscode.window.showInformationMessage('Synapse: open a chat first; its turns can be rewound.');
    return;
  }
  let listed: CheckpointsResult;
  try {
    listed = await host.execute<CheckpointsResult>(Commands.sessionCheckpoints, { sessionId });
  } catch (error) {
    void vscode.window.showErrorMessage(`Synapse: could not list checkpoints: ${String(error)}`);
    return;
  }
  if (listed.checkpoints.length === 0) {
    const why = listed.disabled ? `checkpoints are off: ${listed.disabled}` : 'no checkpoints yet';
    void vscode.window.showInformationMessage(`Synapse: ${why}.`);
    return;
  }
  const pick = await vscode.window.showQuickPick(checkpointItems(listed), {
    placeHolder: 'Put the files back as they were before this turn (and end the chat there)',
  });
  if (!pick) return;
  try {
    const report = await host.execute<RewindResult>(Commands.sessionRewind, {
      sessionId,
      turn: pick.turn,
      onConflict: 'ask',
    });
    void vscode.window.showInformationMessage(rewindSummary(pick.turn, report));
    if (report.truncated) await host.reload(sessionId);
  } catch (error) {
    void vscode.window.showErrorMessage(`Synapse: rewind failed: ${String(error)}`);
  }
}
