import { escapeTerminal } from '@dsh/context'
import { describe, expect, it } from 'vitest'
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
