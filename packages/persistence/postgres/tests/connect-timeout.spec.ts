import { createServer, type Server, type Socket } from 'node:net'
import {
  createPostgresPersistence,
  DEFAULT_CONNECT_TIMEOUT_MS,
  migrate,
  PostgresPersistenceError,
  poolConfig,
} from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { failure } from './fixtures.js'

// A server that accepts TCP but never answers (a hung host, a proxy with no
// backend) bounds opening by the connect timeout: the open fails typed,
// naming the address and never the password, instead of hanging.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Listens on a free port of 127.0.0.1; every connection is accepted and left unanswered. */
async function silentServer(): Promise<{ port: number; url: (query?: string) => string }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  )
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return { port, url: (query = '') => `postgres://dsh:secret-password@127.0.0.1:${port}/sessions${query}` }
}

describe('a server that accepts connections and never answers', () => {
  it('opening with connectTimeoutMs fails UNAVAILABLE naming host:port and the bound, never the password', async () => {
    const silent = await silentServer()
    for (const options of [{}, { migrate: false }, { readOnly: true }]) {
      const error = await failure(createPostgresPersistence({ connectionString: silent.url(), connectTimeoutMs: 200, ...options }))
      expect(error).toBeInstanceOf(PostgresPersistenceError)
      expect(error.code).toBe('POSTGRES_PERSISTENCE_UNAVAILABLE')
      expect(error.message).toContain(`127.0.0.1:${silent.port}/sessions`)
      expect(error.message).toMatch(/no answer within 200 ms/)
      expect(error.message).not.toContain('secret-password')
    }
  })

  it("the URL's connect_timeout (seconds, as libpq reads it) bounds it when the option is not given", async () => {
    const silent = await silentServer()
    const error = await failure(createPostgresPersistence({ connectionString: silent.url('?connect_timeout=2') }))
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_UNAVAILABLE' })
    expect(error.message).toMatch(/no answer within 2000 ms/)
  })

  it('a pool built with poolConfig is bounded alike', async () => {
    const silent = await silentServer()
    const pool = new pg.Pool({ ...poolConfig(silent.url(), { connectTimeoutMs: 200 }), max: 1 })
    cleanups.push(() => pool.end().catch(() => {}))
    const error = await failure(migrate(pool))
    expect(error).toMatchObject({ code: 'POSTGRES_PERSISTENCE_UNAVAILABLE' })
    expect(error.message).toContain(`127.0.0.1:${silent.port}/sessions`)
    expect(error.message).not.toContain('secret-password')
  })
})

describe('poolConfig', () => {
  it('bounds every connect (10 s, the URL connect_timeout, or the option) and keeps TCP connections alive', () => {
    const url = 'postgres://dsh@db.example:5432/sessions'
    expect(DEFAULT_CONNECT_TIMEOUT_MS).toBe(10_000)
    expect(poolConfig(url)).toMatchObject({ connectionString: url, connectionTimeoutMillis: 10_000, keepAlive: true })
    expect(poolConfig(`${url}?connect_timeout=3`).connectionTimeoutMillis).toBe(3_000)
    // libpq's reading: at least 2 s; 0 waits for ever.
    expect(poolConfig(`${url}?connect_timeout=1`).connectionTimeoutMillis).toBe(2_000)
    expect(poolConfig(`${url}?connect_timeout=0`).connectionTimeoutMillis).toBe(0)
    expect(poolConfig(`${url}?connect_timeout=3`, { connectTimeoutMs: 500 }).connectionTimeoutMillis).toBe(500)
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => poolConfig(url, { connectTimeoutMs: bad })).toThrow(
        expect.objectContaining({ code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS' }),
      )
    }
  })

  it('is what a pool opened from a connection string gets; connectTimeoutMs beside a given pool is refused', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const p = await createPostgresPersistence({ connectionString: db.url, connectTimeoutMs: 5_000 })
    cleanups.push(() => p.close())
    expect(p.pool.options).toMatchObject({ connectionTimeoutMillis: 5_000, keepAlive: true })
    expect(await p.list()).toEqual([])
    await expect(createPostgresPersistence({ pool: db.pool, connectTimeoutMs: 5_000 })).rejects.toMatchObject({
      code: 'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
    })
  })
})
