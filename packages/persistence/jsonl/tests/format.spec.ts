import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { crc32 } from 'node:zlib'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence, TRAILER_MAGIC } from '@dsh/session-persistence-jsonl'
import { decompress } from '@mongodb-js/zstd'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function root(): string {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  return dir
}

/** Splits a log into frames using nothing but the zstd format: data frames are measured by decompressing candidates. */
function skippableFrames(buf: Buffer): Array<{ at: number; payload: Buffer }> {
  const out: Array<{ at: number; payload: Buffer }> = []
  const magic = Buffer.alloc(4)
  magic.writeUInt32LE(TRAILER_MAGIC)
  for (let at = buf.indexOf(magic); at !== -1; at = buf.indexOf(magic, at + 1)) {
    const size = buf.readUInt32LE(at + 4)
    out.push({ at, payload: buf.subarray(at + 8, at + 8 + size) })
  }
  return out
}

/**
 * The events of event lines, each packed line (format version 4) expanded as
 * the README's format section describes it — written here from that
 * description, not with the package's reader.
 */
function eventsOfLines(lines: readonly string[]): unknown[] {
  return lines.flatMap((line) => {
    const event = JSON.parse(line) as {
      type: string
      seq: number
      time: number
      data?: unknown
      run?: { dt: number[]; data: Record<string, unknown> }
    }
    const run = event.run
    if (run === undefined) return [event]
    let time = event.time
    return Array.from({ length: run.dt.length + 1 }, (_, k) => {
      if (k > 0) time += run.dt[k - 1]!
      const data = Object.fromEntries(Object.entries(run.data).map(([key, value]) => [key, Array.isArray(value) ? value[k] : value]))
      return { type: event.type, seq: event.seq + k, time, data }
    })
  })
}

describe('the zstd log is a standard zstd stream', () => {
  it('`zstd -dc` prints the header line, then every event as a JSON line (a run of like events as one packed line)', async () => {
    const dir = root()
    const p = createJsonlPersistence({ root: dir })
    const target = targetOf('zstd-cli', 2, { isSeeded: true, parentSession: 'parent' as SessionId, cwd: '/work' })
    const all = eventsFrom(0, 40)
    await p.append(target, all.slice(0, 3))
    await p.append(target, all.slice(3, 4))
    await p.append(target, all.slice(4))
    const file = p.logPath('zstd-cli')
    await p.close()

    const text = execFileSync('zstd', ['-dc', file], { encoding: 'utf8' })
    const lines = text.split('\n')
    expect(lines.pop()).toBe('')
    const header = JSON.parse(lines[0]!) as { header: unknown; inheritedEventCount: number }
    expect(header.header).toEqual(target.header)
    expect(header.inheritedEventCount).toBe(2)
    expect(eventsOfLines(lines.slice(1))).toEqual(JSON.parse(JSON.stringify(all)))
    // Each run of three chunks (deep-frozen, as a Session hands them over) is one line.
    expect(lines.filter((l) => l.includes('"run":{"dt":[1,1],'))).toHaveLength(7)
    expect(lines.length - 1).toBe(all.length - 7 * 2)
    // The CLI also checks the stream's integrity.
    execFileSync('zstd', ['-q', '-t', file])
  })

  it('frame 0 holds exactly the header line; each batch is one data frame plus a skippable CRC32/length trailer', async () => {
    const dir = root()
    const p = createJsonlPersistence({ root: dir })
    const batches = [eventsFrom(0, 5), eventsFrom(5, 1), eventsFrom(6, 30)]
    for (const batch of batches) await p.append(targetOf('frames'), batch)
    const buf = readFileSync(p.logPath('frames'))
    await p.close()

    const trailers = skippableFrames(buf)
    expect(trailers).toHaveLength(1 + batches.length)
    // Frame 0: from offset 0 to the first trailer; its plaintext is the header line alone.
    const headerPlain = await decompress(buf.subarray(0, trailers[0]!.at))
    expect(headerPlain.toString('utf8').split('\n')).toHaveLength(2)
    expect(JSON.parse(headerPlain.toString('utf8'))).toMatchObject({ header: { id: 'frames' } })
    for (const [i, batch] of batches.entries()) {
      const start = trailers[i]!.at + 8 + trailers[i]!.payload.length
      const frame = buf.subarray(start, trailers[i + 1]!.at)
      const plain = await decompress(frame)
      expect(eventsOfLines(plain.toString('utf8').split('\n').slice(0, -1))).toEqual(JSON.parse(JSON.stringify(batch)))
      const payload = trailers[i + 1]!.payload
      // Trailer payload: kind, version, 0, plaintext CRC32, frame CRC32, count, plaintext length, frame length, first seq, self-check.
      expect(payload).toHaveLength(44)
      expect(payload.readUInt8(0)).toBe(2)
      expect(payload.readUInt32LE(4)).toBe(crc32(plain))
      expect(payload.readUInt32LE(8)).toBe(crc32(frame))
      expect(payload.readUInt32LE(12)).toBe(batch.length)
      expect(Number(payload.readBigUInt64LE(16))).toBe(plain.length)
      expect(Number(payload.readBigUInt64LE(24))).toBe(frame.length)
      expect(Number(payload.readBigUInt64LE(32))).toBe(batch[0]!.seq)
      expect(payload.readUInt32LE(40)).toBe(crc32(buf.subarray(trailers[i + 1]!.at, trailers[i + 1]!.at + 48)))
    }
    // From the second append on, the log ends with one padding frame (a skippable frame reaching the end of the file).
    const padAt = trailers.at(-1)!.at + 52
    expect(buf.readUInt32LE(padAt)).toBe(0x184d2a5e)
    expect(padAt + 8 + buf.readUInt32LE(padAt + 4)).toBe(buf.length)
  })
})

describe("compression 'none'", () => {
  it('writes plain JSON lines: the header line, then per batch its event lines and one trailer line', async () => {
    const dir = root()
    const p = createJsonlPersistence({ root: dir, compression: 'none' })
    const batches = [eventsFrom(0, 3), eventsFrom(3, 2)]
    for (const batch of batches) await p.append(targetOf('plain'), batch)
    const file = p.logPath('plain')
    await p.close()
    expect(file.endsWith('.jsonl')).toBe(true)
    const lines = readFileSync(file, 'utf8').split('\n')
    expect(lines.pop()).toBe('')
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(parsed[0]).toMatchObject({ header: { id: 'plain' }, inheritedEventCount: 0 })
    expect(Object.keys(parsed[1]!)).toEqual(['dsh-trailer'])
    expect(parsed.slice(2, 5)).toEqual(JSON.parse(JSON.stringify(batches[0])))
    expect(Object.keys(parsed[5]!)).toEqual(['dsh-trailer'])
    expect(parsed.slice(6, 8)).toEqual(JSON.parse(JSON.stringify(batches[1])))
    expect(Object.keys(parsed[8]!)).toEqual(['dsh-trailer'])
    // Line tools work: jq selects the events.
    const types = execFileSync('jq', ['-r', 'select(.type) | .type', file], { encoding: 'utf8' }).trim().split('\n')
    expect(types).toEqual([...batches[0]!, ...batches[1]!].map((e) => e.type))
  })
})

describe('the root', () => {
  it('holds one encoding: opening it with the other fails with a typed error', () => {
    const dir = root()
    createJsonlPersistence({ root: dir, compression: 'none' })
    expect(() => createJsonlPersistence({ root: dir })).toThrow(expect.objectContaining({ code: 'JSONL_PERSISTENCE_ENCODING_MISMATCH' }))
    expect(() => createJsonlPersistence({ root: dir, compression: 'none' })).not.toThrow()
  })

  it('rejects invalid options with a typed error', () => {
    const dir = root()
    expect(() => createJsonlPersistence({ root: dir, compression: 'gzip' as 'zstd' })).toThrow(
      expect.objectContaining({ code: 'JSONL_PERSISTENCE_INVALID_OPTIONS' }),
    )
    expect(() => createJsonlPersistence({ root: '' })).toThrow(expect.objectContaining({ code: 'JSONL_PERSISTENCE_INVALID_OPTIONS' }))
  })
})
