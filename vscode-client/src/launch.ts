/**
 * How the extension finds and starts the Synapse language server.
 *
 * No `vscode` import: the extension, the real-server test and the activation
 * benchmark all launch the server through this module.
 *
 * Order: the configured command (`synapse.server.command`), else `synapse lsp`
 * from PATH, else `<python> -m synapse_lsp` (`synapse.pythonPath`, else
 * `python3`, else `python`).
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

export interface LaunchSettings {
  /** `synapse.server.command`: argv, e.g. ["/opt/synapse/bin/synapse", "lsp"]. */
  command?: readonly string[] | string | null;
  /** `synapse.pythonPath`. */
  pythonPath?: string | null;
  /** `synapse.apiKeyEnv` (default ANTHROPIC_API_KEY). */
  apiKeyEnv?: string | null;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /** How the command was chosen, for the log (never contains the key). */
  source: 'setting' | 'path' | 'python';
}

export const DEFAULT_API_KEY_ENV = 'ANTHROPIC_API_KEY';

/** Find an executable on PATH (PATHEXT on Windows), or null. */
export function which(name: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const dirs = (env.PATH ?? env.Path ?? '').split(path.delimiter).filter(Boolean);
  const exts = process.platform === 'win32' ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        if (fs.statSync(candidate).isFile()) return candidate;
      } catch {
        // not here
      }
    }
  }
  return null;
}

function splitCommand(command: readonly string[] | string): string[] {
  if (Array.isArray(command)) return command.filter((part) => part !== '');
  // A single string: split on whitespace, honouring simple double/single quotes.
  const parts: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(command as string)) !== null) parts.push(m[1] ?? m[2] ?? m[3]);
  return parts;
}

/**
 * The process to spawn. `apiKey` (from SecretStorage) is put in the child's
 * environment under `apiKeyEnv` only; an existing value in `baseEnv` wins over
 * nothing but not over an explicitly stored key.
 */
export function resolveServer(
  settings: LaunchSettings,
  options: { baseEnv?: NodeJS.ProcessEnv; apiKey?: string | null; cwd?: string } = {},
): ServerLaunch {
  const baseEnv = options.baseEnv ?? process.env;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) if (v !== undefined) env[k] = v;
  if (options.apiKey) env[settings.apiKeyEnv || DEFAULT_API_KEY_ENV] = options.apiKey;
  // Python output unbuffered so logs reach the output channel at once.
  env.PYTHONUNBUFFERED = '1';

  const configured = settings.command ? splitCommand(settings.command) : [];
  if (configured.length > 0) {
    return { command: configured[0], args: configured.slice(1), env, cwd: options.cwd, source: 'setting' };
  }
  const synapse = which('synapse', baseEnv);
  if (synapse) return { command: synapse, args: ['lsp'], env, cwd: options.cwd, source: 'path' };
  const python =
    (settings.pythonPath && settings.pythonPath.trim()) ||
    which('python3', baseEnv) ||
    which('python', baseEnv) ||
    'python3';
  return { command: python, args: ['-m', 'synapse_lsp'], env, cwd: options.cwd, source: 'python' };
}

/** `initializationOptions` key carrying VS Code's Workspace Trust (synapse_lsp/trust.py). */
export const TRUST_OPTION = 'trustedWorkspace';
/** Client -> server notification when the user trusts the workspace: `{ trusted: boolean }`. */
export const TRUST_NOTIFICATION = 'synapse/didChangeWorkspaceTrust';

/**
 * The server's `initializationOptions`: its settings plus the workspace's trust. An
 * untrusted workspace gets only the home configuration (the folder's own
 * mcp_servers.json is not started) until trust is granted.
 */
export function initializationOptions(
  settings: Record<string, unknown>,
  trusted: boolean,
): Record<string, unknown> {
  return { ...settings, [TRUST_OPTION]: trusted };
}

/** A one-line description for logs: the command, never the environment. */
export function describeLaunch(launch: ServerLaunch): string {
  const quote = (s: string): string => (/[\s"']/.test(s) ? JSON.stringify(s) : s);
  return `${[launch.command, ...launch.args].map(quote).join(' ')} (${
    launch.source === 'setting'
      ? 'from synapse.server.command'
      : launch.source === 'path'
        ? 'synapse found on PATH'
        : 'python -m synapse_lsp'
  })`;
}

/** Retry delays after crashes: 1 s, 2 s, 4 s, 8 s, 16 s, then give up. */
export class Backoff {
  private crashes: number[] = [];

  constructor(
    private readonly maxRestarts = 5,
    private readonly windowMs = 3 * 60_000,
    private readonly baseMs = 1000,
  ) {}

  /** Record a crash at `now`; the delay before the next start, or null to give up. */
  next(now: number = Date.now()): number | null {
    this.crashes = this.crashes.filter((t) => now - t < this.windowMs);
    this.crashes.push(now);
    const n = this.crashes.length;
    if (n > this.maxRestarts) return null;
    return this.baseMs * 2 ** (n - 1);
  }

  reset(): void {
    this.crashes = [];
  }
}
