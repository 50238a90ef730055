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

    it('every level of a chain of 70 forks reads whole, and its attachments, across a reopen; a fork inside its oldest prefix too', async () => {
      const harness = await fresh()
      const picture = new TextEncoder().encode('the bytes of a picture the first level holds')
      const ref = await harness.persistence.putAttachment?.(header('deep-0').id, picture, { mediaType: 'image/png' })
      // Level 0 holds event 0; level k forks level k - 1 after event k - 1 and adds event k.
      const all = events(0, 70, 'chain')
      await harness.persistence.append(target(header('deep-0')), all.slice(0, 1))
      for (let level = 1; level < 70; level++) {
        const fork = header(`deep-${level}`, { isSeeded: true, parentSession: `deep-${level - 1}` })
        await harness.persistence.append({ ...target(fork, level), forkSource: header(`deep-${level - 1}`).id }, all.slice(0, level + 1))
      }
      const p = await harness.reopen()
      for (const level of [1, 64, 65, 69]) {
        const id = header(`deep-${level}`).id
        expect(plain((await p.inspect(id)).events)).toEqual(plain(all.slice(0, level + 1)))
        if (ref !== undefined) expect(Buffer.from((await p.readAttachment?.(id, ref.digest)) ?? [])).toEqual(Buffer.from(picture))
      }
      const early = header('deep-early', { isSeeded: true, parentSession: 'deep-69' })
      await p.append({ ...target(early, 1), forkSource: header('deep-69').id }, [...all.slice(0, 1), ...events(1, 1, 'early')])
      expect(plain((await p.inspect(early.id)).events)).toEqual(plain([...all.slice(0, 1), ...events(1, 1, 'early')]))
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
