/**
 * Editor feedback after the agent's edits, the pure part (no `vscode` import): which
 * files an update says were changed, and when a file's diagnostics count as settled.
 * editorFeedback.ts watches VS Code's diagnostics with it and sends
 * `synapse/diagnostics` (docs/protocol.md, "Editor feedback").
 */

import type { SessionUpdate } from './protocol';

/** Diagnostics are settled after this long without a change… */
export const SETTLE_QUIET_MS = 500;
/** …or, at the latest, this long after the edit landed. */
export const SETTLE_MAX_MS = 5_000;

/** The files a tool call's final update says it changed: its `diff` blocks, and an applied `rawOutput.edit`. */
export function editedPaths(update: SessionUpdate): string[] {
  if (update.sessionUpdate !== 'tool_call_update' || !update.status) return [];
  const paths: string[] = [];
  for (const block of update.content ?? []) {
    if (block.type === 'diff' && !paths.includes(block.path)) paths.push(block.path);
  }
  const edit = update.rawOutput?.edit;
  if (edit?.applied && !paths.includes(edit.path)) paths.push(edit.path);
  return paths;
}

export type SettleDecision = 'wait' | 'send' | 'skip';

/**
 * One file's settle rule. Diagnostics changes that happened since the tool call
 * started count (a language server may answer before the call's result arrives).
 * Settled once `SETTLE_QUIET_MS` passed since the last change; without any change,
 * at `SETTLE_MAX_MS` after the edit landed: sent if the file has diagnostics at all,
 * skipped otherwise (no language feature for it, or nothing to say).
 */
export class Settle {
  private lastChange: number | null = null;

  constructor(
    private readonly startedAt: number,
    private readonly landedAt: number,
    lastChangeBefore: number | null = null,
  ) {
    if (lastChangeBefore !== null) this.changed(lastChangeBefore);
  }

  changed(at: number): void {
    if (at >= this.startedAt && (this.lastChange === null || at > this.lastChange)) this.lastChange = at;
  }

  decide(now: number, hasDiagnostics: boolean): SettleDecision {
    if (this.lastChange !== null && now - this.lastChange >= SETTLE_QUIET_MS) return 'send';
    if (now - this.landedAt >= SETTLE_MAX_MS) return this.lastChange !== null || hasDiagnostics ? 'send' : 'skip';
    return 'wait';
  }

  /** Milliseconds until `decide` may answer otherwise (never less than 10). */
  nextCheck(now: number): number {
    const cap = this.landedAt + SETTLE_MAX_MS - now;
    const quiet = this.lastChange === null ? cap : this.lastChange + SETTLE_QUIET_MS - now;
    return Math.max(10, Math.min(cap, quiet));
  }
}
