/**
 * A turn's opening and end: running / cancelling flags, usage totals, tool calls
 * left open, and the turn's summary item with the files its tool calls changed.
 */

import { lineCounts } from './diff';
import type { StopReason, ToolStatus, Usage } from './protocol';
import type { Change, ChangedFile, Item, SessionState, ToolCallState } from './stateModel';
import { isTerminal } from './stateTools';

function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheCreationInputTokens: (a.cacheCreationInputTokens ?? 0) + (b.cacheCreationInputTokens ?? 0),
    cacheReadInputTokens: (a.cacheReadInputTokens ?? 0) + (b.cacheReadInputTokens ?? 0),
  };
}

export function openTurn(session: SessionState, replay: boolean, change: Change): void {
  session.turnOpen = true;
  session.turnUsage = null;
  if (!replay) {
    session.running = true;
    session.cancelling = false;
  }
  change.status = true;
}

export function finishTurn(
  session: SessionState,
  stopReason: StopReason,
  usage: Usage | null,
  error: string | null,
  change: Change,
): void {
  const wasOpen = session.turnOpen || session.running;
  session.running = false;
  session.cancelling = false;
  change.status = true;
  if (!wasOpen) {
    // The notification and the prompt result both end the turn: fold once, but
    // let the second one fill in what the first lacked.
    const last = session.items[session.items.length - 1];
    if (last && last.kind === 'turn') {
      if (!last.usage && usage) last.usage = { ...usage };
      if (!last.error && error) last.error = error;
      change.items.add(last.key);
    }
    return;
  }
  session.turnOpen = false;
  session.lastStopReason = stopReason;
  const finalUsage = usage ?? session.turnUsage;
  if (finalUsage) session.totalUsage = addUsage(session.totalUsage, finalUsage);
  session.turnUsage = finalUsage ? { ...finalUsage } : null;
  // Tool calls the turn left open did not finish.
  const leftover: ToolStatus = stopReason === 'error' ? 'failed' : 'cancelled';
  for (const tool of Object.values(session.tools)) {
    if (!isTerminal(tool.status)) {
      tool.status = leftover;
      tool.question = null;
      change.items.add(tool.rootKey);
    }
  }
  const changes = turnChanges(session);
  session.items.push({
    kind: 'turn',
    key: session.nextKey++,
    stopReason,
    usage: finalUsage ? { ...finalUsage } : null,
    error,
    ...(changes.length > 0 ? { changes } : {}),
  });
  change.structure = true;
}


/**
 * The files the current turn's tool calls (sub-agents' included) changed: the
 * tool items since the last turn end, merged per file from the first text before
 * to the last text after, in the order first changed. A file changed and changed
 * back is left out.
 */
function turnChanges(session: SessionState): ChangedFile[] {
  const tools: ToolCallState[] = [];
  const collect = (items: Item[]): void => {
    for (const item of items) {
      if (item.kind !== 'tool') continue;
      const tool = session.tools[item.toolCallId];
      if (!tool) continue;
      tools.push(tool);
      collect(tool.children);
    }
  };
  let start = session.items.length;
  while (start > 0 && session.items[start - 1].kind !== 'turn') start--;
  collect(session.items.slice(start));
  const merged = new Map<string, { oldText: string | null; newText: string }>();
  for (const tool of tools) {
    for (const d of tool.diffs ?? []) {
      const seen = merged.get(d.path);
      if (seen) seen.newText = d.newText;
      else merged.set(d.path, { oldText: d.oldText, newText: d.newText });
    }
  }
  const out: ChangedFile[] = [];
  for (const [path, { oldText, newText }] of merged) {
    if (oldText === newText) continue;
    out.push({ path, created: oldText === null, ...lineCounts(oldText, newText) });
  }
  return out;
}
