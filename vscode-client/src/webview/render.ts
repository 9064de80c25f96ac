/**
 * The chat view's DOM. Folds actions with the shared state module and
 * patches only what changed, at most once per animation frame.
 */

import { hunks } from '../diff';
import type { PlanEntry, ToolKind, ToolStatus, Usage } from '../protocol';
import {
  activeSession,
  apply,
  countsText,
  displayPath,
  emptyChange,
  initialState,
  type Action,
  type Change,
  type ChatState,
  type FileDiffState,
  type Item,
  type SessionState,
  type ToolCallState,
} from '../state';
import { escapeHtml, highlight, renderBlocks, splitBlocks } from './markdown';
import type { Attachment, FromWebview } from './messages';

/** What survives the view being hidden (vscode.setState). */
export interface UiState {
  draft: string;
  history: string[];
  attachments: Attachment[];
  /** User's choice per tool call (absent: open while running). */
  expanded: Record<string, boolean>;
  /** Tool calls whose whole output is shown. */
  fullOutput: Record<string, boolean>;
  /** Diffs shown whole (`toolCallId:index`); others show their first lines. */
  fullDiff?: Record<string, boolean>;
  snapshot: ChatState | null;
}

export interface Host {
  post(message: FromWebview): void;
  persist(ui: UiState): void;
}

const OUTPUT_TAIL_LINES = 40;
/** Diff lines an edit card shows before "Show all". */
const DIFF_PREVIEW_LINES = 30;
/**
 * Rendering work per animation frame before the rest waits for the next one:
 * with layout and paint on top, a frame stays well under 50 ms.
 */
const FRAME_BUDGET_MS = 8;
const PERSIST_DEBOUNCE_MS = 400;
const HISTORY_MAX = 100;

/** Codicon per ACP tool kind (the icon font VS Code itself uses). */
const KIND_ICONS: Record<ToolKind, string> = {
  read: 'file',
  edit: 'edit',
  delete: 'trash',
  move: 'arrow-swap',
  search: 'search',
  execute: 'terminal',
  think: 'lightbulb',
  fetch: 'globe',
  other: 'tools',
};

function icon(name: string, extra = ''): HTMLElement {
  return h('span', { class: `codicon codicon-${name}${extra ? ' ' + extra : ''}`, 'aria-hidden': 'true' });
}

const STATUS_LABELS: Record<ToolStatus, string> = {
  pending: 'pending',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
  denied: 'denied',
};

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') el.className = v;
    else el.setAttribute(k, v);
  }
  if (text !== undefined) el.textContent = text;
  return el;
}

function formatTokens(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export function usageText(u: Usage | null | undefined): string {
  if (!u) return '';
  const cached = u.cacheReadInputTokens ? ` (${formatTokens(u.cacheReadInputTokens)} cached)` : '';
  return `${formatTokens(u.inputTokens)} in${cached} · ${formatTokens(u.outputTokens)} out`;
}

/** Markdown message with per-block caching: a streaming message re-renders only its tail. */
class MarkdownBlock {
  readonly el: HTMLElement;
  private sources: string[] = [];
  private nodes: Element[] = [];

  constructor(className: string) {
    this.el = h('div', { class: className });
  }

  set(text: string): void {
    const blocks = splitBlocks(text);
    const changed: number[] = [];
    for (let i = 0; i < blocks.length; i++) if (this.sources[i] !== blocks[i]) changed.push(i);
    if (changed.length > 0) {
      const fragment = renderBlocks(changed.map((i) => blocks[i]));
      const rendered = Array.from(fragment.children);
      changed.forEach((i, n) => {
        const node = rendered[n] ?? h('div', { class: 'md-block' });
        const old = this.nodes[i];
        if (old) old.replaceWith(node);
        else this.el.appendChild(node);
        this.nodes[i] = node;
        this.sources[i] = blocks[i];
      });
    }
    while (this.nodes.length > blocks.length) this.nodes.pop()!.remove();
    this.sources.length = blocks.length;
  }
}

interface ItemView {
  el: HTMLElement;
  md?: MarkdownBlock;
}

export class ChatView {
  private state: ChatState = initialState();
  private ui: UiState;
  private pending: Change | null = null;
  private frame = 0;
  private persistTimer: ReturnType<typeof setTimeout> | undefined;
  private historyIndex = -1;
  private renderedSessionId: string | null = null;
  private itemViews = new Map<number, ItemView>();
  /** Items of the shown session whose DOM is behind the state, in transcript order. */
  private dirty = new Set<number>();

  private readonly header: HTMLElement;
  private readonly sessionSelect: HTMLSelectElement;
  private readonly banner: HTMLElement;
  private readonly transcript: HTMLElement;
  private readonly empty: HTMLElement;
  private readonly planEl: HTMLElement;
  private readonly attachmentsEl: HTMLElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly statusLine: HTMLElement;

  /** Called after each DOM patch (benchmarks and tests hook it). */
  onRendered: (() => void) | null = null;

  constructor(
    private readonly root: HTMLElement,
    private readonly host: Host,
    saved: Partial<UiState> | undefined,
  ) {
    this.ui = {
      draft: saved?.draft ?? '',
      history: saved?.history ?? [],
      attachments: saved?.attachments ?? [],
      expanded: saved?.expanded ?? {},
      fullOutput: saved?.fullOutput ?? {},
      fullDiff: saved?.fullDiff ?? {},
      snapshot: null,
    };

    root.textContent = '';
    this.header = h('header', { class: 'header' });
    this.sessionSelect = h('select', { class: 'session-select', title: 'Chats', 'aria-label': 'Chats' });
    const newButton = h('button', { class: 'icon-button new-chat', title: 'New chat', 'aria-label': 'New chat' });
    newButton.appendChild(icon('add'));
    const deleteButton = h('button', { class: 'icon-button delete-chat', title: 'Delete this chat', 'aria-label': 'Delete this chat' });
    deleteButton.appendChild(icon('trash'));
    this.header.append(this.sessionSelect, newButton, deleteButton);

    this.banner = h('div', { class: 'banner', role: 'status', hidden: '', 'data-testid': 'server-banner' });
    this.transcript = h('main', { class: 'transcript', 'aria-live': 'polite' });
    this.empty = h('div', { class: 'empty' });
    this.empty.innerHTML =
      '<p class="empty-title">Ask Synapse about this workspace.</p>' +
      '<p>It answers, runs commands in a shell and edits files in your editor. Every command shows up here as a card you can open.</p>' +
      '<p><kbd>Enter</kbd> sends · <kbd>Shift</kbd>+<kbd>Enter</kbd> new line · <kbd>↑</kbd> history</p>';
    this.planEl = h('section', { class: 'plan', hidden: '', 'aria-label': 'Plan' });

    const composer = h('footer', { class: 'composer' });
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
    composer.append(this.attachmentsEl, this.input, row);

    root.append(this.header, this.banner, this.transcript, this.planEl, composer);
    this.transcript.appendChild(this.empty);

    // events
    newButton.addEventListener('click', () => this.host.post({ type: 'newSession' }));
    deleteButton.addEventListener('click', () => {
      if (this.state.activeSessionId) this.host.post({ type: 'deleteSession', sessionId: this.state.activeSessionId });
    });
    this.sessionSelect.addEventListener('change', () => {
      const id = this.sessionSelect.value;
      if (id) this.host.post({ type: 'selectSession', sessionId: id });
    });
    addSelection.addEventListener('click', () => this.host.post({ type: 'addSelection' }));
    addFile.addEventListener('click', () => this.host.post({ type: 'addActiveFile' }));
    this.sendButton.addEventListener('click', () => this.send());
    this.stopButton.addEventListener('click', () => this.stop());
    this.input.addEventListener('keydown', (e) => this.onKey(e));
    this.input.addEventListener('input', () => {
      this.ui.draft = this.input.value;
      this.historyIndex = -1;
      this.autosize();
      this.schedulePersist();
    });
    root.addEventListener('click', (e) => this.onClick(e));
    // Escape stops a running turn (the input is disabled then, so listen on the document).
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && activeSession(this.state)?.running) {
        e.preventDefault();
        this.stop();
      }
    });
    this.transcript.addEventListener(
      'scroll',
      () => {
        // Content growing under us is not the user scrolling away: only a move
        // up from where we last put the view stops following.
        if (this.nearBottom()) this.stick = true;
        else if (this.transcript.scrollTop < this.autoScrollTop - 2) this.stick = false;
      },
      { passive: true },
    );

    this.input.value = this.ui.draft;
    this.autosize();
    this.renderAttachments();
    if (saved?.snapshot) this.setSnapshot(saved.snapshot);
    else this.renderAll();
  }

  // ---- inputs from the extension ------------------------------------------

  setSnapshot(state: ChatState): void {
    this.state = state;
    this.renderedSessionId = null;
    this.renderAll();
  }

  dispatch(action: Action): void {
    const change = apply(this.state, action);
    this.merge(change);
  }

  attach(attachment: Attachment): void {
    // One selection and one file at a time (the protocol's context has one of each).
    this.ui.attachments = this.ui.attachments.filter((a) => a.kind !== attachment.kind);
    this.ui.attachments.push(attachment);
    this.renderAttachments();
    this.schedulePersist();
  }

  focusInput(): void {
    this.input.focus();
  }

  restoreInput(text: string): void {
    if (this.input.value.trim() === '') {
      this.input.value = text;
      this.ui.draft = text;
      this.autosize();
    }
  }

  getState(): ChatState {
    return this.state;
  }

  // ---- rendering -----------------------------------------------------------

  private merge(change: Change): void {
    const p = (this.pending ??= emptyChange());
    p.sessions ||= change.sessions;
    p.structure ||= change.structure;
    p.plan ||= change.plan;
    p.status ||= change.status;
    p.server ||= change.server;
    if (change.sessionId) {
      if (p.sessionId && p.sessionId !== change.sessionId) p.sessions = true;
      p.sessionId = change.sessionId;
    }
    for (const key of change.items) p.items.add(key);
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => this.flush());
    }
  }

  /** Apply pending changes now (the frame callback; tests may call it). */
  flush(): void {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    const change = this.pending;
    this.pending = null;
    if (!change) return;
    const session = activeSession(this.state);
    const sessionChanged = (session?.sessionId ?? null) !== this.renderedSessionId;
    if (sessionChanged) {
      this.renderAll();
      return;
    }
    const stick = this.stick;
    if (change.sessions || change.status) this.renderHeader();
    if (change.server) this.renderBanner();
    if (session && (change.sessionId === session.sessionId || change.sessionId === null)) {
      if (change.structure) this.reconcile(session);
      for (const key of change.items) this.dirty.add(key);
      if (change.plan) this.renderPlan(session);
    }
    if (change.status || change.structure || change.server) this.renderComposer();
    if (session) this.renderDirty(session);
    if (stick) this.scrollToBottom();
    this.schedulePersist();
    this.onRendered?.();
  }

  /** True while items wait for a later frame (a burst larger than one frame's budget). */
  get behind(): boolean {
    return this.dirty.size > 0;
  }

  /**
   * Render dirty items in transcript order for at most FRAME_BUDGET_MS, so a
   * burst (a replayed session, thousands of queued deltas) never blocks a
   * frame; the rest goes to the next frame.
   */
  private renderDirty(session: SessionState): void {
    const deadline = performance.now() + FRAME_BUDGET_MS;
    for (const key of this.dirty) {
      this.dirty.delete(key);
      this.renderItemByKey(session, key);
      if (performance.now() > deadline) break;
    }
    if (this.dirty.size > 0) {
      this.pending ??= emptyChange();
      if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
    }
  }

  private renderAll(): void {
    const session = activeSession(this.state);
    this.renderedSessionId = session?.sessionId ?? null;
    this.itemViews.clear();
    this.dirty.clear();
    this.transcript.textContent = '';
    if (session) {
      for (const item of session.items) this.transcript.appendChild(this.itemView(item).el);
      this.renderDirty(session);
    }
    if (!session || session.items.length === 0) this.transcript.appendChild(this.empty);
    this.renderHeader();
    this.renderBanner();
    this.renderPlan(session);
    this.renderComposer();
    this.stick = true;
    this.scrollToBottom();
    this.schedulePersist();
    this.onRendered?.();
  }

  private renderHeader(): void {
    const select = this.sessionSelect;
    const sessions = this.state.sessions;
    const active = this.state.activeSessionId;
    select.textContent = '';
    if (!active) select.appendChild(h('option', { value: '' }, sessions.length ? 'Choose a chat…' : 'No chats yet'));
    for (const s of sessions) {
      const running = this.state.byId[s.sessionId]?.running ?? s.busy ?? false;
      const option = h('option', { value: s.sessionId }, `${running ? '● ' : ''}${s.title || 'Untitled chat'}`);
      if (s.updatedAt) option.title = s.updatedAt;
      select.appendChild(option);
    }
    select.value = active ?? '';
  }

  private renderBanner(): void {
    const { phase, message } = this.state.server;
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

  private reconcile(session: SessionState): void {
    const wanted = new Set(session.items.map((i) => i.key));
    for (const [key, view] of this.itemViews) {
      if (!wanted.has(key)) {
        view.el.remove();
        this.itemViews.delete(key);
      }
    }
    if (session.items.length > 0) this.empty.remove();
    else if (!this.empty.isConnected) this.transcript.appendChild(this.empty);
    // Items only ever append in practice: walk and insert where missing.
    let prev: HTMLElement | null = null;
    for (const item of session.items) {
      let view = this.itemViews.get(item.key);
      if (!view) {
        view = this.itemView(item);
        if (prev) prev.after(view.el);
        else this.transcript.prepend(view.el);
      }
      prev = view.el;
    }
  }

  private renderItemByKey(session: SessionState, key: number): void {
    const view = this.itemViews.get(key);
    if (!view) return;
    const item = findItem(session.items, key);
    if (item) this.updateItem(session, item, view);
  }

  private itemView(item: Item): ItemView {
    let view: ItemView;
    switch (item.kind) {
      case 'user':
        view = { el: h('div', { class: 'msg user' }) };
        break;
      case 'agent': {
        const md = new MarkdownBlock('markdown');
        view = { el: h('div', { class: 'msg agent' }), md };
        view.el.appendChild(md.el);
        break;
      }
      case 'thought': {
        const details = h('details', { class: 'thought' });
        details.append(h('summary', {}, 'Thinking'), h('div', { class: 'thought-text' }));
        view = { el: details };
        break;
      }
      case 'tool': {
        view = { el: this.toolSkeleton(item.toolCallId) };
        break;
      }
      case 'notice':
        view = { el: h('div', { class: `notice notice-${item.level}`, role: 'note' }) };
        break;
      case 'error':
        view = { el: h('div', { class: 'error-box', role: 'alert' }) };
        break;
      case 'turn':
        view = { el: h('div', { class: 'turn-end' }) };
        break;
    }
    view.el.dataset.key = String(item.key);
    this.itemViews.set(item.key, view);
    // Content is filled in by renderDirty (within the frame budget).
    this.dirty.add(item.key);
    return view;
  }

  private updateItem(session: SessionState, item: Item, view: ItemView): void {
    switch (item.kind) {
      case 'user':
        view.el.textContent = item.text;
        break;
      case 'agent':
        view.md!.set(item.text);
        break;
      case 'thought':
        (view.el.querySelector('.thought-text') as HTMLElement).textContent = item.text;
        break;
      case 'tool': {
        const tool = session.tools[item.toolCallId];
        if (tool) this.renderTool(session, view.el as HTMLDetailsElement, tool);
        break;
      }
      case 'notice':
        view.el.textContent = item.message;
        break;
      case 'error':
        view.el.textContent = item.message;
        break;
      case 'turn':
        this.renderTurnEnd(view.el, item);
        break;
    }
  }

  private renderTurnEnd(el: HTMLElement, item: Extract<Item, { kind: 'turn' }>): void {
    el.className = `turn-end stop-${item.stopReason}`;
    el.textContent = '';
    const labels: Record<string, string> = {
      end_turn: '',
      cancelled: '⊘ Stopped',
      max_tokens: '⚠ Stopped: the answer hit the token limit',
      max_turns: '⚠ Stopped: too many steps for one prompt',
      refusal: '⚠ The model declined',
      error: '✗ Error',
    };
    const label = labels[item.stopReason] ?? item.stopReason;
    if (label) el.appendChild(h('span', { class: 'turn-label' }, label));
    if (item.error) el.appendChild(h('div', { class: 'turn-error' }, item.error));
    const usage = usageText(item.usage);
    if (usage) el.appendChild(h('span', { class: 'turn-usage' }, usage));
    if (item.changes && item.changes.length > 0) el.appendChild(this.changesLine(item.changes));
  }

  /** "Changed files: a.py +3 −1, new.txt +1", each name a link to the file. */
  private changesLine(changes: NonNullable<Extract<Item, { kind: 'turn' }>['changes']>): HTMLElement {
    const session = activeSession(this.state);
    const line = h('div', { class: 'turn-changes', 'data-testid': 'turn-changes' });
    line.appendChild(h('span', { class: 'turn-changes-label' }, 'Changed files: '));
    changes.forEach((c, i) => {
      if (i > 0) line.appendChild(document.createTextNode(', '));
      const shown = displayPath(c.path, session?.workspaceUri ?? null);
      line.appendChild(h('a', { class: 'location', href: '#', 'data-path': c.path, title: c.created ? `${c.path} (new)` : c.path }, shown));
      line.appendChild(document.createTextNode(' '));
      line.appendChild(countsEl(c.added, c.removed));
    });
    return line;
  }

  private toolSkeleton(toolCallId: string): HTMLDetailsElement {
    const details = h('details', { class: 'tool' });
    details.dataset.toolCallId = toolCallId;
    const summary = h('summary', { class: 'tool-summary' });
    summary.append(
      icon('tools', 'tool-icon'),
      h('span', { class: 'tool-title' }),
      h('span', { class: 'tool-diffstat', hidden: '' }),
      h('span', { class: 'tool-exit' }),
      h('span', { class: 'tool-status' }),
    );
    const body = h('div', { class: 'tool-body' });
    const command = h('pre', { class: 'tool-command' });
    command.appendChild(h('code', { class: 'hljs language-bash' }));
    body.append(
      command,
      h('div', { class: 'tool-locations' }),
      h('div', { class: 'tool-diffs', hidden: '' }),
      h('pre', { class: 'tool-output' }),
      h('div', { class: 'tool-more' }),
      h('div', { class: 'tool-meta' }),
      h('div', { class: 'tool-children' }),
    );
    details.append(summary, body);
    details.addEventListener('toggle', () => {
      const id = details.dataset.toolCallId!;
      const session = activeSession(this.state);
      const tool = session?.tools[id];
      if (details.open && details.dataset.bodyStale === '1' && session && tool) {
        this.renderToolBody(session, details, tool);
      }
      if (details.dataset.rendering === '1') return;
      this.ui.expanded[id] = details.open;
      this.schedulePersist();
    });
    return details;
  }

  private renderTool(session: SessionState, el: HTMLDetailsElement, tool: ToolCallState): void {
    el.dataset.rendering = '1';
    el.className = `tool kind-${tool.kind} status-${tool.status}`;
    el.dataset.status = tool.status;
    const q = <T extends HTMLElement>(sel: string): T => el.querySelector(`:scope > ${sel}`) as T;
    const summary = q<HTMLElement>('summary');
    (summary.querySelector('.tool-icon') as HTMLElement).className =
      `codicon codicon-${KIND_ICONS[tool.kind] ?? KIND_ICONS.other} tool-icon`;
    const title = summary.querySelector('.tool-title') as HTMLElement;
    const titleText = tool.title || tool.command || 'Tool call';
    if (title.dataset.src !== titleText) {
      setCodeSpans(title, titleText);
      title.dataset.src = titleText;
    }
    title.title = tool.command;
    const exit = summary.querySelector('.tool-exit') as HTMLElement;
    // A denied command never ran: its 126 is not an exit code worth showing in red.
    const denied = tool.status === 'denied';
    exit.textContent = denied || tool.exitCode === null || tool.exitCode === undefined ? '' : `exit ${tool.exitCode}`;
    exit.classList.toggle('nonzero', !denied && tool.exitCode !== null && tool.exitCode !== 0);
    const status = summary.querySelector('.tool-status') as HTMLElement;
    status.textContent = tool.question ? 'waiting for your answer' : STATUS_LABELS[tool.status];
    status.className = `tool-status badge badge-${tool.question ? 'waiting' : tool.status}`;
    el.classList.toggle('waiting', tool.question !== null);
    this.renderQuestion(el, tool);
    const diffs = tool.diffs ?? [];
    const diffstat = summary.querySelector('.tool-diffstat') as HTMLElement;
    diffstat.hidden = diffs.length === 0;
    if (diffs.length > 0) {
      const added = diffs.reduce((n, d) => n + d.added, 0);
      const removed = diffs.reduce((n, d) => n + d.removed, 0);
      diffstat.textContent = '';
      diffstat.appendChild(countsEl(added, removed));
      diffstat.title = diffs.map((d) => `${displayPath(d.path, session.workspaceUri)} ${countsText(d.added, d.removed)}`).join('\n');
    }
    el.classList.toggle('has-diff', diffs.length > 0);

    const choice = this.ui.expanded[tool.id];
    // A question waiting for an answer keeps its card open, whatever the user chose before;
    // an edit card opens on its diff.
    const wantOpen =
      tool.question !== null ||
      (choice ?? (tool.status === 'in_progress' || tool.status === 'pending' || tool.status === 'failed' || diffs.length > 0));
    if (el.open !== wantOpen) el.open = wantOpen;
    // `toggle` fires asynchronously; clear the flag after it.
    setTimeout(() => {
      delete el.dataset.rendering;
    }, 0);
    // A closed card's body is rendered when it is opened.
    if (el.open) this.renderToolBody(session, el, tool);
    else el.dataset.bodyStale = '1';
  }

  /** The permission question in the card: the server's message and its three buttons. */
  private renderQuestion(el: HTMLDetailsElement, tool: ToolCallState): void {
    const body = el.querySelector(':scope > .tool-body') as HTMLElement;
    let box = body.querySelector(':scope > .tool-question') as HTMLElement | null;
    const q = tool.question;
    if (!q) {
      box?.remove();
      return;
    }
    if (box?.dataset.question === q.id) return;
    box?.remove();
    box = h('div', { class: 'tool-question', role: 'alert', 'data-testid': 'permission-question' });
    box.dataset.question = q.id;
    box.appendChild(h('div', { class: 'tool-question-text' }, q.message));
    const buttons = h('div', { class: 'tool-question-buttons' });
    const testIds: Record<string, string> = {
      'Allow once': 'permission-allow-once',
      'Allow for this session': 'permission-allow-session',
      Deny: 'permission-deny',
    };
    for (const title of q.actions) {
      const button = h(
        'button',
        {
          class: title === 'Deny' ? 'secondary' : 'primary',
          'data-action': 'answerPermission',
          'data-question': q.id,
          'data-answer': title,
          'data-testid': testIds[title] ?? 'permission-answer',
        },
        title,
      );
      buttons.appendChild(button);
    }
    box.appendChild(buttons);
    body.prepend(box);
  }

  private renderToolBody(session: SessionState, el: HTMLDetailsElement, tool: ToolCallState): void {
    delete el.dataset.bodyStale;
    const body = el.querySelector(':scope > .tool-body') as HTMLElement;
    const code = body.querySelector('.tool-command > code') as HTMLElement;
    if (code.dataset.src !== tool.command) {
      code.innerHTML = highlight(tool.command, 'bash');
      code.dataset.src = tool.command;
      // Long commands are clipped to a few lines: a click shows them whole (and again clips).
      const pre = code.parentElement as HTMLElement;
      pre.title = tool.command.length > 200 ? 'Click to show the whole command' : '';
      pre.dataset.action = 'toggleCommand';
    }
    (body.querySelector('.tool-command') as HTMLElement).hidden = !tool.command;

    const locations = body.querySelector('.tool-locations') as HTMLElement;
    // A file the card's diffs show already has its link there.
    const diffPaths = new Set((tool.diffs ?? []).map((d) => d.path));
    const shownLocations = tool.locations.filter((loc) => loc.line || !diffPaths.has(loc.path));
    const locKey = JSON.stringify(shownLocations);
    if (locations.dataset.src !== locKey) {
      locations.textContent = '';
      for (const loc of shownLocations) {
        const shown = displayPath(loc.path, session.workspaceUri);
        const a = h('a', { class: 'location', href: '#', 'data-path': loc.path, title: loc.path }, shown + (loc.line ? `:${loc.line}` : ''));
        if (loc.line) a.dataset.line = String(loc.line);
        locations.appendChild(a);
      }
      locations.dataset.src = locKey;
    }

    this.renderDiffs(session, body, tool);
    this.renderOutput(body, tool);

    const meta = body.querySelector('.tool-meta') as HTMLElement;
    const parts: string[] = [];
    if (tool.status === 'denied') parts.push('not run: permission denied');
    else if (tool.exitCode !== null && tool.exitCode !== undefined) parts.push(`exit code ${tool.exitCode}`);
    if (tool.layer) parts.push(tool.layer);
    if (tool.category && tool.status !== 'denied') parts.push(tool.category.replace(/_/g, ' '));
    if (tool.restart) parts.push('shell restarted');
    if (tool.edit) {
      const shown = displayPath(tool.edit.path, session.workspaceUri);
      parts.push(tool.edit.applied ? `edit applied in the editor: ${shown}` : `the editor refused the edit: ${shown}`);
    }
    meta.textContent = parts.join(' · ');
    meta.hidden = parts.length === 0;

    const children = body.querySelector('.tool-children') as HTMLElement;
    if (tool.children.length > 0) {
      children.hidden = false;
      this.renderChildren(session, children, tool.children);
    } else {
      children.hidden = true;
    }
  }

  /** An edit card's diffs: per file its name, +/− counts, buttons and a unified diff. */
  private renderDiffs(session: SessionState, body: HTMLElement, tool: ToolCallState): void {
    const box = body.querySelector(':scope > .tool-diffs') as HTMLElement;
    const diffs = tool.diffs ?? [];
    const full = this.ui.fullDiff ?? {};
    const key = `${diffs.length}:${diffs.map((_, i) => (full[`${tool.id}:${i}`] ? 1 : 0)).join('')}`;
    if (box.dataset.src === key) return;
    box.dataset.src = key;
    box.textContent = '';
    box.hidden = diffs.length === 0;
    diffs.forEach((d, i) => box.appendChild(this.diffView(session, tool, d, i, full[`${tool.id}:${i}`] === true)));
  }

  private diffView(session: SessionState, tool: ToolCallState, d: FileDiffState, index: number, full: boolean): HTMLElement {
    const file = h('div', { class: 'diff-file', 'data-testid': 'diff-file' });
    const head = h('div', { class: 'diff-head' });
    const shown = displayPath(d.path, session.workspaceUri);
    head.appendChild(h('a', { class: 'location diff-path', href: '#', 'data-path': d.path, title: d.path }, shown));
    head.appendChild(countsEl(d.added, d.removed));
    if (d.oldText === null) head.appendChild(h('span', { class: 'diff-new' }, 'new file'));
    const actions = h('span', { class: 'diff-actions' });
    const button = (action: string, label: string, testId: string, title: string): HTMLElement =>
      h('button', { class: 'link-button', 'data-action': action, 'data-tool': tool.id, 'data-index': String(index), 'data-testid': testId, title }, label);
    actions.append(
      button('openDiff', 'Open diff', 'open-diff', 'Compare the text before this edit with the file as it is now'),
      button(
        'revertEdit',
        'Revert this edit',
        'revert-edit',
        d.oldText === null
          ? 'Delete the file this edit created (asks first; refused if it changed since)'
          : 'Put the text from before this edit back in the editor (refused if that part changed since)',
      ),
    );
    head.appendChild(actions);
    file.appendChild(head);

    const pre = h('pre', { class: 'diff-body' });
    let total = 0;
    let shownLines = 0;
    const all = hunks(d.oldText, d.newText);
    for (const hunk of all) total += hunk.lines.length + 1;
    for (const hunk of all) {
      if (!full && shownLines >= DIFF_PREVIEW_LINES) break;
      pre.appendChild(h('span', { class: 'diff-line diff-hunk' }, `@@ -${hunk.oldStart},${hunk.oldCount} +${hunk.newStart},${hunk.newCount} @@`));
      shownLines++;
      for (const line of hunk.lines) {
        if (!full && shownLines >= DIFF_PREVIEW_LINES) break;
        const mark = line.kind === 'add' ? '+' : line.kind === 'del' ? '-' : ' ';
        pre.appendChild(h('span', { class: `diff-line diff-${line.kind}` }, `${mark}${line.text}`));
        shownLines++;
      }
    }
    if (all.length === 0) pre.appendChild(h('span', { class: 'diff-line diff-hunk' }, d.newText === '' ? '(empty file)' : '(no line changed)'));
    file.appendChild(pre);
    if (total > DIFF_PREVIEW_LINES) {
      const more = h('div', { class: 'diff-more' });
      if (full) {
        more.appendChild(h('button', { class: 'link-button', 'data-action': 'diffLess', 'data-tool': tool.id, 'data-index': String(index) }, 'Show less'));
      } else {
        more.appendChild(h('span', {}, `${(total - shownLines).toLocaleString()} more lines. `));
        more.appendChild(h('button', { class: 'link-button', 'data-action': 'diffMore', 'data-tool': tool.id, 'data-index': String(index) }, 'Show all'));
      }
      file.appendChild(more);
    }
    return file;
  }

  private renderOutput(body: HTMLElement, tool: ToolCallState): void {
    const pre = body.querySelector('.tool-output') as HTMLElement;
    const more = body.querySelector('.tool-more') as HTMLElement;
    const full = this.ui.fullOutput[tool.id] === true;
    const segments = tool.output;
    if (segments.length === 0) {
      pre.hidden = true;
      more.hidden = true;
      pre.textContent = '';
      return;
    }
    pre.hidden = false;
    // Count lines; take the tail unless the user asked for all of it.
    let lines = 0;
    for (const s of segments) for (let i = s.text.indexOf('\n'); i >= 0; i = s.text.indexOf('\n', i + 1)) lines++;
    const lastText = segments[segments.length - 1].text;
    const totalLines = lines + (lastText.endsWith('\n') ? 0 : 1);
    let shown = segments;
    let hiddenLines = 0;
    if (!full && totalLines > OUTPUT_TAIL_LINES) {
      hiddenLines = totalLines - OUTPUT_TAIL_LINES;
      shown = tailSegments(segments, OUTPUT_TAIL_LINES);
    }
    pre.textContent = '';
    for (const s of shown) {
      if (s.stream === 'stderr') pre.appendChild(h('span', { class: 'stderr' }, s.text));
      else pre.appendChild(document.createTextNode(s.text));
    }
    more.textContent = '';
    const dropped = tool.outputDropped > 0 ? `${tool.outputDropped.toLocaleString()} earlier characters were not kept. ` : '';
    if (hiddenLines > 0) {
      more.hidden = false;
      more.appendChild(h('span', {}, `${dropped}${hiddenLines.toLocaleString()} earlier lines hidden. `));
      more.appendChild(h('button', { class: 'link-button show-more', 'data-action': 'showMore', 'data-tool': tool.id }, 'Show more'));
    } else if (full && totalLines > OUTPUT_TAIL_LINES) {
      more.hidden = false;
      if (dropped) more.appendChild(h('span', {}, dropped));
      more.appendChild(h('button', { class: 'link-button show-less', 'data-action': 'showLess', 'data-tool': tool.id }, 'Show less'));
    } else {
      more.hidden = !dropped;
      if (dropped) more.appendChild(h('span', {}, dropped));
    }
  }

  private renderChildren(session: SessionState, container: HTMLElement, items: Item[]): void {
    // Sub-agent transcripts are small: re-render them whole.
    container.textContent = '';
    for (const child of items) {
      if (child.kind === 'tool') {
        const tool = session.tools[child.toolCallId];
        if (!tool) continue;
        const el = this.toolSkeleton(child.toolCallId);
        container.appendChild(el);
        this.renderTool(session, el, tool);
      } else if (child.kind === 'agent') {
        const md = new MarkdownBlock('markdown');
        md.set(child.text);
        const wrap = h('div', { class: 'msg agent sub' });
        wrap.appendChild(md.el);
        container.appendChild(wrap);
      } else if (child.kind === 'thought' || child.kind === 'user') {
        container.appendChild(h('div', { class: 'msg sub muted' }, child.text));
      } else if (child.kind === 'notice') {
        container.appendChild(h('div', { class: `notice notice-${child.level}` }, child.message));
      }
    }
  }

  private renderPlan(session: SessionState | null): void {
    const plan = session?.plan;
    const el = this.planEl;
    if (!plan || plan.entries.length === 0) {
      el.hidden = true;
      el.textContent = '';
      return;
    }
    el.hidden = false;
    el.textContent = '';
    const done = plan.entries.filter((e) => e.status === 'completed').length;
    const details = h('details', { class: 'plan-details', open: '' });
    const summary = h('summary', { class: 'plan-title' }, `Plan · ${done}/${plan.entries.length}`);
    details.appendChild(summary);
    if (plan.explanation) details.appendChild(h('p', { class: 'plan-explanation' }, plan.explanation));
    const list = h('ul', { class: 'plan-list', role: 'list' });
    for (const entry of plan.entries) list.appendChild(planItem(entry));
    details.appendChild(list);
    el.appendChild(details);
  }

  private renderComposer(): void {
    const session = activeSession(this.state);
    const running = session?.running ?? false;
    const phase = this.state.server.phase;
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

  private wasRunning = false;

  private renderAttachments(): void {
    const el = this.attachmentsEl;
    el.textContent = '';
    el.hidden = this.ui.attachments.length === 0;
    this.ui.attachments.forEach((a, i) => {
      const chip = h('span', { class: `chip chip-${a.kind}`, title: a.kind === 'selection' ? a.text.slice(0, 500) : a.uri });
      chip.append(
        icon(a.kind === 'selection' ? 'list-selection' : 'file'),
        h('span', { class: 'chip-label' }, a.label),
        h('button', { class: 'chip-remove', 'data-action': 'removeAttachment', 'data-index': String(i), 'aria-label': `Remove ${a.label}` }, '×'),
      );
      el.appendChild(chip);
    });
  }

  // ---- user actions --------------------------------------------------------

  private send(): void {
    const text = this.input.value.trim();
    const session = activeSession(this.state);
    if (!text || session?.running) return;
    this.host.post({
      type: 'prompt',
      sessionId: this.state.activeSessionId,
      text,
      attachments: this.ui.attachments,
    });
    if (this.ui.history[this.ui.history.length - 1] !== text) this.ui.history.push(text);
    if (this.ui.history.length > HISTORY_MAX) this.ui.history.splice(0, this.ui.history.length - HISTORY_MAX);
    this.historyIndex = -1;
    this.input.value = '';
    this.ui.draft = '';
    this.ui.attachments = [];
    this.renderAttachments();
    this.autosize();
    this.schedulePersist();
  }

  private stop(): void {
    const id = this.state.activeSessionId;
    if (id) this.host.post({ type: 'cancel', sessionId: id });
  }

  private onKey(e: KeyboardEvent): void {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      this.send();
      return;
    }
    const history = this.ui.history;
    if (e.key === 'ArrowUp' && history.length > 0 && this.caretOnFirstLine()) {
      e.preventDefault();
      if (this.historyIndex === -1) {
        this.ui.draft = this.input.value;
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
        this.input.value = this.ui.draft;
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

  private onClick(e: MouseEvent): void {
    const target = e.target as HTMLElement | null;
    if (!target) return;
    const actionEl = target.closest<HTMLElement>('[data-action]');
    if (actionEl) {
      e.preventDefault();
      const action = actionEl.dataset.action;
      if (action === 'showMore' || action === 'showLess' || action === 'diffMore' || action === 'diffLess') {
        const id = actionEl.dataset.tool!;
        const diffKey = `${id}:${actionEl.dataset.index ?? '0'}`;
        const fullDiff = (this.ui.fullDiff ??= {});
        if (action === 'showMore') this.ui.fullOutput[id] = true;
        else if (action === 'showLess') delete this.ui.fullOutput[id];
        else if (action === 'diffMore') fullDiff[diffKey] = true;
        else delete fullDiff[diffKey];
        const session = activeSession(this.state);
        const tool = session?.tools[id];
        if (session && tool) {
          const change = emptyChange();
          change.sessionId = session.sessionId;
          change.items.add(tool.rootKey);
          this.merge(change);
        }
      } else if (action === 'answerPermission') {
        const id = actionEl.dataset.question!;
        const answer = actionEl.dataset.answer!;
        this.host.post({ type: 'permissionAnswer', id, answer });
        // Answered here: no second click on the other buttons.
        actionEl.closest('.tool-question')?.querySelectorAll('button').forEach((b) => (b.disabled = true));
      } else if (action === 'openDiff' || action === 'revertEdit') {
        const sessionId = this.state.activeSessionId;
        if (sessionId) {
          this.host.post({ type: action, sessionId, toolCallId: actionEl.dataset.tool!, index: Number(actionEl.dataset.index ?? '0') });
        }
      } else if (action === 'toggleCommand') {
        actionEl.classList.toggle('expanded');
      } else if (action === 'removeAttachment') {
        this.ui.attachments.splice(Number(actionEl.dataset.index), 1);
        this.renderAttachments();
        this.schedulePersist();
      } else if (action === 'showLogs' || action === 'restartServer' || action === 'setApiKey' || action === 'openServerSettings') {
        this.host.post({ type: action });
      }
      return;
    }
    const link = target.closest<HTMLAnchorElement>('a');
    if (link) {
      e.preventDefault();
      if (link.dataset.path) {
        this.host.post({
          type: 'openFile',
          path: link.dataset.path,
          ...(link.dataset.line ? { line: Number(link.dataset.line) } : {}),
        });
      } else {
        const href = link.getAttribute('href');
        if (href && !href.startsWith('#')) this.host.post({ type: 'openLink', href });
      }
    }
  }

  // ---- helpers -------------------------------------------------------------

  private autosize(): void {
    const el = this.input;
    el.style.height = 'auto';
    el.style.height = `${Math.min(el.scrollHeight + 2, 240)}px`;
  }

  private nearBottom(): boolean {
    const t = this.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 40;
  }

  /**
   * Follow the bottom. Items that come into view get their real height a frame
   * later (content-visibility), so keep following for a few frames while the
   * height still changes.
   */
  private scrollToBottom(): void {
    const t = this.transcript;
    t.scrollTop = t.scrollHeight;
    this.autoScrollTop = t.scrollTop;
    if (this.settleFrame) return;
    let frames = 0;
    let last = t.scrollHeight;
    const settle = (): void => {
      this.settleFrame = 0;
      if (!this.stick) return;
      if (t.scrollHeight !== last || t.scrollTop + t.clientHeight < t.scrollHeight - 1) {
        last = t.scrollHeight;
        t.scrollTop = t.scrollHeight;
        this.autoScrollTop = t.scrollTop;
      }
      if (++frames < 4) this.settleFrame = requestAnimationFrame(settle);
    };
    this.settleFrame = requestAnimationFrame(settle);
  }

  private settleFrame = 0;
  private autoScrollTop = 0;
  /** Whether the view follows new content (the user has not scrolled up). */
  private stick = true;

  /**
   * Save UI state and a snapshot once things settle (trailing debounce):
   * serialising the whole transcript on every streamed frame would cost more
   * than the rendering. The extension keeps the authoritative state anyway.
   */
  private schedulePersist(): void {
    clearTimeout(this.persistTimer);
    this.persistTimer = setTimeout(() => {
      this.persistTimer = undefined;
      this.host.persist({ ...this.ui, snapshot: this.state });
    }, PERSIST_DEBOUNCE_MS);
  }
}

/** "+3 −1" with each side coloured (added / removed). */
function countsEl(added: number, removed: number): HTMLElement {
  const el = h('span', { class: 'diff-counts', title: `${added} line${added === 1 ? '' : 's'} added, ${removed} removed` });
  if (added > 0 || removed === 0) el.appendChild(h('span', { class: 'diff-added' }, `+${added}`));
  if (added > 0 && removed > 0) el.appendChild(document.createTextNode(' '));
  if (removed > 0) el.appendChild(h('span', { class: 'diff-removed' }, `\u2212${removed}`));
  return el;
}

/** Tool titles are plain text with `code` spans: built as nodes, never parsed as HTML. */
function setCodeSpans(el: HTMLElement, text: string): void {
  el.textContent = '';
  const parts = text.split('`');
  if (parts.length % 2 === 0) {
    el.textContent = text; // an unmatched backtick: show it as it is
    return;
  }
  parts.forEach((part, i) => {
    if (part) el.appendChild(i % 2 === 1 ? h('code', {}, part) : document.createTextNode(part));
  });
}

/** Top-level items are appended with increasing keys: binary search. */
function findItem(items: Item[], key: number): Item | undefined {
  let lo = 0;
  let hi = items.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const k = items[mid].key;
    if (k === key) return items[mid];
    if (k < key) lo = mid + 1;
    else hi = mid - 1;
  }
  return items.find((i) => i.key === key);
}

function planItem(entry: PlanEntry): HTMLElement {
  const li = h('li', { class: `plan-entry plan-${entry.status}`, 'data-status': entry.status });
  const mark = entry.status === 'completed' ? '☑' : entry.status === 'in_progress' ? '◐' : '☐';
  li.setAttribute('role', 'checkbox');
  li.setAttribute('aria-checked', entry.status === 'completed' ? 'true' : entry.status === 'in_progress' ? 'mixed' : 'false');
  li.append(h('span', { class: 'plan-mark', 'aria-hidden': 'true' }, mark), h('span', { class: 'plan-text' }, entry.content));
  if (entry.priority === 'high') li.appendChild(h('span', { class: 'plan-priority' }, 'high'));
  return li;
}

/** The last `n` lines of segmented output, keeping stream boundaries. */
export function tailSegments(segments: ToolCallState['output'], n: number): ToolCallState['output'] {
  const full = segments.map((s) => s.text).join('');
  let pos = full.endsWith('\n') ? full.length - 1 : full.length;
  let count = 0;
  while (count < n) {
    const nl = pos > 0 ? full.lastIndexOf('\n', pos - 1) : -1;
    if (nl < 0) break;
    pos = nl;
    count++;
  }
  const start = count < n ? 0 : pos + 1;
  const out: ToolCallState['output'] = [];
  let offset = 0;
  for (const s of segments) {
    const end = offset + s.text.length;
    if (end > start) out.push({ stream: s.stream, text: s.text.slice(Math.max(0, start - offset)) });
    offset = end;
  }
  return out;
}

export { escapeHtml };
