import { rmSync } from 'node:fs'
import { type JsonValue, parseSessionHeader, SessionLogOffset, type SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { type AppendedEvent, createMemoryPersistence, expandEventRuns, type FlatValue, type StoredEventRun } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { tempDir } from './helpers.js'

// Event runs appended to a packing JSONL log read back as exactly the events they stand for, whatever their
// columns hold (any string, lone surrogates included; integers and doubles; booleans; null), however long they
// are (split at 1024 events a line, a last single event on its own line) and wherever they sit among events.
// The in-memory backend, which stores the expanded events, is the reference.

// Any code units: fc.string's 'binary' unit draws whole code points only, never a lone surrogate, so one is drawn here too.
const codeUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 9 },
  { arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)), weight: 1 },
)
const text = (maxLength: number) => fc.string({ unit: codeUnit, maxLength })

const flat: fc.Arbitrary<FlatValue> = fc.oneof(
  text(12),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
  fc.boolean(),
  fc.constant(null),
)
const key = text(6).filter((k) => k !== '__proto__')

/** A run of `count` events, without its seq (assigned in batch order). */
const run = fc
  .record({
    type: fc.constantFrom('assistant/chunk', 'x', 'tool/progress'),
    count: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1020, max: 1030 }), fc.integer({ min: 2040, max: 2052 })),
    time: fc.integer({ min: 0, max: 2 ** 45 }),
    keys: fc.uniqueArray(key, { maxLength: 4 }),
    shared: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
  })
  .chain(({ type, count, time, keys, shared }) =>
    fc.record({
      type: fc.constant(type),
      time: fc.constant(time),
      dt: fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: count - 1, maxLength: count - 1 }),
      columns: fc.tuple(...keys.map((_, c) => (shared[c] ? flat : fc.array(flat, { minLength: count, maxLength: count })))),
      keys: fc.constant(keys),
    }),
  )

// Event data is lossless JSON (the store refuses what would not come back, such as -0, which fc.jsonValue can give).
const lossless = fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown)
const event = fc.record({ type: fc.constantFrom('user/message', 'assistant/chunk'), data: lossless })

const batches = fc.array(
  fc.array(
    fc.oneof(
      run.map((r) => ({ run: r })),
      event.map((e) => ({ event: e })),
    ),
    { minLength: 1, maxLength: 4 },
  ),
  {
    minLength: 1,
    maxLength: 4,
  },
)

describe('event runs in a JSONL log (property)', () => {
  it('read back as the events they stand for, like the in-memory backend, across a reopen', async () => {
    await fc.assert(
      fc.asyncProperty(batches, async (drawn) => {
        const made = tempDir('dsh-jsonl-runs-')
        const jsonl = createJsonlPersistence({ root: made.dir })
        const memory = createMemoryPersistence()
        const header = parseSessionHeader({ version: 1, id: 'prop', createdAt: 0, isSeeded: false, delegationDepth: 0 })
        const target = { header, inheritedEventCount: SessionLogOffset(0) }
        try {
          let seq = 0
          const expected: StoredSessionEvent[] = []
          for (const items of drawn) {
            const batch: AppendedEvent[] = items.map((item) => {
              if ('event' in item) {
                return Object.freeze({
                  type: item.event.type,
                  seq: seq++ as SessionSeq,
                  time: 1000 + seq,
                  data: item.event.data as JsonValue,
                })
              }
              const { type, time, dt, columns, keys } = item.run
              const data = Object.fromEntries(keys.map((k, c) => [k, columns[c]])) as StoredEventRun['run']['data']
              const r: StoredEventRun = { type, seq: seq as SessionSeq, time, run: { dt, data } }
              seq += dt.length + 1
              return r
            })
            expected.push(...expandEventRuns('prop', batch))
            await jsonl.append(target, batch)
            await memory.append(target, batch)
          }
          const plain = (events: readonly StoredSessionEvent[]) => JSON.parse(JSON.stringify(events)) as unknown
          const fromMemory = (await memory.inspect(header.id)).events
          expect(plain(fromMemory)).toEqual(plain(expected))
          expect(plain((await jsonl.inspect(header.id)).events)).toEqual(plain(fromMemory))
          await jsonl.close()
          const reopened = createJsonlPersistence({ root: made.dir })
          try {
            expect(plain((await reopened.inspect(header.id)).events)).toEqual(plain(fromMemory))
            expect(await reopened.verify(header.id)).toMatchObject({ events: seq, tornBytes: 0 })
          } finally {
            await reopened.close()
          }
        } finally {
          await jsonl.close()
          rmSync(made.dir, { recursive: true, force: true })
        }
      }),
      { numRuns: 40 },
    )
  })
})
