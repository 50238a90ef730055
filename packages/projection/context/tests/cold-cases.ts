import { SessionId } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { contextView, createSessionContextService, SessionContextError, sessionContextUnit } from '../src/index.js'
import { type PlaceName, type PostgresPlace, place, play, transcript } from './helpers.js'
import { BLOCK_TURN, compaction, OLD_TURN } from './scripts.js'

/** The cold-read cases on one backend (`postgres` gives each case a fresh database). */
export function coldReadCases(name: PlaceName, database?: () => Promise<PostgresPlace>): void {
  describe(`contextOf on ${name}`, () => {
    const storageOf = async () => place(name, await database?.())
    it('after a cold restart reads one checkpoint and then only the events after its cut, with one ranged read', async () => {
      const storage = await storageOf()
      const first = await storage.open()
      const sessions = first.ctx.require('sessions')
      const session = sessions.create()
      play(session, OLD_TURN)
      // turn/end is a mandatory checkpoint point.
      await first.ctx.require('sessionProjectionCache').idle()
      play(session, BLOCK_TURN.slice(0, 5))
      await sessions.flush(session)
      const live = await first.ctx.require('sessionContext').contextOf(session)
      expect(first.ctx.require('sessionContext').metrics.live).toBe(1)

      // A second process: the first never went cold (as after a crash), so its newest checkpoint is the turn's end.
      const second = await storage.open()
      const service = second.ctx.require('sessionContext')
      const cold = await service.contextOf(session.id)
      expect(cold).toEqual(live)
      expect(service.metrics).toMatchObject({
        checkpointHits: 1,
        checkpointMisses: 0,
        headerReads: 1,
        rangeReads: 1,
        eventsRead: 5,
        refolds: 0,
      })
      expect(second.reads.ranges).toEqual([
        { range: { limit: 0 }, events: 0 },
        { range: { from: OLD_TURN.length }, events: 5 },
      ])
      expect(second.reads.whole).toBe(0)
      expect(second.ctx.require('sessionProjectionCache').metrics.hits).toBe(1)

      // More events: the service continues from its own last answer, reading only the new ones.
      play(session, BLOCK_TURN.slice(5))
      await sessions.flush(session)
      await first.ctx.require('sessionProjectionCache').idle()
      const again = await service.contextOf(session.id)
      expect(again).toEqual(await first.ctx.require('sessionContext').contextOf(session))
      expect(service.metrics).toMatchObject({ memoHits: 1, rangeReads: 2, eventsRead: BLOCK_TURN.length, refolds: 0 })

      // A third process given the session's record (as a listing has it) reads no header, and the checkpoint at the new turn end covers everything.
      const third = await storage.open()
      const record = { header: session.header, inheritedEventCount: session.inheritedEventCount }
      expect(await third.ctx.require('sessionContext').contextOf(record)).toEqual(again)
      expect(third.reads.ranges).toEqual([{ range: { from: OLD_TURN.length + BLOCK_TURN.length }, events: 0 }])
    })

    it('without a checkpoint folds the whole log from one ranged read; the answer equals a detached fold', async () => {
      const storage = await storageOf()
      const first = await storage.open()
      const sessions = first.ctx.require('sessions')
      const session = sessions.create()
      play(session, OLD_TURN.slice(0, 9))
      await sessions.flush(session)
      const second = await storage.open()
      const service = second.ctx.require('sessionContext')
      const cold = await service.contextOf(session.id)
      expect(service.metrics).toMatchObject({ checkpointHits: 0, checkpointMisses: 1, rangeReads: 1, eventsRead: 9, refolds: 1 })
      const folded = second.ctx
        .require('sessionProjections')
        .fold(session.events, { inheritedEventCount: session.inheritedEventCount }, [sessionContextUnit.key]).sessionContext
      expect(folded && contextView(folded)).toEqual(cold)
    })

    it('a fork after a compaction inherits the compacted context, live and cold', async () => {
      const storage = await storageOf()
      const first = await storage.open()
      const sessions = first.ctx.require('sessions')
      const parent = sessions.create()
      play(parent, [...OLD_TURN, ...compaction('k1', 0, 12, 'S1')])
      const child = sessions.fork(parent)
      play(child, [
        { type: 'turn/start', data: { turn: 2 } },
        { type: 'user/message', data: { text: 'child' } },
        { type: 'turn/end', data: { turn: 2, reason: 'completed' } },
      ])
      const live = await first.ctx.require('sessionContext').contextOf(child)
      expect(transcript(live)).toEqual(['user: S1', 'user: child'])
      await sessions.dispose(child.id)
      await sessions.dispose(parent.id)

      const second = await storage.open()
      const service = second.ctx.require('sessionContext')
      expect(await service.contextOf(child.id)).toEqual(live)
      // Going cold wrote the checkpoint at the log's end: nothing after it to read.
      expect(service.metrics).toMatchObject({ checkpointHits: 1, eventsRead: 0, refolds: 0 })
      // The parent's context is its own, uncompacted up to the summary.
      expect(transcript(await service.contextOf(parent.id))).toEqual(['user: S1'])
      const whole = await second.ctx.require('sessionPersistence').inspect(SessionId(child.id))
      let state = sessionContextUnit.init()
      for (const event of whole.events) state = sessionContextUnit.apply(state, event)
      expect(contextView(state)).toEqual(live)
      // Without a cache the fork is folded from its first event: one ranged read through the fork to its source's prefix.
      const uncached = createSessionContextService({
        projections: second.ctx.require('sessionProjections'),
        persistence: () => second.ctx.require('sessionPersistence'),
      })
      const before = second.reads.ranges.length
      expect(await uncached.contextOf({ header: child.header, inheritedEventCount: child.inheritedEventCount })).toEqual(live)
      expect(uncached.metrics).toMatchObject({ refolds: 1, rangeReads: 1, eventsRead: child.seq, headerReads: 0 })
      expect(second.reads.ranges.slice(before)).toEqual([{ range: { from: 0 }, events: child.seq }])
    })

    it('a cold session without persistence, and a target that is not one, are typed errors', async () => {
      const storage = await storageOf()
      const process = await storage.open()
      const service = process.ctx.require('sessionContext')
      await expect(service.contextOf(42 as never)).rejects.toMatchObject({ code: 'SESSION_CONTEXT_INVALID_TARGET' })
      await expect(service.contextOf('')).rejects.toBeInstanceOf(SessionContextError)
    })
  })
}
