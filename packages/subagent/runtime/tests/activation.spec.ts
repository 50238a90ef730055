import { isDshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, DEFAULT_COLD_READ_CONCURRENCY, listChildren, listDescendants, subagentsPlugin } from '../src/index.js'
import { BACKENDS, openPlace, type Place } from './backends.js'
import { codeOf, hostsPerTest } from './helpers.js'

const places: Place[] = []
const hosts = hostsPerTest(async () => {
  for (const place of places.splice(0)) await place.close()
})

describe.each(BACKENDS)('a context without a query backend (%s)', (backend) => {
  it('activates subagentsPlugin, spawns, resumes and sends; every listing rejects with SUBAGENT_CONTROL_QUERY_UNAVAILABLE', async () => {
    const place = await openPlace(backend)
    places.push(place)
    const h = await place.open({ query: false })
    expect(h.ctx.get('sessionQuery')).toBeUndefined()
    const parent = h.sessions.create({ id: 'parent' })
    // Zero children: the listing still fails, before any read.
    expect(await codeOf(h.runtime.listChildren(parent.id))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
    expect(await codeOf(h.runtime.listDescendants(parent.id))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'start' })
    expect((await child.done).end).toBe('completed')
    // Cold now (persistence keeps it): a resume loads it, a send resumes it again.
    expect(h.sessions.get(child.id)).toBeUndefined()
    const resumed = await h.runtime.resume(child.id, { caller: parent, prompt: 'again' })
    expect((await resumed.done).end).toBe('completed')
    const sent = await h.runtime.send(child.id, { caller: parent, text: 'and once more' })
    expect(sent.status).toBe('started')
    if (sent.status === 'started') expect((await sent.handle.done).end).toBe('completed')
    const stored = await h.persistence!.inspect(child.id)
    expect(stored.events.filter((e) => e.type === 'subagent/start').map((e) => (e.data as { kind: string }).kind)).toEqual([
      'spawn',
      'resume',
      'resume',
    ])
    expect(await codeOf(h.runtime.listChildren(parent.id))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
    expect(await codeOf(h.runtime.explainDescendants(parent.id))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
  })
})

describe('subagentsPlugin activation', () => {
  it.each([['sessions'], ['sessionProjections']] as const)('fails at activation without %s, naming it', async (missing) => {
    const h = await hosts.open(missing === 'sessions' ? { sessions: false, subagents: false } : { projections: false, subagents: false })
    const error = await h.ctx.activate(subagentsPlugin({ driver: createScriptedDriver() })).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(isDshError(error, 'CONTEXT_SERVICE_UNAVAILABLE')).toBe(true)
    expect((error as Error).message).toContain(`'${missing}'`)
  })

  it('sees a query backend provided after activation: services are looked up per listing', async () => {
    const h = await hosts.open({ query: false })
    const parent = h.sessions.create()
    expect(await codeOf(h.runtime.listChildren(parent.id))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
    const { createSessionQuery } = await import('@dsh/session-query')
    h.ctx.provide('sessionQuery', createSessionQuery({ sessions: h.sessions, persistence: h.persistence }))
    await h.runtime.spawn(parent, { mode: 'one-shot', label: 'late', context: 'fresh' }).done
    expect((await h.runtime.listChildren(parent.id)).map((row) => row.kind === 'child' && row.label)).toEqual(['late'])
  })

  it('takes coldReadConcurrency from 1 to 64 (default 4) and refuses anything else at activation with SUBAGENT_INVALID_OPTIONS', async () => {
    const h = await hosts.open({ subagents: false })
    for (const bad of [0, 65, 2.5, -1, Number.NaN, Number.POSITIVE_INFINITY, '8' as unknown as number]) {
      const error = await h.ctx.activate(subagentsPlugin({ driver: createScriptedDriver(), coldReadConcurrency: bad })).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(isDshError(error, 'SUBAGENT_INVALID_OPTIONS')).toBe(true)
      expect((error as Error).message).toContain('coldReadConcurrency')
      expect(h.ctx.get('subagents')).toBeUndefined()
    }
    await h.ctx.activate(subagentsPlugin({ driver: createScriptedDriver(), coldReadConcurrency: 64 }))
    expect(h.ctx.require('subagents').coldReadConcurrency).toBe(64)
    const defaults = await hosts.open()
    expect(defaults.runtime.coldReadConcurrency).toBe(DEFAULT_COLD_READ_CONCURRENCY)
    expect(DEFAULT_COLD_READ_CONCURRENCY).toBe(4)
  })
})

describe('the listing error set', () => {
  it('passes the query corpus failure through unchanged (the same error object)', async () => {
    const failure = new Error('the index is gone')
    const h = await hosts.open({
      query: (real) => ({
        ...real,
        listSessions: async () => {
          throw failure
        },
      }),
    })
    const parent = h.sessions.create()
    await expect(h.runtime.listChildren(parent.id)).rejects.toBe(failure)
    await expect(h.runtime.listDescendants(parent.id)).rejects.toBe(failure)
  })

  it('lists an empty parent id like an unknown parent: an empty list, no query error', async () => {
    const h = await hosts.open()
    expect(await h.runtime.listChildren('')).toEqual([])
    expect(await h.runtime.listDescendants('')).toEqual([])
    expect(await h.runtime.listChildren('no-such-parent')).toEqual([])
  })

  it('checks every required service before reading, and aborts with CANCELLED before reading', async () => {
    const h = await hosts.open()
    const services = { sessions: h.sessions, sessionProjections: h.projections, sessionQuery: h.ctx.require('sessionQuery') }
    expect(await codeOf(listChildren({ ...services, sessionProjections: undefined }, 'p'))).toBe('SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE')
    expect(await codeOf(listChildren({ ...services, sessions: undefined }, 'p'))).toBe('SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE')
    expect(await codeOf(listDescendants({ ...services, sessionQuery: undefined }, 'p'))).toBe('SUBAGENT_CONTROL_QUERY_UNAVAILABLE')
    expect(await codeOf(listChildren(services, 'p', AbortSignal.abort()))).toBe('CANCELLED')
  })
})
