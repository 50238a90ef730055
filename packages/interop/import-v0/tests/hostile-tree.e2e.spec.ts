import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { headerLineText, v0LogPath } from '../src/index.js'
import { T0, tempDir } from './fixtures.js'

/**
 * Hostile v0 roots read by a real import process (the built package,
 * `tests/workers/import-dry.mjs`) run with a small stack, so that anything
 * recursing once per session shows with a root a test can write quickly.
 */

const here = dirname(fileURLToPath(import.meta.url))

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-import-v0...')
})

/** Sessions in one chain, each the fork of the next (the last has no parent), plus a two-session cycle. */
function chainRoot(length: number): { from: string; ids: string[] } {
  const from = tempDir('chain')
  const ids = Array.from({ length }, (_, i) => `s${String(i).padStart(5, '0')}`)
  const write = (header: { id: string; parentSession?: string }): void => {
    const path = v0LogPath(from, header.id, undefined, 'none')
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, `${headerLineText({ createdAt: T0, delegationDepth: 0, ...header })}\n`)
  }
  for (const [i, id] of ids.entries()) write(i + 1 < length ? { id, parentSession: ids[i + 1] as string } : { id })
  write({ id: 'x1', parentSession: 'x2' })
  write({ id: 'x2', parentSession: 'x1' })
  return { from, ids }
}

describe('importV0 on a hostile v0 root', () => {
  it('orders a parent chain far longer than the stack is deep, parents first, and a cycle without looping', () => {
    const length = 3000
    const { from, ids } = chainRoot(length)
    const out = execFileSync(process.execPath, ['--stack-size=100', join(here, 'workers', 'import-dry.mjs'), from], {
      encoding: 'utf8',
      timeout: 300_000,
    })
    const outcome = JSON.parse(out.trim().split('\n').at(-1) as string) as {
      imported?: number
      failed?: number
      order?: string[]
      thrown?: unknown
    }
    expect(outcome.thrown).toBeUndefined()
    expect(outcome).toMatchObject({ imported: length + 2, failed: 0 })
    const order = outcome.order as string[]
    // Each session after its parent: the chain comes root first.
    expect(order.filter((id) => id.startsWith('s'))).toEqual([...ids].reverse())
    expect(order.filter((id) => id.startsWith('x')).sort()).toEqual(['x1', 'x2'])
  })
})
