import { describe, expect, it } from 'vitest'
import { coldReadCases } from './cold-cases.js'
import { play, transcript } from './helpers.js'
import { OLD_TURN, OLD_TURN_TRANSCRIPT } from './scripts.js'

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
