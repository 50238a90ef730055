import type { JsonValue, StoredSessionEvent } from '@dsh/session'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { countEventLines, encodeEventLines, parseEventLines } from '../src/log-format.js'

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
// Lossless JSON only (fc.jsonValue can give -0, which the store refuses: it would come back as 0).
const nestedData = fc.oneof(
  fc.jsonValue().map((value) => JSON.parse(JSON.stringify(value)) as unknown),
  fc.record({ content: fc.array(fc.record({ type: tricky, text: tricky }), { maxLength: 3 }) }),
)

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

  it('keeps each batch its own bytes: after a batch that threw, and when encoding one batch encodes another', () => {
    const small = (seq: number, text: string) =>
      deepFreeze({ type: 'user/message', seq, time: 1_760_000_000_000 + seq, data: { text } }) as unknown as StoredSessionEvent
    const first = encodeEventLines([small(0, 'first')])
    // A batch that throws half way leaves nothing behind for the next one.
    const bad = [
      small(1, 'written then refused'),
      { type: 'a', seq: 2, time: 2, data: { x: Number.NaN } },
    ] as unknown as StoredSessionEvent[]
    expect(() => encodeEventLines(bad)).toThrow(expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' }))
    const after = encodeEventLines([small(3, 'after')])
    expect(after.equals(reference([small(3, 'after')]))).toBe(true)
    // An unfrozen event's data is read while the outer batch is being written: a getter there encodes a batch of its own.
    let inner: Buffer | undefined
    const outer = [
      small(4, 'outer before'),
      {
        type: 'a',
        seq: 5,
        time: 5,
        data: {
          get text() {
            inner = encodeEventLines([small(9, 'inner')])
            return 'outer getter'
          },
        },
      },
      small(6, 'outer after'),
    ] as unknown as StoredSessionEvent[]
    const outerLines = encodeEventLines(outer).toString('utf8')
    expect(inner?.equals(reference([small(9, 'inner')]))).toBe(true)
    expect(outerLines).toBe(
      `${JSON.stringify(small(4, 'outer before'))}\n${JSON.stringify({ type: 'a', seq: 5, time: 5, data: { text: 'outer getter' } })}\n${JSON.stringify(small(6, 'outer after'))}\n`,
    )
    // Earlier results were copies: later batches changed none of them.
    expect(first.equals(reference([small(0, 'first')]))).toBe(true)
  })
})

/** Lines of a batch, parsed (a packed line stays one object). */
function linesOf(plain: Buffer): Array<Record<string, unknown>> {
  return plain
    .toString('utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

function parsed(plain: Buffer, count: number): StoredSessionEvent[] {
  const out: StoredSessionEvent[] = []
  const reason = parseEventLines(plain, 0, count, out)
  if (reason !== undefined) throw new Error(reason)
  return out
}

function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  return Object.isFrozen(value) && Object.values(value).every(isDeepFrozen)
}

/** Runs of like events (one type, one key list) in random forms, so packing has something to pack and to refuse. */
const runs = fc
  .array(
    fc.record({
      type: fc.constantFrom('assistant/chunk', 'tool/progress', ',{"type":'),
      keys: fc.constantFrom(['turn', 'index', 'delta'], ['delta', 'turn'], [], ['x'], ['__proto__', 'y'], ['1', 'a']),
      length: fc.integer({ min: 1, max: 12 }),
      values: fc.array(fc.oneof(tricky, fc.integer({ min: 0, max: 3 }), fc.double(), fc.boolean(), fc.constant(null)), {
        minLength: 1,
        maxLength: 5,
      }),
      gap: fc.oneof(fc.integer({ min: -5, max: 40 }), fc.constant(0.5), fc.constant(2 ** 53)),
      form: fc.constantFrom('frozen', 'frozen', 'frozen', 'unfrozen', 'nested', 'extra-key'),
    }),
    { maxLength: 8 },
  )
  .map((segments) => {
    const events: StoredSessionEvent[] = []
    let time = 1_760_000_000_000
    for (const { type, keys, length, values, gap, form } of segments) {
      for (let m = 0; m < length; m++) {
        time = m === 0 ? time + 1 : time + gap
        const data: Record<string, unknown> = {}
        keys.forEach((key, k) => {
          const value = values[(m * (k + 1)) % values.length]
          // -0 is written as 0 (as JSON.stringify would), so the reference reads the same.
          Object.defineProperty(data, key, {
            value: Object.is(value, -0) ? 0 : value,
            enumerable: true,
            writable: true,
            configurable: true,
          })
        })
        if (form === 'nested' && m === 1) data.nested = { deep: [1] }
        const event = { type, seq: events.length, time: Number.isSafeInteger(time) ? time : 0.5, data }
        if (form === 'extra-key' && m === 2) events.push(deepFreeze({ ...event, extra: 1 }) as unknown as StoredSessionEvent)
        else if (form === 'unfrozen' && m === 1) events.push(JSON.parse(JSON.stringify(event)) as StoredSessionEvent)
        else events.push(deepFreeze(event) as StoredSessionEvent)
      }
    }
    return events
  })

describe('encodeEventLines with packing (version 4 zstd logs)', () => {
  it('reads back exactly the events it was given, whatever they look like, deep-frozen', () => {
    fc.assert(
      fc.property(
        fc.oneof(runs, batches).filter((events) => events.length > 0),
        (events) => {
          const packed = encodeEventLines(events, true)
          const read = parsed(packed, events.length)
          // The same lines, byte for byte, as the events themselves would have been written one per line.
          expect(reference(read).equals(reference(events))).toBe(true)
          expect(read.every((event) => isDeepFrozen(event))).toBe(true)
          expect(countEventLines(packed)).toBe(events.length)
          // Without packing nothing changes.
          expect(encodeEventLines(events, false).equals(reference(events))).toBe(true)
        },
      ),
      { numRuns: 600 },
    )
  })

  it('packs a stream of chunks into one line: shared values once, the others as columns, times as gaps', () => {
    const events = Array.from({ length: 8 }, (_, i) =>
      deepFreeze({ type: 'assistant/chunk', seq: i, time: 1_760_000_000_000 + i * i, data: { turn: 3, index: i, delta: `tök ${i}` } }),
    ) as unknown as StoredSessionEvent[]
    const packed = encodeEventLines(events, true)
    expect(linesOf(packed)).toEqual([
      {
        type: 'assistant/chunk',
        seq: 0,
        time: 1_760_000_000_000,
        run: {
          dt: [1, 3, 5, 7, 9, 11, 13],
          data: { turn: 3, index: [0, 1, 2, 3, 4, 5, 6, 7], delta: events.map((e) => (e.data as { delta: string }).delta) },
        },
      },
    ])
    expect(packed.length).toBeLessThan(reference(events).length * 0.6)
    expect(parsed(packed, 8)).toEqual(events)
  })

  it('ends a run where the type, the key order, integer times or frozen flat data end, and after 1024 events', () => {
    const chunk = (seq: number, data: Record<string, unknown>, time = 1000 + seq, type = 'assistant/chunk') =>
      deepFreeze({ type, seq, time, data }) as StoredSessionEvent
    const events: StoredSessionEvent[] = [
      chunk(0, { a: 1, b: 'x' }),
      chunk(1, { a: 2, b: 'y' }),
      chunk(2, { b: 'z', a: 3 }), // another key order
      chunk(3, { b: 'w', a: 4 }),
      chunk(4, { b: 'v', a: 5 }, 1004, 'other'), // another type
      chunk(5, { b: 'u', a: 6 }, 1005, 'other'),
      chunk(6, { b: 'u', a: 6 }, 1005.5, 'other'), // not an integer time
      { type: 'other', seq: 7, time: 1007, data: { b: 't', a: 7 } } as unknown as StoredSessionEvent, // not frozen
      chunk(8, { b: 's', a: { nested: true } }, 1008, 'other'), // not flat
      chunk(9, { b: 's', a: 9 }, 1009, 'other'),
    ]
    for (let seq = 10; seq < 10 + 1500; seq++) events.push(chunk(seq, { a: seq, b: 'same' }, 1000 + seq, 'bulk'))
    const lines = linesOf(encodeEventLines(events, true))
    const shape = lines.map((line) => (line.run === undefined ? line.seq : `${line.seq}+${(line.run as { dt: unknown[] }).dt.length + 1}`))
    expect(shape).toEqual(['0+2', '2+2', '4+2', 6, 7, 8, 9, '10+1024', '1034+476'])
    expect(parsed(encodeEventLines(events, true), events.length).map((e) => JSON.stringify(e))).toEqual(
      events.map((e) => JSON.stringify({ type: e.type, seq: e.seq, time: e.time, data: e.data })),
    )
  })

  it('refuses a packed line that is not exactly what the encoder writes', () => {
    const line = (run: unknown, extra: Record<string, unknown> = {}) =>
      Buffer.from(`${JSON.stringify({ type: 'c', seq: 0, time: 10, run, ...extra })}\n`)
    const good = { dt: [1, 2], data: { turn: 1, delta: ['a', 'b', 'c'] } }
    expect(parsed(line(good), 3).map((e) => [e.seq, e.time, e.data])).toEqual([
      [0, 10, { turn: 1, delta: 'a' }],
      [1, 11, { turn: 1, delta: 'b' }],
      [2, 13, { turn: 1, delta: 'c' }],
    ])
    const bad: Array<[Buffer, RegExp]> = [
      [line({ ...good, data: { delta: ['a', 'b'] } }), /not 3 flat values/],
      [line({ ...good, data: { delta: ['a', { x: 1 }, 'c'] } }), /not 3 flat values/],
      [line({ ...good, data: { turn: { x: 1 } } }), /nested value/],
      [line({ ...good, dt: [1, 0.5] }), /not an integer/],
      [line({ ...good, dt: [] }), /no time gaps/],
      [line({ ...good, extra: 1 }), /no time gaps/],
      [line(good, { data: {} }), /fields other than/],
      [line({ dt: [1, 2], data: JSON.parse('{"__proto__":null}') }), /__proto__/],
      [line(good), /holds 3 events, its trailer records 4/],
    ]
    for (const [plain, reason] of bad) {
      const out: StoredSessionEvent[] = []
      expect(parseEventLines(plain, 0, plain === bad.at(-1)?.[0] ? 4 : 3, out)).toMatch(reason)
    }
  })
})
