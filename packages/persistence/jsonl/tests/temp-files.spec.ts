import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { processStart } from '../src/process-identity.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const startOf = (pid: number): string => processStart(pid) ?? 'x'

/**
 * Removing a session directory (delete, or a create that lost the lock race)
 * removes the temporary files of dead processes only: a live process's
 * `.log.jsonl.tmp-<pid>.<start>-…` may be about to be linked (had the loser
 * of two writers racing to create one session removed it, the winner's
 * `link` would fail with ENOENT). A name is judged by its process's pid and
 * start time (`process-identity.ts`), so a pid reused by a later process
 * does not keep a dead writer's file.
 */
describe('temporary files of other writers', () => {
  it('survive the removal of their directory while their process lives; a dead process’s are removed', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-temps-')
    try {
      const p = createJsonlPersistence({ root: dir, compression: 'none' })
      await p.append(targetOf('gone'), eventsFrom(0, 2))
      await p.append(targetOf('busy'), eventsFrom(0, 2))
      const dead = spawnSync(process.execPath, ['-e', '0']).pid! // exited: no such process any more
      const deadTemp = join(dir, 'gone', `.log.jsonl.tmp-${dead}.${startOf(dead)}-0123456789ab`)
      // This process's pid with another start time: a process that ran before this one under the same pid.
      const reusedTemp = join(dir, 'gone', `.log.jsonl.tmp-${process.pid}.1-0123456789ab`)
      const liveTemp = join(dir, 'busy', `.log.jsonl.tmp-${process.pid}.${startOf(process.pid)}-0123456789ab`)
      writeFileSync(deadTemp, 'half a log')
      writeFileSync(reusedTemp, 'half a log of an earlier process')
      writeFileSync(liveTemp, 'a log about to be linked')

      await p.delete(SessionId('gone'))
      await p.delete(SessionId('busy'))
      expect(existsSync(join(dir, 'gone'))).toBe(false)
      expect(existsSync(liveTemp)).toBe(true) // kept, and so is its directory
      for (const id of ['gone', 'busy'])
        await expect(p.inspect(SessionId(id))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_NOT_FOUND' })
      expect((await p.list()).map((r) => r.header.id)).toEqual([])
      await p.close()
    } finally {
      cleanup()
    }
  })

  it('are removed by the next writer of their session when their process is dead: a crashed create or fork leaves nothing that grows', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-temps-')
    try {
      const p = createJsonlPersistence({ root: dir, compression: 'none' })
      await p.append(targetOf('kept'), eventsFrom(0, 2))
      await p.close()
      const dead = spawnSync(process.execPath, ['-e', '0']).pid!
      // What killed writers leave: a log copy of a crashed rewrite beside a live log, and one of a create that never linked.
      const beside = join(dir, 'kept', `.log.jsonl.tmp-${dead}.${startOf(dead)}-0123456789ab`)
      const live = join(dir, 'kept', `.log.jsonl.tmp-${process.pid}.${startOf(process.pid)}-0123456789ab`)
      const orphan = join(dir, 'never', `.log.jsonl.tmp-${dead}.${startOf(dead)}-ba9876543210`)
      writeFileSync(beside, 'a whole log copy')
      writeFileSync(live, 'a log about to be linked')
      mkdirSync(join(dir, 'never'), { mode: 0o700 })
      writeFileSync(orphan, 'a first batch never linked')

      const next = createJsonlPersistence({ root: dir, compression: 'none' })
      await next.append({ ...targetOf('kept'), inheritedEventCount: 0 as never }, eventsFrom(2, 1))
      expect(existsSync(beside)).toBe(false)
      expect(existsSync(live)).toBe(true)
      // A create of the same id takes the directory over and sweeps it first.
      await next.append(targetOf('never'), eventsFrom(0, 1))
      expect(existsSync(orphan)).toBe(false)
      expect((await next.inspect(SessionId('kept'))).events.length).toBe(3)
      await next.close()
    } finally {
      cleanup()
    }
  })
})
