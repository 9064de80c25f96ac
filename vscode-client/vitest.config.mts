import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The server and browser tests spawn processes; keep files sequential and predictable.
    fileParallelism: false,
  },
});
