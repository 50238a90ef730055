import { defineConfig } from 'vitest/config'

// Tests run against package sources: the `@dsh/source` export condition maps
// every `@dsh/*` import to its `src/index.ts`, so no build is needed to see a
// change. Child-process workers (e2e) run the built `dist/` instead.
const conditions = ['@dsh/source', 'node', 'import', 'module', 'default']

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@dsh/source'] } },
  test: {
    include: ['tests/**/*.spec.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Packages are scaffolded before their tests land; an empty package passes.
    passWithNoTests: true,
  },
})
