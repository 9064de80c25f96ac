import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  Backoff,
  TRUST_NOTIFICATION,
  TRUST_OPTION,
  describeLaunch,
  initializationOptions,
  resolveServer,
  which,
} from '../src/launch';
import { serverSettings } from '../src/protocol';
import { contentSecurityPolicy, makeNonce, webviewHtml } from '../src/webview/html';
import { promptContext, type Attachment } from '../src/webview/messages';

describe('server resolution (configured command, else synapse on PATH, else python -m synapse_lsp)', () => {
  let dir: string;
  let withSynapse: string;
  let withPython: string;
  let empty: string;

  const exe = (d: string, name: string): string => {
    const file = path.join(d, name);
    fs.writeFileSync(file, '#!/bin/sh\nexit 0\n');
    fs.chmodSync(file, 0o755);
    return file;
  };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-launch-'));
    withSynapse = path.join(dir, 'a');
    withPython = path.join(dir, 'b');
    empty = path.join(dir, 'c');
    for (const d of [withSynapse, withPython, empty]) fs.mkdirSync(d);
    exe(withSynapse, 'synapse');
    exe(withSynapse, 'python3');
    exe(withPython, 'python3');
    fs.writeFileSync(path.join(empty, 'synapse'), 'not executable');
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('uses the configured command first (array or string)', () => {
    const env = { PATH: withSynapse };
    expect(resolveServer({ command: ['/opt/s/bin/synapse', 'lsp'] }, { baseEnv: env })).toMatchObject({
      command: '/opt/s/bin/synapse',
      args: ['lsp'],
      source: 'setting',
    });
    expect(resolveServer({ command: '"/opt/my synapse/synapse" lsp --log x' }, { baseEnv: env })).toMatchObject({
      command: '/opt/my synapse/synapse',
      args: ['lsp', '--log', 'x'],
    });
  });

  it('then `synapse lsp` from PATH', () => {
    const launch = resolveServer({ command: [] }, { baseEnv: { PATH: withSynapse } });
    expect(launch).toMatchObject({ command: path.join(withSynapse, 'synapse'), args: ['lsp'], source: 'path' });
  });

  it('then python -m synapse_lsp (pythonPath, else python3 on PATH)', () => {
    expect(resolveServer({}, { baseEnv: { PATH: withPython } })).toMatchObject({
      command: path.join(withPython, 'python3'),
      args: ['-m', 'synapse_lsp'],
      source: 'python',
    });
    expect(resolveServer({ pythonPath: '/venv/bin/python' }, { baseEnv: { PATH: withPython } }).command).toBe('/venv/bin/python');
    // a non-executable `synapse` is not a server
    expect(resolveServer({}, { baseEnv: { PATH: empty } })).toMatchObject({ command: 'python3', source: 'python' });
    expect(which('synapse', { PATH: empty })).toBeNull();
  });

  it('puts a stored API key in the child environment only, under apiKeyEnv', () => {
    const base = { PATH: withPython, ANTHROPIC_API_KEY: 'from-env' };
    const launch = resolveServer({}, { baseEnv: base, apiKey: 'sk-stored' });
    expect(launch.env.ANTHROPIC_API_KEY).toBe('sk-stored');
    expect(base.ANTHROPIC_API_KEY).toBe('from-env'); // the caller's env is untouched
    expect(resolveServer({}, { baseEnv: base }).env.ANTHROPIC_API_KEY).toBe('from-env');
    const custom = resolveServer({ apiKeyEnv: 'MY_KEY' }, { baseEnv: base, apiKey: 'sk-stored' });
    expect(custom.env.MY_KEY).toBe('sk-stored');
    expect(custom.env.ANTHROPIC_API_KEY).toBe('from-env');
    // what goes to the log never contains the key
    expect(describeLaunch(launch)).not.toContain('sk-stored');
    expect(describeLaunch(launch)).toContain('python -m synapse_lsp');
  });
});

describe('restart back-off', () => {
  it('waits 1, 2, 4, 8, 16 s, then gives up; old crashes expire', () => {
    const b = new Backoff(5, 180_000, 1000);
    expect([0, 1, 2, 3, 4].map((i) => b.next(i * 10))).toEqual([1000, 2000, 4000, 8000, 16000]);
    expect(b.next(50)).toBeNull();
    expect(b.next(200_000)).toBe(1000); // the earlier crashes are out of the window
    b.reset();
    expect(b.next(200_001)).toBe(1000);
  });
});

describe('settings sent to the server', () => {
  it('keeps the server keys, drops client-only keys and unset values', () => {
    const section = {
      server: { command: ['x'] },
      pythonPath: '/p',
      trace: { server: 'off' },
      model: 'claude-x',
      maxTokens: null,
      baseUrl: '',
      permission: 'auto',
      allow: [],
      deny: ['rm -rf *'],
      logLevel: 'debug',
    };
    expect(serverSettings(section)).toEqual({
      model: 'claude-x',
      permission: 'auto',
      allow: [],
      deny: ['rm -rf *'],
      logLevel: 'debug',
    });
  });
});

describe('prompt context from attachments', () => {
  const selection: Attachment = {
    kind: 'selection',
    uri: 'file:///p/a.py',
    label: 'a.py:1-2',
    text: 'x = 1',
    range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } },
  };
  it('maps a selection and a file to the protocol context', () => {
    expect(promptContext([selection])).toEqual({
      activeFile: 'file:///p/a.py',
      selection: { uri: 'file:///p/a.py', range: selection.range, text: 'x = 1' },
    });
    expect(promptContext([selection, { kind: 'file', uri: 'file:///p/b.py', label: 'b.py' }], ['file:///p/b.py'])).toEqual({
      activeFile: 'file:///p/b.py',
      selection: { uri: 'file:///p/a.py', range: selection.range, text: 'x = 1' },
      openFiles: ['file:///p/b.py'],
    });
    expect(promptContext([])).toBeUndefined();
  });
});

describe('webview HTML', () => {
  it('has a nonce-only script policy and no inline script or style', () => {
    const nonce = makeNonce((n) => new Uint8Array(n).map((_, i) => i * 7));
    expect(nonce).toMatch(/^[A-Za-z0-9]{32}$/);
    const html = webviewHtml({ cspSource: 'vscode-webview://x', nonce, scriptUri: 'vscode-webview://x/w.js', styleUri: 'vscode-webview://x/w.css' });
    const csp = contentSecurityPolicy('vscode-webview://x', nonce);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain(`script-src 'nonce-${nonce}'`);
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(html).toContain(`<script nonce="${nonce}" src="vscode-webview://x/w.js"></script>`);
    expect(html).not.toMatch(/<script(?![^>]*src=)/);
    expect(html).not.toContain('<style');
  });
});

describe('workspace trust (initializationOptions and the grant notification)', () => {
  it('passes VS Code\'s Workspace Trust beside the settings, never as a setting', () => {
    const settings = serverSettings({ model: 'm', maxTokens: 100 });
    expect(initializationOptions(settings, false)).toEqual({ model: 'm', maxTokens: 100, trustedWorkspace: false });
    expect(initializationOptions(settings, true)[TRUST_OPTION]).toBe(true);
    expect(settings).not.toHaveProperty(TRUST_OPTION); // the settings object is not changed
    expect(TRUST_NOTIFICATION).toBe('synapse/didChangeWorkspaceTrust');
  });

  it('package.json supports untrusted workspaces in limited mode, restricting risky settings', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
    const untrusted = pkg.capabilities.untrustedWorkspaces;
    expect(untrusted.supported).toBe('limited');
    for (const key of ['synapse.server.command', 'synapse.pythonPath', 'synapse.baseUrl', 'synapse.allow']) {
      expect(untrusted.restrictedConfigurations).toContain(key);
    }
  });
});
