import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const ID = 'locked' as SessionId
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function backend(root: string, options: { maxOpenWriters?: number } = {}): JsonlPersistence {
  const p = createJsonlPersistence({ root, ...options })
  open.push(p)
  return p
}

function root(): string {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  return dir
}

function lockFileOf(p: JsonlPersistence, id: string): string {
  return join(dirname(p.logPath(id)), 'writer.lock')
}

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
  return Number(child.stdout)
}

function writeLock(file: string, owner: Record<string, unknown>): void {
  writeFileSync(file, `${JSON.stringify({ host: hostname(), start: null, nonce: `n-${Math.random()}`, acquiredAt: 0, ...owner })}\n`)
}

describe('one writer per session', () => {
  it('a second backend over the same root gets LOCKED for append, load and delete until the first closes', async () => {
    const dir = root()
    const first = backend(dir)
    const second = backend(dir)
    await first.append(targetOf(ID), eventsFrom(0, 2))
    await expect(second.append(targetOf(ID), eventsFrom(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(second.load(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    await expect(second.delete(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    // Reads need no lock.
    expect((await second.inspect(ID)).events).toHaveLength(2)
    await first.close()
    expect((await second.append(targetOf(ID), eventsFrom(2, 1))).nextSeq).toBe(3)
  })

  it("a dead holder's lock is taken over", async () => {
    const dir = root()
    const writer = backend(dir)
    await writer.append(targetOf(ID), eventsFrom(0, 2))
    const lockFile = lockFileOf(writer, ID)
    await writer.close()
    writeLock(lockFile, { pid: deadPid() })
    const next = backend(dir)
    expect((await next.load(ID)).events).toHaveLength(2)
    expect(JSON.parse(readFileSync(lockFile, 'utf8'))).toMatchObject({ pid: process.pid })
  })

  it('a live holder on this host, or any holder on another host, keeps the lock', async () => {
    const dir = root()
    const writer = backend(dir)
    await writer.append(targetOf(ID), eventsFrom(0, 2))
    const lockFile = lockFileOf(writer, ID)
    await writer.close()
    const next = backend(dir)
    writeLock(lockFile, { pid: process.ppid })
    await expect(next.append(targetOf(ID), eventsFrom(2, 1))).rejects.toMatchObject({
      code: 'SESSION_PERSISTENCE_LOCKED',
      details: { pid: process.ppid },
    })
    writeLock(lockFile, { pid: deadPid(), host: 'another-host.example' })
    await expect(next.load(ID)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_LOCKED' })
    expect(existsSync(lockFile)).toBe(true)
  })

  it('a pid reused by a later process does not keep a stale lock alive (Linux start time)', async () => {
    if (!existsSync('/proc/self/stat')) return
    const dir = root()
    const writer = backend(dir)
    await writer.append(targetOf(ID), eventsFrom(0, 1))
    const lockFile = lockFileOf(writer, ID)
    await writer.close()
    // Our parent is alive, but it started at another time than the recorded holder.
    writeLock(lockFile, { pid: process.ppid, start: '1' })
    expect((await backend(dir).load(ID)).events).toHaveLength(1)
  })

  it('appends within one backend are serialized per session', async () => {
    const dir = root()
    const p = backend(dir)
    await p.append(targetOf(ID), eventsFrom(0, 1))
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => p.append(targetOf(ID), eventsFrom(1 + i, 1))))
    expect(results.map((r) => r.nextSeq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2))
    expect((await p.inspect(ID)).events.map((e) => e.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i))
  })

  it('beyond maxOpenWriters the least recently used sessions release their locks, and still append later', async () => {
    const dir = root()
    const p = backend(dir, { maxOpenWriters: 2 })
    const ids = ['s1', 's2', 's3', 's4', 's5']
    for (const id of ids) await p.append(targetOf(id), eventsFrom(0, 2))
    await p.stat('s5' as SessionId)
    const held = ids.filter((id) => existsSync(lockFileOf(p, id)))
    expect(held.length).toBeLessThanOrEqual(2)
    expect(held).toContain('s5')
    // A released session can be taken by another backend meanwhile…
    const other = backend(dir)
    await other.append(targetOf('s1'), eventsFrom(2, 1))
    await other.close()
    // …and the first backend re-reads the log before appending again.
    await expect(p.append(targetOf('s1'), eventsFrom(2, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
    expect((await p.append(targetOf('s1'), eventsFrom(3, 1))).nextSeq).toBe(4)
  })

  it('close releases every lock; delete removes the session directory', async () => {
    const dir = root()
    const p = backend(dir)
    await p.append(targetOf('a'), eventsFrom(0, 1))
    await p.append(targetOf('b'), eventsFrom(0, 1))
    expect(await p.delete('a' as SessionId)).toBe(true)
    expect(readdirSync(dir).sort()).toEqual(['b', 'changes.journal', 'dsh-persistence.json'])
    await p.close()
    expect(readdirSync(join(dir, 'b'))).toEqual(['log.jsonl.zst'])
    unlinkSync(join(dir, 'b', 'log.jsonl.zst'))
  })
})
