/**
 * Tool-call state: a call's record (created on first mention, even before its
 * `tool_call` arrives), its live output kept to a bounded tail, its file diffs
 * counted, and which statuses are final.
 */

import { lineCounts } from './diff';
import type { DiffContent, ToolStatus } from './protocol';
import type { Change, FileDiffState, Item, SessionState, ToolCallState } from './stateModel';

/** Per tool call, the live output kept for display (the tail; the head is counted). */
export const MAX_OUTPUT_CHARS = 200_000;

const TERMINAL: ReadonlySet<ToolStatus> = new Set(['completed', 'failed', 'cancelled', 'denied']);

/** `rawOutput.category` of a command the permission rule or the user refused. */
export const PERMISSION_DENIED = 'permission_denied';

export function isTerminal(status: ToolStatus): boolean {
  return TERMINAL.has(status);
}

export function toolFor(
  session: SessionState,
  toolCallId: string,
  parentId: string | null,
  change: Change,
  items?: Item[],
  push?: (item: Item) => void,
): ToolCallState {
  const existing = session.tools[toolCallId];
  if (existing) return existing;
  const tool: ToolCallState = {
    id: toolCallId,
    started: false,
    title: '',
    kind: 'other',
    status: 'pending',
    command: '',
    restart: false,
    locations: [],
    output: [],
    outputChars: 0,
    outputDropped: 0,
    result: null,
    exitCode: null,
    isError: false,
    layer: null,
    category: null,
    edit: null,
    diffs: [],
    parentToolCallId: parentId,
    question: null,
    children: [],
    rootKey: 0,
  };
  session.tools[toolCallId] = tool;
  const item: Item = { kind: 'tool', key: session.nextKey++, toolCallId };
  const parent = parentId ? session.tools[parentId] : undefined;
  tool.rootKey = parent ? parent.rootKey : item.key;
  if (push && items) {
    push(item);
  } else {
    // Referenced as a parent before it was announced: put it in the transcript.
    session.items.push(item);
    change.structure = true;
  }
  return tool;
}

export function appendOutput(tool: ToolCallState, stream: 'stdout' | 'stderr', text: string): void {
  if (!text) return;
  const last = tool.output[tool.output.length - 1];
  if (last && last.stream === stream) last.text += text;
  else tool.output.push({ stream, text });
  tool.outputChars += text.length;
  let excess = tool.outputChars - MAX_OUTPUT_CHARS;
  while (excess > 0 && tool.output.length > 0) {
    const head = tool.output[0];
    if (head.text.length <= excess) {
      tool.output.shift();
      excess -= head.text.length;
      tool.outputChars -= head.text.length;
      tool.outputDropped += head.text.length;
    } else {
      head.text = head.text.slice(excess);
      tool.outputChars -= excess;
      tool.outputDropped += excess;
      excess = 0;
    }
  }
}

/** Full live output of a tool call as one string (stdout and stderr interleaved). */
export function outputText(tool: ToolCallState): string {
  return tool.output.map((s) => s.text).join('');
}

export function fileDiff(d: DiffContent): FileDiffState {
  const oldText = typeof d.oldText === 'string' ? d.oldText : null;
  const newText = typeof d.newText === 'string' ? d.newText : '';
  return { path: d.path, oldText, newText, ...lineCounts(oldText, newText) };
}
