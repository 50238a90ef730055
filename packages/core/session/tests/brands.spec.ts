import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { SessionId, SessionLogOffset, SessionSeq, SessionSeqCursor } from '../src/index.js'

const constructors = { SessionSeq, SessionLogOffset }

describe('brand constructors', () => {
  for (const [name, make] of Object.entries(constructors)) {
    it(`${name} rejects -1, 1.5, 2**53, -0, NaN, Infinity and non-numbers; accepts 0 and safe integers`, () => {
      for (const bad of [-1, 1.5, 2 ** 53, -0, Number.NaN, Number.POSITIVE_INFINITY, '1', null, undefined]) {
        expect(() => make(bad), String(bad)).toThrowError(
          expect.objectContaining({ code: expect.stringMatching(/^SESSION_INVALID_(SEQ|OFFSET)$/) }),
        )
      }
      expect(make(0)).toBe(0)
      expect(make(Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER)
      fc.assert(fc.property(fc.nat(), (n) => make(n) === n))
      fc.assert(
        fc.property(fc.double(), (x) => {
          const valid = Number.isSafeInteger(x) && x >= 0 && !Object.is(x, -0)
          let ok = true
          try {
            make(x)
          } catch {
            ok = false
          }
          return ok === valid
        }),
      )
    })
  }

  it('SessionSeqCursor accepts -1 and positions, rejects other negatives', () => {
    expect(SessionSeqCursor(-1)).toBe(-1)
    expect(SessionSeqCursor(0)).toBe(0)
    expect(() => SessionSeqCursor(-2)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_SEQ' }))
    expect(() => SessionSeqCursor(-0)).toThrow()
  })

  it('SessionId rejects empty and non-strings', () => {
    expect(SessionId('a')).toBe('a')
    expect(() => SessionId('')).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_ID' }))
    expect(() => SessionId(3)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_ID' }))
  })
})
