import { defineConfig } from 'vitest/config'
import preset from '../tooling/vitest.preset.ts'

// The preset without the 'import' condition: the fork workers get the
// conditions as --conditions, and pg's CommonJS require('pg-pool') must not
// pick pg-pool's ESM build (the pg-* tests open pools).
const conditions = ['@dsh/source', 'node', 'module', 'default']

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@dsh/source'] } },
  test: preset.test,
})
