import type { JsonValue, StoredSessionEvent } from '@dsh/session'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodeEventLines, parseEventLines } from '../src/log-format.js'

/** The reference encoding: one `JSON.stringify({type, seq, time, data})` line per event. */
function reference(events: readonly StoredSessionEvent[]): Buffer {
  return Buffer.from(events.map((e) => `${JSON.stringify({ type: e.type, seq: e.seq, time: e.time, data: e.data })}\n`).join(''), 'utf8')
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
    Object.freeze(value)
  }
  return value
}

/** Strings that would fool a split on the line boundary if it were not exact. */
const tricky = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.constantFrom(',{"type":', '},{"type":"x","seq":1,"time":2,"data":', '"\n{"type":', '\\', '\u2028', '\ud800', '🙂,{"type":'),
)
const flatData = fc.oneof(
  fc.dictionary(
    fc.oneof(fc.string(), fc.constantFrom('type', ',{"type":')),
    fc.oneof(tricky, fc.integer(), fc.double(), fc.boolean(), fc.constant(null)),
    {
      maxKeys: 4,
    },
  ),
  tricky,
  fc.integer(),
  fc.constant(null),
)
const nestedData = fc.oneof(fc.jsonValue(), fc.record({ content: fc.array(fc.record({ type: tricky, text: tricky }), { maxLength: 3 }) }))

/** Events of every shape the encoder tells apart, in random order, seqs from 0. */
const batches = fc
  .array(
    fc.record({
      type: fc.oneof(
        fc.constantFrom('assistant/chunk', 'tool/result'),
        tricky.filter((s) => s.length > 0),
      ),
      time: fc.oneof(fc.integer({ min: 0, max: 2 ** 53 - 1 }), fc.double({ noNaN: true, noDefaultInfinity: true })),
      data: fc.oneof(flatData, flatData, nestedData),
      form: fc.constantFrom('frozen', 'frozen', 'unfrozen', 'extra-key', 'key-order', 'class'),
    }),
    { maxLength: 40 },
  )
  .map((specs) =>
    specs.map(({ type, time, data, form }, seq): StoredSessionEvent => {
      // Lossless data only (an unfrozen event is checked): -0 written as 0 as JSON.stringify would.
      const clean = JSON.parse(JSON.stringify(data) ?? 'null') as JsonValue
      const safeTime = Object.is(time, -0) ? 0 : time
      switch (form) {
        case 'unfrozen':
          return { type, seq, time: safeTime, data: clean } as StoredSessionEvent
        case 'extra-key':
          return deepFreeze({ type, seq, time: safeTime, data: clean, extra: 'not written' }) as unknown as StoredSessionEvent
        case 'key-order':
          return deepFreeze({ seq, type, time: safeTime, data: clean }) as unknown as StoredSessionEvent
        case 'class': {
          const event = new (class {
            type = type
            seq = seq
            time = safeTime
            data = deepFreeze(clean)
            toJSON(): string {
              return 'not the line'
            }
          })()
          return Object.freeze(event) as unknown as StoredSessionEvent
        }
        default:
          return deepFreeze({ type, seq, time: safeTime, data: clean }) as StoredSessionEvent
      }
    }),
  )

describe('encodeEventLines', () => {
  it('writes exactly one JSON.stringify({type, seq, time, data}) line per event, whatever the events look like', () => {
    fc.assert(
      fc.property(batches, (events) => {
        expect(encodeEventLines(events).equals(reference(events))).toBe(true)
      }),
      { numRuns: 400 },
    )
  })

  it('splits long runs of flat events, across text chunks, into the same lines (and they parse back)', () => {
    const events: StoredSessionEvent[] = []
    for (let seq = 0; seq < 5000; seq++) {
      const data =
        seq % 997 === 0
          ? {
              content: [
                { type: 'text', text: 'a' },
                { type: 'tool-call', id: `c${seq}` },
              ],
            }
          : {
              turn: 1,
              index: 0,
              delta: seq % 3 === 0 ? `x},{"type":"assistant/chunk","seq":${seq + 1},"time":1,"data":{}}` : `tök ${seq} ✓ `,
            }
      events.push(deepFreeze({ type: 'assistant/chunk', seq, time: 1_760_000_000_000 + seq, data }) as unknown as StoredSessionEvent)
    }
    const lines = encodeEventLines(events)
    expect(lines.length).toBeGreaterThan(200 * 1024)
    expect(lines.equals(reference(events))).toBe(true)
    const parsed: StoredSessionEvent[] = []
    expect(parseEventLines(lines, 0, events.length, parsed)).toBeUndefined()
    expect(parsed).toEqual(events)
  })

  it('still refuses an unfrozen event whose data is not lossless JSON', () => {
    const events = [
      Object.freeze({ type: 'a', seq: 0, time: 1, data: Object.freeze({ x: 1 }) }),
      { type: 'a', seq: 1, time: 2, data: { x: Number.NaN } },
    ] as unknown as StoredSessionEvent[]
    expect(() => encodeEventLines(events)).toThrow(expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' }))
  })
})
