import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { SessionId, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlCompression, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const ID = 'victim' as SessionId
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown

interface Fixture {
  readonly p: JsonlPersistence
  readonly file: string
  /** Log bytes after each durable append (index 0: after the first); zstd logs end with padding from the second. */
  readonly snapshots: Buffer[]
  /** The committed end after each durable append (where its padding starts, if any). */
  readonly ends: number[]
  readonly batches: StoredSessionEvent[][]
  /** Where the first batch starts (the header unit ends). */
  readonly headerEnd: number
  readonly cleanup: () => Promise<void>
}

async function fixture(compression: JsonlCompression): Promise<Fixture> {
  const { dir, cleanup } = tempDir()
  const writer = createJsonlPersistence({ root: dir, compression })
  const batches = [eventsFrom(0, 4), eventsFrom(4, 1), eventsFrom(5, 6), eventsFrom(11, 3)]
  await writer.append(targetOf(ID), [])
  const file = writer.logPath(ID)
  const headerEnd = statSync(file).size
  const snapshots: Buffer[] = []
  const ends: number[] = []
  for (const batch of batches) {
    await writer.append(targetOf(ID), batch)
    snapshots.push(readFileSync(file))
    ends.push((await writer.verify(ID)).committedBytes)
  }
  // Release the writer lock: the tests read with `p` and write with fresh instances.
  await writer.close()
  const p = createJsonlPersistence({ root: dir, compression })
  return {
    p,
    file,
    snapshots,
    ends,
    batches,
    headerEnd,
    cleanup: async () => {
      await p.close()
      cleanup()
    },
  }
}

async function outcome(
  p: JsonlPersistence,
  file: string,
  bytes: Buffer,
): Promise<{ code: string } | { events: readonly StoredSessionEvent[] }> {
  writeFileSync(file, bytes)
  return p.inspect(ID).then(
    (o) => ({ events: o.events }),
    (error: { code?: string }) => ({ code: error.code ?? String(error) }),
  )
}

/**
 * The log after the last append was torn after `torn` bytes: the log before
 * it with that prefix of the append's write in place (over the padding of a
 * padded log, at the end of a plain one).
 */
function tornLast(f: Fixture, torn: number): Buffer {
  const before = f.snapshots.at(-2)!
  const at = f.ends.at(-2)!
  const written = f.snapshots.at(-1)!.subarray(at, at + torn)
  const out = Buffer.alloc(Math.max(before.length, at + torn))
  before.copy(out)
  written.copy(out, at)
  return out
}

/** Bytes of the last append's batch (frame and trailer). */
const lastUnit = (f: Fixture): number => f.ends.at(-1)! - f.ends.at(-2)!

function flipped(bytes: Buffer, at: number, mask = 0xff): Buffer {
  const copy = Buffer.from(bytes)
  copy[at]! ^= mask
  return copy
}

for (const compression of ['zstd', 'none'] as const) {
  describe(`corruption (${compression})`, () => {
    // A fresh fixture per test: a test that fails (or times out) cannot leave a
    // session locked or a log damaged for the next one.
    let f: Fixture
    beforeEach(async () => {
      f = await fixture(compression)
    })
    afterEach(() => f.cleanup())

    it('flipping any single byte of a committed batch (data or trailer) makes inspect reject with CORRUPT', async () => {
      const whole = f.snapshots.at(-1)!
      const end = f.ends.at(-1)!
      const outcomes = new Map<string, number>()
      for (let at = f.headerEnd; at < end; at++) {
        const result = await outcome(f.p, f.file, flipped(whole, at))
        const key = 'code' in result ? result.code : 'returned events'
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
      }
      expect(Object.fromEntries(outcomes)).toEqual({ SESSION_PERSISTENCE_CORRUPT: end - f.headerEnd })
    }, 600_000) // bounded by counts (every byte, fixed runs); the timeout only guards a hang

    it('any single-byte change (random masks) in a committed batch is CORRUPT, also with a torn tail behind it', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: f.headerEnd, max: f.ends.at(-2)! - 1 }),
          fc.integer({ min: 1, max: 255 }),
          fc.integer({ min: 0, max: lastUnit(f) - 1 }),
          async (at, mask, torn) => {
            const bytes = flipped(tornLast(f, torn), at, mask)
            expect(await outcome(f.p, f.file, bytes)).toEqual({ code: 'SESSION_PERSISTENCE_CORRUPT' })
          },
        ),
        { numRuns: 300 },
      )
    }, 600_000) // bounded by counts (every byte, fixed runs); the timeout only guards a hang

    it('flipping a byte of the header unit is CORRUPT for inspect and for list', async () => {
      const whole = f.snapshots.at(-1)!
      for (let at = 0; at < f.headerEnd; at++) {
        expect(await outcome(f.p, f.file, flipped(whole, at))).toEqual({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      }
      writeFileSync(f.file, flipped(whole, 6))
      // The damaged log is left out of the listing and reported, never hiding other sessions.
      expect(await f.p.list()).toEqual([])
      expect(f.p.damagedLogs()).toEqual([expect.objectContaining({ id: ID, code: 'SESSION_PERSISTENCE_CORRUPT', dir: dirname(f.file) })])
      writeFileSync(f.file, whole)
      expect((await f.p.list()).map((r) => r.header.id)).toEqual([ID])
      expect(f.p.damagedLogs()).toEqual([])
    })

    it('a torn final batch is ignored by reads, whatever its bytes, and never reported as corruption', async () => {
      const committedEnd = f.ends.at(-2)!
      const expected = plain(f.batches.slice(0, -1).flat())
      const tornLengths = lastUnit(f)
      for (let torn = 1; torn < tornLengths; torn++) {
        const bytes = tornLast(f, torn)
        const result = await outcome(f.p, f.file, bytes)
        expect('events' in result && plain(result.events)).toEqual(expected)
      }
      // Damage inside the torn part does not matter either.
      for (const torn of [
        1,
        2,
        5,
        9,
        Math.floor(tornLengths / 2),
        tornLengths - 52,
        tornLengths - 51,
        tornLengths - 10,
        tornLengths - 1,
      ].filter((t) => t > 0 && t < tornLengths)) {
        for (let at = committedEnd; at < committedEnd + torn; at++) {
          // Every byte of the torn part, its mask taking turns: all bits, the lowest, the highest.
          const mask = [0xff, 0x01, 0x80][at % 3]!
          const result = await outcome(f.p, f.file, flipped(tornLast(f, torn), at, mask))
          expect('events' in result && plain(result.events)).toEqual(expected)
        }
      }
    }, 600_000) // bounded by counts (every byte, fixed runs); the timeout only guards a hang

    it('verify reports the torn tail in bytes and the committed events, and changes nothing', async () => {
      const next = f.snapshots.at(-1)!
      const torn = Math.max(1, Math.floor(lastUnit(f) / 2))
      const bytes = tornLast(f, torn)
      writeFileSync(f.file, bytes)
      const report = await f.p.verify(ID)
      // Everything after the committed end is torn tail: the torn write, and the padding it does not end with.
      const committedEnd = f.ends.at(-2)!
      expect(report).toEqual({
        id: ID,
        events: f.batches.slice(0, -1).flat().length,
        committedBytes: committedEnd,
        tornBytes: bytes.length - committedEnd,
      })
      expect(readFileSync(f.file).equals(bytes)).toBe(true)
      writeFileSync(f.file, next)
      expect((await f.p.verify(ID)).tornBytes).toBe(0)
      writeFileSync(f.file, flipped(next, f.headerEnd + 3))
      await expect(f.p.verify(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      writeFileSync(f.file, next)
    })

    it('load truncates a torn tail (committed data untouched) and a reopened backend reads the same log', async () => {
      writeFileSync(f.file, tornLast(f, 7))
      const fresh = createJsonlPersistence({ root: f.p.root, compression })
      const loaded = await fresh.load(ID)
      expect(loaded.repaired).toBe(true)
      // Truncated to the committed end (a padded log's padding goes with the torn tail).
      expect(readFileSync(f.file).equals(f.snapshots.at(-2)!.subarray(0, f.ends.at(-2)!))).toBe(true)
      expect(plain(loaded.events)).toEqual(plain(f.batches.slice(0, -1).flat()))
      await fresh.close()
      const again = createJsonlPersistence({ root: f.p.root, compression })
      const reread = await again.inspect(ID)
      expect(reread.revision).toBe(loaded.revision)
      expect(plain(reread.events)).toEqual(plain(loaded.events))
      expect((await again.load(ID)).repaired).toBe(false)
      await again.close()
    })

    it('an append after a torn tail continues the committed log', async () => {
      writeFileSync(f.file, tornLast(f, lastUnit(f) - 3))
      const fresh = createJsonlPersistence({ root: f.p.root, compression })
      const resumeAt = f.batches.slice(0, -1).flat().length
      const result = await fresh.append(targetOf(ID), eventsFrom(resumeAt, 2))
      expect(result.nextSeq).toBe(resumeAt + 2)
      expect((await fresh.inspect(ID)).events.map((e) => e.seq)).toEqual(Array.from({ length: resumeAt + 2 }, (_, i) => i))
      expect(statSync(f.file).size).toBeGreaterThan(f.ends.at(-2)!)
      await fresh.close()
    })

    it('load refuses a corrupt log with CORRUPT and leaves its bytes alone', async () => {
      const whole = f.snapshots.at(-1)!
      const damaged = flipped(whole, f.headerEnd + 3)
      writeFileSync(f.file, damaged)
      const fresh = createJsonlPersistence({ root: f.p.root, compression })
      try {
        await expect(fresh.load(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
        expect(readFileSync(f.file).equals(damaged)).toBe(true)
        // A fresh append verifies only the log's tail (header, last batch and
        // its trailer), so it lands after the damage without touching it;
        // every full read still reports the damage.
        await fresh.append(targetOf(ID), eventsFrom(14, 1))
        expect(fresh.metrics.tailVerifications).toBe(2) // load's open, then the append's
        const end = f.ends.at(-1)!
        expect(readFileSync(f.file).subarray(0, end).equals(damaged.subarray(0, end))).toBe(true)
        await expect(fresh.inspect(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      } finally {
        await fresh.close()
        writeFileSync(f.file, whole)
      }
    })

    it('an explicit delete removes even a log too damaged to read', async () => {
      const whole = f.snapshots.at(-1)!
      writeFileSync(f.file, flipped(whole, 2))
      const fresh = createJsonlPersistence({ root: f.p.root, compression })
      expect(await fresh.list()).toEqual([])
      expect(fresh.damagedLogs().map((d) => d.id)).toEqual([ID])
      expect(await fresh.delete(ID)).toBe(true)
      expect(await fresh.list()).toEqual([])
      expect(await fresh.stat(ID)).toBeUndefined()
      await fresh.close()
      // Put the fixture back for any later test.
      mkdirSync(dirname(f.file), { recursive: true })
      writeFileSync(f.file, whole)
    })
  })
}
