/**
 * `synapse/saveDocuments`: the agent's edits are saved before its next command
 * reads the disk (the server never asks for a buffer that also holds the user's
 * own unsaved edits).
 */

import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';

import { SAVE_DOCUMENTS_REQUEST, type SaveDocumentsParams } from './protocol';

/** Answer the request on `client`, and tell the server we do. */
export function listenSaveDocuments(client: LanguageClient): void {
  client.registerFeature({
    fillClientCapabilities(capabilities) {
      const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
      const ours = (experimental.synapse ?? {}) as Record<string, unknown>;
      capabilities.experimental = { ...experimental, synapse: { ...ours, saveDocuments: true } };
    },
    initialize() {},
    getState: () => ({ kind: 'static' }),
    clear() {},
  });
  client.onRequest(SAVE_DOCUMENTS_REQUEST, (params: SaveDocumentsParams) => saveDocuments(params));
}

/** Save each open document the server names; what was saved. */
async function saveDocuments(params: SaveDocumentsParams): Promise<{ saved: string[] }> {
  const saved: string[] = [];
  for (const uri of params.uris ?? []) {
    const fsPath = vscode.Uri.parse(uri).fsPath;
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === fsPath);
    if (doc === undefined) continue;
    if (!doc.isDirty || (await doc.save())) saved.push(uri);
  }
  return { saved };
}
