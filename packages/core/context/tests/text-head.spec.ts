import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { textHead, textWithin } from '../src/index.js'

describe('textHead', () => {
  it('keeps text that fits, and cuts longer text at the bound', () => {
    expect(textHead('abc', 3)).toBe('abc')
    expect(textHead('abcd', 3)).toBe('abc')
    expect(textHead('abc', 0)).toBe('')
  })

  it('never ends inside a surrogate pair: the cut falls before the pair', () => {
    expect(textHead('ab😀c', 3)).toBe('ab')
    expect(textHead('ab😀c', 4)).toBe('ab😀')
    // A lone low surrogate is not a pair's first half: it is kept like any unit.
    expect(textHead('a\udc00b', 2)).toBe('a\udc00')
  })

  it('is a prefix of at most max units, at most one unit short of max, and never ends in a high surrogate', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.nat(40), (text, max) => {
        const head = textHead(text, max)
        expect(text.startsWith(head)).toBe(true)
        expect(head.length).toBeLessThanOrEqual(max)
        if (text.length > max) expect(head.length).toBeGreaterThanOrEqual(max - 1)
        else expect(head).toBe(text)
        const last = head.charCodeAt(head.length - 1)
        if (head.length < text.length) expect(last >= 0xd800 && last <= 0xdbff).toBe(false)
      }),
    )
  })
})

describe('textWithin', () => {
  it('keeps text of at most max units; longer text is its head and …, max units in all, never half a pair', () => {
    expect(textWithin('abcd', 4)).toBe('abcd')
    expect(textWithin('abcde', 4)).toBe('abc…')
    expect(textWithin('ab😀cd', 4)).toBe('ab…')
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.integer({ min: 1, max: 40 }), (text, max) => {
        const within = textWithin(text, max)
        expect(within.length).toBeLessThanOrEqual(max)
        if (text.length <= max) expect(within).toBe(text)
        else expect(within).toBe(`${textHead(text, max - 1)}…`)
      }),
    )
  })
})
