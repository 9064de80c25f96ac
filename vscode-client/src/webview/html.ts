/**
 * The chat webview's HTML document (pure: used by the extension and the
 * browser tests, which load the same page from disk).
 */

export interface WebviewHtmlOptions {
  /** `webview.cspSource` (the origin resources are served from). */
  cspSource: string;
  /** A fresh random nonce per page load. */
  nonce: string;
  scriptUri: string;
  styleUri: string;
}

const escapeAttr = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `font-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    "connect-src 'none'",
    "frame-src 'none'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

export function webviewHtml(o: WebviewHtmlOptions): string {
  const csp = contentSecurityPolicy(o.cspSource, o.nonce);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttr(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${escapeAttr(o.styleUri)}" nonce="${escapeAttr(o.nonce)}">
<title>Synapse</title>
</head>
<body>
<div id="app" class="app"></div>
<script nonce="${escapeAttr(o.nonce)}" src="${escapeAttr(o.scriptUri)}"></script>
</body>
</html>
`;
}

/** 32 random alphanumerics (crypto-quality where available). */
export function makeNonce(random: (n: number) => Uint8Array): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from(random(32), (b) => alphabet[b % alphabet.length]).join('');
}
