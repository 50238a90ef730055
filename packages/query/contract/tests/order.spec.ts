import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compareCodePoints } from '../src/index.js'

describe('compareCodePoints', () => {
  it('orders strings like the bytes of their UTF-8 encodings (SQLite BINARY collation)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
        expect(Math.sign(compareCodePoints(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))))
      }),
      { numRuns: 2000 },
    )
  })

  it('puts U+FFFF before U+10000, unlike UTF-16 code unit order', () => {
    expect(compareCodePoints('\uffff', '\u{10000}')).toBeLessThan(0)
    expect('\uffff' < '\u{10000}').toBe(false)
    expect(compareCodePoints('a', 'ab')).toBeLessThan(0)
    expect(compareCodePoints('same', 'same')).toBe(0)
  })
})
