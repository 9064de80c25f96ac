/* global fetch, document */
/**
 * The real VS Code (code-server 4.139.1 = VS Code 1.139.1 for the Web, on Node 24) with the
 * built .vsix installed, driven by Debian's Chromium through playwright-core, talking to
 * the fake Messages API (synapse fake-api) on loopback. Shared by run.mjs (the suite) and
 * bench.mjs (the benchmark).
 */

import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

export const E2E = path.dirname(fileURLToPath(import.meta.url));
export const CLIENT = path.resolve(E2E, '..');
export const ROOT = path.resolve(CLIENT, '..');
export const OUT = path.join(CLIENT, 'test-output', 'e2e');
export const VSIX = process.env.SYNAPSE_VSIX || path.join(CLIENT, 'synapse-vscode.vsix');
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const PY = path.join(ROOT, '.venv', 'bin', 'python');
export const BASE =
  process.env.SYNAPSE_CODE_SERVER_CACHE ||
  path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'synapse-code-server');
const SETUP = path.join(E2E, 'setup-code-server.sh');
const NODE24 = path.join(BASE, 'node24', 'package', 'bin');
const CS_ENTRY = path.join(BASE, 'cs', 'node_modules', 'code-server', 'out', 'node', 'entry.js');

export const log = (...a) => console.log(`[e2e ${new Date().toISOString().slice(11, 19)}]`, ...a);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Node 24 + code-server into BASE (cached; ~2 min the first time). */
export function installCodeServer() {
  execFileSync('bash', [SETUP], { env: { ...process.env, BASE }, stdio: ['ignore', 'pipe', 'inherit'], timeout: 8 * 60_000 });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

async function waitHttp(url, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return r;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`${what} did not answer at ${url} within ${timeoutMs / 1000} s`);
    await sleep(150);
  }
}

/** PATH without any directory holding a `synapse` (the .vsix-only user has none). */
export function pathWithoutSynapse() {
  return (process.env.PATH || '')
    .split(':')
    .filter((d) => d && !fs.existsSync(path.join(d, 'synapse')) && !d.includes('.venv'))
    .join(':');
}

/**
 * A profile: workspace folder with files, user-data dir with settings.json, extensions
 * dir with the .vsix installed, a home.
 */
export function makeProfile(files, settings = {}) {
  // Where a user's folders are, not under /tmp: a sandboxed session sees /tmp as its
  // own (docs/shell.md "One file system for every layer"), so a write to the
  // workspace's parent would not be "outside" there.
  const base = process.env.SYNAPSE_E2E_DIR || (fs.existsSync('/var/tmp') ? '/var/tmp' : os.tmpdir());
  const dir = fs.mkdtempSync(path.join(base, 'synapse-e2e-'));
  const p = {
    dir,
    ws: path.join(dir, 'ws'),
    ud: path.join(dir, 'ud'),
    ext: path.join(dir, 'ext'),
    home: path.join(dir, 'home'),
  };
  for (const d of [p.ws, path.join(p.ud, 'User'), p.ext, p.home]) fs.mkdirSync(d, { recursive: true });
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(p.ws, name), text);
  p.settingsFile = path.join(p.ud, 'User', 'settings.json');
  writeSettings(p, settings);
  execFileSync('bash', [SETUP, 'install-ext', p.ud, p.ext, VSIX], {
    env: { ...process.env, BASE },
    stdio: 'pipe',
    timeout: 120_000,
  });
  return p;
}

/** settings.json: autosave off (the desktop default; edits stay dirty), no theme id. */
export function writeSettings(profile, extra = {}) {
  fs.writeFileSync(profile.settingsFile, JSON.stringify(settingsWith(extra), null, 2));
}

export function settingsWith(extra = {}) {
  return {
    'files.autoSave': 'off',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'security.workspace.trust.enabled': false,
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'chat.disableAIFeatures': true,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    ...extra,
  };
}

/** `synapse fake-api` with an empty queue (responses are appended per scenario). */
export async function startFakeApi(dir) {
  const script = path.join(dir, 'fake-api.json');
  const portFile = path.join(dir, 'fake-api.port');
  fs.writeFileSync(script, JSON.stringify({ responses: [], fallback: { text: '(the fake API has no scripted response left)' } }));
  const proc = spawn(PY, ['-m', 'synapse_lsp.cli.entry', 'fake-api', '--script', script, '--port-file', portFile], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const end = Date.now() + 20_000;
  while (!fs.existsSync(portFile) || !fs.readFileSync(portFile, 'utf8').trim()) {
    if (proc.exitCode !== null || Date.now() > end) throw new Error(`fake-api did not start: ${err}`);
    await sleep(50);
  }
  const url = `http://127.0.0.1:${fs.readFileSync(portFile, 'utf8').trim()}`;
  return {
    url,
    proc,
    async script(...responses) {
      const r = await fetch(`${url}/_script`, { method: 'POST', body: JSON.stringify(responses) });
      if (!r.ok) throw new Error(`fake-api /_script: ${r.status} ${await r.text()}`);
    },
    async clear() {
      await fetch(`${url}/_requests`, { method: 'DELETE' });
    },
    /** The Messages API requests received so far (what the model was sent). */
    async requests() {
      const r = await fetch(`${url}/_requests`);
      return r.ok ? r.json() : [];
    },
    stop: () => killGroup(proc),
  };
}

export function killGroup(proc) {
  if (!proc || proc.exitCode !== null) return;
  try {
    process.kill(-proc.pid, 'SIGTERM');
  } catch {
    // gone
  }
}

/** code-server for the profile's folder; env: what the extension host (and so the server) gets. */
export async function startCodeServer(profile, env) {
  const port = await freePort();
  const cfg = path.join(profile.ud, 'cs-config.yaml');
  fs.writeFileSync(cfg, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const logFile = path.join(profile.ud, 'code-server.log');
  const out = fs.openSync(logFile, 'a');
  const proc = spawn(
    path.join(NODE24, 'node'),
    [
      CS_ENTRY,
      '--config', cfg,
      '--user-data-dir', profile.ud,
      '--extensions-dir', profile.ext,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      profile.ws,
    ],
    { env, stdio: ['ignore', out, out], detached: true },
  );
  await waitHttp(`http://127.0.0.1:${port}/healthz`, 60_000, 'code-server');
  return { port, proc, logFile, url: `http://127.0.0.1:${port}/?folder=${encodeURIComponent(profile.ws)}`, stop: () => killGroup(proc) };
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

/** Console errors of the page and its frames (webviews included). */
export function watchConsole(page) {
  const errors = [];
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    errors.push({ text: msg.text(), url: msg.location()?.url ?? '', at: new Date().toISOString() });
    if (process.env.SYNAPSE_E2E_VERBOSE) log(`console error: ${msg.text().slice(0, 200)}`);
  });
  page.on('pageerror', (error) => errors.push({ text: `uncaught: ${error.message}`, url: '', at: new Date().toISOString() }));
  return errors;
}

/** The chat webview's inner frame (the one holding the composer), or null. */
export async function chatFrame(page) {
  for (const frame of page.frames()) {
    try {
      if (await frame.$('.composer textarea')) return frame;
    } catch {
      // detached
    }
  }
  return null;
}

/** Open the Synapse view from the activity bar and wait for its webview. */
export async function openChat(page, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  let clicked = false;
  for (;;) {
    const frame = await chatFrame(page);
    if (frame) return frame;
    if (!clicked) {
      const item = page.locator('.activitybar [aria-label^="Synapse"]').first();
      if (await item.count()) {
        await item.click();
        clicked = true;
      }
    }
    if (Date.now() > end) throw new Error('the Synapse chat view did not appear');
    await sleep(200);
  }
}

/** The chat view is usable: composer there, the server running (no starting banner). */
export async function waitUsable(frame, timeoutMs = 60_000) {
  await frame.waitForFunction(
    () => {
      const b = document.querySelector('.banner');
      const input = document.querySelector('.composer textarea');
      return input && !input.disabled && (!b || b.hidden || !/banner-(starting|restarting|failed|stopped)/.test(b.className));
    },
    null,
    { timeout: timeoutMs, polling: 50 },
  );
}

export async function sendPrompt(frame, text) {
  const input = frame.locator('.composer textarea');
  await input.click();
  await input.fill(text);
  await input.press('Enter');
}

/** Wait for agent text containing `needle` in the chat. */
export async function waitText(frame, needle, timeoutMs = 30_000) {
  await frame.waitForFunction(
    (n) => [...document.querySelectorAll('.msg.agent')].some((el) => el.textContent.includes(n)),
    needle,
    { timeout: timeoutMs, polling: 50 },
  );
}

/** The Synapse output channel's log file(s) under the user-data dir. */
export function extensionLog(profile) {
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/synapse/i.test(p) && p.endsWith('.log')) found.push(p);
    }
  };
  const logs = path.join(profile.ud, 'logs');
  if (fs.existsSync(logs)) walk(logs);
  return found.map((f) => fs.readFileSync(f, 'utf8')).join('\n');
}

/** Extension-host log lines at error level that name our extension. */
export function extensionHostErrors(profile) {
  const lines = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/exthost\.log$|remoteexthost\.log$/.test(e.name)) {
        for (const line of fs.readFileSync(p, 'utf8').split('\n')) {
          if (/\[error\]/i.test(line) && /synapse/i.test(line)) lines.push(line);
        }
      }
    }
  };
  const logs = path.join(profile.ud, 'logs');
  if (fs.existsSync(logs)) walk(logs);
  return lines;
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
