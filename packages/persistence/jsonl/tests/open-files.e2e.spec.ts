import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { publishNew } from '../src/fs-io.js'
import { MAX_OPENING } from '../src/writers.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const here = dirname(fileURLToPath(import.meta.url))
const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

beforeAll(() => {
  // The worker runs the built package (it imports it by name, resolved to dist/).
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: pnpm --filter @dsh/session-persistence-jsonl... build')
})

function root(): string {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  return join(dir, 'root')
}

const openFiles = (): number => readdirSync('/proc/self/fd').length

/** Runs `command` through bash; resolves with its exit code and output once it has exited. */
function bash(command: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', `${command} "$@"`, 'bash', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('a burst of creates under a low limit of open files', () => {
  it('stores every event of many more sessions than the process may open files, and leaves no directory without its log', async () => {
    const dir = root()
    const count = 1000
    // 256 descriptors: fewer than the writers kept by default (256 sessions, two each), far fewer than the sessions.
    const run = await bash(
      `ulimit -n 256; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(here, 'workers', 'burst-creator.mjs'))}`,
      [dir, String(count)],
    )
    expect(run.stderr).not.toMatch(/Unhandled|unhandled/)
    expect({ code: run.code, stdout: run.stdout.trim() }).toEqual({ code: 0, stdout: 'done' })
    const persistence = createJsonlPersistence({ root: dir })
    try {
      expect((await persistence.list()).length).toBe(count)
      for (let i = 0; i < count; i++) {
        const observed = await persistence.inspect(SessionId(`b${i}`))
        expect(observed.events.map((e) => [e.seq, e.type, e.data])).toEqual([[0, 'user/message', { text: `hi ${i}` }]])
      }
      expect(await persistence.logLessDirs()).toEqual([])
      const left = readdirSync(dir).filter((name) => existsSync(join(dir, name, 'writer.lock')))
      expect(left).toEqual([])
    } finally {
      await persistence.close()
    }
  })
})

describe('open files during a burst', () => {
  it('stay near two per kept writer plus a few per open in progress, however many sessions are created at once', async () => {
    const maxOpenWriters = 8
    const persistence = createJsonlPersistence({ root: root(), maxOpenWriters })
    try {
      await persistence.append(targetOf('warm'), eventsFrom(0, 1)) // the journal and the root are open from here on
      const base = openFiles()
      let peak = base
      const sample = (): void => {
        peak = Math.max(peak, openFiles())
      }
      const sampler = setInterval(sample, 1)
      const count = 600
      try {
        await Promise.all(Array.from({ length: count }, (_, i) => persistence.append(targetOf(`s${i}`), eventsFrom(0, 1)).finally(sample)))
      } finally {
        clearInterval(sampler)
      }
      // Kept writers (lock and log) and as many being released behind the opens; per open in progress its lock, the
      // directory fsynced for the new entry, the new log's temporary file, the handle on it and its directory; a few more.
      const bound = 2 * maxOpenWriters + 2 * maxOpenWriters + 5 * Math.min(maxOpenWriters, MAX_OPENING) + 8
      console.log(`open files during a burst of ${count} creates: ${peak - base} over ${base} (bound ${bound})`)
      expect(peak - base).toBeLessThanOrEqual(bound)
      expect((await persistence.list()).length).toBe(count + 1)
      // A stat of every session at once (an index reconciling a root) holds a few logs open at a time.
      peak = openFiles()
      const statBase = peak
      const revisions = await Promise.all(Array.from({ length: count }, (_, i) => persistence.stat(SessionId(`s${i}`)).finally(sample)))
      expect(revisions.every((r) => r !== undefined)).toBe(true)
      expect(peak - statBase).toBeLessThanOrEqual(16)
    } finally {
      await persistence.close()
    }
  })
})

describe('publishing a log', () => {
  it('observes what must be durable first even when the temporary file cannot be made (no unhandled rejection)', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason)
    }
    process.on('unhandledRejection', onUnhandled)
    try {
      const dir = root() // never created: opening anything in it fails before the publish awaits
      const rootSync = Promise.reject(Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' }))
      await expect(publishNew(join(dir, 'log.jsonl.zst'), Buffer.from('x'), rootSync)).rejects.toMatchObject({ code: 'ENOENT' })
      await new Promise((resolve) => setTimeout(resolve, 20))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })
})
