import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// Tests run against package sources: the `@dsh/source` export condition maps
// every `@dsh/*` import to its `src/index.ts`, so no build is needed to see a
// change. Child-process workers (e2e) run the built `dist/` instead.
const conditions = ['@dsh/source', 'node', 'import', 'module', 'default']

// Lanes (`DSH_TEST_LANE`): `unit` runs tests/**/*.spec.ts without the e2e
// files; `e2e` runs only tests/**/*.e2e.spec.ts (child processes, CLI, HTTP,
// browser). Every test's work is bounded by counts, so a timeout only guards a
// hang, and it is generous (unit tests five minutes, e2e ten): a CI machine
// with both cores busy runs the heaviest tests several times slower than a
// quiet one, and a verdict must never depend on the machine's speed.
// `npm test` runs the unit lane, then the e2e lane with less parallelism
// (tooling/scripts/test-lanes.mjs). Unset: every test, unit timeouts (what
// `npx vitest run` in a package does).
const lane = process.env.DSH_TEST_LANE
if (lane !== undefined && lane !== '' && lane !== 'unit' && lane !== 'e2e') {
  throw new Error(`DSH_TEST_LANE must be 'unit' or 'e2e' (or unset for every test), got '${lane}'.`)
}
const E2E = 'tests/**/*.e2e.spec.ts'
const timeout = lane === 'e2e' ? 600_000 : 300_000

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@dsh/source'] } },
  test: {
    include: [lane === 'e2e' ? E2E : 'tests/**/*.spec.ts'],
    exclude: lane === 'unit' ? ['**/node_modules/**', E2E] : ['**/node_modules/**'],
    environment: 'node',
    testTimeout: timeout,
    hookTimeout: timeout,
    pool: 'forks',
    // A run that finds no test file fails: a package without tests, or a
    // filter or include that matches nothing, is a mistake to see. The e2e
    // lane runs only in packages that have e2e files (test-lanes.mjs).
    passWithNoTests: false,
    // Process warnings (leaks, deprecations) fail the test or file they
    // happen in.
    setupFiles: [fileURLToPath(new URL('./vitest.setup.ts', import.meta.url))],
  },
})
