import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { sessionProjectionsPlugin } from '../src/index.js'
import { countUnit } from './units.js'

describe('sessionProjectionsPlugin', () => {
  it('fails at activation without the sessions store', async () => {
    const ctx = new Context()
    await expect(ctx.activate(sessionProjectionsPlugin())).rejects.toMatchObject({
      code: 'CONTEXT_SERVICE_UNAVAILABLE',
      details: { service: 'sessions' },
    })
  })

  it('provides sessionProjections following the store, and stops following it on dispose', async () => {
    const ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    const projections = ctx.require('sessionProjections')
    projections.register(countUnit)
    const session = ctx.require('sessions').create()
    session.append('user/message', { text: 'a' })
    expect(projections.snapshot(session)).toEqual({ count: 1 })
    expect(projections.metrics.applies).toBe(1)
    await ctx.dispose()
    expect(ctx.get('sessionProjections')).toBeUndefined()
  })
})
