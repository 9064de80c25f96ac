/**
 * The fold of one `synapse/sessionUpdate` notification into its session: message
 * chunks into transcript items, tool calls into their cards (a sub-agent's updates
 * into its parent's card), the plan, usage, notices and the turn's end.
 */

import type { DiffContent, PlanEntry, SessionUpdate, SessionUpdateParams, ToolCall } from './protocol';
import { ensureSession, type ChatState, type Change, type Item, type PlanState } from './stateModel';
import { PERMISSION_DENIED, appendOutput, fileDiff, isTerminal, toolFor } from './stateTools';
import { finishTurn, openTurn } from './stateTurns';


export function applyUpdate(state: ChatState, params: SessionUpdateParams, change: Change): void {
  const session = ensureSession(state, params.sessionId);
  const update = params.update;
  const replay = params.replay === true;
  change.sessionId = params.sessionId;
  if (replay) session.loaded = true;
  // Every kind but turn_finished may carry it (a sub-agent's update).
  const parentId = (update as { parentToolCallId?: string | null }).parentToolCallId ?? null;
  const parent = parentId ? toolFor(session, parentId, null, change) : null;
  const items = parent ? parent.children : session.items;
  const markItem = (item: Item): void => {
    if (parent) change.items.add(parent.rootKey);
    else change.items.add(item.key);
  };
  const push = (item: Item): void => {
    items.push(item);
    if (parent) change.items.add(parent.rootKey);
    else change.structure = true;
  };

  switch (update.sessionUpdate) {
    case 'user_message_chunk': {
      const text = update.content?.text ?? '';
      const last = items[items.length - 1];
      if (last && last.kind === 'user' && !parent && session.turnOpen) {
        last.text += text;
        markItem(last);
      } else {
        if (!parent) openTurn(session, replay, change);
        push({ kind: 'user', key: session.nextKey++, text, replay });
      }
      break;
    }
    case 'agent_message_chunk':
    case 'agent_thought_chunk': {
      const kind = update.sessionUpdate === 'agent_message_chunk' ? 'agent' : 'thought';
      const text = update.content?.text ?? '';
      if (!parent && !session.turnOpen && !replay) openTurn(session, replay, change);
      const last = items[items.length - 1];
      if (last && last.kind === kind) {
        last.text += text;
        markItem(last);
      } else {
        push({ kind, key: session.nextKey++, text });
      }
      break;
    }
    case 'tool_call': {
      const tool = toolFor(session, update.toolCallId, parentId, change, items, push);
      tool.started = true;
      if (update.title !== undefined) tool.title = update.title;
      if (update.kind !== undefined) tool.kind = update.kind;
      if (update.rawInput?.command !== undefined) tool.command = String(update.rawInput.command);
      if (update.rawInput?.restart !== undefined) tool.restart = Boolean(update.rawInput.restart);
      const waiting = state.waitingQuestions?.[update.toolCallId];
      if (waiting) {
        // Asked before this update arrived: the card shows it now.
        delete state.waitingQuestions?.[update.toolCallId];
        if (!isTerminal(tool.status)) tool.question = waiting;
      }
      if (update.locations) tool.locations = update.locations;
      if (!tool.title) tool.title = tool.command || 'Tool call';
      // A late `tool_call` (after its end) must not bring a finished card back to life.
      if (!isTerminal(tool.status)) tool.status = update.status ?? 'in_progress';
      change.items.add(tool.rootKey);
      break;
    }
    case 'tool_call_update': {
      const tool = toolFor(session, update.toolCallId, parentId, change, items, push);
      // ACP's update may also retitle a call; Synapse's server sends none of these.
      const acp = update as Partial<Pick<ToolCall, 'title' | 'kind' | 'locations'>>;
      if (acp.title !== undefined) tool.title = acp.title;
      if (acp.kind !== undefined) tool.kind = acp.kind;
      if (acp.locations) tool.locations = acp.locations;
      if (update.output) appendOutput(tool, update.output.stream, update.output.text ?? '');
      if (update.content) {
        tool.result = update.content
          .map((c) => (c?.type === 'content' && c.content?.type === 'text' ? c.content.text : ''))
          .join('');
        const diffs = update.content.filter((c): c is DiffContent => c?.type === 'diff' && typeof c.path === 'string');
        if (diffs.length > 0) tool.diffs = diffs.map(fileDiff);
      }
      if (update.rawOutput) {
        const raw = update.rawOutput;
        if (raw.exitCode !== undefined) tool.exitCode = raw.exitCode;
        if (raw.isError !== undefined) tool.isError = Boolean(raw.isError);
        if (raw.layer !== undefined) tool.layer = raw.layer ?? null;
        if (raw.category !== undefined) tool.category = raw.category ?? null;
        if (raw.edit) tool.edit = { path: String(raw.edit.path), applied: Boolean(raw.edit.applied) };
      }
      if (update.status !== undefined && !(isTerminal(tool.status) && !isTerminal(update.status))) {
        tool.status = update.status;
      }
      if (isTerminal(tool.status)) tool.question = null;
      // A server older than the `denied` status says `failed` with the category: same thing.
      if (tool.status === 'failed' && tool.category === PERMISSION_DENIED) tool.status = 'denied';
      change.items.add(tool.rootKey);
      break;
    }
    case 'plan': {
      const plan: PlanState = {
        entries: (update.entries ?? []).map((e) => ({ ...e })),
        explanation: update.explanation ?? null,
      };
      if (parent) {
        // A sub-agent's plan is its own business; show it inside its card.
        push({
          kind: 'notice',
          key: session.nextKey++,
          level: 'info',
          message: 'Plan: ' + plan.entries.map((e) => `${checkMark(e.status)} ${e.content}`).join('; '),
        });
      } else {
        session.plan = plan;
        change.plan = true;
      }
      break;
    }
    case 'usage_update': {
      if (!parent) {
        session.turnUsage = { ...update.usage };
        change.status = true;
      }
      break;
    }
    case 'notice': {
      push({
        kind: 'notice',
        key: session.nextKey++,
        level: update.level ?? 'info',
        message: update.message ?? '',
      });
      break;
    }
    case 'turn_finished': {
      if (parent) break;
      finishTurn(session, update.stopReason, update.usage ?? null, update.error ?? null, change);
      break;
    }
    default: {
      // Unknown update kinds (a newer server) are ignored, never fatal.
      const unknown: { sessionUpdate?: unknown } = update as SessionUpdate;
      void unknown;
    }
  }
}

function checkMark(status: PlanEntry['status']): string {
  return status === 'completed' ? '[x]' : status === 'in_progress' ? '[~]' : '[ ]';
}
