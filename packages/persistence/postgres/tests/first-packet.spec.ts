import { createServer, type Server, connect as tcpConnect } from 'node:net'
import { SessionId } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { listenChannel, watchPool } from '@dsh/session-persistence-postgres/backend'
import { freshDatabase, until } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { events, target } from './fixtures.js'

// A connection the server ends in the packet that completes its startup.
//
// A busy client can read a new connection's ReadyForQuery and the server's
// FATAL (restart, pg_terminate_backend) in one chunk. The driver hands the
// connection out on the first and emits the second at once, before
// `pool.connect()` has resolved and its holder could listen. The proxy below
// makes that happen on purpose: for each connection it is told to trap, it
// holds the server's bytes up to the ReadyForQuery, terminates that backend
// (its pid is in the BackendKeyData message), and delivers the held bytes and
// the FATAL in one write.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const uncaught: unknown[] = []
const onUncaught = (error: unknown) => uncaught.push(error)
beforeEach(() => {
  uncaught.length = 0
  process.on('uncaughtException', onUncaught)
  cleanups.push(() => process.off('uncaughtException', onUncaught))
})

interface CoalescingProxy {
  /** The database's URL through the proxy. */
  readonly url: string
  /** Traps the next `count` connections. */
  trap(count: number): void
  /** Connections trapped and delivered so far. */
  readonly delivered: number
}

async function coalescingProxy(databaseUrl: string, admin: pg.Pool): Promise<CoalescingProxy> {
  const target = new URL(databaseUrl)
  let traps = 0
  let delivered = 0
  const server: Server = createServer((client) => {
    const backend = tcpConnect(Number(target.port), target.hostname)
    client.on('error', () => backend.destroy())
    backend.on('error', () => client.destroy())
    client.pipe(backend)
    if (traps === 0) {
      backend.pipe(client)
      return
    }
    traps--
    let held = Buffer.alloc(0)
    let terminating = false
    backend.on('data', (chunk: Buffer) => {
      held = Buffer.concat([held, chunk])
      if (terminating) return
      let pid: number | undefined
      // Messages: a type byte, then a length that counts itself.
      for (let at = 0; at + 5 <= held.length; ) {
        const length = held.readInt32BE(at + 1)
        if (at + 1 + length > held.length) break
        const type = String.fromCharCode(held[at]!)
        if (type === 'K') pid = held.readInt32BE(at + 5)
        if (type === 'Z' && pid !== undefined) {
          terminating = true
          void admin.query('SELECT pg_terminate_backend($1)', [pid])
        }
        at += 1 + length
      }
    })
    backend.on('end', () => {
      delivered++
      client.end(held)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanups.push(() => new Promise((resolve) => server.close(resolve)))
  const url = new URL(databaseUrl)
  url.hostname = '127.0.0.1'
  url.port = String((server.address() as { port: number }).port)
  return {
    url: url.toString(),
    trap: (count) => {
      traps += count
    },
    get delivered() {
      return delivered
    },
  }
}

/** A pool through the proxy; `idleTimeoutMillis` 1 lets a test wait until it holds no idle connection, so its next one is new. */
async function setup(options: pg.PoolConfig = {}): Promise<{ proxy: CoalescingProxy; pool: pg.Pool }> {
  const db = await freshDatabase({ max: 2 })
  cleanups.push(() => db.end())
  const proxy = await coalescingProxy(db.url, db.pool)
  const pool = new pg.Pool({ connectionString: proxy.url, max: 4, ...options })
  cleanups.push(() => pool.end().catch(() => {}))
  return { proxy, pool }
}

async function open(pool: pg.Pool): Promise<PostgresPersistence> {
  const persistence = await createPostgresPersistence({ pool })
  cleanups.push(() => persistence.close())
  return persistence
}

describe('a new connection the server ends in the packet that completes its startup', () => {
  it("on a watched pool, reaches neither the process nor the pool's next holder: the holder's statement fails, the next connection works", async () => {
    const { proxy, pool } = await setup()
    watchPool(pool)
    proxy.trap(1)
    const client = await pool.connect()
    await until(() => proxy.delivered === 1, 'the trapped connection was delivered')
    await expect(client.query('SELECT 1')).rejects.toThrow()
    client.release(true)
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one')
    expect(rows).toEqual([{ one: 1 }])
    expect(uncaught).toEqual([])
  })

  it('an append whose writer connection is ended so is a typed SESSION_PERSISTENCE_UNAVAILABLE, and the next append lands', async () => {
    const { proxy, pool } = await setup({ idleTimeoutMillis: 1 })
    const persistence = await open(pool)
    await until(() => pool.idleCount === 0, 'the idle connections closed')
    proxy.trap(1)
    await expect(persistence.append(target('a'), events(0, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_UNAVAILABLE' })
    expect(proxy.delivered).toBe(1)
    await persistence.append(target('a'), events(0, 1))
    expect((await persistence.inspect(SessionId('a'))).events).toHaveLength(1)
    expect(uncaught).toEqual([])
  })

  it('a LISTEN whose connections are ended so retries until one stays, then hears notices', async () => {
    const { proxy, pool } = await setup()
    proxy.trap(3)
    let notices = 0
    const listener = await listenChannel(pool, 'dsh_first_packet', { notify: () => notices++, resubscribed: () => notices++ })
    cleanups.push(() => listener.close())
    await until(() => proxy.delivered === 3 && notices === 1, 'the LISTEN was re-opened after three ended connections')
    await pool.query('NOTIFY dsh_first_packet')
    await until(() => notices === 2, 'the notice was heard')
    expect(uncaught).toEqual([])
  })
})
