/**
 * Markdown for the agent's messages: markdown-it with raw HTML off, code
 * highlighted by highlight.js, and the result sanitised by DOMPurify before
 * it touches the DOM (the Content-Security-Policy is the second wall).
 */

import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdownLang from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import MarkdownIt from 'markdown-it';

const languages: Record<string, Parameters<typeof hljs.registerLanguage>[1]> = {
  bash,
  c,
  cpp,
  css,
  diff,
  go,
  ini,
  java,
  javascript,
  json,
  markdown: markdownLang,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
};
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang);
hljs.registerAliases(['sh', 'zsh', 'console'], { languageName: 'bash' });
hljs.registerAliases(['toml'], { languageName: 'ini' });
hljs.registerAliases(['html', 'svg'], { languageName: 'xml' });

/** Above this size a code block is shown plain: highlighting must never stall a frame. */
const MAX_HIGHLIGHT_CHARS = 20_000;

export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export function highlight(code: string, lang: string): string {
  const name = lang.trim().toLowerCase();
  if (name && hljs.getLanguage(name) && code.length <= MAX_HIGHLIGHT_CHARS) {
    try {
      return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
    } catch {
      // fall through to plain
    }
  }
  return escapeHtml(code);
}

const md = new MarkdownIt({
  html: false,
  linkify: true,
  typographer: false,
  breaks: false,
  highlight: (code, lang) => {
    const name = (lang || '').split(/\s+/)[0];
    const cls = name ? ` language-${escapeHtml(name)}` : '';
    return `<pre class="code-block"><code class="hljs${cls}">${highlight(code, name)}</code></pre>`;
  },
});

// Links open through the extension (http/https/mailto/file only); nothing else is followed.
md.validateLink = (url: string): boolean => /^(https?:|mailto:|file:|#|\/|\.\.?\/|[\w.-]+(\/|$))/i.test(url.trim());

let hooked = false;
function purifier(): typeof DOMPurify {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        node.setAttribute('rel', 'noopener noreferrer');
        node.removeAttribute('target');
      }
    });
    hooked = true;
  }
  return DOMPurify;
}

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style'],
};

export function sanitize(html: string): string {
  return purifier().sanitize(html, PURIFY_CONFIG) as string;
}

/** Markdown → sanitised HTML. */
export function renderMarkdown(text: string): string {
  return sanitize(md.render(text));
}

/**
 * Several Markdown blocks → one sanitised fragment whose children are one
 * `div.md-block` per block, in order. One DOMPurify pass for all of them
 * (its per-call cost dominates for small blocks) and no second HTML parse.
 */
export function renderBlocks(blocks: readonly string[]): DocumentFragment {
  const html = blocks.map((b) => `<div class="md-block">${md.render(b)}</div>`).join('');
  return purifier().sanitize(html, { ...PURIFY_CONFIG, RETURN_DOM_FRAGMENT: true }) as DocumentFragment;
}

/** One line of inline Markdown (tool titles such as "Search `TODO` in src"). */
export function renderInline(text: string): string {
  return sanitize(md.renderInline(text));
}

/**
 * Split Markdown into top-level blocks at blank lines outside code fences
 * (and not before an indented continuation), so a streaming message only
 * re-renders its last block.
 */
export function splitBlocks(text: string): string[] {
  const lines = text.split('\n');
  const blocks: string[] = [];
  let current: string[] = [];
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === null) fence = m[1];
      else if (m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = null;
    }
    current.push(line);
    if (fence === null && line.trim() === '' && current.length > 1) {
      const next = lines[i + 1];
      if (next !== undefined && next.trim() !== '' && !/^\s/.test(next)) {
        blocks.push(current.join('\n'));
        current = [];
      }
    }
  }
  if (current.length > 0) blocks.push(current.join('\n'));
  return blocks;
}

/**
 * Compile the grammars and sanitiser configuration ahead of the first message
 * (called when the view is idle), so the first streamed frame is not the slow one.
 */
export function warmUp(): void {
  renderBlocks(['**warm** `up` [x](https://example.com)\n\n- a\n- b', '```python\ndef f(x):\n    return x\n```', '```bash\nls -la | grep x\n```']);
  highlight('echo "$HOME" && cd /tmp', 'bash');
}
