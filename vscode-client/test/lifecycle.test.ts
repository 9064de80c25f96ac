/**
 * The server lifecycle (src/lifecycle.ts, with src/startProblems.ts and
 * src/serverProcess.ts): bounded starts, failures with the reason and the fix,
 * retries that re-read the configuration, Restart superseding a start that hangs,
 * crash back-off. Fake clients for the state machine; real processes
 * (a missing program, a Python without synapse_lsp, the real server) for the messages.
 */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { Backoff, resolveServer } from '../src/launch';
import { ServerLifecycle, type LifecycleHooks, type LifecyclePhase } from '../src/lifecycle';
import { exitProblem, spawnServer, waitForExit, type ProcessHandle } from '../src/serverProcess';
import { StartError, exitedProblem, problemLabel, problemMessage, spawnProblem, type StartProblem } from '../src/startProblems';
import { pythonPath, serverUnavailable } from './harness';

interface Fake {
  id: number;
  start: () => Promise<void>;
  disposed: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const never = (): Promise<void> => new Promise(() => undefined);

function harness(createImpl: (n: number) => Promise<Fake> | Fake, options: { startTimeoutMs?: number; disposeTimeoutMs?: number; retry?: number[]; backoff?: Backoff; disposeImpl?: (c: Fake) => Promise<void> } = {}) {
  const phases: { phase: LifecyclePhase; message: string | null }[] = [];
  const notes: string[] = [];
  const running: number[] = [];
  let creates = 0;
  const hooks: LifecycleHooks<Fake> = {
    create: async () => createImpl(++creates),
    start: (c) => c.start(),
    dispose: async (c) => {
      c.disposed = true;
      if (options.disposeImpl) await options.disposeImpl(c);
    },
    onPhase: (phase, message) => phases.push({ phase, message }),
    onRunning: (c) => {
      running.push(c.id);
    },
    notify: (event, message) => notes.push(`${event}: ${message}`),
  };
  const lifecycle = new ServerLifecycle(hooks, {
    startTimeoutMs: options.startTimeoutMs ?? 1000,
    disposeTimeoutMs: options.disposeTimeoutMs ?? 200,
    startRetryDelaysMs: options.retry ?? [],
    backoff: options.backoff,
  });
  return { lifecycle, phases, notes, running, creates: () => creates };
}

const fake = (id: number, start: () => Promise<void> = async () => undefined): Fake => ({ id, start, disposed: false });
const notFound: StartProblem = { kind: 'not-found', command: '/nope/synapse lsp', source: 'from synapse.server.command', detail: 'no such file (ENOENT)' };

describe('server lifecycle: starting → running | failed(reason), never stuck', () => {
  it('starts: starting, then running', async () => {
    const h = harness((n) => fake(n));
    await h.lifecycle.start();
    expect(h.phases.map((p) => p.phase)).toEqual(['starting', 'running']);
    expect(h.lifecycle.phase).toBe('running');
    expect(h.lifecycle.client?.id).toBe(1);
    expect(h.running).toEqual([1]);
  });

  it('a server that cannot be found fails with the reason and the fix, notifies once', async () => {
    const h = harness(() => {
      throw new StartError(notFound);
    });
    await h.lifecycle.start();
    expect(h.lifecycle.phase).toBe('failed');
    const failed = h.phases.at(-1)!;
    expect(failed.phase).toBe('failed');
    expect(failed.message).toContain('Synapse server not found');
    expect(failed.message).toContain('/nope/synapse lsp');
    expect(failed.message).toContain('Install the Synapse server or set synapse.server.command');
    expect(h.notes).toHaveLength(1);
    expect(h.notes[0]).toMatch(/^startFailed: Synapse server not found/);
    expect(h.lifecycle.problem?.kind).toBe('not-found');
  });

  it('retries a failed start, reading the configuration again (settings.json rewritten during activation)', async () => {
    // The first read sees an empty command (the default fails); the retry sees the real one.
    const h = harness(
      (n) => {
        if (n === 1) throw new StartError({ kind: 'not-found', command: 'python3 -m synapse_lsp', detail: 'No module named synapse_lsp' });
        return fake(n);
      },
      { retry: [30, 60] },
    );
    await h.lifecycle.start('activation');
    expect(h.lifecycle.phase).toBe('failed');
    expect(h.lifecycle.retryPending).toBe(true);
    await sleep(80);
    await h.lifecycle.settled();
    expect(h.lifecycle.phase).toBe('running');
    expect(h.creates()).toBe(2);
    // While retrying, the view still says why the last attempt failed.
    const retrying = h.phases.find((p, i) => i > 0 && p.phase === 'starting');
    expect(retrying?.message).toContain('retrying after: Synapse server not found');
    expect(h.notes).toHaveLength(1);
  });

  it('gives up retrying after the configured attempts and stays failed (until Restart or a settings change)', async () => {
    const h = harness(() => {
      throw new StartError(notFound);
    }, { retry: [10, 10] });
    await h.lifecycle.start();
    await sleep(100);
    await h.lifecycle.settled();
    expect(h.creates()).toBe(3);
    expect(h.lifecycle.phase).toBe('failed');
    expect(h.lifecycle.retryPending).toBe(false);
    // Restart still works after giving up.
    await h.lifecycle.restart();
    expect(h.creates()).toBe(4);
  });

  it('a start that never answers fails at the timeout and its client is disposed', async () => {
    const clients: Fake[] = [];
    const h = harness((n) => {
      const c = fake(n, never);
      clients.push(c);
      return c;
    }, { startTimeoutMs: 50 });
    const t0 = Date.now();
    await h.lifecycle.start();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(h.lifecycle.phase).toBe('failed');
    expect(h.lifecycle.problem?.kind).toBe('timeout');
    expect(h.phases.at(-1)!.message).toContain('did not answer');
    await sleep(10);
    expect(clients[0].disposed).toBe(true);
  });

  it('Restart always works: it supersedes a start that hangs and disposes the half-started client', async () => {
    const clients: Fake[] = [];
    let release: () => void = () => undefined;
    const h = harness((n) => {
      const c = n === 1 ? fake(n, () => new Promise<void>((r) => (release = r))) : fake(n);
      clients.push(c);
      return c;
    }, { startTimeoutMs: 10_000 });
    const first = h.lifecycle.start('activation');
    await sleep(10);
    expect(h.lifecycle.phase).toBe('starting');
    await h.lifecycle.restart('user');
    expect(h.lifecycle.phase).toBe('running');
    expect(h.lifecycle.client?.id).toBe(2);
    expect(clients[0].disposed).toBe(true);
    // The old start answering late changes nothing.
    release();
    await first;
    expect(h.lifecycle.client?.id).toBe(2);
    expect(h.running).toEqual([2]);
  });

  it('a dispose that hangs does not block the next start', async () => {
    const h = harness((n) => fake(n), { disposeTimeoutMs: 30, disposeImpl: never });
    await h.lifecycle.start();
    const t0 = Date.now();
    await h.lifecycle.restart();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(h.lifecycle.client?.id).toBe(2);
  });

  it('a connection that closes during start fails the start at once, with the process problem', async () => {
    const clients: Fake[] = [];
    const h = harness((n) => {
      const c = fake(n, never);
      clients.push(c);
      return c;
    }, { startTimeoutMs: 10_000 });
    const started = h.lifecycle.start();
    await sleep(10);
    h.lifecycle.closed(clients[0], 'exit code 1', exitedProblem(1, null, "python3: No module named synapse_lsp\n", { command: 'python3 -m synapse_lsp' }));
    await started;
    expect(h.lifecycle.phase).toBe('failed');
    expect(h.phases.at(-1)!.message).toMatch(/^Synapse server not found — "python3 -m synapse_lsp" could not be run: exit code 1: python3: No module named synapse_lsp/);
  });

  it('a crash while running restarts with back-off, then gives up and says so', async () => {
    const h = harness((n) => fake(n), { backoff: new Backoff(2, 60_000, 10) });
    await h.lifecycle.start();
    h.lifecycle.closed(h.lifecycle.client!, 'exit code 1');
    expect(h.lifecycle.phase).toBe('restarting');
    expect(h.phases.at(-1)!.message).toContain('restarting in');
    await sleep(40);
    await h.lifecycle.settled();
    expect(h.lifecycle.phase).toBe('running');
    h.lifecycle.closed(h.lifecycle.client!, 'exit code 1');
    await sleep(60);
    await h.lifecycle.settled();
    h.lifecycle.closed(h.lifecycle.client!, 'exit code 1');
    expect(h.lifecycle.phase).toBe('failed');
    expect(h.notes.some((n) => n.startsWith('gaveUp:'))).toBe(true);
    await h.lifecycle.restart();
    expect(h.lifecycle.phase).toBe('running');
  });

  it('ignores a late close of a client it no longer uses', async () => {
    const h = harness((n) => fake(n));
    await h.lifecycle.start();
    const old = h.lifecycle.client!;
    await h.lifecycle.restart();
    h.lifecycle.closed(old, 'exit');
    expect(h.lifecycle.phase).toBe('running');
  });

  it('dispose stops for good', async () => {
    const h = harness((n) => fake(n));
    await h.lifecycle.start();
    const c = h.lifecycle.client!;
    await h.lifecycle.dispose();
    expect(c.disposed).toBe(true);
    await h.lifecycle.start();
    expect(h.creates()).toBe(1);
  });
});

describe('start failure messages', () => {
  it('say what failed and how to fix it', () => {
    expect(problemMessage(notFound)).toBe(
      'Synapse server not found — "/nope/synapse lsp" (from synapse.server.command) could not be run: no such file (ENOENT). ' +
        'Install the Synapse server or set synapse.server.command (a settings change restarts it; so does "Synapse: Restart Server").',
    );
    expect(problemMessage({ kind: 'timeout', command: 'synapse lsp', detail: 'no answer to initialize within 45 s' })).toContain(
      'Synapse server did not answer — "synapse lsp": no answer to initialize within 45 s',
    );
    expect(problemMessage({ kind: 'no-python', detail: 'Synapse needs CPython 3.11 …' })).toBe('Synapse needs CPython 3.11 …');
    expect(problemLabel('not-found')).toBe('server not found');
    expect(problemLabel('exited')).toBe('server exited');
    expect(problemLabel(null)).toBe('server failed');
  });

  it('classify spawn errors and early exits', () => {
    const enoent = Object.assign(new Error('spawn /x ENOENT'), { code: 'ENOENT' });
    expect(spawnProblem(enoent, { command: '/x' })).toMatchObject({ kind: 'not-found', detail: 'no such file (ENOENT)' });
    const eacces = Object.assign(new Error('spawn /x EACCES'), { code: 'EACCES' });
    expect(spawnProblem(eacces, {}).kind).toBe('not-found');
    expect(exitedProblem(127, null, '', {}).kind).toBe('not-found');
    expect(exitedProblem(1, null, 'Traceback\nValueError: bad setting\n', {})).toMatchObject({ kind: 'exited', detail: 'exit code 1: ValueError: bad setting' });
    expect(exitedProblem(null, 'SIGKILL', '', {}).detail).toBe('killed by SIGKILL');
  });
});

describe('start failures of real processes', () => {
  const spawnAndWait = async (command: string[]): Promise<StartProblem> => {
    const launch = resolveServer({ command }, {});
    const handle: ProcessHandle = { launch, stderr: '' };
    try {
      const child = await spawnServer(handle);
      child.stdin?.end();
      await waitForExit(handle, 10_000);
      return exitProblem(handle);
    } catch (error) {
      return (error as StartError).problem;
    }
  };

  it('a wrong synapse.server.command: not found (ENOENT)', async () => {
    const problem = await spawnAndWait(['/nonexistent/bin/synapse', 'lsp']);
    expect(problem.kind).toBe('not-found');
    expect(problemMessage(problem)).toMatch(/^Synapse server not found — "\/nonexistent\/bin\/synapse lsp" \(from synapse\.server\.command\) could not be run: no such file \(ENOENT\)/);
  });

  it('a Python without synapse_lsp: not found, with Python\'s own words', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-nomod-'));
    try {
      const py = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
      const problem = await spawnAndWait([py, '-I', '-m', 'synapse_lsp_not_installed']);
      expect(problem.kind).toBe('not-found');
      expect(problem.detail).toMatch(/exit code 1: .*No module named synapse_lsp_not_installed/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(serverUnavailable() !== null)('the real server starts and keeps running (no problem to report)', async () => {
    const launch = resolveServer({ command: [pythonPath(), '-m', 'synapse_lsp'] }, {});
    const handle: ProcessHandle = { launch, stderr: '' };
    const child = await spawnServer(handle);
    await waitForExit(handle, 1500);
    expect(handle.exit).toBeUndefined();
    child.kill('SIGTERM');
    await waitForExit(handle, 5000);
    expect(handle.exit).toBeDefined();
  });
});
