import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { installedAddon } from '../src/schema.js'
import { tempDir } from './helpers.js'

const main = createRequire(import.meta.url).resolve('better-sqlite3')

it('finds the addon better-sqlite3 installed beside its lib/, so that opening an index skips the bindings lookup', () => {
  const addon = installedAddon(main)
  expect(addon).toMatch(/[/\\]build[/\\]Release[/\\]better_sqlite3\.node$/)
  // The very file better-sqlite3's own lookup loads (its first existing candidate).
  const found = execFileSync(
    process.execPath,
    [
      '-e',
      `const D = require(${JSON.stringify(main)}); new D(':memory:').close(); console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')))`,
    ],
    { encoding: 'utf8' },
  ).trim()
  expect(addon).toBe(found)
})

it('gives no addon for a package installed without build/Release (better-sqlite3 then looks it up itself)', () => {
  const dir = tempDir()
  mkdirSync(join(dir, 'lib'))
  writeFileSync(join(dir, 'lib', 'index.js'), '')
  expect(installedAddon(join(dir, 'lib', 'index.js'))).toBeUndefined()
})
