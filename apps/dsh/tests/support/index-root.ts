import { execFile } from 'node:child_process'
import { lstatSync, readdirSync, readlinkSync } from 'node:fs'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import { createHost, derivedPaths } from '@dsh/host'
import { SessionLogOffset, SessionSeq } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { headerOf } from '@dsh/test-kit'

// Shared by the index e2e tests: the built CLI as a user runs it, roots
// written with and without an index, and what a directory holds.

const bin = join(import.meta.dirname, '..', '..', 'dist', 'bin.cjs')
const run = promisify(execFile)

export interface DshRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the built CLI in a new process (no store from the environment). */
export async function dsh(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<DshRun> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '', ...env },
    })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** The session ids of `dsh sessions --json` output. */
export function listedIds(stdout: string): string[] {
  return (JSON.parse(stdout) as { sessions: Array<{ header: { id: string } }> }).sessions.map((r) => r.header.id)
}

/** The session ids of `dsh search --json` output (session hits). */
export function hitIds(stdout: string): string[] {
  return (JSON.parse(stdout) as { hits: Array<{ record: { header: { id: string } } }> }).hits.map((h) => h.record.header.id).sort()
}

/** The id of the `i`th session a test writes under `prefix`. */
export function sessionId(prefix: string, i: number): string {
  return `${prefix}${String(i).padStart(4, '0')}`
}

/**
 * Writes `count` sessions (`<prefix>0000`…), each with one message holding
 * `word`, through a writing host: the index is built and kept current, and
 * left at rest when the host closes.
 */
export async function writeIndexed(root: string, prefix: string, count: number, word: string): Promise<void> {
  const host = await createHost({ root })
  try {
    for (let i = 0; i < count; i++) {
      const session = host.sessions.create({ id: sessionId(prefix, i), cwd: '/work' })
      session.append('user/message', { text: `${word} note ${i} of ${prefix}` })
      await host.sessions.dispose(session.id)
    }
  } finally {
    await host.dispose()
  }
}

/** Writes `count` sessions through persistence alone: the logs and the change feed move, the index does not. */
export async function writeUnindexed(root: string, prefix: string, count: number, word: string): Promise<void> {
  const persistence = createJsonlPersistence({ root })
  try {
    for (let i = 0; i < count; i++) {
      const header = headerOf(sessionId(prefix, i), { createdAt: Date.now(), cwd: '/work' })
      await persistence.append({ header, inheritedEventCount: SessionLogOffset(0) }, [
        { type: 'user/message', seq: SessionSeq(0), time: Date.now(), data: { text: `${word} note ${i} of ${prefix}` } },
      ])
    }
  } finally {
    await persistence.close()
  }
}

/** The database file of the root's index: the generation its path links to (or the path, when it is a plain file). */
export function indexGeneration(root: string): string {
  const path = derivedPaths(root).index
  return lstatSync(path).isSymbolicLink() ? join(path, '..', readlinkSync(path)) : path
}

/**
 * Every entry under `dir` (recursive, links not followed) with its kind,
 * size, mtime and inode: equal listings mean no file changed, appeared or
 * went. A directory's own mtime is left out (a file created and removed
 * again moves it).
 */
export function snapshot(dir: string, keep: (name: string) => boolean = () => true): string[] {
  const out: string[] = []
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name)
      const name = relative(dir, path)
      if (!keep(name)) continue
      const stats = lstatSync(path)
      const kind = entry.isSymbolicLink() ? `link->${readlinkSync(path)}` : entry.isDirectory() ? 'dir' : 'file'
      out.push(entry.isDirectory() ? `${name} dir` : `${name} ${kind} ${stats.size} ${stats.mtimeMs} ino${stats.ino}`)
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(dir)
  return out.sort()
}
