// Runs the benchmarks by hand: `npm run bench` (or `node bench/run.mjs webview`).
// Each bench/*.ts is bundled with esbuild into test-output/bench/ and run with node.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const all = ['webview', 'activation'];
const wanted = process.argv.slice(2).length ? process.argv.slice(2) : all;
let failed = false;
for (const name of wanted) {
  const outfile = path.join(root, 'test-output', 'bench', `${name}.cjs`);
  await esbuild.build({
    entryPoints: [path.join(root, 'bench', `${name}.ts`)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node18',
    packages: 'external',
    logLevel: 'warning',
  });
  // __dirname inside the bundle is test-output/bench: point the helpers at the package root.
  const result = spawnSync(process.execPath, [outfile], { cwd: root, stdio: 'inherit', env: { ...process.env, SYNAPSE_CLIENT_DIR: root } });
  if (result.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
