/**
 * Read-only queries on the chat state (the active session, how many are busy, the
 * tool call a question is about) and how the chat shows paths and diff counts.
 */

import type { ChatState, SessionState } from './stateModel';

export function activeSession(state: ChatState): SessionState | null {
  return state.activeSessionId ? (state.byId[state.activeSessionId] ?? null) : null;
}

export function busySessions(state: ChatState): number {
  return Object.values(state.byId).filter((s) => s.running).length;
}

/**
 * The tool call a permission question is about, found by the id the question names
 * (`RequestPermissionParams.toolCallId`); null when no session has it (yet).
 */
export function questionTarget(state: ChatState, toolCallId: string | null): { sessionId: string; toolCallId: string } | null {
  if (toolCallId === null) return null;
  for (const session of Object.values(state.byId)) {
    if (session.tools[toolCallId]) return { sessionId: session.sessionId, toolCallId };
  }
  return null;
}

/** A diff's counts as the chat shows them: "+3 −1" (a side that is 0 left out, "+0" when nothing). */
export function countsText(added: number, removed: number): string {
  const parts: string[] = [];
  if (added > 0 || removed === 0) parts.push(`+${added}`);
  if (removed > 0) parts.push(`\u2212${removed}`);
  return parts.join(' ');
}

/**
 * A path as the chat shows it: normalised (no `.`/`..` segments) and relative to
 * the workspace when inside it (`src/a.py`), else absolute (`/home/me/outside.txt`).
 */
export function displayPath(file: string, workspaceUri: string | null): string {
  const normal = (p: string): string => {
    const absolute = p.startsWith('/');
    const out: string[] = [];
    for (const part of p.split('/')) {
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
        else if (!absolute) out.push('..');
      } else out.push(part);
    }
    return (absolute ? '/' : '') + out.join('/');
  };
  let root: string | null = null;
  if (workspaceUri?.startsWith('file://')) {
    try {
      root = normal(decodeURIComponent(new URL(workspaceUri).pathname));
    } catch {
      root = null;
    }
  }
  const isAbs = file.startsWith('/');
  const abs = normal(isAbs || !root ? file : `${root}/${file}`);
  if (root && root !== '/' && (abs === root || abs.startsWith(root + '/'))) return abs === root ? '.' : abs.slice(root.length + 1);
  return abs;
}
