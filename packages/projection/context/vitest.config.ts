import { defineConfig } from 'vitest/config'
import preset from '../../../tooling/vitest.preset.ts'

// The preset without the 'import' condition: pg's CommonJS require('pg-pool')
// must not pick pg-pool's ESM build (the PostgreSQL cold-read cases).
const conditions = ['@dsh/source', 'node', 'module', 'default']

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@dsh/source'] } },
  test: preset.test,
})
