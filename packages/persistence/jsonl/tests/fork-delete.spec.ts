import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { processStart } from '../src/process-identity.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A delete of a fork's source races the fork's creation: the creator
 * registers in the source's `refs/`, checks the source has no `deleting`
 * marker, then publishes its log. A delete that writes its marker after that
 * check finds the registration without a published log. Taking it for a
 * stale one (a fork that never completed) would let the fork appear
 * referencing a deleted source; the creator holds the fork's writer lock
 * while it publishes, so a registration whose lock holder lives keeps the
 * source. The creator here is a real process, killed with SIGKILL.
 */
const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('deleting a source while a fork of it is being created', () => {
  it.each(['zstd', 'none'] as const)(
    'a registration whose creator is alive keeps the source (%s); once the creator died it is stale',
    async (compression) => {
      const { dir, cleanup } = tempDir('dsh-jsonl-fork-delete-')
      cleanups.push(cleanup)
      const p = createJsonlPersistence({ root: dir, compression })
      await p.append(targetOf('src'), eventsFrom(0, 3))
      const creator = spawn('sleep', ['600'], { stdio: 'ignore' })
      cleanups.push(() => creator.kill('SIGKILL'))
      const pid = creator.pid!
      // What the creator has done by the time it publishes: its directory and lock, its registration; no log yet.
      mkdirSync(join(dir, 'kid'), { mode: 0o700 })
      const lock = { pid, host: hostname(), start: processStart(pid), nonce: 'creator', acquiredAt: Date.now() }
      writeFileSync(join(dir, 'kid', 'writer.lock'), `${JSON.stringify(lock)}\n`, { mode: 0o600 })
      mkdirSync(join(dir, 'src', 'refs'), { mode: 0o700 })
      writeFileSync(join(dir, 'src', 'refs', 'kid'), '', { mode: 0o600 })

      await expect(p.delete(SessionId('src'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED', details: { pid } })
      // Nothing to materialize yet: refused the same way.
      await expect(p.delete(SessionId('src'), { materializeDependants: true })).rejects.toMatchObject({
        code: 'SESSION_PERSISTENCE_REFERENCED',
      })
      expect((await p.inspect(SessionId('src'))).events).toHaveLength(3)
      expect(existsSync(join(dir, 'src', 'refs', 'kid'))).toBe(true)

      creator.kill('SIGKILL')
      await once(creator, 'exit')
      // The creator died before publishing: its registration is stale, removed with the source.
      expect(await p.delete(SessionId('src'))).toBe(true)
      expect(existsSync(join(dir, 'src'))).toBe(false)
      await p.close()
    },
  )
})
