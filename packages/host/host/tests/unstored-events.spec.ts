import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHost } from '../src/index.js'

// A host that closes while its store is away: the events the store never took
// are lost with the process, and dispose says so instead of resolving.
let cluster: TestCluster

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
})

afterAll(async () => {
  await cluster?.stop()
})

describe('dispose with events the store did not take', () => {
  it('rejects with HOST_EVENTS_NOT_STORED naming the session and the events; what was stored before stays', async () => {
    const url = await cluster.createDatabase()
    const warnings: string[] = []
    const logger = { warn: (message: string) => void warnings.push(message), error: (message: string) => void warnings.push(message) }
    const host = await createHost({ postgres: { connectionString: url }, projectionCache: false, logger })
    const session = host.sessions.create({ id: 'away' })
    session.append('user/message', { text: 'stored' })
    await host.sessions.flush(session)
    await cluster.stopServer()
    let disposed: unknown
    try {
      session.append('user/message', { text: 'never stored' })
      session.append('assistant/message', { turn: 1, text: 'nor this' })
      disposed = await host.dispose().then(
        () => 'resolved',
        (error: unknown) => error,
      )
    } finally {
      await cluster.startServer()
    }
    expect(disposed).toMatchObject({
      code: 'HOST_EVENTS_NOT_STORED',
      details: { events: 2, sessions: [{ id: 'away', pending: 2 }] },
    })
    expect((disposed as Error).message).toMatch(
      /^2 event\(s\) of session 'away' were not stored when the host closed: .+ they are lost with this process\.$/,
    )
    expect(warnings.some((w) => w.includes('event(s) are not stored yet; retrying for up to 5000 ms'))).toBe(true)

    const reader = await createHost({ postgres: { connectionString: url }, projectionCache: false, readOnly: true })
    try {
      expect((await reader.query.observeSession('away')).events.map((e) => e.data)).toEqual([{ text: 'stored' }])
    } finally {
      await reader.dispose()
    }
  })

  it('resolves when everything was stored', async () => {
    const host = await createHost({ postgres: { connectionString: await cluster.createDatabase() }, projectionCache: false })
    host.sessions.create({ id: 'kept' }).append('user/message', { text: 'kept' })
    await expect(host.dispose()).resolves.toBeUndefined()
  })
})
