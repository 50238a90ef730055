import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * Listing a root (the change feed, then `list()` of headers) must not load a
 * zstd binding: each costs tens of milliseconds of native loading in every
 * `dsh sessions` process. Checked in a fresh process running the built
 * package, by the shared objects it mapped and its CommonJS module cache —
 * counts, not timings. The other modes show that the probe sees a binding
 * when one is loaded (so the first case could fail).
 */
const here = dirname(fileURLToPath(import.meta.url))

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-persistence-jsonl...')
})

interface Probe {
  readonly loaded: string[]
  readonly result: Record<string, unknown> | null
}

function probe(root: string, mode: 'import' | 'feed' | 'append' | 'inspect', since?: string): Probe {
  const args = [join(here, 'workers', 'zstd-probe.mjs'), root, mode, ...(since === undefined ? [] : [since])]
  const out = execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 })
  return JSON.parse(out.trim().split('\n').at(-1)!) as Probe
}

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/**
 * A root holding `sessions` sessions, one with a batch over 256 KiB (decoded
 * off the event loop), and a feed cursor taken after the first `cursorAfter`.
 */
async function populatedRoot(sessions: number, cursorAfter = 0): Promise<{ root: string; cursor: string }> {
  const { dir, cleanup } = tempDir('dsh-jsonl-lazy-')
  cleanups.push(cleanup)
  const p = createJsonlPersistence({ root: dir })
  let cursor = (await p.changes()).cursor
  for (let i = 0; i < sessions; i++) {
    if (i === cursorAfter) cursor = (await p.changes(cursor)).cursor
    await p.append(targetOf(`s-${i}`), eventsFrom(0, i === 0 ? 4000 : 5))
  }
  await p.close()
  return { root: dir, cursor }
}

describe('zstd bindings load on first use', () => {
  it('importing the package loads neither binding', () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-lazy-')
    cleanups.push(cleanup)
    expect(probe(dir, 'import').loaded).toEqual([])
  })

  it('changes() and list() of a populated zstd root load neither binding', async () => {
    const { root, cursor } = await populatedRoot(12, 4)
    const { loaded, result } = probe(root, 'feed', cursor)
    expect(result).toEqual({ changed: 8, rescan: false, listed: 12 })
    expect(loaded).toEqual([])
  })

  it('an append loads zstd-napi only; reading a large log loads @mongodb-js/zstd too (the probe sees what is loaded)', async () => {
    const { root } = await populatedRoot(3)
    expect(probe(root, 'append').loaded).toEqual(['zstd-napi'])
    const read = probe(root, 'inspect')
    expect(read.result).toEqual({ events: 4000 + 5 + 5 + 1 })
    expect(read.loaded).toEqual(['zstd-napi', '@mongodb-js/zstd'])
    // The same log reads the same in this process.
    const p = createJsonlPersistence({ root, readOnly: true })
    expect((await p.inspect(SessionId('s-0'))).events).toHaveLength(4000)
    await p.close()
  })
})
