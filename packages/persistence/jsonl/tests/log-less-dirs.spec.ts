import { type ChildProcess, spawn } from 'node:child_process'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { processStart } from '../src/process-identity.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function opened(root: string, readOnly = false): JsonlPersistence {
  const p = createJsonlPersistence({ root, readOnly })
  cleanups.push(() => p.close())
  return p
}

/** Every entry under `root` with its size and mtime: a read changes none. */
function snapshot(root: string): Map<string, string> {
  const entries = new Map<string, string>()
  for (const name of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
    const stats = statSync(join(root, name))
    entries.set(name, `${stats.size}:${stats.mtimeMs}`)
  }
  return entries
}

/** A live process of this host (not this one), killed after the test. */
async function liveProcess(): Promise<ChildProcess & { pid: number }> {
  const child = spawn(process.execPath, ['-e', 'process.stdin.resume()'], { stdio: ['pipe', 'ignore', 'ignore'] })
  await new Promise<void>((resolve, reject) => child.once('spawn', resolve).once('error', reject))
  cleanups.push(() => stop(child))
  return child as ChildProcess & { pid: number }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGKILL')
  await exited
}

describe('logLessDirs: session directories without a log', () => {
  it('names a directory whose log was removed outside dsh, with or without a stale lock; not a live creation, a delete through dsh or a deleting marker; reads only', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-logless-')
    cleanups.push(cleanup)
    const root = join(dir, 'root')
    const writer = opened(root)
    for (const id of ['kept', 'removed', 'stale-lock', 'creating', 'deleting', 'deleted'])
      await writer.append(targetOf(id), eventsFrom(0, 2))
    expect(await writer.delete(SessionId('deleted'))).toBe(true)
    await writer.close()
    const logOf = (id: string) => join(root, id, 'log.jsonl.zst')
    for (const id of ['removed', 'stale-lock', 'creating', 'deleting']) rmSync(logOf(id))
    // A creator that is still running holds its lock; one that died left its lock behind.
    const creator = await liveProcess()
    const lock = (pid: number) =>
      `${JSON.stringify({ pid, host: hostname(), start: processStart(pid), nonce: `n${pid}`, acquiredAt: Date.now() })}\n`
    const creatorLock = lock(creator.pid)
    writeFileSync(join(root, 'creating', 'writer.lock'), creatorLock)
    const dead = await liveProcess()
    const deadLock = lock(dead.pid)
    await stop(dead)
    writeFileSync(join(root, 'stale-lock', 'writer.lock'), deadLock)
    // A delete through dsh that crashed after removing the log leaves its marker.
    writeFileSync(join(root, 'deleting', 'deleting'), 'crashed deleter\n')

    const before = snapshot(root)
    const reader = opened(root, true)
    const found = await reader.logLessDirs()
    expect(found.map((entry) => [entry.id, entry.code])).toEqual([
      ['removed', 'SESSION_PERSISTENCE_NOT_FOUND'],
      ['stale-lock', 'SESSION_PERSISTENCE_NOT_FOUND'],
    ])
    expect(found[0]!.dir).toBe(join(root, 'removed'))
    expect(found[0]!.message).toMatch(
      /^The session directory .*removed holds no log \(log\.jsonl\.zst\) .*removed outside dsh.*Restore the log from a backup/,
    )
    // `list()` leaves them out, as it always has: a listing shows only sessions with a log.
    expect((await reader.list()).map((record) => record.header.id)).toEqual(['kept'])
    expect(snapshot(root)).toEqual(before)
    expect(readFileSync(join(root, 'creating', 'writer.lock'), 'utf8')).toBe(creatorLock)

    // Once the creator is gone, its directory is one without a log too.
    await stop(creator)
    expect((await reader.logLessDirs()).map((entry) => entry.id)).toEqual(['creating', 'removed', 'stale-lock'])
  })
})
