import { defineConfig } from 'vitest/config'
import preset from '../../../tooling/vitest.preset.ts'

// The Anthropic SDK imports `@opentelemetry/api`, whose `module` export is an
// ESM build with extension-less relative imports, which Node's loader
// rejects; the preset's `module` condition (passed to the test processes as
// well) would pick it. Node itself never uses that condition, so these tests
// resolve as Node does.
const conditions = ['@dsh/source', 'node', 'import', 'default']

export default defineConfig({
  ...preset,
  resolve: { ...preset.resolve, conditions },
  ssr: { ...preset.ssr, resolve: { ...preset.ssr?.resolve, conditions, externalConditions: ['@dsh/source'] } },
})
