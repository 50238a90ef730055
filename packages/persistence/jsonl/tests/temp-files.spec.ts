import { spawnSync } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * Removing a session directory (delete, or a create that lost the lock race)
 * removes the temporary files of dead processes only: a live process's
 * `.log.jsonl.tmp-<pid>-…` may be about to be linked (two writers racing to
 * create one session once failed with ENOENT on link because the loser
 * removed the winner's temporary log).
 */
describe('temporary files of other writers', () => {
  it('survive the removal of their directory while their process lives; a dead process’s are removed', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-temps-')
    try {
      const p = createJsonlPersistence({ root: dir, compression: 'none' })
      await p.append(targetOf('gone'), eventsFrom(0, 2))
      await p.append(targetOf('busy'), eventsFrom(0, 2))
      const dead = spawnSync(process.execPath, ['-e', '0']).pid! // exited: no such process any more
      const deadTemp = join(dir, 'gone', `.log.jsonl.tmp-${dead}-0123456789ab`)
      const liveTemp = join(dir, 'busy', `.log.jsonl.tmp-${process.pid}-0123456789ab`)
      writeFileSync(deadTemp, 'half a log')
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
})
