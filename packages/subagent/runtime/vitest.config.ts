import { defineConfig } from 'vitest/config'
import preset from '../../../tooling/vitest.preset.ts'

// The preset, with two changes: no 'import' condition (the fork workers get
// the conditions as --conditions, and pg's CommonJS require('pg-pool') must
// not pick pg-pool's ESM build), and one throwaway PostgreSQL cluster per run
// (tests/global-setup.ts) on which the PostgreSQL cases create their own databases.
const conditions = ['@dsh/source', 'node', 'module', 'default']

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@dsh/source'] } },
  test: { ...preset.test, globalSetup: ['tests/global-setup.ts'] },
})
