/**
 * Chat state: folds `synapse/sessionUpdate` notifications and command results
 * into what the chat view renders.
 *
 * Pure TypeScript: no `vscode` import, no I/O, no timers. The extension host
 * folds every action to keep the authoritative state (so nothing is lost while
 * the view is hidden), the webview folds the same actions to render, and the
 * tests fold recorded streams.
 *
 * `apply` mutates the state in place (streaming thousands of deltas must not
 * copy the transcript each time) and returns what changed, so a renderer can
 * patch only those parts. The state is plain JSON: it can be posted to a
 * webview and stored with `setState`.
 *
 * This file owns the actions and their fold (sessions list, prompts, questions,
 * server phase). The rest: stateModel.ts (the shapes), stateUpdate.ts (one
 * session update), stateTurns.ts (a turn's end), stateTools.ts (tool calls),
 * stateSelectors.ts (queries and display helpers).
 */

import type { PromptResult, SessionInfo, SessionNewResult, SessionUpdateParams } from './protocol';
import {
  emptyChange,
  ensureSession,
  initialState,
  newSession,
  type Change,
  type ChatState,
  type PermissionQuestion,
  type ServerPhase,
  type SessionEntry,
  type SessionState,
} from './stateModel';
import { questionTarget } from './stateSelectors';
import { isTerminal } from './stateTools';
import { finishTurn } from './stateTurns';
import { applyUpdate } from './stateUpdate';

export type Action =
  | { type: 'update'; params: SessionUpdateParams }
  | { type: 'sessions'; sessions: SessionInfo[] }
  | { type: 'sessionCreated'; session: SessionNewResult }
  | { type: 'loadStarted'; sessionId: string }
  | { type: 'sessionLoaded'; session: SessionNewResult }
  | { type: 'sessionDeleted'; sessionId: string }
  | { type: 'select'; sessionId: string | null }
  | { type: 'promptStarted'; sessionId: string; text: string }
  | { type: 'promptFinished'; sessionId: string; result: PromptResult }
  | { type: 'promptFailed'; sessionId: string; message: string; busy: boolean; text: string }
  | { type: 'cancelRequested'; sessionId: string }
  | { type: 'server'; phase: ServerPhase; message?: string | null }
  | { type: 'permissionAsked'; toolCallId: string; question: PermissionQuestion }
  | { type: 'permissionAnswered'; id: string };

/** Fold one action into `state` (in place); returns what changed. */
export function apply(state: ChatState, action: Action): Change {
  const change = emptyChange();
  switch (action.type) {
    case 'update':
      applyUpdate(state, action.params, change);
      break;
    case 'sessions': {
      state.sessions = action.sessions.map((s) => ({ ...s }));
      for (const info of state.sessions) {
        const live = state.byId[info.sessionId];
        if (live) {
          live.title = info.title;
          live.workspaceUri = info.workspaceUri ?? live.workspaceUri;
        }
      }
      if (state.activeSessionId && !state.sessions.some((s) => s.sessionId === state.activeSessionId)) {
        // Created here but not listed yet (the list raced the creation): keep it.
        const live = state.byId[state.activeSessionId];
        if (live) state.sessions.unshift(infoOf(live));
        else state.activeSessionId = null;
      }
      change.sessions = true;
      break;
    }
    case 'sessionCreated': {
      const { sessionId, title, workspaceUri } = action.session;
      const session = ensureSession(state, sessionId);
      session.title = title;
      session.workspaceUri = workspaceUri ?? null;
      session.loaded = true;
      upsertInfo(state, infoOf(session));
      state.activeSessionId = sessionId;
      change.sessions = true;
      markSession(change, sessionId, true);
      break;
    }
    case 'loadStarted': {
      const old = state.byId[action.sessionId];
      const fresh = newSession(action.sessionId, old?.title, old?.workspaceUri ?? null);
      // Keep the key counter moving so a renderer never reuses a key for new content.
      fresh.nextKey = old?.nextKey ?? 1;
      state.byId[action.sessionId] = fresh;
      state.activeSessionId = action.sessionId;
      change.sessions = true;
      markSession(change, action.sessionId, true);
      change.plan = true;
      change.status = true;
      break;
    }
    case 'sessionLoaded': {
      const { sessionId, title, workspaceUri } = action.session;
      const session = ensureSession(state, sessionId);
      session.title = title;
      session.workspaceUri = workspaceUri ?? session.workspaceUri;
      session.loaded = true;
      upsertInfo(state, infoOf(session));
      state.activeSessionId = sessionId;
      change.sessions = true;
      markSession(change, sessionId, false);
      change.status = true;
      break;
    }
    case 'sessionDeleted': {
      delete state.byId[action.sessionId];
      state.sessions = state.sessions.filter((s) => s.sessionId !== action.sessionId);
      if (state.activeSessionId === action.sessionId) {
        state.activeSessionId = state.sessions[0]?.sessionId ?? null;
      }
      change.sessions = true;
      change.structure = true;
      change.plan = true;
      change.status = true;
      break;
    }
    case 'select': {
      state.activeSessionId = action.sessionId;
      change.sessions = true;
      change.structure = true;
      change.plan = true;
      change.status = true;
      change.sessionId = action.sessionId;
      break;
    }
    case 'promptStarted': {
      const session = ensureSession(state, action.sessionId);
      session.running = true;
      session.cancelling = false;
      session.loaded = true;
      markSession(change, action.sessionId, false);
      change.status = true;
      break;
    }
    case 'promptFinished': {
      const session = ensureSession(state, action.sessionId);
      finishTurn(session, action.result.stopReason, action.result.usage ?? null, action.result.error ?? null, change);
      markSession(change, action.sessionId, false);
      break;
    }
    case 'promptFailed': {
      const session = ensureSession(state, action.sessionId);
      if (!action.busy) {
        session.running = false;
        session.cancelling = false;
      }
      const message = action.busy
        ? 'This chat is still running a turn; your message was not sent (it is back in the input).'
        : action.message;
      session.items.push({ kind: 'error', key: session.nextKey++, message });
      markSession(change, action.sessionId, true);
      change.status = true;
      break;
    }
    case 'cancelRequested': {
      const session = ensureSession(state, action.sessionId);
      if (session.running) session.cancelling = true;
      markSession(change, action.sessionId, false);
      change.status = true;
      break;
    }
    case 'permissionAsked': {
      const question = { ...action.question, actions: [...action.question.actions] };
      const target = questionTarget(state, action.toolCallId);
      if (!target) {
        (state.waitingQuestions ??= {})[action.toolCallId] = question;
        break;
      }
      const tool = state.byId[target.sessionId].tools[action.toolCallId];
      if (isTerminal(tool.status)) break;
      tool.question = question;
      change.items.add(tool.rootKey);
      change.sessionId = target.sessionId;
      break;
    }
    case 'permissionAnswered': {
      for (const [callId, waiting] of Object.entries(state.waitingQuestions ?? {})) {
        if (waiting.id === action.id) delete state.waitingQuestions?.[callId];
      }
      for (const session of Object.values(state.byId)) {
        for (const tool of Object.values(session.tools)) {
          if (tool.question?.id === action.id) {
            tool.question = null;
            change.items.add(tool.rootKey);
            change.sessionId = session.sessionId;
          }
        }
      }
      break;
    }
    case 'server': {
      state.server = { phase: action.phase, message: action.message ?? null };
      change.server = true;
      if (action.phase !== 'running') {
        // The server process is gone: no turn is running any more.
        for (const session of Object.values(state.byId)) {
          if (session.running || session.turnOpen) {
            const message =
              action.phase === 'starting' ? null : 'The Synapse server stopped during this turn.';
            finishTurn(session, 'error', null, message, change);
            if (session.sessionId === state.activeSessionId) markSession(change, session.sessionId, false);
          }
        }
      }
      break;
    }
  }
  return change;
}

function infoOf(session: SessionState): SessionEntry {
  return {
    sessionId: session.sessionId,
    title: session.title,
    workspaceUri: session.workspaceUri,
    busy: session.running,
  };
}

function upsertInfo(state: ChatState, info: SessionEntry): void {
  const index = state.sessions.findIndex((s) => s.sessionId === info.sessionId);
  if (index >= 0) state.sessions[index] = { ...state.sessions[index], ...info };
  else state.sessions.unshift(info);
}

function markSession(change: Change, sessionId: string, structure: boolean): void {
  change.sessionId = sessionId;
  if (structure) change.structure = true;
}
/** Fold a whole recorded stream; handy for tests and replays. */
export function foldAll(actions: Iterable<Action>, state: ChatState = initialState()): ChatState {
  for (const action of actions) apply(state, action);
  return state;
}
