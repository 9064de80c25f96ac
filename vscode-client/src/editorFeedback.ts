/**
 * Editor feedback after the agent's edits: once VS Code's diagnostics of a file the
 * agent changed have settled (feedback.ts), send them to the server as
 * `synapse/diagnostics`, with those the file had when the tool call started
 * (`before`), so the model is told only about new problems. The user's own changes
 * need nothing here: the server sees them in the documents VS Code syncs.
 */

import * as vscode from 'vscode';

import { Settle, editedPaths } from './feedback';
import type { DiagnosticsParams, SessionUpdateParams, WireDiagnostic } from './protocol';

/** At most this many locations of one tool call get their diagnostics kept as `before`. */
const MAX_SNAPSHOTS = 20;

interface Started {
  at: number;
  before: Map<string, WireDiagnostic[]>;
}

interface Pending {
  sessionId: string;
  uri: vscode.Uri;
  settle: Settle;
  before?: WireDiagnostic[];
  timer?: ReturnType<typeof setTimeout>;
}

export function toWire(d: vscode.Diagnostic): WireDiagnostic {
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  const wire: WireDiagnostic = {
    range: {
      start: { line: d.range.start.line, character: d.range.start.character },
      end: { line: d.range.end.line, character: d.range.end.character },
    },
    severity: (d.severity + 1) as 1 | 2 | 3 | 4,
    message: d.message,
  };
  if (d.source) wire.source = d.source;
  if (code !== undefined && code !== '') wire.code = code;
  return wire;
}

export class EditorFeedbackReporter implements vscode.Disposable {
  private readonly lastChange = new Map<string, number>();
  private readonly started = new Map<string, Started>();
  private readonly pending = new Map<string, Pending>();
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly send: (params: DiagnosticsParams) => void,
    private readonly enabled: () => boolean,
    private readonly log: vscode.LogOutputChannel,
    private readonly now: () => number = Date.now,
  ) {
    this.subscription = vscode.languages.onDidChangeDiagnostics((e) => {
      const at = this.now();
      if (this.lastChange.size > 1000) {
        // Only changes since a running tool call started matter: forget old ones.
        for (const [key, when] of this.lastChange) if (at - when > 60_000) this.lastChange.delete(key);
      }
      for (const uri of e.uris) {
        const key = uri.toString();
        this.lastChange.set(key, at);
        for (const p of this.pending.values()) {
          if (p.uri.toString() === key) {
            p.settle.changed(at);
            this.schedule(p);
          }
        }
      }
    });
  }

  /** Every `synapse/sessionUpdate` passes here (replays are ignored). */
  observe(params: SessionUpdateParams): void {
    const update = params.update;
    if (params.replay || !this.enabled()) return;
    if (update.sessionUpdate === 'tool_call') {
      const before = new Map<string, WireDiagnostic[]>();
      for (const loc of (update.locations ?? []).slice(0, MAX_SNAPSHOTS)) {
        const uri = vscode.Uri.file(loc.path);
        before.set(uri.toString(), vscode.languages.getDiagnostics(uri).map(toWire));
      }
      this.started.set(update.toolCallId, { at: this.now(), before });
      return;
    }
    if (update.sessionUpdate !== 'tool_call_update' || !update.status) return;
    const started = this.started.get(update.toolCallId);
    this.started.delete(update.toolCallId);
    const now = this.now();
    for (const path of editedPaths(update)) {
      const uri = vscode.Uri.file(path);
      const key = `${params.sessionId}\n${uri.toString()}`;
      const previous = this.pending.get(key);
      if (previous?.timer) clearTimeout(previous.timer);
      const startedAt = Math.min(started?.at ?? now, now);
      const pending: Pending = {
        sessionId: params.sessionId,
        uri,
        settle: new Settle(startedAt, now, this.lastChange.get(uri.toString()) ?? null),
        // The earliest `before` wins: two edits in a row are judged against the first.
        before: previous?.before ?? started?.before.get(uri.toString()),
      };
      this.pending.set(key, pending);
      this.schedule(pending);
    }
  }

  private schedule(p: Pending): void {
    if (p.timer) clearTimeout(p.timer);
    p.timer = setTimeout(() => this.check(p), p.settle.nextCheck(this.now()));
  }

  private check(p: Pending): void {
    const key = `${p.sessionId}\n${p.uri.toString()}`;
    if (this.pending.get(key) !== p) return;
    const diagnostics = vscode.languages.getDiagnostics(p.uri);
    const decision = p.settle.decide(this.now(), diagnostics.length > 0);
    if (decision === 'wait') {
      this.schedule(p);
      return;
    }
    this.pending.delete(key);
    if (decision === 'skip' || !this.enabled()) return;
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === p.uri.toString());
    const params: DiagnosticsParams = { sessionId: p.sessionId, uri: p.uri.toString(), diagnostics: diagnostics.map(toWire) };
    if (doc) params.version = doc.version;
    if (p.before) params.before = p.before;
    this.log.debug(`editor feedback: ${params.diagnostics.length} diagnostic(s) of ${p.uri.fsPath} sent`);
    try {
      this.send(params);
    } catch (error) {
      this.log.warn(`editor feedback: could not send the diagnostics of ${p.uri.fsPath}: ${String(error)}`);
    }
  }

  dispose(): void {
    this.subscription.dispose();
    for (const p of this.pending.values()) if (p.timer) clearTimeout(p.timer);
    this.pending.clear();
    this.started.clear();
  }
}
