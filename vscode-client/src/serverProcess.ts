/**
 * The server process: spawning it over stdio, keeping what it did (exit, spawn
 * error, the tail of its stderr) and turning that into a StartProblem.
 */

import { spawn, type ChildProcess } from 'node:child_process';

import type { ServerLaunch } from './launch';
import { StartError, exitedProblem, spawnProblem, type StartProblem } from './startProblems';

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
