/**
 * The server bundled in the .vsix (scripts/bundle-server.sh -> bundled/libs) and how
 * launch.ts chooses between it, `synapse` on PATH and the configured command.
 */

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  NoSuitablePython,
  chooseServer,
  describeLaunch,
  probeProtocolVersion,
  readBundle,
  resolveServer,
  which,
} from '../src/launch';
import { PROTOCOL_VERSION } from '../src/protocol';

const root = path.resolve(__dirname, '..');

describe('choosing the bundled server', () => {
  let dir: string;
  let ext: string;
  const bin = (name: string): string => path.join(dir, name);

  /** A directory holding fake executables: `python3` answering `major minor impl machine`. */
  const pathDir = (name: string, files: Record<string, string>): string => {
    const d = bin(name);
    fs.mkdirSync(d);
    for (const [file, body] of Object.entries(files)) {
      fs.writeFileSync(path.join(d, file), `#!/bin/sh\n${body}\n`);
      fs.chmodSync(path.join(d, file), 0o755);
    }
    return d;
  };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-bundle-'));
    ext = bin('ext');
    fs.mkdirSync(path.join(ext, 'bundled', 'libs'), { recursive: true });
    fs.writeFileSync(
      path.join(ext, 'bundled', 'libs', 'manifest.json'),
      JSON.stringify({ platform: 'linux-x64', pythons: ['cp311', 'cp312'], synapseVersion: '0.1.0', protocolVersion: 1 }),
    );
    pathDir('py311', { python3: 'echo 3 11 cpython x86_64' });
    pathDir('py310', { python3: 'echo 3 10 cpython x86_64', python: 'echo 2 7 cpython x86_64' });
    pathDir('py310and312', { python3: 'echo 3 10 cpython x86_64', 'python3.12': 'echo 3 12 cpython x86_64' });
    pathDir('pypy', { python3: 'echo 3 11 pypy x86_64' });
    pathDir('synapse', { synapse: 'exit 0', python3: 'echo 3 11 cpython x86_64' });
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const choose = (PATH: string, extra: Record<string, unknown> = {}, probe?: () => Promise<number | null>) =>
    chooseServer({ ...extra }, { baseEnv: { PATH }, extensionPath: ext, expectedProtocol: 1, probe });

  it.skipIf(process.platform !== 'linux' || process.arch !== 'x64')('no synapse on PATH: the bundled libs with python3', async () => {
    const { launch, notes } = await choose(bin('py311'));
    expect(launch).toMatchObject({ command: path.join(bin('py311'), 'python3'), args: ['-m', 'synapse_lsp'], source: 'bundled' });
    const libs = path.join(ext, 'bundled', 'libs');
    expect(launch.env.PYTHONPATH).toBe(`${libs}/cp311:${libs}/common`);
    expect(launch.env.PYTHONNOUSERSITE).toBe('1');
    expect(notes.join()).toContain('bundled with the extension');
    expect(describeLaunch(launch)).toContain('bundled with the extension');
    // python3 too old, python3.12 on PATH: that one
    expect((await choose(bin('py310and312'))).launch.env.PYTHONPATH).toContain(`${libs}/cp312`);
  });

  it('no suitable Python: a message saying what was found and what to do', async () => {
    const error = await choose(bin('py310')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoSuitablePython);
    const message = (error as Error).message;
    expect(message).toContain('CPython 3.11, 3.12');
    expect(message).toContain('cpython 3.10');
    expect(message).toContain('synapse.pythonPath');
    expect(message).toContain('synapse.server.command');
    await expect(choose(bin('pypy'))).rejects.toThrow(/pypy 3.11/);
    await expect(choose(bin('py311'), { pythonPath: path.join(bin('py310'), 'python3') })).rejects.toThrow(/3\.10/);
    await expect(choose(path.join(dir, 'nothing'))).rejects.toThrow(/no python3 or python on PATH/);
  });

  it('the configured command always wins; without a bundle nothing changes', async () => {
    const { launch } = await choose(bin('py310'), { command: ['/opt/synapse', 'lsp'] });
    expect(launch).toMatchObject({ command: '/opt/synapse', source: 'setting' });
    const plain = await chooseServer({}, { baseEnv: { PATH: bin('py310') }, expectedProtocol: 1 });
    expect(plain.launch).toEqual(resolveServer({}, { baseEnv: { PATH: bin('py310') } }));
  });

  it.skipIf(process.platform !== 'linux' || process.arch !== 'x64')('synapse on PATH and a bundle: the protocol version decides, and the log says which', async () => {
    const same = await choose(bin('synapse'), {}, async () => 1);
    expect(same.launch.source).toBe('path');
    expect(same.notes.join()).toMatch(/speaks protocol 1: using it rather than the bundled server/);
    // cached per binary: a second probe is not made
    const other = await choose(bin('synapse'), {}, async () => 99);
    expect(other.launch.source).toBe('path');
    fs.utimesSync(path.join(bin('synapse'), 'synapse'), new Date(), new Date(Date.now() + 5000));
    const old = await choose(bin('synapse'), {}, async () => 0);
    expect(old.launch.source).toBe('bundled');
    expect(old.notes.join()).toMatch(/speaks protocol 0, this extension needs 1: using the server bundled/);
    fs.utimesSync(path.join(bin('synapse'), 'synapse'), new Date(), new Date(Date.now() + 10000));
    const silent = await choose(bin('synapse'), {}, async () => null);
    expect(silent.launch.source).toBe('bundled');
    expect(silent.notes.join()).toContain('did not answer initialize');
  });
});

// The real thing: bundled/libs as `npm run package` builds it, run by this machine's Python.
const bundle = readBundle(root);
/** The real interpreter behind `python3.11` (a pyenv shim needs its PATH; the test gives none). */
function realPython311(): string | null {
  if (!which('python3.11')) return null;
  try {
    return execFileSync('python3.11', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}
const python311 = realPython311();
describe.skipIf(!bundle || !python311 || process.platform !== 'linux')('the real bundled server', () => {
  it('starts with only the bundle on PYTHONPATH and answers initialize with our protocol version', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-bundle-home-'));
    const bare = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-bundle-path-'));
    fs.symlinkSync(python311!, path.join(bare, 'python3'));
    try {
      const { launch } = await chooseServer(
        {},
        { baseEnv: { PATH: bare, HOME: home, SYNAPSE_HOME: path.join(home, '.synapse') }, extensionPath: root, expectedProtocol: PROTOCOL_VERSION },
      );
      expect(launch.source).toBe('bundled');
      expect(await probeProtocolVersion(launch, 30_000)).toBe(PROTOCOL_VERSION);
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(bare, { recursive: true, force: true });
    }
  });
});
