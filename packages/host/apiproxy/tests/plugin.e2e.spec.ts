import { Context } from '@dsh/context'
import { sessionListPage } from '@dsh/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiproxyPlugin, listenApi } from '../src/index.js'
import { SseReader } from './support/sse.js'
import { type Stack, startStack, TOKEN, turn } from './support/stack.js'

// The HTTP API as a plugin: composed on a context like every other service.

let stack: Stack

beforeAll(async () => {
  stack = await startStack()
  turn(stack.sessions.create({ id: 'composed' }), 'hello')
})

afterAll(async () => {
  await stack.close()
})

describe('apiproxyPlugin', () => {
  it('fails at activation, naming itself and the service, when a required service is missing', async () => {
    const ctx = new Context()
    ctx.provide('sessionQuery', stack.ctx.require('sessionQuery'))
    await expect(ctx.activate(apiproxyPlugin({ token: TOKEN }))).rejects.toMatchObject({
      code: 'CONTEXT_SERVICE_UNAVAILABLE',
      message: expect.stringContaining("plugin 'apiproxy' requires service 'subagents'"),
    })
    expect(ctx.get('httpApi')).toBeUndefined()
    ctx.provide('subagents', stack.subagents)
    await expect(ctx.activate(apiproxyPlugin({ token: 'short' }))).rejects.toMatchObject({ code: 'API_INVALID_OPTIONS' })
    await ctx.dispose()
  })

  it('provides httpApi, which listenApi serves; disposing the context ends its streams', async () => {
    const ctx = new Context()
    for (const name of ['sessions', 'sessionQuery', 'subagents', 'sessionProjections'] as const)
      ctx.provide(name, stack.ctx.require(name) as never)
    await ctx.activate(apiproxyPlugin({ token: TOKEN }))
    const server = await listenApi(ctx.require('httpApi'))
    try {
      expect(server.pageUrl).toBe(`${server.url}/?token=${TOKEN}`)
      const response = await fetch(`${server.url}/api/sessions`, { headers: { Authorization: `Bearer ${TOKEN}` } })
      expect(sessionListPage.parse(await response.json()).sessions.map((r) => r.header.id)).toContain('composed')
      const stream = await SseReader.open(`${server.url}/api/sessions/composed/stream?token=${TOKEN}`)
      await stream.next((e) => e.event === 'ready')
      await ctx.dispose()
      await stream.ended()
    } finally {
      await server.close()
    }
  })
})
