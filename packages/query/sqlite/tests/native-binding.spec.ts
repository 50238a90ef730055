import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { installedAddon } from '../src/schema.js'
import { tempDir } from './helpers.js'

const main = createRequire(import.meta.url).resolve('better-sqlite3')

it('finds the addon better-sqlite3 installed, the very file its own lookup loads, so that opening an index skips that lookup', () => {
  const found = execFileSync(
    process.execPath,
    [
      '-e',
      `const D = require(${JSON.stringify(main)}); new D(':memory:').close(); console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')))`,
    ],
    { encoding: 'utf8' },
  ).trim()
  expect(found).toMatch(/better_sqlite3\.node$/)
  expect(installedAddon(main)).toBe(found)
})

it('tries build/, build/Debug/ and build/Release/ in the order better-sqlite3 does; none of them: no addon (it looks it up itself)', () => {
  const root = tempDir()
  const lib = join(root, 'lib', 'index.js')
  mkdirSync(join(root, 'lib'))
  writeFileSync(lib, '')
  expect(installedAddon(lib)).toBeUndefined()
  const place = (...dirs: string[]): string => {
    mkdirSync(join(root, 'build', ...dirs), { recursive: true })
    const file = join(root, 'build', ...dirs, 'better_sqlite3.node')
    writeFileSync(file, '')
    return file
  }
  const release = place('Release')
  expect(installedAddon(lib)).toBe(release)
  const debug = place('Debug')
  expect(installedAddon(lib)).toBe(debug)
  const linked = place()
  expect(installedAddon(lib)).toBe(linked)
})
