// Bundles the extension host code and the chat webview into dist/.
//   node esbuild.mjs [--production] [--watch]
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const common = {
  bundle: true,
  minify: production,
  sourcemap: production ? false : 'linked',
  logLevel: 'warning',
  legalComments: 'none',
};

const builds = [
  {
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    platform: 'node',
    format: 'cjs',
    target: 'node18',
    external: ['vscode'],
  },
  {
    ...common,
    entryPoints: { webview: 'src/webview/main.ts' },
    outdir: 'dist',
    platform: 'browser',
    format: 'iife',
    target: ['chrome114'],
    loader: { '.css': 'css', '.ttf': 'file' },
    assetNames: '[name]',
  },
];

if (watch) {
  for (const options of builds) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  }
  console.log('esbuild: watching');
} else {
  const started = Date.now();
  await Promise.all(builds.map((options) => esbuild.build(options)));
  console.log(`esbuild: dist/ built in ${Date.now() - started} ms${production ? ' (production)' : ''}`);
}
