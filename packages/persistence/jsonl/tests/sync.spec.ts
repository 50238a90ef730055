import { randomBytes } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { event, eventsFrom, targetOf, tempDir } from './helpers.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function fresh() {
  const { dir, cleanup } = tempDir('dsh-jsonl-sync-')
  cleanups.push(cleanup)
  const p = createJsonlPersistence({ root: dir })
  cleanups.push(() => p.close())
  return p
}

describe('where a durable append syncs (fdatasync inline or on the pool)', () => {
  it('a lone small batch syncs inline, as SQLite does', async () => {
    const p = fresh()
    await p.append(targetOf('a'), eventsFrom(0, 3)) // the first append publishes a new log (fsync + link)
    for (let i = 0; i < 10; i++) await p.append(targetOf('a'), eventsFrom(3 + i * 2, 2))
    expect(p.metrics.inlineSyncs).toBe(10)
    expect((await p.inspect(SessionId('a'))).events).toHaveLength(23)
  })

  it('an append is encoded when called and written in its turn: appends of one turn land in order, each synced inline', async () => {
    const p = fresh()
    await p.append(targetOf('a'), eventsFrom(0, 3))
    await p.append(targetOf('a'), eventsFrom(3, 2)) // padded from here on
    const file = p.logPath('a')
    const before = readFileSync(file)
    const first = p.append(targetOf('a'), eventsFrom(5, 2))
    const second = p.append(targetOf('a'), eventsFrom(7, 1))
    // Nothing is written on the caller's turn: both batches wait for theirs.
    expect(readFileSync(file).equals(before)).toBe(true)
    expect([(await first).nextSeq, (await second).nextSeq]).toEqual([7, 8])
    // One session's batches run one after the other, each the only one in flight: each synced inline.
    expect(p.metrics.inlineSyncs).toBe(3)
    expect((await p.inspect(SessionId('a'))).events.map((e) => e.seq)).toEqual(Array.from({ length: 8 }, (_, i) => i))
  })

  it('batches of several sessions at once overlap their flushes on the pool', async () => {
    const p = fresh()
    const ids = ['a', 'b', 'c', 'd']
    for (const id of ids) await p.append(targetOf(id), eventsFrom(0, 1))
    for (const id of ids) await p.append(targetOf(id), eventsFrom(1, 1)) // padded, each synced inline (alone in flight)
    const inline = p.metrics.inlineSyncs
    expect(inline).toBe(ids.length)
    await Promise.all(ids.map((id) => p.append(targetOf(id), eventsFrom(2, 2))))
    expect(p.metrics.inlineSyncs - inline).toBe(0)
    for (const id of ids) expect((await p.inspect(SessionId(id))).events).toHaveLength(4)
  })

  it('a batch larger than 256 KiB stored syncs on the pool', async () => {
    const p = fresh()
    await p.append(targetOf('a'), eventsFrom(0, 1))
    await p.append(targetOf('a'), [event(1, 'tool/result', { output: randomBytes(384 * 1024).toString('base64') })])
    expect(p.metrics.inlineSyncs).toBe(0)
    expect((await p.inspect(SessionId('a'))).events).toHaveLength(2)
  })

  it('a batch compressed on the pool (>= 256 KiB of lines) syncs there too, however small it is stored', async () => {
    const p = fresh()
    await p.append(targetOf('a'), eventsFrom(0, 1))
    const lines = Array.from({ length: 3000 }, (_, i) =>
      event(1 + i, 'tool/progress', { text: 'the same line of output, again '.repeat(4) }),
    )
    await p.append(targetOf('a'), lines)
    // Stored well below 256 KiB (it compresses), so only where it was compressed sends its sync to the pool.
    expect(statSync(p.logPath('a')).size).toBeLessThan(64 * 1024)
    expect(p.metrics.inlineSyncs).toBe(0)
    await p.append(targetOf('a'), eventsFrom(3001, 2))
    expect(p.metrics.inlineSyncs).toBe(1)
    expect((await p.inspect(SessionId('a'))).events).toHaveLength(3003)
  })
})
