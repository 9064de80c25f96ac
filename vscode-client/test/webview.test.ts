/**
 * The chat webview in headless Chromium: the built bundle under its real CSP,
 * a stand-in acquireVsCodeApi, and the stream recorded from the real server
 * (test/fixtures/recorded-stream.json) replayed as the extension posts it.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { protocolMismatch } from '../src/protocol';
import { problemMessage } from '../src/startProblems';
import type { Action } from '../src/state';
import { foldAll } from '../src/state';
import {
  CLIENT_DIR,
  OUTPUT_DIR,
  buildWebview,
  chromiumUnavailable,
  launchBrowser,
  openWebview,
  writeWebviewPage,
  type Browser,
} from './browser';

const skipReason = chromiumUnavailable();
const stream: Action[] = JSON.parse(
  fs.readFileSync(path.join(CLIENT_DIR, 'test', 'fixtures', 'recorded-stream.json'), 'utf8'),
) as Action[];

type Posted = { type: string; [k: string]: unknown };

async function post(page: Page, messages: unknown[]): Promise<void> {
  await page.evaluate((ms) => {
    for (const data of ms) window.dispatchEvent(new MessageEvent('message', { data }));
    const view = (window as unknown as { synapseChat: { flush(): void; behind: boolean } }).synapseChat;
    view.flush();
    while (view.behind) view.flush(); // rendering is time-sliced across frames
  }, messages);
}

async function replay(page: Page, actions: Action[]): Promise<void> {
  await post(
    page,
    actions.map((action) => ({ type: 'action', action })),
  );
}

/** Open a tool card (its body renders on the asynchronous `toggle` event). */
async function openCard(card: Locator): Promise<void> {
  if (!(await card.evaluate((el) => (el as HTMLDetailsElement).open))) await card.locator('summary').click();
  await card.evaluate(
    (el) =>
      new Promise<void>((resolve) => {
        const check = (): void => ((el as HTMLDetailsElement).open && !(el as HTMLElement).dataset.bodyStale ? resolve() : void setTimeout(check, 10));
        check();
      }),
  );
}

async function posted(page: Page): Promise<Posted[]> {
  return page.evaluate(() => (window as unknown as { __posted: Posted[] }).__posted);
}

describe.skipIf(skipReason !== null)('chat webview in headless Chromium', () => {
  let browser: Browser;
  let url: string;
  let page: Page;

  beforeAll(async () => {
    buildWebview();
    url = writeWebviewPage();
    browser = await launchBrowser();
    page = await openWebview(browser.context, url);
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('loads under its CSP and says ready', async () => {
    const messages = await posted(page);
    expect(messages[0]).toEqual({ type: 'ready' });
    expect(await page.locator('.empty-title').textContent()).toContain('Ask Synapse');
    expect(await page.evaluate(() => (window as unknown as { __errors: string[] }).__errors)).toEqual([]);
  });

  it('replays the recorded real-server stream: text, one card per call, plan, Stop', async () => {
    // Up to the second prompt: the turn is running.
    const secondPrompt = stream.findIndex((a, i) => a.type === 'promptStarted' && i > stream.findIndex((b) => b.type === 'promptStarted'));
    const sleepCall = stream.findIndex((a) => a.type === 'update' && a.params.update.sessionUpdate === 'tool_call' && JSON.stringify(a).includes('sleep 30'));
    expect(secondPrompt).toBeGreaterThan(0);
    expect(sleepCall).toBeGreaterThan(secondPrompt);
    await replay(page, stream.slice(0, sleepCall + 1));

    // Running: input disabled, Stop shown, the sleep card running.
    expect(await page.locator('textarea.input').isDisabled()).toBe(true);
    expect(await page.locator('button.stop').isVisible()).toBe(true);
    expect(await page.locator('button.send').isVisible()).toBe(false);
    const running = page.locator('.tool[data-status="in_progress"]');
    expect(await running.count()).toBe(1);
    expect(await running.locator('.tool-command').textContent()).toBe('sleep 30');
    await page.waitForTimeout(150); // let the view settle at the bottom
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'webview-running.png') });

    await page.locator('button.stop').click();
    await page.keyboard.press('Escape');
    const cancel = (await posted(page)).filter((m) => m.type === 'cancel');
    const sessionId = stream.find((a): a is Extract<Action, { type: 'sessionCreated' }> => a.type === 'sessionCreated')!.session.sessionId;
    expect(cancel).toEqual([
      { type: 'cancel', sessionId },
      { type: 'cancel', sessionId },
    ]);

    // The rest of the stream, including the session reload (replay).
    await replay(page, stream.slice(sleepCall + 1));
    const expected = foldAll(stream);
    const session = expected.byId[sessionId];

    // Streamed Markdown: bold, inline code, a highlighted code block, a link.
    const agent = page.locator('.msg.agent');
    expect(await agent.count()).toBeGreaterThan(0);
    const agentText = (await agent.allTextContents()).join('\n');
    expect(agentText).toContain("I'll look around first.");
    expect(await page.locator('.msg.agent strong', { hasText: 'alpha' }).count()).toBe(1);
    expect(await page.locator('.msg.agent code', { hasText: 'beta' }).count()).toBe(1);
    expect(await page.locator('.msg.agent pre.code-block code.language-python .hljs-keyword', { hasText: 'def' }).count()).toBe(1);
    expect(await page.locator('.msg.agent a[href="https://example.com/docs"]').count()).toBe(1);

    // One card per tool call, with the state's status.
    const cards = page.locator('.transcript > .tool');
    const tools = Object.values(session.tools);
    expect(await cards.count()).toBe(tools.length);
    for (const tool of tools) {
      const card = page.locator(`.tool[data-tool-call-id="${tool.id}"]`);
      expect(await card.count()).toBe(1);
      expect(await card.getAttribute('data-status')).toBe(tool.status);
      // Closed cards render their body when opened.
      await openCard(card);
      expect(await card.locator('.tool-command').textContent()).toBe(tool.command);
      await card.locator('summary').click();
    }
    const statuses = tools.map((t) => t.status);
    expect(statuses).toEqual(['completed', 'failed', 'completed', 'cancelled']);
    // The failed call shows its exit code; the first shows its output with stderr marked.
    const failed = page.locator('.tool[data-status="failed"]');
    expect(await failed.locator('.tool-exit').textContent()).toMatch(/^exit [1-9]/);
    const first = page.locator(`.tool[data-tool-call-id="${tools[0].id}"]`);
    await openCard(first);
    expect(await first.locator('.tool-output').textContent()).toContain('alpha\nbeta\n');
    expect(await first.locator('.tool-output .stderr').textContent()).toContain('oops');

    // Plan checklist.
    const plan = page.locator('.plan li');
    expect(await plan.count()).toBe(3);
    expect(await plan.evaluateAll((els) => els.map((e) => [e.textContent, e.getAttribute('data-status')]))).toEqual([
      ['☑Look at the files', 'completed'],
      ['◐Fix parse()', 'in_progress'],
      ['☐Run the tests', 'pending'],
    ]);

    // Idle again, the cancelled turn marked.
    expect(await page.locator('textarea.input').isDisabled()).toBe(false);
    expect(await page.locator('.turn-end.stop-cancelled').count()).toBe(1);
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'webview.png') });
  });

  it('never executes script from Markdown (recorded payload and more)', async () => {
    // The recorded answer carried <img onerror> and <script>: shown as text.
    expect(await page.locator('.msg.agent').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('<img src=x onerror="window.__pwned=1">')]),
    );
    const sessionId = (await page.evaluate(() => (window as unknown as { synapseChat: { getState(): { activeSessionId: string } } }).synapseChat.getState().activeSessionId));
    const payload = [
      '<img src=x onerror="window.__pwned=3">',
      '<script>window.__pwned=4</script>',
      '[click](javascript:window.__pwned=5)',
      '![x](javascript:window.__pwned=6)',
      '<a href="javascript:window.__pwned=7">a</a>',
      '<svg onload="window.__pwned=8"></svg>',
      '<iframe src="javascript:window.__pwned=9"></iframe>',
      '```html\n<img src=x onerror="window.__pwned=10">\n```',
    ].join('\n\n');
    await replay(page, [
      { type: 'update', params: { sessionId, update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: payload } } } },
      { type: 'update', params: { sessionId, update: { sessionUpdate: 'tool_call', toolCallId: 'evil', title: 'Run `<img src=x onerror="window.__pwned=11">`', kind: 'execute', status: 'in_progress', rawInput: { command: '<script>window.__pwned=12</script>', restart: false }, locations: [] } } },
      { type: 'update', params: { sessionId, update: { sessionUpdate: 'tool_call_update', toolCallId: 'evil', output: { stream: 'stdout', text: '<img src=x onerror="window.__pwned=13">' } } } },
      { type: 'update', params: { sessionId, update: { sessionUpdate: 'turn_finished', stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 } } } },
    ]);
    await page.waitForTimeout(200);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('.transcript script, .transcript iframe, .transcript svg').count()).toBe(0);
    expect(await page.locator('.transcript [onerror], .transcript [onload]').count()).toBe(0);
    const hrefs = await page.locator('.transcript a[href]').evaluateAll((els) => els.map((e) => e.getAttribute('href')));
    expect(hrefs.filter((h) => /^javascript:/i.test(h ?? ''))).toEqual([]);
    const evil = page.locator('.tool[data-tool-call-id="evil"]');
    expect(await evil.locator('.tool-title code').textContent()).toBe('<img src=x onerror="window.__pwned=11">');
    await openCard(evil);
    expect(await evil.locator('.tool-output').textContent()).toBe('<img src=x onerror="window.__pwned=13">');
    expect(await evil.locator('.tool-command').textContent()).toBe('<script>window.__pwned=12</script>');
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  });

  it('sends with Enter, adds lines with Shift+Enter, recalls history, keeps attachments', async () => {
    const sessionId = await page.evaluate(() => (window as unknown as { synapseChat: { getState(): { activeSessionId: string } } }).synapseChat.getState().activeSessionId);
    await post(page, [
      {
        type: 'attach',
        attachment: { kind: 'selection', uri: 'file:///p/parse.py', label: 'parse.py:1-2', text: 'def parse(s):', range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } } },
      },
    ]);
    expect(await page.locator('.chip-selection').textContent()).toContain('parse.py:1-2');
    const input = page.locator('textarea.input');
    await input.click();
    await input.type('first line');
    await input.press('Shift+Enter');
    await input.type('second line');
    await input.press('Enter');
    const prompts = (await posted(page)).filter((m) => m.type === 'prompt');
    expect(prompts.at(-1)).toMatchObject({
      type: 'prompt',
      sessionId,
      text: 'first line\nsecond line',
      attachments: [expect.objectContaining({ kind: 'selection', label: 'parse.py:1-2' })],
    });
    expect(await input.inputValue()).toBe('');
    expect(await page.locator('.chip').count()).toBe(0);
    await input.press('ArrowUp');
    expect(await input.inputValue()).toBe('first line\nsecond line');
    await input.press('ArrowDown');
    await input.press('ArrowDown');
    expect(await input.inputValue()).toBe('');

    await page.locator('button.add-selection').click();
    await page.locator('button.add-file').click();
    const kinds = (await posted(page)).map((m) => m.type);
    expect(kinds).toContain('addSelection');
    expect(kinds).toContain('addActiveFile');
  });

  it('restores its state when hidden and shown again (setState/getState)', async () => {
    await page.locator('textarea.input').fill('a draft');
    await page.waitForTimeout(700); // persisted at most every 500 ms
    const before = await page.locator('.transcript > *').count();
    await page.reload();
    await page.waitForFunction(() => (window as unknown as { synapseChat?: unknown }).synapseChat !== undefined);
    // Before any snapshot from the extension, the last view is back.
    expect(await page.locator('.transcript > *').count()).toBe(before);
    expect(await page.locator('textarea.input').inputValue()).toBe('a draft');
    expect(await page.locator('.plan li').count()).toBe(3);
    expect(await posted(page)).toEqual([{ type: 'ready' }]);
  });

  it('fits a narrow sidebar without horizontal scrolling', async () => {
    await page.setViewportSize({ width: 220, height: 700 });
    await page.waitForTimeout(50);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'webview-narrow.png') });
    await page.setViewportSize({ width: 420, height: 900 });
  });

  it('asks a permission question in its tool card (waiting for your answer, three buttons) and shows a denial as Denied', async () => {
    const sid = 'perm-session';
    const upd = (update: Record<string, unknown>): unknown => ({ type: 'update', params: { sessionId: sid, update } });
    const longCommand = 'echo ' + 'x'.repeat(600) + ' > /tmp/outside.txt';
    await post(page, [
      {
        type: 'actions',
        actions: [
          { type: 'sessionCreated', session: { sessionId: sid, title: 'perm', workspaceUri: 'file:///home/me/ws' } },
          { type: 'promptStarted', sessionId: sid, text: 'write it' },
          upd({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'write it' } }),
          upd({ sessionUpdate: 'tool_call', toolCallId: 'w1', title: 'Run echo', kind: 'execute', status: 'in_progress', rawInput: { command: longCommand }, locations: [{ path: '/home/me/ws/../outside.txt' }, { path: '/home/me/ws/src/a.py' }] }),
          { type: 'permissionAsked', toolCallId: 'w1', question: { id: 'q9', message: `Synapse wants to run:\n  ${longCommand}\nin /home/me/ws\n(writes outside the workspace: /tmp/outside.txt)`, actions: ['Allow once', 'Allow for this session', 'Deny'] } },
        ],
      },
    ]);
    const card = page.locator('.tool[data-tool-call-id="w1"]');
    expect(await card.locator('.tool-status').textContent()).toBe('waiting for your answer');
    expect(await card.locator('[data-testid="permission-question"]').isVisible()).toBe(true);
    for (const id of ['permission-allow-once', 'permission-allow-session', 'permission-deny']) {
      expect(await card.locator(`[data-testid="${id}"]`).isVisible()).toBe(true);
    }
    expect(await card.locator('.location').allTextContents()).toEqual(['/home/me/outside.txt', 'src/a.py']);
    // A long command is clipped; a click shows it whole.
    const command = card.locator('.tool-command');
    const clipped = await command.evaluate((e) => e.clientHeight);
    await command.click();
    expect(await command.evaluate((e) => e.clientHeight)).toBeGreaterThan(clipped);
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'webview-permission.png') });
    await card.locator('[data-testid="permission-deny"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'permissionAnswer', id: 'q9', answer: 'Deny' });
    await post(page, [
      { type: 'action', action: { type: 'permissionAnswered', id: 'q9' } },
      { type: 'action', action: upd({ sessionUpdate: 'tool_call_update', toolCallId: 'w1', status: 'denied', rawOutput: { exitCode: 126, isError: true, category: 'permission_denied' } }) },
    ]);
    expect(await card.locator('.tool-status').textContent()).toBe('denied');
    expect(await card.locator('.tool-exit').textContent()).toBe('');
    expect(await card.locator('[data-testid="permission-question"]').count()).toBe(0);
  });

  it('shows an edit card\'s diff inline with +/− counts, Open diff and Revert buttons, and the turn\'s changed files', async () => {
    const sid = 'diff-session';
    const upd = (update: Record<string, unknown>): unknown => ({ type: 'update', params: { sessionId: sid, update } });
    const long = Array.from({ length: 60 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    await post(page, [
      {
        type: 'actions',
        actions: [
          { type: 'server', phase: 'running', message: null },
          { type: 'sessionCreated', session: { sessionId: sid, title: 'diffs', workspaceUri: 'file:///home/me/ws' } },
          { type: 'promptStarted', sessionId: sid, text: 'edit things' },
          upd({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'edit things' } }),
          upd({ sessionUpdate: 'tool_call', toolCallId: 'd1', title: 'Edit `a.py`', kind: 'edit', status: 'in_progress', rawInput: { command: "edit a.py 'y = 2' 'y = 3'" } }),
          upd({
            sessionUpdate: 'tool_call_update',
            toolCallId: 'd1',
            status: 'completed',
            content: [
              { type: 'diff', path: '/home/me/ws/a.py', oldText: 'x = 1\ny = 2\n', newText: 'x = 1\ny = 3\nz = <img src=x onerror=alert(1)>\n' },
              { type: 'content', content: { type: 'text', text: 'edited' } },
            ],
            rawOutput: { exitCode: 0, isError: false },
          }),
          upd({ sessionUpdate: 'tool_call', toolCallId: 'd2', title: 'Write files', kind: 'edit', status: 'in_progress', rawInput: { command: 'write new.txt hi && write big.txt …' } }),
          upd({
            sessionUpdate: 'tool_call_update',
            toolCallId: 'd2',
            status: 'completed',
            content: [
              { type: 'diff', path: '/home/me/ws/new.txt', oldText: null, newText: 'hi\n' },
              { type: 'diff', path: '/home/me/ws/big.txt', oldText: '', newText: long },
              { type: 'content', content: { type: 'text', text: 'ok' } },
            ],
          }),
          upd({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
        ],
      },
    ]);
    const card = page.locator('.tool[data-tool-call-id="d1"]');
    // An edit card is open on its diff; the header has the counts.
    expect(await card.evaluate((el) => (el as HTMLDetailsElement).open)).toBe(true);
    expect(await card.locator('.tool-diffstat').textContent()).toBe('+2 −1');
    const file = card.locator('[data-testid="diff-file"]');
    expect(await file.locator('.diff-path').textContent()).toBe('a.py');
    expect(await file.locator('.diff-line').allTextContents()).toEqual(['@@ -1,2 +1,3 @@', ' x = 1', '-y = 2', '+y = 3', '+z = <img src=x onerror=alert(1)>']);
    expect(await file.locator('.diff-add').count()).toBe(2);
    expect(await file.locator('.diff-del').count()).toBe(1);
    expect(await page.locator('.diff-body img').count()).toBe(0); // text, never HTML
    await file.locator('[data-testid="open-diff"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'openDiff', sessionId: sid, toolCallId: 'd1', index: 0 });
    await file.locator('[data-testid="revert-edit"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'revertEdit', sessionId: sid, toolCallId: 'd1', index: 0 });

    // Several files in one call: one diff each; a new file says so; a long diff is clipped.
    const card2 = page.locator('.tool[data-tool-call-id="d2"]');
    expect(await card2.locator('.tool-diffstat').textContent()).toBe('+61');
    const files = card2.locator('[data-testid="diff-file"]');
    expect(await files.count()).toBe(2);
    expect(await files.nth(0).locator('.diff-new').textContent()).toBe('new file');
    await files.nth(1).locator('[data-testid="revert-edit"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'revertEdit', sessionId: sid, toolCallId: 'd2', index: 1 });
    const big = files.nth(1);
    expect(await big.locator('.diff-line').count()).toBe(30);
    expect(await big.locator('.diff-more').textContent()).toContain('31 more lines');
    await big.locator('[data-action="diffMore"]').click();
    await post(page, []);
    expect(await big.locator('.diff-line').count()).toBe(61);
    await big.locator('[data-action="diffLess"]').click();
    await post(page, []);
    expect(await big.locator('.diff-line').count()).toBe(30);

    // The turn's summary: every changed file with its counts.
    const summary = page.locator('[data-testid="turn-changes"]').last();
    expect(await summary.textContent()).toBe('Changed files: a.py +2 −1, new.txt +1, big.txt +60');
    await summary.locator('a', { hasText: 'new.txt' }).click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'openFile', path: '/home/me/ws/new.txt' });
    await card.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'webview-diff.png') });
    expect(await page.evaluate(() => (window as unknown as { __errors: string[] }).__errors)).toEqual([]);
  });

  it('shows the server state and offers a restart when it failed', async () => {
    const message = problemMessage({ kind: 'not-found', command: '/nope/synapse lsp', source: 'from synapse.server.command', detail: 'no such file (ENOENT)' });
    await post(page, [{ type: 'action', action: { type: 'server', phase: 'failed', message } }]);
    const banner = page.locator('[data-testid="server-banner"]');
    expect(await banner.getAttribute('data-phase')).toBe('failed');
    expect(await page.locator('[data-testid="server-message"]').textContent()).toBe(message);
    expect(message).toContain('Synapse server not found');
    await page.locator('[data-testid="server-restart"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'restartServer' });
    await page.locator('[data-testid="server-settings"]').click();
    expect((await posted(page)).at(-1)).toEqual({ type: 'openServerSettings' });
    expect(await page.locator('button.send').isDisabled()).toBe(true);
    // A start in flight can be restarted too (a half-started server is disposed first).
    await post(page, [{ type: 'action', action: { type: 'server', phase: 'starting', message: null } }]);
    expect(await page.locator('[data-testid="server-restart"]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid="server-message"]').textContent()).toBe('Starting the Synapse server…');
  });

  it('keeps a running server usable but shows a protocol mismatch', async () => {
    const message = protocolMismatch({ capabilities: { experimental: { synapse: { protocolVersion: 0 } } } });
    await post(page, [{ type: 'action', action: { type: 'server', phase: 'running', message } }]);
    const banner = page.locator('.banner');
    expect(await banner.isVisible()).toBe(true);
    expect(await banner.getAttribute('class')).toContain('banner-warning');
    expect(await banner.textContent()).toContain('Synapse server speaks protocol 0, this extension expects 1');
    await post(page, [{ type: 'action', action: { type: 'server', phase: 'running', message: null } }]);
    expect(await banner.isVisible()).toBe(false);
  });
});

if (skipReason !== null) {
  describe('chat webview in headless Chromium', () => {
    it.skip(`skipped: ${skipReason}`, () => undefined);
  });
}
