import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SessionId, type SessionSeq } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { targetOf, tempDir } from './helpers.js'
import { appendLongLineBatch } from './long-lines.js'

/**
 * A stored 200 MB line, read the way `dsh show` (`inspect`) and a history
 * page (`inspectRange`, limit 1) read it, each in a fresh process running the
 * built package that reports its peak resident set size. The line comes back
 * elided; memory is bounded by the read cap, not the line (loading it took
 * 1.1 GB for `dsh show` and 1.34 GB per `GET …/history?limit=1`). Counts of
 * bytes only; the fixture is generated a chunk at a time.
 */

const here = dirname(fileURLToPath(import.meta.url))
const MiB = 1024 * 1024
const T0 = 1_760_000_000_000

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-persistence-jsonl...')
})

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

interface Read {
  readonly events: { seq: number; type: string; bytes: number; data?: unknown }[]
  readonly maxRss: number
}

function readInChild(root: string, id: string, mode: 'inspect' | 'range'): Read {
  const args = [join(here, 'workers', 'read-rss.mjs'), root, id, mode, '1']
  const out = execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 300_000 })
  return JSON.parse(out.trim().split('\n').at(-1)!) as Read
}

describe('a stored 200 MB line', () => {
  it('is read back elided by inspect and by a one-event range, each process staying far below the line in memory', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-long-line-')
    cleanups.push(cleanup)
    const id = SessionId('huge-line')
    const p = createJsonlPersistence({ root: dir })
    await p.append(targetOf(id), [
      Object.freeze({ type: 'user/message', seq: 0 as SessionSeq, time: T0, data: Object.freeze({ text: 'hi' }) }),
    ])
    const file = p.logPath(id)
    await p.close()
    const plain = appendLongLineBatch(file, 1, T0 + 1, 200 * 1000 * 1000, 'assistant/message')
    const elided = { elided: { bytes: plain - 1, reason: 'line-too-large', type: 'assistant/message' } }
    const show = readInChild(dir, id, 'inspect')
    expect(show.events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'user/message'],
      [1, 'event/elided'],
    ])
    expect(show.events[1]!.data).toEqual(elided)
    const page = readInChild(dir, id, 'range')
    expect(page.events).toMatchObject([{ seq: 1, type: 'event/elided', data: elided }])
    for (const { maxRss } of [show, page]) expect(maxRss).toBeLessThan(160 * MiB)
  })
})
