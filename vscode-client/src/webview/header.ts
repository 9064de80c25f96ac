/**
 * The top of the chat view: the chat picker with New and Delete, and the server
 * banner (starting / restarting / failed / stopped, or a warning while running)
 * with Restart, Settings and Logs.
 */

import type { ChatState } from '../stateModel';
import { h, icon } from './dom';
import type { FromWebview } from './messages';

export interface HeaderHost {
  state(): ChatState;
  post(message: FromWebview): void;
}

export class Header {
  readonly el: HTMLElement;
  readonly banner: HTMLElement;
  private readonly sessionSelect: HTMLSelectElement;

  constructor(private readonly host: HeaderHost) {
    this.el = h('header', { class: 'header' });
    this.sessionSelect = h('select', { class: 'session-select', title: 'Chats', 'aria-label': 'Chats' });
    const newButton = h('button', { class: 'icon-button new-chat', title: 'New chat', 'aria-label': 'New chat' });
    newButton.appendChild(icon('add'));
    const deleteButton = h('button', { class: 'icon-button delete-chat', title: 'Delete this chat', 'aria-label': 'Delete this chat' });
    deleteButton.appendChild(icon('trash'));
    this.el.append(this.sessionSelect, newButton, deleteButton);
    this.banner = h('div', { class: 'banner', role: 'status', hidden: '', 'data-testid': 'server-banner' });

    newButton.addEventListener('click', () => this.host.post({ type: 'newSession' }));
    deleteButton.addEventListener('click', () => {
      const active = this.host.state().activeSessionId;
      if (active) this.host.post({ type: 'deleteSession', sessionId: active });
    });
    this.sessionSelect.addEventListener('change', () => {
      const id = this.sessionSelect.value;
      if (id) this.host.post({ type: 'selectSession', sessionId: id });
    });
  }

  /** The chat picker: every stored chat (● while running), the shown one selected. */
  render(): void {
    const state = this.host.state();
    const select = this.sessionSelect;
    const sessions = state.sessions;
    const active = state.activeSessionId;
    select.textContent = '';
    if (!active) select.appendChild(h('option', { value: '' }, sessions.length ? 'Choose a chat…' : 'No chats yet'));
    for (const s of sessions) {
      const running = state.byId[s.sessionId]?.running ?? s.busy ?? false;
      const option = h('option', { value: s.sessionId }, `${running ? '● ' : ''}${s.title || 'Untitled chat'}`);
      if (s.updatedAt) option.title = s.updatedAt;
      select.appendChild(option);
    }
    select.value = active ?? '';
  }

  renderBanner(): void {
    const { phase, message } = this.host.state().server;
    const b = this.banner;
    if (phase === 'running' && !message) {
      b.hidden = true;
      return;
    }
    b.hidden = false;
    // running with a message: it runs, but something needs the user (a protocol mismatch)
    b.className = `banner banner-${phase === 'running' ? 'warning' : phase}`;
    b.dataset.phase = phase;
    b.textContent = '';
    const text =
      phase === 'running'
        ? (message ?? '')
        : phase === 'starting'
          ? `Starting the Synapse server…${message ? ' (' + message + ')' : ''}`
          : phase === 'restarting'
            ? `Synapse server stopped: ${message ?? ''}`
            : phase === 'failed'
              ? (message ?? 'Synapse server failed.')
              : 'Synapse server stopped.';
    b.appendChild(h('span', { class: 'banner-text', 'data-testid': 'server-message' }, text));
    if (phase !== 'running') {
      // Restart always works (a half-started server is disposed first).
      b.appendChild(h('button', { class: 'link-button', 'data-action': 'restartServer', 'data-testid': 'server-restart' }, 'Restart'));
    }
    if (phase === 'failed' || phase === 'stopped') {
      b.appendChild(h('button', { class: 'link-button', 'data-action': 'openServerSettings', 'data-testid': 'server-settings' }, 'Settings'));
    }
    b.appendChild(h('button', { class: 'link-button', 'data-action': 'showLogs', 'data-testid': 'server-logs' }, 'Logs'));
  }
}
