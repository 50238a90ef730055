import {
  type JsonValue,
  parseSessionHeader,
  type SessionHeader,
  SessionId,
  SessionLogOffset,
  SessionSeq,
  type StoredSessionEvent,
} from '@dsh/session'
import { afterEach, describe, expect, it } from 'vitest'
import { type AppendedEvent, expandEventRuns, type StoredEventRun } from './event-runs.js'
import type { AppendTarget, PersistenceMetrics, SessionPersistence } from './types.js'

/**
 * One backend instance over one storage root, as the contract suite drives it.
 * A file backend's `root` is a directory; an in-memory backend's is any key
 * naming its shared storage.
 */
export interface PersistenceContractHarness {
  /** The instance the test starts with. */
  readonly persistence: SessionPersistence
  /** Where the storage lives; `factory({ root })` opens another instance over it. */
  readonly root: string
  /**
   * Closes the most recent instance of this harness and opens a new one over
   * the same storage (a process restart). Resolves to the new instance.
   */
  reopen(): Promise<SessionPersistence>
  /**
   * Closes this harness's instances. A harness created without `root` owns its
   * storage and removes it; one opened over an existing `root` leaves it.
   */
  cleanup(): Promise<void>
}

export interface PersistenceContractFactoryOptions {
  /** Open over this existing storage instead of a fresh, empty one. */
  readonly root?: string
}

/** Creates a backend over a fresh, empty storage root (or over `options.root`). */
export type PersistenceContractFactory = (
  options?: PersistenceContractFactoryOptions,
) => Promise<PersistenceContractHarness> | PersistenceContractHarness

const T0 = 1_700_000_000_000

/** A valid logical header for tests; `overrides` may change any field. */
function header(id: string, overrides: Record<string, unknown> = {}): SessionHeader {
  return parseSessionHeader({ version: 1, id, createdAt: T0, isSeeded: false, delegationDepth: 0, ...overrides })
}

function target(h: SessionHeader, inheritedEventCount = 0): AppendTarget {
  return { header: h, inheritedEventCount: SessionLogOffset(inheritedEventCount) }
}

function event(seq: number, type: string, data: JsonValue, time: number = T0 + seq): StoredSessionEvent {
  return { type, seq: SessionSeq(seq), time, data }
}

/** `count` plain events starting at `from`: a user message, then chunks. */
function events(from: number, count: number, tag = 'e'): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) =>
    event(
      from + i,
      i === 0 ? 'user/message' : 'assistant/chunk',
      i === 0 ? { text: `${tag}${from}` } : { turn: 1, index: i, delta: `${tag}${from + i}` },
    ),
  )
}

function snapshot(p: SessionPersistence): PersistenceMetrics {
  return { ...p.metrics }
}

function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value)) as unknown
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  await expect(promise).rejects.toMatchObject({ code })
}

function aborted(): AbortSignal {
  const controller = new AbortController()
  controller.abort()
  return controller.signal
}

function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (!Object.isFrozen(value)) return false
  return Object.values(value).every(isDeepFrozen)
}

/**
 * The persistence contract every backend passes. Call it at the top level of
 * a spec file: `describePersistenceContract('jsonl', (o) => openJsonlHarness(o))`.
 * Each test opens a fresh root through `factory()` and cleans it up.
 */
export function describePersistenceContract(name: string, factory: PersistenceContractFactory): void {
  describe(`${name}: session persistence contract`, () => {
    const open: PersistenceContractHarness[] = []
    afterEach(async () => {
      // Harnesses over an existing root first: the owner removes the storage last.
      for (const harness of open.splice(0).reverse()) await harness.cleanup()
    })
    async function fresh(options?: PersistenceContractFactoryOptions): Promise<PersistenceContractHarness> {
      const harness = await factory(options)
      open.push(harness)
      return harness
    }

    describe('materialization', () => {
      it('an empty first batch only materializes the header', async () => {
        const { persistence: p } = await fresh()
        const h = header('empty')
        const result = await p.append(target(h), [])
        expect(result.nextSeq).toBe(0)
        expect(typeof result.revision).toBe('string')
        expect(await p.stat(h.id)).toBe(result.revision)
        const [record, ...rest] = await p.list()
        expect(rest).toEqual([])
        expect(record).toEqual({ header: h, inheritedEventCount: 0, revision: result.revision })
        const observation = await p.inspect(h.id)
        expect(observation.events).toEqual([])
        expect(observation.header).toEqual(h)
      })

      it('writes the header together with the first batch', async () => {
        const { persistence: p } = await fresh()
        const h = header('first', { cwd: '/work/project', agentPreset: 'coder' })
        const batch = events(0, 3)
        const result = await p.append(target(h), batch)
        expect(result.nextSeq).toBe(3)
        const observation = await p.inspect(h.id)
        expect(observation).toMatchObject({ header: h, inheritedEventCount: 0, revision: result.revision })
        expect(plain(observation.events)).toEqual(plain(batch))
      })

      it('a rejected first append materializes nothing', async () => {
        const { persistence: p } = await fresh()
        const h = header('never')
        await expectCode(p.append(target(h), events(1, 2)), 'SESSION_PERSISTENCE_CONFLICT')
        expect(await p.stat(h.id)).toBeUndefined()
        expect(await p.list()).toEqual([])
        await expectCode(p.inspect(h.id), 'SESSION_PERSISTENCE_NOT_FOUND')
      })

      it('a seeded first batch must carry the whole inherited prefix', async () => {
        const { persistence: p } = await fresh()
        const h = header('short-seed', { isSeeded: true, parentSession: 'parent' })
        await expectCode(p.append(target(h, 4), events(0, 3)), 'SESSION_PERSISTENCE_CONFLICT')
        expect(await p.stat(h.id)).toBeUndefined()
      })

      it('concurrent first appends of one id: exactly one materializes', async () => {
        const { persistence: p } = await fresh()
        const h = header('race')
        const results = await Promise.allSettled([p.append(target(h), events(0, 2, 'a')), p.append(target(h), events(0, 2, 'b'))])
        const won = results.filter((r) => r.status === 'fulfilled')
        const lost = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as { code?: string }] : []))
        expect(won).toHaveLength(1)
        expect(lost.map((e) => e.code)).toEqual(['SESSION_PERSISTENCE_CONFLICT'])
        const observation = await p.inspect(h.id)
        expect(observation.events.map((e) => e.seq)).toEqual([0, 1])
        const winner = results[0]!.status === 'fulfilled' ? 'a' : 'b'
        expect(observation.events[0]!.data).toEqual({ text: `${winner}0` })
      })
    })

    describe('expected-offset check', () => {
      it.each([
        ['a gap', 5],
        ['a repeated seq', 2],
        ['a restart at 0', 0],
      ])('rejects a batch that starts with %s and stores nothing', async (_why, first) => {
        const { persistence: p } = await fresh()
        const h = header('offset')
        const { revision } = await p.append(target(h), events(0, 3))
        await expectCode(p.append(target(h), events(first, 2)), 'SESSION_PERSISTENCE_CONFLICT')
        expect(await p.stat(h.id)).toBe(revision)
        expect((await p.inspect(h.id)).events).toHaveLength(3)
        // The right offset still works afterwards.
        expect((await p.append(target(h), events(3, 1))).nextSeq).toBe(4)
      })

      it('rejects a batch whose seqs are not contiguous, storing none of it', async () => {
        const { persistence: p } = await fresh()
        const h = header('holes')
        await p.append(target(h), events(0, 2))
        await expectCode(p.append(target(h), [event(2, 'x', 1), event(4, 'x', 2)]), 'SESSION_PERSISTENCE_CONFLICT')
        expect((await p.inspect(h.id)).events).toHaveLength(2)
      })

      it.each([
        ['another createdAt', { createdAt: T0 + 1 }],
        ['another parent', { parentSession: 'other-parent' }],
        ['another origin', { origin: 'subagent', parentSession: 'p' }],
        ['another depth', { delegationDepth: 2 }],
        ['another cwd', { cwd: '/elsewhere' }],
      ])('rejects a header of another lifecycle (%s) for an existing id', async (_why, overrides) => {
        const { persistence: p } = await fresh()
        const h = header('life')
        const { revision } = await p.append(target(h), events(0, 2))
        const other = header('life', overrides)
        await expectCode(p.append(target(other), events(2, 1)), 'SESSION_PERSISTENCE_CONFLICT')
        await expectCode(p.append(target(other), []), 'SESSION_PERSISTENCE_CONFLICT')
        expect(await p.stat(h.id)).toBe(revision)
        expect((await p.list())[0]!.header).toEqual(h)
      })

      it('rejects another inherited cut for an existing id', async () => {
        const { persistence: p } = await fresh()
        const h = header('cut', { isSeeded: true, parentSession: 'p' })
        await p.append(target(h, 2), events(0, 3))
        await expectCode(p.append(target(h, 1), events(3, 1)), 'SESSION_PERSISTENCE_CONFLICT')
        expect((await p.inspect(h.id)).inheritedEventCount).toBe(2)
      })

      it('concurrent appends at the same offset: exactly one lands, nothing is duplicated', async () => {
        const { persistence: p } = await fresh()
        const h = header('same-offset')
        await p.append(target(h), events(0, 3))
        const results = await Promise.allSettled([p.append(target(h), events(3, 2, 'a')), p.append(target(h), events(3, 2, 'b'))])
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
        const rejected = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as { code?: string }] : []))
        expect(rejected.map((e) => e.code)).toEqual(['SESSION_PERSISTENCE_CONFLICT'])
        const seqs = (await p.inspect(h.id)).events.map((e) => e.seq)
        expect(seqs).toEqual([0, 1, 2, 3, 4])
      })

      it('an empty batch on an existing session changes nothing', async () => {
        const { persistence: p } = await fresh()
        const h = header('noop')
        const first = await p.append(target(h), events(0, 2))
        const again = await p.append(target(h), [])
        expect(again).toEqual({ revision: first.revision, nextSeq: 2 })
        expect(await p.stat(h.id)).toBe(first.revision)
      })
    })

    describe('revisions', () => {
      it('change on every append and agree across append, stat, list and inspect', async () => {
        const { persistence: p } = await fresh()
        const h = header('rev')
        const seen = new Set<string>()
        let next = 0
        for (let batch = 0; batch < 5; batch++) {
          const result = await p.append(target(h), events(next, batch + 1))
          next += batch + 1
          expect(result.nextSeq).toBe(next)
          expect(seen.has(result.revision)).toBe(false)
          seen.add(result.revision)
          expect(await p.stat(h.id)).toBe(result.revision)
          expect((await p.list()).find((r) => r.header.id === h.id)?.revision).toBe(result.revision)
          expect((await p.inspect(h.id)).revision).toBe(result.revision)
        }
      })

      it('a session deleted and re-created as another lifecycle never repeats a revision', async () => {
        const { persistence: p } = await fresh()
        const first = header('reborn')
        const before = new Set<string>()
        before.add((await p.append(target(first), [])).revision)
        before.add((await p.append(target(first), events(0, 2))).revision)
        expect(await p.delete(first.id)).toBe(true)
        const second = header('reborn', { createdAt: T0 + 9 })
        const empty = await p.append(target(second), [])
        const full = await p.append(target(second), events(0, 2))
        expect(before.has(empty.revision)).toBe(false)
        expect(before.has(full.revision)).toBe(false)
      })
    })

    describe('list', () => {
      it('returns header-only records with the exact inherited cut, reading no body', async () => {
        const { persistence: p } = await fresh()
        const plainSession = header('plain')
        const seeded = header('seeded', { isSeeded: true, parentSession: 'plain', origin: 'subagent', delegationDepth: 1 })
        const empty = header('nothing-yet')
        const a = await p.append(target(plainSession), events(0, 4))
        const b = await p.append(target(seeded, 3), events(0, 5))
        const c = await p.append(target(empty), [])
        const before = snapshot(p)
        const records = [...(await p.list())].sort((x, y) => (x.header.id < y.header.id ? -1 : 1))
        const after = snapshot(p)
        expect(records).toEqual([
          { header: empty, inheritedEventCount: 0, revision: c.revision },
          { header: plainSession, inheritedEventCount: 0, revision: a.revision },
          { header: seeded, inheritedEventCount: 3, revision: b.revision },
        ])
        expect(after.bodyReads).toBe(before.bodyReads)
        expect(after.headerReads - before.headerReads).toBeGreaterThanOrEqual(3)
        expect(records.every((r) => !('events' in r))).toBe(true)
        expect(Object.isFrozen(records[2]!.header)).toBe(true)
      })

      it('is empty for an empty root', async () => {
        const { persistence: p } = await fresh()
        expect(await p.list()).toEqual([])
      })
    })

    describe('inspect', () => {
      it('returns deep-frozen events and header', async () => {
        const { persistence: p } = await fresh()
        const h = header('frozen')
        await p.append(target(h), [
          event(0, 'tool/call', { turn: 1, callId: 'c1', name: 'read', arguments: { path: '/a', lines: [1, 2, { x: null }] } }),
        ])
        const observation = await p.inspect(h.id)
        expect(Object.isFrozen(observation.events)).toBe(true)
        expect(observation.events.every(isDeepFrozen)).toBe(true)
        expect(isDeepFrozen(observation.header)).toBe(true)
        expect(() => (observation.events as StoredSessionEvent[]).push(event(1, 'x', 1))).toThrow()
        // A caller cannot change what the next reader sees.
        expect(plain((await p.inspect(h.id)).events)).toEqual(plain(observation.events))
      })

      it('never mutates storage, even for a log with an open turn', async () => {
        const { persistence: p } = await fresh()
        const h = header('open')
        const { revision } = await p.append(target(h), [
          event(0, 'turn/start', { turn: 1 }),
          event(1, 'assistant/chunk', { turn: 1, index: 0, delta: 'par' }),
        ])
        for (let i = 0; i < 3; i++) {
          const observation = await p.inspect(h.id)
          expect(observation.events.map((e) => e.type)).toEqual(['turn/start', 'assistant/chunk'])
          expect(observation.revision).toBe(revision)
        }
        expect(await p.stat(h.id)).toBe(revision)
      })

      it('counts one body read per inspection and the bytes it read', async () => {
        const { persistence: p } = await fresh()
        const h = header('counted')
        await p.append(target(h), events(0, 20))
        const before = snapshot(p)
        await p.inspect(h.id)
        const middle = snapshot(p)
        await p.inspect(h.id)
        const after = snapshot(p)
        expect(middle.bodyReads - before.bodyReads).toBe(1)
        expect(after.bodyReads - middle.bodyReads).toBe(1)
        expect(middle.bytesRead).toBeGreaterThan(before.bytesRead)
        expect(after.headerReads).toBeGreaterThanOrEqual(before.headerReads)
      })
    })

    describe('absent sessions', () => {
      it('report NOT_FOUND, an undefined stat and a false delete', async () => {
        const { persistence: p } = await fresh()
        await p.append(target(header('present')), events(0, 1))
        const id = SessionId('absent')
        await expectCode(p.inspect(id), 'SESSION_PERSISTENCE_NOT_FOUND')
        await expectCode(p.load(id), 'SESSION_PERSISTENCE_NOT_FOUND')
        expect(await p.stat(id)).toBeUndefined()
        expect(await p.delete(id)).toBe(false)
        expect((await p.list()).map((r) => r.header.id)).toEqual(['present'])
      })
    })

    describe('load', () => {
      it('returns a clean log unchanged and unrepaired', async () => {
        const { persistence: p } = await fresh()
        const h = header('clean')
        const batch = [event(0, 'turn/start', { turn: 1 }), event(1, 'turn/end', { turn: 1, reason: 'completed' })]
        const { revision } = await p.append(target(h), batch)
        const loaded = await p.load(h.id)
        expect(loaded.repaired).toBe(false)
        expect(loaded.revision).toBe(revision)
        expect(plain(loaded.events)).toEqual(plain(batch))
        expect(await p.stat(h.id)).toBe(revision)
      })

      it('closes an open turn with a durable interrupted turn/end; a second load is a no-op', async () => {
        const harness = await fresh()
        const p = harness.persistence
        const h = header('crashed')
        const { revision } = await p.append(target(h), [
          event(0, 'turn/start', { turn: 1 }),
          event(1, 'turn/end', { turn: 1, reason: 'completed' }),
          event(2, 'turn/start', { turn: 2 }),
          event(3, 'assistant/chunk', { turn: 2, index: 0, delta: 'half an ans' }),
        ])
        const loaded = await p.load(h.id)
        expect(loaded.repaired).toBe(true)
        expect(loaded.revision).not.toBe(revision)
        expect(loaded.events).toHaveLength(5)
        expect(loaded.events[4]).toMatchObject({ type: 'turn/end', seq: 4, data: { turn: 2, reason: 'interrupted' } })
        expect(typeof loaded.events[4]!.time).toBe('number')
        expect(loaded.events.every(isDeepFrozen)).toBe(true)
        expect(await p.stat(h.id)).toBe(loaded.revision)

        const again = await p.load(h.id)
        expect(again.repaired).toBe(false)
        expect(again.revision).toBe(loaded.revision)
        expect(plain(again.events)).toEqual(plain(loaded.events))

        // The repair is durable: a restarted backend sees it, and appends continue after it.
        const reopened = await harness.reopen()
        const observed = await reopened.inspect(h.id)
        expect(observed.revision).toBe(loaded.revision)
        expect(plain(observed.events)).toEqual(plain(loaded.events))
        expect((await reopened.load(h.id)).repaired).toBe(false)
        expect((await reopened.append(target(h), events(5, 1))).nextSeq).toBe(6)
      })

      it('repairs an open turn of a seeded session after its cut', async () => {
        const { persistence: p } = await fresh()
        const h = header('seeded-crash', { isSeeded: true, parentSession: 'p' })
        await p.append(target(h, 2), [
          event(0, 'user/message', { text: 'inherited' }),
          event(1, 'assistant/message', { turn: 1, text: 'ok' }),
          event(2, 'turn/start', { turn: 7 }),
        ])
        const loaded = await p.load(h.id)
        expect(loaded.inheritedEventCount).toBe(2)
        expect(loaded.events[3]).toMatchObject({ type: 'turn/end', seq: 3, data: { turn: 7, reason: 'interrupted' } })
      })
    })

    describe('delete', () => {
      it('removes only the named session, explicitly', async () => {
        const { persistence: p } = await fresh()
        const keep = header('keep')
        const drop = header('drop')
        const kept = await p.append(target(keep), events(0, 2))
        await p.append(target(drop), events(0, 2))
        expect(await p.delete(drop.id)).toBe(true)
        expect(await p.stat(drop.id)).toBeUndefined()
        await expectCode(p.inspect(drop.id), 'SESSION_PERSISTENCE_NOT_FOUND')
        expect((await p.list()).map((r) => r.header.id)).toEqual(['keep'])
        expect(await p.stat(keep.id)).toBe(kept.revision)
        expect(await p.delete(drop.id)).toBe(false)
        // The id can start a new lifecycle afterwards.
        const reborn = header('drop', { createdAt: T0 + 5 })
        expect((await p.append(target(reborn), events(0, 1))).nextSeq).toBe(1)
        expect((await p.inspect(drop.id)).header).toEqual(reborn)
      })

      it('nothing is deleted implicitly: rejected appends, reads and repairs keep every session', async () => {
        const { persistence: p } = await fresh()
        const h = header('sticky')
        await p.append(target(h), [event(0, 'turn/start', { turn: 1 })])
        await expectCode(p.append(target(header('sticky', { createdAt: 1 })), events(0, 1)), 'SESSION_PERSISTENCE_CONFLICT')
        await expectCode(p.append(target(h), events(7, 1)), 'SESSION_PERSISTENCE_CONFLICT')
        await p.inspect(h.id)
        await p.load(h.id)
        await p.list()
        expect((await p.inspect(h.id)).events).toHaveLength(2)
      })
    })

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
        const h = header(raw)
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

    describe('metrics', () => {
      it('count appends; list moves headerReads and inspect moves bodyReads', async () => {
        const { persistence: p } = await fresh()
        const start = snapshot(p)
        const h = header('metered')
        await p.append(target(h), events(0, 2))
        await p.append(target(h), events(2, 2))
        expect(snapshot(p).appends - start.appends).toBe(2)
        const beforeList = snapshot(p)
        await p.list()
        const afterList = snapshot(p)
        expect(afterList.headerReads).toBeGreaterThan(beforeList.headerReads)
        expect(afterList.bodyReads).toBe(beforeList.bodyReads)
        await p.inspect(h.id)
        const afterInspect = snapshot(p)
        expect(afterInspect.bodyReads).toBe(afterList.bodyReads + 1)
        expect(afterInspect.bytesRead).toBeGreaterThan(afterList.bytesRead)
      })
    })

    describe('cancellation', () => {
      it('an aborted signal rejects every read with CANCELLED', async () => {
        const { persistence: p } = await fresh()
        const h = header('cancel')
        await p.append(target(h), events(0, 2))
        await expectCode(p.list(aborted()), 'CANCELLED')
        await expectCode(p.inspect(h.id, aborted()), 'CANCELLED')
        await expectCode(p.load(h.id, aborted()), 'CANCELLED')
        await expectCode(p.stat(h.id, aborted()), 'CANCELLED')
      })

      it('a load cancelled before it starts repairs nothing', async () => {
        const { persistence: p } = await fresh()
        const h = header('cancel-repair')
        const { revision } = await p.append(target(h), [event(0, 'turn/start', { turn: 1 })])
        await expectCode(p.load(h.id, aborted()), 'CANCELLED')
        expect(await p.stat(h.id)).toBe(revision)
        expect((await p.inspect(h.id)).events).toHaveLength(1)
      })

      it('a signal aborted while a read is pending rejects it with CANCELLED', async () => {
        const { persistence: p } = await fresh()
        const h = header('cancel-late')
        await p.append(target(h), events(0, 500))
        const controller = new AbortController()
        const pending = p.inspect(h.id, controller.signal)
        controller.abort()
        await expectCode(pending, 'CANCELLED')
      })
    })

    describe('change feed', () => {
      async function drain(p: SessionPersistence, cursor: string): Promise<{ ids: string[]; cursor: string; rescan: boolean }> {
        const result = await p.changes(cursor)
        return { ids: [...result.ids].sort(), cursor: result.cursor, rescan: result.rescan }
      }

      it('without a cursor asks for one rescan, then follows: create, append, delete and re-create each seen exactly once', async () => {
        const { persistence: p } = await fresh()
        const other = header('bystander')
        await p.append(target(other), events(0, 2))
        const first = await p.changes()
        expect(first.rescan).toBe(true)
        expect(typeof first.cursor).toBe('string')
        let cursor = first.cursor
        const h = header('fed')
        const step = async (): Promise<string[]> => {
          const result = await drain(p, cursor)
          expect(result.rescan).toBe(false)
          cursor = result.cursor
          return result.ids
        }
        expect(await step()).toEqual([])
        await p.append(target(h), events(0, 2))
        expect(await step()).toEqual(['fed'])
        expect(await step()).toEqual([])
        await p.append(target(h), events(2, 2))
        expect(await step()).toEqual(['fed'])
        expect(await p.delete(h.id)).toBe(true)
        expect(await step()).toEqual(['fed'])
        await p.append(target(h), events(0, 1, 'again'))
        expect(await step()).toEqual(['fed'])
        expect(await step()).toEqual([])
      })

      it('reports each changed id once per call, however often it changed, and only changed ids', async () => {
        const { persistence: p } = await fresh()
        const a = header('a')
        const b = header('b')
        const c = header('c')
        await p.append(target(c), events(0, 1))
        const { cursor } = await p.changes()
        await p.append(target(a), [])
        await p.append(target(a), events(0, 2))
        await p.append(target(b), events(0, 1))
        await p.append(target(a), events(2, 3))
        const result = await drain(p, cursor)
        expect(result).toMatchObject({ ids: ['a', 'b'], rescan: false })
        // The same cursor can be read again (cursors are values, not consumed):
        // the same ids. The returned cursor is opaque and may have moved on a
        // shared global feed (other writers to the same server), so it is not compared.
        expect(await drain(p, cursor)).toMatchObject({ ids: result.ids, rescan: result.rescan })
      })

      it('a repairing load and an empty materialization are changes; reads and rejected appends are not', async () => {
        const { persistence: p } = await fresh()
        const h = header('repair-feed')
        await p.append(target(h), [event(0, 'turn/start', { turn: 1 })])
        let { cursor } = await p.changes()
        await p.inspect(h.id)
        await p.list()
        await p.stat(h.id)
        await expectCode(p.append(target(h), events(5, 1)), 'SESSION_PERSISTENCE_CONFLICT')
        const quiet = await drain(p, cursor)
        expect(quiet.rescan).toBe(false)
        // A rejected append may be reported (the feed may over-report), never missed; a read never is.
        expect(quiet.ids.filter((id) => id !== 'repair-feed')).toEqual([])
        cursor = quiet.cursor
        expect((await p.load(h.id)).repaired).toBe(true)
        expect(await drain(p, cursor)).toMatchObject({ ids: ['repair-feed'], rescan: false })
        const e = header('empty-feed')
        cursor = (await p.changes()).cursor
        await p.append(target(e), [])
        expect((await drain(p, cursor)).ids).toEqual(['empty-feed'])
      })

      it('follows writes of another instance over the same storage, and across a reopen', async () => {
        const harness = await fresh()
        const reader = await fresh({ root: harness.root })
        const { cursor } = await reader.persistence.changes()
        await harness.persistence.append(target(header('x')), events(0, 2))
        const seen = await drain(reader.persistence, cursor)
        expect(seen).toMatchObject({ ids: ['x'], rescan: false })
        const p = await harness.reopen()
        await p.append(target(header('x')), events(2, 1))
        await p.append(target(header('y')), events(0, 1))
        expect(await drain(reader.persistence, seen.cursor)).toMatchObject({ ids: ['x', 'y'], rescan: false })
        expect(await drain(p, seen.cursor)).toMatchObject({ ids: ['x', 'y'], rescan: false })
      })

      it('a malformed or foreign cursor means one rescan, never an error or a wrong answer', async () => {
        const { persistence: p } = await fresh()
        const other = await fresh()
        await p.append(target(header('m')), events(0, 1))
        const before = snapshot(p).rescans
        for (const bad of ['', 'garbage', (await other.persistence.changes()).cursor]) {
          const result = await p.changes(bad)
          expect(result.rescan).toBe(true)
          expect(await drain(p, result.cursor)).toMatchObject({ ids: [], rescan: false })
        }
        if (before !== undefined) expect(snapshot(p).rescans! - before).toBe(3)
      })

      it('an unchanged storage answers from the feed alone: no header or body read', async () => {
        const harness = await fresh()
        for (let i = 0; i < 5; i++) await harness.persistence.append(target(header(`quiet-${i}`)), events(0, 2))
        const { cursor } = await harness.persistence.changes()
        const p = await harness.reopen()
        const start = snapshot(p)
        expect(await drain(p, cursor)).toMatchObject({ ids: [], rescan: false })
        const end = snapshot(p)
        expect(end.headerReads - start.headerReads).toBe(0)
        expect(end.bodyReads - start.bodyReads).toBe(0)
        if (start.logOpens !== undefined) expect(end.logOpens).toBe(start.logOpens)
      })

      it('rejects with CANCELLED after its signal aborted', async () => {
        const { persistence: p } = await fresh()
        await expectCode(p.changes(undefined, aborted()), 'CANCELLED')
      })
    })

    describe('suffix reads', () => {
      it('inspectFrom returns exactly the committed events from an offset, with the header and revision', async () => {
        const { persistence: p } = await fresh()
        const h = header('suffix')
        await p.append(target(h), events(0, 3))
        const { revision } = await p.append(target(h), events(3, 4))
        const whole = await p.inspect(h.id)
        for (const from of [0, 2, 3, 5, 7]) {
          const suffix = await p.inspectFrom(h.id, SessionLogOffset(from))
          expect(suffix).toMatchObject({ header: h, inheritedEventCount: 0, revision, from })
          expect(plain(suffix.events)).toEqual(plain(whole.events.slice(from)))
          expect(isDeepFrozen(suffix.events)).toBe(true)
        }
        await expectCode(p.inspectFrom(SessionId('absent'), SessionLogOffset(0)), 'SESSION_PERSISTENCE_NOT_FOUND')
        await expectCode(p.inspectFrom(h.id, SessionLogOffset(1), aborted()), 'CANCELLED')
      })

      it("a seeded session's own suffix from its cut", async () => {
        const { persistence: p } = await fresh()
        const h = header('seeded-suffix', { isSeeded: true, parentSession: 'p' })
        await p.append(target(h, 3), events(0, 5))
        await p.append(target(h, 3), events(5, 2))
        const suffix = await p.inspectFrom(h.id, SessionLogOffset(3))
        expect(suffix.inheritedEventCount).toBe(3)
        expect(suffix.events.map((e) => e.seq)).toEqual([3, 4, 5, 6])
      })
    })

    describe('forks (forkSource)', () => {
      it('a fork whose first append names its source reads the inherited prefix and its own events, across a reopen', async () => {
        const harness = await fresh()
        const source = header('fork-source')
        await harness.persistence.append(target(source), events(0, 4))
        await harness.persistence.append(target(source), events(4, 3))
        const seed = (await harness.persistence.inspect(source.id)).events.slice(0, 5)
        const child = header('fork-child', { isSeeded: true, parentSession: 'fork-source' })
        const forkTarget: AppendTarget = { ...target(child, 5), forkSource: source.id }
        await harness.persistence.append(forkTarget, [...seed, ...events(5, 2, 'own')])
        await harness.persistence.append(forkTarget, events(7, 1, 'more'))
        // The source goes on independently.
        await harness.persistence.append(target(source), events(7, 2, 'src'))
        for (const reopen of [false, true]) {
          const p = reopen ? await harness.reopen() : harness.persistence
          const observation = await p.inspect(child.id)
          expect(observation.inheritedEventCount).toBe(5)
          expect(plain(observation.events.slice(0, 5))).toEqual(plain(seed))
          expect(observation.events.map((e) => e.data)).toEqual([
            ...seed.map((e) => e.data),
            { text: 'own5' },
            { turn: 1, index: 1, delta: 'own6' },
            { text: 'more7' },
          ])
          expect((await p.inspectFrom(child.id, SessionLogOffset(5))).events.map((e) => e.seq)).toEqual([5, 6, 7])
          const record = (await p.list()).find((r) => r.header.id === child.id)
          expect(record).toMatchObject({ header: child, inheritedEventCount: 5, revision: observation.revision })
        }
      })

      it('a fork of a fork resolves the whole chain', async () => {
        const { persistence: p } = await fresh()
        const a = header('chain-a')
        await p.append(target(a), events(0, 3))
        const b = header('chain-b', { isSeeded: true, parentSession: 'chain-a' })
        const seedB = (await p.inspect(a.id)).events
        await p.append({ ...target(b, 3), forkSource: a.id }, [...seedB, ...events(3, 2, 'b')])
        const c = header('chain-c', { isSeeded: true, parentSession: 'chain-b' })
        const seedC = (await p.inspect(b.id)).events
        await p.append({ ...target(c, 5), forkSource: b.id }, [...seedC, ...events(5, 1, 'c')])
        const observation = await p.inspect(c.id)
        expect(plain(observation.events)).toEqual(plain([...seedC, ...events(5, 1, 'c')]))
        // A fork cut inside the source's inherited prefix.
        const d = header('chain-d', { isSeeded: true, parentSession: 'chain-c' })
        await p.append({ ...target(d, 2), forkSource: c.id }, [...seedC.slice(0, 2), ...events(2, 1, 'd')])
        expect(plain((await p.inspect(d.id)).events)).toEqual(plain([...seedC.slice(0, 2), ...events(2, 1, 'd')]))
      })

      it('a referenced source can be deleted once its dependants are materialized; they keep every event', async () => {
        const { persistence: p } = await fresh()
        const s = header('ref-source')
        await p.append(target(s), events(0, 3))
        const seed = (await p.inspect(s.id)).events
        const child = header('ref-child', { isSeeded: true, parentSession: 'ref-source' })
        await p.append({ ...target(child, 3), forkSource: s.id }, [...seed, ...events(3, 1, 'own')])
        const refused = await p.delete(s.id).then(
          () => 'deleted',
          (error: { code?: string }) => error.code,
        )
        // A backend that stores forks as copies deletes; one that stores references refuses.
        expect(['deleted', 'SESSION_PERSISTENCE_REFERENCED']).toContain(refused)
        if (refused !== 'deleted') {
          expect(await p.stat(s.id)).toBeDefined()
          expect(await p.delete(s.id, { materializeDependants: true })).toBe(true)
        }
        expect(await p.stat(s.id)).toBeUndefined()
        const observation = await p.inspect(child.id)
        expect(plain(observation.events)).toEqual(plain([...seed, ...events(3, 1, 'own')]))
        expect(observation.inheritedEventCount).toBe(3)
        await p.append({ ...target(child, 3) }, events(4, 1, 'after'))
        expect((await p.inspect(child.id)).events).toHaveLength(5)
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
  })
}
