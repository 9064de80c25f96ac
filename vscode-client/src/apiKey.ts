/**
 * The API key in VS Code's SecretStorage: "Synapse: Set API Key" / "Clear Stored
 * API Key", and the read at each server start (passed to the server's environment
 * only). A change offers a restart of the server.
 */

import * as vscode from 'vscode';

const SECRET_KEY = 'synapse.apiKey';

/** The stored key. Bounded: a secret store that does not answer must not hold a start forever. */
export function readApiKey(secrets: vscode.SecretStorage): Promise<string | undefined> {
  return Promise.race([
    secrets.get(SECRET_KEY),
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 10_000)),
  ]);
}

export async function setApiKey(secrets: vscode.SecretStorage): Promise<void> {
  const key = await vscode.window.showInputBox({
    title: 'Synapse: API key',
    prompt: 'Stored in VS Code\'s secret storage and passed to the Synapse server\'s environment only.',
    password: true,
    ignoreFocusOut: true,
    validateInput: (v) => (v.trim() ? null : 'Enter a key'),
  });
  if (!key) return;
  await secrets.store(SECRET_KEY, key.trim());
  // secrets.onDidChange offers the restart.
}

async function clearApiKey(secrets: vscode.SecretStorage): Promise<void> {
  await secrets.delete(SECRET_KEY);
  void vscode.window.showInformationMessage('Synapse: the stored API key was removed.');
}

/** The two commands, and `changed` when the stored key changes. */
export function registerApiKey(secrets: vscode.SecretStorage, changed: () => void): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand('synapse.setApiKey', () => setApiKey(secrets)),
    vscode.commands.registerCommand('synapse.clearApiKey', () => clearApiKey(secrets)),
    secrets.onDidChange((e) => {
      if (e.key === SECRET_KEY) changed();
    }),
  ];
}
