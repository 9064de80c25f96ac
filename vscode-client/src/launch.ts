/**
 * How the extension finds and starts the Synapse language server.
 *
 * No `vscode` import: the extension, the real-server test and the activation
 * benchmark all launch the server through this module.
 *
 * Order: the configured command (`synapse.server.command`), else `synapse lsp`
 * from PATH, else `<python> -m synapse_lsp` (`synapse.pythonPath`, else
 * `python3`, else `python`). `chooseServer` adds the server bundled in the
 * .vsix (bundled/libs, with a Python >= 3.11) and the protocol check between it
 * and a `synapse` on PATH.
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
  source: 'setting' | 'path' | 'python' | 'bundled';
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
  // Blank parts (a half-written settings.json can read as [""]) are dropped: an empty
  // command means "use the default".
  if (Array.isArray(command)) return command.filter((part) => typeof part === 'string' && part.trim() !== '');
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

/** `initializationOptions` key carrying VS Code's Workspace Trust (synapse_lsp/policy/trust.py). */
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
        : launch.source === 'bundled'
          ? 'the server bundled with the extension'
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

// ---------------------------------------------------------------------------
// The server bundled in the .vsix (scripts/bundle-server.sh): bundled/libs/common plus
// bundled/libs/cp3XX for the CPython found, run as `python -m synapse_lsp`.

/** bundled/libs/manifest.json, written by scripts/bundle-server.sh. */
export interface BundleManifest {
  platform: string;
  pythons: string[];
  synapseVersion: string;
  protocolVersion: number;
}

/** A Python interpreter and what it is. */
export interface PythonInfo {
  path: string;
  major: number;
  minor: number;
  implementation: string;
  machine: string;
}

export const MIN_PYTHON: readonly [number, number] = [3, 11];

/** The bundle's manifest under `extensionPath`, or null when the .vsix carries none. */
export function readBundle(extensionPath: string | undefined): BundleManifest | null {
  if (!extensionPath) return null;
  try {
    const file = path.join(extensionPath, 'bundled', 'libs', 'manifest.json');
    const manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as BundleManifest;
    return Array.isArray(manifest.pythons) ? manifest : null;
  } catch {
    return null;
  }
}

/** Ask an interpreter its version, implementation and machine (null: not runnable). */
export async function probePython(
  command: string,
  env: NodeJS.ProcessEnv = process.env,
  timeoutMs = 10_000,
): Promise<PythonInfo | null> {
  const { execFile } = await import('node:child_process');
  const code = 'import sys, platform; print(sys.version_info[0], sys.version_info[1], sys.implementation.name, platform.machine())';
  return new Promise((resolve) => {
    execFile(command, ['-I', '-c', code], { env, timeout: timeoutMs }, (error, stdout) => {
      const m = /^(\d+) (\d+) (\S+) (\S+)/.exec(String(stdout ?? '').trim());
      if (error || !m) return resolve(null);
      resolve({ path: command, major: +m[1], minor: +m[2], implementation: m[3], machine: m[4] });
    });
  });
}

/** The bundled directory tag (`cp311`) a Python can use, or null. */
export function bundleTagFor(info: PythonInfo, bundle: BundleManifest): string | null {
  if (info.implementation !== 'cpython') return null;
  if (bundle.platform === 'linux-x64' && (process.platform !== 'linux' || !/^(x86_64|amd64)$/i.test(info.machine))) return null;
  if (info.major < MIN_PYTHON[0] || (info.major === MIN_PYTHON[0] && info.minor < MIN_PYTHON[1])) return null;
  const tag = `cp${info.major}${info.minor}`;
  return bundle.pythons.includes(tag) ? tag : null;
}

/** Why the bundled server cannot run: what was found, what is needed, how to fix it. */
export class NoSuitablePython extends Error {}

/** The launch of the bundled server with the first suitable Python, or throws NoSuitablePython. */
export async function resolveBundled(
  settings: LaunchSettings,
  extensionPath: string,
  bundle: BundleManifest,
  base: ServerLaunch,
  probe: (command: string) => Promise<PythonInfo | null> = (c) => probePython(c, base.env),
): Promise<ServerLaunch> {
  const configured = settings.pythonPath?.trim();
  const candidates = configured
    ? [configured]
    : ['python3', 'python', 'python3.13', 'python3.12', 'python3.11']
        .map((name) => which(name, base.env))
        .filter((p): p is string => p !== null);
  const seen: string[] = [];
  for (const candidate of [...new Set(candidates)]) {
    const info = await probe(candidate);
    if (!info) {
      seen.push(`${candidate} (does not run)`);
      continue;
    }
    const tag = bundleTagFor(info, bundle);
    if (!tag) {
      seen.push(`${candidate} (${info.implementation} ${info.major}.${info.minor}, ${info.machine})`);
      continue;
    }
    const libs = path.join(extensionPath, 'bundled', 'libs');
    const env = { ...base.env };
    env.PYTHONPATH = [path.join(libs, tag), path.join(libs, 'common'), env.PYTHONPATH]
      .filter(Boolean)
      .join(path.delimiter);
    env.PYTHONNOUSERSITE = '1';
    return { command: candidate, args: ['-m', 'synapse_lsp'], env, cwd: base.cwd, source: 'bundled' };
  }
  const offered = bundle.pythons.map((t) => `${t[2]}.${t.slice(3)}`).join(', ');
  throw new NoSuitablePython(
    `Synapse needs CPython ${offered} on ${bundle.platform} to run the server bundled with the extension; ` +
      `found ${seen.length ? seen.join(', ') : configured ? configured : 'no python3 or python on PATH'}. ` +
      `Install Python ${MIN_PYTHON.join('.')} or newer and set "synapse.pythonPath", ` +
      `or install the server (pip install synapse_lsp-*.whl) and set "synapse.server.command".`,
  );
}

/**
 * Ask a server its protocol version: spawn it, send `initialize`, read
 * `capabilities.experimental.synapse.protocolVersion`, then shut it down. null: no
 * answer (it did not start, or timed out).
 */
export async function probeProtocolVersion(launch: ServerLaunch, timeoutMs = 15_000): Promise<number | null> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    let done = false;
    let buffer = Buffer.alloc(0);
    const child = spawn(launch.command, launch.args, { env: launch.env, cwd: launch.cwd, stdio: ['pipe', 'pipe', 'ignore'] });
    const finish = (value: number | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        const exit = (msg: object): void => {
          const body = JSON.stringify({ jsonrpc: '2.0', ...msg });
          child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        };
        exit({ id: 2, method: 'shutdown' });
        exit({ method: 'exit' });
        child.stdin.end();
      } catch {
        // already gone
      }
      setTimeout(() => child.kill(), 2000).unref();
      resolve(value);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    child.on('error', () => finish(null));
    child.on('exit', () => finish(null));
    child.stdin.on('error', () => undefined);
    child.stdout.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const header = buffer.indexOf('\r\n\r\n');
        if (header < 0) return;
        const m = /Content-Length: (\d+)/i.exec(buffer.subarray(0, header).toString());
        const length = m ? +m[1] : 0;
        if (buffer.length < header + 4 + length) return;
        const body = buffer.subarray(header + 4, header + 4 + length).toString();
        buffer = buffer.subarray(header + 4 + length);
        try {
          const msg = JSON.parse(body) as { id?: number; result?: unknown };
          if (msg.id === 1) {
            const caps = (msg.result as { capabilities?: { experimental?: { synapse?: { protocolVersion?: unknown } } } })
              ?.capabilities;
            const v = caps?.experimental?.synapse?.protocolVersion;
            finish(typeof v === 'number' ? v : -1);
          }
        } catch {
          // not JSON: keep reading
        }
      }
    });
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { processId: process.pid, rootUri: null, capabilities: {}, initializationOptions: { [TRUST_OPTION]: false } },
    });
    child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

/** Protocol versions already asked, by command path and mtime (one probe per binary). */
const protocolCache = new Map<string, number | null>();

/**
 * The server to start, with lines for the log saying why:
 * 1. `synapse.server.command`;
 * 2. `synapse` on PATH - unless the extension bundles a server too and the one on PATH
 *    speaks another protocol version (or does not answer), then the bundled one;
 * 3. the bundled server with a suitable Python (throws NoSuitablePython when none is);
 * 4. without a bundle (a development build): `python -m synapse_lsp`.
 */
export async function chooseServer(
  settings: LaunchSettings,
  options: {
    baseEnv?: NodeJS.ProcessEnv;
    apiKey?: string | null;
    cwd?: string;
    extensionPath?: string;
    expectedProtocol: number;
    probe?: (launch: ServerLaunch) => Promise<number | null>;
  },
): Promise<{ launch: ServerLaunch; notes: string[] }> {
  const launch = resolveServer(settings, options);
  const bundle = readBundle(options.extensionPath);
  if (launch.source === 'setting' || !bundle || !options.extensionPath) return { launch, notes: [] };
  if (launch.source === 'python') {
    const bundled = await resolveBundled(settings, options.extensionPath, bundle, launch);
    return { launch: bundled, notes: [`no synapse on PATH: using the server bundled with the extension (${bundle.synapseVersion}, protocol ${bundle.protocolVersion})`] };
  }
  // synapse on PATH and a bundled server: the protocol version decides.
  let bundled: ServerLaunch;
  try {
    bundled = await resolveBundled(settings, options.extensionPath, bundle, launch);
  } catch (error) {
    return { launch, notes: [`synapse found on PATH (${launch.command}); the bundled server cannot run: ${(error as Error).message}`] };
  }
  let key = launch.command;
  try {
    key += `@${fs.statSync(launch.command).mtimeMs}`;
  } catch {
    // keep the path alone
  }
  let version = protocolCache.get(key);
  if (version === undefined) {
    version = await (options.probe ?? probeProtocolVersion)(launch);
    protocolCache.set(key, version);
  }
  if (version === options.expectedProtocol) {
    return { launch, notes: [`synapse on PATH (${launch.command}) speaks protocol ${version}: using it rather than the bundled server`] };
  }
  const said = version === null ? 'did not answer initialize' : version === -1 ? 'reports no protocol version' : `speaks protocol ${version}`;
  return {
    launch: bundled,
    notes: [`synapse on PATH (${launch.command}) ${said}, this extension needs ${options.expectedProtocol}: using the server bundled with the extension (protocol ${bundle.protocolVersion})`],
  };
}
