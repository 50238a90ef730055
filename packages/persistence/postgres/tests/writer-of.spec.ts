import { hostname } from 'node:os'
import { SessionId } from '@dsh/session'
import { withSharedReads } from '@dsh/session-persistence'
import { createPostgresPersistence, migrate } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { storedId } from '../src/ids.js'
import { holderNamed, ownWriterName, writerName } from '../src/writer-identity.js'
import { LOOKUP_MAX_KEYS } from '../src/writer-lookup.js'
import { events, target } from './fixtures.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function database() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  return db
}

const me = { pid: process.pid, host: hostname() }

describe('writerOf', () => {
  it("names the process holding a session's lease: none before its first write, this process while an instance holds it, none once it is closed", async () => {
    const db = await database()
    const writer = await createPostgresPersistence({ pool: db.pool })
    const reader = await createPostgresPersistence({ pool: db.pool, readOnly: true })
    cleanups.push(() => reader.close())
    const id = SessionId('held')
    expect(await reader.writerOf(id)).toBeUndefined()
    await writer.append(target('held'), events(0, 2))
    expect(await reader.writerOf(id)).toEqual(me)
    expect(await writer.writerOf(id)).toEqual(me)
    // The shared-reads wrapper a host puts around its backend passes the probe through.
    expect(await withSharedReads(reader).writerOf?.(id)).toEqual(me)
    // Another session is not held by that lease.
    await writer.append(target('other'), events(0, 1))
    expect(await reader.writerOf(SessionId('absent'))).toBeUndefined()
    await writer.close()
    expect(await reader.writerOf(id)).toBeUndefined()
    expect(await reader.writerOf(SessionId('other'))).toBeUndefined()
  })

  it('a lease given back to stay under maxLeases has no holder; the session written since holds one', async () => {
    const db = await database()
    const writer = await createPostgresPersistence({ pool: db.pool, maxLeases: 1 })
    cleanups.push(() => writer.close())
    await writer.append(target('first'), events(0, 1))
    expect(await writer.writerOf(SessionId('first'))).toEqual(me)
    await writer.append(target('second'), events(0, 1))
    expect(await writer.writerOf(SessionId('first'))).toBeUndefined()
    expect(await writer.writerOf(SessionId('second'))).toEqual(me)
  })

  it("calls made together share one read of the server's lock table, each answered for its own session; a round over LOOKUP_MAX_KEYS is split", async () => {
    const db = await database()
    const writer = await createPostgresPersistence({ pool: db.pool })
    cleanups.push(() => writer.close())
    const reader = await createPostgresPersistence({ pool: db.pool, readOnly: true })
    cleanups.push(() => reader.close())
    // Keys of both signs: the server lists a key as two unsigned halves.
    const names = Array.from({ length: 12 }, (_, i) => `s${i}`)
    const held = names.slice(0, 6)
    expect(new Set(held.map((name) => storedId(SessionId(name)).lock.startsWith('-')))).toEqual(new Set([true, false]))
    for (const name of held.slice(0, 5)) await writer.append(target(name), events(0, 1))
    // Another process's writer as the server shows it: a connection named for pid 42 on 'elsewhere' holding the sixth lease.
    const other = new pg.Client({ connectionString: db.url, application_name: writerName(42, 'elsewhere') })
    await other.connect()
    cleanups.push(() => other.end())
    await other.query('SELECT pg_advisory_lock($1::bigint)', [storedId(SessionId(held[5]!)).lock])

    const before = reader.metrics.lockTableReads
    const asked = [...names, 's0', 's5']
    const holders = await Promise.all(asked.map((name) => reader.writerOf(SessionId(name))))
    const elsewhere = { pid: 42, host: 'elsewhere' }
    expect(holders).toEqual([me, me, me, me, me, elsewhere, ...names.slice(6).map(() => undefined), me, elsewhere])
    expect(reader.metrics.lockTableReads - before).toBe(1)

    // One after another, each call is a read of its own.
    expect(await reader.writerOf(SessionId('s0'))).toEqual(me)
    expect(await reader.writerOf(SessionId('s6'))).toBeUndefined()
    expect(reader.metrics.lockTableReads - before).toBe(3)

    const many = Array.from({ length: LOOKUP_MAX_KEYS + 1 }, (_, i) => SessionId(i === 0 ? 's5' : `n${i}`))
    const answers = await Promise.all(many.map((id) => reader.writerOf(id)))
    expect(answers[0]).toEqual(elsewhere)
    expect(answers.slice(1).every((answer) => answer === undefined)).toBe(true)
    expect(reader.metrics.lockTableReads - before).toBe(5)
  })

  it('an id that cannot be stored has no holder; a closed instance and an aborted signal are refused', async () => {
    const db = await database()
    await migrate(db.pool)
    const reader = await createPostgresPersistence({ pool: db.pool, readOnly: true })
    expect(await reader.writerOf(SessionId('\uD800'))).toBeUndefined()
    const aborted = new AbortController()
    aborted.abort()
    await expect(reader.writerOf(SessionId('x'), aborted.signal)).rejects.toMatchObject({ code: 'CANCELLED' })
    await reader.close()
    await expect(reader.writerOf(SessionId('x'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CLOSED' })
  })
})

describe('writer names', () => {
  it('fit the 63 bytes the server keeps, in printable ASCII, and the server stores them unchanged', async () => {
    const db = await database()
    const long = `${'build-agent-'.repeat(8)}.example.internal`
    const names = [writerName(4_194_304, long), writerName(7, 'café-höst\u0000\u{1F600}'), writerName(123, 'short'), ownWriterName()]
    for (const name of names) {
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63)
      expect(name).toMatch(/^[\x20-\x7e]+$/)
      const client = await db.pool.connect()
      try {
        await client.query("SELECT set_config('application_name', $1, false)", [name])
        const { rows } = await client.query<{ name: string }>(
          'SELECT application_name AS name FROM pg_stat_activity WHERE pid = pg_backend_pid()',
        )
        expect(rows[0]!.name).toBe(name)
      } finally {
        client.release(true)
      }
    }
    expect(names[1]).toBe('dsh-writer 7 caf?-h?st???')
    expect(names[2]).toBe('dsh-writer 123 short')
  })

  it('keep two long host names that share a prefix apart, and read back as the process they name', () => {
    const a = writerName(42, `${'x'.repeat(60)}-a`)
    const b = writerName(42, `${'x'.repeat(60)}-b`)
    expect(a).not.toBe(b)
    expect(a).toMatch(/^dsh-writer 42 x+~[0-9a-f]{8}$/)
    expect(holderNamed(a)).toEqual({ pid: 42, host: a.slice('dsh-writer 42 '.length) })
    expect(holderNamed(writerName(9, 'elsewhere'))).toEqual({ pid: 9, host: 'elsewhere' })
    expect(holderNamed(ownWriterName())).toEqual(me)
    // A holder whose connection names no dsh writer: held, by no dsh process.
    expect(holderNamed('psql')).toEqual({ pid: 0, host: '' })
    expect(holderNamed(null)).toEqual({ pid: 0, host: '' })
  })
})
