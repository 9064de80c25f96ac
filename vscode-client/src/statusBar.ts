/**
 * The status bar item: the server's phase, the chats running, the sandbox mode;
 * a click opens the chat view (which shows what happened, with Restart / Settings
 * / Logs buttons).
 */

import * as vscode from 'vscode';

import { VIEW_ID } from './chatView';
import { sandboxLabel, type SandboxInfo } from './protocol';
import { problemLabel, type ProblemKind } from './startProblems';
import type { ChatState } from './stateModel';
import { busySessions } from './stateSelectors';

export function updateStatusBar(
  item: vscode.StatusBarItem,
  state: ChatState,
  sandbox: SandboxInfo | null,
  problemKind: ProblemKind | null,
): void {
  const phase = state.server.phase;
  const busy = busySessions(state);
  item.command = `${VIEW_ID}.focus`;
  item.backgroundColor = undefined;
  switch (phase) {
    case 'starting':
      item.text = '$(sync~spin) Synapse';
      item.tooltip = `Synapse: starting the language server…${state.server.message ? ' (' + state.server.message + ')' : ''}`;
      break;
    case 'restarting':
      item.text = '$(sync~spin) Synapse';
      item.tooltip = `Synapse: ${state.server.message ?? 'restarting'}`;
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      break;
    case 'running': {
      const label = sandboxLabel(sandbox);
      const mode = label.text ? ` · ${label.text}` : '';
      item.text = busy > 0 ? `$(loading~spin) Synapse (${busy})${mode}` : `$(comment-discussion) Synapse${mode}`;
      item.tooltip = busy > 0 ? `Synapse: ${busy} chat(s) running` : 'Synapse: ready';
      if (sandbox) item.tooltip += `\nSandbox: ${sandbox.description}`;
      if (label.warn) item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      if (state.server.message) {
        item.tooltip = `Synapse: ${state.server.message}`;
        item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      }
      break;
    }
    case 'stopped':
      item.text = '$(circle-slash) Synapse';
      item.tooltip = 'Synapse: server stopped';
      break;
    case 'failed':
      item.text = `$(error) Synapse: ${problemLabel(problemKind)}`;
      item.tooltip = `${state.server.message ?? 'Synapse server failed'} — click to open the chat view`;
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
      break;
  }
}
