import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import { SessionId, type StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeBatchUnit, POOL_ENCODE_MIN } from '../src/bulk-append.js'
import { createCodec } from '../src/codec.js'
import { encodeEventLines, parseEventLines } from '../src/log-format.js'
import { scanLog } from '../src/log-scan.js'
import { encodeUnitParts } from '../src/log-units.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

const binding = createRequire(import.meta.url)('zstd-napi/binding.js') as { getFrameContentSize(frame: Uint8Array): number | null }

/** Events from `first` whose lines add up to at least `bytes`. */
function batchOf(first: number, bytes: number): StoredSessionEvent[] {
  const events: StoredSessionEvent[] = []
  while (encodeEventLines(events).length < bytes) events.push(...eventsFrom(first + events.length, 2000))
  return events
}

describe('encodeBatchUnit: large batches compressed on the libuv pool', () => {
  it('writes the lines encodeEventLines writes, under a trailer of the same fields, in a frame every reader decodes', async () => {
    const codec = createCodec('zstd')
    const events = batchOf(40, 4 * POOL_ENCODE_MIN)
    // A batch for a log of the current version (`{}`: a header about to be written): zstd packs its runs.
    const plain = encodeEventLines(events, true)
    const [body, trailerBytes] = await encodeBatchUnit(codec, events, 40)

    const trailer = codec.trailer.decode(trailerBytes, 0)
    expect(trailer).toEqual({
      kind: 'batch',
      plainLength: plain.length,
      plainCrc: crc32(plain),
      bodyLength: body.length,
      bodyCrc: crc32(body),
      firstSeq: 40,
      count: events.length,
    })
    expect(body.length).toBeLessThan(plain.length / 2)
    // A standard frame; @mongodb-js/zstd streams, so its header states no content size (the trailer records it).
    expect(binding.getFrameContentSize(body)).toBeNull()
    // The log's own reader (the body and its trailer as a run), the synchronous decoder, and the zstd CLI.
    const run = Buffer.concat([body, trailerBytes])
    const [decoded] = await codec.decodeRun(run, [{ bodyStart: 0, bodyEnd: body.length, plainLength: plain.length }])
    expect(decoded?.equals(plain)).toBe(true)
    expect(codec.decodeBodySync(body).equals(plain)).toBe(true)
    expect(execFileSync('zstd', ['-dc'], { input: run, maxBuffer: 2 * plain.length }).equals(plain)).toBe(true)
    const read: StoredSessionEvent[] = []
    expect(parseEventLines(plain, 40, events.length, read)).toBeUndefined()
    expect(read).toEqual(events)
  })

  it('encodes a batch below the threshold, and every plain-encoding batch, exactly as encodeUnitParts does', async () => {
    const small = batchOf(0, 1024)
    expect(encodeEventLines(small).length).toBeLessThan(POOL_ENCODE_MIN)
    const large = batchOf(0, POOL_ENCODE_MIN)
    for (const [compression, events] of [
      ['zstd', small],
      ['none', small],
      ['none', large],
    ] as const) {
      const codec = createCodec(compression)
      const expected = encodeUnitParts(codec, encodeEventLines(events, compression === 'zstd'), 'batch', 0, events.length)
      const actual = await encodeBatchUnit(codec, events, 0)
      expect(actual[0].equals(expected[0]) && actual[1].equals(expected[1])).toBe(true)
    }
  })

  it('refuses events that cannot be stored losslessly, as the synchronous path does (typed, before compressing)', async () => {
    const events = [...batchOf(0, POOL_ENCODE_MIN)]
    events.push({ type: 'x', seq: events.length, time: 1, data: { bad: Number.NaN } } as unknown as StoredSessionEvent)
    await expect(Promise.resolve().then(() => encodeBatchUnit(createCodec('zstd'), events, 0))).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_INVALID_EVENT',
    })
  })
})

describe('the append path encodes large batches on the pool', () => {
  /** The batches of a log as stored: each body's frame content size (null: streamed, i.e. encoded on the pool) and trailer. */
  async function storedBatches(file: string) {
    const codec = createCodec('zstd')
    const buf = readFileSync(file)
    const scan = await scanLog(buf, codec, file)
    return scan.batches.map((unit) => ({
      contentSize: binding.getFrameContentSize(buf.subarray(unit.bodyStart, unit.bodyEnd)),
      trailer: unit.trailer,
    }))
  }

  it('appends and first appends (create) of >= 256 KiB of lines go through encodeOnPool; small ones stay synchronous; every reader reads the same events', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-bulk-')
    cleanups.push(cleanup)
    const codec = createCodec('zstd')
    const p = createJsonlPersistence({ root: dir })
    // `big`: created with a large first batch, then a small one and a large one; `small`: small batches only.
    const first = batchOf(0, 2 * POOL_ENCODE_MIN)
    const second = eventsFrom(first.length, 3)
    const third = batchOf(first.length + 3, 2 * POOL_ENCODE_MIN)
    const batches = [first, second, third]
    for (const events of batches) await p.append(targetOf('big'), events)
    await p.append(targetOf('small'), eventsFrom(0, 5))
    await p.append(targetOf('small'), eventsFrom(5, 5))

    const stored = await storedBatches(p.logPath('big'))
    expect(stored.map((b) => b.contentSize === null)).toEqual([true, false, true])
    const small = await storedBatches(p.logPath('small'))
    expect(small.map((b) => b.contentSize === null)).toEqual([false, false])
    // The same lines and plaintext fields as the synchronous encoding (only the compressed body's bytes differ).
    let seq = 0
    for (const [index, events] of batches.entries()) {
      const [, syncTrailer] = encodeUnitParts(codec, encodeEventLines(events, true), 'batch', seq, events.length)
      const expected = codec.trailer.decode(syncTrailer, 0)!
      expect(stored[index]!.trailer).toMatchObject({
        plainLength: expected.plainLength,
        plainCrc: expected.plainCrc,
        firstSeq: seq,
        count: events.length,
      })
      seq += events.length
    }
    const all = batches.flat()
    const inspected = await p.inspect(SessionId('big'))
    expect(inspected.events).toEqual(all)
    await p.close()
    // A fresh process's view (tail check, full read) and the zstd CLI read the same events.
    const fresh = createJsonlPersistence({ root: dir })
    await fresh.append(targetOf('big'), eventsFrom(all.length, 1))
    expect(fresh.metrics.tailVerifications).toBe(1)
    expect((await fresh.inspect(SessionId('big'))).events).toEqual([...all, ...eventsFrom(all.length, 1)])
    await fresh.close()
    const lines = execFileSync('zstd', ['-dc', p.logPath('big')], { maxBuffer: 64 * 1024 * 1024 })
    // Each batch's lines as it was appended (a packed run never crosses a batch).
    const text = Buffer.concat([...batches, eventsFrom(all.length, 1)].map((events) => encodeEventLines(events, true)))
    expect(lines.subarray(lines.indexOf(0x0a) + 1).equals(text)).toBe(true)
  })
})
