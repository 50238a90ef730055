import { chmodSync, chownSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { runNodeAs } from '@dsh/tooling/as-user'
import { describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A session directory the reading user may not open (EACCES) is one damaged
 * entry, never a failed root. Root bypasses permission checks, so the reader
 * runs as the unprivileged `nobody` user (`runuser`; we run as root here and
 * in CI — elsewhere the test fails with the reason, it is never skipped),
 * from a world-readable copy of the worker and the package it imports, so a
 * checkout inside a directory nobody may traverse runs it too.
 */
const worker = join(dirname(fileURLToPath(import.meta.url)), 'workers', 'unprivileged-reader.mjs')
const NOBODY = 65534

describe('a session directory the reader may not open', () => {
  // Like every per-entry fault (a directory where a log should be, a loop),
  // no permission makes a damaged entry: SESSION_PERSISTENCE_CORRUPT naming the errno.
  it('is reported as a damaged entry naming EACCES; the good sessions list and read', async () => {
    if (process.getuid?.() !== 0)
      throw new Error('This test starts a reader as the unprivileged user nobody with runuser: run it as root (CI does).')
    const { dir, cleanup } = tempDir('dsh-jsonl-eacces-')
    try {
      const root = join(dir, 'root')
      const writer = createJsonlPersistence({ root })
      await writer.append(targetOf('good-1'), eventsFrom(0, 2))
      await writer.append(targetOf('good-2'), eventsFrom(0, 3))
      await writer.append(targetOf('locked'), eventsFrom(0, 4))
      await writer.append(targetOf('sealed'), eventsFrom(0, 1))
      await writer.close()
      // The whole tree belongs to nobody, except one session directory that
      // stays root's own and private (0700): nobody cannot open it.
      const own = (path: string): void => {
        chownSync(path, NOBODY, NOBODY)
        for (const entry of readdirSync(path, { withFileTypes: true })) {
          const child = join(path, entry.name)
          if (entry.isDirectory()) own(child)
          else chownSync(child, NOBODY, NOBODY)
        }
      }
      own(dir)
      const locked = readdirSync(root).find((name) => name.includes('locked'))
      expect(locked).toBeDefined()
      const lockedDir = join(root, locked!)
      chownSync(lockedDir, 0, 0)
      chmodSync(lockedDir, 0o700)
      // And one log file that stays root's own (0600) in a directory nobody may read.
      const sealedDir = join(root, readdirSync(root).find((name) => name.includes('sealed'))!)
      for (const name of readdirSync(sealedDir)) if (name.startsWith('log.')) chownSync(join(sealedDir, name), 0, 0)
      const before = readdirSync(root).sort()

      const out = runNodeAs('nobody', worker, [root, 'locked'], {
        packages: ['@dsh/session-persistence-jsonl'],
        resolveFrom: dirname(worker),
      })
      const result = JSON.parse(out.trim().split('\n').at(-1)!)
      expect(result.uid).toBe(NOBODY)
      expect(result.listed).toEqual(['good-1', 'good-2'])
      expect(result.damaged.sort((a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id))).toEqual([
        { id: 'locked', code: 'SESSION_PERSISTENCE_CORRUPT', message: expect.stringContaining('EACCES') },
        // An unreadable log names its remedy (owner and mode), not a restore from a backup.
        {
          id: 'sealed',
          code: 'SESSION_PERSISTENCE_CORRUPT',
          message: expect.stringMatching(/cannot be read by this process \(EACCES\).*mode 0600/),
        },
      ])
      expect(result.reads).toEqual({ inspect: 'SESSION_PERSISTENCE_CORRUPT', stat: 'SESSION_PERSISTENCE_CORRUPT' })
      expect(result.good).toBe(3)
      // A read-only reader wrote nothing into the root.
      expect(readdirSync(root).sort()).toEqual(before)
    } finally {
      cleanup()
    }
  })
})
