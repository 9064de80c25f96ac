/**
 * The transcript: one element per item of the shown chat (user and agent messages,
 * thinking, tool cards, notices, errors, turn ends), kept in step with the state by
 * key; dirty items are rendered within a per-frame budget; the view follows the
 * bottom until the user scrolls up.
 */

import type { Item, SessionState } from '../stateModel';
import { displayPath } from '../stateSelectors';
import { MarkdownBlock, countsEl, h, usageText } from './dom';
import type { ToolCards } from './toolBody';

/**
 * Rendering work per animation frame before the rest waits for the next one:
 * with layout and paint on top, a frame stays well under 50 ms.
 */
const FRAME_BUDGET_MS = 8;

interface ItemView {
  el: HTMLElement;
  md?: MarkdownBlock;
}

export class Transcript {
  readonly el: HTMLElement;
  private readonly empty: HTMLElement;
  private itemViews = new Map<number, ItemView>();
  /** Items of the shown session whose DOM is behind the state, in transcript order. */
  private dirty = new Set<number>();
  private settleFrame = 0;
  private autoScrollTop = 0;
  /** Whether the view follows new content (the user has not scrolled up). */
  private stick = true;

  constructor(private readonly cards: ToolCards) {
    this.el = h('main', { class: 'transcript', 'aria-live': 'polite' });
    this.empty = h('div', { class: 'empty' });
    this.empty.innerHTML =
      '<p class="empty-title">Ask Synapse about this workspace.</p>' +
      '<p>It answers, runs commands in a shell and edits files in your editor. Every command shows up here as a card you can open.</p>' +
      '<p><kbd>Enter</kbd> sends · <kbd>Shift</kbd>+<kbd>Enter</kbd> new line · <kbd>↑</kbd> history</p>';
    this.el.appendChild(this.empty);
    this.el.addEventListener(
      'scroll',
      () => {
        // Content growing under us is not the user scrolling away: only a move
        // up from where we last put the view stops following.
        if (this.nearBottom()) this.stick = true;
        else if (this.el.scrollTop < this.autoScrollTop - 2) this.stick = false;
      },
      { passive: true },
    );
  }

  /** True while items wait for a later frame (a burst larger than one frame's budget). */
  get behind(): boolean {
    return this.dirty.size > 0;
  }

  /** Whether the view follows the bottom (read before a patch: growth is not scrolling). */
  get following(): boolean {
    return this.stick;
  }

  markDirty(key: number): void {
    this.dirty.add(key);
  }

  /** Rebuild for another chat (or none): an empty element per item, all dirty. */
  reset(session: SessionState | null): void {
    this.itemViews.clear();
    this.dirty.clear();
    this.el.textContent = '';
    if (session) {
      for (const item of session.items) this.el.appendChild(this.itemView(item).el);
    }
    if (!session || session.items.length === 0) this.el.appendChild(this.empty);
  }

  /** Items added or removed: drop the gone, insert the new where they belong. */
  reconcile(session: SessionState): void {
    const wanted = new Set(session.items.map((i) => i.key));
    for (const [key, view] of this.itemViews) {
      if (!wanted.has(key)) {
        view.el.remove();
        this.itemViews.delete(key);
      }
    }
    if (session.items.length > 0) this.empty.remove();
    else if (!this.empty.isConnected) this.el.appendChild(this.empty);
    // Items only ever append in practice: walk and insert where missing.
    let prev: HTMLElement | null = null;
    for (const item of session.items) {
      let view = this.itemViews.get(item.key);
      if (!view) {
        view = this.itemView(item);
        if (prev) prev.after(view.el);
        else this.el.prepend(view.el);
      }
      prev = view.el;
    }
  }

  /**
   * Render dirty items in transcript order for at most FRAME_BUDGET_MS, so a
   * burst (a replayed session, thousands of queued deltas) never blocks a
   * frame. True when some are left for the next frame.
   */
  renderDirty(session: SessionState): boolean {
    const deadline = performance.now() + FRAME_BUDGET_MS;
    for (const key of this.dirty) {
      this.dirty.delete(key);
      this.renderItemByKey(session, key);
      if (performance.now() > deadline) break;
    }
    return this.dirty.size > 0;
  }

  /** Follow the bottom again (another chat shown). */
  follow(): void {
    this.stick = true;
    this.scrollToBottom();
  }

  /**
   * Follow the bottom. Items that come into view get their real height a frame
   * later (content-visibility), so keep following for a few frames while the
   * height still changes.
   */
  scrollToBottom(): void {
    const t = this.el;
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

  private nearBottom(): boolean {
    const t = this.el;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 40;
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
        view = { el: this.cards.skeleton(item.toolCallId) };
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
        if (tool) this.cards.render(session, view.el as HTMLDetailsElement, tool);
        break;
      }
      case 'notice':
        view.el.textContent = item.message;
        break;
      case 'error':
        view.el.textContent = item.message;
        break;
      case 'turn':
        renderTurnEnd(session, view.el, item);
        break;
    }
  }
}

function renderTurnEnd(session: SessionState, el: HTMLElement, item: Extract<Item, { kind: 'turn' }>): void {
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
  if (item.changes && item.changes.length > 0) el.appendChild(changesLine(session, item.changes));
}

/** "Changed files: a.py +3 −1, new.txt +1", each name a link to the file. */
function changesLine(session: SessionState, changes: NonNullable<Extract<Item, { kind: 'turn' }>['changes']>): HTMLElement {
  const line = h('div', { class: 'turn-changes', 'data-testid': 'turn-changes' });
  line.appendChild(h('span', { class: 'turn-changes-label' }, 'Changed files: '));
  changes.forEach((c, i) => {
    if (i > 0) line.appendChild(document.createTextNode(', '));
    const shown = displayPath(c.path, session.workspaceUri ?? null);
    line.appendChild(h('a', { class: 'location', href: '#', 'data-path': c.path, title: c.created ? `${c.path} (new)` : c.path }, shown));
    line.appendChild(document.createTextNode(' '));
    line.appendChild(countsEl(c.added, c.removed));
  });
  return line;
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
