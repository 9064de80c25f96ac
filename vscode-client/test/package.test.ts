/**
 * The .vsix is packaged with --no-dependencies: the bundles must not require
 * anything at run time but Node built-ins and `vscode`.
 */

import { builtinModules } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { buildWebview } from './browser';
import { SERVER_SETTING_KEYS } from '../src/protocol';

const root = path.resolve(__dirname, '..');

describe('bundles', () => {
  it('need nothing outside the bundle but node built-ins and vscode', () => {
    const bundle = path.join(root, 'dist', 'extension.js');
    buildWebview(); // builds dist/ (extension and webview) when it is older than src/
    const code = fs.readFileSync(bundle, 'utf8');
    const required = new Set([...code.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]));
    const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
    const outside = [...required].filter((m) => m !== 'vscode' && !builtins.has(m));
    expect(outside).toEqual([]);
    expect(required.has('vscode')).toBe(true);
  });

  it('package.json points at the bundle and declares the view, commands and settings', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.main).toBe('./dist/extension.js');
    // `vsce package` (npm run package) builds dist/ itself: the entry point is never missing.
    expect(pkg.scripts['vscode:prepublish']).toMatch(/esbuild\.mjs --production/);
    // Remote-SSH / WSL / containers: the server runs next to the files.
    expect(pkg.extensionKind).toEqual(['workspace']);
    expect(pkg.contributes.views.synapse[0]).toMatchObject({ type: 'webview', id: 'synapse.chat' });
    const commands = pkg.contributes.commands.map((c: { command: string }) => c.command);
    for (const c of ['synapse.newChat', 'synapse.sendSelection', 'synapse.cancel', 'synapse.restartShell', 'synapse.refreshTools', 'synapse.showLogs', 'synapse.openSession', 'synapse.setApiKey']) {
      expect(commands).toContain(c);
    }
    // Commands the server advertises are registered by the language client: no clash.
    for (const c of commands) expect(c).not.toMatch(/^synapse\.(session|shell|tools)\.|^synapse\.status$/);
    const settings = Object.keys(pkg.contributes.configuration.properties);
    for (const k of SERVER_SETTING_KEYS) {
      expect(settings).toContain(`synapse.${k}`);
    }
    expect(settings).toContain('synapse.server.command');
    expect(settings).toContain('synapse.pythonPath');
  });
});
