import { Context, isDshError } from '@dsh/context'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Session, SessionStore } from '../src/index.js'
import { freezeLosslessJsonSized } from '../src/json.js'
import { EVENT_MAX_BYTES } from '../src/limits.js'

const TIME = 1_700_000_000_000
const TYPE = 'assistant/message'

function live(): { session: Session; heard: number[] } {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  const sessions = new SessionStore(ctx, { clock: () => TIME, newId: () => 's1' })
  ctx.provide('sessions', sessions)
  const heard: number[] = []
  ctx.on('session/event', (_session, event) => void heard.push(event.seq))
  const session = sessions.create()
  session.append('turn/start', { turn: 1 })
  return { session, heard }
}

/** UTF-8 bytes of an event's stored line, encoded as every persistence backend encodes it. */
function lineBytes(event: { type: string; seq: number; time: number; data: unknown }): number {
  return Buffer.byteLength(JSON.stringify({ type: event.type, seq: event.seq, time: event.time, data: event.data }))
}

/** Data `{turn, text}` for `session`'s next event whose line is exactly `bytes`, `text` being `unit` repeated and ASCII after. */
function sized(session: Session, bytes: number, unit: string): { turn: number; text: string } {
  const envelope = lineBytes({ type: TYPE, seq: session.seq, time: TIME, data: { turn: 1, text: '' } })
  const unitBytes = lineBytes({ type: '', seq: 0, time: 0, data: unit }) - lineBytes({ type: '', seq: 0, time: 0, data: '' })
  const units = Math.floor((bytes - envelope) / unitBytes)
  return { turn: 1, text: unit.repeat(units) + 'x'.repeat(bytes - envelope - units * unitBytes) }
}

function refusal(session: Session, data: unknown): unknown {
  try {
    session.append(TYPE, data)
  } catch (error) {
    return error
  }
  throw new Error('the append was accepted')
}

describe('Session.append and EVENT_MAX_BYTES', () => {
  // ASCII; 'é' (1 UTF-16 unit, 2 UTF-8 bytes); U+0001 (escaped as `\u0001`, 6 bytes);
  // '😀' (2 units, 4 bytes): a count of characters misjudges all but the first.
  it.each([
    ['ASCII', 'x'],
    ["'é'", 'é'],
    ['a control character JSON escapes', '\u0001'],
    ['an astral character', '😀'],
  ])('appends an event of %s whose line is exactly EVENT_MAX_BYTES', (_what, unit) => {
    const { session, heard } = live()
    const data = sized(session, EVENT_MAX_BYTES, unit)
    if (unit !== 'x') expect(data.text.length).toBeLessThan(EVENT_MAX_BYTES / 1.9)
    const event = session.append(TYPE, data)
    expect(lineBytes(event)).toBe(EVENT_MAX_BYTES)
    expect(event.seq).toBe(1)
    expect(session.seq).toBe(2)
    expect(heard).toEqual([0, 1])
  })

  it.each([
    ['ASCII', 'x'],
    ["'é'", 'é'],
    ['a control character JSON escapes', '\u0001'],
    ['an astral character', '😀'],
  ])('refuses an event of %s one byte over with SESSION_EVENT_TOO_LARGE and appends nothing', (_what, unit) => {
    const { session, heard } = live()
    const data = sized(session, EVENT_MAX_BYTES + 1, unit)
    expect(lineBytes({ type: TYPE, seq: 1, time: TIME, data })).toBe(EVENT_MAX_BYTES + 1)
    const error = refusal(session, data)
    expect(isDshError(error, 'SESSION_EVENT_TOO_LARGE')).toBe(true)
    expect((error as { details: unknown }).details).toEqual({
      id: 's1',
      type: TYPE,
      seq: 1,
      bytes: EVENT_MAX_BYTES + 1,
      max: EVENT_MAX_BYTES,
    })
    const message = (error as Error).message
    for (const part of [
      `'${TYPE}' (seq 1)`,
      `${EVENT_MAX_BYTES + 1} bytes`,
      `${EVENT_MAX_BYTES} bytes (EVENT_MAX_BYTES)`,
      'attachment',
      'nothing was appended',
    ])
      expect(message).toContain(part)
    expect(session.seq).toBe(1)
    expect(session.events).toHaveLength(1)
    expect(session.eventAt(1)).toBeUndefined()
    expect(heard).toEqual([0])
    // The session goes on: the next event takes the seq the refused one would have.
    expect(session.append('turn/end', { turn: 1, reason: 'completed' }).seq).toBe(1)
    expect(heard).toEqual([0, 1])
  })

  it('counts keys, brackets and separators: many short values together over the bound are refused', () => {
    const { session, heard } = live()
    // 100,000 members `"k…":"",` of 176 bytes (170-character keys, empty strings): 17.6 MB.
    const wide: Record<string, string> = {}
    for (let i = 0; i < 100_000; i++) wide[String(i).padStart(170, 'k')] = ''
    expect(isDshError(refusal(session, { turn: 1, text: '', wide }), 'SESSION_EVENT_TOO_LARGE')).toBe(true)
    // 1,400,000 elements `"0123456789",` of 13 bytes: 18.2 MB, no string over 10 characters.
    const list = new Array<string>(1_400_000).fill('0123456789')
    expect(isDshError(refusal(session, { turn: 1, text: '', list }), 'SESSION_EVENT_TOO_LARGE')).toBe(true)
    expect(session.seq).toBe(1)
    expect(heard).toEqual([0])
  })

  it('accepts an event whose rough bound is over EVENT_MAX_BYTES but whose line is not', () => {
    const { session } = live()
    // 3,000,000 ASCII characters: bounded at 6 bytes each (18 MB), encoded in 3 MB.
    const event = session.append(TYPE, { turn: 1, text: 'x'.repeat(3_000_000) })
    expect(lineBytes(event)).toBeLessThan(EVENT_MAX_BYTES)
    expect(session.seq).toBe(2)
  })
})

describe('the size bound of the freeze walk', () => {
  const sizes = (value: unknown) => ({
    bound: freezeLosslessJsonSized(value, 'data').maxBytes,
    exact: Buffer.byteLength(JSON.stringify(value)),
  })

  it('is never below the UTF-8 bytes of the JSON, on the longest numbers and every kind of character', () => {
    const extremes = [
      -0.0000012345678901234567,
      -1.7976931348623157e308,
      -2.2250738585072014e-308,
      -123456789012345680000,
      Number.MIN_SAFE_INTEGER,
      -5e-324,
    ]
    for (const n of extremes) expect(sizes(n).bound).toBeGreaterThanOrEqual(sizes(n).exact)
    for (const text of ['', '"\\', '\u0000\u001f\u007f', '\ud800', '\udfff\ud800', '😀é\u2028', 'false']) {
      const { bound, exact } = sizes({ [text]: [text, null, false, true, 0] })
      expect(bound).toBeGreaterThanOrEqual(exact)
    }
  })

  it('is never below the UTF-8 bytes of the JSON of generated values', () => {
    // Characters JSON escapes (controls, quote, backslash, lone surrogates), multibyte ones, and any code point.
    const unit = fc.oneof(
      fc.constantFrom('\u0000', '\u001f', '"', '\\', '\ud800', '\udfff', 'é', '😀', '\u2028'),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    )
    // A round trip turns a generated -0 into 0, which the freeze accepts.
    const json = fc.jsonValue({ maxDepth: 4, stringUnit: unit }).map((v) => JSON.parse(JSON.stringify(v)) as unknown)
    fc.assert(
      fc.property(json, (value) => {
        const { bound, exact } = sizes(value)
        expect(bound).toBeGreaterThanOrEqual(exact)
      }),
      { numRuns: 500 },
    )
  })
})
