import { randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { fill, mountTmpfs, unmount } from '@dsh/tooling/tmpfs'
import { describe, expect, it } from 'vitest'
import { event, eventsFrom, targetOf, tempDir } from './helpers.js'

/** Everything under `dir`, relative, sorted (temporary and lock files included). */
function listing(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).sort()
}

/** A batch far larger than what is left (random text barely compresses). */
function bigBatch(first: number): ReturnType<typeof eventsFrom> {
  return [event(first, 'tool/result', { output: randomBytes(768 * 1024).toString('base64') })]
}

/**
 * A full disk, for real: a fresh 2 MiB tmpfs mounted for the test
 * (`@dsh/tooling/tmpfs`). Creating a session, taking a writer lock and
 * appending each reject with `SESSION_PERSISTENCE_IO`, leave no directory,
 * lock or temporary file behind, and lose no acknowledged event.
 */
describe('a full disk (ENOSPC on a 2 MiB tmpfs)', () => {
  it('create, lock and append reject with SESSION_PERSISTENCE_IO, leave no directory or lock, and lose nothing acknowledged', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-enospc-')
    const mount = join(dir, 'mnt')
    mkdirSync(mount, { mode: 0o700 })
    mountTmpfs(mount, '2m')
    const open: JsonlPersistence[] = []
    try {
      const root = join(mount, 'root')
      const setup = createJsonlPersistence({ root })
      await setup.append(targetOf('kept'), eventsFrom(0, 20))
      await setup.close() // releases the lock on 'kept'
      const holder = createJsonlPersistence({ root })
      open.push(holder)
      await holder.append(targetOf('held'), eventsFrom(0, 10)) // keeps its lock and open log

      const before = listing(root)
      const filled = fill(join(mount, 'filler'))
      expect(filled).toBeGreaterThan(1024 * 1024) // the disk really was nearly empty, then full

      // Creating a session: typed, and its directory is gone again.
      const fresh = createJsonlPersistence({ root })
      open.push(fresh)
      await expect(fresh.append(targetOf('new-one'), eventsFrom(0, 3))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO' })
      await expect(fresh.append(targetOf('new-two'), bigBatch(0))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO' })
      // Taking the writer lock of an existing session (its lock file cannot be written).
      await expect(fresh.append(targetOf('kept'), eventsFrom(20, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO' })
      // Appending under a lock already held: the failed batch is truncated back.
      await expect(holder.append(targetOf('held'), bigBatch(10))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_IO' })

      const after = listing(root).filter((name) => name !== 'changes.journal')
      expect(after).toEqual(before.filter((name) => name !== 'changes.journal'))
      expect(after).not.toContain('new-one')
      expect(after).not.toContain('new-two')
      expect(after.filter((name) => name.includes('.tmp-') || name.endsWith('writer.lock'))).toEqual(['held/writer.lock'])

      // Space again: every acknowledged event is there, no torn bytes, and the writers go on.
      rmSync(join(mount, 'filler'))
      await holder.append(targetOf('held'), eventsFrom(10, 2))
      await fresh.append(targetOf('kept'), eventsFrom(20, 2))
      await fresh.append(targetOf('new-one'), eventsFrom(0, 3))
      const reader = createJsonlPersistence({ root, readOnly: true })
      open.push(reader)
      expect((await reader.list()).map((r) => r.header.id).sort()).toEqual(['held', 'kept', 'new-one'])
      for (const [id, events] of [
        ['held', 12],
        ['kept', 22],
        ['new-one', 3],
      ] as const) {
        const verified = await reader.verify(SessionId(id))
        expect({ id, events: verified.events, tornBytes: verified.tornBytes }).toEqual({ id, events, tornBytes: 0 })
        expect((await reader.inspect(SessionId(id))).events.map((e) => e.seq)).toEqual(Array.from({ length: events }, (_, i) => i))
      }
    } finally {
      for (const p of open) await p.close().catch(() => undefined)
      unmount(mount)
      cleanup()
    }
  })
})
