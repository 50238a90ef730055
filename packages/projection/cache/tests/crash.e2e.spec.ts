import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Context } from '@dsh/context'
import { type SessionId, SessionLogOffset } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createProjectionRegistry } from '@dsh/session-projection'
import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { projectionCachePath, SqliteProjectionCache } from '../src/index.js'
// @ts-expect-error -- a plain .mjs module shared with the worker process
import { countUnit as sharedUnit } from './workers/units.mjs'

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    eventCounts: { total: number; byType: Record<string, number> }
  }
  interface SessionProjectionMap {
    eventCounts: { total: number; byType: Record<string, number> }
  }
}

const here = dirname(fileURLToPath(import.meta.url))
/** How many sessions the worker appends to (checkpointing-appender.mjs). */
const SESSIONS_PER_ROUND = 3
const { dir: root, cleanup } = tempDir('dsh-cache-')
const cachePath = projectionCachePath(root)

beforeAll(() => {
  // The worker runs the built packages (it imports them by name, resolved to dist/).
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: pnpm --filter @dsh/session-projection-cache... build')
})
afterAll(cleanup)

/**
 * Runs the worker until it reported at least `writes` checkpoint writes with
 * every one of its sessions checkpointed, waits `extraMs` more (it keeps
 * appending), then SIGKILLs it.
 */
async function crashAfter(prefix: string, writes: number, extraMs: number): Promise<void> {
  const child = spawn(process.execPath, [join(here, 'workers', 'checkpointing-appender.mjs'), root, cachePath, prefix], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)))
  await new Promise<void>((resolve, reject) => {
    let buffered = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk
      for (const [, wrote, covered] of buffered.matchAll(/WROTE (\d+) COVERED (\d+)\n/g))
        if (Number(wrote) >= writes && Number(covered) === SESSIONS_PER_ROUND) resolve()
    })
    void exited.then(() => reject(new Error(`the worker exited before ${writes} checkpoint writes: ${stderr}`)))
  })
  await new Promise((resolve) => setTimeout(resolve, extraMs))
  child.kill('SIGKILL')
  expect(await exited).toBe('SIGKILL')
}

describe('the cache never leads the log', () => {
  it('after SIGKILLs between checkpoint writes and later appends, every cached row is at or below the last durable seq', async () => {
    const rounds: Array<[string, number, number]> = [
      ['a', 5, 0],
      ['b', 12, 17],
      ['c', 25, 43],
    ]
    for (const [prefix, writes, extraMs] of rounds) await crashAfter(prefix, writes, extraMs)

    const persistence = createJsonlPersistence({ root })
    const projections = createProjectionRegistry(new Context())
    projections.register(sharedUnit as never)
    const cache = new SqliteProjectionCache({ path: cachePath, projections, sessions: { flush: async () => {} } })
    const db = new Database(cachePath, { readonly: true })
    try {
      const rows = db.prepare('SELECT session_id AS id, seq FROM checkpoint_rows').all() as Array<{ id: string; seq: number }>
      expect(rows.length).toBeGreaterThanOrEqual(rounds.length * SESSIONS_PER_ROUND) // every session of every round was checkpointed
      let checked = 0
      for (const row of rows) {
        // inspect reads without repairing: exactly what is durable.
        const observation = await persistence.inspect(row.id as SessionId)
        const lastDurable = observation.events.length - 1
        expect(row.seq, `cached seq of ${row.id} vs its durable log`).toBeLessThanOrEqual(lastDurable)
        // And the row is exactly the fold of the durable prefix it claims.
        const cached = cache.cachedSnapshot(observation.header, SessionLogOffset(observation.inheritedEventCount), ['eventCounts'])
        expect(cached).toEqual(
          projections.fold(observation.events.slice(0, row.seq + 1), { inheritedEventCount: SessionLogOffset(0) }, ['eventCounts']),
        )
        checked++
      }
      expect(checked).toBe(rows.length)
    } finally {
      db.close()
      cache.close()
      await persistence.close()
    }
  })
})
