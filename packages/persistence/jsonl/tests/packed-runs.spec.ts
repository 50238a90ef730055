import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { SessionId, SessionLogOffset, type SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { type AppendTarget, expandEventRuns, type StoredEventRun } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlCompression, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { createCodec } from '../src/codec.js'
import { encodeUnit } from '../src/log-units.js'
import { targetOf, tempDir } from './helpers.js'

// Packed lines (log format version 4, see `encodeEventLines`) through the store:
// which logs get them, and forks whose cut falls inside one.

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function backend(dir?: string, compression: JsonlCompression = 'zstd'): JsonlPersistence {
  let root = dir
  if (root === undefined) {
    const made = tempDir('dsh-jsonl-packed-')
    cleanups.push(made.cleanup)
    root = made.dir
  }
  const p = createJsonlPersistence({ root, compression })
  open.push(p)
  return p
}

/** `count` streamed chunks from `first`, deep-frozen as a Session hands them over: one run. */
function chunks(first: number, count: number, turn = 1): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) =>
    Object.freeze({
      type: 'assistant/chunk',
      seq: (first + i) as SessionSeq,
      time: 1_760_000_000_000 + 3 * (first + i),
      data: Object.freeze({ turn, index: 0, delta: `tök ${first + i} ` }),
    }),
  )
}

/** The log's lines after the header (`zstd -dc` for a zstd log). */
function eventLines(p: JsonlPersistence, id: string, compression: JsonlCompression = 'zstd'): string[] {
  const file = p.logPath(id)
  const text = compression === 'zstd' ? execFileSync('zstd', ['-dc', file]).toString('utf8') : readFileSync(file, 'utf8')
  return text.split('\n').filter((line) => line.startsWith('{"type":'))
}

/**
 * A zstd log's header line rewritten to say `formatVersion` (as a build of
 * that version wrote it), its header unit, and the log's bytes after its
 * original header unit.
 */
function headerUnitAs(file: string, formatVersion: number): { line: Buffer; header: Buffer; rest: Buffer } {
  const text = execFileSync('zstd', ['-dc', file]).toString('utf8')
  const headerLine = text.slice(0, text.indexOf('\n') + 1)
  const codec = createCodec('zstd')
  const rewritten = Buffer.from(headerLine.replace('"formatVersion":4', `"formatVersion":${formatVersion}`))
  const original = encodeUnit(codec, Buffer.from(headerLine), 'header', 0, 0)
  return { line: rewritten, header: encodeUnit(codec, rewritten, 'header', 0, 0), rest: readFileSync(file).subarray(original.length) }
}

const plain = (events: readonly StoredSessionEvent[]): unknown => JSON.parse(JSON.stringify(events))

function forkTarget(id: string, cut: number, source: string): AppendTarget {
  return { ...targetOf(id, cut, { isSeeded: true, parentSession: SessionId(source) }), forkSource: SessionId(source) }
}

describe('packed runs in the store', () => {
  it('a version 4 zstd log stores a run as one line and every reader gets the events back', async () => {
    const p = backend()
    await p.append(targetOf('s'), chunks(0, 50))
    await p.append(targetOf('s'), chunks(50, 7))
    expect(eventLines(p, 's')).toHaveLength(2)
    const fresh = backend(p.root)
    expect(plain((await fresh.inspect(SessionId('s'))).events)).toEqual(plain(chunks(0, 57)))
    expect(await fresh.verify(SessionId('s'))).toMatchObject({ events: 57, tornBytes: 0 })
    expect((await fresh.inspectFrom(SessionId('s'), 52 as never)).events.map((e) => e.seq)).toEqual([52, 53, 54, 55, 56])
  })

  it('an appended event run is written as its columns, 1024 events a line at most, and read back as its events', async () => {
    const p = backend()
    const none = backend(undefined, 'none')
    const count = 2 * 1024 + 1
    const run: StoredEventRun = {
      type: 'assistant/chunk',
      seq: 1 as SessionSeq,
      time: 1_760_000_000_000,
      run: {
        dt: Array.from({ length: count - 1 }, (_, k) => k % 5),
        data: { turn: 1, index: 0, delta: Array.from({ length: count }, (_, k) => `d${k}`) },
      },
    }
    const first = chunks(0, 1)
    const after = (seq: number): StoredEventRun => ({
      type: 'x',
      seq: seq as SessionSeq,
      time: 1,
      run: { dt: [2], data: { v: [true, null] } },
    })
    for (const q of [p, none]) {
      await q.append(targetOf('s'), first)
      await q.append(targetOf('s'), [run, ...chunks(count + 1, 1)])
      // Queued behind an append in flight: checked and encoded at the call.
      await Promise.all([q.append(targetOf('s'), chunks(count + 2, 1)), q.append(targetOf('s'), [after(count + 3)])])
    }
    const expected = plain([...first, ...expandEventRuns('s', [run]), ...chunks(count + 1, 2), ...expandEventRuns('s', [after(count + 3)])])
    const lines = eventLines(p, 's')
    // The event, two packed lines of 1024, the run's last event alone, the event after it; then the two queued batches.
    expect(lines.map((line) => (line.includes('"run":') ? 'run' : 'event'))).toEqual([
      'event',
      'run',
      'run',
      'event',
      'event',
      'event',
      'run',
    ])
    expect(eventLines(none, 's', 'none')).toHaveLength(count + 5)
    for (const q of [p, none]) {
      const fresh = backend(q.root, q === p ? 'zstd' : 'none')
      expect(plain((await fresh.inspect(SessionId('s'))).events)).toEqual(expected)
      expect(await fresh.verify(SessionId('s'))).toMatchObject({ events: count + 5, tornBytes: 0 })
    }
  })

  it("a fork's first batch may hold runs, in its own events (written as given) or in its seed (taken as events): stored by reference", async () => {
    const p = backend()
    await p.append(targetOf('src'), chunks(0, 30))
    const seed = (await p.inspect(SessionId('src'))).events.slice(0, 17)
    const ownRun = (seq: number): StoredEventRun => ({
      type: 'assistant/chunk',
      seq: seq as SessionSeq,
      time: 1_760_000_001_000,
      run: { dt: [1, 1, 1], data: { turn: 2, index: 0, delta: ['o', 'w', 'n', '!'] } },
    })
    // The seed's first 10 events as one run (the index at the cut does not name seq 16).
    const seedRun: StoredEventRun = {
      type: 'assistant/chunk',
      seq: 0 as SessionSeq,
      time: seed[0]!.time,
      run: {
        dt: seed.slice(1, 10).map((e, k) => e.time - seed[k]!.time),
        data: { turn: 1, index: 0, delta: seed.slice(0, 10).map((e) => (e.data as { delta: string }).delta) },
      },
    }
    await p.append(forkTarget('own', 17, 'src'), [...seed, ownRun(17)])
    await p.append(forkTarget('seeded', 17, 'src'), [seedRun, ...seed.slice(10), ownRun(17)])
    const expected = plain([...chunks(0, 17), ...expandEventRuns('own', [ownRun(17)])])
    const fresh = backend(p.root)
    for (const id of ['own', 'seeded']) {
      expect(plain((await fresh.inspect(SessionId(id))).events)).toEqual(expected)
      // By reference: the log holds the fork's own four events, one packed line.
      expect(eventLines(fresh, id)).toHaveLength(1)
    }
    await expect(p.delete(SessionId('src'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
  })

  it("compression 'none' keeps one line per event (fixtures and line tools)", async () => {
    const p = backend(undefined, 'none')
    await p.append(targetOf('s'), chunks(0, 20))
    expect(eventLines(p, 's', 'none')).toHaveLength(20)
  })

  it.each([1, 2, 3])(
    'a log of pre-release format version %i is refused, typed, by every read and by append, and left as it is',
    async (version) => {
      const p = backend()
      await p.append(targetOf('old'), chunks(0, 4))
      await p.append(targetOf('old'), chunks(4, 4))
      await p.append(targetOf('other'), chunks(0, 2))
      await p.close()
      const file = p.logPath('old')
      const { header, rest } = headerUnitAs(file, version)
      writeFileSync(file, Buffer.concat([header, rest]))
      const before = readFileSync(file)

      const reader = backend(p.root)
      const refused = { code: 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION', message: expect.stringContaining(`format version ${version}`) }
      await expect(reader.inspect(SessionId('old'))).rejects.toMatchObject(refused)
      await expect(reader.inspectFrom(SessionId('old'), SessionLogOffset(2))).rejects.toMatchObject(refused)
      await expect(reader.verify(SessionId('old'))).rejects.toMatchObject(refused)
      await expect(reader.load(SessionId('old'))).rejects.toMatchObject(refused)
      await expect(reader.append(targetOf('old'), chunks(8, 1))).rejects.toMatchObject(refused)
      // A fork of it is refused too: its prefix could not be read.
      await expect(reader.append(forkTarget('kid', 2, 'old'), chunks(0, 3))).rejects.toMatchObject(refused)
      // Listing the root leaves it out and reports it; the other session lists as usual.
      expect((await reader.list()).map((entry) => entry.header.id)).toEqual(['other'])
      expect(reader.damagedLogs()).toEqual([expect.objectContaining({ id: 'old', code: 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' })])
      expect(readFileSync(file).equals(before)).toBe(true)
    },
  )

  it('a fork cut inside a packed run inherits exactly the prefix; materialized, it keeps every event', async () => {
    const p = backend()
    await p.append(targetOf('src'), chunks(0, 30))
    const source = (await p.inspect(SessionId('src'))).events
    await p.append(forkTarget('kid', 17, 'src'), [...source.slice(0, 17), ...chunks(17, 5, 2)])
    const expected = plain([...chunks(0, 17), ...chunks(17, 5, 2)])
    const fresh = backend(p.root)
    expect(plain((await fresh.inspect(SessionId('kid'))).events)).toEqual(expected)
    // The child's log holds its own five events, as one packed line.
    expect(eventLines(fresh, 'kid')).toHaveLength(1)
    expect(await p.delete(SessionId('src'), { materializeDependants: true })).toBe(true)
    expect(eventLines(p, 'kid')).toHaveLength(1)
    expect(plain((await backend(p.root).inspect(SessionId('kid'))).events)).toEqual(expected)
  })

  it('a log of a newer format is refused, typed, by every read and by append, and left as it is', async () => {
    const p = backend()
    await p.append(targetOf('new'), chunks(0, 4))
    await p.append(targetOf('other'), chunks(0, 2))
    await p.close()
    const file = p.logPath('new')
    const { header: v5, rest: batches } = headerUnitAs(file, 5)
    writeFileSync(file, Buffer.concat([v5, batches]))
    const before = readFileSync(file)

    const reader = backend(p.root)
    const unsupported = { code: 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' }
    await expect(reader.inspect(SessionId('new'))).rejects.toMatchObject(unsupported)
    await expect(reader.append(targetOf('new'), chunks(4, 1))).rejects.toMatchObject(unsupported)
    // Listing the root leaves it out and reports it; the other session lists as usual.
    expect((await reader.list()).map((entry) => entry.header.id)).toEqual(['other'])
    expect(reader.damagedLogs()).toEqual([expect.objectContaining({ id: 'new', code: 'SESSION_PERSISTENCE_UNSUPPORTED_VERSION' })])
    expect(readFileSync(file).equals(before)).toBe(true)
  })
})
