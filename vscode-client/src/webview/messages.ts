/**
 * Messages between the extension host and the chat webview, and the state the
 * webview saves across being hidden (pure types).
 */

import type { PromptContext } from '../protocol';
import type { Action } from '../state';
import type { ChatState } from '../stateModel';

export type Attachment =
  | {
      kind: 'selection';
      uri: string;
      label: string;
      range: NonNullable<PromptContext['selection']>['range'];
      text: string;
    }
  | { kind: 'file'; uri: string; label: string };

/** Extension host → webview. */
export type ToWebview =
  | { type: 'snapshot'; state: ChatState }
  | { type: 'action'; action: Action }
  /** Actions queued in one turn of the extension host's event loop, in order. */
  | { type: 'actions'; actions: Action[] }
  | { type: 'attach'; attachment: Attachment }
  | { type: 'focusInput' }
  | { type: 'restoreInput'; text: string };

/** Webview → extension host. */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'newSession' }
  | { type: 'selectSession'; sessionId: string }
  | { type: 'deleteSession'; sessionId: string }
  | { type: 'refreshSessions' }
  | { type: 'prompt'; sessionId: string | null; text: string; attachments: Attachment[] }
  | { type: 'cancel'; sessionId: string }
  | { type: 'addSelection' }
  | { type: 'addActiveFile' }
  | { type: 'openLink'; href: string }
  | { type: 'openFile'; path: string; line?: number }
  | { type: 'showLogs' }
  | { type: 'restartServer' }
  | { type: 'openServerSettings' }
  /** The user answered a permission question in its tool card. */
  | { type: 'permissionAnswer'; id: string; answer: string }
  /** An edit card's "Open diff": before the edit vs the file now (diff `index` of the call). */
  | { type: 'openDiff'; sessionId: string; toolCallId: string; index: number }
  /** An edit card's "Revert this edit" (refused with a reason when the text changed since). */
  | { type: 'revertEdit'; sessionId: string; toolCallId: string; index: number }
  | { type: 'setApiKey' };

/** What survives the chat view being hidden (the webview's vscode.setState). */
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

/** The chat view's way out: messages to the extension host and the saved UiState. */
export interface Host {
  post(message: FromWebview): void;
  persist(ui: UiState): void;
}

/** Build the prompt `context` from the attachments the user added. */
export function promptContext(attachments: readonly Attachment[], openFiles: readonly string[] = []): PromptContext | undefined {
  const context: PromptContext = {};
  for (const a of attachments) {
    if (a.kind === 'selection') context.selection = { uri: a.uri, range: a.range, text: a.text };
    else context.activeFile = a.uri;
  }
  if (context.selection && !context.activeFile) context.activeFile = context.selection.uri;
  if (openFiles.length > 0) context.openFiles = [...openFiles];
  return Object.keys(context).length > 0 ? context : undefined;
}
