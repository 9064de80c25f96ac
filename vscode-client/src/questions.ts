/**
 * The server's questions to the user.
 *
 * - `synapse/requestPermission`: the permission gate's question, as data naming the
 *   tool call by id. Shown as a notification and in that call's card ("waiting for
 *   your answer" with the same buttons); the first answer wins; the option's id answers.
 * - `window/showMessageRequest`: any other question (rewind, ...): a notification.
 */

import * as vscode from 'vscode';
import {
  MessageType,
  ShowMessageRequest,
  type CancellationToken,
  type LanguageClient,
  type MessageActionItem,
  type ShowMessageRequestParams,
} from 'vscode-languageclient/node';

import { REQUEST_PERMISSION_REQUEST, type RequestPermissionParams, type RequestPermissionResult } from './protocol';
import type { Action } from './state';

export class Questions {
  /** Open questions by id: how to answer each. */
  private readonly open = new Map<string, (answer: string | null) => void>();
  private seq = 0;

  /** `dispatch` puts a question into its tool call's card (and takes it out). */
  constructor(private readonly dispatch: (action: Action) => void) {}

  /** Answer both requests of `client`, and tell the server it may ask permission as data. */
  listen(client: LanguageClient): void {
    client.onRequest(REQUEST_PERMISSION_REQUEST, (params: RequestPermissionParams, token: CancellationToken) =>
      this.askPermission(params, token),
    );
    client.onRequest(ShowMessageRequest.type, (params, token) => this.askUser(params, token));
    client.registerFeature({
      fillClientCapabilities(capabilities) {
        const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
        const ours = (experimental.synapse ?? {}) as Record<string, unknown>;
        capabilities.experimental = { ...experimental, synapse: { ...ours, requestPermission: true } };
      },
      initialize() {},
      getState: () => ({ kind: 'static' }),
      clear() {},
    });
  }

  /** The user clicked `answer` in the card of question `id` (the webview's `permissionAnswer`). */
  answer(id: string, answer: string): void {
    this.open.get(id)?.(answer);
  }

  /** `window/showMessageRequest`: a question of the server's (not about a tool call). */
  private async askUser(params: ShowMessageRequestParams, token: CancellationToken): Promise<MessageActionItem | null> {
    const answer = await this.ask(params.message, (params.actions ?? []).map((a) => a.title), null, params.type, token);
    return (params.actions ?? []).find((a) => a.title === answer) ?? null;
  }

  /** `synapse/requestPermission`: the permission gate's question, as data. */
  private async askPermission(params: RequestPermissionParams, token: CancellationToken): Promise<RequestPermissionResult> {
    const titles = params.options.map((o) => o.title);
    const answer = await this.ask(params.message, titles, params.toolCallId, MessageType.Warning, token);
    const option = params.options.find((o) => o.title === answer);
    return option ? { optionId: option.optionId } : {};
  }

  /**
   * Ask: a notification with `titles` as buttons and, with a tool call's id, the same
   * question in that call's card (then closing the notification answers nothing).
   * The title chosen, or null (dismissed, or the server cancelled the question).
   */
  private ask(
    message: string,
    titles: string[],
    toolCallId: string | null,
    type: MessageType,
    token: CancellationToken,
  ): Promise<string | null> {
    const id = `q${++this.seq}`;
    const inCard = titles.length > 0 && toolCallId !== null;
    return new Promise<string | null>((resolve) => {
      let done = false;
      const finish = (answer: string | null): void => {
        if (done) return;
        done = true;
        this.open.delete(id);
        if (inCard) this.dispatch({ type: 'permissionAnswered', id });
        resolve(answer !== null && titles.includes(answer) ? answer : null);
      };
      this.open.set(id, finish);
      token.onCancellationRequested(() => finish(null));
      if (inCard && toolCallId !== null) {
        this.dispatch({ type: 'permissionAsked', toolCallId, question: { id, message, actions: titles } });
      }
      const show =
        type === MessageType.Error
          ? vscode.window.showErrorMessage
          : type === MessageType.Warning
            ? vscode.window.showWarningMessage
            : vscode.window.showInformationMessage;
      void Promise.resolve(show(message, ...titles)).then(
        (choice) => {
          // Closing the notification answers nothing while the card still asks.
          if (choice !== undefined || !inCard) finish(choice ?? null);
        },
        () => {
          if (!inCard) finish(null);
        },
      );
    });
  }
}
