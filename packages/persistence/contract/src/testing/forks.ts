import { SessionLogOffset } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import type { AppendTarget } from '../types.js'
import { events, type FreshHarness, header, plain, target } from './fixtures.js'

/** Forks appended with `forkSource`: inherited prefixes, chains, and deleting a referenced source. */
export function describeForks(fresh: FreshHarness): void {
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
}
