import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { SessionId, SessionSeq } from '@dsh/session'
import { migrate } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { beforeAll, describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain .mjs module shared with the worker process
import { composePostgresHost } from './workers/compose.mjs'

const here = dirname(fileURLToPath(import.meta.url))

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-query-postgres...')
})

function startHostA(url: string): { child: ChildProcess; line(prefix: string): Promise<string> } {
  const child = spawn(process.execPath, [join(here, 'workers', 'host-a.mjs'), url], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  const waiters: Array<() => void> = []
  let exited = false
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
    for (const wake of waiters.splice(0)) wake()
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  child.on('close', () => {
    exited = true
    for (const wake of waiters.splice(0)) wake()
  })
  return {
    child,
    async line(prefix) {
      for (;;) {
        const found = out.split('\n').find((l) => l.startsWith(prefix))
        if (found !== undefined && out.includes(`${found}\n`)) return found.slice(prefix.length)
        if (exited) throw new Error(`host A exited before '${prefix}': ${out} ${err}`)
        await new Promise<void>((resolve) => waiters.push(resolve))
      }
    },
  }
}

describe('two hosts (two processes) on one database', () => {
  it('B lists the children A spawned with the same rows, is LOCKED out of A’s live parent, and takes it over once A is SIGKILLed', async () => {
    const db = await freshDatabase()
    await migrate(db.pool)
    const a = startHostA(db.url)
    let b: Awaited<ReturnType<typeof composePostgresHost>> | undefined
    try {
      const rowsOnA = JSON.parse(await a.line('rows ')) as unknown[]
      const children = JSON.parse(await a.line('children ')) as string[]
      expect(rowsOnA).toHaveLength(3)
      b = await composePostgresHost(db.url, 'b')
      const host = b!
      // Same rows on B, served cold: from A's checkpoints (rung 2) or one body read (rung 3), never live.
      expect(await host.subagents.listChildren('parent-on-a')).toEqual(rowsOnA)
      const explained = (await host.subagents.explainChildren('parent-on-a')) as Array<{ row: { id: string }; rung: number }>
      expect(explained.map((e) => e.row.id).sort()).toEqual([...children].sort())
      expect(explained.every((e) => e.rung === 2 || e.rung === 3)).toBe(true)
      expect(explained.some((e) => e.rung === 2)).toBe(true)
      // B's append to A's live session: LOCKED.
      const parent = await host.persistence.inspect(SessionId('parent-on-a'))
      const next = { type: 'user/message', seq: SessionSeq(parent.events.length), time: 1, data: { text: 'from B' } }
      const target = { header: parent.header, inheritedEventCount: parent.inheritedEventCount }
      await expect(host.persistence.append(target, [next])).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
      // A dies; its connection goes, and so does its lease: B takes over (bounded retries while the server notices).
      a.child.kill('SIGKILL')
      let loaded: Awaited<ReturnType<typeof host.persistence.load>> | undefined
      for (let attempt = 0; attempt < 1000 && loaded === undefined; attempt++) {
        loaded = await host.persistence.load(SessionId('parent-on-a')).catch(async (error: { code?: string }) => {
          if (error.code !== 'SESSION_PERSISTENCE_LOCKED') throw error
          await sleep(5)
          return undefined
        })
      }
      expect(loaded).toBeDefined()
      const resumed = { ...next, seq: SessionSeq(loaded!.events.length) }
      expect((await host.persistence.append(target, [resumed])).nextSeq).toBe(loaded!.events.length + 1)
      expect((await host.persistence.inspect(SessionId('parent-on-a'))).events.slice(0, parent.events.length)).toEqual(parent.events)
    } finally {
      a.child.kill('SIGKILL')
      await b?.dispose()
      await db.end()
    }
  })
})
