import { Writable } from 'node:stream'
import { escapeTerminal } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { terminalLogger } from '../src/host-open.js'
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

describe('terminalLogger', () => {
  function logged(env: NodeJS.ProcessEnv = {}): { readonly lines: string[]; readonly logger: ReturnType<typeof terminalLogger> } {
    const lines: string[] = []
    const err = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk))
        done()
      },
    })
    return { lines, logger: terminalLogger({ out: process.stdout, err, env }) }
  }

  it('prints plain data as JSON, so problems a host keeps off the wire reach the operator whole, escaped', () => {
    const { lines, logger } = logged()
    logger.warn("dsh apiproxy: the stats of 'p' have 1 unreadable session(s); the answer carries no details.", [
      { id: 'p.child\x1b\u202e', problem: { code: 'SESSION_PERSISTENCE_CORRUPT', message: 'log.jsonl.zst is corrupt at byte 817' } },
    ])
    expect(lines).toEqual([
      `dsh: warning: dsh apiproxy: the stats of 'p' have 1 unreadable session(s); the answer carries no details: [{"id":"p.child\\u001b\\u202e","problem":{"code":"SESSION_PERSISTENCE_CORRUPT","message":"log.jsonl.zst is corrupt at byte 817"}}]\n`,
    ])
  })

  it('prints an error by its message (its stack with DSH_DEBUG=1), a string as it is, and a lone message unchanged', () => {
    const plain = logged()
    plain.logger.warn('dsh: the index is stale.', new Error('rebuild it'))
    plain.logger.error('dsh: could not stop.', 'still busy')
    plain.logger.warn('dsh: nothing more.')
    expect(plain.lines).toEqual([
      'dsh: warning: the index is stale: rebuild it\n',
      'dsh: could not stop: still busy\n',
      'dsh: warning: nothing more.\n',
    ])
    const debug = logged({ DSH_DEBUG: '1' })
    debug.logger.warn('dsh: failed.', new Error('boom'))
    expect(debug.lines[0]).toMatch(/^dsh: warning: failed: Error: boom\\x0a {4}at /)
  })
})
