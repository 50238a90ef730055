import { rmSync, statSync } from 'node:fs'
import { SessionId, SessionLogOffset } from '@dsh/session'
import type { AppendTarget } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, headerOf, targetOf, tempDir } from './helpers.js'

// A ranged read costs what it returns: counted in bytes read by a fresh
// backend (no writer open, so the end slot names the committed end), the
// last events of a long log cost what they cost in a short one.

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function root(): string {
  const { dir } = tempDir('dsh-jsonl-ranges-')
  dirs.push(dir)
  return dir
}

/** `batches` appends of 20 events each to `id`, one durable batch per append. */
async function write(p: JsonlPersistence, id: string, batches: number, target: AppendTarget = targetOf(id)): Promise<void> {
  for (let b = 0; b < batches; b++) await p.append(target, eventsFrom(b * 20, 20, b + 1))
}

/** What a fresh backend over `dir` reads for `read`. */
async function bytesOf(dir: string, read: (p: JsonlPersistence) => Promise<unknown>): Promise<number> {
  const p = createJsonlPersistence({ root: dir, readOnly: true })
  try {
    await read(p)
    return p.metrics.bytesRead
  } finally {
    await p.close()
  }
}

describe('ranged reads read the batches they return', () => {
  it('the last 20 events of a 2,000-batch log cost what they cost in a 20-batch one', async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir })
    await write(writer, 'short', 20)
    await write(writer, 'long', 2000)
    await writer.close()
    const tail = (id: string) => (p: JsonlPersistence) => p.inspectRange(SessionId(id), { limit: 20 })
    const short = await bytesOf(dir, tail('short'))
    const long = await bytesOf(dir, tail('long'))
    const longBytes = statSync(writer.logPath('long')).size
    // The same header prefix, slots, last-batch check and batch (whose seqs have more digits in the long log).
    expect(long).toBeLessThan(short * 1.25)
    expect(long * 200).toBeLessThan(longBytes)
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    const read = await reader.inspectRange(SessionId('long'), { limit: 20 })
    expect(read.events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 39_980 + i))
    expect(read.total).toBe(40_000)
    expect(reader.metrics.bodyReads).toBe(0)
    await reader.close()
  })

  it('a page far from the end adds one trailer read per later batch, not the batches', async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir })
    await write(writer, 'long', 1000)
    await writer.close()
    const near = await bytesOf(dir, (p) => p.inspectRange(SessionId('long'), { to: SessionLogOffset(19_980), limit: 20 }))
    const far = await bytesOf(dir, (p) => p.inspectRange(SessionId('long'), { to: SessionLogOffset(12_000), limit: 20 }))
    // The page before 19,980 walks two trailers (batches 999 and 998), the one before 12,000 walks 401 (999 down to 599):
    // 399 more trailers of 52 bytes; the two pages' batches weigh about the same.
    expect(Math.abs(far - near - 399 * 52)).toBeLessThan(256)
    expect(far * 4).toBeLessThan(statSync(writer.logPath('long')).size)
  })

  it("a tail into a fork's inherited prefix reads the source's batches at the cut, not the source", async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir })
    await write(writer, 'source', 1000)
    const seed = (await writer.inspectRange(SessionId('source'), { to: SessionLogOffset(10_010) })).events
    const fork: AppendTarget = {
      header: headerOf('fork', { isSeeded: true, parentSession: 'source' }),
      inheritedEventCount: SessionLogOffset(10_010),
      forkSource: SessionId('source'),
    }
    await writer.append(fork, [...seed, ...eventsFrom(10_010, 5, 9_999)])
    await writer.close()
    expect(statSync(writer.logPath('fork')).size).toBeLessThan(4096)
    let observed: readonly { seq: number; data: unknown }[] = []
    const bytes = await bytesOf(dir, async (p) => {
      observed = (await p.inspectRange(SessionId('fork'), { limit: 15 })).events
    })
    expect(observed.map((e) => e.seq)).toEqual(Array.from({ length: 15 }, (_, i) => 10_000 + i))
    // The source's events 10,000-10,009 (its batch at the cut also holds 10,010-10,019, which are not the fork's).
    const whole = await bytesOf(dir, async (p) => {
      const all = await p.inspect(SessionId('fork'))
      expect(observed).toEqual(all.events.slice(10_000))
    })
    expect(bytes * 50).toBeLessThan(whole)
    expect(bytes * 50).toBeLessThan(statSync(writer.logPath('source')).size)
  })
})
