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
 *
 * Why a start failed and its message: startProblems.ts; the server process
 * itself: serverProcess.ts.
 */

import { Backoff } from './launch';
import { StartError, problemMessage, type StartProblem } from './startProblems';

export type LifecyclePhase = 'stopped' | 'starting' | 'running' | 'restarting' | 'failed';

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
