/**
 * The composer at the bottom of the chat view: attachment chips, the input (Enter
 * sends, Shift+Enter adds a line, ↑/↓ recall history), + Selection / + File,
 * the status line, and Send or Stop (Escape stops a running turn).
 */

import type { ChatState } from '../stateModel';
import { activeSession } from '../stateSelectors';
import { h, icon, usageText } from './dom';
import type { Attachment, FromWebview, UiState } from './messages';

const HISTORY_MAX = 100;

export interface ComposerHost {
  /** The draft, history and attachments live here (saved with the view). */
  readonly ui: UiState;
  state(): ChatState;
  post(message: FromWebview): void;
  /** Save the UI state soon. */
  persist(): void;
}

export class Composer {
  readonly el: HTMLElement;
  private readonly attachmentsEl: HTMLElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly statusLine: HTMLElement;
  private historyIndex = -1;
  private wasRunning = false;

  /** `root` carries the `running` class while a turn runs. */
  constructor(
    private readonly root: HTMLElement,
    private readonly host: ComposerHost,
  ) {
    this.el = h('footer', { class: 'composer' });
    this.attachmentsEl = h('div', { class: 'attachments' });
    this.input = h('textarea', {
      class: 'input',
      rows: '2',
      placeholder: 'Ask Synapse… (Enter to send, Shift+Enter for a new line)',
      'aria-label': 'Message',
    });
    const row = h('div', { class: 'composer-row' });
    const addSelection = h('button', { class: 'chip-button add-selection', title: 'Add the editor selection as context' });
    addSelection.append(icon('add'), ' Selection');
    const addFile = h('button', { class: 'chip-button add-file', title: 'Add the active file as context' });
    addFile.append(icon('add'), ' File');
    this.statusLine = h('span', { class: 'status-line' });
    this.sendButton = h('button', { class: 'primary send', title: 'Send (Enter)' });
    this.sendButton.append(icon('send'), ' Send');
    this.stopButton = h('button', { class: 'danger stop', title: 'Stop the running turn (Escape)', hidden: '' });
    this.stopButton.append(icon('debug-stop'), h('span', { class: 'stop-label' }, ' Stop'));
    row.append(addSelection, addFile, this.statusLine, this.stopButton, this.sendButton);
    this.el.append(this.attachmentsEl, this.input, row);

    addSelection.addEventListener('click', () => this.host.post({ type: 'addSelection' }));
    addFile.addEventListener('click', () => this.host.post({ type: 'addActiveFile' }));
    this.sendButton.addEventListener('click', () => this.send());
    this.stopButton.addEventListener('click', () => this.stop());
    this.input.addEventListener('keydown', (e) => this.onKey(e));
    this.input.addEventListener('input', () => {
      this.host.ui.draft = this.input.value;
      this.historyIndex = -1;
      this.autosize();
      this.host.persist();
    });
    // Escape stops a running turn (the input is disabled then, so listen on the document).
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && activeSession(this.host.state())?.running) {
        e.preventDefault();
        this.stop();
      }
    });
  }

  /** Put the saved draft and attachments back (once the composer is in the document). */
  restoreDraft(): void {
    this.input.value = this.host.ui.draft;
    this.autosize();
    this.renderAttachments();
  }

  /** Send or Stop, the input enabled or not, the live usage line. */
  render(): void {
    const state = this.host.state();
    const session = activeSession(state);
    const running = session?.running ?? false;
    const phase = state.server.phase;
    const serverUp = phase !== 'failed' && phase !== 'stopped';
    this.input.disabled = running;
    this.sendButton.hidden = running;
    this.sendButton.disabled = !serverUp;
    this.stopButton.hidden = !running;
    this.stopButton.disabled = session?.cancelling ?? false;
    (this.stopButton.querySelector('.stop-label') as HTMLElement).textContent = session?.cancelling ? ' Stopping…' : ' Stop';
    this.root.classList.toggle('running', running);
    // Live usage while a turn runs; afterwards the turn's own line shows it (once).
    const usage = running ? usageText(session?.turnUsage) : '';
    this.statusLine.textContent = running ? `Working…${usage ? ' ' + usage : ''}` : '';
    this.statusLine.title = session?.totalUsage.outputTokens ? `This chat so far: ${usageText(session.totalUsage)}` : '';
    if (!running && this.wasRunning && document.activeElement === document.body) this.input.focus();
    this.wasRunning = running;
  }

  attach(attachment: Attachment): void {
    const ui = this.host.ui;
    // One selection and one file at a time (the protocol's context has one of each).
    ui.attachments = ui.attachments.filter((a) => a.kind !== attachment.kind);
    ui.attachments.push(attachment);
    this.renderAttachments();
    this.host.persist();
  }

  removeAttachment(index: number): void {
    this.host.ui.attachments.splice(index, 1);
    this.renderAttachments();
    this.host.persist();
  }

  focus(): void {
    this.input.focus();
  }

  /** A prompt that could not be sent comes back, unless the user typed something since. */
  restoreInput(text: string): void {
    if (this.input.value.trim() === '') {
      this.input.value = text;
      this.host.ui.draft = text;
      this.autosize();
    }
  }

  private renderAttachments(): void {
    const el = this.attachmentsEl;
    const attachments = this.host.ui.attachments;
    el.textContent = '';
    el.hidden = attachments.length === 0;
    attachments.forEach((a, i) => {
      const chip = h('span', { class: `chip chip-${a.kind}`, title: a.kind === 'selection' ? a.text.slice(0, 500) : a.uri });
      chip.append(
        icon(a.kind === 'selection' ? 'list-selection' : 'file'),
        h('span', { class: 'chip-label' }, a.label),
        h('button', { class: 'chip-remove', 'data-action': 'removeAttachment', 'data-index': String(i), 'aria-label': `Remove ${a.label}` }, '×'),
      );
      el.appendChild(chip);
    });
  }

  private send(): void {
    const text = this.input.value.trim();
    const state = this.host.state();
    const ui = this.host.ui;
    const session = activeSession(state);
    if (!text || session?.running) return;
    this.host.post({
      type: 'prompt',
      sessionId: state.activeSessionId,
      text,
      attachments: ui.attachments,
    });
    if (ui.history[ui.history.length - 1] !== text) ui.history.push(text);
    if (ui.history.length > HISTORY_MAX) ui.history.splice(0, ui.history.length - HISTORY_MAX);
    this.historyIndex = -1;
    this.input.value = '';
    ui.draft = '';
    ui.attachments = [];
    this.renderAttachments();
    this.autosize();
    this.host.persist();
  }

  private stop(): void {
    const id = this.host.state().activeSessionId;
    if (id) this.host.post({ type: 'cancel', sessionId: id });
  }

  private onKey(e: KeyboardEvent): void {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      this.send();
      return;
    }
    const ui = this.host.ui;
    const history = ui.history;
    if (e.key === 'ArrowUp' && history.length > 0 && this.caretOnFirstLine()) {
      e.preventDefault();
      if (this.historyIndex === -1) {
        ui.draft = this.input.value;
        this.historyIndex = history.length - 1;
      } else if (this.historyIndex > 0) {
        this.historyIndex--;
      }
      this.input.value = history[this.historyIndex];
      this.autosize();
    } else if (e.key === 'ArrowDown' && this.historyIndex !== -1 && this.caretOnLastLine()) {
      e.preventDefault();
      if (this.historyIndex < history.length - 1) {
        this.historyIndex++;
        this.input.value = history[this.historyIndex];
      } else {
        this.historyIndex = -1;
        this.input.value = ui.draft;
      }
      this.autosize();
    }
  }

  private caretOnFirstLine(): boolean {
    const pos = this.input.selectionStart ?? 0;
    return !this.input.value.slice(0, pos).includes('\n');
  }

  private caretOnLastLine(): boolean {
    const pos = this.input.selectionEnd ?? this.input.value.length;
    return !this.input.value.slice(pos).includes('\n');
  }

  private autosize(): void {
    const el = this.input;
    el.style.height = 'auto';
    el.style.height = `${Math.min(el.scrollHeight + 2, 240)}px`;
  }
}
