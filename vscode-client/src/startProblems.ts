/**
 * Why a server start failed, and how the extension says it: the problem kinds,
 * classifying a process that exited or could not be spawned, the message with
 * the fix (sidebar, status bar, notification, log) and the status bar's label.
 * Pure TypeScript (no `vscode` import).
 */

/** Why a start failed, as the extension shows it. */
export type ProblemKind = 'not-found' | 'exited' | 'timeout' | 'no-python' | 'error';

export interface StartProblem {
  kind: ProblemKind;
  /** The command line that was tried (for the message), if any. */
  command?: string;
  /** Where the command came from (synapse.server.command, PATH, …). */
  source?: string;
  /** errno code (ENOENT), exit code, signal, stderr tail or the error text. */
  detail?: string;
}

/** An Error that carries a StartProblem (thrown by the extension's hooks). */
export class StartError extends Error {
  constructor(readonly problem: StartProblem) {
    super(problemMessage(problem));
  }
}

export const FIX = 'Install the Synapse server or set synapse.server.command (a settings change restarts it; so does "Synapse: Restart Server")';

/** The message for the sidebar, the status bar tooltip, the notification and the log. */
export function problemMessage(p: StartProblem): string {
  const cmd = p.command ? `"${p.command}"` : 'the server command';
  const from = p.source ? ` (${p.source})` : '';
  const detail = p.detail ? `: ${p.detail}` : '';
  switch (p.kind) {
    case 'not-found':
      return `Synapse server not found — ${cmd}${from} could not be run${detail}. ${FIX}.`;
    case 'exited':
      return `Synapse server exited during start-up — ${cmd}${from}${detail}. ${FIX}; "Synapse: Show Logs" has its output.`;
    case 'timeout':
      return `Synapse server did not answer — ${cmd}${from}${detail}. "Synapse: Show Logs" has its output; "Synapse: Restart Server" tries again.`;
    case 'no-python':
      return p.detail ?? `Synapse server not found — no suitable Python. ${FIX}.`;
    case 'error':
      return `Synapse server could not start — ${cmd}${from}${detail}. ${FIX}.`;
  }
}

/** An error's message (anything thrown), for notifications and the log. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** A few words for the status bar text. */
export function problemLabel(kind: ProblemKind | null): string {
  switch (kind) {
    case 'not-found':
    case 'no-python':
      return 'server not found';
    case 'exited':
      return 'server exited';
    case 'timeout':
      return 'server not answering';
    default:
      return 'server failed';
  }
}

/**
 * Classify a process that ended before `initialize` answered: a missing module or
 * program (exit 127, "No module named synapse_lsp", "not found") is "not found".
 */
export function exitedProblem(
  code: number | null,
  signal: string | null,
  stderrTail: string,
  base: { command?: string; source?: string },
): StartProblem {
  const lastLine =
    stderrTail
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .pop() ?? '';
  const how = signal ? `killed by ${signal}` : `exit code ${code}`;
  const detail = lastLine ? `${how}: ${lastLine.slice(0, 300)}` : how;
  const missing = code === 127 || /No module named '?synapse_lsp|command not found|not found|No such file or directory|can't open file/i.test(stderrTail);
  return { kind: missing ? 'not-found' : 'exited', detail, ...base };
}

/** Classify a spawn error (ENOENT, EACCES, …). */
export function spawnProblem(error: NodeJS.ErrnoException, base: { command?: string; source?: string }): StartProblem {
  const code = error.code ?? '';
  if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR' || code === 'EISDIR') {
    const why = code === 'ENOENT' ? 'no such file (ENOENT)' : code === 'EACCES' ? 'not executable (EACCES)' : code;
    return { kind: 'not-found', detail: why, ...base };
  }
  return { kind: 'error', detail: error.message, ...base };
}
