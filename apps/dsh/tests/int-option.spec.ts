import { describe, expect, it } from 'vitest'
import { intOption, limitOption, type ParsedCommand } from '../src/command.js'

/** A parsed command with one string option `name` set to `value`. */
function withOption(name: string, value: string | undefined): ParsedCommand {
  return {
    name: 'test',
    args: [],
    json: false,
    root: undefined,
    store: undefined,
    string: (key) => (key === name ? value : undefined),
    flag: () => false,
  }
}

const refusal = (name: string, value: string, min: number, max: number) => ({
  code: 'CLI_USAGE',
  message: `--${name} must be an integer from ${min} to ${max}, got '${value}'.`,
})

describe('intOption', () => {
  it('takes decimal digits up to the largest safe integer; absent is undefined', () => {
    expect(intOption(withOption('n', undefined), 'n')).toBeUndefined()
    expect(intOption(withOption('n', '0'), 'n')).toBe(0)
    expect(intOption(withOption('n', '007'), 'n')).toBe(7)
    expect(intOption(withOption('n', String(Number.MAX_SAFE_INTEGER)), 'n')).toBe(Number.MAX_SAFE_INTEGER)
  })

  it('refuses what is not a safe integer (never rounded to a neighbour) with CLI_USAGE naming the range and the text as typed', () => {
    for (const value of ['99999999999999999999', String(Number.MAX_SAFE_INTEGER + 1), '-1', '+1', '1.0', '1e3', '0x10', ' 1', '']) {
      expect(() => intOption(withOption('n', value), 'n'), value).toThrow(
        expect.objectContaining(refusal('n', value, 0, Number.MAX_SAFE_INTEGER)),
      )
    }
  })

  it('refuses a value outside a given range, naming it', () => {
    expect(intOption(withOption('keep', '10000'), 'keep', { max: 10_000 })).toBe(10_000)
    expect(() => intOption(withOption('keep', '10001'), 'keep', { max: 10_000 })).toThrow(
      expect.objectContaining(refusal('keep', '10001', 0, 10_000)),
    )
    expect(() => intOption(withOption('steps', '0'), 'steps', { min: 1 })).toThrow(
      expect.objectContaining(refusal('steps', '0', 1, Number.MAX_SAFE_INTEGER)),
    )
    expect(intOption(withOption('thinking', '1024'), 'thinking', { min: 1024, max: 15_999 })).toBe(1024)
    expect(() => intOption(withOption('thinking', '1023'), 'thinking', { min: 1024, max: 15_999 })).toThrow(
      expect.objectContaining(refusal('thinking', '1023', 1024, 15_999)),
    )
  })

  it('limitOption is the range 1 to the cap', () => {
    expect(limitOption(withOption('limit', '1000'), 1000)).toBe(1000)
    for (const value of ['0', '1001', '99999999999999999999'])
      expect(() => limitOption(withOption('limit', value), 1000)).toThrow(expect.objectContaining(refusal('limit', value, 1, 1000)))
  })
})
