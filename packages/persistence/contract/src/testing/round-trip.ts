import { type JsonValue, SessionId, SessionLogOffset, SessionSeq } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { type AppendedEvent, expandEventRuns, type StoredEventRun } from '../event-runs.js'
import { event, events, expectCode, type FreshHarness, header, isDeepFrozen, plain, T0, target } from './fixtures.js'

/** What is stored comes back exactly: awkward data and ids, event runs, other instances and reopens, close. */
export function describeRoundTrip(fresh: FreshHarness): void {
  describe('lossless round-trip', () => {
    const awkward: JsonValue[] = [
      null,
      true,
      0,
      -1,
      0.1,
      5e-324,
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_VALUE,
      '',
      'line\nbreak\r\nand\ttab and "quotes" and \\ backslash',
      'unicode: héllo wörld — 日本語 — 🧪🚀👩‍👩‍👧 — \u2028\u2029 — \u0000 nul — lone \ud800 surrogate',
      [],
      {},
      { nested: { deeper: { deepest: [1, [2, [3, { four: 4 }]]] } }, '': 'empty key', 'key with spaces': 1, ключ: 'значение' },
      JSON.parse('{"__proto__":"an own key, not a prototype"}') as JsonValue,
      Array.from({ length: 64 }, (_, i) => ({ i, s: String.fromCodePoint(0x1f600 + i) })),
      'x'.repeat(1_000_000),
    ]

    it('keeps arbitrary event types and JSON data exactly, across a reopen', async () => {
      const harness = await fresh()
      const h = header('lossless')
      const batch = awkward.map((data, i) =>
        event(i, i % 3 === 0 ? 'custom/type' : i % 3 === 1 ? 'ext/🧩 unicode type' : 'assistant/chunk', data, T0 + i + 0.5),
      )
      await harness.persistence.append(target(h), batch.slice(0, 5))
      await harness.persistence.append(target(h), batch.slice(5))
      for (const reopen of [false, true]) {
        const p = reopen ? await harness.reopen() : harness.persistence
        const observation = await p.inspect(h.id)
        expect(observation.events).toHaveLength(batch.length)
        observation.events.forEach((stored, i) => {
          const original = batch[i]!
          expect(stored.type).toBe(original.type)
          expect(stored.seq).toBe(original.seq)
          expect(stored.time).toBe(original.time)
          expect(JSON.stringify(stored.data)).toBe(JSON.stringify(original.data))
        })
        expect(Object.hasOwn(observation.events[14]!.data as object, '__proto__')).toBe(true)
      }
    })

    it('keeps many batches in order', async () => {
      const harness = await fresh()
      const h = header('many')
      let next = 0
      for (let batch = 0; batch < 40; batch++) {
        const size = (batch % 7) + 1
        await harness.persistence.append(target(h), events(next, size, `b${batch}-`))
        next += size
      }
      await harness.persistence.append(target(h), events(next, 2000))
      next += 2000
      const observation = await (await harness.reopen()).inspect(h.id)
      expect(observation.events.map((e) => e.seq)).toEqual(Array.from({ length: next }, (_, i) => i))
    })

    it('round-trips a seeded session (inheritedEventCount below the event count)', async () => {
      const harness = await fresh()
      const h = header('fork', { isSeeded: true, parentSession: 'root', origin: 'subagent', delegationDepth: 1, agentPreset: 'reviewer' })
      const seed = [...events(0, 4, 'inherited'), event(4, 'subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'scripted' })]
      await harness.persistence.append(target(h, 4), seed)
      await harness.persistence.append(target(h, 4), events(5, 3, 'own'))
      for (const reopen of [false, true]) {
        const p = reopen ? await harness.reopen() : harness.persistence
        const observation = await p.inspect(h.id)
        expect(observation.header).toEqual(h)
        expect(observation.header.isSeeded).toBe(true)
        expect(observation.inheritedEventCount).toBe(4)
        expect(observation.events).toHaveLength(8)
        expect(plain(observation.events.slice(0, 5))).toEqual(plain(seed))
        const [record] = await p.list()
        expect(record).toMatchObject({ header: h, inheritedEventCount: 4, revision: observation.revision })
      }
    })

    it.each([
      ['dot-dot', '..'],
      ['a relative escape', '../x'],
      ['a slash', 'a/b'],
      ['a backslash', 'a\\b'],
      ['NUL', 'a\u0000b'],
      ['emoji', '🦀 session ✨'],
      ['a long id', 'L'.repeat(10_000)],
      ['case only', 'CaseOnly'],
    ])('an id with %s round-trips to itself or is rejected with INVALID_ID', async (_why, raw) => {
      const { persistence: p } = await fresh()
      await p.append(target(header('caseonly')), events(0, 1, 'lower'))
      // Built past `parseSessionHeader`, which refuses some of these ids itself: a backend must refuse them too.
      const h = { ...header('odd'), id: SessionId(raw) }
      const outcome = await p.append(target(h), events(0, 1, 'odd')).then(
        () => 'stored' as const,
        (error: { code?: string }) => error.code,
      )
      if (outcome === 'stored') {
        expect((await p.inspect(h.id)).header.id).toBe(raw)
        expect((await p.list()).map((r) => r.header.id).sort()).toEqual([raw, 'caseonly'].sort())
        expect((await p.inspect(SessionId('caseonly'))).events[0]!.data).toEqual({ text: 'lower0' })
      } else {
        expect(outcome).toBe('SESSION_PERSISTENCE_INVALID_ID')
        expect((await p.list()).map((r) => r.header.id)).toEqual(['caseonly'])
      }
    })
  })

  describe('event runs', () => {
    function run(seq: number, type: string, dt: number[], data: Record<string, unknown>, time = T0 + seq): StoredEventRun {
      return { type, seq: SessionSeq(seq), time, run: { dt, data: data as StoredEventRun['run']['data'] } }
    }

    it('stores a run as exactly the events it stands for, beside events, across batches and a reopen', async () => {
      const harness = await fresh()
      const p = harness.persistence
      const h = header('runs')
      const long = 1500
      const batches: AppendedEvent[][] = [
        [
          event(0, 'user/message', { text: 'hi' }),
          run(1, 'assistant/chunk', [1, 2, 0, 5], { turn: 1, index: [0, 1, 2, 3, 4], delta: ['a', '', 'q"uote\n', '🧪 \u2028', 'e'] }),
          event(6, 'assistant/message', { text: 'done' }),
        ],
        [run(7, 'single', [], { v: null }), run(8, 'shared', [3, 3], { a: true, b: -1.5, c: 'same' })],
        [
          run(
            11,
            'long',
            Array.from({ length: long - 1 }, (_, k) => k % 7),
            { n: Array.from({ length: long }, (_, k) => k), flag: false },
          ),
        ],
      ]
      let nextSeq = 0
      for (const batch of batches) nextSeq = (await p.append(target(h), batch)).nextSeq
      expect(nextSeq).toBe(11 + long)
      const expected = batches.flatMap((batch) => expandEventRuns(h.id, batch))
      expect(expected).toHaveLength(11 + long)
      expect(plain(expected.slice(1, 6))).toEqual([
        { type: 'assistant/chunk', seq: 1, time: T0 + 1, data: { turn: 1, index: 0, delta: 'a' } },
        { type: 'assistant/chunk', seq: 2, time: T0 + 2, data: { turn: 1, index: 1, delta: '' } },
        { type: 'assistant/chunk', seq: 3, time: T0 + 4, data: { turn: 1, index: 2, delta: 'q"uote\n' } },
        { type: 'assistant/chunk', seq: 4, time: T0 + 4, data: { turn: 1, index: 3, delta: '🧪 \u2028' } },
        { type: 'assistant/chunk', seq: 5, time: T0 + 9, data: { turn: 1, index: 4, delta: 'e' } },
      ])
      const whole = await p.inspect(h.id)
      expect(plain(whole.events)).toEqual(plain(expected))
      expect(isDeepFrozen(whole.events)).toBe(true)
      const suffix = await p.inspectFrom(h.id, SessionLogOffset(3))
      expect(plain(suffix.events)).toEqual(plain(expected.slice(3)))
      const reopened = await harness.reopen()
      expect(plain((await reopened.inspect(h.id)).events)).toEqual(plain(expected))
      expect((await reopened.append(target(h), [run(11 + long, 'after', [1], { x: [1, 2] })])).nextSeq).toBe(13 + long)
    })

    it('a first batch of runs carries the inherited prefix', async () => {
      const { persistence: p } = await fresh()
      const h = header('seeded-runs', { isSeeded: true, parentSession: 'p' })
      await expectCode(p.append(target(h, 4), [run(0, 'seed', [1, 1], { i: [0, 1, 2] })]), 'SESSION_PERSISTENCE_CONFLICT')
      expect(await p.stat(h.id)).toBeUndefined()
      expect((await p.append(target(h, 4), [run(0, 'seed', [1, 1, 1, 1], { i: [0, 1, 2, 3, 4] })])).nextSeq).toBe(5)
      expect((await p.inspectFrom(h.id, SessionLogOffset(4))).events.map((e) => e.seq)).toEqual([4])
    })

    it('refuses a run at another seq (conflict) or one its events could not be stored as (invalid), storing nothing of the batch', async () => {
      const { persistence: p } = await fresh()
      const h = header('bad-runs')
      await expectCode(p.append(target(h), [run(1, 't', [1], { v: [1, 2] })]), 'SESSION_PERSISTENCE_CONFLICT')
      await p.append(target(h), events(0, 2))
      const before = await p.stat(h.id)
      const bad: AppendedEvent[] = [
        run(2, '', [1], { v: 1 }),
        run(2, 't', [0.5], { v: 1 }),
        run(2, 't', [1], { v: 1 }, T0 + 0.5),
        run(2, 't', [Number.MAX_SAFE_INTEGER], { v: 1 }),
        run(2, 't', [1], { v: [1] }),
        run(2, 't', [1], { v: [1, Number.NaN] }),
        run(2, 't', [1], { v: -0 }),
        run(2, 't', [1], { v: { nested: true } }),
        run(2, 't', [1], { v: [[1], [2]] }),
        run(2, 't', [1], JSON.parse('{"__proto__": 1}') as Record<string, unknown>),
        run(2, 't', [1], { v: Object.assign(['a', 'b'], { toJSON: () => 'not the values' }) }),
        { ...run(2, 't', [1], { v: 1 }), data: { v: 1 } } as AppendedEvent,
        { type: 't', seq: SessionSeq(2), time: T0, run: { dt: 'no', data: {} } } as unknown as AppendedEvent,
      ]
      for (const item of bad) {
        await expectCode(
          p.append(target(h), [event(2, 'ok', 1), { ...item, seq: SessionSeq(3) } as AppendedEvent]),
          'SESSION_PERSISTENCE_INVALID_EVENT',
        )
        await expectCode(p.append(target(h), [item]), 'SESSION_PERSISTENCE_INVALID_EVENT')
      }
      expect(await p.stat(h.id)).toBe(before)
      expect((await p.inspect(h.id)).events).toHaveLength(2)
    })
  })

  describe('durability across instances', () => {
    it('a reopened backend reads the same records, events and revisions', async () => {
      const harness = await fresh()
      const a = header('a')
      const b = header('b', { isSeeded: true, parentSession: 'a' })
      await harness.persistence.append(target(a), events(0, 3))
      await harness.persistence.append(target(b, 1), events(0, 2))
      const before = [...(await harness.persistence.list())].sort((x, y) => (x.header.id < y.header.id ? -1 : 1))
      const inspectedBefore = await harness.persistence.inspect(a.id)
      const p = await harness.reopen()
      const after = [...(await p.list())].sort((x, y) => (x.header.id < y.header.id ? -1 : 1))
      expect(after).toEqual(before)
      const inspectedAfter = await p.inspect(a.id)
      expect(inspectedAfter.revision).toBe(inspectedBefore.revision)
      expect(plain(inspectedAfter.events)).toEqual(plain(inspectedBefore.events))
      // Appends continue from the stored offset.
      await expectCode(p.append(target(a), events(0, 1)), 'SESSION_PERSISTENCE_CONFLICT')
      expect((await p.append(target(a), events(3, 1))).nextSeq).toBe(4)
    })

    it('a second instance over the same root reads what the first committed', async () => {
      const harness = await fresh()
      const h = header('shared-root')
      const { revision } = await harness.persistence.append(target(h), events(0, 3))
      const second = await fresh({ root: harness.root })
      expect(await second.persistence.stat(h.id)).toBe(revision)
      expect((await second.persistence.inspect(h.id)).events).toHaveLength(3)
    })
  })

  describe('close', () => {
    it('is idempotent, and a closed backend rejects with CLOSED', async () => {
      const { persistence: p } = await fresh()
      const h = header('closing')
      await p.append(target(h), events(0, 1))
      await p.close()
      await p.close()
      await expectCode(p.append(target(h), events(1, 1)), 'SESSION_PERSISTENCE_CLOSED')
      await expectCode(p.inspect(h.id), 'SESSION_PERSISTENCE_CLOSED')
      await expectCode(p.list(), 'SESSION_PERSISTENCE_CLOSED')
    })
  })
}
