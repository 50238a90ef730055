import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId, type StoredSessionEvent } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import {
  type ImportV0Error,
  importV0,
  parseV0Log,
  readV0Log,
  toDshEvent,
  type V0Compression,
  type V0Header,
  type V0Log,
  type V0LogEntry,
  writeV0Log,
} from '../src/index.js'
import { READ_CHUNK } from '../src/log-file.js'
import { openV0Log } from '../src/reader.js'
import { scanFrames } from '../src/zstd-frames.js'
import { flipped, T0, tempDir, V0Builder } from './fixtures.js'

/**
 * A log is read from its file a `READ_CHUNK` at a time, never whole. These
 * logs are several chunks long, with lines and frames across every chunk
 * boundary and (optionally) one line / frame longer than two chunks; a
 * streamed read must give exactly what a whole read of the same bytes gives
 * (`parseV0Log`), and hold at most a chunk and the unit it has not seen the
 * end of (`LogFile.largest`: the largest buffer a read returned).
 */

const dirs: string[] = []
const open: SessionPersistence[] = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
function dir(prefix: string): string {
  const d = tempDir(prefix)
  dirs.push(d)
  return d
}
function persistence(): SessionPersistence {
  const p = createJsonlPersistence({ root: dir('dsh') })
  open.push(p)
  return p
}

const COMPRESSIONS: readonly V0Compression[] = ['none', 'zstd']

/** Deterministic text zstd barely compresses (base64 of a hash chain), so a frame of it is about as long as its text. */
function noise(length: number, seed: string): string {
  const parts: string[] = []
  let hash = createHash('sha256').update(seed).digest()
  for (let n = 0; n < length; n += 44) {
    parts.push(hash.toString('base64'))
    hash = createHash('sha256').update(hash).digest()
  }
  return parts.join('').slice(0, length)
}

/** About 6 MiB of turns (rows, converted and unconverted events) and lines of many lengths; `long`: one line of 2.5 chunks. */
function bigSession(long: boolean): V0Builder {
  const b = new V0Builder()
  for (let turn = 1; turn <= 24; turn++) {
    b.turn(turn, `question ${turn}`, `answer ${turn}, `.repeat(30), { tool: turn % 3 === 0, reasoning: turn % 2 === 0 })
    for (let i = 0; i < 8; i++) b.add('x/pad', { turn, i, pad: noise(1000 + ((turn * 7919 + i * 104_729) % 60_000), `${turn}.${i}`) })
    b.flush()
    if (long && turn === 12) b.add('x/long', { pad: noise(2 * READ_CHUNK + READ_CHUNK / 2, 'long') })
    b.flush()
  }
  b.turn(25, 'last', 'done')
  return b
}

async function writeSession(long: boolean, compression: V0Compression): Promise<{ b: V0Builder; root: string; entry: V0LogEntry }> {
  const b = bigSession(long)
  const root = dir('streamed')
  const header: V0Header = { id: `big-${compression}`, createdAt: T0, cwd: '/srv/big', delegationDepth: 0 }
  const path = await writeV0Log(root, header, b.batches, { compression })
  return { b, root, entry: { path, compression, dirId: header.id } }
}

/** What a whole read of the file's bytes as they are now gives (the path named as a file read names it). */
function wholeRead(entry: V0LogEntry): V0Log {
  return parseV0Log(readFileSync(entry.path), entry.compression, entry.path)
}

function digest(events: readonly StoredSessionEvent[]): string {
  const hash = createHash('sha256')
  for (const event of events) hash.update(`${JSON.stringify(event)}\n`)
  return hash.digest('hex')
}

/** The longest unit a reader must hold whole: a line (with its newline) of a plain log, a frame of a zstd one. */
function longestUnit(bytes: Buffer, compression: V0Compression): number {
  if (compression === 'zstd') return Math.max(...scanFrames(bytes).spans.map((span) => span.size))
  let longest = 0
  for (let at = 0, newline = bytes.indexOf(0x0a); newline !== -1; at = newline + 1, newline = bytes.indexOf(0x0a, at))
    longest = Math.max(longest, newline + 1 - at)
  return longest
}

/** File descriptors of this process open on `path`. */
function descriptorsOn(path: string): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(join('/proc/self/fd', fd)) === path
    } catch {
      return false
    }
  }).length
}

describe('v0 logs read a chunk at a time', () => {
  it.each(COMPRESSIONS)(
    'reads and imports a %s log several chunks long with what a whole read gives: events, counts, digests',
    async (compression) => {
      const { b, root, entry } = await writeSession(true, compression)
      expect(readFileSync(entry.path).length).toBeGreaterThan(4 * READ_CHUNK)
      const whole = wholeRead(entry)
      expect(whole.events).toEqual(b.events)
      expect(whole.packedRows).toBeGreaterThan(0)

      const streamed = await readV0Log(root, entry)
      expect(streamed).toEqual(whole)

      const p = persistence()
      const report = await importV0({ from: root, persistence: p })
      expect(report).toMatchObject({ imported: 1, failed: 0 })
      expect(report.sessions[0]).toMatchObject({ status: 'imported', events: whole.events.length, appended: whole.events.length })
      expect(report.sessions[0]?.tornBytes).toBeUndefined()
      const stored = (await p.inspect(SessionId(entry.dirId as string))).events
      const expected = whole.events.map(toDshEvent)
      expect(stored).toHaveLength(expected.length)
      expect(digest(stored)).toBe(digest(expected))
      // A second run reads the whole log again and finds every event the same.
      expect(await importV0({ from: root, persistence: p })).toMatchObject({ unchanged: 1, failed: 0, appends: 0 })
      expect(descriptorsOn(entry.path)).toBe(0)
    },
    300_000,
  ) // bounded by bytes; the timeout only guards a hang

  it.each(COMPRESSIONS)(
    'holds at most a chunk and the %s unit it has not seen the end of, never the file',
    async (compression) => {
      for (const long of [false, true]) {
        const { b, root, entry } = await writeSession(long, compression)
        const bytes = readFileSync(entry.path)
        const longest = longestUnit(bytes, compression)
        const reader = await openV0Log(root, entry)
        let events = 0
        do for (let event = reader.next(); event !== undefined; event = reader.next()) events++
        while (await reader.more())
        expect(events).toBe(b.events.length)
        const file = reader.file!
        // Each read holds a chunk and the part of one line or frame carried over; a unit longer than a chunk at most twice.
        expect(file.largest).toBeLessThanOrEqual(Math.max(READ_CHUNK + longest, 2 * longest))
        if (long) {
          expect(longest).toBeGreaterThan(READ_CHUNK)
          expect(file.largest).toBeLessThan(bytes.length)
        } else {
          // Units well under a chunk: every byte went through pieces of a chunk (one more read finds the end), a few times smaller than the file.
          expect(longest).toBeLessThan(READ_CHUNK / 2)
          expect(file.reads).toBeGreaterThanOrEqual(Math.ceil(bytes.length / READ_CHUNK))
          expect(file.largest).toBeLessThanOrEqual(READ_CHUNK + longest)
          expect(bytes.length).toBeGreaterThan(3 * file.largest)
        }
        expect(descriptorsOn(entry.path)).toBe(0)
      }
    },
    300_000,
  ) // bounded by bytes; the timeout only guards a hang

  it.each(COMPRESSIONS)(
    'ends, tears and fails a %s log where a whole read of the same bytes does, at chunk boundaries and inside a long unit',
    async (compression) => {
      const { root, entry } = await writeSession(true, compression)
      const full = readFileSync(entry.path)
      // Where the unit longer than a chunk starts and ends, and where a unit starting after three chunks does (a frame / a line).
      let long: { start: number; end: number }
      let lateStart: number
      if (compression === 'zstd') {
        const spans = scanFrames(full).spans
        const span = spans.find((s) => s.size > READ_CHUNK)!
        long = { start: span.offset, end: span.offset + span.size }
        lateStart = spans.find((s) => s.offset > 3 * READ_CHUNK)!.offset
      } else {
        const start = full.lastIndexOf(0x0a, full.indexOf('"type":"x/long"')) + 1
        long = { start, end: full.indexOf(0x0a, start) + 1 }
        lateStart = full.indexOf(0x0a, 3 * READ_CHUNK) + 1
      }
      expect(long.end - long.start).toBeGreaterThan(READ_CHUNK + 3)
      for (const cut of [READ_CHUNK - 1, READ_CHUNK, READ_CHUNK + 1, long.start + READ_CHUNK + 3, long.end - 1, full.length - 1]) {
        writeFileSync(entry.path, full.subarray(0, cut))
        const whole = wholeRead(entry)
        expect(await readV0Log(root, entry)).toEqual(whole)
        if (cut > long.start && cut < long.end) expect(whole.tornBytes).toBe(cut - long.start)
      }

      // A fault after three chunks: the same typed reason as a whole read, after exactly the events before it.
      const eventsBefore = parseV0Log(full.subarray(0, lateStart), compression).events.length
      expect(eventsBefore).toBeGreaterThan(0)
      const skippable = Buffer.from([0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4])
      const faults =
        compression === 'zstd'
          ? [
              flipped(full, scanFrames(full).spans.find((span) => span.offset === lateStart)!.size + lateStart - 1, 0x01),
              Buffer.concat([full.subarray(0, lateStart), skippable, full.subarray(lateStart)]),
            ]
          : [
              flipped(full, lateStart, 0x24),
              Buffer.concat([full.subarray(0, lateStart), Buffer.from('{"type":\n'), full.subarray(lateStart)]),
            ]
      for (const damaged of faults) {
        writeFileSync(entry.path, damaged)
        let wholeError: ImportV0Error | undefined
        try {
          parseV0Log(damaged, compression)
        } catch (error) {
          wholeError = error as ImportV0Error
        }
        expect(wholeError?.code).toMatch(/^IMPORT_V0_/)
        const reader = await openV0Log(root, entry)
        let events = 0
        const streamed = await (async () => {
          do for (let event = reader.next(); event !== undefined; event = reader.next()) events++
          while (await reader.more())
        })().catch((error: ImportV0Error) => error)
        expect(streamed).toMatchObject({ code: wholeError?.code, message: wholeError?.message })
        expect(events).toBe(eventsBefore)
        // A fault closes the file (one `next()` throws has its close started; `close()` waits for it).
        await reader.close()
        expect(descriptorsOn(entry.path)).toBe(0)
      }
    },
    300_000,
  ) // bounded by bytes; the timeout only guards a hang

  it('lets go of the file when a reader or an import stops before the end of the log', async () => {
    const { root, entry } = await writeSession(false, 'zstd')
    const reader = await openV0Log(root, entry)
    expect(await reader.more()).toBe(true)
    expect(reader.next()).toBeDefined()
    expect(descriptorsOn(entry.path)).toBe(1)
    await reader.close()
    expect(descriptorsOn(entry.path)).toBe(0)

    // An import that meets a conflict in the first events stops reading there.
    const p = persistence()
    expect(await importV0({ from: root, persistence: p })).toMatchObject({ imported: 1 })
    const b = bigSession(false)
    const first = b.events[0]!
    b.batches[0]![0] = { ...first, time: first.time + 1 }
    rmSync(entry.path)
    await writeV0Log(root, { id: entry.dirId as string, createdAt: T0, cwd: '/srv/big', delegationDepth: 0 }, b.batches)
    const report = await importV0({ from: root, persistence: p })
    expect(report.sessions[0]).toMatchObject({ status: 'failed', events: 0, reason: { code: 'IMPORT_V0_CONFLICT' } })
    expect(descriptorsOn(entry.path)).toBe(0)
  }, 300_000) // bounded by bytes; the timeout only guards a hang
})
