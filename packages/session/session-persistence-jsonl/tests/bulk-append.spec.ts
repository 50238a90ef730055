import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import type { StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { encodeBatchUnit, POOL_ENCODE_MIN } from '../src/bulk-append.js'
import { createCodec } from '../src/codec.js'
import { encodeEventLines, parseEventLines } from '../src/log-format.js'
import { encodeUnitParts } from '../src/log-units.js'
import { eventsFrom } from './helpers.js'

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
    const plain = encodeEventLines(events)
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
  }, 60_000)

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
      const expected = encodeUnitParts(codec, encodeEventLines(events), 'batch', 0, events.length)
      const actual = await encodeBatchUnit(codec, events, 0)
      expect(actual[0].equals(expected[0]) && actual[1].equals(expected[1])).toBe(true)
    }
  })

  it('refuses events that cannot be stored losslessly, as the synchronous path does (typed, before compressing)', async () => {
    const events = [...batchOf(0, POOL_ENCODE_MIN)]
    events.push({ type: 'x', seq: events.length, time: 1, data: { bad: Number.NaN } } as unknown as StoredSessionEvent)
    await expect(encodeBatchUnit(createCodec('zstd'), events, 0)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' })
  })
})
