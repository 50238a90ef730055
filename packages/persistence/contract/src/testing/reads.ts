import { SessionId, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { aborted, event, events, expectCode, type FreshHarness, header, isDeepFrozen, plain, snapshot, target } from './fixtures.js'

/** Reads: list, inspect, load (crash repair), suffix reads, metrics and cancellation. */
export function describeReads(fresh: FreshHarness): void {
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

    it('applies a registered repair rule after the built-in one, durably; a second load is a no-op', async () => {
      const harness = await fresh()
      const p = harness.persistence
      expect(p.repairs).toBeDefined()
      // A rule for a vocabulary persistence does not know: close a dangling `x/open`.
      const rule = (log: readonly StoredSessionEvent[], time: number): StoredSessionEvent[] => {
        const opened = log.some((e) => e.type === 'x/open')
        const closed = log.some((e) => e.type === 'x/close')
        if (!opened || closed) return []
        return [Object.freeze({ type: 'x/close', seq: SessionSeq(log.length), time, data: Object.freeze({ reason: 'interrupted' }) })]
      }
      p.repairs!.register(rule)
      const h = header('ruled')
      await p.append(target(h), [event(0, 'turn/start', { turn: 1 }), event(1, 'x/open', { n: 1 })])
      const loaded = await p.load(h.id)
      expect(loaded.repaired).toBe(true)
      expect(loaded.events.slice(2).map((e) => [e.type, e.seq, e.data])).toEqual([
        ['turn/end', 2, { turn: 1, reason: 'interrupted' }],
        ['x/close', 3, { reason: 'interrupted' }],
      ])
      expect((await p.load(h.id)).repaired).toBe(false)
      const reopened = await harness.reopen()
      expect(plain((await reopened.inspect(h.id)).events)).toEqual(plain(loaded.events))
      // An instance without the rule leaves a dangling `x/open` as it is.
      const other = header('unruled')
      await reopened.append(target(other), [event(0, 'x/open', { n: 1 })])
      expect((await reopened.load(other.id)).repaired).toBe(false)
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
}
