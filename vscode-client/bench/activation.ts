/**
 * Activation-to-initialize benchmark (run by hand: `npm run bench`).
 *
 * Starts the real server with the extension's launch code (src/launch.ts,
 * via the test harness) and measures spawn → `initialize` result, N times.
 * Target: median <= 500 ms. A bare pygls server (no handlers at all), started by
 * the same code and measured in the same run, interleaved, is the floor: what
 * Python + pygls + lsprotocol cost before Synapse does anything.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { pythonPath, serverUnavailable, startServer, tempDir } from '../test/harness';

const BARE_SERVER = "from pygls.lsp.server import LanguageServer\nLanguageServer('bare', '0').start_io()\n";

function middle(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
}

const RUNS = Number(process.env.BENCH_RUNS ?? 10);

async function main(): Promise<void> {
  const why = serverUnavailable();
  if (why) {
    console.log(`activation: skipped (${why})`);
    return;
  }
  const dir = tempDir('synapse-bench-');
  const workspace = path.join(dir, 'proj');
  fs.mkdirSync(workspace);
  const times: number[] = [];
  const bare: number[] = [];
  const firstCommand: number[] = [];
  for (let i = 0; i < RUNS + 1; i++) {
    const floor = await startServer({ workspace, command: [pythonPath(), '-c', BARE_SERVER] });
    await floor.close();
    if (i > 0) bare.push(floor.initializeMs);
    const client = await startServer({
      workspace,
      env: { SYNAPSE_HOME: path.join(dir, 'home'), ANTHROPIC_API_KEY: 'sk-bench-dummy' },
      settings: { permission: 'auto' },
    });
    const t0 = performance.now();
    await client.execute('synapse.session.list', {});
    const listMs = performance.now() - t0;
    await client.close();
    if (i > 0) {
      // the first run warms the OS file cache
      times.push(client.initializeMs);
      firstCommand.push(listMs);
    }
  }
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  const fc = [...firstCommand].sort((a, b) => a - b)[Math.floor(firstCommand.length / 2)];
  console.log(`activation: spawn -> initialize result, ${RUNS} runs (python -m synapse_lsp via src/launch.ts)`);
  console.log(`  median ${median.toFixed(0)} ms, min ${sorted[0].toFixed(0)} ms, max ${sorted[sorted.length - 1].toFixed(0)} ms (target median <= 500 ms)`);
  console.log(`  then first synapse.session.list: median ${fc.toFixed(0)} ms`);
  const floor = middle(bare);
  console.log(
    `  bare pygls server, same launch code, interleaved: median ${floor.toFixed(0)} ms -> synapse is ${(median / floor).toFixed(2)}x the floor`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
