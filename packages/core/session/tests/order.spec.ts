import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compareSessionIds } from '../src/index.js'

describe('compareSessionIds', () => {
  it('orders strings like the bytes of their UTF-8 encodings (SQLite BINARY collation)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
        expect(Math.sign(compareSessionIds(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))))
      }),
      { numRuns: 2000 },
    )
  })

  it('puts U+FFFF before U+10000, unlike UTF-16 code unit order', () => {
    expect(compareSessionIds('\uffff', '\u{10000}')).toBeLessThan(0)
    expect('\uffff' < '\u{10000}').toBe(false)
    expect(compareSessionIds('a', 'ab')).toBeLessThan(0)
    expect(compareSessionIds('same', 'same')).toBe(0)
  })
})
