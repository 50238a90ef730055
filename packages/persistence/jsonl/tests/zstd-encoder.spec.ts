import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { crc32 } from 'node:zlib'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { decompress as decompressAsync } from '@mongodb-js/zstd'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compressFrame, decompressFrames, RAW_BODY_MAX } from '../src/codec.js'
import { skippableTrailer } from '../src/trailer.js'
import { measureZstdFrame, rawZstdFrame, storedFramesContent } from '../src/zstd-frames.js'
import { event, targetOf, tempDir } from './helpers.js'

const MAX = 256 * 1024

/** Bytes from 0 B to 256 KiB: random noise, repetitive text and JSON-ish lines (the three regimes of an encoder). */
const batchBytes = fc.oneof(
  fc.uint8Array({ maxLength: MAX, size: 'max' }),
  fc.constantFrom(new Uint8Array(0), new Uint8Array(MAX).fill(0x61)),
  fc
    .tuple(fc.string({ minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: MAX }))
    .map(([unit, n]) => new Uint8Array(Buffer.from(unit.repeat(Math.ceil(n / Math.max(1, unit.length)))).subarray(0, n))),
  fc
    .array(fc.record({ type: fc.constantFrom('assistant/chunk', 'user/message'), seq: fc.nat(), data: fc.string({ maxLength: 300 }) }), {
      maxLength: 600,
      size: 'max',
    })
    .map((lines) => new Uint8Array(Buffer.from(lines.map((l) => `${JSON.stringify(l)}\n`).join('')).subarray(0, MAX))),
)

describe('stored (raw-block) frames: header units, read without a zstd binding', () => {
  it('round-trip through the binding-free reader, both bindings and the zstd CLI, at every content-size width (property)', async () => {
    const edges = [0, 1, 255, 256, 65_791, 65_792, 128 * 1024, 128 * 1024 + 1, 300_000]
    const inputs = [...edges.map((n) => new Uint8Array(n).map((_, i) => (i * 31) & 0xff)), ...fc.sample(batchBytes, 20)]
    for (const input of inputs) {
      const frame = rawZstdFrame(input)
      expect(measureZstdFrame(frame, 0)).toEqual({ status: 'complete', end: frame.length })
      expect(storedFramesContent(frame)?.equals(Buffer.from(input))).toBe(true)
      expect(decompressFrames(frame).equals(Buffer.from(input))).toBe(true)
      expect((await decompressAsync(frame)).equals(Buffer.from(input))).toBe(true)
      expect(execFileSync('zstd', ['-dc'], { input: frame, maxBuffer: 4 * MAX }).equals(Buffer.from(input))).toBe(true)
    }
  })

  it('leave compressed frames, damaged sizes and truncations to libzstd (undefined, never other bytes)', () => {
    const text = Buffer.from('{"type":"x"}\n'.repeat(200))
    expect(storedFramesContent(compressFrame(text))).toBeUndefined()
    const frame = rawZstdFrame(text)
    for (let cut = 0; cut < frame.length; cut++) expect(storedFramesContent(frame.subarray(0, cut))).toBeUndefined()
    const wrongSize = Buffer.from(frame)
    wrongSize[5] = wrongSize[5]! ^ 1 // the content size no longer matches the blocks
    expect(storedFramesContent(wrongSize)).toBeUndefined()
  })
})

describe('the libzstd encoder (zstd-napi)', () => {
  it('round-trips random batches of 0 B to 256 KiB through both decoders and the zstd CLI (property)', async () => {
    const sizes: number[] = []
    await fc.assert(
      fc.asyncProperty(batchBytes, async (input) => {
        sizes.push(input.length)
        const frame = compressFrame(input)
        // One standard frame whose extent the log scanner finds from its headers alone.
        expect(measureZstdFrame(frame, 0)).toEqual({ status: 'complete', end: frame.length })
        expect(decompressFrames(frame).equals(Buffer.from(input))).toBe(true)
        expect((await decompressAsync(frame)).equals(Buffer.from(input))).toBe(true)
        expect(execFileSync('zstd', ['-dc'], { input: frame, maxBuffer: 4 * MAX }).equals(Buffer.from(input))).toBe(true)
      }),
      { numRuns: 60 },
    )
    // The generator really spans the range (not only tiny inputs).
    expect(Math.min(...sizes)).toBe(0)
    expect(Math.max(...sizes)).toBeGreaterThan(128 * 1024)
  })

  it('writes logs of random batches that `zstd -dc` reads back line for line (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.string({ maxLength: 64 * 1024, unit: 'binary', size: 'max' }), { minLength: 1, maxLength: 4 }), {
          minLength: 1,
          maxLength: 6,
        }),
        async (batches) => {
          const { dir, cleanup } = tempDir('dsh-jsonl-zstd-')
          try {
            const p = createJsonlPersistence({ root: dir })
            let seq = 0
            const written: string[] = []
            for (const texts of batches) {
              const batch = texts.map((text) => event(seq++, 'user/message', { text }))
              await p.append(targetOf('prop'), batch)
              for (const e of batch) written.push(JSON.stringify({ type: e.type, seq: e.seq, time: e.time, data: e.data }))
            }
            const file = p.logPath('prop')
            await p.close()
            const lines = execFileSync('zstd', ['-dc', file], { maxBuffer: 64 * MAX })
              .toString('utf8')
              .split('\n')
            expect(lines.pop()).toBe('')
            expect(JSON.parse(lines[0]!)).toMatchObject({ format: 'dsh-session-log', header: { id: 'prop' } })
            expect(lines.slice(1)).toEqual(written)
            // And the backend reads the same events.
            const reader = createJsonlPersistence({ root: dir, readOnly: true })
            expect((await reader.inspect(SessionId('prop'))).events.map((e) => JSON.stringify(e))).toEqual(written)
            await reader.close()
            expect(readFileSync(file).length).toBeGreaterThan(0)
          } finally {
            cleanup()
          }
        },
      ),
      { numRuns: 25 },
    )
  })
})

describe('logs written before header units were stored', () => {
  it('a compressed header unit still lists, inspects and takes appends (zstd-napi decodes it)', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-oldheader-')
    try {
      const p = createJsonlPersistence({ root: dir })
      await p.append(targetOf('old'), [event(0, 'user/message', { text: 'written with a compressed header' })])
      await p.close()
      // Rewrite the header unit as the earlier code wrote it: a libzstd-compressed frame and its trailer.
      const file = p.logPath('old')
      const log = readFileSync(file)
      const extent = measureZstdFrame(log, 0)
      if (extent.status !== 'complete') throw new Error('no header frame')
      const trailer = skippableTrailer.decode(log, extent.end)!
      expect(trailer.kind).toBe('header')
      const plain = storedFramesContent(log.subarray(0, extent.end))!
      const body = compressFrame(plain)
      expect(storedFramesContent(body)).toBeUndefined() // really compressed
      const oldTrailer = skippableTrailer.encode({ ...trailer, bodyLength: body.length, bodyCrc: crc32(body) })
      writeFileSync(file, Buffer.concat([body, oldTrailer, log.subarray(extent.end + skippableTrailer.size)]))

      const again = createJsonlPersistence({ root: dir })
      expect((await again.list()).map((r) => r.header.id)).toEqual(['old'])
      await again.append(targetOf('old'), [event(1, 'user/message', { text: 'appended after' })])
      expect((await again.inspect(SessionId('old'))).events.map((e) => e.seq)).toEqual([0, 1])
      expect((await again.verify(SessionId('old'))).tornBytes).toBe(0)
      await again.close()
    } finally {
      cleanup()
    }
  })
})

describe('batch bodies: raw-block frames below RAW_BODY_MAX plaintext bytes, libzstd frames from there', () => {
  it('stores a small batch uncompressed and a larger one compressed; both read back, through zstd -dc too', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-rawbody-')
    try {
      const p = createJsonlPersistence({ root: dir })
      const text = (seq: number, bytes: number) => event(seq, 'user/message', { text: `${seq}:`.padEnd(bytes, 'abc ') })
      // Header, then bodies of ~200 B, ~RAW_BODY_MAX - 100 B, ~RAW_BODY_MAX + 100 B and ~8 KiB of lines (the second append pads the log).
      const batches = [[text(0, 150)], [text(1, RAW_BODY_MAX - 160)], [text(2, RAW_BODY_MAX + 40)], [text(3, 8000)]]
      for (const batch of batches) await p.append(targetOf('raw'), batch)
      await p.close()

      const log = readFileSync(p.logPath('raw'))
      const bodies: Array<{ plainLength: number; stored: boolean }> = []
      for (let pos = 0; ; ) {
        const extent = measureZstdFrame(log, pos)
        if (extent.status !== 'complete') break
        const trailer = skippableTrailer.decode(log, extent.end)
        if (trailer === undefined) break // the padding frame
        if (trailer.kind === 'batch')
          bodies.push({ plainLength: trailer.plainLength, stored: storedFramesContent(log.subarray(pos, extent.end)) !== undefined })
        pos = extent.end + skippableTrailer.size
      }
      expect(bodies.map((b) => b.plainLength < RAW_BODY_MAX)).toEqual([true, true, false, false])
      expect(bodies.map((b) => b.stored)).toEqual([true, true, false, false])

      const again = createJsonlPersistence({ root: dir, readOnly: true })
      expect((await again.inspect(SessionId('raw'))).events).toEqual(batches.flat())
      await again.close()
      const lines = execFileSync('zstd', ['-dc', p.logPath('raw')])
        .toString('utf8')
        .trim()
        .split('\n')
      expect(lines.slice(1).map((line) => JSON.parse(line))).toEqual(batches.flat())
    } finally {
      cleanup()
    }
  })
})
