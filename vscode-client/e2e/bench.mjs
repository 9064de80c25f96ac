#!/usr/bin/env node
/**
 * Benchmark in the real VS Code (not run in CI): median of 5 of
 *   - window load -> usable chat view: page navigation until the chat view's composer is
 *     there and the (bundled) server is running (a new window = a new extension host
 *     and server);
 *   - Send -> first text: Enter in the composer until the fake model's first text shows.
 * Same setup as the suite (e2e/run.mjs): code-server + the built .vsix + fake API.
 *
 *   node e2e/bench.mjs [RUNS]
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import {
  OUT,
  installCodeServer,
  launchBrowser,
  log,
  makeProfile,
  median,
  openChat,
  pathWithoutSynapse,
  sendPrompt,
  startCodeServer,
  startFakeApi,
  waitText,
  waitUsable,
} from './lib.mjs';

const RUNS = Number(process.argv[2] || 5);
installCodeServer();
const profile = makeProfile({ 'a.txt': 'alpha\n' });
const api = await startFakeApi(profile.dir);
const cs = await startCodeServer(profile, {
  PATH: pathWithoutSynapse(),
  HOME: profile.home,
  SYNAPSE_HOME: path.join(profile.home, '.synapse'),
  LANG: 'C.UTF-8',
  TMPDIR: process.env.TMPDIR || '/tmp',
  ANTHROPIC_API_KEY: 'sk-ant-fake-e2e-key',
  ANTHROPIC_BASE_URL: api.url,
});
const browser = await launchBrowser();
const load = [];
const first = [];
try {
  // One warm-up window: code-server's first load compiles and caches.
  for (let i = 0; i <= RUNS; i++) {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    const t0 = Date.now();
    await page.goto(cs.url, { timeout: 60_000 });
    const frame = await openChat(page, 90_000);
    await waitUsable(frame, 90_000);
    const usable = Date.now() - t0;
    const marker = `First words ${i}.`;
    await api.script({ text: `${marker} And the rest of a longer answer follows here.` });
    const t1 = Date.now();
    await sendPrompt(frame, `hello ${i}`);
    await waitText(frame, marker, 30_000);
    const text = Date.now() - t1;
    if (i > 0) {
      load.push(usable);
      first.push(text);
    }
    log(`${i === 0 ? 'warm-up' : `run ${i}`}: window load -> usable chat ${usable} ms; Send -> first text ${text} ms`);
    await context.close();
  }
} finally {
  await browser.close();
  cs.stop();
  api.stop();
  fs.rmSync(profile.dir, { recursive: true, force: true });
}
const summary = `median of ${RUNS}: window load -> usable chat view ${median(load)} ms; Send -> first text ${median(first)} ms`;
log(summary);
fs.mkdirSync(OUT, { recursive: true });
fs.writeFileSync(path.join(OUT, 'bench.json'), JSON.stringify({ load, first, summary }, null, 2));
