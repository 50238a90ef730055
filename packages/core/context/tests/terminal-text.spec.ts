import { describe, expect, it } from 'vitest'
import { escapeTerminal } from '../src/index.js'

describe('escapeTerminal', () => {
  it('turns C0, DEL and C1 controls into \\xHH', () => {
    expect(escapeTerminal('a\x1b[2Jb')).toBe('a\\x1b[2Jb')
    expect(escapeTerminal('row\nforged\r\t')).toBe('row\\x0aforged\\x0d\\x09')
    expect(escapeTerminal('\x00\x7f\x80\x9b\x9f')).toBe('\\x00\\x7f\\x80\\x9b\\x9f')
  })

  it('turns bidi overrides, isolates and marks, zero-width characters, the BOM and lone surrogates into \\uHHHH', () => {
    const bidi = '\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c'
    expect(escapeTerminal(bidi)).toBe('\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c')
    expect(escapeTerminal('a\u200bb\u2060c\ufeffd')).toBe('a\\u200bb\\u2060c\\ufeffd')
    expect(escapeTerminal('\ud800c\udc00')).toBe('\\ud800c\\udc00')
  })

  it('leaves printable text alone (unicode and surrogate pairs included) and is idempotent', () => {
    const text = 'release-1.4 — räksmörgås 日本語 \\x1b already-escaped 🚀 😀 \u00a0'
    expect(escapeTerminal(text)).toBe(text)
    const once = escapeTerminal('x\x1b\u202e\u200b\ud800y')
    expect(escapeTerminal(once)).toBe(once)
  })

  it('every code point below U+00A0 that is not printable ASCII is escaped; printable ASCII is not', () => {
    for (let code = 0; code < 0xa0; code++) {
      const ch = String.fromCharCode(code)
      const printable = code >= 0x20 && code < 0x7f
      expect(escapeTerminal(ch) === ch, `U+${code.toString(16)}`).toBe(printable)
    }
  })

  it('with max, cuts longer text before escaping, never inside a surrogate pair, and ends it in …', () => {
    expect(escapeTerminal('x'.repeat(200), { max: 200 })).toBe('x'.repeat(200))
    expect(escapeTerminal('x'.repeat(201), { max: 200 })).toBe(`${'x'.repeat(200)}…`)
    expect(escapeTerminal('ab😀', { max: 3 })).toBe('ab…')
    expect(escapeTerminal('\x1b'.repeat(10_000), { max: 4 })).toBe(`${'\\x1b'.repeat(4)}…`)
    expect(escapeTerminal('a\x1b[31mb\r\n\t\x7f\u0085\u200e\ud800c', { max: 200 })).toBe(
      'a\\x1b[31mb\\x0d\\x0a\\x09\\x7f\\x85\\u200e\\ud800c',
    )
  })
})
