import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Context } from '@dsh/context'
import { parseSessionHeader, SessionId, SessionLogOffset, SessionSeq, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence, migrate } from '@dsh/session-persistence-postgres'
import { startTestCluster } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const here = dirname(fileURLToPath(import.meta.url))

beforeAll(() => {
  // The workers run the built package (they import it by name, resolved to dist/).
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-persistence-postgres...')
})

interface Run {
  readonly child: ChildProcess
  readonly exited: Promise<unknown>
  /** Resolves with the first line starting with `prefix` after `skip` such lines. */
  waitFor(prefix: string, skip?: number): Promise<string>
}

function run(args: string[]): Run {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: string[] = []
  const waiters: Array<() => void> = []
  let buffered = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    for (let at = buffered.indexOf('\n'); at !== -1; at = buffered.indexOf('\n')) {
      lines.push(buffered.slice(0, at))
      buffered = buffered.slice(at + 1)
    }
    for (const wake of waiters.splice(0)) wake()
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  let done = false
  const exited = new Promise((resolve) =>
    child.on('close', (code, signal) => {
      done = true
      for (const wake of waiters.splice(0)) wake()
      resolve({ code, signal })
    }),
  )
  return {
    child,
    exited,
    async waitFor(prefix, skip = 0) {
      for (;;) {
        const found = lines.filter((l) => l.startsWith(prefix))[skip]
        if (found !== undefined) return found
        if (done) throw new Error(`worker exited before printing '${prefix}' #${skip + 1}: ${lines.slice(-3).join(' | ')} ${stderr}`)
        await new Promise<void>((resolve) => waiters.push(resolve))
      }
    },
  }
}

describe('processes on one database', () => {
  it('a writer killed with SIGKILL mid-append, 100 times: every acknowledged batch is present, the next process takes over, nothing duplicated or interleaved', async () => {
    const db = await freshDatabase()
    try {
      await migrate(db.pool)
      const reader = await createPostgresPersistence({ pool: db.pool })
      const id = SessionId('crashy')
      let acknowledged = 0
      for (let round = 0; round < 100; round++) {
        const worker = run([join(here, 'workers', 'crash-appender.mjs'), db.url, id, `w${round}`])
        const ready = Number((await worker.waitFor('ready ')).slice(6))
        // Nothing acknowledged is ever missing when the next writer takes over.
        expect(ready).toBeGreaterThanOrEqual(acknowledged)
        const acks = 1 + (round % 4)
        acknowledged = Number((await worker.waitFor('ack ', acks - 1)).slice(4))
        // It keeps appending: the kill lands before, inside or after a statement.
        worker.child.kill('SIGKILL')
        await worker.exited
        const stored = await reader.inspect(id)
        expect(stored.events.length).toBeGreaterThanOrEqual(acknowledged)
        stored.events.forEach((event, i) => {
          expect(event.seq).toBe(i)
          expect((event.data as { text: string }).text.endsWith(`:${i}`)).toBe(true)
        })
        acknowledged = stored.events.length
      }
      // A batch of one writer is never split or mixed with another's.
      const final = await reader.inspect(id)
      const writers = final.events.map((e) => (e.data as { text: string }).text.split(':')[0])
      const { rows } = await db.pool.query<{ first_seq: number; count: number }>(
        'SELECT first_seq, count FROM dsh_batches ORDER BY first_seq',
      )
      for (const batch of rows) expect(new Set(writers.slice(batch.first_seq, batch.first_seq + batch.count)).size).toBe(1)
      // This process takes over last (bounded retries while the last lease is released).
      let appended = false
      for (let attempt = 0; attempt < 1000 && !appended; attempt++) {
        try {
          const header = parseSessionHeader({ version: 1, id, createdAt: 1_700_000_000_000, isSeeded: false, delegationDepth: 0 })
          await reader.append({ header, inheritedEventCount: SessionLogOffset(0) }, [
            { type: 'user/message', seq: SessionSeq(final.events.length), time: 0, data: { text: `parent:${final.events.length}` } },
          ])
          appended = true
        } catch (error) {
          if ((error as { code?: string }).code !== 'SESSION_PERSISTENCE_LOCKED') throw error
          await sleep(5)
        }
      }
      expect(appended).toBe(true)
      await reader.close()
    } finally {
      await db.end()
    }
  }, 600_000)
})

describe('the writer of a session, seen from another process', () => {
  it('names the child process appending to it, and no one once that process is killed', async () => {
    const db = await freshDatabase()
    try {
      await migrate(db.pool)
      const reader = await createPostgresPersistence({ pool: db.pool, readOnly: true })
      const id = SessionId('watched')
      const worker = run([join(here, 'workers', 'crash-appender.mjs'), db.url, id, 'w'])
      await worker.waitFor('ack ')
      expect(await reader.writerOf(id)).toEqual({ pid: worker.child.pid, host: hostname() })
      worker.child.kill('SIGKILL')
      await worker.exited
      // The server drops the lease with the dead process's connection (bounded retries while it notices).
      let holder = await reader.writerOf(id)
      for (let attempt = 0; attempt < 2000 && holder !== undefined; attempt++) {
        await sleep(10)
        holder = await reader.writerOf(id)
      }
      expect(holder).toBeUndefined()
      await reader.close()
    } finally {
      await db.end()
    }
  }, 120_000)
})

describe('server restart', () => {
  let cluster: Awaited<ReturnType<typeof startTestCluster>>
  beforeAll(async () => {
    cluster = await startTestCluster({ settings: { fsync: 'off' } })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('pg_ctl restart during a run: the pool reconnects, the coordinator retries, no acknowledged batch is lost', async () => {
    const pool = new pg.Pool({ connectionString: cluster.connectionString(), max: 4 })
    const quiet = { warn: () => {}, error: () => {} }
    const ctx = new Context({ logger: quiet })
    ctx.provide('logger', quiet)
    try {
      const persistence = await createPostgresPersistence({ pool })
      await ctx.activate(sessionStorePlugin())
      await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0, retryDelayMs: 5, maxRetryDelayMs: 200 }))
      const sessions = ctx.require('sessions')
      const session = sessions.create({ id: 'through-restart' })
      const started = async () => (await pool.query<{ t: string }>('SELECT pg_postmaster_start_time()::text AS t')).rows[0]!.t
      let before = ''
      let acknowledged = 0
      for (let i = 0; i < 60; i++) {
        session.append('user/message', { text: `m${i}` })
        if (i === 20) {
          before = await started()
          await cluster.restart()
        }
        try {
          await sessions.flush(session)
          acknowledged = session.seq
        } catch {
          // Not acknowledged: the coordinator keeps the events and retries.
        }
      }
      // The flush after the restart settles everything still pending.
      for (let attempt = 0; attempt < 200; attempt++) {
        try {
          await sessions.flush(session)
          break
        } catch {
          await sleep(20)
        }
      }
      const stored = await persistence.inspect(session.id)
      expect(stored.events.length).toBe(60)
      expect(stored.events.length).toBeGreaterThanOrEqual(acknowledged)
      expect(stored.events.map((e) => (e.data as { text: string }).text)).toEqual(Array.from({ length: 60 }, (_, i) => `m${i}`))
      // The server really went away and came back in between.
      expect(await started()).not.toBe(before)
    } finally {
      await ctx.dispose()
      await pool.end()
    }
  })
})
