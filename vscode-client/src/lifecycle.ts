/**
 * The language server's lifecycle: starting → running | failed(reason), a crash
 * → restarting (back-off) → starting, stopped. Pure TypeScript (no `vscode`
 * import) so the unit tests drive it with fake clients.
 *
 * Rules that keep the extension from ever hanging on a server:
 * - every start is bounded (`startTimeoutMs`) and so is every dispose
 *   (`disposeTimeoutMs`); a client whose connection closes while it starts fails
 *   the start at once;
 * - a new start (Restart, a settings change, a retry) supersedes the one in
 *   flight: the old client is disposed and its late results are ignored;
 * - a failed start shows why and how to fix it, and is retried a couple of
 *   times (re-reading the configuration: VS Code may rewrite settings.json
 *   while we activate) before it stays failed until Restart or a settings change.
 */

import { spawn, type ChildProcess } from 'node:child_process';

import { Backoff, type ServerLaunch } from './launch';

export type LifecyclePhase = 'stopped' | 'starting' | 'running' | 'restarting' | 'failed';

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

export interface LifecycleHooks<C> {
  /** Choose the server and build its client, not started yet (may throw StartError). */
  create(): Promise<C>;
  /** Start the client: resolves once `initialize` answered. */
  start(client: C): Promise<void>;
  /** Stop and dispose a client in any state (half-started too); kill its process. */
  dispose(client: C): Promise<void>;
  /** The phase changed (state, status bar, webview). */
  onPhase(phase: LifecyclePhase, message: string | null, problem: StartProblem | null): void;
  /** The client is running (refresh sessions …). */
  onRunning?(client: C): Promise<void> | void;
  /** Something for the user to see once (a failed start, a crash, giving up). */
  notify?(event: 'startFailed' | 'crashed' | 'gaveUp', message: string): void;
  log?(level: 'info' | 'warn' | 'error', message: string): void;
}

export interface LifecycleOptions {
  startTimeoutMs?: number;
  disposeTimeoutMs?: number;
  /** Delays of the automatic retries after a failed start. */
  startRetryDelaysMs?: readonly number[];
  backoff?: Backoff;
}

export const START_TIMEOUT_MS = 45_000;
export const DISPOSE_TIMEOUT_MS = 5_000;
export const START_RETRY_DELAYS_MS: readonly number[] = [2_000, 5_000];

class Superseded extends Error {}

function toProblem(error: unknown): StartProblem {
  if (error instanceof StartError) return error.problem;
  return { kind: 'error', detail: error instanceof Error ? error.message : String(error) };
}

export class ServerLifecycle<C> {
  private gen = 0;
  private current: C | undefined;
  private running: C | undefined;
  private phaseValue: LifecyclePhase = 'stopped';
  private problemValue: StartProblem | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private attempt: Promise<void> = Promise.resolve();
  private abortStart: ((error: Error) => void) | undefined;
  private startFailures = 0;
  private disposed = false;
  private readonly backoff: Backoff;
  private readonly startTimeoutMs: number;
  private readonly disposeTimeoutMs: number;
  private readonly retryDelays: readonly number[];

  constructor(
    private readonly hooks: LifecycleHooks<C>,
    options: LifecycleOptions = {},
  ) {
    this.backoff = options.backoff ?? new Backoff();
    this.startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
    this.disposeTimeoutMs = options.disposeTimeoutMs ?? DISPOSE_TIMEOUT_MS;
    this.retryDelays = options.startRetryDelaysMs ?? START_RETRY_DELAYS_MS;
  }

  get phase(): LifecyclePhase {
    return this.phaseValue;
  }

  /** Why the last start failed (null once running). */
  get problem(): StartProblem | null {
    return this.problemValue;
  }

  /** The running client, or undefined. */
  get client(): C | undefined {
    return this.running;
  }

  /** True while an automatic retry or crash restart is scheduled. */
  get retryPending(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Start (or start again): supersedes whatever start is in flight and disposes
   * the current client first. Resolves when this attempt has settled (running,
   * failed or superseded); never rejects.
   */
  start(reason = 'start'): Promise<void> {
    if (this.disposed) return Promise.resolve();
    this.clearTimer();
    this.abortStart?.(new Superseded(reason));
    const gen = ++this.gen;
    this.attempt = this.run(gen, reason);
    return this.attempt;
  }

  /** Restart on the user's request: forget earlier crashes and failed starts. */
  restart(reason = 'restart requested'): Promise<void> {
    this.backoff.reset();
    this.startFailures = 0;
    return this.start(reason);
  }

  /**
   * Wait until no start is in flight (each attempt is bounded, so this is too);
   * the phase then says whether the server runs.
   */
  async settled(): Promise<void> {
    for (let i = 0; i < 10; i++) {
      const attempt = this.attempt;
      await attempt;
      if (attempt === this.attempt) return;
    }
  }

  /** The client's connection closed on its own (the LanguageClient's errorHandler.closed). */
  closed(client: C, reason = 'the server process exited', problem?: StartProblem): void {
    if (this.disposed || client !== this.current) return;
    if (this.phaseValue === 'starting') {
      // The start in flight fails now rather than at its timeout.
      this.abortStart?.(problem ? new StartError(problem) : new Error(reason));
      return;
    }
    if (this.phaseValue !== 'running') return;
    this.current = undefined;
    this.running = undefined;
    void this.boundedDispose(client);
    const delay = this.backoff.next();
    if (delay === null) {
      const message = `${reason}; it crashed repeatedly, so it was not restarted`;
      this.setPhase('failed', message, { kind: 'exited', detail: reason });
      this.hooks.notify?.('gaveUp', `Synapse server stopped: ${message}.`);
      return;
    }
    const seconds = Math.round(delay / 1000);
    this.hooks.log?.('warn', `Server stopped (${reason}); restarting in ${seconds} s`);
    this.setPhase('restarting', `${reason}; restarting in ${seconds} s`, null);
    this.hooks.notify?.('crashed', `Synapse server stopped (${reason}); restarting in ${seconds} s.`);
    this.schedule(delay, 'restart after a crash');
  }

  /** Stop for good (deactivation). */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.clearTimer();
    this.abortStart?.(new Superseded('disposed'));
    this.gen++;
    const client = this.current;
    this.current = undefined;
    this.running = undefined;
    if (client) await this.boundedDispose(client);
    this.phaseValue = 'stopped';
  }

  // ---- internals -----------------------------------------------------------

  private async run(gen: number, reason: string): Promise<void> {
    const old = this.current;
    this.current = undefined;
    this.running = undefined;
    // A retry keeps saying why the last attempt failed while it tries again.
    const carried = this.problemValue ? `retrying after: ${problemMessage(this.problemValue)}` : null;
    this.setPhase('starting', carried, this.problemValue);
    this.hooks.log?.('info', `Starting the server (${reason})`);
    if (old) await this.boundedDispose(old);
    if (gen !== this.gen) return;

    let client: C | undefined;
    const abort = new Promise<never>((_, reject) => {
      this.abortStart = reject;
    });
    abort.catch(() => undefined);
    try {
      client = await Promise.race([this.hooks.create(), abort]);
      if (gen !== this.gen) throw new Superseded('superseded');
      this.current = client;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new StartError({ kind: 'timeout', detail: `no answer to initialize within ${Math.round(this.startTimeoutMs / 1000)} s` })),
          this.startTimeoutMs,
        );
      });
      try {
        await Promise.race([this.hooks.start(client), abort, timeout]);
      } finally {
        clearTimeout(timer);
      }
      if (gen !== this.gen) throw new Superseded('superseded');
    } catch (error) {
      if (gen === this.gen) this.abortStart = undefined;
      if (client && this.current === client) this.current = undefined;
      if (client) void this.boundedDispose(client);
      if (error instanceof Superseded || gen !== this.gen) return;
      this.failStart(toProblem(error));
      return;
    }
    this.abortStart = undefined;
    this.running = client;
    this.startFailures = 0;
    this.problemValue = null;
    this.setPhase('running', null, null);
    // Not awaited: onRunning sends requests (session list, reload), and a request waits for
    // settled(), which waits for this very attempt - awaiting here deadlocked every request
    // in the real VS Code (e2e/run.mjs found it).
    void Promise.resolve()
      .then(() => this.hooks.onRunning?.(client))
      .catch((error: unknown) => {
        this.hooks.log?.('warn', `after start: ${error instanceof Error ? error.message : String(error)}`);
      });
  }

  private failStart(problem: StartProblem): void {
    const message = problemMessage(problem);
    const attempt = this.startFailures++;
    this.hooks.log?.('error', message);
    const delay = this.retryDelays[attempt];
    this.setPhase('failed', message, problem);
    if (attempt === 0) this.hooks.notify?.('startFailed', message);
    if (delay !== undefined) {
      this.hooks.log?.('info', `Trying again in ${Math.round(delay / 1000)} s (the configuration is read again)`);
      this.schedule(delay, 'retry after a failed start');
    }
  }

  private setPhase(phase: LifecyclePhase, message: string | null, problem: StartProblem | null): void {
    this.phaseValue = phase;
    this.problemValue = problem;
    this.hooks.onPhase(phase, message, problem);
  }

  private schedule(delay: number, reason: string): void {
    this.clearTimer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.start(reason);
    }, delay);
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async boundedDispose(client: C): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        this.hooks.dispose(client),
        new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            this.hooks.log?.('warn', `Disposing the old client took over ${this.disposeTimeoutMs} ms; going on`);
            resolve();
          }, this.disposeTimeoutMs);
        }),
      ]);
    } catch (error) {
      this.hooks.log?.('warn', `Disposing the client: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }
}

// ---- the server process ------------------------------------------------------

/** A spawned server process and what it did (for the failure message). */
export interface ProcessHandle {
  launch: ServerLaunch;
  child?: ChildProcess;
  spawnError?: NodeJS.ErrnoException;
  exit?: { code: number | null; signal: string | null };
  /** The last few KB of its stderr (the output channel has all of it). */
  stderr: string;
}

export function launchBase(launch: ServerLaunch): { command: string; source: string } {
  const source =
    launch.source === 'setting'
      ? 'from synapse.server.command'
      : launch.source === 'path'
        ? 'synapse found on PATH'
        : launch.source === 'bundled'
          ? 'the server bundled with the extension'
          : 'synapse.server.command is empty: python -m synapse_lsp';
  return { command: [launch.command, ...launch.args].join(' '), source };
}

/** Spawn the server (stdio). Rejects with "not found" when the program cannot be run. */
export function spawnServer(handle: ProcessHandle): Promise<ChildProcess> {
  const { launch } = handle;
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(launch.command, [...launch.args, '--stdio'], { env: launch.env, cwd: launch.cwd, stdio: 'pipe' });
    } catch (error) {
      handle.spawnError = error as NodeJS.ErrnoException;
      reject(new StartError(spawnProblem(handle.spawnError, launchBase(launch))));
      return;
    }
    handle.child = child;
    child.stderr?.on('data', (d: Buffer) => {
      handle.stderr = (handle.stderr + d.toString()).slice(-4000);
    });
    child.once('exit', (code, signal) => {
      handle.exit = { code, signal };
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      handle.spawnError ??= error;
      reject(new StartError(spawnProblem(error, launchBase(launch))));
    });
    child.once('spawn', () => resolve(child));
  });
}

export function exitProblem(handle: ProcessHandle): StartProblem {
  if (handle.spawnError) return spawnProblem(handle.spawnError, launchBase(handle.launch));
  const exit = handle.exit ?? { code: null, signal: null };
  if (!handle.exit) return { kind: 'exited', detail: 'the server closed its connection', ...launchBase(handle.launch) };
  return exitedProblem(exit.code, exit.signal, handle.stderr, launchBase(handle.launch));
}

/** Resolves when the process has exited (or never ran), or after `ms`. */
export function waitForExit(handle: ProcessHandle, ms: number): Promise<void> {
  const child = handle.child;
  if (!child || handle.exit || handle.spawnError || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

