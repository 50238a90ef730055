import { describe, expect, it } from 'vitest'
import { event, events, expectCode, type FreshHarness, header, plain, T0, target } from './fixtures.js'

/** Appends: materialization, the expected-offset and lifecycle checks, revisions, explicit deletion. */
export function describeWrites(fresh: FreshHarness): void {
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
}
