/**
 * Webview entry: wires the ChatView to the VS Code webview API.
 */

import '@vscode/codicons/dist/codicon.css';
import './style.css';

import { warmUp } from './markdown';
import type { ToWebview } from './messages';
import { ChatView, type UiState } from './render';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const root = document.getElementById('app') ?? document.body;
const saved = (vscode.getState() as Partial<UiState> | undefined) ?? undefined;

const view = new ChatView(
  root,
  {
    post: (message) => vscode.postMessage(message),
    persist: (ui) => vscode.setState(ui),
  },
  saved,
);

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
  const m = event.data;
  if (!m || typeof m !== 'object') return;
  switch (m.type) {
    case 'snapshot':
      view.setSnapshot(m.state);
      break;
    case 'action':
      view.dispatch(m.action);
      break;
    case 'actions':
      for (const action of m.actions) view.dispatch(action);
      break;
    case 'attach':
      view.attach(m.attachment);
      break;
    case 'focusInput':
      view.focusInput();
      break;
    case 'restoreInput':
      view.restoreInput(m.text);
      break;
  }
});

// Tests and benchmarks reach the view through this handle.
(window as unknown as { synapseChat: ChatView }).synapseChat = view;

vscode.postMessage({ type: 'ready' });

// Compile highlight grammars and the sanitiser config while nothing happens.
const idle = (window as unknown as { requestIdleCallback?: (cb: () => void, o?: { timeout: number }) => void }).requestIdleCallback;
if (idle) idle(() => warmUp(), { timeout: 500 });
else setTimeout(warmUp, 50);
