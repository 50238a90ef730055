import { describe, expect, it } from 'vitest'
import { createSessionContextService } from '../src/index.js'
import { coldReadCases } from './cold-cases.js'
import { place, play, transcript } from './helpers.js'
import { BLOCK_TURN, OLD_TURN, OLD_TURN_TRANSCRIPT } from './scripts.js'

coldReadCases('memory')
coldReadCases('jsonl')

describe('contextOf without persistence', () => {
  it('answers live sessions and refuses a cold one with SESSION_CONTEXT_NO_PERSISTENCE', async () => {
    const { Context } = await import('@dsh/context')
    const { sessionStorePlugin } = await import('@dsh/session')
    const { sessionProjectionsPlugin } = await import('@dsh/session-projection')
    const { sessionContextPlugin } = await import('../src/index.js')
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await ctx.activate(sessionContextPlugin())
    const session = ctx.require('sessions').create()
    play(session, OLD_TURN)
    const service = ctx.require('sessionContext')
    expect(transcript(await service.contextOf(session.id))).toEqual(OLD_TURN_TRANSCRIPT)
    await expect(service.contextOf('elsewhere')).rejects.toMatchObject({ code: 'SESSION_CONTEXT_NO_PERSISTENCE' })
    await ctx.dispose()
  })
})

describe('contextOf when the checkpoint does not match the log', () => {
  it('a checkpoint that claims more events than the log holds (a log older than its cache) is dropped and the log folded from its start', async () => {
    // Two places whose first sessions have the same header; the second reads the first's cache.
    const ahead = place('memory')
    const writer = await ahead.open()
    const long = writer.ctx.require('sessions').create()
    play(long, [...OLD_TURN, ...BLOCK_TURN])
    await writer.ctx.require('sessions').dispose(long.id)

    const behind = place('memory')
    const shortWriter = await behind.open({ cachePath: `${behind.cachePath}.unused` })
    const short = shortWriter.ctx.require('sessions').create()
    expect(short.header).toEqual(long.header)
    play(short, OLD_TURN)
    await shortWriter.ctx.require('sessions').flush(short)

    const reader = await behind.open({ cachePath: ahead.cachePath })
    const service = reader.ctx.require('sessionContext')
    const context = await service.contextOf(short.id)
    expect(transcript(context)).toEqual(OLD_TURN_TRANSCRIPT)
    expect(service.metrics).toMatchObject({ checkpointHits: 1, refolds: 1, rangeReads: 2, eventsRead: OLD_TURN.length })
    expect(reader.reads.ranges.slice(1)).toEqual([
      { range: { from: OLD_TURN.length + BLOCK_TURN.length }, events: 0 },
      { range: { from: 0 }, events: OLD_TURN.length },
    ])
  })
})

describe('contextOf memo', () => {
  it('keeps at most `memo` cold sessions: the least recently used is folded again', async () => {
    const storage = place('memory')
    const writer = await storage.open()
    const sessions = writer.ctx.require('sessions')
    const [a, b] = [sessions.create(), sessions.create()]
    play(a, OLD_TURN.slice(0, 5))
    play(b, OLD_TURN.slice(0, 3))
    await sessions.flush(a)
    await sessions.flush(b)
    const reader = await storage.open()
    const service = createSessionContextService({
      projections: reader.ctx.require('sessionProjections'),
      persistence: () => reader.ctx.require('sessionPersistence'),
      memo: 1,
    })
    await service.contextOf(a.id)
    await service.contextOf(a.id)
    expect(service.metrics).toMatchObject({ refolds: 1, memoHits: 1, eventsRead: 5 })
    await service.contextOf(b.id)
    await service.contextOf(a.id)
    expect(service.metrics).toMatchObject({ refolds: 3, memoHits: 1, eventsRead: 5 + 3 + 5 })
  })
})
