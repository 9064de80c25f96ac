/**
 * Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; no
 * browser download) loading the built webview with a stand-in for
 * acquireVsCodeApi. Shared by the webview test and the rendering benchmark.
 */

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

import { chromium, type BrowserContext, type Page } from 'playwright-core';

import { webviewHtml } from '../src/webview/html';

export const CLIENT_DIR = process.env.SYNAPSE_CLIENT_DIR || path.resolve(__dirname, '..');
export const OUTPUT_DIR = path.join(CLIENT_DIR, 'test-output');
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const NONCE = 'testnonce0123456789abcdefABCDEF01';

export function chromiumUnavailable(): string | null {
  return fs.existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * Build dist/ (esbuild, ~1 s) when it is missing or older than src/; a fresh
 * bundle (e.g. the production one `npm run ci` built) is tested as it is.
 */
export function buildWebview(): void {
  const bundle = path.join(CLIENT_DIR, 'dist', 'webview.js');
  if (fs.existsSync(bundle) && fs.statSync(bundle).mtimeMs >= newestMtime(path.join(CLIENT_DIR, 'src'))) return;
  execFileSync(process.execPath, ['esbuild.mjs'], { cwd: CLIENT_DIR, stdio: 'pipe' });
}

/** The page the extension would serve, with file: URLs instead of vscode-resource ones. */
export function writeWebviewPage(): string {
  const dir = path.join(OUTPUT_DIR, 'webview');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'index.html');
  const dist = path.join(CLIENT_DIR, 'dist');
  fs.writeFileSync(
    file,
    webviewHtml({
      cspSource: 'file:',
      nonce: NONCE,
      scriptUri: pathToFileURL(path.join(dist, 'webview.js')).toString(),
      styleUri: pathToFileURL(path.join(dist, 'webview.css')).toString(),
    }),
  );
  return pathToFileURL(file).toString();
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'synapse-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 420, height: 900 },
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Stand-in for VS Code's webview API: records posted messages in
 * `window.__posted` and keeps setState in sessionStorage (so a reload is
 * like the view being hidden and shown again).
 */
export const VSCODE_STUB = `
  window.__posted = [];
  window.__errors = [];
  window.addEventListener('error', (e) => window.__errors.push(String(e.message)));
  window.acquireVsCodeApi = () => ({
    postMessage: (m) => window.__posted.push(JSON.parse(JSON.stringify(m))),
    getState: () => { const s = sessionStorage.getItem('vscodeState'); return s ? JSON.parse(s) : undefined; },
    setState: (s) => sessionStorage.setItem('vscodeState', JSON.stringify(s)),
  });
`;

export async function openWebview(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  await page.addInitScript(VSCODE_STUB);
  await page.goto(url);
  await page.waitForFunction(() => (window as unknown as { synapseChat?: unknown }).synapseChat !== undefined);
  return page;
}
