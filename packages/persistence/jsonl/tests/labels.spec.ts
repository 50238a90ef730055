// How an id is named in an error message: short, and cut between whole
// characters and whole escapes.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { labelOf } from '../src/errors.js'

describe('labelOf', () => {
  it('names a short id as its JSON string', () => {
    expect(labelOf('s-1')).toBe('"s-1"')
    expect(labelOf('a"b\n')).toBe('"a\\"b\\n"')
  })

  it('cuts a long id between whole escapes and whole characters, at most 80 code units, ending in …"', () => {
    expect(labelOf('x'.repeat(200))).toBe(`"${'x'.repeat(77)}…"`)
    // An escape that fits is kept whole; one that would not fit is left out whole (never a lone backslash).
    expect(labelOf(`${'x'.repeat(75)}\n${'y'.repeat(10)}`)).toBe(`"${'x'.repeat(75)}\\n…"`)
    expect(labelOf(`${'x'.repeat(76)}\n${'y'.repeat(10)}`)).toBe(`"${'x'.repeat(76)}…"`)
    // The same for a character of two code units: an emoji that fits is kept, one across the cut is left out.
    expect(labelOf(`${'x'.repeat(75)}\u{1f600}tail`)).toBe(`"${'x'.repeat(75)}\u{1f600}…"`)
    expect(labelOf(`${'x'.repeat(76)}\u{1f600}tail`)).toBe(`"${'x'.repeat(76)}…"`)
  })

  it('for any id: JSON-string-shaped, at most 80 code units, and a cut label is a prefix of the whole one', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (id) => {
        const label = labelOf(id)
        const whole = JSON.stringify(id)
        expect(label.length).toBeLessThanOrEqual(80)
        if (label === whole) return
        expect(label.endsWith('…"')).toBe(true)
        expect(whole.startsWith(label.slice(0, -2))).toBe(true)
        expect(() => JSON.parse(`${label.slice(0, -2)}"`)).not.toThrow()
        expect(Buffer.from(label).toString()).toBe(label)
      }),
    )
  })
})
