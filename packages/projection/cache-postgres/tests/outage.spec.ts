import { outageCluster, until } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { host, keys, turn } from './helpers.js'

// A PostgreSQL outage (pg_ctl stop -m fast, then start again) on a cluster of
// this file's own: the run's shared cluster serves other files meanwhile.
const outage = outageCluster()
const cleanups: Array<() => unknown> = []

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const KEYS = [keys.messages, keys.turns]

/** A host on its own pool (another process, as far as the database can tell). */
async function hostOn(url: string, idPrefix: string, mirrorSessions?: number) {
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  cleanups.push(() => pool.end().catch(() => {}))
  const h = await host({ pool, idPrefix, ...(mirrorSessions === undefined ? {} : { mirrorSessions }) })
  cleanups.push(() => h.ctx.dispose())
  return h
}

describe('the PostgreSQL checkpoint cache through an outage', () => {
  it('lookups keep answering from the mirror, writes fail softly, refresh never rejects; once the server is back the re-opened LISTEN resyncs and follows other hosts again', async () => {
    const url = await outage.cluster().createDatabase()
    const writer = await hostOn(url, 'w')
    const follower = await hostOn(url, 'f')
    const session = writer.sessions.create()
    turn(session, 1, 'before')
    await writer.cache.idle()
    const at = (h: typeof follower) => h.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)
    // The follower learns of it on NOTIFY, with no explicit refresh.
    await until(() => at(follower) !== undefined, 'the follower mirrored the first write')
    expect(at(follower)).toEqual({ [keys.messages]: { n: 1, last: 'before' }, [keys.turns]: 1 })
    // A row changed without a NOTIFY: the follower's mirror lags it until its next refresh.
    const direct = new pg.Client({ connectionString: url })
    await direct.connect()
    await direct.query('UPDATE dsh_projection_checkpoints SET state = $1 WHERE key = $2', ['{"n":1,"last":"silent"}', keys.messages])
    await direct.end()
    expect(at(follower)).toEqual({ [keys.messages]: { n: 1, last: 'before' }, [keys.turns]: 1 })

    await outage.cluster().stopServer()
    // Lookups answer from the mirror; a refresh resolves (it retries in the background); a write fails softly.
    expect(at(writer)).toEqual({ [keys.messages]: { n: 1, last: 'before' }, [keys.turns]: 1 })
    await follower.cache.refresh()
    const failedBefore = writer.cache.metrics.failedWrites
    turn(session, 2, 'during')
    await writer.cache.idle()
    expect(writer.cache.metrics.failedWrites).toBe(failedBefore + 1)
    // The follower's LISTEN is lost and retried with backoff; each of its loops says so once per outage.
    await until(
      () => follower.warnings.some((w) => /cannot LISTEN/.test(w.message)),
      "the follower reported its lost LISTEN's first failed retry",
    )

    await outage.cluster().startServer()
    // The re-opened LISTEN resyncs: the row changed without a NOTIFY before the outage is read.
    await until(
      () => (at(follower)?.[keys.messages] as { last?: string } | undefined)?.last === 'silent',
      'the follower resynced on its new LISTEN',
    )
    // And it follows other hosts' writes again, on NOTIFY.
    turn(session, 3, 'after')
    await writer.cache.idle()
    expect(at(writer)).toEqual({ [keys.messages]: { n: 3, last: 'after' }, [keys.turns]: 3 })
    await until(() => (at(follower)?.[keys.turns] as number | undefined) === 3, 'the follower mirrored a write after the outage')
    for (const h of [writer, follower]) {
      expect(h.warnings.filter((w) => /cannot LISTEN/.test(w.message)).length).toBeLessThanOrEqual(1)
      expect(h.warnings.filter((w) => /refreshing the projection cache mirror/.test(w.message)).length).toBeLessThanOrEqual(1)
    }
    expect(outage.rejections).toEqual([])
  })

  it('a mirror miss during it misses quietly: the read of the session fails once per outage (a warning, no rejection) and is retried until the server is back, then hits', async () => {
    const url = await outage.cluster().createDatabase()
    const writer = await hostOn(url, 'w')
    const reader = await hostOn(url, 'r', 2)
    const sessions = Array.from({ length: 3 }, () => writer.sessions.create())
    for (const [i, session] of sessions.entries()) turn(session, 1, `s${i}`)
    await writer.cache.idle()
    const at = (session: (typeof sessions)[number]) => reader.cache.cachedSnapshot(session.header, session.inheritedEventCount, KEYS)
    // The reader holds two sessions at most: the first one is read from the table when looked up.
    await until(() => at(sessions[2]!) !== undefined && at(sessions[1]!) !== undefined, 'the reader mirrored the newest two')
    // A later write to each held session: NOTIFYs arrive in commit order, so once the reader shows both,
    // it has also applied the first session's write (which may have put that session back), and the
    // two newer writes have since made the first session the least recently used, and evicted it.
    for (const session of [sessions[1]!, sessions[2]!]) turn(session, 2, 'again')
    await writer.cache.idle()
    await until(
      () => at(sessions[2]!)?.[keys.turns] === 2 && at(sessions[1]!)?.[keys.turns] === 2,
      "the reader mirrored the held sessions' later writes",
    )
    await outage.cluster().stopServer()
    expect(at(sessions[0]!)).toBeUndefined()
    await until(() => reader.cache.mirror.failedLoads > 0, 'the read of the missed session failed')
    expect(at(sessions[0]!)).toBeUndefined()
    expect(reader.cache.mirror.sessions).toBeLessThanOrEqual(2)
    await outage.cluster().startServer()
    await until(() => at(sessions[0]!) !== undefined, 'the missed session was read once the server was back')
    expect(at(sessions[0]!)).toEqual(writer.projections.snapshot(sessions[0]!))
    expect(reader.warnings.filter((w) => /after a mirror miss failed/.test(w.message)).length).toBe(1)
    expect(reader.cache.mirror.sessions).toBeLessThanOrEqual(2)
    expect(outage.rejections).toEqual([])
  })
})
