import { escapeTerminal } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { firstLine } from '../src/output.js'
import { createProgress } from '../src/progress.js'
import { safe } from '../src/terminal.js'

describe('safe', () => {
  it('escapes interpolated data but keeps the literal text (newlines) of the CLI', () => {
    expect(safe`session ${'x\ny'}\n  parent ${'\u202eevil'}\n`).toBe('session x\\x0ay\n  parent \\u202eevil\n')
  })

  it('escapes what escapeTerminal of @dsh/context escapes: zero-width characters, the BOM and lone surrogates too', () => {
    expect(safe`id ${'a\u200bb\ufeff\ud800'} 🚀`).toBe('id a\\u200bb\\ufeff\\ud800 🚀')
  })
})

describe('firstLine', () => {
  it('keeps the first line whole when it fits, else cuts it to max code units ending in …', () => {
    expect(firstLine('done\nmore')).toBe('done')
    expect(firstLine('x'.repeat(100))).toBe('x'.repeat(100))
    expect(firstLine('x'.repeat(101))).toBe(`${'x'.repeat(99)}…`)
    expect(firstLine('abcdef', 4)).toBe('abc…')
  })

  it('never cuts a character in two: an emoji across the cut is left out whole, so nothing prints as a lone surrogate', () => {
    const line = firstLine(`${'x'.repeat(98)}\u{1f600}${'y'.repeat(10)}`)
    expect(line).toBe(`${'x'.repeat(98)}…`)
    expect(safe`${line}`).toBe(line)
  })
})

describe('createProgress', () => {
  it('escapes the label (a session id) on a TTY; the bar itself only adds its carriage return', () => {
    let written = ''
    const tty = {
      isTTY: true,
      write: (text: string): boolean => {
        written += text
        return true
      },
    } as unknown as NodeJS.WritableStream & { isTTY: boolean }
    const progress = createProgress(tty)
    progress.update(1, 1, 'v0\x1b]0;PWNED\x07\x1b[31m\u202e')
    progress.done()
    expect(written).toContain('1/1 v0\\x1b]0;PWNED\\x07\\x1b[31m\\u202e')
    expect(escapeTerminal(written.replace(/^\r/, '').replace(/\n$/, ''))).toBe(written.replace(/^\r/, '').replace(/\n$/, ''))
  })
})
