/**
 * Building blocks the chat view's parts share: elements, codicons, +/− counts,
 * token counts and the incrementally rendered Markdown block.
 */

import type { Usage } from '../protocol';
import { renderBlocks, splitBlocks } from './markdown';

export function h<K extends keyof HTMLElementTagNameMap>(
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

/** A codicon (the icon font VS Code itself uses). */
export function icon(name: string, extra = ''): HTMLElement {
  return h('span', { class: `codicon codicon-${name}${extra ? ' ' + extra : ''}`, 'aria-hidden': 'true' });
}

function formatTokens(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export function usageText(u: Usage | null | undefined): string {
  if (!u) return '';
  const cached = u.cacheReadInputTokens ? ` (${formatTokens(u.cacheReadInputTokens)} cached)` : '';
  return `${formatTokens(u.inputTokens)} in${cached} · ${formatTokens(u.outputTokens)} out`;
}

/** "+3 −1" with each side coloured (added / removed). */
export function countsEl(added: number, removed: number): HTMLElement {
  const el = h('span', { class: 'diff-counts', title: `${added} line${added === 1 ? '' : 's'} added, ${removed} removed` });
  if (added > 0 || removed === 0) el.appendChild(h('span', { class: 'diff-added' }, `+${added}`));
  if (added > 0 && removed > 0) el.appendChild(document.createTextNode(' '));
  if (removed > 0) el.appendChild(h('span', { class: 'diff-removed' }, `\u2212${removed}`));
  return el;
}

/** Markdown message with per-block caching: a streaming message re-renders only its tail. */
export class MarkdownBlock {
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
