import { describe, expect, it } from 'vitest'
import type { SessionPersistence } from '../types.js'
import { aborted, event, events, expectCode, type FreshHarness, header, snapshot, target } from './fixtures.js'

/** `changes`: the cursor protocol, exactness across instances, and the cost of an unchanged storage. */
export function describeChangeFeed(fresh: FreshHarness): void {
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
      // A backend that says why says so precisely (the reason is optional).
      if (first.rescanReason !== undefined) expect(first.rescanReason).toBe('no-cursor')
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
      // The empty materialization is reported. A feed whose cursor is a snapshot horizon (PostgreSQL's
      // xmin, held back by any transaction still open on the server) may report the repair again:
      // over-reporting is allowed, so only an id of neither session would be wrong.
      const materialized = (await drain(p, cursor)).ids
      expect(materialized).toContain('empty-feed')
      expect(materialized.filter((id) => id !== 'empty-feed' && id !== 'repair-feed')).toEqual([])
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
        // Not the typed resync: nothing was compacted here.
        if (result.rescanReason !== undefined) expect(['unknown-cursor', 'feed-lost']).toContain(result.rescanReason)
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

    it('a bounded feed: a follower one pruning behind is answered exactly; one behind the horizon gets the typed resync, one counted rescan, then every change', async () => {
      const harness = await fresh()
      const p = harness.persistence
      await p.append(target(header('a')), events(0, 1))
      await p.append(target(header('b')), events(0, 1))
      const early = (await p.changes()).cursor
      await p.append(target(header('a')), events(1, 1))
      await p.append(target(header('gone')), events(0, 1))
      await harness.pruneFeed?.()
      // Between the horizon and the base: the summary answers exactly.
      const between = await drain(p, early)
      expect(between).toMatchObject({ ids: ['a', 'gone'], rescan: false })
      await p.append(target(header('b')), events(1, 1))
      expect(await p.delete(header('gone').id)).toBe(true)
      await p.append(target(header('c')), events(0, 1))
      await harness.pruneFeed?.()
      // A follower that read once between the prunings is answered exactly.
      expect(await drain(p, between.cursor)).toMatchObject({ ids: ['b', 'c', 'gone'], rescan: false })
      const before = snapshot(p)
      const behind = await p.changes(early)
      if (harness.pruneFeed === undefined) {
        // A feed that is never pruned answers any cursor of its own exactly.
        expect({ ids: [...behind.ids].sort(), rescan: behind.rescan }).toEqual({ ids: ['a', 'b', 'c', 'gone'], rescan: false })
        return
      }
      expect(behind).toMatchObject({ ids: [], rescan: true, rescanReason: 'behind-horizon' })
      if (before.rescans !== undefined) expect(snapshot(p).rescans! - before.rescans).toBe(1)
      if (before.horizonRescans !== undefined) expect(snapshot(p).horizonRescans! - before.horizonRescans).toBe(1)
      // The one rescan, then it follows from the resync's cursor exactly.
      expect((await p.list()).map((r) => r.header.id as string).sort()).toEqual(['a', 'b', 'c'])
      await p.append(target(header('c')), events(1, 1))
      await p.append(target(header('d')), events(0, 1))
      expect(await drain(p, behind.cursor)).toMatchObject({ ids: ['c', 'd'], rescan: false })
      if (before.rescans !== undefined) expect(snapshot(p).rescans! - before.rescans).toBe(1)
    })

    it('rejects with CANCELLED after its signal aborted', async () => {
      const { persistence: p } = await fresh()
      await expectCode(p.changes(undefined, aborted()), 'CANCELLED')
    })
  })
}
