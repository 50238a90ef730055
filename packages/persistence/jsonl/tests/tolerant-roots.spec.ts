import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId, SessionLogOffset } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A root with two good sessions, and (outside it) another root holding a session named `elsewhere`. */
async function fixture() {
  const { dir, cleanup } = tempDir('dsh-jsonl-tolerant-')
  cleanups.push(cleanup)
  const root = join(dir, 'root')
  const outside = join(dir, 'outside')
  const p = createJsonlPersistence({ root })
  open.push(p)
  await p.append(targetOf('good-1'), eventsFrom(0, 2))
  await p.append(targetOf('good-2'), eventsFrom(0, 3))
  const other = createJsonlPersistence({ root: outside })
  await other.append(targetOf('elsewhere'), eventsFrom(0, 4))
  await other.close()
  return { root, outside, p }
}

// Thunks: each read starts only when its rejection is awaited, so none rejects unobserved.
const readers = (p: JsonlPersistence, id: string) => [
  () => p.inspect(SessionId(id)),
  () => p.stat(SessionId(id)),
  () => p.verify(SessionId(id)),
  () => p.inspectFrom(SessionId(id), SessionLogOffset(0)),
]

describe('tolerant roots: one bad entry never breaks a root', () => {
  it('a directory where a log should be is a damaged entry; the good sessions still list', async () => {
    const { root, p } = await fixture()
    mkdirSync(join(root, 'bad', 'log.jsonl.zst'), { recursive: true })
    expect((await p.list()).map((r) => r.header.id)).toEqual(['good-1', 'good-2'])
    expect(p.damagedLogs()).toEqual([expect.objectContaining({ id: 'bad', code: 'SESSION_PERSISTENCE_CORRUPT' })])
    for (const read of readers(p, 'bad')) await expect(read()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })

  it('a symlinked session directory is never followed: not listed, reported, refused for reads and writes by id', async () => {
    const { root, outside, p } = await fixture()
    symlinkSync(join(outside, 'elsewhere'), join(root, 'elsewhere'))
    const before = readFileSync(join(outside, 'elsewhere', 'log.jsonl.zst'))
    expect((await p.list()).map((r) => r.header.id)).toEqual(['good-1', 'good-2'])
    expect(p.damagedLogs()).toEqual([expect.objectContaining({ id: 'elsewhere', message: expect.stringMatching(/symbolic link/) })])
    for (const read of readers(p, 'elsewhere')) await expect(read()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    await expect(p.load(SessionId('elsewhere'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    await expect(p.append(targetOf('elsewhere'), eventsFrom(4, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    await expect(p.delete(SessionId('elsewhere'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
    // Nothing outside the root was read into a result, written or locked.
    expect(readFileSync(join(outside, 'elsewhere', 'log.jsonl.zst')).equals(before)).toBe(true)
    expect(readdirSync(join(outside, 'elsewhere'))).toEqual(['log.jsonl.zst'])
  })

  it('a symlinked log is refused the same way', async () => {
    const { root, outside, p } = await fixture()
    mkdirSync(join(root, 'linked'))
    symlinkSync(join(outside, 'elsewhere', 'log.jsonl.zst'), join(root, 'linked', 'log.jsonl.zst'))
    expect((await p.list()).map((r) => r.header.id)).toEqual(['good-1', 'good-2'])
    expect(p.damagedLogs().map((d) => d.id)).toEqual(['linked'])
    for (const read of readers(p, 'linked')) await expect(read()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })

  it('a foreign file named like a session is a damaged entry, not a failure', async () => {
    const { root, p } = await fixture()
    writeFileSync(join(root, 'stray'), 'not a session')
    expect((await p.list()).map((r) => r.header.id)).toEqual(['good-1', 'good-2'])
    expect(p.damagedLogs()).toEqual([expect.objectContaining({ id: 'stray', message: expect.stringMatching(/a file/) })])
    for (const read of readers(p, 'stray')) await expect(read()).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })
})

describe('the lock path', () => {
  it('stale lock temp files of dead processes are removed on the next acquire; a live process keeps its own', async () => {
    const { root, p } = await fixture()
    await p.close()
    const dir = join(root, 'good-1')
    const dead = join(dir, '.writer.lock.tmp-2147483646-0123456789ab')
    const live = join(dir, `.writer.lock.tmp-${process.ppid}-0123456789ab`)
    writeFileSync(dead, '{}')
    writeFileSync(live, '{}')
    const next = createJsonlPersistence({ root })
    open.push(next)
    await next.append(targetOf('good-1'), eventsFrom(2, 1))
    expect(existsSync(dead)).toBe(false)
    expect(existsSync(live)).toBe(true)
  })
})
