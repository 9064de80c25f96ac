/**
 * The protocol version check (src/protocol.ts): the extension tells the user
 * plainly when the server speaks another protocol version, and which side to
 * update. The real server's answer is checked in server.test.ts.
 */

import { describe, expect, it } from 'vitest';

import { PROTOCOL_VERSION, protocolMismatch, sandboxLabel, serverProtocolVersion } from '../src/protocol';

const initialized = (experimental: unknown): unknown => ({ capabilities: { experimental }, serverInfo: { name: 'synapse' } });

describe('protocol version check', () => {
  it('reads capabilities.experimental.synapse.protocolVersion', () => {
    expect(serverProtocolVersion(initialized({ synapse: { protocolVersion: 3 } }))).toBe(3);
    expect(serverProtocolVersion(initialized({ synapse: { protocolVersion: '3' } }))).toBeNull();
    expect(serverProtocolVersion(initialized(undefined))).toBeNull();
    expect(serverProtocolVersion(undefined)).toBeNull();
  });

  it('says nothing when the versions agree', () => {
    expect(protocolMismatch(initialized({ synapse: { protocolVersion: PROTOCOL_VERSION } }))).toBeNull();
  });

  it('asks to update the server when it is older', () => {
    expect(protocolMismatch(initialized({ synapse: { protocolVersion: 1 } }), 2)).toBe(
      'Synapse server speaks protocol 1, this extension expects 2 — update the Synapse server (pip install -U synapse-lsp).',
    );
  });

  it('asks to update the extension when the server is newer', () => {
    expect(protocolMismatch(initialized({ synapse: { protocolVersion: 3 } }), 2)).toBe(
      'Synapse server speaks protocol 3, this extension expects 2 — update the Synapse extension.',
    );
  });

  it('treats a server that reports no version as older', () => {
    const message = protocolMismatch(initialized({ other: true }), 1);
    expect(message).toContain('does not report a protocol version');
    expect(message).toContain('update the Synapse server');
  });
});

describe('the status bar names the sandbox', () => {
  const info = (mode: string, sandboxed: boolean) => ({
    mode,
    network: 'off',
    sandboxed,
    description: `${mode} described`,
    reason: null,
  });

  it('shows the mode, and warns when a sandbox was asked for but does not run', () => {
    expect(sandboxLabel(null)).toEqual({ text: '', warn: false });
    expect(sandboxLabel(info('workspace-write', true))).toEqual({ text: 'workspace-write', warn: false });
    expect(sandboxLabel(info('full-access', false))).toEqual({ text: 'full-access', warn: false });
    expect(sandboxLabel(info('read-only', false))).toEqual({ text: 'read-only: NOT sandboxed', warn: true });
  });
});
