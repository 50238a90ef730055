import { describe, expect, it } from 'vitest'
import { escapeTerminal, safe } from '../src/terminal.js'

describe('escapeTerminal', () => {
  it('turns C0, DEL and C1 controls into \\xHH', () => {
    expect(escapeTerminal('a\x1b[2Jb')).toBe('a\\x1b[2Jb')
    expect(escapeTerminal('row\nforged\r\t')).toBe('row\\x0aforged\\x0d\\x09')
    expect(escapeTerminal('\x00\x7f\x80\x9b\x9f')).toBe('\\x00\\x7f\\x80\\x9b\\x9f')
  })

  it('turns bidi overrides, isolates and marks into \\uHHHH', () => {
    const bidi = '\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c'
    expect(escapeTerminal(bidi)).toBe('\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c')
  })

  it('leaves printable text alone (unicode included) and is idempotent', () => {
    const text = 'release-1.4 — räksmörgås 日本語 \\x1b already-escaped 🚀 \u00a0'
    expect(escapeTerminal(text)).toBe(text)
    const once = escapeTerminal('x\x1b\u202ey')
    expect(escapeTerminal(once)).toBe(once)
  })

  it('every code point below U+00A0 that is not printable ASCII is escaped; printable ASCII is not', () => {
    for (let code = 0; code < 0xa0; code++) {
      const ch = String.fromCharCode(code)
      const printable = code >= 0x20 && code < 0x7f
      expect(escapeTerminal(ch) === ch, `U+${code.toString(16)}`).toBe(printable)
    }
  })
})

describe('safe', () => {
  it('escapes interpolated data but keeps the literal text (newlines) of the CLI', () => {
    expect(safe`session ${'x\ny'}\n  parent ${'\u202eevil'}\n`).toBe('session x\\x0ay\n  parent \\u202eevil\n')
  })
})
