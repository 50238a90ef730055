import { execFileSync } from 'node:child_process'
import { decompress } from '@mongodb-js/zstd'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { measureZstdFrame } from '../src/zstd-frames.js'
import { compressSmall, SMALL_INPUT_MAX } from '../src/zstd-small.js'
import { eventsFrom } from './helpers.js'

const jsonLines = (n: number, first = 0): Buffer =>
  Buffer.from(
    eventsFrom(first, n)
      .map((e) => JSON.stringify(e) + '\n')
      .join(''),
  )

describe('the small-input zstd encoder', () => {
  it('writes frames the reference decoders restore exactly (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: SMALL_INPUT_MAX }),
          fc.string({ maxLength: 1300 }).map((s) => new Uint8Array(Buffer.from(s))),
          fc.integer({ min: 1, max: 120 }).map((n) => new Uint8Array(jsonLines(n).subarray(0, SMALL_INPUT_MAX))),
          fc
            .tuple(fc.constantFrom('a', 'ab', '{"type":"x"}', '\u0000'), fc.integer({ min: 1, max: SMALL_INPUT_MAX }))
            .map(([unit, n]) => new Uint8Array(Buffer.from(unit.repeat(n)).subarray(0, SMALL_INPUT_MAX))),
        ),
        async (input) => {
          const frame = compressSmall(input)
          expect(measureZstdFrame(frame, 0)).toEqual({ status: 'complete', end: frame.length })
          expect((await decompress(frame)).equals(Buffer.from(input))).toBe(true)
        },
      ),
      { numRuns: 400 },
    )
  })

  it('compresses JSON lines and is read by the zstd CLI', () => {
    const input = jsonLines(20)
    expect(input.length).toBeLessThanOrEqual(SMALL_INPUT_MAX)
    const frame = compressSmall(input)
    expect(frame.length).toBeLessThan(input.length / 2)
    expect(execFileSync('zstd', ['-dc'], { input: frame }).equals(input)).toBe(true)
    const full = jsonLines(200).subarray(0, SMALL_INPUT_MAX)
    expect(execFileSync('zstd', ['-dc'], { input: compressSmall(full) }).equals(full)).toBe(true)
  })

  it('refuses inputs above its limit', () => {
    expect(() => compressSmall(new Uint8Array(SMALL_INPUT_MAX + 1))).toThrow(RangeError)
  })
})
