import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { SessionId, type StoredSessionEvent } from '@dsh/session'
import type { AppendTarget } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { CHECKPOINT_BYTES, checkpointDistance, MAX_PAD_GROWTH, newestSlot, PAD_MAGIC, SLOTS_BYTES } from '../src/log-padding.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

// The preallocated tail of zstd logs (src/log-padding.ts): appends
// overwrite padding instead of growing the file; reads, revisions, torn
// writes, fresh writers, forks and older versions around it.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function backend(dir?: string): JsonlPersistence {
  const root = dir ?? tempDir().dir
  if (dir === undefined) cleanups.push(() => rmSync(root, { recursive: true, force: true }))
  const p = createJsonlPersistence({ root })
  cleanups.push(() => p.close())
  return p
}

const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown
const ID = 'padded'
const seqs = (n: number): number[] => Array.from({ length: n }, (_, i) => i)

/** Where the padding frame starts (the committed end), read from the file alone. */
function paddingStart(buf: Buffer): number | undefined {
  const magic = Buffer.alloc(4)
  magic.writeUInt32LE(PAD_MAGIC)
  for (let at = buf.indexOf(magic); at !== -1; at = buf.indexOf(magic, at + 1)) {
    if (at + 8 + buf.readUInt32LE(at + 4) === buf.length) return at
  }
  return undefined
}

/** The committed end the newest end slot names (a checkpoint at or before the committed end). */
function slotEnd(buf: Buffer): number {
  return newestSlot(buf.subarray(buf.length - SLOTS_BYTES))!.end
}

describe('padding (zstd logs)', () => {
  it('a new log has none; the second append pads to a 4 KiB boundary; later appends overwrite it without changing the size', async () => {
    const p = backend()
    await p.append(targetOf(ID), eventsFrom(0, 3))
    const file = p.logPath(ID)
    const first = readFileSync(file)
    expect(paddingStart(first)).toBeUndefined()
    expect((await p.verify(SessionId(ID))).committedBytes).toBe(first.length)

    await p.append(targetOf(ID), eventsFrom(3, 3))
    const size = statSync(file).size
    expect(size % 4096).toBe(0)
    let buf = readFileSync(file)
    let end = paddingStart(buf)!
    expect(end).toBeGreaterThan(first.length)
    expect(buf.subarray(0, first.length).equals(first)).toBe(true)
    // The padding holds zeros, then the two end slots.
    expect(buf.subarray(end + 8, buf.length - SLOTS_BYTES).every((b) => b === 0)).toBe(true)

    let appended = 6
    const revisions = new Set<string>([(await p.stat(SessionId(ID)))!])
    for (let i = 0; i < 8; i++) {
      const appendedRevision = (await p.append(targetOf(ID), eventsFrom(appended, 2))).revision
      appended += 2
      expect(statSync(file).size).toBe(size)
      buf = readFileSync(file)
      const next = paddingStart(buf)!
      expect(next).toBeGreaterThan(end)
      end = next
      // A revision changes with every append although the size does not, and every reader reports the one
      // the append returned (which the writer computed from the slot it wrote, without a stat).
      const revision = (await p.stat(SessionId(ID)))!
      expect(revision).toBe(appendedRevision)
      expect(revisions.has(revision)).toBe(false)
      revisions.add(revision)
      expect((await p.list()).map((r) => r.revision)).toEqual([revision])
      expect((await p.inspect(SessionId(ID))).revision).toBe(revision)
    }
    expect(await p.verify(SessionId(ID))).toMatchObject({ events: appended, committedBytes: end, tornBytes: 0 })
    // zstd itself reads the padded log: the header line, then every event (the padding frame is skipped).
    const lines = execFileSync('zstd', ['-dc', file]).toString('utf8').trimEnd().split('\n')
    expect(lines).toHaveLength(1 + appended)
    expect(JSON.parse(lines[0]!)).toMatchObject({ formatVersion: 4, header: { id: ID } })
    expect(lines.slice(1).map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual(seqs(appended))
  })

  it('an end slot behind the committed end (a checkpoint, or a writer killed before its slot write) hides no batch: readers walk on to the end', async () => {
    const p = backend()
    await p.append(targetOf(ID), eventsFrom(0, 3))
    await p.append(targetOf(ID), eventsFrom(3, 3)) // the growth: padded now
    const file = p.logPath(ID)
    const size = statSync(file).size
    const slots = readFileSync(file).subarray(size - SLOTS_BYTES)
    const third = (await p.append(targetOf(ID), eventsFrom(6, 2))).revision // into the padding, past a sixteenth of this small log
    await p.close()
    expect(statSync(file).size).toBe(size)
    const bytes = readFileSync(file)
    expect(bytes.subarray(size - SLOTS_BYTES).equals(slots)).toBe(false) // it wrote a slot
    // What a SIGKILL between the append's two writes leaves: the batch and its new pad header, the old slots.
    slots.copy(bytes, size - SLOTS_BYTES)
    writeFileSync(file, bytes)
    expect(slotEnd(bytes)).toBeLessThan(paddingStart(bytes)!)
    const reader = backend(p.root)
    // Every reader walks from the slot to the padding and reports the revision the writer returned.
    expect(await reader.stat(SessionId(ID))).toBe(third)
    expect((await reader.list()).map((r) => r.revision)).toEqual([third])
    const inspected = await reader.inspect(SessionId(ID))
    expect(inspected.revision).toBe(third)
    expect(inspected.events.map((e) => e.seq)).toEqual(seqs(8))
    expect((await reader.inspectFrom(SessionId(ID), 6 as never)).revision).toBe(third)
    const loaded = await reader.load(SessionId(ID))
    expect(loaded.repaired).toBe(false)
    expect(loaded.events.map((e) => e.seq)).toEqual(seqs(8))
    // The writer found the same end (nothing truncated) and appends on in the padding; readers agree with it.
    const next = (await reader.append(targetOf(ID), eventsFrom(8, 2))).revision
    expect(statSync(file).size).toBe(size)
    expect(await reader.stat(SessionId(ID))).toBe(next)
    expect((await reader.list()).map((r) => r.revision)).toEqual([next])
    expect(reader.metrics.tailVerifications).toBe(1)
  })

  it('a small append writes its batch alone; a slot is written again only past a checkpoint distance (16 KiB, or a sixteenth of a small log)', async () => {
    const p = backend()
    // A log past 128 KiB, so the distance is CHECKPOINT_BYTES (count-bounded: at most 400 batches of 100 events).
    const file = p.logPath(ID)
    let seq = 0
    for (let b = 0; b < 400 && (b < 2 || paddingStart(readFileSync(file))! <= 8 * CHECKPOINT_BYTES); b++) {
      await p.append(targetOf(ID), eventsFrom(seq, 100))
      seq += 100
    }
    let buf = readFileSync(file)
    expect(paddingStart(buf)!).toBeGreaterThan(8 * CHECKPOINT_BYTES)
    let slots = buf.subarray(buf.length - SLOTS_BYTES)
    let slotWrites = 0
    const start = paddingStart(buf)!
    // Count-bounded: 120 small appends (~0.5-1 KiB stored each).
    for (let i = 0; i < 120; i++) {
      const size = buf.length
      await p.append(targetOf(ID), eventsFrom(seq, 10))
      seq += 10
      buf = readFileSync(file)
      // A growth writes both slots; an append into the padding, only past the distance.
      const now = buf.subarray(buf.length - SLOTS_BYTES)
      if (buf.length !== size || !now.equals(slots)) slotWrites++
      slots = now
      // The newest slot never trails the committed end by more than the distance.
      expect(paddingStart(buf)! - slotEnd(buf)).toBeLessThanOrEqual(checkpointDistance(paddingStart(buf)!))
    }
    const appended = paddingStart(buf)! - start
    expect(appended).toBeGreaterThan(2 * CHECKPOINT_BYTES)
    // Growths (about every 1/16 of the log) and checkpoints: a few of the 120 appends, never most of them.
    expect(slotWrites).toBeGreaterThanOrEqual(Math.floor(appended / CHECKPOINT_BYTES))
    expect(slotWrites).toBeLessThan(120 / 4)
    const fresh = backend(p.root)
    expect((await fresh.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(seq))
  })

  it("a padded log's revision costs the header prefix, the slots, and one read of the units after a slot behind; none once its writer closed", async () => {
    const p = backend()
    const file = p.logPath(ID)
    let seq = 0
    // A log of 64 KiB or more (count-bounded), then small appends until the newest slot is behind the end.
    for (let b = 0; b < 400 && (b < 2 || statSync(file).size < 64 * 1024); b++) {
      await p.append(targetOf(ID), eventsFrom(seq, 50))
      seq += 50
    }
    let appended = ''
    for (let i = 0; i < 50; i++) {
      appended = (await p.append(targetOf(ID), eventsFrom(seq, 3))).revision
      seq += 3
      const now = readFileSync(file)
      if (paddingStart(now)! > slotEnd(now)) break
    }
    // While the writer holds the log (or after it was killed), the newest slot is behind the end.
    let buf = readFileSync(file)
    const walked = paddingStart(buf)! - slotEnd(buf)
    expect(walked).toBeGreaterThan(0)
    expect(walked).toBeLessThanOrEqual(checkpointDistance(buf.length))
    const reader = backend(p.root)
    expect(await reader.stat(SessionId(ID))).toBe(appended)
    // The header prefix, the two slots, the trailer and pad header at the slot's end, then one read of the most a
    // writer leaves after a slot (checkpointDistance, and the pad header after it), or up to the slots.
    const walkRead = Math.min(buf.length - SLOTS_BYTES - slotEnd(buf), checkpointDistance(buf.length) + 8)
    expect(reader.metrics.bytesRead).toBe(512 + SLOTS_BYTES + 60 + walkRead)
    expect(reader.metrics.bytesRead).toBeLessThan(buf.length / 8)
    // Closing the writer brings the newest slot to the end (not synced: a hint); then a revision reads nothing more.
    await p.close()
    buf = readFileSync(file)
    expect(slotEnd(buf)).toBe(paddingStart(buf))
    const later = backend(p.root)
    expect(await later.stat(SessionId(ID))).toBe(appended)
    expect(later.metrics.bytesRead).toBe(512 + SLOTS_BYTES + 60)
    expect((await later.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(seq))
  })

  it('a writer evicted beyond maxOpenWriters brings its newest slot to the end too', async () => {
    const { dir } = tempDir()
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const p = createJsonlPersistence({ root: dir, maxOpenWriters: 1 })
    cleanups.push(() => p.close())
    const file = p.logPath(ID)
    let seq = 0
    for (let b = 0; b < 400 && (b < 2 || statSync(file).size < 64 * 1024); b++) {
      await p.append(targetOf(ID), eventsFrom(seq, 50))
      seq += 50
    }
    for (let i = 0; i < 50 && paddingStart(readFileSync(file))! === slotEnd(readFileSync(file)); i++) {
      await p.append(targetOf(ID), eventsFrom(seq, 3))
      seq += 3
    }
    expect(paddingStart(readFileSync(file))!).toBeGreaterThan(slotEnd(readFileSync(file)))
    // Opening another session's writer evicts this one (through its own queue).
    await p.append(targetOf('other'), eventsFrom(0, 3))
    await vi.waitFor(() => expect(slotEnd(readFileSync(file))).toBe(paddingStart(readFileSync(file))), { timeout: 120_000 })
    expect((await p.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(seq))
  })

  it('grows when a batch does not fit: zeros written up to a new 4 KiB boundary, at most 1 MiB beyond the batch, every event kept', async () => {
    const p = backend()
    await p.append(targetOf(ID), eventsFrom(0, 1))
    await p.append(targetOf(ID), eventsFrom(1, 1))
    const file = p.logPath(ID)
    let size = statSync(file).size
    let seq = 2
    let growths = 0
    // Count-bounded: appends of ~1-2 KiB stored until the padding has grown three times.
    for (let i = 0; i < 400 && growths < 3; i++) {
      const batch = eventsFrom(seq, 40)
      await p.append(targetOf(ID), batch)
      seq += batch.length
      const now = statSync(file).size
      if (now !== size) {
        growths++
        expect(now % 4096).toBe(0)
        const buf = readFileSync(file)
        const end = paddingStart(buf)!
        expect(now - end).toBeLessThanOrEqual(MAX_PAD_GROWTH + 4096 + 72)
        expect(buf.subarray(end + 8, now - SLOTS_BYTES).every((b) => b === 0)).toBe(true)
        size = now
      }
    }
    expect(growths).toBe(3)
    const fresh = backend(p.root)
    expect((await fresh.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(seq))
  })

  it('a fresh writer verifies the tail through the end slot (no whole-log read) and continues in the padding', async () => {
    const p = backend()
    for (let b = 0; b < 30; b++) await p.append(targetOf(ID), eventsFrom(b * 5, 5))
    await p.close()
    const file = p.logPath(ID)
    const size = statSync(file).size
    const fresh = backend(p.root)
    await fresh.append(targetOf(ID), eventsFrom(150, 5))
    expect(fresh.metrics.tailVerifications).toBe(1)
    expect(fresh.metrics.bodyReads).toBe(0)
    expect(fresh.metrics.bytesRead).toBeLessThan(size / 4)
    expect(statSync(file).size).toBe(size)
    await fresh.close()
    const again = backend(p.root)
    const loaded = await again.load(SessionId(ID))
    expect(loaded.repaired).toBe(false)
    expect(loaded.events.map((e) => e.seq)).toEqual(seqs(155))
    // inspectFrom walks back from the slot's end, not the file's.
    expect((await again.inspectFrom(SessionId(ID), 148 as never)).events.map((e) => e.seq)).toEqual([148, 149, 150, 151, 152, 153, 154])
  })

  it('a torn growth (a prefix of the write that extends the file, at every offset) recovers to the last acknowledged batch', async () => {
    const dir = tempDir().dir
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const p = createJsonlPersistence({ root: dir })
    await p.append(targetOf(ID), eventsFrom(0, 4))
    const file = p.logPath(ID)
    const before = readFileSync(file)
    await p.append(targetOf(ID), eventsFrom(4, 3)) // the growth: batch, pad header, zeros, slots
    const after = readFileSync(file)
    await p.close()
    const unit = paddingStart(after)! - before.length
    const expected = plain(eventsFrom(0, 4))
    // Every offset inside the batch and the pad header, then samples through the zeros and slots.
    const offsets = [...Array.from({ length: unit + 8 }, (_, i) => i + 1), 100 + unit, 1000, after.length - before.length - 40]
    for (const torn of offsets.filter((t) => t > 0 && t < after.length - before.length)) {
      writeFileSync(file, after.subarray(0, before.length + torn))
      const reader = createJsonlPersistence({ root: dir })
      const events = plain((await reader.inspect(SessionId(ID))).events) as StoredSessionEvent[]
      // Committed iff frame and trailer are complete: a prefix holding both has the batch, anything shorter does not.
      expect(events).toEqual(torn >= unit ? plain([...eventsFrom(0, 4), ...eventsFrom(4, 3)]) : expected)
      await reader.close()
    }
    // A writer after a torn growth truncates the torn bytes and appends at the committed end.
    writeFileSync(file, after.subarray(0, before.length + Math.floor(unit / 2)))
    const writer = createJsonlPersistence({ root: dir })
    const loaded = await writer.load(SessionId(ID))
    expect(loaded.repaired).toBe(true)
    expect(statSync(file).size).toBe(before.length)
    await writer.append(targetOf(ID), eventsFrom(4, 2))
    expect((await writer.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(6))
    await writer.close()
  })

  it('behind an intact pad header the padding holds only zeros and slots: another byte there is damage; a damaged slot is found', async () => {
    const p = backend()
    for (let b = 0; b < 6; b++) await p.append(targetOf(ID), eventsFrom(b * 3, 3))
    await p.close()
    const file = p.logPath(ID)
    const whole = readFileSync(file)
    const end = paddingStart(whole)!
    const reader = backend(p.root)
    // A torn append overwrites the pad header first, so bytes changed behind an intact one were not written by a writer.
    for (const at of [end + 8, end + 100, whole.length - SLOTS_BYTES - 1, whole.length - SLOTS_BYTES + 5, whole.length - 1]) {
      const bytes = Buffer.from(whole)
      bytes[at]! ^= 0x5a
      writeFileSync(file, bytes)
      await expect(reader.inspect(SessionId(ID))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
      await expect(reader.verify(SessionId(ID))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    }
    // Bytes after the padding frame (it does not reach the end): a torn tail, reported and truncated with the padding.
    writeFileSync(file, Buffer.concat([whole, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x40])]))
    expect(await reader.verify(SessionId(ID))).toMatchObject({ events: 18, committedBytes: end, tornBytes: 6 })
    const writer = backend(p.root)
    await writer.append(targetOf(ID), eventsFrom(18, 2))
    // The slot does not name the end of the file: the writer checked the whole log.
    expect(writer.metrics.tailVerifications).toBe(0)
    expect((await writer.inspect(SessionId(ID))).events.map((e) => e.seq)).toEqual(seqs(20))
    expect((await writer.verify(SessionId(ID))).tornBytes).toBe(0)
  })

  it('a fork of a padded log writes no padding (a few hundred bytes) and references the committed end, not the file end', async () => {
    const p = backend()
    for (let b = 0; b < 5; b++) await p.append(targetOf(ID), eventsFrom(b * 4, 4))
    const source = readFileSync(p.logPath(ID))
    const target: AppendTarget = { ...targetOf('kid', 20), forkSource: SessionId(ID) }
    const seed = (await p.inspect(SessionId(ID))).events
    await p.append(target, [...seed, ...eventsFrom(20, 2)])
    const kid = readFileSync(p.logPath('kid'))
    expect(kid.length).toBeLessThanOrEqual(4096)
    expect(paddingStart(kid)).toBeUndefined()
    const header = JSON.parse(
      execFileSync('zstd', ['-dc', p.logPath('kid')])
        .toString('utf8')
        .split('\n')[0]!,
    ) as { fork: { end: number } }
    expect(header.fork.end).toBe(paddingStart(source))
    await p.close()
    const reader = backend(p.root)
    expect((await reader.inspect(SessionId('kid'))).events.map((e) => e.seq)).toEqual(seqs(22))
    expect((await reader.inspectFrom(SessionId('kid'), 20 as never)).events.map((e) => e.seq)).toEqual([20, 21])
  })

  it("compression 'none' is never padded", async () => {
    const { dir, cleanup } = tempDir()
    cleanups.push(cleanup)
    const p = createJsonlPersistence({ root: dir, compression: 'none' })
    cleanups.push(() => p.close())
    for (let b = 0; b < 4; b++) await p.append(targetOf(ID), eventsFrom(b * 3, 3))
    const text = readFileSync(p.logPath(ID), 'utf8')
    expect(text.endsWith('"}\n')).toBe(true)
    expect((await p.verify(SessionId(ID))).committedBytes).toBe(Buffer.byteLength(text))
  })
})
