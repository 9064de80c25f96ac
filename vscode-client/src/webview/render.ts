/**
 * The chat view's DOM. Folds actions with the shared state module and
 * patches only what changed, at most once per animation frame. The parts:
 * header.ts (chat picker, server banner), transcript.ts (the items),
 * toolBody.ts (a tool call's card), plan.ts, composer.ts (the input).
 */

import { apply, type Action } from '../state';
import { emptyChange, initialState, type Change, type ChatState, type SessionState } from '../stateModel';
import { activeSession } from '../stateSelectors';
import { Composer } from './composer';
import { Header } from './header';
import { escapeHtml } from './markdown';
import type { Attachment, FromWebview, Host, UiState } from './messages';
import { PlanPanel } from './plan';
import { ToolCards } from './toolBody';
import { Transcript } from './transcript';

export type { Host, UiState } from './messages';
export { usageText } from './dom';
export { tailSegments } from './toolBody';

const PERSIST_DEBOUNCE_MS = 400;

export class ChatView {
  private state: ChatState = initialState();
  private ui: UiState;
  private pending: Change | null = null;
  private frame = 0;
  private persistTimer: ReturnType<typeof setTimeout> | undefined;
  private renderedSessionId: string | null = null;

  private readonly header: Header;
  private readonly transcript: Transcript;
  private readonly plan: PlanPanel;
  private readonly composer: Composer;

  /** Called after each DOM patch (benchmarks and tests hook it). */
  onRendered: (() => void) | null = null;

  constructor(
    root: HTMLElement,
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
    // What the parts see of the view.
    const parts = {
      ui: this.ui,
      state: () => this.state,
      activeSession: () => activeSession(this.state),
      post: (message: FromWebview) => this.host.post(message),
      persist: () => this.schedulePersist(),
    };

    root.textContent = '';
    this.header = new Header(parts);
    this.transcript = new Transcript(new ToolCards(parts));
    this.plan = new PlanPanel();
    this.composer = new Composer(root, parts);
    root.append(this.header.el, this.header.banner, this.transcript.el, this.plan.el, this.composer.el);
    root.addEventListener('click', (e) => this.onClick(e));

    this.composer.restoreDraft();
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
    this.composer.attach(attachment);
  }

  focusInput(): void {
    this.composer.focus();
  }

  restoreInput(text: string): void {
    this.composer.restoreInput(text);
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
    const stick = this.transcript.following;
    if (change.sessions || change.status) this.header.render();
    if (change.server) this.header.renderBanner();
    if (session && (change.sessionId === session.sessionId || change.sessionId === null)) {
      if (change.structure) this.transcript.reconcile(session);
      for (const key of change.items) this.transcript.markDirty(key);
      if (change.plan) this.plan.render(session);
    }
    if (change.status || change.structure || change.server) this.composer.render();
    if (session) this.renderDirty(session);
    if (stick) this.transcript.scrollToBottom();
    this.schedulePersist();
    this.onRendered?.();
  }

  /** True while items wait for a later frame (a burst larger than one frame's budget). */
  get behind(): boolean {
    return this.transcript.behind;
  }

  /** Render dirty items within the frame budget; the rest goes to the next frame. */
  private renderDirty(session: SessionState): void {
    if (this.transcript.renderDirty(session)) {
      this.pending ??= emptyChange();
      if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
    }
  }

  private renderAll(): void {
    const session = activeSession(this.state);
    this.renderedSessionId = session?.sessionId ?? null;
    this.transcript.reset(session);
    if (session) this.renderDirty(session);
    this.header.render();
    this.header.renderBanner();
    this.plan.render(session);
    this.composer.render();
    this.transcript.follow();
    this.schedulePersist();
    this.onRendered?.();
  }

  // ---- user actions --------------------------------------------------------

  /** Clicks on `data-action` buttons anywhere in the view, and links. */
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
        this.composer.removeAttachment(Number(actionEl.dataset.index));
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

export { escapeHtml };
