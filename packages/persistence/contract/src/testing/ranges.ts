import { SessionId, SessionLogOffset } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import type { AppendTarget, SessionPersistence, SessionRange } from '../types.js'
import { aborted, events, expectCode, type FreshHarness, header, isDeepFrozen, plain, snapshot, target } from './fixtures.js'

/** Appends `sizes.length` batches of those sizes to a new session `id`; returns its last revision. */
async function batches(p: SessionPersistence, id: string, sizes: readonly number[]): Promise<string> {
  const h = header(id)
  let seq = 0
  let revision = ''
  for (const size of sizes) {
    revision = (await p.append(target(h), events(seq, size, id))).revision
    seq += size
  }
  return revision
}

/** Seqs of a range read. */
async function seqsOf(p: SessionPersistence, id: string, range: SessionRange): Promise<number[]> {
  return (await p.inspectRange(SessionId(id), range)).events.map((e) => e.seq)
}

function span(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i)
}

/** Ranged reads (`inspectRange`): tails, pages and windows, forks, damage, cancellation and the bytes a tail costs. */
export function describeRanges(fresh: FreshHarness): void {
  describe('ranged reads (inspectRange)', () => {
    it('a tail within one batch: the last events, the total, the header and the revision', async () => {
      const { persistence: p } = await fresh()
      const revision = await batches(p, 'tail-one', [5, 10])
      const whole = await p.inspect(SessionId('tail-one'))
      const tail = await p.inspectRange(SessionId('tail-one'), { limit: 3 })
      expect(tail).toMatchObject({ header: whole.header, inheritedEventCount: 0, revision, from: 12, total: 15 })
      expect(plain(tail.events)).toEqual(plain(whole.events.slice(12)))
      expect(isDeepFrozen(tail.events)).toBe(true)
      expect(Object.isFrozen(tail)).toBe(true)
    })

    it('a tail across batches, pages before an offset and windows', async () => {
      const { persistence: p } = await fresh()
      await batches(p, 'tail-many', [4, 4, 4, 4])
      const whole = await p.inspect(SessionId('tail-many'))
      const tail = await p.inspectRange(SessionId('tail-many'), { limit: 9 })
      expect(tail.from).toBe(7)
      expect(plain(tail.events)).toEqual(plain(whole.events.slice(7)))
      expect(await seqsOf(p, 'tail-many', { to: SessionLogOffset(6), limit: 3 })).toEqual([3, 4, 5])
      expect(await seqsOf(p, 'tail-many', { from: SessionLogOffset(2), to: SessionLogOffset(11) })).toEqual(span(2, 11))
      expect(await seqsOf(p, 'tail-many', { from: SessionLogOffset(5), to: SessionLogOffset(9), limit: 2 })).toEqual([7, 8])
      expect(await seqsOf(p, 'tail-many', { from: SessionLogOffset(14) })).toEqual([14, 15])
      expect(await seqsOf(p, 'tail-many', {})).toEqual(span(0, 16))
      // Bounds past the end are clipped to it; an empty range starts where it ends.
      expect(await seqsOf(p, 'tail-many', { to: SessionLogOffset(1000), limit: 2 })).toEqual([14, 15])
      const past = await p.inspectRange(SessionId('tail-many'), { from: SessionLogOffset(40) })
      expect({ from: past.from, events: past.events.length, total: past.total }).toEqual({ from: 16, events: 0, total: 16 })
      const inverted = await p.inspectRange(SessionId('tail-many'), { from: SessionLogOffset(9), to: SessionLogOffset(3) })
      expect({ from: inverted.from, events: inverted.events.length }).toEqual({ from: 3, events: 0 })
    })

    it('a tail larger than the log is the whole log; a limit of 0 is no event', async () => {
      const { persistence: p } = await fresh()
      const revision = await batches(p, 'tail-all', [3, 2])
      const whole = await p.inspect(SessionId('tail-all'))
      const all = await p.inspectRange(SessionId('tail-all'), { limit: 1000 })
      expect({ from: all.from, total: all.total, revision: all.revision }).toEqual({ from: 0, total: 5, revision })
      expect(plain(all.events)).toEqual(plain(whole.events))
      const none = await p.inspectRange(SessionId('tail-all'), { limit: 0 })
      expect({ from: none.from, events: none.events.length, total: none.total, revision: none.revision }).toEqual({
        from: 5,
        events: 0,
        total: 5,
        revision,
      })
      expect(none.header).toEqual(whole.header)
    })

    it('a session materialized without events answers an empty range', async () => {
      const { persistence: p } = await fresh()
      const h = header('range-empty')
      const { revision } = await p.append(target(h), [])
      const read = await p.inspectRange(h.id, { limit: 10 })
      expect({ from: read.from, events: read.events.length, total: read.total, revision: read.revision }).toEqual({
        from: 0,
        events: 0,
        total: 0,
        revision,
      })
    })

    it("a tail into a fork's inherited prefix reads the prefix's events, never the source's later ones", async () => {
      const harness = await fresh()
      const p = harness.persistence
      const source = header('range-source')
      await batches(p, 'range-source', [4, 4, 4])
      const seed = (await p.inspect(source.id)).events.slice(0, 10)
      const child = header('range-child', { isSeeded: true, parentSession: 'range-source' })
      const forkTarget: AppendTarget = { ...target(child, 10), forkSource: source.id }
      await p.append(forkTarget, [...seed, ...events(10, 2, 'own')])
      await p.append(forkTarget, events(12, 1, 'more'))
      // The source goes on after the cut; the child's events 10 and 11 are its own.
      await p.append(target(source), events(12, 3, 'later'))
      for (const reopen of [false, true]) {
        const q = reopen ? await harness.reopen() : p
        const whole = await q.inspect(child.id)
        const tail = await q.inspectRange(child.id, { limit: 5 })
        expect({ from: tail.from, total: tail.total, inheritedEventCount: tail.inheritedEventCount }).toEqual({
          from: 8,
          total: 13,
          inheritedEventCount: 10,
        })
        expect(tail.revision).toBe(whole.revision)
        expect(plain(tail.events)).toEqual(plain(whole.events.slice(8)))
        for (const range of [{ to: 6, limit: 3 }, { from: 9, to: 11 }, { limit: 13 }, { from: 2, to: 10 }]) {
          const read = await q.inspectRange(child.id, range as SessionRange)
          expect(plain(read.events)).toEqual(plain(whole.events.slice(read.from, read.from + read.events.length)))
          expect(read.events.map((e) => e.seq)).toEqual(span(read.from, Math.min(range.to ?? 13, 13)))
        }
      }
    })

    it('a range through a chain of forks', async () => {
      const { persistence: p } = await fresh()
      const a = header('range-chain-a')
      await batches(p, 'range-chain-a', [2, 2])
      const b = header('range-chain-b', { isSeeded: true, parentSession: a.id })
      await p.append({ ...target(b, 3), forkSource: a.id }, [...(await p.inspect(a.id)).events.slice(0, 3), ...events(3, 3, 'b')])
      const c = header('range-chain-c', { isSeeded: true, parentSession: b.id })
      await p.append({ ...target(c, 5), forkSource: b.id }, [...(await p.inspect(b.id)).events.slice(0, 5), ...events(5, 2, 'c')])
      const whole = await p.inspect(c.id)
      for (const range of [{ limit: 6 }, { from: 1, to: 4 }, { to: 2, limit: 1 }, {}] as SessionRange[]) {
        const read = await p.inspectRange(c.id, range)
        expect(plain(read.events)).toEqual(plain(whole.events.slice(read.from, read.from + read.events.length)))
      }
      expect((await p.inspectRange(c.id, { limit: 6 })).from).toBe(1)
    })

    it('an append torn by a crash is ignored', async () => {
      const harness = await fresh()
      const p = harness.persistence
      await batches(p, 'range-torn', [3, 3])
      const whole = await p.inspect(SessionId('range-torn'))
      const reader = await harness.reopen()
      await harness.tearTail('range-torn')
      const tail = await reader.inspectRange(SessionId('range-torn'), { limit: 4 })
      expect({ from: tail.from, total: tail.total }).toEqual({ from: 2, total: 6 })
      expect(plain(tail.events)).toEqual(plain(whole.events.slice(2)))
      expect(await seqsOf(reader, 'range-torn', { from: SessionLogOffset(4), to: SessionLogOffset(100) })).toEqual([4, 5])
    })

    it('a damaged batch in the range is SESSION_PERSISTENCE_CORRUPT; one outside it is not read', async () => {
      const harness = await fresh()
      await batches(harness.persistence, 'range-damaged', [4, 4, 4])
      const p = await harness.reopen()
      await harness.damageBatch('range-damaged', 5)
      const id = SessionId('range-damaged')
      expect(await seqsOf(p, 'range-damaged', { limit: 3 })).toEqual([9, 10, 11])
      await expectCode(p.inspectRange(id, { limit: 6 }), 'SESSION_PERSISTENCE_CORRUPT')
      await expectCode(p.inspectRange(id, { from: SessionLogOffset(5), to: SessionLogOffset(6) }), 'SESSION_PERSISTENCE_CORRUPT')
      await expectCode(p.inspectRange(id, {}), 'SESSION_PERSISTENCE_CORRUPT')
    })

    it('the last batch damaged fails a tail read', async () => {
      const harness = await fresh()
      await batches(harness.persistence, 'range-damaged-tail', [4, 4])
      const p = await harness.reopen()
      await harness.damageBatch('range-damaged-tail', 7)
      await expectCode(p.inspectRange(SessionId('range-damaged-tail'), { limit: 1 }), 'SESSION_PERSISTENCE_CORRUPT')
    })

    it('rejects a bad range before reading, an absent session, and an aborted signal', async () => {
      const { persistence: p } = await fresh()
      await batches(p, 'range-args', [600])
      const id = SessionId('range-args')
      for (const bad of [{ limit: -1 }, { from: 1.5 }, { to: '3' }, { limit: Number.NaN }, null, 7])
        await expectCode(p.inspectRange(id, bad as unknown as SessionRange), 'SESSION_PERSISTENCE_INVALID_RANGE')
      await expectCode(p.inspectRange(SessionId('absent'), { limit: 1 }), 'SESSION_PERSISTENCE_NOT_FOUND')
      await expectCode(p.inspectRange(id, { limit: 1 }, aborted()), 'CANCELLED')
      const controller = new AbortController()
      const pending = p.inspectRange(id, { limit: 500 }, controller.signal)
      controller.abort()
      await expectCode(pending, 'CANCELLED')
    })

    it('a tail of a long log reads a small part of what a whole read does', async () => {
      const harness = await fresh()
      await batches(
        harness.persistence,
        'range-bytes',
        Array.from({ length: 100 }, () => 40),
      )
      const p = await harness.reopen()
      const id = SessionId('range-bytes')
      const before = snapshot(p)
      const tail = await p.inspectRange(id, { limit: 5 })
      const afterTail = snapshot(p)
      await p.inspect(id)
      const afterWhole = snapshot(p)
      expect(tail.events.map((e) => e.seq)).toEqual(span(3995, 4000))
      const tailBytes = afterTail.bytesRead - before.bytesRead
      const wholeBytes = afterWhole.bytesRead - afterTail.bytesRead
      expect(tailBytes).toBeGreaterThan(0)
      expect(tailBytes * 10).toBeLessThan(wholeBytes)
    })
  })
}
